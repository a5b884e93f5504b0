//! Health after an apply and `gitward status`, against the real apiserver. It has no
//! controller-manager or kubelet, so each test acts as the controller would: it writes `status`
//! through the status subresource, and asserts what gitward reports (log events, the record on
//! the ApplySet parent, exit codes, `gitward status` output). Waits are liveness bounds.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 600\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: app\n        image: {image}\n"
    )
}

fn cm(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n")
}

/// A daemon config with one unit `app` over `repo` in `namespace`; returns path and port.
fn daemon_config(dir: &Path, repo: &Path, namespace: &str, unit_extra: &str) -> (std::path::PathBuf, u16) {
    let port = common::free_port();
    let path = dir.join("config.toml");
    let text = format!(
        "[daemon]\nstate_dir = \"state\"\nlisten = \"127.0.0.1:{port}\"\ninterval = \"1h\"\nresync_interval = \"1h\"\n\n{}",
        common::unit_toml("app", repo, "", namespace, unit_extra)
    );
    std::fs::write(&path, text).unwrap();
    (path, port)
}

/// Writes a Deployment's status as the deployment controller would.
async fn deployment_status(client: &kube::Client, ns: &str, name: &str, status: Value) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({ "status": status }))).await.unwrap();
}

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
    let env = common::setup("health-rollout").await;
    let ns = env.namespace.clone();
    let repo = common::GitRepo::new();
    repo.write("web.yaml", &deployment("web", "nginx:1.27"));
    repo.write("settings.yaml", &cm("settings", "1"));
    let first = repo.commit_and_push("web v1");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = daemon_config(dir.path(), &repo.bare(), &ns, "health_timeout = \"10m\"");
    let daemon = common::Daemon::start(&config, port, &[]);
    assert!(daemon.wait_ready(WAIT).await, "ready follows the apply, not health: {}", daemon.log_text());
    let object = format!("Deployment/{ns}/web");
    let in_progress = |e: &Value| e["message"] == "health" && e["object"] == object && e["health"] == "InProgress";
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), in_progress) }).await, "{}", daemon.log_text());

    // The deployment controller: one replica up but not yet available, then available.
    deployment_status(
        &env.client,
        &ns,
        "web",
        json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "unavailableReplicas": 1,
               "conditions": [{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]}),
    )
    .await;
    let less_available = |e: &Value| in_progress(e) && e["reason"] == "LessAvailable";
    assert!(
        common::eventually(WAIT, || async { has(&daemon.events(), less_available) }).await,
        "{}",
        daemon.log_text()
    );
    deployment_status(
        &env.client,
        &ns,
        "web",
        json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
               "unavailableReplicas": null,
               "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                              {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}),
    )
    .await;
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

    // A new revision whose pods never become available: the controller gives up at the
    // progress deadline, and gitward stops waiting at once (health_timeout is 10 minutes).
    repo.write("web.yaml", &deployment("web", "nginx:does-not-exist"));
    let second = repo.commit_and_push("web v2");
    let rolled = common::eventually(WAIT, || async { generation(&env.client, &ns, "web").await == Some(2) }).await;
    assert!(rolled, "v2 not applied: {}", daemon.log_text());
    deployment_status(
        &env.client,
        &ns,
        "web",
        json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1,
               "unavailableReplicas": 1,
               "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                               "message": "ReplicaSet \"web-2\" has timed out progressing."},
                              {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}),
    )
    .await;
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
    assert!(
        text.contains(&format!(
            "  unhealthy  {object} Failed ProgressDeadlineExceeded: ReplicaSet \"web-2\" has timed out progressing."
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_new_revision_or_a_reload_cancels_the_health_wait() {
    let env = common::setup("health-cancel").await;
    let ns = env.namespace.clone();
    let repo = common::GitRepo::new();
    repo.write("web.yaml", &deployment("web", "nginx:1.27"));
    let first = repo.commit_and_push("web never becomes available");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = daemon_config(dir.path(), &repo.bare(), &ns, "");
    let daemon = common::Daemon::start(&config, port, &[]);
    assert!(daemon.wait_ready(WAIT).await, "{}", daemon.log_text());
    let waiting = |e: &&Value| e["message"] == "health" && e["health"] == "InProgress";
    let waits = || daemon.events().iter().filter(waiting).count();
    assert!(common::eventually(WAIT, || async { waits() == 1 }).await, "{}", daemon.log_text());

    repo.write("web.yaml", &deployment("web", "nginx:1.28"));
    repo.write("settings.yaml", &cm("settings", "2"));
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
    // That sync changed nothing: nothing to wait for, and the record is not made healthy.
    let last = |e: &Value| e["message"] == "sync complete" && e["revision"] == second && e["wait"] == "healthy";
    assert!(common::eventually(WAIT, || async { has(&daemon.events(), last) }).await, "{}", daemon.log_text());
    let r = record(&env.client, &ns, "gitward-app").await;
    assert_ne!(r.get("gitward.dev/last-result").map(String::as_str), Some("healthy"), "{r:?}");
}

#[tokio::test]
async fn sync_wait_reports_a_failed_job_as_degraded_and_exits_1() {
    let env = common::setup("health-job").await;
    let ns = env.namespace.clone();
    let repo = common::GitRepo::new();
    repo.write(
        "job.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: busybox\n",
    );
    let revision = repo.commit_and_push("a migration job");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[daemon]\nstate_dir = \"state\"\n\n{}", common::unit_toml("app", &repo.bare(), "", &ns, "")),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["--log-format", "json", "sync", "--wait", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gitward sync runs");

    // The job controller: the pod failed, the Job is marked failed.
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
    let env = common::setup("health-cr").await;
    let ns = env.namespace.clone();
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
    repo.write("settings.yaml", &cm("settings", "1"));
    let revision = repo.commit_and_push("a widget");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[daemon]\nstate_dir = \"state\"\n\n{}", common::unit_toml("app", &repo.bare(), "", &ns, "")),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let (code, _, err) = gitward(&["status", "--config", config]);
    assert_eq!(code, 1, "never applied is not healthy: {err}");
    let (code, _, err) = gitward(&["--log-format", "json", "sync", "--config", config]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = gitward(&["status", "--config", config]);
    assert_eq!(code, 0, "a widget without conditions is current: {out}{err}");
    assert!(out.contains(&format!("  revision   {revision}\n")) && out.contains("  result     applied\n"), "{out}");
    assert!(out.contains("  objects    ConfigMap 1, Widget 1\n"), "{out}");

    // The widget's controller says it is not ready.
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
    let env = common::setup("health-record").await;
    let repo = common::GitRepo::new();
    repo.write("a.yaml", &cm("a", "1"));
    repo.commit_and_push("first");
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
    assert!(report.health_targets.is_empty());
    assert!(!fresh.record_sync(&report, SyncResult::Healthy).await.unwrap());
    assert!(!fresh.record_sync(&report, SyncResult::Applied).await.unwrap(), "no wait ran: nothing to say");

    // A sync that widens the inventory keeps the record (server-side apply would drop
    // annotations the write stopped declaring).
    repo.write("b.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: b\n");
    repo.commit_and_push("a new kind");
    let report = fresh.sync().await.unwrap();
    assert_eq!(
        common::actions(&report).get(&format!("ServiceAccount/{}/b", env.namespace)).map(String::as_str),
        Some("created")
    );
    let r = record(&env.client, &env.namespace, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("degraded"), "{r:?}");
    assert!(fresh.record_sync(&report, SyncResult::Healthy).await.unwrap(), "a new revision is recorded");
    let r = record(&env.client, &env.namespace, "gitward-app").await;
    assert_eq!(r.get("gitward.dev/last-result").map(String::as_str), Some("healthy"), "{r:?}");
}

#[tokio::test]
async fn many_deployments_in_one_namespace_share_one_watch_during_the_wait() {
    let env = common::setup("health-many").await;
    let ns = env.namespace.clone();
    let repo = common::GitRepo::new();
    let names: Vec<String> = (0..9).map(|i| format!("web-{i}")).collect();
    for name in &names {
        repo.write(&format!("{name}.yaml"), &deployment(name, "nginx:1.27"));
    }
    repo.commit_and_push("nine deployments");
    let state = tempfile::tempdir().unwrap();
    let config = common::config(state.path(), &common::unit_toml("app", &repo.bare(), "", &ns, ""));
    let mut engine = common::engine(&env.client, &config, "app").await;
    let report = engine.sync().await.unwrap();
    assert_eq!(report.health_targets.len(), 9);

    // The deployment controller makes eight available; the ninth misses its deadline.
    let available = json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
        "availableReplicas": 1, "conditions": [
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]});
    for name in &names[..8] {
        deployment_status(&env.client, &ns, name, available.clone()).await;
    }
    deployment_status(
        &env.client,
        &ns,
        "web-8",
        json!({"observedGeneration": 1, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
    )
    .await;
    let mut wait = engine.health_wait(&report);
    let mut changes = Vec::new();
    let outcome = wait.run(WAIT, |object, status| changes.push((object.to_string(), status.health))).await;
    assert_eq!(outcome, gitward::health::wait::Outcome::Degraded, "{changes:?}");
    let failed: Vec<&(String, gitward::health::Health)> =
        changes.iter().filter(|(_, h)| *h == gitward::health::Health::Failed).collect();
    assert_eq!(failed, [&(format!("Deployment/{ns}/web-8"), gitward::health::Health::Failed)]);

    // One list of the namespace's deployments, not one per deployment.
    let listed = |e: &Value| {
        e["verb"] == "list" && e["objectRef"]["resource"] == "deployments" && e["objectRef"]["namespace"] == ns.as_str()
    };
    let events = common::audit_events_until(&env.user_agent, |events| events.iter().any(listed)).await;
    let reads: Vec<&str> = events
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "deployments" && e["objectRef"]["namespace"] == ns.as_str())
        .filter_map(|e| e["verb"].as_str())
        .filter(|v| *v == "list" || *v == "watch")
        .collect();
    assert_eq!(reads.iter().filter(|v| **v == "list").count(), 1, "{reads:?}");
}
