//! `[[sync_set]]` in the running daemon: units made from the directories of a real bare
//! repository pushed to with git, applied to the real apiserver; a directory pushed becomes a
//! unit without a restart; one removed keeps its objects (a warning counts them) unless the
//! set says `prune_removed`, which prunes them by the unit's ApplySet within its prune guards.
//! `gitward status` lists the generated units. A set that does not expand keeps its units
//! through a SIGHUP, a restart and every command.

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
    repo.push(&[("apps/README.md", "one directory per application\n")], "apps");
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
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
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
    repo.push(&[("apps/d/cm.yaml", &common::cm("d", "1"))], "add d");
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
    let extra = "prune_removed = true\nprune_removed_unguarded = true";
    let (daemon, _config) = daemon(dir.path(), &repo, &env.namespace, extra).await;
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

    repo.push(&[("apps/c/cm.yaml", &common::cm("c", "1"))], "add c");
    let refused = || daemon.logged("sync set not expanded; keeping the last good units");
    let seen = common::eventually(WAIT, || async { !refused().is_empty() }).await;
    assert!(seen, "{}", daemon.log_text());
    let error = refused()[0]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("sync_set[0].max_units: 3 directories match `apps/*`"), "{error}");
    assert!(daemon.logged("unit left its sync set; its objects are kept").is_empty(), "no unit stopped");
    assert!(!exists(&env.client, &env.namespace, "c").await, "no unit made past the cap");
}

#[tokio::test]
async fn prune_removed_keeps_the_prune_guards_of_the_unit() {
    let env = common::setup("sync-set-guard").await;
    let repo = repo_with(&["a", "b"]);
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _config) = daemon(dir.path(), &repo, &env.namespace, "prune_removed = true").await;
    all_exist(&env, &daemon, &["a", "b"]).await;

    repo.remove("apps/b");
    repo.commit_and_push("remove b");
    let event = left(&daemon, "unit left its sync set; its objects are kept: the prune was refused", "apps-b").await;
    let reason = event["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("the revision holds no objects"), "{event}");
    assert!(exists(&env.client, &env.namespace, "b").await, "the guard kept the object: {}", daemon.log_text());
}

/// How many `sync complete` events `unit` has logged.
fn syncs(daemon: &common::Daemon, unit: &str) -> usize {
    daemon.logged("sync complete").into_iter().filter(|e| e["unit"] == unit).count()
}

/// A daemon of a set over `apps/a` and `apps/b` with `prune_removed = true` (unguarded, so
/// nothing but the set's listing stands between a retire and the objects) and `extra`: after
/// `push` makes the set's listing fail to expand, a SIGHUP with the config unchanged keeps
/// both units — each syncs again for the reload — and both ConfigMaps.
async fn a_reload_keeps_the_units_of(name: &str, extra: &str, push: impl FnOnce(&common::GitRepo)) {
    let env = common::setup(name).await;
    let repo = repo_with(&["a", "b"]);
    let dir = tempfile::tempdir().unwrap();
    let extra = format!("prune_removed = true\nprune_removed_unguarded = true\n{extra}");
    let (daemon, _config) = daemon(dir.path(), &repo, &env.namespace, &extra).await;
    all_exist(&env, &daemon, &["a", "b"]).await;
    let synced =
        common::eventually(WAIT, || async { syncs(&daemon, "apps-a") > 0 && syncs(&daemon, "apps-b") > 0 }).await;
    assert!(synced, "{}", daemon.log_text());

    push(&repo);
    let refused = || daemon.logged("sync set not expanded; keeping the last good units");
    let seen = common::eventually(WAIT, || async { !refused().is_empty() }).await;
    assert!(seen, "the listing did not expand: {}", daemon.log_text());

    let before = (syncs(&daemon, "apps-a"), syncs(&daemon, "apps-b"));
    daemon.signal("HUP");
    let reloaded = common::eventually(WAIT, || async { !daemon.logged("config reloaded").is_empty() }).await;
    assert!(reloaded, "{}", daemon.log_text());
    // The units' reload syncs are the sign the reload is done: a retired unit would not sync.
    let again = || syncs(&daemon, "apps-a") > before.0 && syncs(&daemon, "apps-b") > before.1;
    let synced = common::eventually(WAIT, || async { again() }).await;
    let left: Vec<_> = daemon
        .events()
        .into_iter()
        .filter(|e| e["message"].as_str().is_some_and(|m| m.starts_with("unit left its sync set")))
        .collect();
    assert!(left.is_empty(), "no unit left the set: {left:?}");
    assert!(synced, "both units synced for the reload: {}", daemon.log_text());
    for name in ["a", "b"] {
        assert!(exists(&env.client, &env.namespace, name).await, "ConfigMap {name} kept: {}", daemon.log_text());
    }
}

#[tokio::test]
async fn a_reload_keeps_the_units_of_a_set_whose_directory_makes_no_unit() {
    a_reload_keeps_the_units_of("sync-set-reload-bad", "", |repo| {
        repo.push(&[("apps/Bad_Dir/x.yaml", &common::cm("bad", "1"))], "a directory that makes no unit name");
    })
    .await;
}

#[tokio::test]
async fn a_reload_keeps_the_units_of_a_set_over_max_units() {
    a_reload_keeps_the_units_of("sync-set-reload-cap", "max_units = 2", |repo| {
        repo.push(&[("apps/c/cm.yaml", &common::cm("c", "1"))], "a third directory");
    })
    .await;
}

#[tokio::test]
async fn a_set_that_does_not_expand_keeps_its_units_for_commands_and_a_restart() {
    let env = common::setup("sync-set-keep").await;
    let repo = repo_with(&["a", "b"]);
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, config) = daemon(dir.path(), &repo, &env.namespace, "").await;
    all_exist(&env, &daemon, &["a", "b"]).await;

    repo.push(&[("apps/Bad_Dir/x.yaml", &common::cm("bad", "1"))], "a directory that makes no unit name");
    let status = common::gitward(&["status", "-o", "json"], &config, CLI);
    assert_eq!(status.code, Some(0), "{}", status.stderr);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let units: Vec<&str> = json["units"].as_array().unwrap().iter().filter_map(|u| u["unit"].as_str()).collect();
    assert_eq!(units, ["apps-a", "apps-b"], "{}", status.stderr);
    let warned =
        status.stderr.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find(|e| {
            e["message"] == "sync set not expanded; keeping its last recorded units" && e["set"] == "apps-{dir}"
        });
    let warned = warned.unwrap_or_else(|| panic!("no warning naming the set: {}", status.stderr));
    assert!(warned["error"].as_str().unwrap_or_default().contains("Bad_Dir"), "{warned}");
    let validate = common::gitward(&["validate"], &config, CLI);
    assert_eq!(validate.code, Some(0), "{}", validate.stderr);

    // Restarted in that state, the daemon starts the set's units from its recorded listing.
    daemon.restart();
    let running = || daemon.logged("gitward running").first().map(|e| e["units"].clone());
    let started = common::eventually(WAIT, || async { running().is_some() }).await;
    assert!(started, "{}", daemon.log_text());
    assert_eq!(running(), Some(serde_json::json!(2)), "{}", daemon.log_text());
}
