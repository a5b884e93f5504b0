//! The per-unit gauges of `gitward run`'s `/metrics` against the real apiserver and a real
//! repository: `gitward_unit_ready` and its reason through a good, a refused and a fixed
//! revision, `gitward_unit_failing_since_seconds`, `gitward_unit_objects`, and
//! `gitward_objects_health` counted as `gitward status --json` counts the same unit.

use crate::common;

use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const CLI: Duration = Duration::from_secs(60);

/// The samples of family `name` in `daemon`'s /metrics whose labels contain every one of
/// `filters`, as (line, value).
fn samples(daemon: &common::Daemon, name: &str, filters: &[&str]) -> Vec<(String, f64)> {
    let Some((_, body)) = daemon.get("/metrics") else { return Vec::new() };
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| Some((l.to_owned(), l.rsplit(' ').next()?.parse::<f64>().ok()?)))
        .collect()
}

/// The one `gitward_unit_ready` series of unit `app`, as (reason, value); `None` while there is
/// none or more than one.
fn ready(daemon: &common::Daemon) -> Option<(String, f64)> {
    let series = samples(daemon, "gitward_unit_ready", &["unit=\"app\""]);
    let [(line, value)] = series.as_slice() else { return None };
    let reason = line.split("reason=\"").nth(1)?.split('"').next()?.to_owned();
    Some((reason, *value))
}

/// Waits until unit `app`'s one ready series has `reason`; panics with the log if it never does.
async fn wait_for_reason(daemon: &common::Daemon, reason: &str) {
    let seen = common::eventually(WAIT, || async { ready(daemon).is_some_and(|(r, _)| r == reason) }).await;
    assert!(seen, "gitward_unit_ready never had reason {reason} (now {:?}): {}", ready(daemon), daemon.log_text());
}

/// A push of a ConfigMap the API server refuses (its namespace does not exist) makes the unit
/// not ready with reason `failed` and starts its failure streak; a push that removes it makes
/// it ready again and ends the streak. The members and readiness are read off /metrics.
#[tokio::test]
async fn unit_ready_and_failing_since_follow_a_refused_and_a_fixed_revision() {
    let (env, _, repo) = common::setup_repo("metrics-ready").await;
    repo.push(&[("a.yaml", &common::cm("a", "1")), ("b.yaml", &common::cm("b", "1"))], "two ConfigMaps");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", "");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;

    wait_for_reason(&daemon, "healthy").await;
    assert_eq!(ready(&daemon), Some(("healthy".into(), 1.0)));
    assert_eq!(daemon.metric_sum("gitward_unit_objects", &["unit=\"app\""]), 2.0);
    assert!(samples(&daemon, "gitward_unit_failing_since_seconds", &["unit=\"app\""]).is_empty());
    assert!(daemon.metric_sum("gitward_unit_cache_bytes", &["unit=\"app\""]) > 0.0, "the cache holds two members");
    assert_eq!(samples(&daemon, "gitward_unit_render_seconds", &["unit=\"app\""]).len(), 1);
    assert_eq!(samples(&daemon, "gitward_unit_apply_seconds", &["unit=\"app\""]).len(), 1);

    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    repo.write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: no-such-ns-m\n");
    repo.commit_and_push("an object the API server refuses");
    wait_for_reason(&daemon, "failed").await;
    assert_eq!(ready(&daemon), Some(("failed".into(), 0.0)), "one series, not ready");
    let since = samples(&daemon, "gitward_unit_failing_since_seconds", &["unit=\"app\""]);
    assert_eq!(since.len(), 1, "{since:?}");
    assert!(since[0].1 >= before.floor(), "the streak started with this push: {since:?}, pushed at {before}");
    assert_eq!(daemon.metric_sum("gitward_unit_objects", &["unit=\"app\""]), 2.0, "the refused one is no member");

    repo.remove("bad.yaml");
    repo.commit_and_push("without the refused object");
    wait_for_reason(&daemon, "healthy").await;
    assert_eq!(ready(&daemon), Some(("healthy".into(), 1.0)));
    let since = samples(&daemon, "gitward_unit_failing_since_seconds", &["unit=\"app\""]);
    assert!(since.is_empty(), "the streak ended: {since:?}");
}

/// `gitward_objects_health{unit="app"}` by health, and the `health` counts of `gitward status
/// -o json` for the same unit.
fn both_counts(daemon: &common::Daemon, config: &std::path::Path) -> (Vec<f64>, Vec<f64>) {
    let states = ["healthy", "progressing", "degraded"];
    let metric = states
        .iter()
        .map(|h| daemon.metric_sum("gitward_objects_health", &["unit=\"app\"", &format!("health=\"{h}\"")]))
        .collect();
    let run = common::gitward(&["status", "-o", "json"], config, CLI);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("status JSON");
    let unit = &json["units"][0];
    assert_eq!(unit["unit"], "app", "{json}");
    let status = states.iter().map(|h| unit["health"][h].as_f64().expect("a count")).collect();
    (metric, status)
}

/// Three ConfigMaps and two Deployments, in progress: `web`'s Pod is ready only after 90 s
/// (`gitward.test/ready-after`), `stuck`'s crash-loops and the deployment controller fails its
/// rollout at the 10 s progress deadline. After the first
/// sync's wait times out, and after a push that changes one ConfigMap while one Deployment is
/// `Failed`, `gitward_objects_health` counts every member by health exactly as `gitward status`
/// does (the members the sync did not change included).
#[tokio::test]
async fn objects_health_agrees_with_gitward_status() {
    let (env, _, repo) = common::setup_repo("metrics-health").await;
    for name in ["a", "b", "c"] {
        repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    }
    repo.write("web.yaml", &common::deployment_with("web", "nginx", 1, 600, "90s"));
    repo.write("stuck.yaml", &common::deployment_with("stuck", "nginx:fail", 1, 10, "0s"));
    repo.commit_and_push("three ConfigMaps and two Deployments");
    let dir = tempfile::tempdir().unwrap();
    let unit_extra = "health_timeout = \"2s\"";
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", unit_extra);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;

    wait_for_reason(&daemon, "progressing").await;
    let (metric, status) = both_counts(&daemon, &config);
    assert_eq!(metric, status, "metric vs status after the wait timed out: {}", daemon.log_text());
    assert_eq!(metric, [3.0, 2.0, 0.0]);

    repo.push(&[("a.yaml", &common::cm("a", "2"))], "one ConfigMap changed");
    wait_for_reason(&daemon, "degraded").await;
    let (metric, status) = both_counts(&daemon, &config);
    assert_eq!(metric, status, "metric vs status after a sync that changed one ConfigMap: {}", daemon.log_text());
    assert_eq!(metric, [3.0, 1.0, 1.0]);
}
