//! The dashboard (`[daemon.ui]`): in a real headless Chromium driven over WebDriver against
//! `gitward run` on the real apiserver and a real bare repository — each unit and its revision
//! after the page's script ran, and a push followed live without a reload — and over plain
//! HTTP: the token (bearer, login form and cookie), the loopback-only open mode against a
//! rebound host name, and the security headers of every dashboard response.
//! No object's status is written here: `/status` is the dashboard's own page, read as a client would.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use gitward::daemon::http::{self, HttpState};
use gitward::daemon::metrics::Metrics;
use gitward::daemon::trigger::Statuses;
use gitward::daemon::ui::{Board, Dashboard, Token};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

/// Where screenshots go: `$GITWARD_TEST_OUTPUT`, else `target/test-output`.
fn output_dir() -> PathBuf {
    let dir = std::env::var_os("GITWARD_TEST_OUTPUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-output"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A chromedriver on a free port, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    /// Starts `/usr/bin/chromedriver` and waits until it answers; panics (the test fails)
    /// when it cannot start.
    async fn start(log: &Path) -> Self {
        let port = common::free_port();
        let child = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("chromedriver starts (Debian's chromium-driver; scripts/setup installs it)");
        let driver = Self { child, port };
        // chromedriver keeps the connection open after its answer (Connection: close or not),
        // so the answer is read by its Content-Length.
        let status = format!("http://127.0.0.1:{port}/status");
        let up = common::eventually(WAIT, || async {
            client().get(&status).send().await.is_ok_and(|r| r.status().is_success())
        })
        .await;
        assert!(up, "chromedriver did not answer on port {port}");
        driver
    }

    /// A session of headless Chromium.
    async fn browser(&self) -> Client {
        let mut caps = serde_json::Map::new();
        let args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,720"];
        caps.insert("goog:chromeOptions".into(), json!({"binary": "/usr/bin/chromium", "args": args}));
        let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
        builder.capabilities(caps);
        builder.connect(&format!("http://127.0.0.1:{}", self.port)).await.expect("headless chromium starts")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of the revision cell of `unit`'s row, or `None` while there is none.
async fn revision_cell(browser: &Client, unit: &str) -> Option<String> {
    let cell = browser.find(Locator::Css(&format!("tr[data-unit=\"{unit}\"] td.rev"))).await.ok()?;
    cell.text().await.ok()
}

/// Polls until every unit's row shows its revision's first 12 hex digits.
async fn rows_show(browser: &Client, units: &[&str], revision: &str) -> bool {
    let short = &revision[..12];
    common::eventually(WAIT, || async {
        for unit in units {
            if revision_cell(browser, unit).await.as_deref() != Some(short) {
                return false;
            }
        }
        true
    })
    .await
}

#[tokio::test]
async fn the_dashboard_shows_each_unit_and_follows_a_push_without_a_reload() {
    let (env, _, repo) = common::setup_repo("dashboard").await;
    let first = repo.push(&[("web/a.yaml", &common::cm("web", "1")), ("api/a.yaml", &common::cm("api", "1"))], "first");
    let dir = tempfile::tempdir().unwrap();
    let units = common::unit_toml("web", &repo.bare(), "web", &env.namespace, "")
        + &common::unit_toml("api", &repo.bare(), "api", &env.namespace, "");
    let (config, port) = common::daemon_config(dir.path(), "", "\n[daemon.ui]\nenabled = true\n", &units);
    let _daemon = common::Daemon::ready(&config, port, WAIT).await;

    let driver = Driver::start(&dir.path().join("chromedriver.log")).await;
    let browser = driver.browser().await;
    browser.goto(&format!("http://127.0.0.1:{port}/")).await.unwrap();
    assert!(rows_show(&browser, &["web", "api"], &first).await, "{}", browser.source().await.unwrap());
    let live = common::eventually(WAIT, || async {
        browser.execute("return document.body.getAttribute('data-live')", vec![]).await.ok() == Some(json!("on"))
    })
    .await;
    assert!(live, "the page's script did not open the live stream: {}", browser.source().await.unwrap());
    // A marker that a reload would wipe out.
    browser.execute("window.gitwardMarker = 'kept'; return true", vec![]).await.unwrap();

    repo.write("web/a.yaml", &common::cm("web", "2"));
    let second = repo.push(&[("api/a.yaml", &common::cm("api", "2"))], "second");
    assert!(rows_show(&browser, &["web", "api"], &second).await, "{}", browser.source().await.unwrap());
    let marker = browser.execute("return window.gitwardMarker", vec![]).await.unwrap();
    assert_eq!(marker, json!("kept"), "the page was reloaded");
    let result = browser.find(Locator::Css("tr[data-unit=\"web\"] td:nth-child(5)")).await.unwrap();
    assert_ne!(result.text().await.unwrap(), "not synced yet");
    let png = browser.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write(output_dir().join("dashboard.png"), &png).unwrap();

    // The unit page: its recent syncs, the push's included, with the triggers that ran them.
    browser.goto(&format!("http://127.0.0.1:{port}/units/web")).await.unwrap();
    // Read in one script each: the live stream may replace an element between a find and a read
    // of it (a stale element reference).
    browser.find(Locator::Id("revision")).await.unwrap();
    let text_of = |selector: &str| format!("return document.querySelector('{selector}').innerText");
    let revision = browser.execute(&text_of("#revision"), vec![]).await.unwrap();
    assert_eq!(revision, json!(second[..12]));
    let triggers = browser.execute(&text_of("#syncs tbody"), vec![]).await.unwrap();
    let triggers = triggers.as_str().unwrap_or_default().to_owned();
    assert!(triggers.contains("push") && triggers.contains("startup"), "{triggers}");

    // Drift: another field manager changes the ConfigMap; the page shows, live, what the
    // self-heal changed back, as a diff.
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let patch =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}, "data": {"value": "tampered"}});
    let params = kube::api::PatchParams::apply("someone-else").force();
    api.patch("web", &params, &kube::api::Patch::Apply(&patch)).await.expect("the other manager's apply");
    let drift = common::eventually(WAIT, || async {
        let Ok(drift) = browser.find(Locator::Id("drift")).await else { return false };
        let text = drift.text().await.unwrap_or_default();
        let removed = text.lines().any(|l| l.starts_with('-') && l.contains("value: tampered"));
        text.contains(&format!("ConfigMap/{}/web", env.namespace)) && removed
    })
    .await;
    assert!(drift, "no drift diff: {}", browser.source().await.unwrap());
    let diff = browser.find(Locator::Css("#drift pre.diff")).await.unwrap().text().await.unwrap();
    let added = diff.lines().any(|l| l.starts_with('+') && l.contains("value:") && l.contains('2'));
    assert!(added, "the diff ends at git's value: {diff}");
    std::fs::write(output_dir().join("dashboard-unit.png"), browser.screenshot().await.unwrap()).unwrap();
    browser.close().await.unwrap();
}

/// Serves a dashboard with `token` on `127.0.0.1:<any>`; its address.
async fn serve_dashboard(token: Option<&str>) -> std::net::SocketAddr {
    let ui = Dashboard::new(Board::default(), Statuses::default(), token.and_then(Token::new));
    let state = HttpState::new(None, Statuses::default(), Arc::new(Metrics::new())).with_ui(ui);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(http::serve(listener, state, std::future::pending()));
    addr
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Asserts the security headers every dashboard response carries.
fn assert_secured(response: &reqwest::Response) {
    let headers = response.headers();
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'self'"), "{policy}");
    assert!(policy.contains("script-src 'sha256-") && policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
}

#[tokio::test]
async fn the_dashboard_asks_for_its_token_by_bearer_or_login_cookie() {
    let addr = serve_dashboard(Some("t0ken-for-tests\n")).await;
    let client = client();
    let url = |path: &str| format!("http://{addr}{path}");

    let refused = client.get(url("/")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_secured(&refused);
    assert!(refused.text().await.unwrap().contains("action=\"/login\""), "the login form");
    let wrong = client.get(url("/")).bearer_auth("t0ken").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let events = client.get(url("/events")).send().await.unwrap();
    assert_eq!(events.status(), 401, "the live stream needs the token too");

    let page = client.get(url("/")).bearer_auth("t0ken-for-tests").send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_secured(&page);
    assert!(page.text().await.unwrap().contains("<table id=\"units\">"));

    let login = |token: &str| {
        let form = format!("token={token}");
        client.post(url("/login")).header("content-type", "application/x-www-form-urlencoded").body(form).send()
    };
    let bad_login = login("wrong").await.unwrap();
    assert_eq!(bad_login.status(), 401);
    assert!(bad_login.headers().get("set-cookie").is_none());
    let login = login("t0ken-for-tests").await.unwrap();
    assert_eq!(login.status(), 303);
    assert_secured(&login);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains("t0ken-for-tests"), "the cookie does not carry the token: {cookie}");
    let pair = cookie.split(';').next().unwrap();
    let page = client.get(url("/")).header("cookie", pair).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let forged = client.get(url("/")).header("cookie", "gitward_ui=00").send().await.unwrap();
    assert_eq!(forged.status(), 401);

    // The probes and metrics stay open, without the dashboard's headers.
    let healthz = client.get(url("/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), 200);
    assert!(healthz.headers().get("content-security-policy").is_none());
}

#[tokio::test]
async fn an_open_dashboard_refuses_a_host_name_rebound_to_loopback() {
    let addr = serve_dashboard(None).await;
    let client = client();
    let page = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(page.status(), 200, "127.0.0.1 is loopback");
    assert_secured(&page);
    let stream = client.get(format!("http://{addr}/events")).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    drop(stream);
    // DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
    let rebound = client.get(format!("http://{addr}/")).header("host", "evil.example").send().await.unwrap();
    assert_eq!(rebound.status(), 403);
    assert_secured(&rebound);
    let unknown = client.get(format!("http://{addr}/units/%3Cscript%3E")).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(!unknown.text().await.unwrap().contains("<script>alert"));
}
