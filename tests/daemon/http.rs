//! The daemon's HTTP listener without a cluster: webhooks (signatures, ref matching, body
//! limit), health, readiness and metrics. Most requests go over a real TCP socket to
//! [`http::serve`]; a few use `tower::ServiceExt::oneshot` on [`http::router`] where a raw
//! socket cannot express the case (a streamed body without `Content-Length`).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use gitward::daemon::http::{self, BODY_LIMIT, HttpState};
use gitward::daemon::metrics::Metrics;
use gitward::daemon::route::Followed;
use gitward::daemon::trigger::{self, Statuses, TriggerKind, TriggerReceiver, UnitStatus};
use hmac::{Hmac, KeyInit, Mac};
use tokio::sync::oneshot;
use tower::ServiceExt;

const SECRET: &[u8] = b"s3cr3t-for-tests";
const PUSH_MAIN: &[u8] = br#"{"ref":"refs/heads/main","after":"3f2a9c1d7e4b5a6f8091a2b3c4d5e6f708192a3b"}"#;
/// The repository of the harness's units.
const SITE: &str = "https://git.example/org/site.git";

/// Two units of one repository ([`SITE`]): `shop` follows `main`, `blog` follows tag `v1`.
struct Harness {
    state: HttpState,
    shop: TriggerReceiver,
    blog: TriggerReceiver,
}

impl Harness {
    fn new(secret: Option<&[u8]>) -> Self {
        let state = HttpState::new(secret.map(|s| Arc::new(s.to_vec())), Statuses::default(), Arc::new(Metrics::new()));
        let (shop_tx, shop) = trigger::channel();
        let (blog_tx, blog) = trigger::channel();
        state.set_units(vec![
            ("shop".into(), Followed::git(SITE, "main"), shop_tx, None),
            ("blog".into(), Followed::git(SITE, "refs/tags/v1"), blog_tx, None),
        ]);
        Self { state, shop, blog }
    }

    /// Serves on `127.0.0.1:<any>`; drop or send on the returned sender to shut down.
    async fn serve(&self) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(http::serve(listener, self.state.clone(), async move {
            let _ = stopped.await;
        }));
        Server { addr, stop, task }
    }

    fn triggered(&mut self) -> (Option<TriggerKind>, Option<TriggerKind>) {
        (self.shop.try_recv().map(|t| t.kind), self.blog.try_recv().map(|t| t.kind))
    }
}

struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn shutdown(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }
}

/// A response read off the socket: status code, head (status line and headers), body.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

/// Writes one HTTP/1.1 request by hand (with `Connection: close`) and reads the whole reply.
/// `Content-Length` is the body's unless `headers` sets one. Blocking std I/O on a blocking
/// thread: tokio's `io-util` feature (`AsyncWriteExt`) is not enabled in this crate.
async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length")) {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let body = body.to_vec();
    let raw = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        raw
    })
    .await
    .unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head in {raw:?}"));
    let status =
        head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad status line in {head:?}"));
    Reply { status, head: head.to_owned(), body: body.to_owned() }
}

fn hmac_hex(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

fn github_signature(secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, body))
}

async fn post_hook(addr: SocketAddr, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    request(addr, "POST", "/hooks/git", &all, body).await
}

fn ready() -> UnitStatus {
    UnitStatus {
        cache_synced: true,
        last_sync_ok: Some(true),
        failed_objects: 0,
        last_revision: Some("3f2a".into()),
        tracked_objects: 1,
        health: None,
        waiting: false,
        applied_once: true,
        last_error: None,
        suspended: false,
        blocked: None,
        backoff_until: None,
    }
}

#[tokio::test]
async fn signed_github_push_triggers_only_the_unit_following_that_branch() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let signature = github_signature(SECRET, PUSH_MAIN);
    let reply =
        post_hook(server.addr, &[("X-Hub-Signature-256", &signature), ("X-GitHub-Event", "push")], PUSH_MAIN).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(json, serde_json::json!({ "units": ["shop"] }));
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), None));
    server.shutdown().await;
}

#[tokio::test]
async fn a_push_naming_the_units_repository_by_another_url_triggers_it_and_one_naming_another_repository_none() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let ours = br#"{"ref":"refs/heads/main","repository":{"ssh_url":"git@git.example:org/site.git"}}"#;
    let theirs = br#"{"ref":"refs/heads/main","repository":{"clone_url":"https://git.example/org/other.git"}}"#;
    for (body, units) in [(&ours[..], serde_json::json!(["shop"])), (theirs, serde_json::json!([]))] {
        let signature = github_signature(SECRET, body);
        let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], body).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        let json: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(json, serde_json::json!({ "units": units }));
    }
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), None));
    assert_eq!(h.triggered(), (None, None), "the push to another repository reached no unit");
    server.shutdown().await;
}

#[tokio::test]
async fn tag_push_triggers_the_unit_following_that_tag() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let body = br#"{"ref":"refs/tags/v1"}"#;
    let signature = github_signature(SECRET, body);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], body).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(h.triggered(), (None, Some(TriggerKind::Webhook)));
    server.shutdown().await;
}

#[tokio::test]
async fn payload_without_a_ref_triggers_every_unit() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let body = br#"{"zen":"Keep it logically awesome.","hook_id":1}"#;
    let signature = github_signature(SECRET, body);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature), ("X-GitHub-Event", "ping")], body).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), Some(TriggerKind::Webhook)));
    server.shutdown().await;
}

#[tokio::test]
async fn second_webhook_while_a_sync_is_queued_coalesces() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let signature = github_signature(SECRET, PUSH_MAIN);
    for _ in 0..2 {
        let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], PUSH_MAIN).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        assert!(reply.body.contains("shop"), "{}", reply.body);
    }
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), None));
    assert_eq!(h.triggered(), (None, None), "the channel holds one queued trigger");
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_signature_is_refused_without_a_trigger() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let forged = github_signature(b"not-the-secret", PUSH_MAIN);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &forged)], PUSH_MAIN).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(!reply.body.contains(&forged[7..]), "the reply echoes the signature: {}", reply.body);
    assert_eq!(h.triggered(), (None, None));
    server.shutdown().await;
}

#[tokio::test]
async fn signature_of_another_body_is_refused() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let signature = github_signature(SECRET, br#"{"ref":"refs/heads/dev"}"#);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], PUSH_MAIN).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(h.triggered(), (None, None));
    server.shutdown().await;
}

#[tokio::test]
async fn missing_signature_is_refused() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let reply = post_hook(server.addr, &[], PUSH_MAIN).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(h.triggered(), (None, None));
    server.shutdown().await;
}

#[tokio::test]
async fn without_a_configured_secret_every_webhook_is_refused() {
    let mut h = Harness::new(None);
    let server = h.serve().await;
    let signature = github_signature(b"", PUSH_MAIN);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], PUSH_MAIN).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    let reply = post_hook(server.addr, &[("X-Gitlab-Token", "")], PUSH_MAIN).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(h.triggered(), (None, None));
    server.shutdown().await;
}

#[tokio::test]
async fn secret_set_after_start_is_used() {
    let mut h = Harness::new(None);
    let server = h.serve().await;
    h.state.set_secret(Some(Arc::new(SECRET.to_vec())));
    let signature = github_signature(SECRET, PUSH_MAIN);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], PUSH_MAIN).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), None));
    server.shutdown().await;
}

#[tokio::test]
async fn declared_body_over_one_mebibyte_is_refused_before_reading_it() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let length = (BODY_LIMIT + 1).to_string();
    let signature = github_signature(SECRET, PUSH_MAIN);
    let headers = [("Content-Length", length.as_str()), ("X-Hub-Signature-256", &signature)];
    let reply = post_hook(server.addr, &headers, b"").await;
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(h.triggered(), (None, None));
    server.shutdown().await;
}

#[tokio::test]
async fn streamed_body_over_one_mebibyte_is_refused() {
    let mut h = Harness::new(Some(SECRET));
    let big = vec![b' '; BODY_LIMIT + 1];
    let signature = github_signature(SECRET, &big);
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = big.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
    let request = axum::http::Request::post("/hooks/git")
        .header("X-Hub-Signature-256", signature)
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    let response = http::router(h.state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(h.triggered(), (None, None));
}

#[tokio::test]
async fn body_of_exactly_one_mebibyte_is_accepted() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let mut body = PUSH_MAIN.to_vec();
    body.resize(BODY_LIMIT, b' ');
    let signature = github_signature(SECRET, &body);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], &body).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), None));
    server.shutdown().await;
}

#[tokio::test]
async fn gitea_signature_is_accepted() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let signature = hmac_hex(SECRET, PUSH_MAIN);
    let reply =
        post_hook(server.addr, &[("X-Gitea-Signature", &signature), ("X-Gitea-Event", "push")], PUSH_MAIN).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), None));
    server.shutdown().await;
}

#[tokio::test]
async fn gitlab_token_is_accepted_and_a_wrong_one_refused() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let token = std::str::from_utf8(SECRET).unwrap();
    let reply = post_hook(server.addr, &[("X-Gitlab-Token", token), ("X-Gitlab-Event", "Push Hook")], PUSH_MAIN).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert_eq!(h.triggered(), (Some(TriggerKind::Webhook), None));
    let reply = post_hook(server.addr, &[("X-Gitlab-Token", "s3cr3t")], PUSH_MAIN).await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(h.triggered(), (None, None));
    server.shutdown().await;
}

#[tokio::test]
async fn healthz_answers_ok() {
    let h = Harness::new(None);
    let server = h.serve().await;
    let reply = request(server.addr, "GET", "/healthz", &[], b"").await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    server.shutdown().await;
}

#[tokio::test]
async fn readyz_is_unavailable_until_every_unit_has_synced() {
    let h = Harness::new(None);
    let server = h.serve().await;
    let reply = request(server.addr, "GET", "/readyz", &[], b"").await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    h.state.status.set("shop", ready());
    h.state.status.set("blog", UnitStatus::default());
    let reply = request(server.addr, "GET", "/readyz", &[], b"").await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(reply.body.contains("blog") && !reply.body.contains("shop"), "{}", reply.body);
    h.state.status.set("blog", ready());
    let reply = request(server.addr, "GET", "/readyz", &[], b"").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // The second line says what the render sandbox enforces on this kernel.
    assert!(reply.body.starts_with("ready\nsandbox: landlock ABI "), "{}", reply.body);
    server.shutdown().await;
}

/// `/readyz` names the sandbox layers in effect and `gitward_sandbox_layer` counts them; with
/// `[render] sandbox = "off"` both say none holds.
#[tokio::test]
async fn readyz_and_metrics_name_the_sandbox_layers_in_effect() {
    use gitward::config::SandboxMode;
    let h = Harness::new(None);
    let server = h.serve().await;
    let layer = |body: &str, name: &str| {
        let prefix = format!("gitward_sandbox_layer{{layer=\"{name}\"}} ");
        body.lines().find_map(|l| l.strip_prefix(&prefix).map(str::to_owned)).unwrap_or_default()
    };
    for (mode, line, held) in [
        (SandboxMode::On, "seccomp, user, network and PID namespaces\n", "1"),
        (SandboxMode::Off, "sandbox: off ([render] sandbox = \"off\")\n", "0"),
    ] {
        h.state.set_sandbox(mode);
        let reply = request(server.addr, "GET", "/readyz", &[], b"").await;
        assert!(reply.body.ends_with(line), "{}", reply.body);
        let reply = request(server.addr, "GET", "/metrics", &[], b"").await;
        for name in ["landlock", "seccomp", "namespaces"] {
            assert_eq!(layer(&reply.body, name), held, "{name}: {}", reply.body);
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn metrics_count_the_webhook_trigger() {
    let h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let signature = github_signature(SECRET, PUSH_MAIN);
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], PUSH_MAIN).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    let reply = request(server.addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(reply.status, 200);
    let content_type =
        reply.head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type: ").map(str::to_owned));
    assert_eq!(content_type.as_deref(), Some(gitward::daemon::metrics::CONTENT_TYPE));
    assert!(
        reply.body.lines().any(|l| l == r#"gitward_triggers_total{unit="shop",kind="webhook"} 1"#),
        "{}",
        reply.body
    );
    assert!(!reply.body.contains(r#"unit="blog",kind="webhook""#), "{}", reply.body);
    assert!(reply.body.ends_with("# EOF\n"), "{}", reply.body);
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_route_is_not_found() {
    let h = Harness::new(None);
    let response = http::router(h.state.clone())
        .oneshot(axum::http::Request::get("/hooks").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

/// An `io::Write` into a shared buffer, to read back what the daemon logged.
#[derive(Clone, Default)]
struct LogBuffer(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn logs_name_the_reason_but_never_the_secret_or_signature() {
    let logs = LogBuffer::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let forged = github_signature(b"not-the-secret", PUSH_MAIN);
    let valid = github_signature(SECRET, PUSH_MAIN);
    assert_eq!(post_hook(server.addr, &[("X-Hub-Signature-256", &forged)], PUSH_MAIN).await.status, 401);
    assert_eq!(post_hook(server.addr, &[("X-Gitlab-Token", "s3cr3t-for-test")], PUSH_MAIN).await.status, 401);
    assert_eq!(post_hook(server.addr, &[("X-Hub-Signature-256", &valid)], PUSH_MAIN).await.status, 202);
    server.shutdown().await;
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("webhook rejected").count(), 2, "{text}");
    assert!(text.contains("X-Hub-Signature-256: does not match"), "{text}");
    assert!(text.contains("webhook accepted") && text.contains("refs/heads/main"), "{text}");
    for leak in [std::str::from_utf8(SECRET).unwrap(), "s3cr3t-for-test", &forged[7..], &valid[7..]] {
        assert!(!text.contains(leak), "logs contain {leak:?}:\n{text}");
    }
}

#[tokio::test]
async fn a_client_that_never_sends_its_body_gets_408_and_frees_the_listener() {
    let h = Harness::new(Some(SECRET));
    let never = futures::stream::pending::<Result<Vec<u8>, std::io::Error>>();
    let request = axum::http::Request::post("/hooks/git")
        .header("X-Hub-Signature-256", github_signature(SECRET, PUSH_MAIN))
        .body(Body::from_stream(never))
        .unwrap();
    let response = http::router(h.state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), 408, "answered after REQUEST_TIMEOUT ({:?})", http::REQUEST_TIMEOUT);
}

/// A payload naming the commit it pushed (`after`) asks a git unit only for a revision other
/// than the one last applied, as the ref watch's push does, so the webhook of a push the watch
/// already brought re-sends nothing; a chart unit following the same repository, and any unit
/// for a payload naming no commit (or a deleted ref's zeros), still get the explicit request
/// that re-sends it. A ref nobody follows triggers nothing.
#[tokio::test]
async fn a_webhook_naming_its_commit_asks_git_units_for_a_new_revision_only() {
    let state = HttpState::new(Some(Arc::new(SECRET.to_vec())), Statuses::default(), Arc::new(Metrics::new()));
    let (git_tx, mut git) = trigger::channel();
    let (chart_tx, mut chart) = trigger::channel();
    let repositories = vec![gitward::daemon::route::repository_key(SITE)];
    state.set_units(vec![
        ("shop".into(), Followed::git(SITE, "main"), git_tx, None),
        ("charts".into(), Followed::Download { repositories, values: None }, chart_tx, None),
    ]);
    let server = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(http::serve(listener, state.clone(), async move {
            let _ = stopped.await;
        }));
        Server { addr, stop, task }
    };
    let sha = "3f2a9c1d7e4b5a6f8091a2b3c4d5e6f708192a3b";
    let zeros = "0".repeat(40);
    // (the `after` field, whether the git unit's trigger asks for a new revision only)
    for (after, git_needs_new) in [(Some(sha), true), (None, false), (Some(zeros.as_str()), false)] {
        let after = after.map_or(String::new(), |a| format!(r#","after":"{a}""#));
        let body = format!(r#"{{"ref":"refs/heads/main"{after},"repository":{{"clone_url":"{SITE}"}}}}"#);
        let signature = github_signature(SECRET, body.as_bytes());
        let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], body.as_bytes()).await;
        assert_eq!((reply.status, reply.body.as_str()), (202, r#"{"units":["shop","charts"]}"#), "{body}");
        let (g, c) = (git.try_recv().expect("the git unit triggered"), chart.try_recv().expect("the chart unit"));
        assert_eq!((g.kind, c.kind), (TriggerKind::Webhook, TriggerKind::Webhook));
        assert_eq!(g.needs_new_revision(), git_needs_new, "{body}");
        assert!(!c.needs_new_revision(), "a chart unit re-downloads and re-sends as before: {body}");
    }
    let body = format!(r#"{{"ref":"refs/heads/dev","after":"{sha}"}}"#);
    let signature = github_signature(SECRET, body.as_bytes());
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature)], body.as_bytes()).await;
    assert_eq!((reply.status, reply.body.as_str()), (202, r#"{"units":[]}"#));
    assert!(git.try_recv().is_none() && chart.try_recv().is_none(), "a ref nobody follows triggers nothing");
    server.shutdown().await;
}

/// A pull-request event (GitHub's `pull_request`, GitLab's `Merge Request Hook`) moves no ref a
/// unit follows: it wakes the previews and triggers no unit, though its payload names the
/// units' repository and no ref (which, for a push, would trigger every unit of it).
#[tokio::test]
async fn a_pull_request_event_wakes_the_previews_and_triggers_no_unit() {
    let mut h = Harness::new(Some(SECRET));
    let server = h.serve().await;
    let body = br#"{"action":"synchronize","number":7,"repository":{"clone_url":"https://git.example/org/site.git"}}"#;
    let signature = github_signature(SECRET, body);
    let secret = std::str::from_utf8(SECRET).unwrap();
    let deliveries: [&[(&str, &str)]; 2] = [
        &[("X-Hub-Signature-256", &signature), ("X-GitHub-Event", "pull_request")],
        &[("X-Gitlab-Token", secret), ("X-Gitlab-Event", "Merge Request Hook")],
    ];
    for headers in deliveries {
        let previews = h.state.previews.clone();
        let woken = previews.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let reply = post_hook(server.addr, headers, body).await;
        assert_eq!((reply.status, reply.body.as_str()), (202, r#"{"units":[]}"#), "{headers:?}");
        tokio::time::timeout(std::time::Duration::from_secs(5), woken).await.expect("the previews woken");
        assert_eq!(h.triggered(), (None, None), "no unit triggered: {headers:?}");
    }
    // The same payload as a push event (naming no ref) is the explicit request it was.
    let reply = post_hook(server.addr, &[("X-Hub-Signature-256", &signature), ("X-GitHub-Event", "push")], body).await;
    assert_eq!((reply.status, reply.body.as_str()), (202, r#"{"units":["shop","blog"]}"#));
    server.shutdown().await;
}
