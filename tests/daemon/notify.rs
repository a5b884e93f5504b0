//! Notifications (`[[notify]]`) against loopback receivers that record every request: a signed
//! webhook, Slack, and the commit statuses of GitHub, GitLab and Gitea, for `gitward run` and
//! `gitward sync`; a receiver that is down.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};

/// A generous bound for "it happened", not a speed assertion.
const WAIT: Duration = Duration::from_secs(120);

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Recorded {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A loopback HTTP server that answers 201 to anything and records it.
struct Receiver {
    port: u16,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

impl Receiver {
    async fn start() -> Self {
        let seen: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().fallback(record).with_state(seen.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { port, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The requests whose path starts with `prefix`.
    fn under(&self, prefix: &str) -> Vec<Recorded> {
        self.seen.lock().unwrap().iter().filter(|r| r.path.starts_with(prefix)).cloned().collect()
    }

    /// The one request whose path starts with `prefix`, which must be a POST to `path`.
    fn one_post(&self, prefix: &str, path: &str) -> Recorded {
        let mut under = self.under(prefix);
        assert_eq!(under.len(), 1, "{}", self.describe());
        let request = under.remove(0);
        assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", path));
        request
    }

    fn describe(&self) -> String {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .map(|r| format!("{} {} {}", r.method, r.path, String::from_utf8_lossy(&r.body)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

async fn record(
    State(seen): State<Arc<Mutex<Vec<Recorded>>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::http::StatusCode {
    let path = uri.path().to_owned();
    seen.lock().unwrap().push(Recorded { method: method.to_string(), path, headers, body: body.to_vec() });
    axum::http::StatusCode::CREATED
}

/// Writes `value` to `dir/name` and returns the path.
fn secret(dir: &std::path::Path, name: &str, value: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{value}\n")).unwrap();
    path.display().to_string()
}

/// `[[notify]]` tables for each kind, all to `receiver` under their own path prefix.
fn notify_tables(receiver: &Receiver, dir: &std::path::Path) -> String {
    let key = secret(dir, "hook-key", "hook-key-1");
    let (gh, gl, gt) = (secret(dir, "gh", "tok-gh"), secret(dir, "gl", "tok-gl"), secret(dir, "gt", "tok-gt"));
    format!(
        "[[notify]]\nkind = \"webhook\"\nurl = \"{}\"\nsecret_file = \"{key}\"\n\n\
         [[notify]]\nkind = \"slack\"\nurl = \"{}\"\n\n\
         [[notify]]\nkind = \"github\"\nurl = \"{}\"\ntoken_file = \"{gh}\"\nrepository = \"acme/deploy\"\n\n\
         [[notify]]\nkind = \"gitlab\"\nurl = \"{}\"\ntoken_file = \"{gl}\"\nrepository = \"acme/deploy\"\n\n\
         [[notify]]\nkind = \"gitea\"\nurl = \"{}\"\ntoken_file = \"{gt}\"\nrepository = \"acme/deploy\"\n",
        receiver.url("/hook"),
        receiver.url("/slack/services/T0/B0/x"),
        receiver.url("/gh"),
        receiver.url("/gl/api/v4"),
        receiver.url("/gt/api/v1"),
    )
}

fn verify(key: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(hex) = header.and_then(|h| h.strip_prefix("sha256=")) else { return false };
    let Ok(tag) = hex::decode(hex) else { return false };
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(body);
    mac.verify_slice(&tag).is_ok()
}

/// The daemon's `sync complete` and `sync failed` events of `revision`.
fn syncs_of(daemon: &common::Daemon, revision: &str) -> usize {
    let events = daemon.events();
    events
        .iter()
        .filter(|e| e["message"] == "sync complete" || e["message"] == "sync failed")
        .filter(|e| e["revision"].as_str() == Some(revision))
        .count()
}

/// A revision with an object the API server rejects posts once to each notifier however often
/// the daemon retries it: a signed webhook with result `failed`, a Slack message, and a
/// `failure` commit status in each forge's request shape; the next good revision posts
/// `recovered` and `success`.
#[tokio::test]
async fn a_failed_revision_is_told_once_to_each_notifier_and_its_fix_as_recovered() {
    let (_, ns) = common::setup_ns("notify-daemon").await;
    let receiver = Receiver::start().await;
    let repo = common::GitRepo::new();
    repo.write("good.yaml", &common::cm("good", "1"));
    repo.write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  \"no spaces\": x\n");
    let sha = repo.commit_and_push("an object the API server rejects");
    let dir = tempfile::tempdir().unwrap();
    let units = common::unit_toml("app", &repo.bare(), "", &ns, "") + &notify_tables(&receiver, dir.path());
    let daemon = common::polling_daemon(dir.path(), "", &units);

    // Told, and the failing revision retried since (a later try of it told nothing new).
    let told = common::eventually(WAIT, || async {
        ["/hook", "/slack", "/gh", "/gl", "/gt"].iter().all(|p| !receiver.under(p).is_empty())
            && syncs_of(&daemon, &sha) >= 3
    })
    .await;
    assert!(told, "every notifier told, the revision retried:\n{}\n{}", receiver.describe(), daemon.log_text());
    let hooks = receiver.under("/hook");
    assert_eq!(hooks.len(), 1, "one webhook for the failing revision:\n{}", receiver.describe());
    let hook = &hooks[0];
    assert_eq!(hook.method, "POST");
    assert!(verify(b"hook-key-1", &hook.body, hook.header("x-gitward-signature-256")), "signature: {:?}", hook.headers);
    let body = hook.json();
    assert_eq!((body["unit"].as_str(), body["revision"].as_str()), (Some("app"), Some(sha.as_str())));
    assert_eq!((body["event"].as_str(), body["result"].as_str()), (Some("failed"), Some("failed")));
    assert_eq!(body["cluster"], "default");
    assert_eq!(body["counts"], json!({"created": 1, "configured": 0, "pruned": 0, "unchanged": 0, "failed": 1}));
    let first = body["errors"][0].as_str().unwrap_or_default();
    assert!(first.starts_with(&format!("ConfigMap/{ns}/bad failed")), "the first error: {first}");
    assert!(body["time"].as_str().is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()), "RFC 3339: {body}");

    let description = "failed: 1 created, 0 configured, 0 pruned, 0 unchanged, 1 failed";
    let gh = receiver.one_post("/gh", &format!("/gh/repos/acme/deploy/statuses/{sha}"));
    assert_eq!(gh.header("authorization"), Some("Bearer tok-gh"));
    assert_eq!(gh.header("accept"), Some("application/vnd.github+json"));
    assert_eq!(gh.header("content-type"), Some("application/json"));
    assert_eq!(gh.json(), json!({"state": "failure", "context": "gitward/app", "description": description}));
    let gl = receiver.one_post("/gl", &format!("/gl/api/v4/projects/acme%2Fdeploy/statuses/{sha}"));
    assert_eq!(gl.header("private-token"), Some("tok-gl"));
    assert_eq!(gl.header("authorization"), None);
    let gl_body =
        json!({"state": "failed", "name": "gitward/app", "context": "gitward/app", "description": description});
    assert_eq!(gl.json(), gl_body);
    let gt = receiver.one_post("/gt", &format!("/gt/api/v1/repos/acme/deploy/statuses/{sha}"));
    assert_eq!(gt.header("authorization"), Some("token tok-gt"));
    assert_eq!(gt.json(), json!({"state": "failure", "context": "gitward/app", "description": description}));

    let slack = receiver.under("/slack");
    assert_eq!(slack.len(), 1, "{}", receiver.describe());
    let message = slack[0].json();
    assert_eq!(message["text"], format!("gitward: app revision {} failed", &sha[..12]));
    let blocks = message["blocks"].as_array().expect("blocks");
    assert_eq!(blocks[0]["type"], "section");
    let headline = blocks[0]["text"]["text"].as_str().unwrap_or_default();
    assert!(headline.contains("`app`") && headline.contains(&sha[..12]), "{headline}");
    let listed = blocks.last().unwrap()["text"]["text"].as_str().unwrap_or_default();
    assert!(listed.contains(&format!("ConfigMap/{ns}/bad")), "the first unhealthy objects: {message}");

    repo.remove("bad.yaml");
    let fixed = repo.commit_and_push("the rejected object removed");
    let recovered = common::eventually(WAIT, || async {
        let success = |prefix: &str| {
            receiver.under(prefix).iter().any(|r| r.path.ends_with(&fixed) && r.json()["state"] == "success")
        };
        receiver.under("/hook").len() == 2 && success("/gh") && success("/gl") && success("/gt")
    })
    .await;
    assert!(recovered, "recovered told:\n{}\n{}", receiver.describe(), daemon.log_text());
    let body = receiver.under("/hook")[1].json();
    assert_eq!((body["event"].as_str(), body["revision"].as_str()), (Some("recovered"), Some(fixed.as_str())));
    assert!(daemon.logged("notification failed").is_empty(), "{}", daemon.log_text());
}

/// A webhook whose receiver is down (a closed port) leaves the syncs as they are: they complete,
/// the failure is logged at warn once for the streak, and counted.
#[tokio::test]
async fn a_receiver_that_is_down_is_logged_once_and_does_not_hold_syncs() {
    let (env, ns, repo) = common::setup_repo("notify-down").await;
    let first = repo.push(&[("one.yaml", &common::cm("one", "1"))], "one");
    let dir = tempfile::tempdir().unwrap();
    // Port 1: only root may listen there, so no other test's receiver can take it, as a port
    // freed by `free_port` can be; a connection is refused at once.
    let table = "[[notify]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:1/hook\"\non = [\"applied\"]\n";
    let units = common::unit_toml("app", &repo.bare(), "", &ns, "") + table;
    let daemon = common::polling_daemon(dir.path(), "", &units);

    let synced = common::eventually(WAIT, || async { syncs_of(&daemon, &first) >= 1 }).await;
    assert!(synced, "the sync completes: {}", daemon.log_text());
    let second = repo.push(&[("two.yaml", &common::cm("two", "2"))], "two");
    // Both notices failed: the second sync's after the first's (one task sends in order).
    let failed = common::eventually(WAIT, || async {
        syncs_of(&daemon, &second) >= 1 && daemon.logged("notification failed").len() >= 2
    })
    .await;
    assert!(failed, "both notices failed: {}", daemon.log_text());
    let cm = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(env.client.clone(), &ns);
    assert!(cm.get_opt("two").await.unwrap().is_some(), "the second revision applied");
    let failures = daemon.logged("notification failed");
    let warned: Vec<&Value> = failures.iter().filter(|e| e["level"] == "WARN").collect();
    assert_eq!(warned.len(), 1, "one warning for the streak: {failures:?}");
    assert_eq!(warned[0]["notifier"], "notify[0]");
    assert!(daemon.metric_sum("gitward_notify_failures_total", &["notify[0]"]) >= 2.0);
}

/// `gitward sync` tells its notifiers before it exits: with `on = ["applied"]` a commit status
/// goes `pending` when the objects are sent and `success` at the end.
#[tokio::test]
async fn a_one_shot_sync_sets_pending_then_success() {
    let (_, ns) = common::setup_ns("notify-cli").await;
    let receiver = Receiver::start().await;
    let repo = common::GitRepo::new();
    let sha = repo.push(&[("cm.yaml", &common::cm("one", "1"))], "one ConfigMap");
    let dir = tempfile::tempdir().unwrap();
    let token = secret(dir.path(), "gh", "tok-gh");
    let table = format!(
        "[[notify]]\nkind = \"github\"\nurl = \"{}\"\ntoken_file = \"{token}\"\nrepository = \"acme/deploy\"\non = [\"applied\"]\n",
        receiver.url("/api/v3")
    );
    let config = common::config_file(dir.path(), &(common::unit_toml("app", &repo.bare(), "", &ns, "") + &table));
    // The receiver runs on this runtime: the child process is waited for off it.
    let run = tokio::task::spawn_blocking(move || common::gitward(&["sync"], &config, WAIT)).await.unwrap();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let states: Vec<Value> = receiver.under("/api/v3").iter().map(|r| r.json()["state"].clone()).collect();
    assert_eq!(states, [json!("pending"), json!("success")], "{}", receiver.describe());
    let paths: Vec<String> = receiver.under("/api/v3").iter().map(|r| r.path.clone()).collect();
    assert!(paths.iter().all(|p| p == &format!("/api/v3/repos/acme/deploy/statuses/{sha}")), "{paths:?}");
}

#[tokio::test]
async fn a_one_shot_sync_whose_forge_never_answers_says_what_it_left_undelivered() {
    let env = common::setup("notify-hung").await;
    // Accepts connections and never answers: each send waits for its request timeout.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hung.local_addr().unwrap().port();
    let repo = common::GitRepo::new();
    repo.push(&[("cm.yaml", &common::cm("one", "1"))], "one ConfigMap");
    let dir = tempfile::tempdir().unwrap();
    let token = secret(dir.path(), "gh", "tok-gh");
    let table = format!(
        "[[notify]]\nkind = \"github\"\nurl = \"http://127.0.0.1:{port}/api/v3\"\ntoken_file = \"{token}\"\n\
         repository = \"acme/deploy\"\non = [\"applied\"]\n"
    );
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "");
    let config = common::config_file(dir.path(), &(unit + &table));
    let run = common::gitward(&["sync"], &config, WAIT);
    drop(hung);
    assert_eq!(run.code, Some(0), "the sync itself applied: {}", run.stderr);
    let warned = run.stderr.lines().find(|l| l.contains("notifications not delivered before exit"));
    let warned = warned.unwrap_or_else(|| panic!("no warning of undelivered notices: {}", run.stderr));
    assert!(warned.contains("\"undelivered\":2"), "pending and success both left: {warned}");
}
