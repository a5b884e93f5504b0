//! `gitward suspend`, `resume`, `reconcile` and `sync --revision` against a running daemon: the
//! controls are annotations on the unit's ApplySet parent, which the daemon watches. "Nothing
//! applied" is asserted after the daemon logged that it did not act on the push.
//! No object's status is written here: `status` is `gitward status`, and `/proc/self/status` the test's own uid.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};

const WAIT: Duration = Duration::from_secs(120);
const CLI: Duration = Duration::from_secs(180);

/// A repository holding ConfigMap `a` with `value`.
fn repo_with(value: &str) -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.push(&[("a.yaml", &common::cm("a", value))], "first");
    repo
}

/// A daemon of unit `app` over `repo` (no self-heal: the tests' own edits stay), ready.
async fn daemon(
    dir: &std::path::Path,
    repo: &common::GitRepo,
    ns: &str,
    unit_extra: &str,
) -> (common::Daemon, std::path::PathBuf) {
    let (config, port) = common::app_daemon_config(dir, &repo.bare(), ns, "self_heal = false", unit_extra);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    (daemon, config)
}

async fn has_value(env: &common::TestEnv, v: &str) -> bool {
    common::cm_value_or_none(&env.client, &env.namespace, "a").await.as_deref() == Some(v)
}

/// Waits until the daemon logged a trigger of `kind` not acted on because `app` is suspended.
async fn not_acted_on(daemon: &common::Daemon, kind: &str) {
    let seen = common::eventually(WAIT, || async {
        daemon.logged("trigger not acted on: unit suspended").iter().any(|e| e["unit"] == "app" && e["trigger"] == kind)
    })
    .await;
    assert!(seen, "no {kind} trigger logged as not acted on: {}", daemon.log_text());
}

/// Asserts for `secs` seconds that ConfigMap `a` keeps `v`.
async fn keeps(env: &common::TestEnv, v: &str, secs: u64) {
    for _ in 0..secs * 4 {
        assert!(has_value(env, v).await, "ConfigMap a changed while the unit is suspended");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_suspended_unit_applies_no_push_until_resumed() {
    let env = common::setup("suspend").await;
    let repo = repo_with("one");
    let dir = tempfile::tempdir().unwrap();
    let (daemon, config) = daemon(dir.path(), &repo, &env.namespace, "").await;
    assert!(common::eventually(WAIT, || has_value(&env, "one")).await, "{}", daemon.log_text());

    let run = common::gitward(&["suspend", "app"], &config, CLI);
    assert_eq!((run.code, run.stdout.as_str()), (Some(0), "app: suspended\n"), "{}", run.stderr);
    let seen = common::eventually(WAIT, || async { !daemon.logged("unit suspended").is_empty() }).await;
    assert!(seen, "the daemon did not see the suspend: {}", daemon.log_text());
    repo.push(&[("a.yaml", &common::cm("a", "two"))], "second");
    not_acted_on(&daemon, "push").await;
    keeps(&env, "one", 3).await;
    assert_eq!(daemon.metric_sum("gitward_unit_suspended", &["unit=\"app\""]), 1.0);
    assert!(daemon.metric_sum("gitward_suspended_triggers_total", &["unit=\"app\"", "kind=\"push\""]) >= 1.0);
    assert_eq!(daemon.get("/readyz").map(|(s, _)| s), Some(200), "a suspended unit leaves the daemon ready");
    let status = common::gitward(&["status", "-o", "json"], &config, CLI);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    assert!(json["units"][0]["suspended"]["by"].as_str().is_some_and(|by| by.contains('@')), "{json}");

    let run = common::gitward(&["resume", "app"], &config, CLI);
    assert_eq!((run.code, run.stdout.as_str()), (Some(0), "app: resumed\n"), "{}", run.stderr);
    assert!(
        common::eventually(WAIT, || has_value(&env, "two")).await,
        "not applied after resume: {}",
        daemon.log_text()
    );
    assert_eq!(daemon.metric_sum("gitward_unit_suspended", &["unit=\"app\""]), 0.0);
}

#[tokio::test]
async fn suspend_in_the_config_applies_nothing_from_the_start() {
    let env = common::setup("suspend-config").await;
    let repo = repo_with("one");
    let dir = tempfile::tempdir().unwrap();
    let (daemon, config) = daemon(dir.path(), &repo, &env.namespace, "suspend = true").await;
    not_acted_on(&daemon, "startup").await;
    assert_eq!(
        common::cm_value_or_none(&env.client, &env.namespace, "a").await,
        None,
        "applied while suspended: {}",
        daemon.log_text()
    );
    let status = common::gitward(&["status"], &config, CLI);
    assert!(status.stdout.contains("  suspended  by config\n"), "{}", status.stdout);
}

#[tokio::test]
async fn reconcile_syncs_a_unit_now_and_prints_its_result() {
    let env = common::setup("reconcile").await;
    let repo = repo_with("one");
    let dir = tempfile::tempdir().unwrap();
    // The poll and resync are an hour away, self-heal is off and git does not move: only the
    // request can bring back what is deleted here.
    let (daemon, config) = daemon(dir.path(), &repo, &env.namespace, "").await;
    assert!(common::eventually(WAIT, || has_value(&env, "one")).await, "{}", daemon.log_text());
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    api.delete("a", &DeleteParams::default()).await.unwrap();

    let run = common::gitward(&["reconcile", "--timeout", "60", "app"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("app: healthy "), "{}", run.stdout);
    assert!(has_value(&env, "one").await, "not synced when reconcile returned: {}", daemon.log_text());
    assert!(daemon.logged("sync triggered").iter().any(|e| e["trigger"] == "reconcile"), "{}", daemon.log_text());

    api.delete("a", &DeleteParams::default()).await.unwrap();
    let run = common::gitward(&["reconcile", "--no-wait", "app"], &config, CLI);
    assert_eq!((run.code, run.stdout.as_str()), (Some(0), "app: sync requested\n"), "{}", run.stderr);
    assert!(common::eventually(WAIT, || has_value(&env, "one")).await, "{}", daemon.log_text());

    gitward_suspended_refuses_reconcile(&config);
}

/// A reconcile request that the daemon takes while a health wait runs (a Deployment that never
/// rolls out: its Pods crash-loop) waits for that wait's end; `reconcile` says so, not that no
/// daemon handled it.
#[tokio::test]
async fn reconcile_behind_a_health_wait_says_so() {
    let (env, _, repo) = common::setup_repo("reconcile-wait").await;
    repo.push(&[("web.yaml", &common::deployment("web", "nginx:fail", 1))], "a Deployment to wait for");
    let dir = tempfile::tempdir().unwrap();
    let (daemon, config) = daemon(dir.path(), &repo, &env.namespace, "health_timeout = \"10m\"").await;
    let waiting = common::eventually(WAIT, || async {
        daemon.events().iter().any(|e| e["message"] == "health" && e["health"] == "InProgress")
    })
    .await;
    assert!(waiting, "no health wait: {}", daemon.log_text());

    let run = common::gitward(&["reconcile", "--timeout", "20", "app"], &config, CLI);
    assert_eq!(run.code, Some(2), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("queued behind a health wait"), "{}", run.stderr);
    assert!(run.stderr.contains("Deployment/"), "the wait is named: {}", run.stderr);
    assert!(!run.stderr.contains("no daemon handled"), "{}", run.stderr);
}

/// A suspended unit's reconcile is refused (exit 2): the daemon would not act on it.
fn gitward_suspended_refuses_reconcile(config: &std::path::Path) {
    assert_eq!(common::gitward(&["suspend", "app"], config, CLI).code, Some(0));
    let run = common::gitward(&["reconcile", "app"], config, CLI);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("suspended"), "{}", run.stderr);
}

#[tokio::test]
async fn a_revision_synced_by_hand_while_suspended_stays_applied() {
    let env = common::setup("rollback").await;
    let repo = repo_with("one");
    let old = repo.git(&["rev-parse", "HEAD"], &repo.work()).trim().to_owned();
    repo.push(&[("a.yaml", &common::cm("a", "two"))], "second");
    let dir = tempfile::tempdir().unwrap();
    let (daemon, config) = daemon(dir.path(), &repo, &env.namespace, "").await;
    assert!(common::eventually(WAIT, || has_value(&env, "two")).await, "{}", daemon.log_text());

    assert_eq!(common::gitward(&["suspend", "app"], &config, CLI).code, Some(0));
    let seen = common::eventually(WAIT, || async { !daemon.logged("unit suspended").is_empty() }).await;
    assert!(seen, "{}", daemon.log_text());
    let run = common::gitward(&["sync", "--revision", &old, "app"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(has_value(&env, "one").await, "the old revision was not applied: {}", run.stderr);

    repo.push(&[("a.yaml", &common::cm("a", "three"))], "third");
    not_acted_on(&daemon, "push").await;
    keeps(&env, "one", 3).await;
}

/// R1 then R2 applied; suspended; R1 synced by hand (a rollback); an R3 that does not parse
/// pushed; resumed: the daemon syncs the tip, which fails and is named, and self-heal keeps
/// R1 — the revision applied — rather than writing back R2, the one before the rollback.
#[tokio::test]
async fn a_rollback_survives_resume_when_the_tip_does_not_parse() {
    let env = common::setup("rollback-resume").await;
    let repo = repo_with("one");
    let r1 = repo.git(&["rev-parse", "HEAD"], &repo.work()).trim().to_owned();
    let dir = tempfile::tempdir().unwrap();
    // Self-heal on: the CLI's writes while suspended are drift the daemon sees.
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", "");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    assert!(common::eventually(WAIT, || has_value(&env, "one")).await, "{}", daemon.log_text());
    repo.push(&[("a.yaml", &common::cm("a", "two"))], "second");
    let r2 = repo.git(&["rev-parse", "HEAD"], &repo.work()).trim().to_owned();
    let run = common::gitward(&["reconcile", "--timeout", "60", "app"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(has_value(&env, "two").await, "{}", daemon.log_text());

    assert_eq!(common::gitward(&["suspend", "app"], &config, CLI).code, Some(0));
    let seen = common::eventually(WAIT, || async { !daemon.logged("unit suspended").is_empty() }).await;
    assert!(seen, "{}", daemon.log_text());
    let run = common::gitward(&["sync", "--revision", &r1, "app"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(has_value(&env, "one").await, "the rollback was not applied: {}", run.stderr);
    repo.push(&[("a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: [not, a, map\n")], "broken");
    let r3 = repo.git(&["rev-parse", "HEAD"], &repo.work()).trim().to_owned();
    not_acted_on(&daemon, "push").await;

    assert_eq!(common::gitward(&["resume", "app"], &config, CLI).code, Some(0));
    let failed =
        common::eventually(WAIT, || async { daemon.logged("sync failed").iter().any(|e| e["unit"] == "app") }).await;
    assert!(failed, "the tip's failure was not logged: {}", daemon.log_text());
    // Self-heal runs 500 ms after a drift event: well past it, the rollback's value stays.
    for _ in 0..20 {
        assert!(
            has_value(&env, "one").await,
            "resume wrote back the revision before the rollback: {}",
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let status = common::gitward(&["status", "-o", "json"], &config, CLI);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let unit = &json["units"][0];
    assert_eq!(unit["last"]["revision"], r1.as_str(), "status names the rollback as applied: {json}");
    assert_ne!(unit["last"]["revision"], r2.as_str());
    assert_eq!(unit["last_attempted_revision"], r3.as_str(), "{json}");
    assert!(unit["last_error"].as_str().is_some_and(|e| !e.is_empty()), "the tip's failure is named: {json}");
    let adopted = daemon.logged("recorded revision adopted: self-heal heals toward it");
    assert!(adopted.iter().any(|e| e["revision"] == r1.as_str()), "{}", daemon.log_text());
}

#[tokio::test]
async fn plain_sync_skips_a_suspended_unit_and_says_so_unless_told() {
    let env = common::setup("sync-suspended").await;
    let repo = repo_with("one");
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "health_timeout = \"0s\"");
    let config = common::config_file(dir.path(), &unit);
    assert_eq!(common::gitward(&["sync"], &config, CLI).code, Some(0));
    // Suspended by a user with neither $USER nor $LOGNAME (a container's): named by uid.
    let run = common::gitward_in(&["env", "-u", "USER", "-u", "LOGNAME"], &["suspend", "app"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let status = common::gitward(&["status", "-o", "json"], &config, CLI);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let by = status["units"][0]["suspended"]["by"].as_str().unwrap_or_default().to_owned();
    let uid = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = uid.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap().split_whitespace().next().unwrap().to_owned();
    assert!(by.starts_with(&format!("uid:{uid}@")), "suspended-by {by:?}");
    repo.push(&[("a.yaml", &common::cm("a", "two"))], "second");
    let run = common::gitward(&["sync"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("app: not synced: suspended"), "{}", run.stdout);
    assert!(has_value(&env, "one").await, "a suspended unit was applied");
    let run = common::gitward(&["sync", "--include-suspended"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(has_value(&env, "two").await, "--include-suspended applies it: {}", run.stdout);
    // `suspend = true` in the config: the same.
    repo.push(&[("a.yaml", &common::cm("a", "three"))], "third");
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "health_timeout = \"0s\"\nsuspend = true");
    let run = common::gitward(&["resume", "app"], &common::config_file(dir.path(), &unit), CLI);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let run = common::gitward(&["sync"], &common::config_file(dir.path(), &unit), CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("app: not synced: suspended"), "{}", run.stdout);
    assert!(has_value(&env, "two").await, "a unit suspended by its config was applied");
}
