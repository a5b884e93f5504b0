//! `gitward run` follows the ConfigMaps and Secrets a unit reads variables from
//! (`[sync.substitute] from`): a change to one syncs the unit again, with no push, poll or
//! resync due (both are an hour away).

use crate::common;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// A generous bound for "it happened", not a speed assertion.
const WAIT: Duration = Duration::from_secs(90);

/// `data.color` of the live ConfigMap `name`, if it exists.
async fn color(api: &Api<ConfigMap>, name: &str) -> Option<String> {
    api.get_opt(name).await.ok().flatten()?.data?.remove("color")
}

/// What [`color_unit`] makes: the namespace, the repository, its ConfigMaps, the config's
/// directory, the config file and the daemon's HTTP port.
type ColorUnit = (common::TestEnv, common::GitRepo, Api<ConfigMap>, tempfile::TempDir, std::path::PathBuf, u16);

/// A ConfigMap `vars` (`color: red`) and the config of a daemon of unit `app` over a repository
/// whose ConfigMap `out` takes `${color}` from it (`[sync.substitute] from`), not started.
async fn color_unit(prefix: &str) -> ColorUnit {
    let (env, ns) = common::setup_ns(prefix).await;
    let configmaps = Api::<ConfigMap>::namespaced(env.client.clone(), &ns);
    let vars: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "vars"}, "data": {"color": "red"}})).unwrap();
    configmaps.create(&PostParams::default(), &vars).await.unwrap();
    let repo = common::GitRepo::new();
    repo.write("out.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: out\ndata:\n  color: ${color}\n");
    repo.commit_and_push("a ConfigMap of a variable");
    let dir = tempfile::tempdir().unwrap();
    let table = format!("[sync.substitute]\nfrom = [\"ConfigMap/{ns}/vars\"]\n");
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &ns, "", &table);
    (env, repo, configmaps, dir, config, port)
}

#[tokio::test]
async fn a_changed_configmap_of_variables_syncs_the_unit_again() {
    let (_env, _repo, configmaps, _dir, config, port) = color_unit("subst-watch").await;
    let daemon = common::Daemon::start(&config, port, &[]);
    let first = common::eventually(WAIT, || async { color(&configmaps, "out").await.as_deref() == Some("red") }).await;
    assert!(first, "the first sync substitutes the value: {}", daemon.log_text());

    let patch = json!({"data": {"color": "green"}});
    configmaps.patch("vars", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let again =
        common::eventually(WAIT, || async { color(&configmaps, "out").await.as_deref() == Some("green") }).await;
    assert!(again, "the change is applied without a push: {}", daemon.log_text());
    let triggers: Vec<_> = daemon.logged("sync triggered").iter().map(|e| e["trigger"].to_string()).collect();
    assert!(triggers.iter().any(|t| t == "\"variables\""), "synced for the change: {triggers:?}");
}

/// Waits until the daemon logged a trigger of `kind` that `app`, suspended, did not act on.
async fn not_acted_on(daemon: &common::Daemon, kind: &str) -> bool {
    common::eventually(WAIT, || async {
        daemon.logged("trigger not acted on: unit suspended").iter().any(|e| e["unit"] == "app" && e["trigger"] == kind)
    })
    .await
}

#[tokio::test]
async fn a_configmap_of_variables_changed_while_suspended_is_applied_on_resume() {
    let (_env, _repo, configmaps, _dir, config, port) = color_unit("subst-resume").await;
    // Polls every 2 s, so that one is kept first while the unit is suspended: the change of
    // variables is then merged into a poll, which alone would find no new revision.
    let text = std::fs::read_to_string(&config).unwrap();
    let polling = text.replacen("\ninterval = \"1h\"", "\ninterval = \"2s\"", 1);
    assert_ne!(polling, text, "the poll interval is set");
    std::fs::write(&config, polling).unwrap();
    let daemon = common::Daemon::start(&config, port, &[]);
    let first = common::eventually(WAIT, || async { color(&configmaps, "out").await.as_deref() == Some("red") }).await;
    assert!(first, "the first sync substitutes the value: {}", daemon.log_text());

    let run = common::gitward(&["suspend", "app"], &config, WAIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(not_acted_on(&daemon, "poll").await, "no poll kept while suspended: {}", daemon.log_text());
    let patch = json!({"data": {"color": "green"}});
    configmaps.patch("vars", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert!(not_acted_on(&daemon, "variables").await, "the change was not seen: {}", daemon.log_text());
    assert_eq!(color(&configmaps, "out").await.as_deref(), Some("red"), "applied while suspended");

    let run = common::gitward(&["resume", "app"], &config, WAIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let applied =
        common::eventually(WAIT, || async { color(&configmaps, "out").await.as_deref() == Some("green") }).await;
    assert!(applied, "the value changed while suspended is applied on resume: {}", daemon.log_text());
}

/// A change of variables while a health wait runs (here a Deployment that never rolls out: its
/// Pods crash-loop) is applied at once, as a new revision would be, not after the wait.
#[tokio::test]
async fn a_configmap_of_variables_changed_during_a_health_wait_is_applied_at_once() {
    let (_env, repo, configmaps, _dir, config, port) = color_unit("subst-wait").await;
    repo.push(&[("web.yaml", &common::deployment("web", "nginx:fail", 1))], "a Deployment to wait for");
    let text = std::fs::read_to_string(&config).unwrap();
    let waiting_long = text.replacen("[sync.substitute]", "health_timeout = \"10m\"\n[sync.substitute]", 1);
    std::fs::write(&config, waiting_long).unwrap();
    let daemon = common::Daemon::start(&config, port, &[]);
    let waiting = common::eventually(WAIT, || async {
        daemon.events().iter().any(|e| e["message"] == "health" && e["health"] == "InProgress")
    })
    .await;
    assert!(waiting, "no health wait: {}", daemon.log_text());
    assert_eq!(color(&configmaps, "out").await.as_deref(), Some("red"));

    let patch = json!({"data": {"color": "green"}});
    configmaps.patch("vars", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let applied =
        common::eventually(WAIT, || async { color(&configmaps, "out").await.as_deref() == Some("green") }).await;
    assert!(applied, "the change waited for the health wait: {}", daemon.log_text());
    let cancelled = daemon.logged("health wait cancelled by a change of variables");
    assert!(cancelled.iter().any(|e| e["unit"] == "app"), "{}", daemon.log_text());
}
