//! What `/readyz` means while one object keeps failing, with the real `gitward run`, real git
//! and the real apiserver: an object the API server refuses (here through an admission webhook
//! that is down, `failurePolicy: Fail`) is `failed` — logged, counted, shown in `STATUS=` — but
//! the daemon stays ready; only a sync that failed as a whole or an API server that does not
//! answer makes it unready (the outage case is `tests/daemon/run.rs`).

use crate::common;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn one_object_refused_by_a_down_webhook_fails_alone_and_the_daemon_stays_ready() {
    let (env, ns) = common::setup_ns("ready-webhook").await;
    let webhooks = common::down_webhook(&env.client, &ns).await;

    let repo = common::GitRepo::new();
    repo.write("free.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: free\n");
    repo.push(&[("guarded.yaml", &common::guarded_cm("guarded"))], "one free and one guarded ConfigMap");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &ns, "", "");
    let daemon = common::Daemon::start(&config, port, &[]);

    let guarded = format!("ConfigMap/{ns}/guarded");
    let failed = common::eventually(WAIT, || async {
        daemon.events().iter().any(|e| e["message"] == "object failed" && e["object"] == guarded.as_str())
    })
    .await;
    assert!(failed, "the guarded object is reported failed: {}", daemon.log_text());
    let reason = daemon
        .events()
        .into_iter()
        .find(|e| e["message"] == "object failed" && e["object"] == guarded.as_str())
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(reason.contains("failed calling webhook"), "the webhook's message is kept: {reason}");
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(cms.get_opt("free").await.unwrap().is_some(), "the other object is applied");
    assert!(daemon.wait_ready(WAIT).await, "one refused object leaves the daemon ready: {:?}", daemon.get("/readyz"));
    let failed_objects = daemon.metric_sum("gitward_objects_total", &["action=\"failed\""]);
    assert!(failed_objects >= 1.0, "the failure is counted: {failed_objects}");

    // The webhook gone, a push applies the object; the daemon was ready throughout.
    webhooks.delete(&ns, &DeleteParams::default()).await.expect("remove the webhook");
    repo.write("more.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n");
    repo.commit_and_push("a push once the webhook is gone");
    let applied = common::eventually(WAIT, || async { cms.get_opt("guarded").await.unwrap().is_some() }).await;
    assert!(applied, "{}", daemon.log_text());
    assert_eq!(daemon.get("/readyz").map(|(s, _)| s), Some(200));
}

/// A revision that does not parse (malformed YAML) applies nothing, and the last one applied
/// stays in force: the daemon stays ready, and `/readyz?verbose` names the file and document
/// of the error beside the revision applied; a fixed revision clears it.
#[tokio::test]
async fn a_revision_that_does_not_parse_keeps_the_daemon_ready_and_readyz_verbose_names_the_error() {
    let (env, _, repo) = common::setup_repo("ready-parse").await;
    let good = repo.push(&[("a.yaml", &common::cm("a", "1"))], "one ConfigMap");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", "");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    // The unit's line of `/readyz?verbose`, with the status code.
    let verbose = || {
        let (status, body) = daemon.get("/readyz?verbose").expect("/readyz answers");
        let lines: Vec<String> = body.lines().map(str::to_owned).collect();
        assert!(lines.len() == 3 && lines[1].starts_with("sandbox: "), "{body}");
        (status, lines[0].clone(), lines[2].clone())
    };

    repo.write("b.yaml", &format!("{}---\nkind: [unclosed\n", common::cm("b", "1")));
    let bad = repo.commit_and_push("a second document that does not parse");
    let failed = common::eventually(WAIT, || async { !daemon.logged("sync failed").is_empty() }).await;
    assert!(failed, "{}", daemon.log_text());
    let error = daemon.logged("sync failed")[0]["error"].as_str().unwrap_or("").to_owned();
    assert!(error.starts_with("b.yaml: document 2: "), "the error names file and document: {error}");
    let (status, body) = daemon.get("/readyz").expect("/readyz answers");
    assert_eq!(status, 200, "the last good revision is in force: {body}");
    // The failed sync is retried with backoff: the line ends with when.
    let (status, ready, line) = verbose();
    let expected = format!("[+]app ok: {} applied; not applied: revision {}: {error}", &good[..12], &bad[..12]);
    assert_eq!((status, ready.as_str()), (200, "ready"), "{line}: {}", daemon.log_text());
    let retry = line.strip_prefix(&expected).and_then(|rest| rest.strip_prefix("; backing off until "));
    assert!(retry.is_some_and(|at| at.ends_with('Z')), "{line}: {}", daemon.log_text());

    let fixed = repo.push(&[("b.yaml", &common::cm("b", "1"))], "the document fixed");
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let applied = common::eventually(WAIT, || async { cms.get_opt("b").await.unwrap().is_some() }).await;
    assert!(applied, "{}", daemon.log_text());
    let cleared = common::eventually(WAIT, || async { verbose().2 == format!("[+]app ok: {} applied", &fixed[..12]) });
    assert!(cleared.await, "{:?}: {}", verbose(), daemon.log_text());
    assert_eq!(verbose().0, 200);
}
