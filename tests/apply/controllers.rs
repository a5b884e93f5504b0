//! Health, Helm hooks, prune and garbage collection judged against what the test cluster's
//! kube-controller-manager writes, not a test's idea of it: its Deployment, ReplicaSet,
//! StatefulSet, DaemonSet and Job controllers, the namespace controller and the garbage
//! collector, with Pods scheduled by kube-scheduler to kwok's simulated Nodes
//! (tests/cluster/stages.yaml: a Pod runs and becomes ready at once, a Job's Pod succeeds, and a
//! Pod whose image name contains `fail` crash-loops or exits 1). No test here writes a status.
//! Time bounds are liveness bounds.

use crate::common;
use crate::sources::render::config_text;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams};
use serde_json::Value;

/// How long a `gitward sync --wait` may run before the test gives up on it.
const LIMIT: Duration = Duration::from_secs(180);
/// A liveness bound for what the controllers do after a sync.
const WAIT: Duration = Duration::from_secs(60);

/// A Deployment `name` of `replicas` Pods running `image`, that the deployment controller
/// gives up on `deadline` seconds after its rollout stops progressing.
fn deployment(name: &str, image: &str, replicas: u32, deadline: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  \
         progressDeadlineSeconds: {deadline}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      \
         labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: app\n        image: {image}\n"
    )
}

/// A Job `name` running `image` once, retried `backoff_limit` times, with `annotations` (YAML
/// lines, indented 4; may be empty).
fn job(name: &str, image: &str, backoff_limit: u32, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n    gitward.test/kind: job\n{annotations}\nspec:\n  \
         backoffLimit: {backoff_limit}\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      \
         - name: run\n        image: {image}\n"
    )
}

/// A config file in `dir` with one unit `app` over `repo`'s `path` in `ns`, plus `extra` TOML.
fn unit_config(dir: &Path, repo: &common::GitRepo, path: &str, ns: &str, extra: &str) -> PathBuf {
    let file = dir.join("gitward.toml");
    let unit = common::unit_toml("app", &repo.bare(), path, ns, extra);
    std::fs::write(&file, config_text(&dir.join("state"), "", &unit)).unwrap();
    file
}

/// The `health` events of a run about `object` (`Kind/ns/name`).
fn health_of(run: &common::Run, object: &str) -> Vec<Value> {
    common::log_events(&run.stderr, "health").filter(|e| e["object"] == object).collect()
}

/// Audit events of status writes (`update`/`patch` of the `status` subresource) to `resource`
/// `name` in `ns`, as (username, verb).
fn status_writers(resource: &str, ns: &str, name: &str) -> Vec<String> {
    std::fs::read_to_string(common::audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["objectRef"]["resource"] == resource && e["objectRef"]["subresource"] == "status")
        .filter(|e| e["objectRef"]["namespace"] == ns && e["objectRef"]["name"] == name)
        .filter(|e| e["verb"] == "update" || e["verb"] == "patch")
        .filter_map(|e| e["user"]["username"].as_str().map(str::to_owned))
        .collect()
}

/// Asserts that `resource` `name`'s status was written, and only by the controller `controller`
/// (kube-controller-manager's identity for it).
fn assert_written_by(resource: &str, ns: &str, name: &str, controller: &str) {
    let writers = status_writers(resource, ns, name);
    let own = format!("system:serviceaccount:kube-system:{controller}");
    assert!(!writers.is_empty(), "no status write of {resource}/{ns}/{name} in the audit log");
    assert!(writers.iter().all(|w| *w == own), "{resource}/{ns}/{name} status writers: {writers:?}");
}

#[tokio::test]
async fn a_three_replica_deployment_rolled_out_by_its_controller_is_healthy() {
    let (env, ns, repo) = common::setup_repo("ctl-rollout").await;
    repo.push(&[("web.yaml", &deployment("web", "registry.k8s.io/pause:3.10", 3, 600))], "three replicas");
    let dir = tempfile::tempdir().unwrap();
    let config = unit_config(dir.path(), &repo, "", &ns, "health_timeout = \"60s\"");
    let started = Instant::now();
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(60), "healthy after {:?}", started.elapsed());
    let summary = common::log_events(&run.stderr, "sync complete").next().expect("sync complete");
    assert_eq!((summary["wait"].as_str(), summary["result"].as_str()), (Some("healthy"), Some("healthy")), "{summary}");

    // What the deployment controller wrote, and the Pods behind it on the simulated Nodes.
    let web = Api::<Deployment>::namespaced(env.client.clone(), &ns).get("web").await.unwrap();
    let status = web.status.unwrap();
    assert_eq!(status.observed_generation, web.metadata.generation);
    assert_eq!((status.updated_replicas, status.available_replicas), (Some(3), Some(3)));
    let reasons: Vec<_> = status.conditions.unwrap_or_default().into_iter().map(|c| (c.type_, c.reason)).collect();
    assert!(reasons.contains(&("Progressing".into(), Some("NewReplicaSetAvailable".into()))), "{reasons:?}");
    assert_written_by("deployments", &ns, "web", "deployment-controller");
    let pods = Api::<Pod>::namespaced(env.client.clone(), &ns).list(&ListParams::default()).await.unwrap();
    assert_eq!(pods.items.len(), 3);
    for pod in &pods.items {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        assert!(node.starts_with("kwok-node-"), "scheduled to {node:?}");
        assert_eq!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
    }
}

#[tokio::test]
async fn a_deployment_whose_pods_crash_fails_at_its_progress_deadline_with_the_controllers_reason() {
    let (_, ns, repo) = common::setup_repo("ctl-deadline").await;
    repo.push(&[("web.yaml", &deployment("web", "registry.example/fail:1", 2, 5))], "pods that crash");
    let dir = tempfile::tempdir().unwrap();
    let config = unit_config(dir.path(), &repo, "", &ns, "health_timeout = \"120s\"");
    let started = Instant::now();
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(120), "failed only after {:?}", started.elapsed());
    let object = format!("Deployment/{ns}/web");
    let failed = health_of(&run, &object);
    assert!(
        failed.iter().any(|e| e["health"] == "Failed" && e["reason"] == "ProgressDeadlineExceeded"),
        "{}",
        run.stderr
    );
    let summary = common::log_events(&run.stderr, "sync complete").next().expect("sync complete");
    assert_eq!(summary["result"], "degraded", "{summary}");
    assert_written_by("deployments", &ns, "web", "deployment-controller");
}

#[tokio::test]
async fn a_statefulset_a_daemonset_and_a_job_become_ready_by_their_controllers() {
    let (env, ns, repo) = common::setup_repo("ctl-kinds").await;
    let template = "  template:\n    metadata:\n      labels: {app: x}\n    spec:\n      containers:\n      - name: app\n        image: registry.k8s.io/pause:3.10\n";
    repo.write(
        "db.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  serviceName: db\n  replicas: 2\n  \
             selector:\n    matchLabels: {{app: x}}\n{template}"
        ),
    );
    repo.write(
        "agent.yaml",
        &format!("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  selector:\n    matchLabels: {{app: x}}\n{template}"),
    );
    repo.write("migrate.yaml", &job("migrate", "registry.k8s.io/pause:3.10", 0, ""));
    repo.commit_and_push("a StatefulSet, a DaemonSet and a Job");
    let dir = tempfile::tempdir().unwrap();
    let config = unit_config(dir.path(), &repo, "", &ns, "health_timeout = \"60s\"");
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for object in [format!("StatefulSet/{ns}/db"), format!("DaemonSet/{ns}/agent"), format!("Job/{ns}/migrate")] {
        assert!(health_of(&run, &object).iter().any(|e| e["health"] == "Current"), "{object}: {}", run.stderr);
    }
    let db = Api::<StatefulSet>::namespaced(env.client.clone(), &ns).get("db").await.unwrap();
    assert_eq!(db.status.and_then(|s| s.ready_replicas), Some(2));
    let agent = Api::<DaemonSet>::namespaced(env.client.clone(), &ns).get("agent").await.unwrap();
    let agent = agent.status.unwrap();
    assert_eq!((agent.desired_number_scheduled, agent.number_ready), (3, 3), "one Pod per simulated Node");
    let jobs = Api::<Job>::namespaced(env.client.clone(), &ns);
    let complete = common::eventually(WAIT, || async {
        let job = jobs.get("migrate").await.unwrap();
        job.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
    })
    .await;
    assert!(complete, "the Job controller did not complete the Job");
    assert_written_by("statefulsets", &ns, "db", "statefulset-controller");
    assert_written_by("daemonsets", &ns, "agent", "daemon-set-controller");
    assert_written_by("jobs", &ns, "migrate", "job-controller");
}

/// A Job that has started is healthy to the health rules (kstatus: `Current` while it runs), so
/// `sync --wait` ends at once; the Job controller's verdict, once its Pods failed past the
/// backoff limit, is what `gitward status` then reports.
#[tokio::test]
async fn a_job_past_its_backoff_limit_is_reported_failed_with_the_controllers_reason() {
    let (env, ns, repo) = common::setup_repo("ctl-backoff").await;
    repo.push(&[("migrate.yaml", &job("migrate", "registry.example/fail:1", 1, ""))], "a Job whose pods fail");
    let dir = tempfile::tempdir().unwrap();
    let config = unit_config(dir.path(), &repo, "", &ns, "health_timeout = \"120s\"");
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let jobs = Api::<Job>::namespaced(env.client.clone(), &ns);
    let failed = |job: &Job| {
        let conditions = job.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "Failed" && c.status == "True")
    };
    // The first try fails, the controller retries after its 10 s back-off, the retry fails.
    let ended =
        common::eventually(Duration::from_secs(90), || async { failed(&jobs.get("migrate").await.unwrap()) }).await;
    assert!(ended, "the Job controller did not fail the Job");
    let job = jobs.get("migrate").await.unwrap();
    let status = job.status.unwrap();
    assert_eq!(status.failed, Some(2), "the first try and one retry");
    let reasons: Vec<_> = status.conditions.unwrap_or_default().into_iter().map(|c| (c.type_, c.reason)).collect();
    assert!(reasons.contains(&("Failed".into(), Some("BackoffLimitExceeded".into()))), "{reasons:?}");
    assert_written_by("jobs", &ns, "migrate", "job-controller");

    let status = common::gitward(&["status"], &config, LIMIT);
    assert_eq!(status.code, Some(1), "{}{}", status.stdout, status.stderr);
    let line = format!(
        "unhealthy  Job/{ns}/migrate Failed JobFailed: Job Failed. failed: 2/1: Job has reached the specified backoff limit"
    );
    assert!(status.stdout.contains(&line), "{}", status.stdout);
}

/// A chart `app` with a Deployment and a `post-install` hook Job `app-notify` running `image`,
/// its annotations plus `policy` (YAML lines, indented 4).
fn hooked_chart(repo: &common::GitRepo, image: &str, policy: &str) {
    repo.write("chart/Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\n");
    repo.write("chart/templates/web.yaml", &deployment("app-web", "registry.k8s.io/pause:3.10", 1, 600));
    let annotations = format!("    helm.sh/hook: post-install\n{policy}");
    repo.write("chart/templates/notify.yaml", &job("app-notify", image, 0, &annotations));
    repo.commit_and_push("a chart with a post-install Job");
}

fn helm_unit_config(dir: &Path, repo: &common::GitRepo, ns: &str) -> PathBuf {
    unit_config(dir, repo, "chart", ns, "health_timeout = \"60s\"\n[sync.helm]\nrelease = \"app\"\n")
}

#[tokio::test]
async fn a_post_install_hook_job_completed_by_the_job_controller_is_deleted_per_its_policy() {
    let (env, ns, repo) = common::setup_repo("ctl-hook").await;
    hooked_chart(&repo, "registry.k8s.io/pause:3.10", "    helm.sh/hook-delete-policy: hook-succeeded\n");
    let dir = tempfile::tempdir().unwrap();
    let config = helm_unit_config(dir.path(), &repo, &ns);
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // The Job controller wrote it Complete (a Job's status says so only once its Pods
    // succeeded), then gitward deleted it as hook-succeeded says.
    let writers = status_writers("jobs", &ns, "app-notify");
    assert!(!writers.is_empty(), "the Job controller never wrote the hook Job's status");
    assert!(writers.iter().all(|w| w == "system:serviceaccount:kube-system:job-controller"), "{writers:?}");
    let jobs = Api::<Job>::namespaced(env.client.clone(), &ns);
    assert!(jobs.get_opt("app-notify").await.unwrap().is_none(), "hook-succeeded deletes the Job");
    let deleted_by_gitward = std::fs::read_to_string(common::audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|e| {
            e["verb"] == "delete"
                && e["objectRef"]["resource"] == "jobs"
                && e["objectRef"]["namespace"] == ns.as_str()
                && e["objectRef"]["name"] == "app-notify"
                && e["userAgent"].as_str().is_some_and(|a| a.starts_with("gitward"))
        });
    assert!(deleted_by_gitward, "the hook Job was not deleted by gitward");
    let summary = common::log_events(&run.stderr, "sync complete").next().expect("sync complete");
    assert_eq!(summary["result"], "healthy", "{summary}");
}

#[tokio::test]
async fn a_post_install_hook_job_that_fails_fails_the_sync_naming_the_hook() {
    let (env, ns, repo) = common::setup_repo("ctl-hook-fail").await;
    hooked_chart(&repo, "registry.example/fail:1", "");
    let dir = tempfile::tempdir().unwrap();
    let config = helm_unit_config(dir.path(), &repo, &ns);
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("post-install hook") && run.stderr.contains("app-notify"), "{}", run.stderr);
    let job = Api::<Job>::namespaced(env.client.clone(), &ns).get("app-notify").await.unwrap();
    let failed = job.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(failed.iter().any(|c| c.type_ == "Failed" && c.status == "True"), "{failed:?}");
    assert_written_by("jobs", &ns, "app-notify", "job-controller");
}

#[tokio::test]
async fn a_pruned_namespace_is_gone_within_seconds_and_a_deployments_replicasets_and_pods_are_collected() {
    let (env, ns) = common::setup_ns("ctl-prune").await;
    let child = format!("{ns}-app");
    let repo = common::GitRepo::new();
    // The Namespace is annotated for cascade: it holds the Deployment's ReplicaSet and Pods
    // and the controllers' furniture, and the prune is meant to take them.
    repo.write(
        "namespace.yaml",
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {child}\n  annotations:\n    gitward.dev/prune: cascade\n"),
    );
    let web = deployment("web", "registry.k8s.io/pause:3.10", 2, 600)
        .replace("  name: web\n", &format!("  name: web\n  namespace: {child}\n"));
    repo.write("web.yaml", &web);
    repo.write("api.yaml", &deployment("api", "registry.k8s.io/pause:3.10", 2, 600));
    repo.commit_and_push("a namespace with a Deployment, and a Deployment here");
    let dir = tempfile::tempdir().unwrap();
    let config = unit_config(dir.path(), &repo, "", &ns, "health_timeout = \"60s\"\nmax_prune_fraction = 1.0");
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let replicasets = Api::<ReplicaSet>::namespaced(env.client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(env.client.clone(), &ns);
    assert_eq!(replicasets.list(&ListParams::default()).await.unwrap().items.len(), 1);
    assert_eq!(pods.list(&ListParams::default()).await.unwrap().items.len(), 2);

    // Both removed from git: gitward deletes the Namespace and the Deployment, nothing else.
    repo.remove("namespace.yaml");
    repo.remove("web.yaml");
    repo.remove("api.yaml");
    repo.push(&[("settings.yaml", &common::cm("settings", "1"))], "only a ConfigMap");
    let run = common::gitward(&["sync", "--wait"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let namespaces = Api::<Namespace>::all(env.client.clone());
    let gone =
        common::eventually(Duration::from_secs(30), || async { namespaces.get_opt(&child).await.unwrap().is_none() })
            .await;
    assert!(gone, "the namespace controller did not finish the pruned Namespace");
    let collected = common::eventually(WAIT, || async {
        replicasets.list(&ListParams::default()).await.unwrap().items.is_empty()
            && pods.list(&ListParams::default()).await.unwrap().items.is_empty()
    })
    .await;
    assert!(collected, "the garbage collector did not remove the pruned Deployment's ReplicaSet and Pods");
    // gitward deleted only its members: the ReplicaSets and Pods went by the garbage collector.
    let deleted: Vec<String> = std::fs::read_to_string(common::audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["verb"] == "delete" && e["userAgent"].as_str().is_some_and(|a| a.starts_with("gitward")))
        .filter(|e| {
            let namespace = &e["objectRef"]["namespace"];
            namespace == ns.as_str() || namespace == child.as_str() || e["objectRef"]["name"] == child.as_str()
        })
        .filter_map(|e| e["objectRef"]["resource"].as_str().map(str::to_owned))
        .collect();
    let mut deleted_kinds = deleted.clone();
    deleted_kinds.sort();
    deleted_kinds.dedup();
    assert_eq!(deleted_kinds, ["deployments", "namespaces"], "{deleted:?}");
}
