//! Helm hooks as phases of a sync, against the real apiserver and the real `helm`. The test
//! cluster's Job controller runs the hook Jobs on kwok's simulated Nodes: a Job's Pod runs for
//! the time its `gitward.test/run-for` annotation says (tests/cluster/stages.yaml), then
//! succeeds, or fails when its image name contains `fail`; the deployment controller rolls the
//! charts' Deployments out.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{Value, json};

use crate::common;
use crate::sources::render::{chain, config, config_text};

/// A liveness bound for the waits below, not a speed assertion.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A chart `app` at `chart/` of version `version`: a ConfigMap of its own, and `hooks` (extra
/// template files, by name).
fn chart(repo: &common::GitRepo, version: &str, hooks: &[(&str, String)]) {
    repo.write("chart/Chart.yaml", &format!("apiVersion: v2\nname: app\nversion: {version}\n"));
    repo.write(
        "chart/templates/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  version: {{ .Chart.Version | quote }}\n",
    );
    for (name, text) in hooks {
        repo.write(&format!("chart/templates/{name}"), text);
    }
}

/// A hook Job `name` running `image`, with `annotations` (YAML lines, indented 4), whose Pod
/// runs for 2 s (then succeeds, or fails when `image` contains `fail`): long enough to see what
/// gitward does while a hook runs.
pub(crate) fn job(name: &str, image: &str, annotations: &str) -> String {
    job_running(name, image, annotations, "2s")
}

/// [`job`] whose Pod runs for `run_for` (a Go duration).
pub(crate) fn job_running(name: &str, image: &str, annotations: &str, run_for: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n{annotations}\nspec:\n  backoffLimit: 0\n  template:\n    metadata:\n      annotations: {{gitward.test/run-for: \"{run_for}\"}}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: run\n        image: {image}\n"
    )
}

/// A hook ConfigMap `name` with `annotations` (YAML lines, indented 4).
fn hook_cm(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n{annotations}\ndata:\n  k: v\n"
    )
}

/// Waits until gitward created the Job `name` (a new one when `not_uid` names the old one's uid)
/// and returns it.
pub(crate) async fn created_job(api: &Api<Job>, name: &str, not_uid: Option<&str>) -> Job {
    let found = common::eventually(WAIT, || async {
        api.get_opt(name).await.ok().flatten().is_some_and(|j| j.metadata.uid.as_deref() != not_uid)
    })
    .await;
    assert!(found, "hook Job {name} was not created");
    api.get(name).await.unwrap()
}

/// Waits until the Job controller ended the Job `name`: `Complete` (`ok`) or `Failed`; panics
/// when it ended the other way or not within [`WAIT`].
pub(crate) async fn end_job(api: &Api<Job>, name: &str, ok: bool) {
    let ended = |job: &Job, kind: &str| {
        let conditions = job.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == kind && c.status == "True")
    };
    let (want, other) = if ok { ("Complete", "Failed") } else { ("Failed", "Complete") };
    let done = common::eventually(WAIT, || async {
        let job = api.get_opt(name).await.ok().flatten();
        job.is_none_or(|j| ended(&j, want) || ended(&j, other))
    })
    .await;
    assert!(done, "the Job controller did not end Job {name}");
    if let Some(job) = api.get_opt(name).await.unwrap() {
        assert!(ended(&job, want), "Job {name} did not end {want}: {:?}", job.status);
    }
}

pub(crate) fn image(job: &Job) -> String {
    let spec = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    spec.containers[0].image.clone().unwrap_or_default()
}

/// The first three words of the parent's `gitward.dev/hooks-ran` (`<revision> <install|upgrade>
/// <pre|post>`), without the release digest that follows them.
pub(crate) fn hooks_ran(parent: &std::collections::BTreeMap<String, String>) -> Option<String> {
    let value = parent.get("gitward.dev/hooks-ran")?;
    Some(value.split(' ').take(3).collect::<Vec<_>>().join(" "))
}

pub(crate) async fn parent_annotations(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> std::collections::BTreeMap<String, String> {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    api.get(name).await.unwrap().metadata.annotations.unwrap_or_default()
}

fn unit(repo: &common::GitRepo, ns: &str) -> String {
    chart_unit(repo, ns, "60s")
}

/// Unit `app`, the chart at `chart/` of `repo` as release `app` in `ns`, waiting at most
/// `health_timeout` (a duration, "2s") for health.
fn chart_unit(repo: &common::GitRepo, ns: &str, health_timeout: &str) -> String {
    let extra = format!("health_timeout = \"{health_timeout}\"\n[sync.helm]\nrelease = \"app\"\n");
    common::unit_toml("app", &repo.bare(), "chart", ns, &extra)
}

/// The case: a `pre-install,pre-upgrade` Job hook with the default policy
/// (`before-hook-creation`) whose image changes with the next chart version is deleted and
/// created again, not patched (its pod template is immutable), before the chart's own objects;
/// it is no ApplySet member, and a resync of the same revision — by the same engine or a new
/// one — does not run it again.
#[tokio::test]
async fn a_pre_upgrade_job_hook_is_recreated_for_the_next_chart_version_and_not_rerun_on_resync() {
    let (env, ns) = common::setup_ns("hooks-pre").await;
    let hook = "    helm.sh/hook: pre-install,pre-upgrade";
    let repo = common::GitRepo::new();
    // Only on upgrades: not run by the first sync (the ApplySet has no member yet).
    let upgrade_only = ("upgrade.yaml", hook_cm("app-upgraded", "    helm.sh/hook: pre-upgrade"));
    chart(&repo, "1.0.0", &[("migrate.yaml", job("app-migrate", "busybox:1.36", hook)), upgrade_only.clone()]);
    let first = repo.commit_and_push("app 1.0.0");
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &unit(&repo, &ns));
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);

    let engine = common::engine(&env.client, &config, "app").await;
    let sync = tokio::spawn(async move {
        let mut engine = engine;
        let report = engine.sync().await;
        (engine, report)
    });
    let old = created_job(&jobs, "app-migrate", None).await;
    // gitward waits for the hook: the chart's own objects are not applied while it runs.
    assert!(configmaps.get_opt("app-config").await.unwrap().is_none(), "applied before the pre hook ended");
    let labels = old.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key("applyset.kubernetes.io/part-of"), "a hook is no ApplySet member: {labels:?}");
    end_job(&jobs, "app-migrate", true).await;
    let (mut engine, report) = sync.await.unwrap();
    let report = report.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let actions = common::actions(&report);
    assert_eq!(actions.get(&format!("Job/{ns}/app-migrate")).map(String::as_str), Some("created"), "{actions:?}");
    assert!(!report.changes.has_failures(), "{actions:?}");
    assert_eq!(configmaps.get("app-config").await.unwrap().data.unwrap()["version"], "1.0.0");
    let parent = parent_annotations(&env.client, &ns, "gitward-app").await;
    assert_eq!(hooks_ran(&parent), Some(format!("{first} install pre")), "{parent:?}");
    assert!(configmaps.get_opt("app-upgraded").await.unwrap().is_none(), "a pre-upgrade hook on install");

    // The next chart version changes the Job's image: the old Job is deleted, a new one made.
    chart(&repo, "1.1.0", &[("migrate.yaml", job("app-migrate", "busybox:1.37", hook)), upgrade_only]);
    let second = repo.commit_and_push("app 1.1.0");
    let old_uid = old.metadata.uid.clone().unwrap();
    let sync = tokio::spawn(async move {
        let report = engine.sync().await;
        (engine, report)
    });
    let new = created_job(&jobs, "app-migrate", Some(&old_uid)).await;
    assert_eq!(image(&new), "busybox:1.37");
    assert_eq!(configmaps.get("app-config").await.unwrap().data.unwrap()["version"], "1.0.0", "before the hook ended");
    end_job(&jobs, "app-migrate", true).await;
    let (mut engine, report) = sync.await.unwrap();
    let report = report.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let actions = common::actions(&report);
    assert!(!report.changes.has_failures(), "no immutable-field error: {:?}", report.changes.entries);
    assert_eq!(actions.get(&format!("Job/{ns}/app-migrate")).map(String::as_str), Some("created"), "{actions:?}");
    assert_eq!(configmaps.get("app-config").await.unwrap().data.unwrap()["version"], "1.1.0");
    assert!(configmaps.get_opt("app-upgraded").await.unwrap().is_some(), "the pre-upgrade hook ran on the upgrade");
    let parent = parent_annotations(&env.client, &ns, "gitward-app").await;
    assert_eq!(hooks_ran(&parent), Some(format!("{second} upgrade pre")), "{parent:?}");

    // A resync of the same revision runs no hook: it returns without a Job to complete.
    let new_uid = new.metadata.uid.clone();
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!common::actions(&report).contains_key(&format!("Job/{ns}/app-migrate")), "{:?}", report.changes.entries);
    // Nor does a new process's (the record on the parent says the hooks ran).
    let mut fresh = common::engine(&env.client, &config, "app").await;
    let report = fresh.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!common::actions(&report).contains_key(&format!("Job/{ns}/app-migrate")), "{:?}", report.changes.entries);
    assert_eq!(jobs.get("app-migrate").await.unwrap().metadata.uid, new_uid);
    // Never a member: not recorded by the parent, never pruned.
    let members = common::member_record(&env.client, &fresh).await;
    assert!(!members.iter().any(|m| m.contains("app-migrate")), "{members:?}");
}

/// A pre hook that fails refuses the revision's other objects (skipped, not sent, nothing
/// pruned); with `hook-failed` its Job is deleted.
#[tokio::test]
async fn a_failed_pre_hook_refuses_the_revisions_other_objects() {
    let (env, ns, repo) = common::setup_repo("hooks-failed").await;
    let hook = "    helm.sh/hook: pre-install\n    helm.sh/hook-delete-policy: hook-failed";
    chart(&repo, "1.0.0", &[("migrate.yaml", job("app-migrate", "busybox:fail", hook))]);
    repo.commit_and_push("app 1.0.0");
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &unit(&repo, &ns));
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &ns);
    let engine = common::engine(&env.client, &config, "app").await;
    let sync = tokio::spawn(async move {
        let mut engine = engine;
        engine.sync().await
    });
    created_job(&jobs, "app-migrate", None).await;
    end_job(&jobs, "app-migrate", false).await;
    let report = sync.await.unwrap().unwrap_or_else(|e| panic!("{}", chain(&e)));
    let entry = |name: &str| report.changes.entries.iter().find(|e| e.object.name.as_str() == name).cloned();
    let hook = entry("app-migrate").expect("the hook's entry");
    assert_eq!(hook.action.to_string(), "failed");
    let message = hook.message.unwrap_or_default();
    assert!(message.contains("pre-install hook: JobFailed"), "{message}");
    assert!(message.contains("deleted (hook-failed)"), "{message}");
    let config_entry = entry("app-config").expect("the chart's ConfigMap has an entry");
    assert_eq!(config_entry.action.to_string(), "skipped");
    assert!(
        config_entry.message.unwrap_or_default().contains(&format!("pre-install hook Job/{ns}/app-migrate failed")),
        "{:?}",
        report.changes.entries
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(configmaps.get_opt("app-config").await.unwrap().is_none(), "refused objects are not sent");
    assert!(jobs.get_opt("app-migrate").await.unwrap().is_none(), "hook-failed deletes the failed Job");
}

/// Post hooks run only once the chart's objects are healthy (`gitward sync --wait`), one at a
/// time in ascending `helm.sh/hook-weight` (then name), whatever their names' order; a Job with
/// `hook-succeeded` is deleted once it completed; the parent records the post phase.
#[tokio::test]
async fn post_hooks_run_after_health_in_weight_order_and_hook_succeeded_deletes() {
    let (env, ns, repo) = common::setup_repo("hooks-post").await;
    let hooks = [
        ("a.yaml", hook_cm("a-late", "    helm.sh/hook: post-install\n    helm.sh/hook-weight: \"5\"")),
        (
            "z.yaml",
            hook_cm(
                "z-early",
                "    helm.sh/hook: post-install\n    helm.sh/hook-weight: \"-3\"\n    helm.sh/hook-delete-policy: hook-succeeded",
            ),
        ),
        (
            "job.yaml",
            job(
                "app-notify",
                "busybox:1.36",
                "    helm.sh/hook: post-install\n    helm.sh/hook-delete-policy: hook-succeeded",
            ),
        ),
        // Its Pod is ready 3 s after it is made: the time to see that no post hook runs before.
        ("deploy.yaml", common::deployment_with("app-web", "nginx:1.27", 1, 600, "3s")),
    ];
    chart(&repo, "1.0.0", &hooks);
    let revision = repo.commit_and_push("app 1.0.0");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gitward.toml");
    std::fs::write(&path, config_text(dir.path(), "", &unit(&repo, &ns))).unwrap();
    let child = {
        let path = path.clone();
        std::thread::spawn(move || common::gitward(&["sync", "--wait"], &path, Duration::from_secs(120)))
    };

    // The Deployment is applied and waited for; no post hook exists until it is healthy.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(env.client.clone(), &ns);
    assert!(common::eventually(WAIT, || async { deployments.get_opt("app-web").await.ok().flatten().is_some() }).await);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    for name in ["z-early", "a-late"] {
        assert!(configmaps.get_opt(name).await.unwrap().is_none(), "{name} before the Deployment was healthy");
    }
    // The deployment controller rolls it out.

    // Weight -3 ran, then the Job (weight 0) is waited for: weight 5 has not run yet.
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &ns);
    created_job(&jobs, "app-notify", None).await;
    // It is deleted by hook-succeeded only once the whole phase succeeded (as a Job's
    // ServiceAccount hook must outlive the Job).
    assert!(configmaps.get_opt("z-early").await.unwrap().is_some(), "weight -3 runs before weight 0, and stays");
    assert!(configmaps.get_opt("a-late").await.unwrap().is_none(), "weight 5 runs after the weight 0 Job ended");
    end_job(&jobs, "app-notify", true).await;
    let run = child.join().unwrap();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(configmaps.get_opt("a-late").await.unwrap().is_some());
    assert!(jobs.get_opt("app-notify").await.unwrap().is_none(), "hook-succeeded deletes the Job");
    assert!(configmaps.get_opt("z-early").await.unwrap().is_none(), "and the ConfigMap, after the phase");

    // The audit log holds the creates in weight order.
    let order: Vec<String> = std::fs::read_to_string(common::audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["verb"] == "patch" && e["objectRef"]["namespace"] == ns.as_str())
        .filter(|e| e["objectRef"]["subresource"].is_null() && e["userAgent"] != env.user_agent.as_str())
        .filter_map(|e| e["objectRef"]["name"].as_str().map(str::to_owned))
        .filter(|n| ["a-late", "z-early", "app-notify"].contains(&n.as_str()))
        .collect();
    assert_eq!(order, ["z-early", "app-notify", "a-late"], "{}", run.stderr);
    let deletes: Vec<String> = std::fs::read_to_string(common::audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["verb"] == "delete" && e["objectRef"]["namespace"] == ns.as_str())
        // gitward's own: the garbage collector deletes the Job's Pod after it.
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("gitward/")))
        .filter_map(|e| e["objectRef"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(deletes, ["app-notify", "z-early"], "last first, after every hook of the phase");
    let sync_complete = common::log_events(&run.stderr, "sync complete").next().expect("sync complete");
    assert_eq!(sync_complete["result"], "healthy", "{sync_complete}");
    let parent = parent_annotations(&env.client, &ns, "gitward-app").await;
    assert_eq!(hooks_ran(&parent), Some(format!("{revision} install post")), "{parent:?}");
}

/// The daemon runs post hooks once its health wait found the chart's objects healthy, and again
/// for the next chart version (`post-install,post-upgrade`, re-created by
/// `before-hook-creation`), recording each revision's post phase on the parent.
#[tokio::test]
async fn the_daemon_runs_post_hooks_after_its_health_wait_for_each_new_revision() {
    let (env, ns, repo) = common::setup_repo("hooks-daemon").await;
    let post = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-post\n  annotations:\n    helm.sh/hook: post-install,post-upgrade\ndata:\n  version: {{ .Chart.Version | quote }}\n";
    // Its Pod is ready 3 s after it is made: the time to see that no post hook runs before.
    let deployment = common::deployment_with("app-web", "nginx:1.27", 1, 600, "3s");
    let files = [("post.yaml", post.to_string()), ("deploy.yaml", deployment)];
    chart(&repo, "1.0.0", &files);
    let first = repo.commit_and_push("app 1.0.0");
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let text = config_text(&dir.path().join("state"), "", &unit(&repo, &ns)).replacen(
        "\n\n[render]",
        &format!("\nlisten = \"127.0.0.1:{port}\"\ninterval = \"1s\"\nresync_interval = \"1h\"\n\n[render]"),
        1,
    );
    let config = dir.path().join("config.toml");
    std::fs::write(&config, text).unwrap();
    let daemon = common::Daemon::start(&config, port, &[]);
    // Ready once applied, before the health wait ends: the Deployment is not healthy yet, so
    // no post hook may have run.
    assert!(daemon.wait_ready(WAIT).await, "not ready: {}", daemon.log_text());
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(configmaps.get_opt("app-config").await.unwrap().is_some());
    assert!(configmaps.get_opt("app-post").await.unwrap().is_none(), "a post hook before health");

    // The deployment controller rolls it out.
    let version =
        || async { configmaps.get_opt("app-post").await.ok().flatten().and_then(|c| c.data?.get("version").cloned()) };
    assert!(
        common::eventually(WAIT, || async { version().await.as_deref() == Some("1.0.0") }).await,
        "{}",
        daemon.log_text()
    );
    let recorded = || async { hooks_ran(&parent_annotations(&env.client, &ns, "gitward-app").await) };
    let expected = format!("{first} install post");
    assert!(
        common::eventually(WAIT, || async { recorded().await.as_deref() == Some(expected.as_str()) }).await,
        "{:?}",
        recorded().await
    );

    // The next version: an upgrade; the Deployment is unchanged, so the post hook runs at once.
    chart(&repo, "1.1.0", &files);
    let second = repo.commit_and_push("app 1.1.0");
    assert!(
        common::eventually(WAIT, || async { version().await.as_deref() == Some("1.1.0") }).await,
        "{}",
        daemon.log_text()
    );
    let expected = format!("{second} upgrade post");
    assert!(
        common::eventually(WAIT, || async { recorded().await.as_deref() == Some(expected.as_str()) }).await,
        "{:?}",
        recorded().await
    );
    let post_events = daemon
        .events()
        .into_iter()
        .filter(|e| e["message"] == "object" && e["object"] == format!("ConfigMap/{ns}/app-post"))
        .count();
    assert_eq!(post_events, 2, "one post hook run per revision: {}", daemon.log_text());
}

/// A hook replaces a same-named object only when it is the unit's: one of anyone else fails the
/// hook (and refuses the revision) and is left as it is; a member of the unit's ApplySet (a hook
/// an earlier gitward applied as an ordinary object) is deleted and made again as a hook.
#[tokio::test]
async fn a_hook_replaces_a_same_named_object_only_when_it_is_the_units() {
    let (env, ns, repo) = common::setup_repo("hooks-foreign").await;
    chart(&repo, "1.0.0", &[("setup.yaml", hook_cm("app-setup", "    helm.sh/hook: pre-install,pre-upgrade"))]);
    repo.commit_and_push("app 1.0.0");
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &unit(&repo, &ns));
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let foreign: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "app-setup"}, "data": {"owner": "someone"}})).unwrap();
    let foreign = configmaps.create(&Default::default(), &foreign).await.unwrap();

    let mut engine = common::engine(&env.client, &config, "app").await;
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let actions = common::actions(&report);
    assert_eq!(actions.get(&format!("ConfigMap/{ns}/app-setup")).map(String::as_str), Some("failed"), "{actions:?}");
    assert_eq!(actions.get(&format!("ConfigMap/{ns}/app-config")).map(String::as_str), Some("skipped"), "{actions:?}");
    let live = configmaps.get("app-setup").await.unwrap();
    assert_eq!(live.metadata.uid, foreign.metadata.uid, "someone else's object is not deleted");
    assert_eq!(live.data.unwrap()["owner"], "someone", "nor written over");

    // The same name as a member of the unit, as an earlier gitward applied hooks.
    configmaps.delete("app-setup", &Default::default()).await.unwrap();
    let id = engine.inventory().id.clone();
    let member: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "app-setup",
        "labels": {"applyset.kubernetes.io/part-of": id}}, "data": {"k": "old"}}))
    .unwrap();
    let member = configmaps.create(&Default::default(), &member).await.unwrap();
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!report.changes.has_failures(), "{:?}", report.changes.entries);
    let live = configmaps.get("app-setup").await.unwrap();
    assert_ne!(live.metadata.uid, member.metadata.uid, "made again");
    let labels = live.metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key("applyset.kubernetes.io/part-of"), "{labels:?}");
    assert_eq!(live.metadata.annotations.unwrap_or_default().get("gitward.dev/hook-of"), Some(&id));
    assert!(configmaps.get_opt("app-config").await.unwrap().is_some());
}

/// Post hooks held back because the rollout did not become healthy run on a later sync of the
/// same revision that finds it healthy — by another process, which reads from the parent that
/// the revision's pre phase ran (and does not run it again) and that it was an install.
#[tokio::test]
async fn post_hooks_held_back_by_an_unhealthy_rollout_run_when_a_later_sync_finds_it_healthy() {
    let (env, ns, repo) = common::setup_repo("hooks-later").await;
    let files = [
        ("pre.yaml", hook_cm("app-pre", "    helm.sh/hook: pre-install")),
        ("post.yaml", hook_cm("app-post", "    helm.sh/hook: post-install")),
        // Its Pod is ready 8 s after it is made: the first run's wait (2 s) gives up before.
        ("deploy.yaml", common::deployment_with("app-web", "nginx:1.27", 1, 600, "8s")),
    ];
    chart(&repo, "1.0.0", &files);
    let revision = repo.commit_and_push("app 1.0.0");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gitward.toml");
    // A short bound: the first run gives up on the rollout before it completes.
    let unit = chart_unit(&repo, &ns, "2s");
    std::fs::write(&path, config_text(dir.path(), "", &unit)).unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);

    let run = common::gitward(&["sync", "--wait"], &path, Duration::from_secs(120));
    assert_eq!(run.code, Some(1), "the rollout did not finish: {}", run.stderr);
    let pre_uid = configmaps.get("app-pre").await.unwrap().metadata.uid;
    assert!(configmaps.get_opt("app-post").await.unwrap().is_none(), "no post hook while progressing");

    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(env.client.clone(), &ns);
    let available = || async {
        let web = deployments.get("app-web").await.unwrap();
        web.status.and_then(|s| s.available_replicas) == Some(1)
    };
    assert!(common::eventually(WAIT, available).await, "the deployment controller did not roll it out");

    let run = common::gitward(&["sync", "--wait"], &path, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(configmaps.get_opt("app-post").await.unwrap().is_some(), "the post-install hook ran: {}", run.stderr);
    assert_eq!(configmaps.get("app-pre").await.unwrap().metadata.uid, pre_uid, "the pre hook did not run again");
    let parent = parent_annotations(&env.client, &ns, "gitward-app").await;
    assert_eq!(hooks_ran(&parent), Some(format!("{revision} install post")), "{parent:?}");
}

/// A pre-install hook that is a custom resource of a CRD in the chart's `crds/` runs once that
/// CRD is Established, as Helm installs `crds/` before its hooks; the chart's other objects wait
/// for the hook.
#[tokio::test]
async fn a_pre_install_hook_of_a_kind_the_chart_defines_runs_after_its_crd() {
    let (env, ns, repo) = common::setup_repo("hooks-crd").await;
    let crd = serde_json::to_string(&common::crd("hooks.gitward.dev", "Setup", "setups")).unwrap();
    repo.write("chart/crds/setup.yaml", &crd);
    let setup = "apiVersion: hooks.gitward.dev/v1\nkind: Setup\nmetadata:\n  name: app-setup\n  annotations:\n    helm.sh/hook: pre-install\nspec:\n  step: one\n";
    chart(&repo, "1.0.0", &[("setup.yaml", setup.to_string())]);
    repo.commit_and_push("app 1.0.0 with a CRD");
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &unit(&repo, &ns));
    let mut engine = common::engine(&env.client, &config, "app").await;
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!report.changes.has_failures(), "{:?}", report.changes.entries);
    let actions = common::actions(&report);
    assert_eq!(actions.get(&format!("Setup/{ns}/app-setup")).map(String::as_str), Some("created"), "{actions:?}");
    let resource = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("hooks.gitward.dev", "v1", "Setup"),
        "setups",
    );
    let setups: Api<kube::api::DynamicObject> = Api::namespaced_with(env.client.clone(), &ns, &resource);
    let live = setups.get("app-setup").await.unwrap();
    assert!(!live.metadata.labels.unwrap_or_default().contains_key("applyset.kubernetes.io/part-of"));
}

/// A post-install Job hook that does not end within `health_timeout` fails the sync: `gitward
/// sync` exits 1, its line names the Job, `gitward status` shows it, and the chart's objects
/// stay applied. A pre-upgrade Job hook that does not end refuses the next version's objects:
/// the members stay as they were.
#[tokio::test]
async fn a_hook_that_does_not_end_in_time_fails_the_sync_with_exit_1() {
    let (env, ns, repo) = common::setup_repo("hooks-timeout").await;
    let check = ("check.yaml", job_running("app-check", "busybox:1.36", "    helm.sh/hook: post-install", "10m"));
    chart(&repo, "1.0.0", std::slice::from_ref(&check));
    repo.commit_and_push("app 1.0.0");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gitward.toml");
    let unit = chart_unit(&repo, &ns, "2s");
    std::fs::write(&path, config_text(&dir.path().join("state"), "", &unit)).unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);

    let run = common::gitward(&["sync"], &path, Duration::from_secs(60));
    assert_eq!(run.code, Some(1), "a hook that did not end fails the sync: {}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(&format!("Job/{ns}/app-check")), "the line names the hook: {}", run.stdout);
    assert!(run.stdout.contains("failed"), "{}", run.stdout);
    assert!(configmaps.get_opt("app-config").await.unwrap().is_some(), "the chart's objects stay applied");
    let status = common::gitward(&["status"], &path, Duration::from_secs(30));
    assert_eq!(status.code, Some(1), "{}\n{}", status.stdout, status.stderr);
    let shown = status.stdout.lines().find(|l| l.contains(&format!("Job/{ns}/app-check")));
    let shown = shown.unwrap_or_else(|| panic!("status does not show the hook: {}", status.stdout));
    assert!(shown.contains("failed") && shown.contains("did not end within 2s"), "{shown}");

    // The next version's pre-upgrade hook does not end: nothing of that version is applied.
    let migrate = ("migrate.yaml", job_running("app-migrate", "busybox:1.36", "    helm.sh/hook: pre-upgrade", "10m"));
    chart(&repo, "1.1.0", &[check, migrate]);
    repo.commit_and_push("app 1.1.0");
    let run = common::gitward(&["sync"], &path, Duration::from_secs(60));
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(&format!("Job/{ns}/app-migrate")), "{}", run.stdout);
    assert_eq!(configmaps.get("app-config").await.unwrap().data.unwrap()["version"], "1.0.0", "members as they were");
}

/// Hooks run for a changed release, not for every commit: a commit that changes only another
/// path of the repository (a monorepo) leaves the unit's render as it was and runs no
/// `pre-upgrade` hook; a commit that changes the chart's values does.
#[tokio::test]
async fn a_commit_that_leaves_the_release_unchanged_runs_no_upgrade_hook() {
    let (env, ns, repo) = common::setup_repo("hooks-digest").await;
    let hook = "    helm.sh/hook: pre-install,pre-upgrade";
    chart(&repo, "1.0.0", &[("migrate.yaml", job("app-migrate", "busybox:1.36", hook))]);
    repo.commit_and_push("app 1.0.0");
    let state = tempfile::tempdir().unwrap();
    let unit = chart_unit(&repo, &ns, "30s");
    let config = config(state.path(), "", &unit);
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &ns);
    let engine = common::engine(&env.client, &config, "app").await;
    let sync = |engine: gitward::sync::Engine| {
        tokio::spawn(async move {
            let mut engine = engine;
            let report = engine.sync().await;
            (engine, report)
        })
    };
    let first = sync(engine);
    let old = created_job(&jobs, "app-migrate", None).await;
    end_job(&jobs, "app-migrate", true).await;
    let (engine, report) = first.await.unwrap();
    assert!(!report.unwrap_or_else(|e| panic!("{}", chain(&e))).changes.has_failures());

    // Another path of the repository: same release, no hook.
    let elsewhere = repo.push(&[("other/README.md", "another team's directory\n")], "elsewhere");
    let (engine, report) = sync(engine).await.unwrap();
    let report = report.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(report.revision.to_string(), elsewhere);
    assert!(!common::actions(&report).contains_key(&format!("Job/{ns}/app-migrate")), "{:?}", report.changes.entries);
    assert!(!report.changes.has_failures(), "{:?}", report.changes.entries);
    assert_eq!(
        jobs.get("app-migrate").await.unwrap().metadata.uid,
        old.metadata.uid,
        "the hook Job was not made again"
    );
    // Nor by a new process reading the record.
    let (_, report) = sync(common::engine(&env.client, &config, "app").await).await.unwrap();
    let report = report.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(!common::actions(&report).contains_key(&format!("Job/{ns}/app-migrate")), "{:?}", report.changes.entries);

    // New values change the release: the upgrade hook runs.
    repo.write("chart/values.yaml", "replicas: 2\n");
    repo.write(
        "chart/templates/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
    );
    repo.commit_and_push("values");
    let next = sync(engine);
    created_job(&jobs, "app-migrate", old.metadata.uid.as_deref()).await;
    end_job(&jobs, "app-migrate", true).await;
    let (_, report) = next.await.unwrap();
    let report = report.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(common::actions(&report).get(&format!("Job/{ns}/app-migrate")).map(String::as_str), Some("created"));
}
