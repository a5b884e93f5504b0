//! Health after an apply and `gitward status`, against the real apiserver and its controllers:
//! the deployment controller rolls the Deployments out on kwok's simulated Nodes (a Pod's
//! `gitward.test/ready-after` annotation holds a rollout in progress for a while, an image whose
//! name contains `fail` crash-loops: tests/cluster/stages.yaml), and the tests assert what
//! gitward reports (log events, the record on the ApplySet parent, exit codes, `gitward status`
//! output). A few tests still write a status by hand where no controller here writes it (a
//! custom resource's, a Job's own controller's); each says why, and the Deployments whose status
//! they write get it as their controller would. Waits are liveness bounds.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

async fn generation(client: &kube::Client, ns: &str, name: &str) -> Option<i64> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.ok().flatten().and_then(|d| d.metadata.generation)
}

/// The parent's `gitward.dev/` annotations.
async fn record(client: &kube::Client, ns: &str, parent: &str) -> std::collections::BTreeMap<String, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let annotations = api.get(parent).await.unwrap().metadata.annotations.unwrap_or_default();
    annotations.into_iter().filter(|(k, _)| k.starts_with("gitward.dev/")).collect()
}

fn has(events: &[Value], pred: impl Fn(&Value) -> bool) -> bool {
    events.iter().any(pred)
}

/// Runs the gitward binary with `args`; returns exit code, stdout and stderr.
fn gitward(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gitward")).args(args).output().expect("gitward runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[tokio::test]
async fn deployment_rollout_is_reported_healthy_then_a_stuck_revision_fails_fast() {
    let (env, ns, repo) = common::setup_repo("health-rollout").await;
    // The deployment controller rolls it out; its Pod is ready 3 s after it is made.
    repo.write("web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "3s"));
    let first = repo.push(&[("settings.yaml", &common::cm("settings", "1"))], "web v1");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &ns, "", "health_timeout = \"10m\"");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let object = format!("Deployment/{ns}/web");
    let in_progress = |e: &Value| e["message"] == "health" && e["object"] == object && e["health"] == "InProgress";
    let less_available = |e: &Value| in_progress(e) && e["reason"] == "LessAvailable";
    assert!(
        common::eventually(WAIT, || async { has(&daemon.events(), less_available) }).await,
        "{}",
        daemon.log_text()
    );
    let healthy = |e: &Value| {
        e["message"] == "sync complete"
            && e["revision"] == first
            && e["wait"] == "healthy"
            && e["result"] == "healthy"
            && e["healthy"] == 2
            && e["degraded"] == 0
    };
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), healthy) }).await, "{}", daemon.log_text());
    let current = |e: &Value| e["message"] == "health" && e["object"] == object && e["health"] == "Current";
    assert!(has(&daemon.events(), current), "{}", daemon.log_text());
    let recorded = common::eventually(WAIT, || async {
        let r = record(&env.client, &ns, "gitward-app").await;
        r.get("gitward.dev/last-result").map(String::as_str) == Some("healthy")
            && r.get("gitward.dev/last-revision") == Some(&first)
    })
    .await;
    assert!(recorded, "{:?}", record(&env.client, &ns, "gitward-app").await);
    assert!(daemon.metric_sum("gitward_time_to_healthy_seconds_count", &["unit=\"app\""]) >= 1.0);

    // A new revision whose Pods crash-loop: the controller gives up at the progress deadline
    // (5 s), and gitward stops waiting at once (health_timeout is 10 minutes).
    let second = repo.push(&[("web.yaml", &common::deployment_with("web", "nginx:fail", 1, 5, "0s"))], "web v2");
    let rolled = common::eventually(WAIT, || async { generation(&env.client, &ns, "web").await == Some(2) }).await;
    assert!(rolled, "v2 not applied: {}", daemon.log_text());
    let degraded = |e: &Value| {
        e["message"] == "sync complete"
            && e["revision"] == second
            && e["wait"] == "degraded"
            && e["result"] == "degraded"
            && e["degraded"] == 1
    };
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), degraded) }).await, "{}", daemon.log_text());
    let failed = |e: &Value| {
        e["message"] == "health"
            && e["object"] == object
            && e["health"] == "Failed"
            && e["reason"] == "ProgressDeadlineExceeded"
            && e["level"] == "WARN"
    };
    assert!(has(&daemon.events(), failed), "{}", daemon.log_text());
    let recorded = common::eventually(WAIT, || async {
        record(&env.client, &ns, "gitward-app").await.get("gitward.dev/last-result").map(String::as_str)
            == Some("degraded")
    })
    .await;
    assert!(recorded, "{:?}", record(&env.client, &ns, "gitward-app").await);
    let degraded_gauge = || daemon.metric_sum("gitward_objects_health", &["unit=\"app\"", "health=\"degraded\""]);
    let counted = common::eventually(WAIT, || async { degraded_gauge() == 1.0 }).await;
    assert!(counted, "gitward_objects_health degraded = {}: {}", degraded_gauge(), daemon.log_text());

    // `gitward status` reads the same from the cluster, with no daemon needed.
    let (code, out, err) = gitward(&["status", "--config", config.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 1, "{out}{err}");
    let report: Value = serde_json::from_str(&out).expect("status -o json is JSON");
    let unit = &report["units"][0];
    assert_eq!(unit["last"]["revision"], second);
    assert_eq!(unit["last"]["result"], "degraded");
    assert_eq!(unit["objects"], json!({"ConfigMap": 1, "Deployment": 1}));
    assert_eq!(unit["unhealthy"][0]["object"], object);
    assert_eq!(unit["unhealthy"][0]["reason"], "ProgressDeadlineExceeded");
    let (code, text, _) = gitward(&["status", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 1);
    // The controller names the new ReplicaSet (web-<pod-template-hash>).
    let line =
        text.lines().find(|l| l.starts_with(&format!("  unhealthy  {object} Failed ProgressDeadlineExceeded: ")));
    let line = line.unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("ReplicaSet \"web-") && line.ends_with("\" has timed out progressing."), "{text}");
}

#[tokio::test]
async fn a_new_revision_or_a_reload_cancels_the_health_wait() {
    let (env, ns, repo) = common::setup_repo("health-cancel").await;
    // Its Pod is ready only 90 s after it is made: it does not become available in this test.
    repo.write("web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "90s"));
    let first = repo.commit_and_push("web never becomes available");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &ns, "", "");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    // The waits that found the Deployment in progress: the syncs that logged an InProgress
    // health event (one or more: the controller writes a rollout's status in steps).
    let waits = || {
        let (mut syncs, mut waited) = (0, std::collections::BTreeSet::new());
        for e in daemon.events() {
            syncs += usize::from(e["message"] == "sync triggered");
            if e["message"] == "health" && e["health"] == "InProgress" {
                waited.insert(syncs);
            }
        }
        waited.len()
    };
    assert!(common::eventually(WAIT, || async { waits() == 1 }).await, "{}", daemon.log_text());

    repo.write("web.yaml", &common::deployment_with("web", "nginx:1.28", 1, 600, "90s"));
    repo.write("settings.yaml", &common::cm("settings", "2"));
    let second = repo.commit_and_push("a new revision while the first is still rolling out");
    let cancelled = |e: &Value| {
        e["message"] == "health wait cancelled by a new revision"
            && e["revision"] == first
            && e["new_revision"] == second
    };
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), cancelled) }).await, "{}", daemon.log_text());
    let first_summary =
        |e: &Value| e["message"] == "sync complete" && e["revision"] == first && e["wait"] == "cancelled";
    assert!(has(&daemon.events(), first_summary), "{}", daemon.log_text());

    // The second revision changed the Deployment too: its own wait starts; SIGHUP cancels it
    // and syncs at once.
    assert!(common::eventually(WAIT, || async { waits() == 2 }).await, "{}", daemon.log_text());
    daemon.signal("HUP");
    let reloaded = |e: &Value| e["message"] == "health wait cancelled by a reload" && e["revision"] == second;
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), reloaded) }).await, "{}", daemon.log_text());
    let resynced = |e: &Value| e["message"] == "sync triggered" && e["trigger"] == "reload" && e["revision"] == second;
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), resynced) }).await, "{}", daemon.log_text());
    // That sync changed nothing, but the Deployment the cancelled wait left InProgress is still
    // waited on (a third wait of it), and the record is not made healthy.
    assert!(common::eventually(WAIT, || async { waits() == 3 }).await, "{}", daemon.log_text());
    let after_reload = daemon.events().into_iter().skip_while(|e| !reloaded(e)).collect::<Vec<_>>();
    assert!(
        !after_reload
            .iter()
            .any(|e| e["message"] == "sync complete" && e["revision"] == second && e["wait"] == "healthy"),
        "{}",
        daemon.log_text()
    );
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_ne!(r.get("gitward.dev/last-result").map(String::as_str), Some("healthy"), "{r:?}");
}

/// A Job that has failed by the time the wait first reads it. The test cluster's Job controller
/// sets `startTime` (kstatus: `Current`) before its Pod can fail, so a wait always finds such a
/// Job running first: this order is written by hand, for a Job whose `managedBy` names another
/// controller (the built-in Job controller leaves it alone). The controller's own failure, read
/// by `gitward status`, is in `apply::controllers`.
#[tokio::test]
async fn sync_wait_reports_a_failed_job_as_degraded_and_exits_1() {
    let (env, ns, repo) = common::setup_repo("health-job").await;
    repo.write(
        "job.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  managedBy: gitward.dev/test\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: busybox\n",
    );
    let revision = repo.commit_and_push("a migration job");
    let dir = tempfile::tempdir().unwrap();
    let config = cli_config(dir.path(), &repo.bare(), &ns, "");
    let child = Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["--log-format", "json", "sync", "--wait", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gitward sync runs");

    // Written by hand, as the Job's controller would (`managedBy` keeps the real one away): the
    // real controller fails a Job only once its Pod has exited, and health reads a Job with an
    // active Pod as `Current` (kstatus: in progress), so the wait would end healthy before it.
    // Tried with an image named `fail` on a kwok Node: `wait="healthy"`, exit 0.
    let api: Api<Job> = Api::namespaced(env.client.clone(), &ns);
    assert!(common::eventually(WAIT, || async { api.get_opt("migrate").await.ok().flatten().is_some() }).await);
    let now = "2026-11-22T10:00:00Z";
    let status = json!({"status": {"startTime": now, "failed": 1, "active": 0, "conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now},
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now}]}});
    api.patch_status("migrate", &PatchParams::default(), &Patch::Merge(&status)).await.expect("job status written");

    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let events = json_lines(&stderr);
    let summary = events.iter().find(|e| e["message"] == "sync complete").expect("sync complete");
    assert_eq!(
        (summary["wait"].as_str(), summary["result"].as_str()),
        (Some("degraded"), Some("degraded")),
        "{summary}"
    );
    assert_eq!((summary["created"].as_u64(), summary["degraded"].as_u64()), (Some(1), Some(1)), "{summary}");
    let failed =
        |e: &&Value| e["message"] == "health" && e["object"] == format!("Job/{ns}/migrate") && e["health"] == "Failed";
    let event = events.iter().find(failed).unwrap_or_else(|| panic!("no Failed health event: {stderr}"));
    assert_eq!(event["reason"], "JobFailed");
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("degraded"));
    assert_eq!(r.get("gitward.dev/last-revision"), Some(&revision));
}

#[tokio::test]
async fn status_follows_a_custom_resource_ready_condition_and_exits_0_1_2() {
    let (env, ns) = common::setup_ns("health-cr").await;
    let group = format!("{ns}.example.com");
    let repo = common::GitRepo::new();
    // The Widget operator is installed apart from this unit (its CRD is not in git).
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({
            "metadata": {"name": format!("widgets.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .unwrap();
    Api::all(env.client.clone()).create(&Default::default(), &crd).await.expect("create the CRD");
    let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &ns, &ApiResource::from_gvk(&gvk));
    let served = common::eventually(WAIT, || async { api.list(&Default::default()).await.is_ok() }).await;
    assert!(served, "Widget is not served");
    repo.write(
        "widget.yaml",
        &format!("apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: gadget\nspec:\n  size: 3\n"),
    );
    let revision = repo.push(&[("settings.yaml", &common::cm("settings", "1"))], "a widget");
    let dir = tempfile::tempdir().unwrap();
    let config = cli_config(dir.path(), &repo.bare(), &ns, "");
    let config = config.to_str().unwrap();

    let (code, _, err) = gitward(&["status", "--config", config]);
    assert_eq!(code, 1, "never applied is not healthy: {err}");
    let (code, _, err) = gitward(&["--log-format", "json", "sync", "--config", config]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = gitward(&["status", "--config", config]);
    assert_eq!(code, 0, "a widget without conditions is current: {out}{err}");
    assert!(out.contains(&format!("  revision   {revision}\n")) && out.contains("  result     applied\n"), "{out}");
    assert!(out.contains("  objects    ConfigMap 1, Widget 1\n"), "{out}");

    // The widget's controller says it is not ready. Written by hand: no controller in the test
    // cluster writes a Widget's status (its operator is not installed).
    let set_ready = |status: &'static str, reason: &'static str| json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": "waiting for a backend"}]}});
    api.patch_status("gadget", &PatchParams::default(), &Patch::Merge(&set_ready("False", "NotReadyYet")))
        .await
        .unwrap();
    let (code, out, _) = gitward(&["status", "--config", config, "-o", "json"]);
    assert_eq!(code, 1, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let unhealthy = &report["units"][0]["unhealthy"];
    assert_eq!(
        unhealthy,
        &json!([{"object": format!("Widget/{ns}/gadget"), "health": "InProgress", "reason": "NotReadyYet", "message": "waiting for a backend"}]),
    );
    assert_eq!(report["units"][0]["health"], json!({"healthy": 1, "progressing": 1, "degraded": 0}));

    api.patch_status("gadget", &PatchParams::default(), &Patch::Merge(&set_ready("True", "Ready"))).await.unwrap();
    let (code, out, _) = gitward(&["status", "--config", config]);
    assert_eq!(code, 0, "{out}");

    let (code, _, err) = gitward(&["status", "--config", config, "--sync", "no-such-unit"]);
    assert_eq!(code, 2, "{err}");
}

#[tokio::test]
async fn the_record_is_written_only_when_revision_or_result_changes() {
    let (env, _, repo) = common::setup_repo("health-record").await;
    repo.push(&[("a.yaml", &common::cm("a", "1"))], "first");
    let state = tempfile::tempdir().unwrap();
    let config = common::config(state.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, ""));
    let mut engine = common::engine(&env.client, &config, "app").await;
    use gitward::health::record::SyncResult;

    let report = engine.sync().await.unwrap();
    assert!(engine.record(&report.revision, SyncResult::Healthy).await.unwrap(), "first record is written");
    let report = engine.sync().await.unwrap();
    assert!(!engine.record(&report.revision, SyncResult::Healthy).await.unwrap(), "same revision and result");
    assert!(engine.record(&report.revision, SyncResult::Degraded).await.unwrap(), "a new result is written");

    // A fresh engine (a restarted daemon, a one-shot `gitward sync`) reads the record with the
    // parent it reads anyway, and writes nothing for the same outcome.
    let mut fresh = common::engine(&env.client, &config, "app").await;
    let report = fresh.sync().await.unwrap();
    assert!(!fresh.record(&report.revision, SyncResult::Degraded).await.unwrap());
    let r = record(&env.client, &env.namespace, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("degraded"));
    assert_eq!(r.get("gitward.dev/last-revision"), Some(&report.revision.to_string()));
    // That sync changed nothing, so it judged nothing: it does not make the revision healthy.
    // Its attempt is new to the parent (`record` alone keeps the attempt): written once.
    assert!(report.sent.health_targets.is_empty());
    assert!(fresh.record_sync(&report, SyncResult::Healthy, false).await.unwrap(), "the attempt is recorded");
    let r = record(&env.client, &env.namespace, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("degraded"), "{r:?}");
    assert_eq!(r.get("gitward.dev/last-attempted-revision"), Some(&report.revision.to_string()));
    assert!(!fresh.record_sync(&report, SyncResult::Healthy, false).await.unwrap(), "nothing new");
    assert!(!fresh.record_sync(&report, SyncResult::Applied, false).await.unwrap(), "no wait ran: nothing to say");

    // A sync that widens the inventory keeps the record (server-side apply would drop
    // annotations the write stopped declaring).
    repo.push(&[("b.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: b\n")], "a new kind");
    let report = fresh.sync().await.unwrap();
    assert_eq!(
        common::actions(&report).get(&format!("ServiceAccount/{}/b", env.namespace)).map(String::as_str),
        Some("created")
    );
    let r = record(&env.client, &env.namespace, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("degraded"), "{r:?}");
    assert!(fresh.record_sync(&report, SyncResult::Healthy, true).await.unwrap(), "a new revision is recorded");
    let r = record(&env.client, &env.namespace, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("healthy"), "{r:?}");
}

#[tokio::test]
async fn many_deployments_in_one_namespace_share_one_watch_during_the_wait() {
    let (env, ns, repo) = common::setup_repo("health-many").await;
    let names: Vec<String> = (0..9).map(|i| format!("web-{i}")).collect();
    // The deployment controller makes eight available; the ninth's Pods crash-loop, and it
    // misses its 5 s progress deadline.
    for name in &names[..8] {
        repo.write(&format!("{name}.yaml"), &common::deployment(name, "nginx:1.27", 1));
    }
    repo.push(&[("web-8.yaml", &common::deployment_with("web-8", "nginx:fail", 1, 5, "0s"))], "nine deployments");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &ns, "").await;
    let report = engine.sync().await.unwrap();
    assert_eq!(report.sent.health_targets.len(), 9);

    let mut wait = engine.health_wait(&report).await;
    let mut changes = Vec::new();
    let outcome = wait.run(WAIT, |object, status| changes.push((object.to_string(), status.health))).await;
    assert_eq!(outcome, gitward::health::wait::WaitEnd::Degraded, "{changes:?}");
    let failed: Vec<&(String, gitward::health::Health)> =
        changes.iter().filter(|(_, h)| *h == gitward::health::Health::Failed).collect();
    assert_eq!(failed, [&(format!("Deployment/{ns}/web-8"), gitward::health::Health::Failed)]);

    // One list of the namespace's deployments, not one per deployment. The sync's ownership
    // check lists the namespace too, before its creates: selected by another ApplySet's label
    // (`part-of!=<own id>`), it is not the wait's.
    let ownership_check = |e: &Value| e["requestURI"].as_str().is_some_and(|u| u.contains("part-of%21%3D"));
    let listed = |e: &Value| {
        e["verb"] == "list"
            && e["objectRef"]["resource"] == "deployments"
            && e["objectRef"]["namespace"] == ns.as_str()
            && !ownership_check(e)
    };
    let events = common::audit_events_until(&env.user_agent, |events| events.iter().any(listed)).await;
    let reads: Vec<&str> = events
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "deployments" && e["objectRef"]["namespace"] == ns.as_str())
        .filter(|e| !ownership_check(e))
        .filter_map(|e| e["verb"].as_str())
        .filter(|v| *v == "list" || *v == "watch")
        .collect();
    assert_eq!(reads.iter().filter(|v| **v == "list").count(), 1, "{reads:?}");
}

/// A unit spread over more namespaces than the watch cap: its health wait reads the
/// Deployments with one label-selected list and watch over all namespaces, not one per
/// namespace (20 here; hundreds in a real tenant layout).
#[tokio::test]
async fn deployments_spread_over_many_namespaces_are_waited_on_with_one_watch() {
    let (env, ns) = common::setup_ns("health-spread").await;
    let namespaces: Vec<String> = (0..20).map(|i| format!("{ns}-{i}")).collect();
    for n in &namespaces {
        common::create_namespace(&env.client, n).await;
    }
    let repo = common::GitRepo::new();
    for n in &namespaces {
        let text = common::deployment("web", "nginx:1.27", 1).replacen(
            "  name: web\n",
            &format!("  name: web\n  namespace: {n}\n"),
            1,
        );
        repo.write(&format!("{n}.yaml"), &text);
    }
    repo.commit_and_push("one deployment in each of twenty namespaces");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &ns, "").await;
    let report = engine.sync().await.unwrap();
    assert_eq!(report.sent.health_targets.len(), 20);
    // The deployment controller rolls them out.
    let mut wait = engine.health_wait(&report).await;
    // Deployments listed in all namespaces so far: the sync's own (metadata cache, ownership
    // check) and the survey of the unit's members that begins a wait.
    let ours = |e: &Value| e["objectRef"]["resource"] == "deployments" && (e["verb"] == "list" || e["verb"] == "watch");
    let cluster_lists = |events: &[Value]| {
        events.iter().filter(|e| ours(e) && e["verb"] == "list" && e["objectRef"]["namespace"].is_null()).count()
    };
    let before = cluster_lists(&common::audit_events(&env.user_agent));
    let outcome = wait.run(WAIT, |_, _| {}).await;
    assert_eq!(outcome, gitward::health::wait::WaitEnd::Healthy);

    let events = common::audit_events_until(&env.user_agent, |events| cluster_lists(events) > before).await;
    let reads: Vec<(String, String)> = events
        .iter()
        .filter(|e| ours(e))
        .map(|e| {
            (
                e["verb"].as_str().unwrap_or_default().to_owned(),
                e["objectRef"]["namespace"].as_str().unwrap_or("*").to_owned(),
            )
        })
        .collect();
    let per_namespace = reads.iter().filter(|(_, n)| namespaces.contains(n)).count();
    assert_eq!(per_namespace, 0, "a watch per namespace: {reads:?}");
    assert_eq!(cluster_lists(&events), before + 1, "one list of the unit's Deployments in all namespaces: {reads:?}");
}

/// A CLI config with one unit `app` over `repo` in `namespace`.
fn cli_config(dir: &Path, repo: &Path, namespace: &str, unit_extra: &str) -> std::path::PathBuf {
    common::config_file(dir, &common::unit_toml("app", repo, "", namespace, unit_extra))
}

/// `gitward --log-format json sync --wait`: exit code, its `sync complete` event, and its
/// `health` events.
fn sync_wait(config: &Path) -> (i32, Value, Vec<Value>, String) {
    let (code, _, err) = gitward(&["--log-format", "json", "sync", "--wait", "--config", config.to_str().unwrap()]);
    let events = json_lines(&err);
    let summary = events.iter().find(|e| e["message"] == "sync complete").cloned().unwrap_or_else(|| panic!("{err}"));
    let health = events.into_iter().filter(|e| e["message"] == "health").collect();
    (code, summary, health, err)
}

#[tokio::test]
async fn a_deployment_an_earlier_revision_never_rolled_out_keeps_the_unit_unhealthy_and_is_waited_on() {
    let (env, ns, repo) = common::setup_repo("health-earlier").await;
    // Its Pod is ready 30 s after it is made: the waits below (2 s each) end before.
    repo.write("web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "30s"));
    repo.push(&[("settings.yaml", &common::cm("settings", "1"))], "web, which rolls out slowly");
    let dir = tempfile::tempdir().unwrap();
    // The wait times out quickly: the Deployment is not available for a while.
    let config = cli_config(dir.path(), &repo.bare(), &ns, "health_timeout = \"2s\"");
    let web = format!("Deployment/{ns}/web");
    let (code, summary, _, err) = sync_wait(&config);
    assert_eq!(
        (code, summary["wait"].as_str(), summary["result"].as_str()),
        (1, Some("timeout"), Some("progressing")),
        "{err}"
    );

    // A revision that changes only the ConfigMap: its wait still covers the Deployment.
    let second = repo.push(&[("settings.yaml", &common::cm("settings", "2"))], "only the ConfigMap");
    let (code, summary, health, err) = sync_wait(&config);
    assert_eq!(code, 1, "{err}");
    assert_eq!((summary["configured"].as_u64(), summary["unchanged"].as_u64()), (Some(1), Some(1)), "{summary}");
    assert_eq!(
        (summary["wait"].as_str(), summary["result"].as_str()),
        (Some("timeout"), Some("progressing")),
        "{summary}"
    );
    assert!(health.iter().any(|e| e["object"] == web && e["health"] == "InProgress"), "{err}");
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-revision"), Some(&second), "{r:?}");
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("progressing"), "{r:?}");

    // `status` says so, under the recorded result.
    let (code, text, err) = gitward(&["status", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}{err}");
    assert!(text.contains("  result     progressing\n"), "{text}");
    assert!(text.contains(&format!("  unhealthy  {web} InProgress")), "{text}");

    // The tree unchanged: nothing changed, and the Deployment is waited on again.
    let (code, summary, health, err) = sync_wait(&config);
    assert_eq!(code, 1, "{err}");
    assert_eq!((summary["configured"].as_u64(), summary["created"].as_u64()), (Some(0), Some(0)), "{summary}");
    assert_eq!(summary["wait"], "timeout", "{summary}");
    assert!(health.iter().any(|e| e["object"] == web), "{err}");

    // The deployment controller rolls it out: the unchanged tree has nothing to wait on, and
    // the unit is healthy at last.
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    let available =
        || async { deployments.get("web").await.unwrap().status.and_then(|s| s.available_replicas) == Some(1) };
    assert!(common::eventually(WAIT, available).await, "the deployment controller did not roll it out");
    let (code, summary, health, err) = sync_wait(&config);
    assert_eq!(code, 0, "{err}");
    assert_eq!((summary["wait"].as_str(), summary["result"].as_str()), (Some("none"), Some("healthy")), "{summary}");
    assert!(health.is_empty(), "nothing was waited on: {health:?}");
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("healthy"), "{r:?}");
    let (code, text, err) = gitward(&["status", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}{err}");
}

/// gitward's writes (`patch`) of the ApplySet parent `gitward-app` in `ns` sent with
/// `user_agent`, read once a marker request made after them is in the audit log.
async fn parent_writes(client: &kube::Client, user_agent: &str, ns: &str) -> usize {
    let marker = common::unique("marker");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    assert!(secrets.get_opt(&marker).await.unwrap().is_none());
    let seen = |e: &Value| e["verb"] == "get" && e["objectRef"]["name"] == marker.as_str();
    let events = common::audit_events_until(user_agent, |events| events.iter().any(seen)).await;
    assert!(events.iter().any(seen), "the marker request is not in the audit log");
    events
        .iter()
        .filter(|e| {
            e["verb"] == "patch"
                && e["objectRef"]["resource"] == "secrets"
                && e["objectRef"]["namespace"] == ns
                && e["objectRef"]["name"] == "gitward-app"
        })
        .count()
}

#[tokio::test]
async fn the_error_of_a_bad_revision_is_recorded_shown_by_status_and_cleared_by_a_good_one() {
    use gitward::health::record::SyncResult;
    let (env, ns, repo) = common::setup_repo("health-error").await;
    let first = repo.push(&[("a.yaml", &common::cm("a", "1"))], "good");
    let dir = tempfile::tempdir().unwrap();
    let config = cli_config(dir.path(), &repo.bare(), &ns, "");
    let loaded = gitward::config::Config::load(&config).unwrap();
    let mut engine = common::engine(&env.client, &loaded, "app").await;
    let report = engine.sync().await.unwrap();
    assert!(engine.record_sync(&report, SyncResult::Applied, false).await.unwrap());

    // A revision at HEAD that does not parse: not applied, and the parent says why.
    let bad = repo.push(&[("b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b\n")], "broken YAML");
    let failure = |error| gitward::sync::outcome::Failure::new("app".into(), error, None, None);
    let error = engine.sync().await.expect_err("the revision does not parse");
    assert!(engine.record_failure(&failure(error), None).await.unwrap(), "the error is recorded");
    let error = engine.sync().await.expect_err("still broken");
    assert!(!engine.record_failure(&failure(error), None).await.unwrap(), "the same error is not written again");
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-revision"), Some(&first), "the last good revision stays: {r:?}");
    assert_eq!(r.get("gitward.dev/last-attempted-revision"), Some(&bad), "{r:?}");
    assert!(r.get("gitward.dev/last-error").is_some_and(|e| e.contains("b.yaml")), "{r:?}");

    let (code, text, err) = gitward(&["status", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 1, "a HEAD that does not parse is not healthy: {text}{err}");
    assert!(
        text.contains(&format!("  revision   {first}\n")) && text.contains(&format!("  attempted  {bad}\n")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("  error      ") && l.contains("b.yaml")), "{text}");
    let (_, out, _) = gitward(&["status", "--config", config.to_str().unwrap(), "-o", "json"]);
    let unit = &serde_json::from_str::<Value>(&out).unwrap()["units"][0];
    assert_eq!(unit["last_attempted_revision"], bad.as_str());
    assert!(unit["last_error"].as_str().is_some_and(|e| e.contains("b.yaml")), "{unit}");

    // The fix: applied, the error cleared.
    let fixed = repo.push(&[("b.yaml", &common::cm("b", "1"))], "fixed");
    let report = engine.sync().await.unwrap();
    assert!(engine.record_sync(&report, SyncResult::Applied, false).await.unwrap());
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-attempted-revision"), Some(&fixed), "{r:?}");
    assert_eq!(r.get("gitward.dev/last-error"), None, "{r:?}");
    let (code, text, err) = gitward(&["status", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(!text.contains("  error "), "{text}");

    // A steady resync writes nothing to the parent.
    let before = parent_writes(&env.client, &env.user_agent, &ns).await;
    let report = engine.sync().await.unwrap();
    assert!(!engine.record_sync(&report, SyncResult::Applied, false).await.unwrap());
    assert_eq!(parent_writes(&env.client, &env.user_agent, &ns).await, before, "a steady resync wrote the parent");
}

#[tokio::test]
async fn status_prints_the_applyset_id_and_selector_and_a_member_deleted_by_hand_as_missing() {
    let (env, ns, repo) = common::setup_repo("health-missing").await;
    repo.write("a.yaml", &common::cm("a", "1"));
    repo.write("b.yaml", &common::cm("b", "1"));
    repo.push(&[("sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: robot\n")], "three members");
    let dir = tempfile::tempdir().unwrap();
    let config = cli_config(dir.path(), &repo.bare(), &ns, "");
    let config = config.to_str().unwrap();
    let (code, _, err) = gitward(&["sync", "--config", config]);
    assert_eq!(code, 0, "{err}");

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &ns);
    let parent = secrets.get("gitward-app").await.unwrap();
    let id = parent.metadata.labels.unwrap()["applyset.kubernetes.io/id"].clone();
    let selector = format!("kubectl get configmaps,serviceaccounts -A -l applyset.kubernetes.io/part-of={id}");
    let (code, text, err) = gitward(&["status", "--config", config]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(text.contains(&format!("  applyset   {id}\n")), "{text}");
    assert!(text.contains(&format!("  select     {selector}\n")), "{text}");
    let (_, out, _) = gitward(&["status", "--config", config, "-o", "json"]);
    let unit = &serde_json::from_str::<Value>(&out).unwrap()["units"][0];
    assert_eq!((unit["applyset_id"].as_str(), unit["selector"].as_str()), (Some(id.as_str()), Some(selector.as_str())));
    // The selector is a command that works: it lists exactly the members.
    let args: Vec<&str> = selector.split(' ').skip(1).chain(["-o", "name"]).collect();
    let listed = common::kubectl(&args);
    let mut names: Vec<String> = String::from_utf8_lossy(&listed.stdout).lines().map(String::from).collect();
    names.sort();
    assert_eq!(names, ["configmap/a", "configmap/b", "serviceaccount/robot"], "{listed:?}");

    // Deleted by hand: the recorded member is missing, and status exits 1.
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    configmaps.delete("b", &Default::default()).await.unwrap();
    let (code, text, _) = gitward(&["status", "--config", config]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("  unhealthy  ConfigMap/{ns}/b Missing NotFound: ")), "{text}");
    assert!(text.contains("  health     2 healthy, 0 progressing, 0 degraded, 1 missing\n"), "{text}");
    let (code, out, _) = gitward(&["status", "--config", config, "-o", "json"]);
    assert_eq!(code, 1);
    let unit = &serde_json::from_str::<Value>(&out).unwrap()["units"][0];
    assert_eq!(unit["missing"], 1, "{unit}");
    assert_eq!(unit["unhealthy"][0]["health"], "Missing", "{unit}");
    assert_eq!(unit["objects"], json!({"ConfigMap": 1, "ServiceAccount": 1}), "{unit}");
}

#[tokio::test]
async fn a_resync_that_changes_nothing_reads_no_health_once_the_unit_was_judged() {
    use gitward::health::record::SyncResult;
    use gitward::health::wait::WaitEnd;
    let (env, ns, repo) = common::setup_repo("health-steady").await;
    repo.push(&[("web.yaml", &common::deployment("web", "nginx:1.27", 1))], "web");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &ns, "").await;
    let report = engine.sync().await.unwrap();
    common::rolled_out(&env.client, &ns).await;
    // The first wait of an engine reads the unit's Deployments once (all namespaces) and covers
    // every member that is not Current.
    let mut wait = engine.health_wait(&report).await;
    assert!(wait.covers_all());
    let outcome = wait.run(WAIT, |_, _| {}).await;
    assert_eq!(engine.judge_health(&wait, Some(outcome)).await, SyncResult::Healthy);
    let lists = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e["verb"] == "list" && e["objectRef"]["resource"] == "deployments")
            .filter(|e| e["objectRef"]["namespace"].is_null())
            .count()
    };
    let marker = |name: &str| {
        let name = name.to_string();
        move |e: &Value| e["verb"] == "get" && e["objectRef"]["name"] == name.as_str()
    };
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &ns);
    assert!(secrets.get_opt("marker-1").await.unwrap().is_none());
    let seen = marker("marker-1");
    let before = common::audit_events_until(&env.user_agent, |e| e.iter().any(&seen)).await;

    // A resync: nothing changed, nothing left unhealthy, nothing waited on, nothing read.
    let report = engine.sync().await.unwrap();
    let wait = engine.health_wait(&report).await;
    assert!(wait.targets().is_empty() && !wait.covers_all());
    assert_eq!(engine.judge_health(&wait, Some(WaitEnd::Healthy)).await, SyncResult::Healthy);
    assert!(secrets.get_opt("marker-2").await.unwrap().is_none());
    let seen = marker("marker-2");
    let after = common::audit_events_until(&env.user_agent, |e| e.iter().any(&seen)).await;
    assert_eq!(lists(&after), lists(&before), "a steady resync listed the Deployments again");
}

/// A monorepo: a push that leaves the unit's path alone, during the health wait of a revision
/// that changed a Deployment, does not cancel that wait: the revision is judged (here healthy,
/// once the Deployment rolls out) and recorded, the wait gone from the record.
#[tokio::test]
async fn a_push_to_another_path_during_the_health_wait_leaves_it_to_be_judged() {
    let (env, ns, repo) = common::setup_repo("health-other-path").await;
    // Rolled out by the deployment controller 10 s after it is made.
    repo.write("web/web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "10s"));
    repo.write("other/settings.yaml", &common::cm("settings", "1"));
    let first = repo.commit_and_push("web, and another unit's directory");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) =
        common::daemon_config(dir.path(), "", "", &common::unit_toml("app", &repo.bare(), "web", &ns, ""));
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let waiting = |e: &Value| e["message"] == "health" && e["health"] == "InProgress";
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), waiting) }).await, "{}", daemon.log_text());

    let second = repo.push(&[("other/settings.yaml", &common::cm("settings", "2"))], "another unit's directory only");
    let taken = |e: &Value| e["message"] == "path unchanged, nothing to sync" && e["revision"] == second;
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), taken) }).await, "{}", daemon.log_text());
    let cancelled = |e: &Value| e["message"] == "health wait cancelled by a new revision";
    assert!(!has(&daemon.events(), cancelled), "{}", daemon.log_text());

    let judged = |e: &Value| e["message"] == "sync complete" && e["revision"] == first && e["wait"] == "healthy";
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), judged) }).await, "{}", daemon.log_text());
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("healthy"), "{r:?}");
    assert!(!r.contains_key("gitward.dev/waiting-since"), "the wait is gone from the record: {r:?}");
}
