//! A unit whose git remote refuses it: after the failed fetch the daemon records on the ApplySet
//! parent when it tries again (`gitward.dev/retry-at`), and `gitward status`, a separate process
//! reading the cluster, says the unit backs off until then, beside the error; the last good
//! revision stays applied. The next successful sync clears both.

use std::time::Duration;

use crate::common;

const WAIT: Duration = Duration::from_secs(120);
const CLI: Duration = Duration::from_secs(60);

/// `gitward status --sync app -o json`: its exit code and the unit's entry.
fn status_json(config: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let run = common::gitward(&["status", "--sync", "app", "-o", "json"], config, CLI);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
    (run.code, json["units"][0].clone())
}

/// The unit's `retry_at`, when it is at least `ahead` in the future.
fn retry_ahead(unit: &serde_json::Value, ahead: Duration) -> Option<jiff::Timestamp> {
    let at: jiff::Timestamp = unit["retry_at"].as_str()?.parse().ok()?;
    let ahead = jiff::SignedDuration::try_from(ahead).ok()?;
    (at > jiff::Timestamp::now().checked_add(ahead).ok()?).then_some(at)
}

/// The remote moved away under a running daemon (polling every second): `gitward status` says
/// `backing off until <T>` with T ahead and the fetch error, exit 1, the last good revision
/// still recorded and applied; back in place, the retry syncs and `status` is clean, exit 0.
#[tokio::test]
async fn status_says_a_unit_with_a_refusing_remote_backs_off_until_its_next_try() {
    let (env, _, repo) = common::setup_repo("backoff-status").await;
    let good = repo.push(&[("a.yaml", &common::cm("a", "1"))], "good");
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "");
    let daemon = common::polling_daemon(dir.path(), "", &unit);
    let config = dir.path().join("gitward.toml");
    assert!(daemon.wait_ready(WAIT).await, "not ready: {}", daemon.log_text());
    let (code, state) = status_json(&config);
    assert_eq!(code, Some(0), "synced: {state}");
    assert!(state["retry_at"].is_null(), "no retry before a failure: {state}");

    let moved = repo.bare().with_extension("moved");
    std::fs::rename(repo.bare(), &moved).unwrap();
    // Retries come at 1 s, 2 s, 4 s…: wait for one at least 8 s ahead, so the text run that
    // follows still sees it ahead.
    let mut seen = serde_json::Value::Null;
    let backing_off = common::eventually(WAIT, || {
        seen = status_json(&config).1;
        std::future::ready(retry_ahead(&seen, Duration::from_secs(8)).is_some())
    })
    .await;
    assert!(backing_off, "no retry time ahead recorded: {seen}\n{}", daemon.log_text());
    let error = seen["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("fetch from") && error.contains(repo.bare().to_str().unwrap()), "{seen}");
    assert_eq!(seen["last"]["revision"], good.as_str(), "the last good revision stays recorded: {seen}");
    assert_eq!(seen["now"], "failed", "{seen}");

    let run = common::gitward(&["status", "--sync", "app"], &config, CLI);
    assert_eq!(run.code, Some(1), "a unit backing off is not healthy: {}", run.stdout);
    let line = run.stdout.lines().next().unwrap_or_default();
    let (_, until) = line.split_once("; backing off until ").unwrap_or_else(|| panic!("{}", run.stdout));
    let until: jiff::Timestamp = until.parse().unwrap_or_else(|e| panic!("{until}: {e}"));
    assert!(until > jiff::Timestamp::now(), "the next try is ahead: {line}");
    assert!(line.contains(" failed; backing off until "), "beside the failed attempt: {line}");
    assert!(run.stdout.contains(&format!("  error      {error}\n  retry at   {until}\n")), "{}", run.stdout);
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let a = api.get("a").await.unwrap();
    assert_eq!(a.data.unwrap()["value"], "1", "the last good revision stays applied");

    std::fs::rename(&moved, repo.bare()).unwrap();
    let mut last = (None, serde_json::Value::Null);
    let cleared = common::eventually(WAIT, || {
        last = status_json(&config);
        std::future::ready(last.0 == Some(0))
    })
    .await;
    assert!(cleared, "the retry did not sync cleanly: {:?}\n{}", last, daemon.log_text());
    assert!(last.1["retry_at"].is_null() && last.1["last_error"].is_null(), "cleared: {}", last.1);
    let run = common::gitward(&["status", "--sync", "app"], &config, CLI);
    assert!(!run.stdout.contains("backing off") && !run.stdout.contains("retry"), "{}", run.stdout);
}
