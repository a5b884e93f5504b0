//! Faults from the cluster's side, against the real apiserver: each ends with the objects git
//! holds applied where they could be, the failures named, and nothing pruned or lost.

use crate::common;

use gitward::changeset::Action;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

/// RBAC: the identity gitward runs as may manage Gadgets and the unit's parent Secret but not
/// Widgets. The Widgets fail with the API server's 403, the Gadgets are applied, nothing is
/// pruned while the Widgets' live state cannot be read.
#[tokio::test]
async fn a_kind_forbidden_by_rbac_fails_alone_and_nothing_is_pruned() {
    let (env, ns) = common::setup_ns("rbac-403").await;
    let group = format!("{ns}.gitward.dev");
    common::install_crd(&env.client, "test-admin", common::crd(&group, "Gadget", "gadgets")).await;
    common::install_crd(&env.client, "test-admin", common::crd(&group, "Widget", "widgets")).await;

    let all = ["get", "list", "watch", "create", "patch", "update", "delete"];
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": ns},
        "rules": [{"apiGroups": [group], "resources": ["gadgets"], "verbs": all}]}))
    .unwrap();
    let roles: Api<ClusterRole> = Api::all(env.client.clone());
    roles.create(&PostParams::default(), &role).await.unwrap();
    common::bind_limited(&env.client, &ns).await;

    let repo = common::GitRepo::new();
    for name in ["g1", "g2"] {
        repo.write(
            &format!("{name}.yaml"),
            &format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: {name}\n"),
        );
    }
    repo.commit_and_push("two gadgets");
    let state = tempfile::tempdir().unwrap();
    let config = common::config(state.path(), &common::unit_toml("app", &repo.bare(), "", &ns, ""));
    let limited = common::limited("gitward-test-limited-rbac").await;
    let mut engine = common::engine(&limited, &config, "app").await;
    let first = engine.sync().await.expect("first sync");
    assert_eq!(first.changes.counts().created, 2, "{:#?}", common::actions(&first));

    // Widgets join; g2 leaves git. The Widgets cannot be listed or written.
    repo.write("w1.yaml", &format!("apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w1\n"));
    repo.write("g3.yaml", &format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g3\n"));
    repo.remove("g2.yaml");
    repo.commit_and_push("a widget, g3, and g2 leaves");
    let report = engine.sync().await.expect("the sync runs; the forbidden kind fails alone");
    let actions = common::actions(&report);
    let entry = |name: &str| report.changes.entries.iter().find(|e| e.object.name == name).cloned();
    let w1 = entry("w1").unwrap_or_else(|| panic!("no entry for w1: {actions:#?}"));
    assert_eq!(w1.action, Action::Failed, "{actions:#?}");
    let reason = w1.message.unwrap_or_default();
    assert!(reason.contains("w1.yaml") && reason.contains("forbidden"), "{reason}");
    assert_eq!(entry("g3").map(|e| e.action), Some(Action::Created), "{actions:#?}");
    assert_eq!(report.changes.counts().pruned, 0, "{actions:#?}");

    let gadgets = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let admin_gadgets: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &ns, &gadgets);
    assert!(admin_gadgets.get_opt("g2").await.unwrap().is_some(), "g2 must not be pruned by a sync with a failure");
    assert!(admin_gadgets.get_opt("g3").await.unwrap().is_some());

    // Granted the Widgets, the next sync applies them and prunes g2.
    let mut widened = role.clone();
    widened.rules.as_mut().unwrap()[0].resources = Some(vec!["gadgets".into(), "widgets".into()]);
    roles.replace(&ns, &PostParams::default(), &widened).await.unwrap();
    let granted = engine.sync().await.expect("sync");
    let actions = common::actions(&granted);
    assert_eq!(actions.get(&format!("Widget/{ns}/w1")).map(String::as_str), Some("created"), "{actions:#?}");
    assert_eq!(actions.get(&format!("Gadget/{ns}/g2")).map(String::as_str), Some("pruned"), "{actions:#?}");

    let _ = Api::<ClusterRoleBinding>::all(env.client.clone()).delete(&ns, &DeleteParams::default()).await;
    let _ = roles.delete(&ns, &DeleteParams::default()).await;
}

/// An admission webhook that is down (`failurePolicy: Fail`, nothing listening): the objects it
/// guards fail with the API server's "failed calling webhook" message, the others are applied,
/// nothing is pruned; once the webhook is gone the next sync applies them.
#[tokio::test]
async fn objects_guarded_by_a_down_webhook_fail_alone() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (env, ns) = common::setup_ns("webhook-down").await;
    let webhooks = common::down_webhook(&env.client, &ns).await;

    let repo = common::GitRepo::new();
    repo.write("free.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: free\n");
    repo.push(&[("keep.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n")], "two ConfigMaps");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &ns, "").await;
    let first = engine.sync().await.expect("first sync");
    assert_eq!(first.changes.counts().created, 2, "{:#?}", common::actions(&first));

    repo.write("guarded.yaml", &common::guarded_cm("guarded"));
    repo.write("more.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: more\n");
    repo.remove("keep.yaml");
    repo.commit_and_push("a guarded ConfigMap, another, and keep leaves");
    let report = engine.sync().await.expect("the sync runs");
    let actions = common::actions(&report);
    let guarded = report.changes.entries.iter().find(|e| e.object.name == "guarded").expect("guarded entry");
    assert_eq!(guarded.action, Action::Failed, "{actions:#?}");
    let message = guarded.message.clone().unwrap_or_default();
    assert!(message.contains("failed calling webhook"), "the webhook's failure is named: {message}");
    assert_eq!(actions.get(&format!("ConfigMap/{ns}/more")).map(String::as_str), Some("created"), "{actions:#?}");
    assert_eq!(report.changes.counts().pruned, 0, "a sync with a failure prunes nothing: {actions:#?}");
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(cms.get_opt("keep").await.unwrap().is_some(), "keep must not be pruned");
    assert!(cms.get_opt("guarded").await.unwrap().is_none());

    webhooks.delete(&ns, &DeleteParams::default()).await.expect("remove the webhook");
    let healed = engine.sync().await.expect("sync");
    let actions = common::actions(&healed);
    assert_eq!(actions.get(&format!("ConfigMap/{ns}/guarded")).map(String::as_str), Some("created"), "{actions:#?}");
    assert_eq!(actions.get(&format!("ConfigMap/{ns}/keep")).map(String::as_str), Some("pruned"), "{actions:#?}");
}
