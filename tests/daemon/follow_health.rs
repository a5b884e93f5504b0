//! Health followed between syncs under `gitward run`, against the real apiserver (it runs no
//! controllers: the tests write a Deployment's status subresource as the deployment controller
//! would). A Deployment that fails outside any health wait, and recovers, moves the unit's
//! readiness reason, `gitward_objects_health`, the parent's `gitward.dev/last-result` and the
//! dashboard within seconds; a `gitward reconcile` after such a failure records what it judged,
//! not `healthy`; the dashboard's health columns count the members; a self-heal that re-applied
//! nothing gives no `DriftCorrected` Event.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// A generous bound for the daemon's start and first sync.
const WAIT: Duration = Duration::from_secs(60);
/// The bound the acceptance puts on following a change of health: 10 s.
const FOLLOW: Duration = Duration::from_secs(10);
const CLI: Duration = Duration::from_secs(60);

/// Writes Deployment `web`'s status as a deployment controller whose rollout passed its
/// progress deadline would (kstatus `Failed`).
async fn deadline_exceeded(client: &kube::Client, ns: &str) {
    let status = json!({"status": {"observedGeneration": 1, "conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": "ReplicaSet \"web-1\" has timed out progressing."},
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}});
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    api.patch_status("web", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// The parent's `gitward.dev/last-result`.
async fn last_result(client: &kube::Client, ns: &str) -> Option<String> {
    let parent = Api::<Secret>::namespaced(client.clone(), ns).get_opt("gitward-app").await.unwrap()?;
    parent.metadata.annotations?.get("gitward.dev/last-result").cloned()
}

/// The one `gitward_unit_ready` series of unit `app`: (reason, value).
fn ready(daemon: &common::Daemon) -> Option<(String, f64)> {
    let (_, body) = daemon.get("/metrics")?;
    let series: Vec<&str> = body.lines().filter(|l| l.starts_with("gitward_unit_ready{unit=\"app\"")).collect();
    let [line] = series.as_slice() else { return None };
    let reason = line.split("reason=\"").nth(1)?.split('"').next()?.to_owned();
    Some((reason, line.rsplit(' ').next()?.parse().ok()?))
}

fn degraded_members(daemon: &common::Daemon) -> f64 {
    daemon.metric_sum("gitward_objects_health", &["unit=\"app\"", "health=\"degraded\""])
}

/// The dashboard's row of unit `app`.
fn dashboard_row(daemon: &common::Daemon) -> String {
    let Some((200, page)) = daemon.get("/") else { return String::new() };
    let Some(start) = page.find("<tr data-unit=\"app\">") else { return String::new() };
    let row = &page[start..];
    row[..row.find("</tr>").unwrap_or(row.len())].to_owned()
}

/// Whether, within [`FOLLOW`], the unit reads `reason` on every side: readiness, the degraded
/// member count, the parent's record and the dashboard.
async fn everywhere(daemon: &common::Daemon, env: &common::TestEnv, reason: &str, degraded: f64) -> bool {
    common::eventually(FOLLOW, || async {
        ready(daemon).is_some_and(|(r, _)| r == reason)
            && degraded_members(daemon) == degraded
            && last_result(&env.client, &env.namespace).await.as_deref() == Some(reason)
            && dashboard_row(daemon).contains(&format!("class=\"result-{reason}\""))
    })
    .await
}

/// A daemon with the dashboard over a repository of Deployment `web` and ConfigMap `a`, its
/// first wait ended healthy (the test rolls `web` out). The repository is kept while the daemon
/// runs.
async fn healthy_daemon(
    env: &common::TestEnv,
    dir: &std::path::Path,
) -> (common::Daemon, std::path::PathBuf, common::GitRepo) {
    let repo = common::GitRepo::new();
    repo.write("web.yaml", &common::deployment("web", "nginx:1.27", 1));
    repo.write("a.yaml", &common::cm("a", "1"));
    repo.commit_and_push("web and a");
    let ui = "\n[daemon.ui]\nenabled = true\n";
    let (config, port) = common::app_daemon_config(dir, &repo.bare(), &env.namespace, ui, "health_timeout = \"2m\"");
    let daemon = common::Daemon::start(&config, port, &[]);
    assert!(daemon.wait_ready(WAIT).await, "not ready: {}", daemon.log_text());
    common::roll_out(&env.client, &env.namespace).await;
    let healthy = common::eventually(WAIT, || async { ready(&daemon) == Some(("healthy".into(), 1.0)) }).await;
    assert!(healthy, "the first wait did not end healthy: {:?}: {}", ready(&daemon), daemon.log_text());
    (daemon, config, repo)
}

#[tokio::test]
async fn a_deployment_that_fails_and_recovers_between_syncs_is_followed_within_seconds() {
    let env = common::setup("follow-health").await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _config, _repo) = healthy_daemon(&env, dir.path()).await;
    assert!(everywhere(&daemon, &env, "healthy", 0.0).await, "{}", daemon.log_text());

    deadline_exceeded(&env.client, &env.namespace).await;
    let followed = everywhere(&daemon, &env, "degraded", 1.0).await;
    assert!(
        followed,
        "not degraded within {FOLLOW:?}: ready {:?}, degraded members {}, last-result {:?}, row {}: {}",
        ready(&daemon),
        degraded_members(&daemon),
        last_result(&env.client, &env.namespace).await,
        dashboard_row(&daemon),
        daemon.log_text()
    );
    assert_eq!(ready(&daemon), Some(("degraded".into(), 0.0)));
    let changed = daemon.logged("health changed");
    assert!(changed.iter().any(|e| e["result"] == "degraded" && e["was"] == "healthy"), "{}", daemon.log_text());
    assert!(daemon.logged("sync complete").iter().all(|e| e["trigger"] != "drift"), "no sync ran for it");

    common::roll_out(&env.client, &env.namespace).await;
    let recovered = everywhere(&daemon, &env, "healthy", 0.0).await;
    assert!(recovered, "not healthy again within {FOLLOW:?}: {:?}: {}", ready(&daemon), daemon.log_text());
    assert_eq!(ready(&daemon), Some(("healthy".into(), 1.0)));

    let params = ListParams::default().fields("regarding.kind=Secret,regarding.name=gitward-app");
    let events = Api::<Event>::namespaced(env.client.clone(), &env.namespace);
    let reasons = || async {
        let items = events.list(&params).await.unwrap().items;
        items.into_iter().filter_map(|e| e.reason).collect::<Vec<_>>()
    };
    let both = common::eventually(FOLLOW, || async {
        let r = reasons().await;
        r.iter().any(|r| r == "HealthDegraded") && r.iter().any(|r| r == "HealthRecovered")
    })
    .await;
    assert!(both, "{:?}", reasons().await);
}

#[tokio::test]
async fn a_reconcile_after_a_failure_outside_a_wait_records_what_it_judged() {
    let env = common::setup("follow-reconcile").await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, config, _repo) = healthy_daemon(&env, dir.path()).await;
    let completed = daemon.logged("sync complete").len();

    deadline_exceeded(&env.client, &env.namespace).await;
    let run = common::gitward(&["reconcile", "--timeout", "60", "app"], &config, CLI);
    assert!(run.stdout.starts_with("app: degraded "), "{}\n{}", run.stdout, run.stderr);
    let logged = daemon.logged("sync complete");
    let reconciled: Vec<&Value> = logged[completed..].iter().collect();
    assert_eq!(reconciled.len(), 1, "the reconcile's sync alone: {}", daemon.log_text());
    assert_eq!(reconciled[0]["result"], "degraded", "{:?}", reconciled[0]);
    assert_ne!(reconciled[0]["wait"], "none", "the moved Deployment was judged: {:?}", reconciled[0]);
    assert_eq!(last_result(&env.client, &env.namespace).await.as_deref(), Some("degraded"));
    assert_eq!(ready(&daemon).map(|(r, _)| r).as_deref(), Some("degraded"));
    assert_eq!(degraded_members(&daemon), 1.0, "the alert's metric moves");
}

/// Three ConfigMaps: nothing bears health, no wait runs (`wait="none"`); the dashboard's
/// health columns count the three members as healthy, as `gitward status` does, also after a
/// sync that changed nothing, and `gitward_tracked_objects` counts them too.
#[tokio::test]
async fn the_dashboard_counts_the_members_by_health() {
    let env = common::setup("follow-board").await;
    let repo = common::GitRepo::new();
    for name in ["a", "b", "c"] {
        repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    }
    repo.commit_and_push("three ConfigMaps");
    let dir = tempfile::tempdir().unwrap();
    let ui = "\n[daemon.ui]\nenabled = true\n";
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, ui, "");
    let daemon = common::Daemon::start(&config, port, &[]);
    assert!(daemon.wait_ready(WAIT).await, "not ready: {}", daemon.log_text());
    let counts = "<td class=\"num\">3</td><td class=\"num\">0</td><td class=\"num\">0</td>";
    let shown = common::eventually(WAIT, || async { dashboard_row(&daemon).contains(counts) }).await;
    assert!(shown, "{}: {}", dashboard_row(&daemon), daemon.log_text());
    // A sync that changes nothing waits on nothing: the members are still counted.
    let completed = daemon.logged("sync complete").len();
    let run = common::gitward(&["reconcile", "--timeout", "60", "app"], &config, CLI);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let synced = common::eventually(WAIT, || async { daemon.logged("sync complete").len() > completed }).await;
    assert!(synced, "{}", daemon.log_text());
    assert!(dashboard_row(&daemon).contains(counts), "{}: {}", dashboard_row(&daemon), daemon.log_text());
    assert!(dashboard_row(&daemon).contains("class=\"result-healthy\""), "{}", dashboard_row(&daemon));
    assert_eq!(daemon.metric_sum("gitward_tracked_objects", &["unit=\"app\""]), 3.0);
    let run = common::gitward(&["status", "-o", "json"], &config, CLI);
    let json: Value = serde_json::from_str(&run.stdout).expect("status JSON");
    assert_eq!(json["units"][0]["health"]["healthy"], 3, "{json}");
}
