//! `[[sync_set]]` in the running daemon: units made from the directories of a real bare
//! repository pushed to with git, applied to the real apiserver; a directory pushed becomes a
//! unit without a restart; one removed keeps its objects (a warning counts them) unless the
//! set says `prune_removed`, which prunes them by the unit's ApplySet. `gitward status` lists
//! the generated units.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

const WAIT: Duration = Duration::from_secs(60);
const CLI: Duration = Duration::from_secs(120);

async fn exists(client: &kube::Client, ns: &str, name: &str) -> bool {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.ok().flatten().is_some()
}

/// A repository with one ConfigMap named after each of `dirs` under `apps/<dir>/`, and a file
/// beside them that is no directory.
fn repo_with(dirs: &[&str]) -> common::GitRepo {
    let repo = common::GitRepo::new();
    for dir in dirs {
        repo.write(&format!("apps/{dir}/cm.yaml"), &common::cm(dir, "1"));
    }
    repo.write("apps/README.md", "one directory per application\n");
    repo.commit_and_push("apps");
    repo
}

/// A ready daemon of one set over `apps/*` of `repo`, every unit in `ns`, `extra` lines in the
/// set's table; and its config file.
async fn daemon(
    dir: &std::path::Path,
    repo: &common::GitRepo,
    ns: &str,
    extra: &str,
) -> (common::Daemon, std::path::PathBuf) {
    let set = format!(
        "[[sync_set]]\nname = \"apps-{{dir}}\"\nrepo = \"{}\"\npath_glob = \"apps/*\"\nnamespace = \"{ns}\"\n{extra}\n",
        repo.bare().display()
    );
    let (config, port) = common::daemon_config(dir, "", "self_heal = false", &set);
    let daemon = common::Daemon::start(&config, port, &[]);
    assert!(daemon.wait_ready(WAIT).await, "not ready: {}", daemon.log_text());
    (daemon, config)
}

/// Waits until every ConfigMap of `names` exists in the test's namespace.
async fn all_exist(env: &common::TestEnv, daemon: &common::Daemon, names: &[&str]) {
    for name in names {
        let made = common::eventually(WAIT, || exists(&env.client, &env.namespace, name)).await;
        assert!(made, "ConfigMap {name} not applied: {}", daemon.log_text());
    }
}

/// The `unit left its sync set` event of `message` naming `unit`, once logged.
async fn left(daemon: &common::Daemon, message: &str, unit: &str) -> serde_json::Value {
    let named = || daemon.logged(message).into_iter().find(|e| e["unit"] == unit);
    let seen = common::eventually(WAIT, || async { named().is_some() }).await;
    assert!(seen, "no `{message}` for {unit}: {}", daemon.log_text());
    named().expect("seen")
}

#[tokio::test]
async fn a_sync_set_makes_a_unit_per_directory_and_follows_pushes() {
    let env = common::setup("sync-set").await;
    let repo = repo_with(&["a", "b", "c"]);
    let dir = tempfile::tempdir().unwrap();
    let (daemon, config) = daemon(dir.path(), &repo, &env.namespace, "").await;
    all_exist(&env, &daemon, &["a", "b", "c"]).await;

    let status = common::gitward(&["status", "-o", "json"], &config, CLI);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let units: Vec<&str> = json["units"].as_array().unwrap().iter().filter_map(|u| u["unit"].as_str()).collect();
    assert_eq!(units, ["apps-a", "apps-b", "apps-c"], "{}", status.stderr);

    // A directory pushed: a fourth unit, started by the running daemon.
    repo.write("apps/d/cm.yaml", &common::cm("d", "1"));
    repo.commit_and_push("add d");
    all_exist(&env, &daemon, &["d"]).await;
    // The record is written before the observers log `sync complete`: the object can be live a
    // round trip before the event.
    let complete = || daemon.logged("sync complete").into_iter().any(|e| e["unit"] == "apps-d");
    let started = common::eventually(WAIT, || async { complete() }).await;
    assert!(started, "the object of d came from a unit apps-d: {}", daemon.log_text());

    // A directory removed: its unit stops, its object stays and is counted.
    repo.remove("apps/b");
    repo.commit_and_push("remove b");
    let event = left(&daemon, "unit left its sync set; its objects are kept", "apps-b").await;
    assert_eq!(event["objects"], 1, "{event}");
    assert_eq!(event["set"], "apps-{dir}", "{event}");
    assert!(exists(&env.client, &env.namespace, "b").await, "the object of a removed directory is kept");
    let status = common::gitward(&["status", "-o", "json"], &config, CLI);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let units: Vec<&str> = json["units"].as_array().unwrap().iter().filter_map(|u| u["unit"].as_str()).collect();
    assert_eq!(units, ["apps-a", "apps-c", "apps-d"], "{}", status.stderr);
}

#[tokio::test]
async fn prune_removed_prunes_the_objects_of_a_removed_directory() {
    let env = common::setup("sync-set-prune").await;
    let repo = repo_with(&["a", "b"]);
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _config) = daemon(dir.path(), &repo, &env.namespace, "prune_removed = true").await;
    all_exist(&env, &daemon, &["a", "b"]).await;

    repo.remove("apps/b");
    repo.commit_and_push("remove b");
    let event = left(&daemon, "unit left its sync set; its objects are pruned", "apps-b").await;
    assert_eq!(event["pruned"], 1, "{event}");
    assert!(!exists(&env.client, &env.namespace, "b").await, "pruned: {}", daemon.log_text());
    assert!(exists(&env.client, &env.namespace, "a").await, "the other unit's object stays");
}

#[tokio::test]
async fn a_listing_over_max_units_keeps_the_last_good_units() {
    let env = common::setup("sync-set-cap").await;
    let repo = repo_with(&["a", "b"]);
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _config) = daemon(dir.path(), &repo, &env.namespace, "max_units = 2").await;
    all_exist(&env, &daemon, &["a", "b"]).await;

    repo.write("apps/c/cm.yaml", &common::cm("c", "1"));
    repo.commit_and_push("add c");
    let refused = || daemon.logged("sync set not expanded; keeping the last good units");
    let seen = common::eventually(WAIT, || async { !refused().is_empty() }).await;
    assert!(seen, "{}", daemon.log_text());
    let error = refused()[0]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("sync_set[0].max_units: 3 directories match `apps/*`"), "{error}");
    assert!(daemon.logged("unit left its sync set; its objects are kept").is_empty(), "no unit stopped");
    assert!(!exists(&env.client, &env.namespace, "c").await, "no unit made past the cap");
}
