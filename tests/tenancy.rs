//! Tenancy by impersonation: a unit that names a ServiceAccount writes as it, so its repository
//! can make gitward write only what that ServiceAccount may, against the real apiserver's RBAC.

use crate::common;

use gitward::changeset::Action;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

/// A ServiceAccount `tenant` of `ns` that may manage ConfigMaps in `ns` and nothing else.
async fn tenant(client: &kube::Client, ns: &str) {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "tenant"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), ns).create(&PostParams::default(), &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "tenant"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns).create(&PostParams::default(), &binding).await.unwrap();
}

/// A tenant unit whose repository holds a ConfigMap of its own, one in another namespace and a
/// ClusterRole: its own is applied, the other two fail with the API server's 403 naming the
/// ServiceAccount, nothing of them reaches the cluster, and a sync with a 403 prunes nothing.
#[tokio::test]
async fn a_tenant_unit_writes_only_what_its_service_account_may() {
    let env = common::setup("tenant").await;
    let ns = env.namespace.clone();
    let other = format!("{ns}-other");
    common::create_namespace(&env.client, &other).await;
    tenant(&env.client, &ns).await;
    let role = common::unique("tenant-escalation");
    let repo = common::GitRepo::new();
    repo.write("a.yaml", &common::cm("a", "1"));
    repo.write("b.yaml", &common::cm("b", "1"));
    repo.write(
        "other.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: {other}\ndata:\n  value: x\n"
        ),
    );
    repo.write(
        "role.yaml",
        &format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {role}\nrules:\n\
             - apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n"
        ),
    );
    repo.commit_and_push("a tenant's repository reaching past its namespace");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("tenant", &repo.bare(), "", &ns, "service_account = \"tenant\"\n");
    let config = common::config(state.path(), &unit);
    let mut engine = common::engine(&env.client, &config, "tenant").await;
    let report = engine.sync().await.expect("the sync runs; objects fail one by one");
    let actions = common::actions(&report);
    assert_eq!(actions.get(&format!("ConfigMap/{ns}/a")).map(String::as_str), Some("created"), "{actions:?}");
    let sa = format!("system:serviceaccount:{ns}:tenant");
    for object in [format!("ConfigMap/{other}/elsewhere"), format!("ClusterRole/{role}")] {
        let entry = report.changes.entries.iter().find(|e| e.object.to_string() == object).expect("an entry");
        let message = entry.message.as_deref().unwrap_or_default();
        assert_eq!(entry.action, Action::Failed, "{object}: {message}");
        assert!(message.contains(&sa) && message.contains("forbidden"), "{object}: {message}");
    }
    assert!(Api::<ConfigMap>::namespaced(env.client.clone(), &other).get_opt("elsewhere").await.unwrap().is_none());
    assert!(Api::<ClusterRole>::all(env.client.clone()).get_opt(&role).await.unwrap().is_none());

    // b leaves git while the 403s remain: a sync with a failure prunes nothing.
    repo.remove("b.yaml");
    repo.commit_and_push("b removed");
    let report = engine.sync().await.expect("sync");
    assert!(!common::actions(&report).values().any(|a| a == "pruned"), "{:?}", common::actions(&report));
    assert!(Api::<ConfigMap>::namespaced(env.client.clone(), &ns).get_opt("b").await.unwrap().is_some());
}
