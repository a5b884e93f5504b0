//! Health followed between syncs under `gitward run`, against the real apiserver and its
//! deployment controller. The unit's health wait is short (2 s); a revision whose Pods
//! crash-loop is still progressing when its wait gives up, and the controller fails the rollout
//! at its progress deadline (6 s) outside any wait; a revision whose Pods are ready only after
//! 6 s (`gitward.test/ready-after`) recovers it outside any wait. A Deployment that fails
//! outside any health wait, and recovers, moves the unit's
//! readiness reason, `gitward_objects_health`, the parent's `gitward.dev/last-result` and the
//! dashboard within seconds; a `gitward reconcile` after such a failure records what it judged,
//! not `healthy`; the dashboard's health columns count the members; a self-heal that re-applied
//! nothing gives no `DriftCorrected` Event.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::Value;

/// A generous bound for the daemon's start and first sync.
const WAIT: Duration = Duration::from_secs(60);
/// The bound the acceptance puts on following a change of health: 10 s.
const FOLLOW: Duration = Duration::from_secs(10);
const CLI: Duration = Duration::from_secs(60);

/// Pushes Deployment `web` running `image` with its Pods ready after `ready_after`, then waits
/// until the daemon's wait for that revision gave up (2 s) and the deployment controller has
/// judged the rollout: `ProgressDeadlineExceeded` (6 s) for an image whose Pods crash-loop,
/// every replica available for one whose Pods run.
async fn push_web(
    daemon: &common::Daemon,
    repo: &common::GitRepo,
    env: &common::TestEnv,
    image: &str,
    ready_after: &str,
) {
    let revision = repo.push(&[("web.yaml", &common::deployment_with("web", image, 1, 6, ready_after))], image);
    let timed_out = |e: &Value| e["message"] == "sync complete" && e["revision"] == revision && e["wait"] == "timeout";
    let gave_up = common::eventually(WAIT, || async { daemon.events().iter().any(timed_out) }).await;
    assert!(gave_up, "the wait for {image} did not time out: {}", daemon.log_text());
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    let failing = image.contains("fail");
    let judged = common::eventually(WAIT, || async {
        let web = api.get("web").await.unwrap();
        let status = web.status.unwrap_or_default();
        let progressing = status.conditions.unwrap_or_default().into_iter().find(|c| c.type_ == "Progressing");
        let reason = progressing.and_then(|c| c.reason).unwrap_or_default();
        status.observed_generation == web.metadata.generation
            && if failing {
                reason == "ProgressDeadlineExceeded"
            } else {
                reason == "NewReplicaSetAvailable" && status.unavailable_replicas.is_none()
            }
    })
    .await;
    assert!(judged, "the deployment controller did not judge the rollout of {image}");
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
/// first wait ended healthy (the deployment controller rolls `web` out). The repository is kept while the daemon
/// runs.
async fn healthy_daemon(
    env: &common::TestEnv,
    dir: &std::path::Path,
) -> (common::Daemon, std::path::PathBuf, common::GitRepo) {
    let repo = common::GitRepo::new();
    repo.write("web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 6, "0s"));
    repo.push(&[("a.yaml", &common::cm("a", "1"))], "web and a");
    let ui = "\n[daemon.ui]\nenabled = true\n";
    let unit = "health_timeout = \"2s\"";
    let (config, port) = common::app_daemon_config(dir, &repo.bare(), &env.namespace, ui, unit);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let healthy = common::eventually(WAIT, || async { ready(&daemon) == Some(("healthy".into(), 1.0)) }).await;
    assert!(healthy, "the first wait did not end healthy: {:?}: {}", ready(&daemon), daemon.log_text());
    (daemon, config, repo)
}

#[tokio::test]
async fn a_deployment_that_fails_and_recovers_between_syncs_is_followed_within_seconds() {
    let env = common::setup("follow-health").await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _config, repo) = healthy_daemon(&env, dir.path()).await;
    assert!(everywhere(&daemon, &env, "healthy", 0.0).await, "{}", daemon.log_text());

    push_web(&daemon, &repo, &env, "nginx:fail", "0s").await;
    let syncs = daemon.logged("sync complete").len();
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
    // From the result its timed-out wait recorded.
    assert!(changed.iter().any(|e| e["result"] == "degraded" && e["was"] == "progressing"), "{}", daemon.log_text());
    assert_eq!(daemon.logged("sync complete").len(), syncs, "no sync ran for it: {}", daemon.log_text());

    push_web(&daemon, &repo, &env, "nginx:1.28", "6s").await;
    let syncs = daemon.logged("sync complete").len();
    let recovered = everywhere(&daemon, &env, "healthy", 0.0).await;
    assert!(recovered, "not healthy again within {FOLLOW:?}: {:?}: {}", ready(&daemon), daemon.log_text());
    assert_eq!(ready(&daemon), Some(("healthy".into(), 1.0)));
    assert_eq!(daemon.logged("sync complete").len(), syncs, "no sync ran for it: {}", daemon.log_text());

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
    let (daemon, config, repo) = healthy_daemon(&env, dir.path()).await;
    push_web(&daemon, &repo, &env, "nginx:fail", "0s").await;
    let completed = daemon.logged("sync complete").len();

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
    let (env, _, repo) = common::setup_repo("follow-board").await;
    for name in ["a", "b", "c"] {
        repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    }
    repo.commit_and_push("three ConfigMaps");
    let dir = tempfile::tempdir().unwrap();
    let ui = "\n[daemon.ui]\nenabled = true\n";
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, ui, "");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
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
