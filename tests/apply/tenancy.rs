//! Tenancy by impersonation: a unit that names a ServiceAccount writes as it, so its repository
//! can make gitward write only what that ServiceAccount may, against the real apiserver's RBAC.

use crate::common;

use gitward::changeset::Action;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::Value;
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
    let (env, ns) = common::setup_ns("tenant").await;
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

/// ServiceAccount `maker` of `ns` (a namespace that need not exist) bound to a ClusterRole of
/// `rules`, named after `ns`.
async fn cluster_tenant(client: &kube::Client, ns: &str, rules: Value) {
    let role: ClusterRole =
        serde_json::from_value(json!({"metadata": {"name": format!("{ns}-maker")}, "rules": rules})).unwrap();
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{ns}-maker")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{ns}-maker")},
        "subjects": [{"kind": "ServiceAccount", "name": "maker", "namespace": ns}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone()).create(&PostParams::default(), &binding).await.unwrap();
}

/// The audit events of writes (create, patch, update, delete) whose object is in `namespace`
/// or is that Namespace.
fn writes_of(namespace: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    text.lines()
        .filter(|l| l.contains(namespace) && l.contains("ResponseComplete"))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| matches!(e["verb"].as_str(), Some("create" | "update" | "patch" | "delete")))
        .filter(|e| {
            e["objectRef"]["namespace"] == namespace
                || (e["objectRef"]["resource"] == "namespaces" && e["objectRef"]["name"] == namespace)
        })
        .collect()
}

/// A tenant of `ns` ([`cluster_tenant`] with `rules`) and the engine of its unit `maker`, which
/// applies ConfigMap `a` into `ns` as ServiceAccount `maker` with `create_namespace`; and the
/// repository and state directory, to keep until the test ends.
async fn maker(
    client: &kube::Client,
    ns: &str,
    rules: Value,
) -> (common::GitRepo, tempfile::TempDir, gitward::sync::Engine) {
    cluster_tenant(client, ns, rules).await;
    let repo = common::GitRepo::new();
    repo.push(&[("a.yaml", &common::cm("a", "1"))], "a tenant's ConfigMap");
    let state = tempfile::tempdir().unwrap();
    let extra = "service_account = \"maker\"\ncreate_namespace = true\n";
    let config = common::config(state.path(), &common::unit_toml("maker", &repo.bare(), "", ns, extra));
    let engine = common::engine(client, &config, "maker").await;
    (repo, state, engine)
}

/// A tenant unit with `create_namespace` whose namespace does not exist, and whose
/// ServiceAccount may create namespaces: the namespace is created by that ServiceAccount
/// (impersonated; the audit log names it), and its ConfigMap applied as it. Every write the
/// unit's writer sent carries the replica's User-Agent, `gitward/<version> (<identity>)`.
/// Before, gitward created the namespace as itself, and the impersonating client sent a bare
/// `gitward/<version>`.
#[tokio::test]
async fn a_tenant_unit_creates_its_namespace_as_its_service_account() {
    let env = common::setup("tenant-ns").await;
    let ns = format!("{}-made", env.namespace);
    let rules = json!([
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}
    ]);
    let (_repo, _state, mut engine) = maker(&env.client, &ns, rules).await;
    let report = engine.sync().await.expect("the namespace is made and the sync runs");
    let actions = common::actions(&report);
    assert_eq!(actions.get(&format!("ConfigMap/{ns}/a")).map(String::as_str), Some("created"), "{actions:?}");
    assert!(Api::<Namespace>::all(env.client.clone()).get_opt(&ns).await.unwrap().is_some());

    let sa = format!("system:serviceaccount:{ns}:maker");
    let agent = gitward::cluster::agent::user_agent(&gitward::cluster::agent::process_identity());
    let events = writes_of(&ns);
    let made = events
        .iter()
        .find(|e| e["objectRef"]["resource"] == "namespaces" && e["verb"] == "create")
        .unwrap_or_else(|| panic!("no create of Namespace {ns} in the audit log"));
    assert_eq!(made["impersonatedUser"]["username"], sa.as_str(), "the namespace was created as: {made}");
    assert_eq!(made["responseStatus"]["code"], 201, "{made}");
    let as_sa: Vec<&Value> = events.iter().filter(|e| e["impersonatedUser"]["username"] == sa.as_str()).collect();
    assert!(as_sa.iter().any(|e| e["objectRef"]["resource"] == "configmaps"), "no ConfigMap write as {sa}");
    for event in &as_sa {
        assert_eq!(event["userAgent"], agent.as_str(), "an impersonated write without the replica's identity: {event}");
    }
    assert!(agent.ends_with(&format!("-{})", std::process::id())), "{agent}");
}

/// The same unit whose ServiceAccount may not create namespaces: the sync fails saying so
/// (the API server's 403), the namespace is not created, and nothing is written in it. Before,
/// gitward created it as itself.
#[tokio::test]
async fn a_tenant_unit_whose_service_account_may_not_create_namespaces_fails_saying_so() {
    let env = common::setup("tenant-nons").await;
    let ns = format!("{}-made", env.namespace);
    let rules = json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}
    ]);
    let (_repo, _state, mut engine) = maker(&env.client, &ns, rules).await;
    let error = engine.sync().await.expect_err("the namespace may not be made").to_string();
    assert!(error.contains(&format!("ServiceAccount {ns}/maker may not create namespaces")), "{error}");
    assert!(error.contains("forbidden") && error.contains(&format!("system:serviceaccount:{ns}:maker")), "{error}");
    assert!(Api::<Namespace>::all(env.client.clone()).get_opt(&ns).await.unwrap().is_none(), "made anyway");
    let created: Vec<Value> = writes_of(&ns).into_iter().filter(|e| e["responseStatus"]["code"] != 403).collect();
    assert!(created.is_empty(), "writes reached the API server: {created:?}");
}
