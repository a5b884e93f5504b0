//! cert-manager v1.16.2's own Helm chart (tests/fixtures/cert-manager, unmodified but for the
//! version its release tool writes into `Chart.yaml`), packaged into an HTTP chart repository on
//! loopback as its publishers do, synced by a chart unit: its `startupapicheck` Job and that
//! Job's ServiceAccount and RBAC are post-install hooks, run once the three Deployments are
//! rolled out and never made ApplySet members, and the next chart version (another image in
//! the Job's immutable pod template) runs the Job again instead of patching it. The test
//! cluster's controllers roll the Deployments out and run the Job on kwok's simulated Nodes (its
//! Pod runs 2 s: `gitward.test/run-for`, tests/cluster/stages.yaml).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;

use crate::apply::hooks::{created_job, end_job};
use crate::common::{self, charts};
use crate::sources::render::config_text;

const JOB: &str = "cm-cert-manager-startupapicheck";
const HOOK: &str = "\"helm.sh/hook\" = \"post-install,post-upgrade\"";
const DEPLOYMENTS: [&str; 3] = ["cm-cert-manager", "cm-cert-manager-cainjector", "cm-cert-manager-webhook"];

/// `helm package` of the fixture as release `version` (chart and app version, as cert-manager's
/// release tool sets them) into `served`, then `helm repo index` of it.
fn publish(work: &Path, served: &Path, version: &str) -> PathBuf {
    let fixture = common::fixtures().join("cert-manager/v1.16.2");
    let dir = work.join(format!("cert-manager-{version}"));
    let status = std::process::Command::new("cp").arg("-r").arg(&fixture).arg(&dir).status().unwrap();
    assert!(status.success());
    let template = std::fs::read_to_string(dir.join("Chart.template.yaml")).unwrap();
    let chart = template
        .replace("version: v0.0.0", &format!("version: {version}"))
        .replace("appVersion: v0.0.0", &format!("appVersion: {version}"))
        .replace("{{IS_PRERELEASE}}", "false");
    std::fs::write(dir.join("Chart.yaml"), chart).unwrap();
    let home = work.join("helm-home");
    charts::helm(&home, &["package", dir.to_str().unwrap(), "-d", served.to_str().unwrap()], work);
    charts::helm(&home, &["repo", "index", served.to_str().unwrap()], work);
    served.join(format!("cert-manager-{version}.tgz"))
}

/// The image of a Job's first container.
fn job_image(job: &Job) -> String {
    let spec = job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("a pod template");
    spec.containers[0].image.clone().unwrap_or_default()
}

#[tokio::test]
async fn cert_manager_from_a_chart_repository_runs_its_startupapicheck_as_a_hook_and_again_for_the_next_version() {
    let (env, ns) = common::setup_ns("cert-manager").await;
    let work = tempfile::tempdir().unwrap();
    let served = work.path().join("served");
    let server = charts::ChartServer::start(&served);
    publish(work.path(), &served, "v1.16.2");
    // The Job, its ServiceAccount and RBAC run after every install and upgrade, as many users set
    // them (the chart's default is post-install only); Helm merges these over the chart's other
    // hook annotations (weight, delete policy).
    let unit = format!(
        "[[sync]]\nname = \"cm\"\nnamespace = \"{ns}\"\nhealth_timeout = \"120s\"\n[sync.helm]\nrepo_url = \"{}\"\n\
         chart = \"cert-manager\"\nversion = \">=1.16.0\"\nrelease = \"cm\"\n\
         [sync.helm.values.startupapicheck.jobAnnotations]\n{HOOK}\n\
         [sync.helm.values.startupapicheck.rbac.annotations]\n{HOOK}\n\
         [sync.helm.values.startupapicheck.serviceAccount.annotations]\n{HOOK}\n\
         [sync.helm.values.startupapicheck.podAnnotations]\n\"gitward.test/run-for\" = \"2s\"\n",
        server.url
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gitward.toml");
    std::fs::write(&path, config_text(&dir.path().join("state"), &crate::sources::charts::listed(&server.url), &unit))
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client.clone(), &ns);

    let mut uid = None;
    for version in ["v1.16.2", "v1.16.3"] {
        if version != "v1.16.2" {
            publish(work.path(), &served, version);
        }
        let config = path.clone();
        let run = std::thread::spawn(move || common::gitward(&["sync", "--wait"], &config, Duration::from_secs(180)));

        let job = created_job(&jobs, JOB, uid.as_deref()).await;
        assert_eq!(job_image(&job), format!("quay.io/jetstack/cert-manager-startupapicheck:{version}"));
        let labels = job.metadata.labels.clone().unwrap_or_default();
        assert!(!labels.contains_key("applyset.kubernetes.io/part-of"), "{version}: the hook is a member: {labels:?}");
        for name in DEPLOYMENTS {
            let d =
                deployments.get(name).await.unwrap_or_else(|e| panic!("{version}: {name} before the post hook: {e}"));
            let generation = d.metadata.generation.unwrap_or(1);
            let observed = d.status.and_then(|s| s.observed_generation);
            assert_eq!(observed, Some(generation), "{version}: the hook ran before {name} rolled out");
        }
        let hook_account = accounts.get_opt(JOB).await.unwrap();
        assert!(hook_account.is_some(), "{version}: the hook's ServiceAccount (weight -5) comes before the Job");
        uid = job.metadata.uid.clone();
        end_job(&jobs, JOB, true).await;
        let run = run.join().unwrap();
        assert_eq!(run.code, Some(0), "{version}:\n{}\n{}", run.stdout, run.stderr);
        assert!(!run.stderr.contains("immutable"), "{version}: {}", run.stderr);
        // hook-succeeded: the Job and its RBAC are deleted once it succeeded.
        let gone = common::eventually(Duration::from_secs(30), || async {
            jobs.get_opt(JOB).await.unwrap().is_none() && accounts.get_opt(JOB).await.unwrap().is_none()
        })
        .await;
        assert!(gone, "{version}: the succeeded hook and its ServiceAccount were not deleted");
    }
}
