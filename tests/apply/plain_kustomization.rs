//! A plain unit over a kustomize tree, with the real apiserver and real git: the sync that finds
//! an object defined twice names the kustomization file as the likely cause (a patch read as an
//! object), and the daemon warns of each kustomization file a plain unit reads past once per
//! revision, not at every sync of it.

use crate::common;

use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The reason of a kustomization at a plain unit's own path.
const BUILD_HERE: &str = "a plain unit does not build it, so its patches are applied as objects; set render = \
                          \"kustomize\" in the unit's [[sync]] table to build it";

#[tokio::test]
async fn a_patch_read_as_an_object_fails_the_sync_naming_the_kustomization_and_its_render() {
    let (env, _, repo) = common::setup_repo("plain-kust-twice").await;
    let kustomization = "resources:\n- cm.yaml\npatches:\n- path: patch.yaml\n";
    repo.write("app/kustomization.yaml", kustomization);
    repo.write("app/cm.yaml", &common::cm("web", "1"));
    repo.push(&[("app/patch.yaml", &common::cm("web", "2"))], "a kustomization with a patch");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "app", &env.namespace, "render = \"plain\"");
    let config = common::config(state.path(), &unit);
    let mut engine = common::engine(&env.client, &config, "app").await;
    let err = engine.sync().await.expect_err("an object defined twice stops the revision");
    assert_eq!(
        err.to_string(),
        format!(
            "ConfigMap/{}/web: defined twice, in app/cm.yaml (document 1) and in app/patch.yaml (document 1); \
             app/kustomization.yaml is a kustomization: {BUILD_HERE}",
            env.namespace
        )
    );
}

#[tokio::test]
async fn the_daemon_warns_of_a_kustomization_in_a_plain_unit_once_per_revision() {
    let (env, _, repo) = common::setup_repo("plain-kust-warn").await;
    repo.write("web/kustomization.yaml", "resources:\n- cm.yaml\n");
    let first = repo.push(&[("web/cm.yaml", &common::cm("web", "1"))], "a kustomization below the unit's path");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", "");
    let daemon = common::Daemon::start(&config, port, &[]);
    let synced = |n: usize| {
        let daemon = &daemon;
        async move { common::eventually(WAIT, || async { daemon.logged("sync complete").len() >= n }).await }
    };
    assert!(synced(1).await, "{}", daemon.log_text());
    // SIGHUP with the config unchanged: a second sync of the same revision.
    daemon.signal("HUP");
    assert!(synced(2).await, "{}", daemon.log_text());
    let second = repo.push(&[("web/other.yaml", &common::cm("other", "1"))], "a second revision");
    assert!(synced(3).await, "{}", daemon.log_text());
    let completes: Vec<String> =
        daemon.logged("sync complete").iter().map(|e| e["revision"].as_str().unwrap_or("").to_owned()).collect();
    assert_eq!(completes, [first.clone(), first.clone(), second.clone()], "{}", daemon.log_text());
    let reason = "a plain unit does not build it, so its patches are applied as objects; set path = \"web\" and \
                  render = \"kustomize\" in a [[sync]] table to build it";
    let warned: Vec<(String, String, String, String, String)> = daemon
        .logged("kustomization file in a plain unit")
        .iter()
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap_or("").to_owned();
            (field("level"), field("unit"), field("revision"), field("file"), field("reason"))
        })
        .collect();
    let line = |revision: &str| {
        (
            "WARN".to_owned(),
            "app".to_owned(),
            revision.to_owned(),
            "web/kustomization.yaml".to_owned(),
            reason.to_owned(),
        )
    };
    assert_eq!(warned, [line(&first), line(&second)], "once per revision: {}", daemon.log_text());
}
