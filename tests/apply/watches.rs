//! The daemon's units of one cluster share their metadata watches: one watch per kind
//! (selected by the ApplySet label's existence, fanned out by its value) and one watch of the
//! ApplySet parents of a namespace, instead of a watch per unit and kind and one per parent.
//! A unit that arrives after the shared watch has listed (a SIGHUP adding it) lists its own
//! members once and then takes its events from the shared watch. Read back from the cluster
//! (self-heal through the shared watch) and from the API server's audit log (which watches
//! were opened). A one-shot `gitward sync` lists and keeps no watch at all.
//!
//! Run: `scripts/test --test integration watches::`.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

/// Writes `value` into ConfigMap `name` as another field manager would (a hand edit).
async fn hand_edit(client: &kube::Client, ns: &str, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let patch = json!({"data": {"value": value}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("hand edit");
}

/// Edits `unit`'s ConfigMap by hand and waits for self-heal to put git's value back.
async fn heals(client: &kube::Client, ns: &str, unit: &str, daemon: &common::Daemon) {
    let name = format!("{unit}-cm");
    hand_edit(client, ns, &name, "by-hand").await;
    let healed = common::eventually(WAIT, || async {
        common::cm_value_or_none(client, ns, &name).await.as_deref() == Some("1")
    })
    .await;
    assert!(healed, "{name} not healed through the shared watch: {}", daemon.log_text());
}

/// The requests of the audit log whose `requestURI` contains `part`, as (verb, URI), each
/// once: a watch when its response starts, any other request when it completes.
fn requests_with(part: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    text.lines()
        .filter(|l| l.contains(part))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == if e["verb"] == "watch" { "ResponseStarted" } else { "ResponseComplete" })
        .filter_map(|e| Some((e["verb"].as_str()?.to_owned(), e["requestURI"].as_str()?.to_owned())))
        .collect()
}

/// The `requestURI`s of the audit log's WATCH requests that contain `part`.
fn watches_with(part: &str) -> Vec<String> {
    requests_with(part).into_iter().filter(|(verb, _)| verb == "watch").map(|(_, uri)| uri).collect()
}

/// Units a and b start together, c joins by SIGHUP once the shared watches run. Every unit's
/// hand-edited ConfigMap is healed (drift reaches each unit from the one shared watch, c's
/// too); the audit log shows one watch of the namespace's parents where three units each had
/// one, and no member watch selected by one unit's ApplySet id.
#[tokio::test]
async fn units_of_one_cluster_share_one_watch_per_kind_and_a_late_unit_joins_it() {
    let (env, _, repo) = common::setup_repo("watches-shared").await;
    for unit in ["a", "b", "c"] {
        repo.write(&format!("{unit}/cm.yaml"), &common::cm(&format!("{unit}-cm"), "1"));
    }
    repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    let unit = |name: &str| common::unit_toml(name, &repo.bare(), name, &env.namespace, "");
    let two = format!("{}{}", unit("a"), unit("b"));
    let (config, port) = common::daemon_config(dir.path(), "", "self_heal = true", &two);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    for name in ["a", "b"] {
        assert_eq!(
            common::cm_value_or_none(&env.client, &env.namespace, &format!("{name}-cm")).await.as_deref(),
            Some("1")
        );
        heals(&env.client, &env.namespace, name, &daemon).await;
    }

    // c arrives after the shared watches have listed: it lists its own members, then heals
    // from the shared watch's events like the others.
    common::write_daemon_config(&config, port, "", "self_heal = true", &format!("{two}{}", unit("c")));
    daemon.signal("HUP");
    let synced = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &env.namespace, "c-cm").await.is_some()
    })
    .await;
    assert!(synced, "c not synced after SIGHUP: {}", daemon.log_text());
    heals(&env.client, &env.namespace, "c", &daemon).await;
    heals(&env.client, &env.namespace, "a", &daemon).await;

    // The audit log: the parents (Secrets in the test namespace) were watched once, by their
    // label's existence, not once per unit by name.
    let parents = watches_with(&format!("/api/v1/namespaces/{}/secrets", env.namespace));
    assert_eq!(parents.len(), 1, "one watch of the namespace's parents: {parents:#?}");
    assert!(
        parents[0].contains("labelSelector=applyset.kubernetes.io%2Fid&")
            || parents[0].ends_with("applyset.kubernetes.io%2Fid"),
        "selected by the id label's existence: {}",
        parents[0]
    );
    // No member watch selected by one unit's id: the units' ids, read from their parents.
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.namespace);
    let parents = secrets.list(&ListParams::default().labels("applyset.kubernetes.io/id")).await.unwrap();
    let ids: Vec<String> = parents
        .items
        .iter()
        .filter_map(|p| p.metadata.labels.as_ref()?.get("applyset.kubernetes.io/id").cloned())
        .collect();
    assert_eq!(ids.len(), 3, "a parent per unit: {ids:?}");
    for id in &ids {
        let own = watches_with(&format!("applyset.kubernetes.io%2Fpart-of%3D{id}"));
        assert!(own.is_empty(), "a watch of one unit's members: {own:#?}");
    }
}

/// A one-shot `gitward sync` reads its members by one list and keeps no watch: a process
/// that exits after the sync has no use for an event per applied object. Two syncs (create,
/// then a change and a prune) leave the cluster as git says, and the audit log shows lists
/// of the unit's members by its ApplySet id and no watch of them.
#[tokio::test]
async fn a_one_shot_sync_lists_its_members_and_opens_no_watch() {
    let (env, _, repo) = common::setup_repo("watches-oneshot").await;
    for name in ["a", "b", "c", "d"] {
        repo.write(&format!("{name}.yaml"), &common::cm(&format!("{name}-cm"), "1"));
    }
    repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, ""));
    let sync = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
            .args(["sync", "--allow-prune", "--config"])
            .arg(&config)
            .output()
            .expect("gitward runs")
    };
    let out = sync();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    repo.write("a.yaml", &common::cm("a-cm", "2"));
    repo.remove("d.yaml");
    repo.commit_and_push("second");
    let out = sync();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(common::cm_value_or_none(&env.client, &env.namespace, "a-cm").await.as_deref(), Some("2"));
    assert_eq!(common::cm_value_or_none(&env.client, &env.namespace, "b-cm").await.as_deref(), Some("1"));
    assert_eq!(common::cm_value_or_none(&env.client, &env.namespace, "d-cm").await, None, "d-cm pruned");

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.namespace);
    let parents = secrets.list(&ListParams::default().labels("applyset.kubernetes.io/id")).await.unwrap();
    let [parent] = &parents.items[..] else { panic!("one parent: {:?}", parents.items.len()) };
    let id = parent.metadata.labels.as_ref().unwrap()["applyset.kubernetes.io/id"].clone();
    let members = requests_with(&format!("applyset.kubernetes.io%2Fpart-of%3D{id}"));
    let lists = members.iter().filter(|(verb, _)| verb == "list").count();
    assert!(lists >= 2, "a list of the members per sync: {members:#?}");
    let watches: Vec<_> = members.iter().filter(|(verb, _)| verb == "watch").collect();
    assert!(watches.is_empty(), "a watch of the unit's members: {watches:#?}");
    let parent_watches = watches_with(&format!("applyset.kubernetes.io%2Fid%3D{id}"));
    assert!(parent_watches.is_empty(), "a watch of the unit's parent: {parent_watches:#?}");
}
