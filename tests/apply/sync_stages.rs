//! Ordering and dependencies: a CRD and its custom resources in one revision, Namespaces before
//! their contents, objects that depend on a failed Namespace skipped with the reason, and the
//! `gitward.dev/prune: disabled` annotation.

use crate::common;

use gitward::changeset::Action;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

fn crd(group: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.{group}\nspec:\n  group: {group}\n  scope: Namespaced\n  names:\n    plural: gadgets\n    singular: gadget\n    kind: Gadget\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            spec:\n              type: object\n              properties:\n                size:\n                  type: integer\n"
    )
}

#[tokio::test]
async fn crd_and_its_custom_resources_apply_in_one_revision() {
    let env = common::setup("crd-rev").await;
    let group = format!("{}.gitward.dev", env.namespace);
    let own_ns = common::unique("made-by-git");
    let repo = common::GitRepo::new();
    // File order puts the custom resource and the namespaced object before their CRD and Namespace.
    repo.write(
        "a-gadget.yaml",
        &format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  size: 3\n"),
    );
    repo.write(
        "b-in-new-ns.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n  namespace: {own_ns}\n"),
    );
    repo.write("c-crd.yaml", &crd(&group));
    repo.write("d-ns.yaml", &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {own_ns}\n"));
    repo.commit_and_push("CRD, Namespace and their contents");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, "").await;
    let report = engine.sync().await.expect("sync");
    let actions = common::actions(&report);
    assert!(!report.changes.has_failures(), "{actions:#?}");
    assert_eq!(report.changes.counts().created, 4, "{actions:#?}");
    let pos = |o: &str| report.changes.entries.iter().position(|e| e.object.to_string() == o).unwrap();
    assert!(pos(&format!("CustomResourceDefinition/gadgets.{group}")) < pos(&format!("Gadget/{}/g1", env.namespace)));
    assert!(pos(&format!("Namespace/{own_ns}")) < pos(&format!("ConfigMap/{own_ns}/inside")));
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &env.namespace, &ar);
    assert_eq!(gadgets.get("g1").await.unwrap().data["spec"]["size"], 3);

    // The next sync: everything unchanged, the custom resource included.
    let again = engine.sync().await.expect("sync");
    assert_eq!(again.changes.counts().unchanged, 4, "{:#?}", common::actions(&again));
}

#[tokio::test]
async fn objects_in_a_failed_namespace_are_skipped_with_the_reason() {
    let (env, _, repo) = common::setup_repo("ns-fail").await;
    repo.write("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: Not_Valid\n");
    repo.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n  namespace: Not_Valid\n");
    repo.write("ok.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n");
    repo.commit_and_push("a Namespace the API server rejects");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, "").await;
    let report = engine.sync().await.expect("sync runs");
    let entry = |name: &str| report.changes.entries.iter().find(|e| e.object.name == name).unwrap().clone();
    assert_eq!(entry("Not_Valid").action, Action::Failed);
    let skipped = entry("inside");
    assert_eq!(skipped.action, Action::Skipped);
    assert!(skipped.message.unwrap().contains("Namespace/Not_Valid"));
    assert_eq!(entry("fine").action, Action::Created, "one failure does not stop the rest");
}

#[tokio::test]
async fn prune_disabled_objects_stay_when_they_leave_git() {
    let (env, _, repo) = common::setup_repo("keep").await;
    repo.write(
        "keep.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  annotations:\n    gitward.dev/prune: disabled\n",
    );
    repo.write("go.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: go\n");
    for i in 0..4 {
        repo.write(
            &format!("stay-{i}.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stay-{i}\n"),
        );
    }
    repo.commit_and_push("six ConfigMaps");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, "").await;
    engine.sync().await.expect("sync");
    repo.remove("keep.yaml");
    repo.remove("go.yaml");
    repo.commit_and_push("remove two");
    let report = engine.sync().await.expect("sync");
    let pruned: Vec<_> =
        report.changes.entries.iter().filter(|e| e.action == Action::Pruned).map(|e| e.object.name.clone()).collect();
    assert_eq!(pruned, vec!["go"]);
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    assert!(api.get_opt("keep").await.unwrap().is_some(), "prune: disabled must keep the object");
    assert!(api.get_opt("go").await.unwrap().is_none());
}

/// A cluster-scoped custom resource whose CRD comes in the same revision: the inventory records
/// it under its real (cluster-scoped) ref before it is applied, not the namespaced guess made
/// while its kind was not served; removed from git in the next revision, it is pruned, and never
/// reported as "not recorded … (a copy?)".
#[tokio::test]
async fn a_cluster_scoped_custom_resource_of_a_new_crd_is_recorded_and_pruned() {
    let env = common::setup("crd-cluster").await;
    let group = format!("{}.gitward.dev", env.namespace);
    let repo = common::GitRepo::new();
    repo.write("crd.yaml", &crd(&group).replace("scope: Namespaced", "scope: Cluster"));
    repo.write(
        "gadget.yaml",
        &format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  size: 3\n"),
    );
    repo.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stays\n");
    repo.commit_and_push("a cluster-scoped CRD and a custom resource of it");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, "").await;
    let first = engine.sync().await.expect("sync");
    let actions = common::actions(&first);
    assert!(!first.changes.has_failures(), "{actions:#?}");
    let gadget = first.changes.entries.iter().find(|e| e.object.gk.kind == "Gadget").expect("a Gadget entry");
    assert_eq!((gadget.action, gadget.object.namespace.as_ref()), (Action::Created, None), "{actions:#?}");
    let gadget = gadget.object.clone();
    let parent = engine.inventory().read(&env.client).await.expect("read parent").expect("a parent");
    let recorded: Vec<String> =
        parent.contents.members.iter().filter(|m| m.gk.kind == "Gadget").map(ToString::to_string).collect();
    assert_eq!(recorded, [gadget.to_string()], "recorded under its real ref only");
    // Recorded before it was applied: the parent is written again between the CRD and the
    // custom resource (a crash in between leaves it recorded, so prunable).
    let marker = common::unique("marker");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    assert!(configmaps.get_opt(&marker).await.unwrap().is_none());
    let events =
        common::audit_events_until(&env.user_agent, |e| e.iter().any(|e| e["objectRef"]["name"] == marker.as_str()))
            .await;
    let write_of = |resource: &str, name: &str| {
        events.iter().position(|e| {
            matches!(e["verb"].as_str(), Some("create" | "patch" | "update"))
                && e["objectRef"]["resource"] == resource
                && e["objectRef"]["name"] == name
        })
    };
    let (crd_at, gadget_at) = (
        write_of("customresourcedefinitions", &format!("gadgets.{group}")).unwrap(),
        write_of("gadgets", "g1").unwrap(),
    );
    let parent_name = engine.inventory().parent.name.to_string();
    let parent_writes: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(e["verb"].as_str(), Some("create" | "patch" | "update"))
                && e["objectRef"]["name"] == parent_name.as_str()
        })
        .map(|(i, _)| i)
        .collect();
    assert!(
        parent_writes.iter().any(|&i| crd_at < i && i < gadget_at),
        "parent writes at {parent_writes:?}, CRD at {crd_at}, custom resource at {gadget_at}"
    );

    repo.remove("gadget.yaml");
    repo.commit_and_push("the custom resource removed");
    let second = engine.sync().await.expect("sync");
    let actions = common::actions(&second);
    assert!(second.changes.not_members.is_empty(), "{:?}", second.changes.not_members);
    assert_eq!(actions.get(&gadget.to_string()).map(String::as_str), Some("pruned"), "{actions:#?}");
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::all_with(env.client.clone(), &ar);
    assert!(gadgets.get_opt("g1").await.unwrap().is_none(), "pruned from the cluster");
}
