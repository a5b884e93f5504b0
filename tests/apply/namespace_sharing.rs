//! A Namespace leaving git while other units use it, against the real apiserver: the prune is
//! refused with what it holds counted per group (this unit's members, other units' objects by
//! unit, other objects), `gitward diff` prints that refusal under its `revision A → B` head and
//! without gitward's bookkeeping, and the unit's own `create_namespace` Namespace is released,
//! never refused or deleted.

use crate::common;

use std::time::Duration;

use gitward::changeset::Action;
use gitward::cluster::inventory::PART_OF;
use gitward::object::{GroupKind, ObjectRef};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// A ConfigMap manifest in namespace `ns`.
fn cm_in(name: &str, ns: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  key: \"{value}\"\n"
    )
}

fn namespace_yaml(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
}

/// Unit `app` declares Namespace `team` and two ConfigMaps in it (plus four in its own
/// namespace, so the prune stays under max_prune_fraction); units `web` (two ConfigMaps) and
/// `api` (one) keep their objects and their ApplySet parents in `team`; someone put ConfigMap
/// `stray` there by hand. The Namespace leaves `app`'s path, and a ConfigMap of it changes.
#[tokio::test]
async fn a_namespace_other_units_use_is_not_pruned_and_diff_and_sync_count_what_it_holds() {
    let env = common::setup("ns-team").await;
    let team = common::unique("team");
    let repo = common::GitRepo::new();
    repo.write("app/ns.yaml", &namespace_yaml(&team));
    for name in ["a", "b", "c", "d", "e", "f"] {
        repo.write(&format!("app/{name}.yaml"), &common::cm(name, "1"));
    }
    for name in ["own-1", "own-2"] {
        repo.write(&format!("app/{name}.yaml"), &cm_in(name, &team, "1"));
    }
    for name in ["web-1", "web-2"] {
        repo.write(&format!("web/{name}.yaml"), &common::cm(name, "1"));
    }
    repo.write("api/api-1.yaml", &common::cm("api-1", "1"));
    let first = repo.commit_and_push("three units, one of them makes the team namespace");
    let units = common::unit_toml("app", &repo.bare(), "app", &env.namespace, "")
        + &common::unit_toml("web", &repo.bare(), "web", &team, "")
        + &common::unit_toml("api", &repo.bare(), "api", &team, "");
    // Synced by the command, which records the applied revision on each parent.
    let dir = tempfile::tempdir().unwrap();
    let file = common::config_file(dir.path(), &units);
    let run = common::gitward(&["sync"], &file, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let stray: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "stray"}})).unwrap();
    let in_team: Api<ConfigMap> = Api::namespaced(env.client.clone(), &team);
    in_team.create(&PostParams::default(), &stray).await.expect("create the stray ConfigMap");

    repo.remove("app/ns.yaml");
    let second = repo.push(&[("app/a.yaml", &common::cm("a", "2"))], "the team namespace leaves app; a changes");
    let refusal = format!(
        "not deleted: it holds 2 members of this unit, 5 objects of units api, web, and 1 other object \
         (ConfigMap/{team}/stray); annotate it gitward.dev/prune: disabled to keep it, unmanaged, or \
         gitward.dev/prune: cascade to delete it with all it holds (that deletes the objects of units api, web too)"
    );

    // `diff` says what a sync would do: refuse, not prune.
    let run = common::gitward(&["diff", "--sync", "app"], &file, Duration::from_secs(120));
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let head = format!("revision {} → {} (render sha256:", &first[..7], &second[..7]);
    assert!(run.stdout.starts_with(&head), "{}", run.stdout);
    assert!(run.stdout.contains(&format!("\nnot pruned Namespace/{team}: {refusal}\n")), "{}", run.stdout);
    assert!(!run.stdout.contains(&format!("prune Namespace/{team}")), "{}", run.stdout);
    assert!(run.stdout.contains("-  value: \"1\"\n+  value: \"2\"\n"), "the change of a is shown: {}", run.stdout);
    for bookkeeping in ["gitward.dev/desired-hash", PART_OF] {
        assert!(!run.stdout.contains(bookkeeping), "{bookkeeping} in the diff: {}", run.stdout);
    }

    let state = tempfile::tempdir().unwrap();
    let mut app = common::engine(&env.client, &common::config(state.path(), &units), "app").await;
    let report = app.sync().await.expect("sync of app");
    let entry = report.changes.entries.iter().find(|e| e.object.name == team).expect("an entry for the namespace");
    assert_eq!(entry.action, Action::Skipped, "{entry:?}");
    assert_eq!(entry.message.as_deref(), Some(refusal.as_str()));
    let ns = Api::<Namespace>::all(env.client.clone()).get(&team).await.expect("the namespace is still there");
    assert!(ns.metadata.deletion_timestamp.is_none(), "the namespace must not be deleted");
    for name in ["own-1", "web-1", "api-1", "stray"] {
        assert!(in_team.get_opt(name).await.unwrap().is_some(), "{name} is gone");
    }

    // The first remedy offered: kept, and the next sync has nothing to refuse.
    let keep = json!({"metadata": {"annotations": {"gitward.dev/prune": "disabled"}}});
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    namespaces.patch(&team, &PatchParams::default(), &Patch::Merge(&keep)).await.unwrap();
    let object = ObjectRef::new(GroupKind::from_api_version("v1", "Namespace"), None::<&str>, team.as_str());
    let seen = common::eventually(Duration::from_secs(10), || async {
        app.cache().snapshot().get(&object).is_some_and(|m| m.prune_disabled)
    })
    .await;
    assert!(seen, "the annotation never reached the cache");
    let report = app.sync().await.expect("sync of app");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    let entry = report.changes.entries.iter().find(|e| e.object.name == team);
    assert!(entry.is_none(), "kept, not refused: {entry:?}");
    assert!(namespaces.get(&team).await.unwrap().metadata.deletion_timestamp.is_none());
}

/// A unit with `create_namespace = true` whose revision declared its own namespace (so it
/// became a member) stops declaring it: the sync releases it (the `part-of` label removed,
/// the member record without it), never deletes or refuses it, and `diff` said so beforehand.
#[tokio::test]
async fn the_units_own_create_namespace_namespace_leaving_git_is_released_not_refused() {
    let env = common::setup("ns-release").await;
    let own = common::unique("own");
    let repo = common::GitRepo::new();
    repo.write("ns.yaml", &namespace_yaml(&own));
    for name in ["a", "b", "c"] {
        repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    }
    repo.commit_and_push("a namespace and three ConfigMaps in it");
    let unit = common::unit_toml("app", &repo.bare(), "", &own, "create_namespace = true");
    let state = tempfile::tempdir().unwrap();
    let config = common::config(state.path(), &unit);
    let mut engine = common::engine(&env.client, &config, "app").await;
    let report = engine.sync().await.expect("first sync");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    let labels = common::namespace_labels(&env.client, &own).await;
    assert_eq!(labels.get(PART_OF), Some(&engine.inventory().id), "declared: a member");

    repo.remove("ns.yaml");
    repo.commit_and_push("the namespace leaves git; create_namespace still makes it");
    let dir = tempfile::tempdir().unwrap();
    let file = common::config_file(dir.path(), &unit);
    let run = common::gitward(&["diff"], &file, Duration::from_secs(120));
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(&format!("\nrelease Namespace/{own}: ")), "{}", run.stdout);
    assert!(!run.stdout.contains(&format!("Namespace/{own}: not deleted")), "{}", run.stdout);
    assert!(!run.stdout.contains(&format!("prune Namespace/{own}")), "{}", run.stdout);

    let report = engine.sync().await.expect("sync");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    let entry = report.changes.entries.iter().find(|e| e.object.name == own);
    assert!(entry.is_none(), "neither pruned nor refused: {entry:?}");
    let ns = Api::<Namespace>::all(env.client.clone()).get(&own).await.expect("the namespace is still there");
    assert!(ns.metadata.deletion_timestamp.is_none(), "the namespace must not be deleted");
    assert!(!ns.metadata.labels.unwrap_or_default().contains_key(PART_OF), "released: no part-of label");
    let record = common::member_record(&env.client, &engine).await;
    assert!(!record.iter().any(|m| m.starts_with("Namespace")), "{record:?}");
    let again = engine.sync().await.expect("the next sync");
    assert!(!again.changes.has_failures(), "{:#?}", common::actions(&again));
    assert_eq!(again.changes.counts().unchanged, 3, "{:#?}", common::actions(&again));
}
