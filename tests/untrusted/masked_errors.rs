//! A Secret value that reaches the error of a sync that failed as a whole is masked in every
//! place a person or a probe reads that error: `/readyz?verbose`, the dashboard, `gitward
//! status` (text and JSON), the Events of the unit, the error recorded on its ApplySet parent,
//! the notifications sent, and the daemon's log. One `gitward run`, the real apiserver, a real
//! git repository.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};

/// A generous bound for "it happened", not a speed assertion.
const WAIT: Duration = Duration::from_secs(120);

/// A loopback HTTP receiver that answers 201 to anything and keeps every request body.
async fn receiver() -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let keep = seen.clone();
    let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let keep = keep.clone();
        async move {
            keep.lock().unwrap().push(String::from_utf8_lossy(&body).into_owned());
            axum::http::StatusCode::CREATED
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, seen)
}

/// Whether `text` holds `value` as it is or in base64. Never prints either.
fn holds(text: &str, value: &str) -> bool {
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    text.contains(value) || text.contains(&encoded)
}

/// GET `path` on the daemon's listener (as a browser asks, `Host: 127.0.0.1:<port>`): the
/// status and body.
async fn get(port: u16, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("http://127.0.0.1:{port}{path}")).await.expect("the daemon answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// `gitward status` of `config` with `args`: stdout and stderr.
fn status(config: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["status", "--config", config.to_str().unwrap()])
        .args(args)
        .output()
        .expect("gitward status runs");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A unit whose `[sync.substitute] from` Secret holds the canary, and whose revision names two
/// ConfigMaps `leak-${TOKEN}`: the sync fails as a whole (`defined twice`), naming the object
/// whose name holds the Secret's value. Each output is first seen to carry that failure, then
/// found free of the value, plain and base64.
#[tokio::test]
async fn a_from_secret_value_in_a_failed_sync_is_masked_in_every_output() {
    let (env, ns) = common::setup_ns("mask-errors").await;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let canary = format!("{}{nanos:x}", common::CANARY_PREFIX);
    common::register_canary(&canary);
    let vars = Secret {
        metadata: kube::api::ObjectMeta { name: Some("vars".into()), ..Default::default() },
        string_data: Some([("TOKEN".to_string(), canary.clone())].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), &ns).create(&PostParams::default(), &vars).await.unwrap();

    let repo = common::GitRepo::new();
    repo.push(&[("app/ok.yaml", &common::cm("ok", "1"))], "a good revision");
    let (port, bodies) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml(
        "leaky",
        &repo.bare(),
        "app",
        &ns,
        &format!("[sync.substitute]\nfrom = [\"Secret/{ns}/vars\"]\n"),
    );
    let notify = format!("[[notify]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{port}/hook\"\n");
    let (config, listen) =
        common::daemon_config(dir.path(), "", "\n[daemon.ui]\nenabled = true\n", &(unit + "\n" + &notify));
    let text = std::fs::read_to_string(&config).unwrap().replace("interval = \"1h\"\n", "interval = \"1s\"\n");
    std::fs::write(&config, text).unwrap();
    let daemon = common::Daemon::start(&config, listen, &[]);
    assert!(daemon.wait_ready(WAIT).await, "the good revision is applied ({} bytes of log)", daemon.log_text().len());

    repo.write("app/a.yaml", &common::cm("leak-${TOKEN}", "1"));
    repo.write("app/b.yaml", &common::cm("leak-${TOKEN}", "2"));
    repo.commit_and_push("one object defined twice, its name from the Secret");
    let failed = |text: &str| text.contains("defined twice");

    // Each output, once it tells of the failure.
    let mut outputs: Vec<(&str, String)> = Vec::new();
    let readyz = common::eventually(WAIT, || async { failed(&get(listen, "/readyz?verbose").await.1) }).await;
    assert!(readyz, "/readyz?verbose names the failure");
    outputs.push(("/readyz?verbose", get(listen, "/readyz?verbose").await.1));
    let (code, page) = get(listen, "/units/leaky").await;
    assert!(code == 200 && failed(&page), "the dashboard's unit page shows the failure (status {code})");
    outputs.push(("the dashboard's unit page", page));
    outputs.push(("the dashboard's index", get(listen, "/").await.1));
    outputs.push(("/metrics", get(listen, "/metrics").await.1));

    let recorded = common::eventually(WAIT, || async { failed(&status(&config, &[])) }).await;
    assert!(recorded, "gitward status names the failure");
    outputs.push(("gitward status", status(&config, &[])));
    let json = status(&config, &["-o", "json"]);
    assert!(failed(&json), "gitward status -o json names the failure");
    outputs.push(("gitward status -o json", json));
    let parent = Api::<Secret>::namespaced(env.client.clone(), &ns).get("gitward-leaky").await.unwrap();
    let annotations = parent.metadata.annotations.unwrap_or_default();
    let last_error = annotations.get("gitward.dev/last-error").cloned().unwrap_or_default();
    assert!(failed(&last_error), "the parent records the failure");
    outputs.push(("the ApplySet parent's annotations", format!("{annotations:?}")));

    let events: Api<Event> = Api::namespaced(env.client.clone(), &ns);
    let warned = common::eventually(WAIT, || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items.iter().any(|e| e.reason.as_deref() == Some("SyncFailed") && e.note.as_deref().is_some_and(failed))
    })
    .await;
    assert!(warned, "a SyncFailed Event names the failure");
    let list = events.list(&ListParams::default()).await.unwrap();
    outputs.push(("the Events", serde_json::to_string(&list.items).unwrap()));

    let told = common::eventually(WAIT, || async { bodies.lock().unwrap().iter().any(|b| failed(b)) }).await;
    assert!(told, "the webhook notification names the failure");
    outputs.push(("the notifications", bodies.lock().unwrap().join("\n")));

    assert!(!daemon.logged("sync failed").is_empty(), "the daemon logged the failure");
    outputs.push(("the daemon's log", daemon.log_text()));

    let leaked: Vec<&str> = outputs.iter().filter(|(_, text)| holds(text, &canary)).map(|(name, _)| *name).collect();
    assert!(leaked.is_empty(), "the Secret's value, plain or base64, in: {leaked:?}");
    for (name, text) in outputs.iter().filter(|(_, text)| failed(text)) {
        assert!(text.contains("leak-***"), "{name} names the object, its name masked");
    }
}
