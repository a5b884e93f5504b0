//! Helm hooks of a chart unit (`[sync.helm] repo_url`): a chart archive served by an HTTP chart
//! repository on loopback (`helm package`, `helm repo index`) has its hooks run as phases of the
//! sync, as a chart in git does, never applied as ApplySet members. The test cluster has no Job
//! controller: the test plays it, as tests/hooks.rs does.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::common;
use crate::common::charts::ChartServer;
use crate::hooks::{created_job, end_job, hooks_ran, image, job, parent_annotations};
use crate::render::{config, config_text};

/// The chart unit `shop` taking chart `hooked` (any version) from `repo_url` into `namespace`.
fn unit(namespace: &str, repo_url: &str) -> String {
    format!(
        "[[sync]]\nname = \"shop\"\nnamespace = \"{namespace}\"\nhealth_timeout = \"60s\"\n[sync.helm]\n\
         repo_url = \"{repo_url}\"\nchart = \"hooked\"\nversion = \">=0.1.0\"\nrelease = \"shop\"\n"
    )
}

/// A chart from an HTTP chart repository with a `post-install,post-upgrade` Job hook (default
/// policy, `before-hook-creation`): the Job is created after the chart's own ConfigMap, carries
/// no ApplySet label and is not in the member record; the next chart version, whose Job has
/// another image (an immutable pod template), deletes it and creates it again instead of
/// patching it, and the sync exits 0.
#[tokio::test]
async fn a_repository_charts_post_install_job_runs_as_a_hook_and_is_recreated_for_the_next_version() {
    let env = common::setup("chart-hooks").await;
    let ns = env.namespace.clone();
    let work = tempfile::tempdir().unwrap();
    let server = ChartServer::start(&work.path().join("served"));
    let hook = "    helm.sh/hook: post-install,post-upgrade";
    let check = |image: &str| job("shop-check", image, hook);
    server.publish_with(work.path(), "hooked", "0.1.0", &[("check.yaml", &check("busybox:1.36"))]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gitward.toml");
    let units = unit(&ns, &server.url);
    std::fs::write(&path, config_text(&dir.path().join("state"), "", &units)).unwrap();
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let sync = || {
        let path = path.clone();
        std::thread::spawn(move || common::gitward(&["sync"], &path, Duration::from_secs(120)))
    };

    let run = sync();
    let old = created_job(&jobs, "shop-check", None).await;
    assert!(configmaps.get_opt("shop-hooked").await.unwrap().is_some(), "a post hook before the chart's objects");
    let labels = old.metadata.labels.clone().unwrap_or_default();
    assert!(!labels.contains_key("applyset.kubernetes.io/part-of"), "a hook is no ApplySet member: {labels:?}");
    end_job(&jobs, "shop-check", true).await;
    let run = run.join().unwrap();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let hook_event = common::log_events(&run.stderr, "object")
        .find(|e| e["object"] == format!("Job/{ns}/shop-check"))
        .unwrap_or_else(|| panic!("no object event for the hook: {}", run.stderr));
    assert!(hook_event["reason"].as_str().unwrap_or_default().contains("post-install hook"), "{hook_event}");
    let engine = common::engine(&env.client, &config(&dir.path().join("state"), "", &units), "shop").await;
    let members = common::member_record(&env.client, &engine).await;
    assert!(members.iter().any(|m| m.contains("shop-hooked")), "{members:?}");
    assert!(!members.iter().any(|m| m.contains("shop-check")), "a hook is never a member: {members:?}");
    let ran = hooks_ran(&parent_annotations(&env.client, &ns, "gitward-shop").await).unwrap_or_default();
    assert!(ran.starts_with("hooked@0.1.0@sha256:") && ran.ends_with(" install post"), "{ran}");

    // The next chart version changes the Job's pod template: re-created, not patched.
    server.publish_with(work.path(), "hooked", "0.2.0", &[("check.yaml", &check("busybox:1.37"))]);
    let run = sync();
    let old_uid = old.metadata.uid.clone().unwrap();
    let new = created_job(&jobs, "shop-check", Some(&old_uid)).await;
    assert_eq!(image(&new), "busybox:1.37");
    let version = configmaps.get("shop-hooked").await.unwrap().data.unwrap_or_default().get("version").cloned();
    assert_eq!(version.as_deref(), Some("0.2.0"), "the upgrade's objects before its post hook");
    end_job(&jobs, "shop-check", true).await;
    let run = run.join().unwrap();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("immutable"), "{}", run.stderr);
    let ran = hooks_ran(&parent_annotations(&env.client, &ns, "gitward-shop").await).unwrap_or_default();
    assert!(ran.starts_with("hooked@0.2.0@sha256:") && ran.ends_with(" upgrade post"), "{ran}");
}
