//! The dashboard's HTML, rendered on the server from the [`Board`] and the units' [`Statuses`].
//! Everything that comes from a unit, git or the cluster (names, refs, object names, messages)
//! goes through [`escape`]; the page's only script and style are the embedded assets, which the
//! Content-Security-Policy admits by hash ([`script_hash`], [`style_hash`]).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::LazyLock;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::daemon::trigger::{Statuses, UnitStatus};
use crate::observe::board::{Board, SyncEntry, UnitInfo, UnitRecord};

/// The page's one script: opens the live stream and swaps the live part in.
pub const SCRIPT: &str = include_str!("assets/dashboard.js");

/// The page's style sheet.
pub const STYLE: &str = include_str!("assets/dashboard.css");

/// `'sha256-<base64>'` of [`SCRIPT`], for `script-src` (CSP Level 2 hash sources).
pub fn script_hash() -> &'static str {
    static HASH: LazyLock<String> = LazyLock::new(|| csp_hash(SCRIPT));
    &HASH
}

/// `'sha256-<base64>'` of [`STYLE`], for `style-src`.
pub fn style_hash() -> &'static str {
    static HASH: LazyLock<String> = LazyLock::new(|| csp_hash(STYLE));
    &HASH
}

fn csp_hash(text: &str) -> String {
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes())))
}

/// `text` safe in HTML text and in quoted attribute values: `&`, `<`, `>`, `"` and `'` as
/// character references (the OWASP XSS prevention rules for those two contexts), by the
/// `html-escape` crate.
pub fn escape(text: &str) -> String {
    html_escape::encode_quoted_attribute(text).into_owned()
}

/// A whole page: `title`, the live part `live` (its updates streamed from `events`).
pub fn page(title: &str, events: &str, live: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · gitward</title><style>{STYLE}</style></head>\
         <body><header><a href=\"/\">gitward</a><span>{title}</span><span class=\"live\"></span></header>\
         <main id=\"live\" data-events=\"{events}\">{live}</main><script>{SCRIPT}</script></body></html>\n",
        title = escape(title),
        events = escape(events),
    )
}

/// The login form, with `note` above it (escaped).
pub fn login(note: &str) -> String {
    let form = format!(
        "<h1>Sign in</h1><p class=\"muted\">{}</p><form method=\"post\" action=\"/login\">\
         <label for=\"token\">Dashboard token</label>\
         <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required>\
         <button type=\"submit\">Sign in</button></form>",
        escape(note)
    );
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign in · gitward</title>\
         <style>{STYLE}</style></head><body><header><a href=\"/\">gitward</a></header><main>{form}</main></body></html>\n"
    )
}

/// An instant as RFC 3339 in UTC, to the second.
fn time(at: jiff::Timestamp) -> String {
    jiff::Timestamp::from_second(at.as_second()).map_or_else(|_| at.to_string(), |t| t.to_string())
}

/// The short revision of a unit: the board's, else the status's (a record from before the
/// dashboard saw a sync), else `—`.
fn revision(record: Option<&UnitRecord>, status: Option<&UnitStatus>) -> String {
    record
        .and_then(|r| r.revision.clone())
        .or_else(|| status?.last_revision.as_ref().map(|r| crate::source::Revision(r.clone()).short().to_owned()))
        .unwrap_or_else(|| "—".to_owned())
}

fn result_cell(result: Option<&str>, waiting: bool) -> String {
    match (result, waiting) {
        (_, true) => "<span class=\"result-progressing\">waiting for health</span>".to_owned(),
        (Some(r), false) => format!("<span class=\"result-{0}\">{0}</span>", escape(r)),
        (None, false) => "<span class=\"muted\">not synced yet</span>".to_owned(),
    }
}

/// The live part of `/`: a row per unit.
pub fn index(board: &Board, status: &Statuses) -> String {
    let (units, records) = board.snapshot();
    let statuses = status.snapshot();
    let mut out = String::from(
        "<h1>Units</h1><table id=\"units\"><thead><tr><th>Unit</th><th>Cluster</th><th>Ref</th>\
         <th>Revision</th><th>Last result</th><th class=\"num\">Healthy</th><th class=\"num\">Progressing</th>\
         <th class=\"num\">Degraded</th><th>Last apply</th><th>Suspended</th></tr></thead><tbody>",
    );
    for unit in &units {
        row(&mut out, unit, records.get(&unit.name), statuses.get(&unit.name));
    }
    if units.is_empty() {
        out.push_str("<tr><td colspan=\"10\" class=\"muted\">No units configured.</td></tr>");
    }
    out.push_str("</tbody></table>");
    out
}

fn row(out: &mut String, unit: &UnitInfo, record: Option<&UnitRecord>, status: Option<&UnitStatus>) {
    let name = escape(&unit.name);
    let health = record.map(|r| r.health).unwrap_or_default();
    let applied = record.and_then(|r| r.applied_at).map_or_else(|| "—".to_owned(), time);
    let suspended = status.is_some_and(|s| s.suspended);
    let waiting = status.is_some_and(|s| s.waiting);
    let _ = write!(
        out,
        "<tr data-unit=\"{name}\"><td><a href=\"/units/{name}\">{name}</a></td><td>{}</td><td><code>{}</code></td>\
         <td class=\"rev\">{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td>{applied}</td><td>{}</td></tr>",
        escape(&unit.cluster),
        escape(&unit.reference),
        escape(&revision(record, status)),
        result_cell(record.and_then(|r| r.result), waiting),
        health.healthy,
        health.progressing,
        health.degraded,
        if suspended { "<span class=\"suspended\">suspended</span>" } else { "no" },
    );
}

/// The live part of `/units/<name>`; `None` when no such unit is configured.
pub fn unit(board: &Board, status: &Statuses, name: &str) -> Option<String> {
    let (units, records) = board.snapshot();
    let unit = units.into_iter().find(|u| u.name == name)?;
    let statuses: BTreeMap<String, UnitStatus> = status.snapshot();
    let record = records.get(name);
    let status = statuses.get(name);
    let mut out = format!("<h1>{}</h1><dl class=\"facts\">", escape(name));
    let mut fact = |term: &str, value: String| {
        let _ = write!(out, "<dt>{term}</dt><dd>{value}</dd>");
    };
    fact("Cluster", escape(&unit.cluster));
    fact("Ref", format!("<code>{}</code>", escape(&unit.reference)));
    fact("Revision", format!("<span class=\"rev\" id=\"revision\">{}</span>", escape(&revision(record, status))));
    fact("Last result", result_cell(record.and_then(|r| r.result), status.is_some_and(|s| s.waiting)));
    fact("Last apply", record.and_then(|r| r.applied_at).map_or_else(|| "—".to_owned(), time));
    fact("Suspended", if status.is_some_and(|s| s.suspended) { "yes".into() } else { "no".into() });
    if let Some(error) = record.and_then(|r| r.error.as_ref()) {
        fact("Last error", format!("<span class=\"error\">{}</span>", escape(error)));
    }
    out.push_str("</dl>");
    unhealthy(&mut out, record);
    syncs(&mut out, record);
    drift(&mut out, record);
    Some(out)
}

/// The drift self-heal corrected in the recent syncs, newest first: per object, the masked
/// diff of the live object before the heal against what it applied.
fn drift(out: &mut String, record: Option<&UnitRecord>) {
    out.push_str("<h2>Drift</h2>");
    let healed: Vec<&SyncEntry> =
        record.map(|r| r.syncs.iter().filter(|s| !s.drift.is_empty()).collect()).unwrap_or_default();
    if healed.is_empty() {
        out.push_str(
            "<p class=\"muted\">No drift corrected in the recent syncs. <code>gitward diff</code> prints the \
             masked diff of the cluster against git.</p>",
        );
        return;
    }
    out.push_str("<div id=\"drift\">");
    for sync in healed {
        for (object, diff) in &sync.drift {
            let _ = write!(
                out,
                "<h3><code>{}</code> <span class=\"muted\">corrected {}</span></h3><pre class=\"diff\">{}</pre>",
                escape(object),
                time(sync.at),
                escape(diff)
            );
        }
    }
    out.push_str("</div>");
}

fn unhealthy(out: &mut String, record: Option<&UnitRecord>) {
    let Some(record) = record.filter(|r| r.unhealthy_total > 0) else {
        out.push_str("<h2>Unhealthy objects</h2><p class=\"muted\">None after the last sync.</p>");
        return;
    };
    let _ = write!(
        out,
        "<h2>Unhealthy objects ({})</h2><table id=\"unhealthy\"><thead><tr><th>Object</th><th>State</th>\
         <th>Reason</th></tr></thead><tbody>",
        record.unhealthy_total
    );
    for u in &record.unhealthy {
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(&u.object),
            escape(&u.state),
            escape(&u.reason)
        );
    }
    out.push_str("</tbody></table>");
    if record.unhealthy_total > record.unhealthy.len() {
        let more = record.unhealthy_total - record.unhealthy.len();
        let _ = write!(out, "<p class=\"muted\">{more} more: see <code>gitward status</code>.</p>");
    }
}

fn syncs(out: &mut String, record: Option<&UnitRecord>) {
    out.push_str("<h2>Recent syncs</h2>");
    let Some(record) = record.filter(|r| !r.syncs.is_empty()) else {
        out.push_str("<p class=\"muted\">None since the daemon started.</p>");
        return;
    };
    out.push_str(
        "<table id=\"syncs\"><thead><tr><th>Time</th><th>Trigger</th><th>Revision</th><th class=\"num\">Duration</th>\
         <th class=\"num\">Created</th><th class=\"num\">Configured</th><th class=\"num\">Drift-corrected</th>\
         <th class=\"num\">Unchanged</th><th class=\"num\">Pruned</th><th class=\"num\">Failed</th><th>Result</th></tr>\
         </thead><tbody>",
    );
    for s in &record.syncs {
        sync_row(out, s);
    }
    out.push_str("</tbody></table>");
}

fn sync_row(out: &mut String, s: &SyncEntry) {
    let _ = write!(
        out,
        "<tr><td>{}</td><td>{}</td><td class=\"rev\">{}</td><td class=\"num\">{:.1}s</td>",
        time(s.at),
        escape(s.trigger),
        escape(&s.revision),
        s.duration.as_secs_f64()
    );
    for n in s.counts {
        let _ = write!(out, "<td class=\"num\">{n}</td>");
    }
    let _ = write!(out, "<td>{}", result_cell(Some(s.result), false));
    if let Some(error) = &s.error {
        let _ = write!(out, "<br><span class=\"error\">{}</span>", escape(error));
    }
    out.push_str("</td></tr>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_untrusted_text_is_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;&quot;"
        );
    }

    #[test]
    fn the_page_carries_exactly_the_script_whose_hash_the_policy_admits() {
        let html = page("units", "/events", "");
        let script = html.split("<script>").nth(1).and_then(|s| s.split("</script>").next()).unwrap();
        assert_eq!(csp_hash(script), script_hash());
        let style = html.split("<style>").nth(1).and_then(|s| s.split("</style>").next()).unwrap();
        assert_eq!(csp_hash(style), style_hash());
    }

    #[test]
    fn a_unit_name_with_markup_is_escaped_in_the_table() {
        let board = Board::default();
        let mut unit = crate::config::SyncUnit::new("x", "/repo");
        unit.name = "<img src=x onerror=alert(1)>".into();
        unit.reference = "\"><b>".into();
        board.set_units(&[unit]);
        let html = index(&board, &Statuses::default());
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "{html}");
    }
}
