//! Helm hooks of a chart unit (`[sync.helm] repo_url`): a chart archive served by an HTTP chart
//! repository on loopback (`helm package`, `helm repo index`) has its hooks run as phases of the
//! sync, as a chart in git does, never applied as ApplySet members. The test cluster has no Job
//! controller: the test plays it, as tests/apply/hooks.rs does.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::apply::hooks::{created_job, end_job, hooks_ran, image, job, parent_annotations};
use crate::common;
use crate::common::charts::{ChartServer, Registry, package_with};
use crate::sources::render::{chain, config, config_text};

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
    let (env, ns) = common::setup_ns("chart-hooks").await;
    let work = tempfile::tempdir().unwrap();
    let server = ChartServer::start(&work.path().join("served"));
    let hook = "    helm.sh/hook: post-install,post-upgrade";
    let check = |image: &str| job("shop-check", image, hook);
    server.publish_with(work.path(), "hooked", "0.1.0", &[("check.yaml", &check("busybox:1.36"))]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gitward.toml");
    let units = unit(&ns, &server.url);
    std::fs::write(&path, config_text(&dir.path().join("state"), &crate::sources::charts::listed(&server.url), &units))
        .unwrap();
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
    let engine = common::engine(
        &env.client,
        &config(&dir.path().join("state"), &crate::sources::charts::listed(&server.url), &units),
        "shop",
    )
    .await;
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

/// A `pre-install` ConfigMap hook `<release>-pre`.
const PRE_HOOK: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-pre\n  annotations:\n    helm.sh/hook: pre-install\ndata:\n  k: v\n";

/// After `engine`'s sync that gave `report`: the ConfigMap `name` in `ns` was made as a hook
/// (pre-install entry, `gitward.dev/hook-of`, no ApplySet label) and is not in the member record.
async fn made_as_hook(
    env: &common::TestEnv,
    engine: &gitward::sync::Engine,
    report: &gitward::sync::Report,
    name: &str,
) {
    let ns = &env.namespace;
    let entry = report.changes.entries.iter().find(|e| e.object.to_string() == format!("ConfigMap/{ns}/{name}"));
    let message = entry.and_then(|e| e.message.clone()).unwrap_or_default();
    assert!(message.contains("pre-install hook"), "{name}: {:?}", report.changes.entries);
    let live = Api::<ConfigMap>::namespaced(env.client.clone(), ns).get(name).await.unwrap();
    let labels = live.metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key("applyset.kubernetes.io/part-of"), "{name} is no member: {labels:?}");
    assert!(live.metadata.annotations.unwrap_or_default().contains_key("gitward.dev/hook-of"), "{name}");
    let members = common::member_record(&env.client, engine).await;
    assert!(!members.iter().any(|m| m.contains(name)), "{name} in the member record: {members:?}");
}

/// The same hook is a hook from every chart source: a chart pushed to an OCI registry, and a
/// dependency (from an HTTP chart repository) of an umbrella chart in git.
#[tokio::test]
async fn a_hook_is_a_hook_from_an_oci_registry_and_in_an_umbrella_charts_dependency() {
    let (env, ns) = common::setup_ns("chart-hooks-oci").await;
    let work = tempfile::tempdir().unwrap();
    let registry = Registry::start().await;
    let archive = package_with(work.path(), "hooked", "0.1.0", &work.path().join("out"), &[("pre.yaml", PRE_HOOK)]);
    registry.push(work.path(), &archive, "charts");
    let server = ChartServer::start(&work.path().join("served"));
    server.publish_with(work.path(), "hooked", "0.1.0", &[("pre.yaml", PRE_HOOK)]);
    let repo = common::GitRepo::new();
    let dependency = format!("- name: hooked\n  version: 0.1.0\n  repository: \"{}/\"\n", server.url);
    repo.write(
        "umbrella/Chart.yaml",
        &format!("apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n{dependency}"),
    );
    repo.push(&[("umbrella/Chart.lock", &format!("dependencies:\n{dependency}"))], "umbrella chart");
    let oci = format!(
        "[[sync]]\nname = \"oci\"\nnamespace = \"{ns}\"\n[sync.helm]\nrepo_url = \"oci://{}/charts\"\n\
         chart = \"hooked\"\nversion = \"*\"\nrelease = \"reg\"\n",
        registry.host
    );
    let umbrella = common::unit_toml("umbrella", &repo.bare(), "umbrella", &ns, "[sync.helm]\nrelease = \"umb\"\n");
    let state = tempfile::tempdir().unwrap();
    let listed = format!("chart_repositories = [\"oci://{}\", \"{}\"]\n", registry.host, server.url);
    let config = config(state.path(), &listed, &(oci + &umbrella));

    for (unit, release) in [("oci", "reg"), ("umbrella", "umb")] {
        let mut engine = common::engine(&env.client, &config, unit).await;
        let report = engine.sync().await.unwrap_or_else(|e| panic!("{unit}: {}", chain(&e)));
        assert!(!report.changes.has_failures(), "{unit}: {:?}", report.changes.entries);
        let member = Api::<ConfigMap>::namespaced(env.client.clone(), &ns).get_opt(&format!("{release}-hooked")).await;
        assert!(member.unwrap().is_some(), "{unit}: the chart's own ConfigMap is applied");
        let members = common::member_record(&env.client, &engine).await;
        assert!(members.iter().any(|m| m.contains(&format!("{release}-hooked"))), "{unit}: {members:?}");
        made_as_hook(&env, &engine, &report, &format!("{release}-pre")).await;
    }
}
