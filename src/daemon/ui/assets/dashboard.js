// gitward dashboard: replaces the page's live part with each update the server sends (Server-Sent
// Events); the server renders and escapes it. No other script runs on the page.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  var source = new EventSource(live.getAttribute("data-events"));
  source.addEventListener("update", function (e) {
    live.innerHTML = e.data;
    document.body.setAttribute("data-updates", String(Number(document.body.getAttribute("data-updates") || 0) + 1));
  });
  source.onopen = function () { document.body.setAttribute("data-live", "on"); };
  source.onerror = function () { document.body.setAttribute("data-live", "off"); };
})();
