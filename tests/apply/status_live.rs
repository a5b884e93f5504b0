//! `gitward status` while the daemon works, against the real apiserver: during a health wait it
//! names the revision in the cluster, when it was applied and what is waited for; a ref that
//! resolves to no revision is the failed attempt, not the revision applied; a reload during a
//! wait records the wait's end and names no stale revision. The test cluster's deployment
//! controller rolls the Deployments out; a Pod's `gitward.test/ready-after` annotation
//! (tests/cluster/stages.yaml) holds a rollout in progress for as long as a test looks at it.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// The parent's `gitward.dev/` annotations.
async fn record(client: &kube::Client, ns: &str) -> BTreeMap<String, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let annotations = api.get("gitward-app").await.unwrap().metadata.annotations.unwrap_or_default();
    annotations.into_iter().filter(|(k, _)| k.starts_with("gitward.dev/")).collect()
}

/// `gitward status --config <config>`: exit code and stdout.
fn status(config: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["status", "--config"])
        .arg(config)
        .output()
        .expect("gitward status runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string())
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

fn short(revision: &str) -> &str {
    &revision[..7]
}

/// A sync complete event of `revision` with `wait`.
fn completed(events: &[Value], revision: &str, wait: &str) -> bool {
    events.iter().any(|e| e["message"] == "sync complete" && e["revision"] == revision && e["wait"] == wait)
}

#[tokio::test]
async fn during_a_wait_status_names_the_new_revision_its_apply_time_and_what_is_waited_for() {
    let (env, ns, repo) = common::setup_repo("live-wait").await;
    // The deployment controller rolls each revision out; v1's Pod is ready 2 s after it is made.
    repo.write("web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "2s"));
    let first = repo.push(&[("settings.yaml", &common::cm("settings", "1"))], "web v1");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &ns, "", "health_timeout = \"10m\"");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let waiting_on = |generation: i64| {
        let client = env.client.clone();
        let ns = ns.clone();
        async move {
            let api: Api<Deployment> = Api::namespaced(client, &ns);
            api.get("web").await.ok().and_then(|d| d.metadata.generation) == Some(generation)
        }
    };
    assert!(common::eventually(WAIT, || waiting_on(1)).await, "{}", daemon.log_text());
    assert!(
        common::eventually(WAIT, || async { completed(&daemon.events(), &first, "healthy") }).await,
        "{}",
        daemon.log_text()
    );

    // A new revision: applied, and its Deployment not yet rolled out by its controller (its new
    // Pod is ready 10 s after it is made).
    let second = repo.push(&[("web.yaml", &common::deployment_with("web", "nginx:1.28", 1, 600, "10s"))], "web v2");
    let recorded = common::eventually(WAIT, || async {
        record(&env.client, &ns).await.get("gitward.dev/last-revision") == Some(&second)
    })
    .await;
    assert!(recorded, "the new revision is not recorded during the wait: {:?}", record(&env.client, &ns).await);
    let r = record(&env.client, &ns).await;
    let applied = r["gitward.dev/last-applied-at"].clone();
    let since = r.get("gitward.dev/waiting-since").cloned().unwrap_or_else(|| panic!("no wait recorded: {r:?}"));
    assert!(!completed(&daemon.events(), &second, "healthy"), "the wait is still running: {}", daemon.log_text());
    let (code, text) = status(&config);
    assert_eq!(code, 1, "{text}");
    let lines = lines(&text);
    assert_eq!(
        lines[0],
        format!("app: waiting {}, applied {applied} (2 objects: 1 healthy, 1 progressing)", short(&second)),
        "{text}"
    );
    assert!(lines.contains(&format!("  revision   {second}").as_str()), "{text}");
    assert!(lines.contains(&format!("  applied    {applied}").as_str()), "{text}");
    assert!(
        lines.contains(&format!("  result     waiting (since {since}, for Deployment/{ns}/web)").as_str()),
        "{text}"
    );
    assert!(!text.contains("  attempted  "), "the attempt is the revision applied: {text}");
    assert!(text.contains(&format!("  unhealthy  Deployment/{ns}/web InProgress")), "{text}");

    // The controller rolls it out: the wait ends, the result replaces the wait, and `applied`
    // stays the apply's time, before the wait's end.
    assert!(
        common::eventually(WAIT, || async { completed(&daemon.events(), &second, "healthy") }).await,
        "{}",
        daemon.log_text()
    );
    let ended = common::eventually(WAIT, || async {
        record(&env.client, &ns).await.get("gitward.dev/last-result").map(String::as_str) == Some("healthy")
    })
    .await;
    assert!(ended, "{:?}", record(&env.client, &ns).await);
    let r = record(&env.client, &ns).await;
    assert!(!r.contains_key("gitward.dev/waiting-since") && !r.contains_key("gitward.dev/waiting-for"), "{r:?}");
    assert_eq!(r["gitward.dev/last-applied-at"], applied, "applied is the apply's time, not the wait's end");
    let end = daemon
        .events()
        .into_iter()
        .find(|e| e["message"] == "sync complete" && e["revision"] == second.as_str())
        .unwrap();
    let end: jiff::Timestamp = end["timestamp"].as_str().unwrap().parse().unwrap();
    let applied_at: jiff::Timestamp = applied.parse().unwrap();
    assert!(applied_at <= end, "applied {applied_at} is after the wait's end {end}");
    let (code, text) = status(&config);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("app: healthy {}, applied {applied} (2 objects: 2 healthy)", short(&second)));
    assert!(lines.contains(&"  result     healthy"), "{text}");
}

#[tokio::test]
async fn a_ref_that_does_not_resolve_is_the_failed_attempt_and_the_applied_revision_keeps_its_result() {
    let (env, ns, repo) = common::setup_repo("live-ref").await;
    let applied = repo.push(&[("settings.yaml", &common::cm("settings", "1"))], "settings");
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &ns, "");
    let config = common::config_file(dir.path(), &unit);
    let run = common::gitward(&["sync"], &config, WAIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let at = record(&env.client, &ns).await["gitward.dev/last-applied-at"].clone();

    // The unit now follows a tag that does not exist.
    let config = common::config_file(dir.path(), &unit.replace("ref = \"main\"", "ref = \"v9.9.9\""));
    let run = common::gitward(&["sync"], &config, WAIT);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let r = record(&env.client, &ns).await;
    assert_eq!(r.get("gitward.dev/last-attempted-ref").map(String::as_str), Some("v9.9.9"), "{r:?}");
    assert_eq!(r.get("gitward.dev/last-attempted-revision"), None, "no revision was attempted: {r:?}");
    assert_eq!(r.get("gitward.dev/last-revision"), Some(&applied), "{r:?}");
    let (code, text) = status(&config);
    assert_eq!(code, 1, "{text}");
    let lines = lines(&text);
    assert_eq!(
        lines[0],
        format!(
            "app: failed {}, applied {at} (1 object: 1 healthy); ref v9.9.9 (not resolved) failed",
            short(&applied)
        ),
        "{text}"
    );
    assert!(lines.contains(&format!("  revision   {applied}").as_str()), "{text}");
    assert!(lines.contains(&"  result     applied"), "the applied revision keeps its result: {text}");
    assert!(lines.contains(&"  attempted  ref v9.9.9 (not resolved)"), "{text}");
    assert!(!text.contains(&format!("{} failed", short(&applied))), "the applied revision named failed: {text}");
    assert!(lines.iter().any(|l| l.starts_with("  error      ") && l.contains("v9.9.9")), "{text}");
}

#[tokio::test]
async fn a_reload_during_a_wait_records_its_end_and_names_no_stale_revision() {
    let (env, ns, repo) = common::setup_repo("live-reload").await;
    // The deployment controller rolls it out; its Pod is ready 2 s after it is made.
    let first = repo.push(&[("web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "2s"))], "web v1");
    let dir = tempfile::tempdir().unwrap();
    let unit =
        |timeout: &str| common::unit_toml("app", &repo.bare(), "", &ns, &format!("health_timeout = \"{timeout}\""));
    let (config, port) = common::daemon_config(dir.path(), "", "", &unit("10m"));
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let in_progress = |e: &Value| e["message"] == "health" && e["health"] == "InProgress";
    assert!(
        common::eventually(WAIT, || async { daemon.events().iter().any(in_progress) }).await,
        "{}",
        daemon.log_text()
    );
    assert!(
        common::eventually(WAIT, || async { completed(&daemon.events(), &first, "healthy") }).await,
        "{}",
        daemon.log_text()
    );

    // A broken revision: not applied, recorded as the failed attempt.
    let broken = repo.push(&[("broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b\n")], "broken YAML");
    let failed = common::eventually(WAIT, || async {
        record(&env.client, &ns).await.get("gitward.dev/last-attempted-revision") == Some(&broken)
    })
    .await;
    assert!(failed, "{:?}", record(&env.client, &ns).await);

    // The fix, with a new Deployment image: applied, and waited on. While it is, the parent
    // names the fix as attempted and applied, with no error.
    repo.remove("broken.yaml");
    // Its new Pods crash-loop: the wait lasts until the reload below.
    let fixed = repo.push(&[("web.yaml", &common::deployment("web", "nginx:fail-1.28", 1))], "fixed, web v2");
    let waiting =
        common::eventually(WAIT, || async { record(&env.client, &ns).await.contains_key("gitward.dev/waiting-since") })
            .await;
    let r = record(&env.client, &ns).await;
    assert!(waiting, "{r:?}");
    assert_eq!(r.get("gitward.dev/last-revision"), Some(&fixed), "{r:?}");
    assert_eq!(r.get("gitward.dev/last-attempted-revision"), Some(&fixed), "a stale attempt: {r:?}");
    assert_eq!(r.get("gitward.dev/last-error"), None, "{r:?}");
    let (_, text) = status(&config);
    assert!(lines(&text)[0].starts_with(&format!("app: waiting {}, ", short(&fixed))), "{text}");
    assert!(!text.contains(short(&broken)), "status names the broken revision fixed since: {text}");

    // SIGHUP with the unit's settings changed restarts it in its wait: the old task ends the
    // wait and records it before the new one syncs.
    common::write_daemon_config(&config, port, "", "", &unit("9m"));
    daemon.signal("HUP");
    let cancelled = common::eventually(WAIT, || async { completed(&daemon.events(), &fixed, "cancelled") }).await;
    assert!(cancelled, "the wait ended by the reload is not recorded: {}", daemon.log_text());
    let resynced =
        |e: &Value| e["message"] == "sync triggered" && e["trigger"] == "reload" && e["revision"] == fixed.as_str();
    assert!(common::eventually(WAIT, || async { daemon.events().iter().any(resynced) }).await, "{}", daemon.log_text());
    let events = daemon.events();
    let ended = events.iter().position(|e| completed(std::slice::from_ref(e), &fixed, "cancelled")).unwrap();
    let restarted = events.iter().position(resynced).unwrap();
    assert!(ended < restarted, "the old wait ended after the new task began: {}", daemon.log_text());
    let r = record(&env.client, &ns).await;
    assert_eq!(r.get("gitward.dev/last-attempted-revision"), Some(&fixed), "{r:?}");
    assert_eq!(r.get("gitward.dev/last-revision"), Some(&fixed), "{r:?}");
    assert_eq!(r.get("gitward.dev/last-error"), None, "{r:?}");
    let (_, text) = status(&config);
    assert!(!text.contains(short(&broken)), "{text}");
}
