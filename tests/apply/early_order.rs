//! The early apply keeps the sync's stage order: a push that changes a Namespace or a CRD and
//! objects that depend on it sends the Namespace (CRD) first, with the Foundations stage's
//! waits; a rejected Namespace or CRD keeps its dependents back; an object the whole sync
//! creates holds back the changed objects of later stages. Order is read from the apiserver's
//! audit log, outcomes from the cluster.

use crate::common;

use gitward::changeset::Action;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

fn namespace(name: &str, labels: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n{labels}")
}

fn deployment(namespace: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {namespace}\nspec:\n  \
         selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    \
         spec:\n      containers:\n        - name: web\n          image: {image}\n"
    )
}

/// A CRD of kind Gadget in `group` whose `spec` has `size` and, with `color`, a `color` field.
fn crd(group: &str, color: bool) -> String {
    let color = if color { "                color:\n                  type: string\n" } else { "" };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.{group}\nspec:\n  group: {group}\n  scope: Namespaced\n  names:\n    plural: gadgets\n    singular: gadget\n    kind: Gadget\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            spec:\n              type: object\n              properties:\n                size:\n                  type: integer\n{color}"
    )
}

/// One unit of a fresh repository synced by an engine whose client sends its own user agent.
struct Unit {
    env: common::TestEnv,
    repo: common::GitRepo,
    _state: tempfile::TempDir,
    agent: String,
    client: kube::Client,
    engine: gitward::sync::Engine,
}

impl Unit {
    /// Pushes `files` as the first revision and syncs it.
    async fn synced(prefix: &str, files: &[(&str, String)]) -> Self {
        let (env, _, repo) = common::setup_repo(prefix).await;
        for (path, text) in files {
            repo.write(path, text);
        }
        repo.commit_and_push("first revision");
        let state = tempfile::tempdir().unwrap();
        let config = common::config(state.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, ""));
        let (agent, client) = env.gitward_client().await;
        let mut engine = common::engine(&client, &config, "app").await;
        let first = engine.sync().await.expect("first sync");
        assert!(!first.changes.has_failures(), "{:#?}", common::actions(&first));
        Self { env, repo, _state: state, agent, client, engine }
    }

    /// Pushes `files` and syncs; returns the report and the audit events of the sync, in order
    /// (complete: a marker request sent after the sync returned is in the log).
    async fn push_and_sync(&mut self, files: &[(&str, String)]) -> (gitward::sync::Report, Vec<Value>) {
        for (path, text) in files {
            self.repo.write(path, text);
        }
        self.repo.commit_and_push("second revision");
        let before = common::audit_events(&self.agent).len();
        let report = self.engine.sync().await.expect("second sync runs");
        let marker = common::unique("marker");
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        assert!(namespaces.get_opt(&marker).await.expect("the marker request").is_none());
        let is_marker = |e: &Value| e["verb"] == "get" && e["objectRef"]["name"] == marker.as_str();
        let events = common::audit_events_until(&self.agent, |e| e[before..].iter().any(is_marker)).await;
        assert!(events[before..].iter().any(is_marker), "the marker is in the audit log");
        let sent = events[before..].iter().filter(|e| !is_marker(e)).cloned().collect();
        (report, sent)
    }
}

/// Positions of the writes (patch, create, update) of `resource` named `name` among `events`.
fn writes(events: &[Value], resource: &str, name: &str) -> Vec<usize> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(e["verb"].as_str(), Some("patch" | "create" | "update"))
                && e["objectRef"]["resource"] == resource
                && e["objectRef"]["name"] == name
                && e["objectRef"]["subresource"].is_null()
        })
        .map(|(i, _)| i)
        .collect()
}

/// Those of `positions` (into `events`) the API server answered without a server error (5xx).
fn taken(events: &[Value], positions: &[usize]) -> Vec<usize> {
    positions
        .iter()
        .copied()
        .filter(|&i| events[i]["responseStatus"]["code"].as_u64().is_some_and(|c| c < 500))
        .collect()
}

fn image(d: &Deployment) -> String {
    d.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].image.clone().unwrap_or_default()
}

/// One push labels a Namespace `istio-injection: enabled` and changes the image of a Deployment
/// in it: both go early, the Namespace written before the Deployment (its new pods get the
/// sidecar), each once.
#[tokio::test]
async fn a_namespace_label_reaches_the_api_server_before_the_deployment_in_it() {
    let ns = common::unique("inject");
    let mut unit =
        Unit::synced("early-ns", &[("ns.yaml", namespace(&ns, "")), ("web.yaml", deployment(&ns, "nginx:1.0"))]).await;
    let labels = "  labels:\n    istio-injection: enabled\n";
    let (report, events) =
        unit.push_and_sync(&[("ns.yaml", namespace(&ns, labels)), ("web.yaml", deployment(&ns, "nginx:1.1"))]).await;
    let actions = common::actions(&report);
    let (namespace_writes, deployment_writes) =
        (writes(&events, "namespaces", &ns), writes(&events, "deployments", "web"));
    assert!(namespace_writes[0] < deployment_writes[0], "the Namespace first: {events:#?}");
    assert_eq!((namespace_writes.len(), deployment_writes.len()), (1, 1), "one write each: {events:#?}");
    assert!(!report.changes.has_failures(), "{actions:#?}");
    assert_eq!(report.sent.applied_early, 2, "{actions:#?}");

    let live = Api::<Namespace>::all(unit.env.client.clone()).get(&ns).await.unwrap();
    assert_eq!(live.metadata.labels.unwrap_or_default().get("istio-injection").map(String::as_str), Some("enabled"));
    let web = Api::<Deployment>::namespaced(unit.env.client.clone(), &ns).get("web").await.unwrap();
    assert_eq!(image(&web), "nginx:1.1");
}

/// One push adds a field to a CRD's schema and sets it in a custom resource: the CRD is written
/// first (both early), so the custom resource never reaches the API server under the old schema
/// (which drops the unknown field), and the field is live.
#[tokio::test]
async fn a_custom_resource_using_a_new_crd_field_keeps_it() {
    let probe = common::unique("early-crd");
    let group = format!("{probe}.gitward.dev");
    let gadget = |spec: &str| format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n{spec}");
    let mut unit =
        Unit::synced("early-crd", &[("crd.yaml", crd(&group, false)), ("gadget.yaml", gadget("  size: 3\n"))]).await;
    let (report, events) = unit
        .push_and_sync(&[("crd.yaml", crd(&group, true)), ("gadget.yaml", gadget("  size: 3\n  color: blue\n"))])
        .await;
    let actions = common::actions(&report);
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(unit.env.client.clone(), &unit.env.namespace, &ar);
    let live = gadgets.get("g1").await.unwrap();
    assert_eq!(live.data["spec"]["color"], "blue", "the new field is live: {:#?}", live.data);

    let crd_writes = writes(&events, "customresourcedefinitions", &format!("gadgets.{group}"));
    let gadget_writes = writes(&events, "gadgets", "g1");
    assert!(crd_writes[0] < gadget_writes[0], "the CRD first: {events:#?}");
    // The API server may answer the first write of the custom resource with a 500 while it swaps
    // the CRD's storage for the new schema (seen once in CI); the whole sync then sends it again.
    // What must hold is one write each that the API server took, the CRD's before the resource's.
    let (crd_taken, gadget_taken) = (taken(&events, &crd_writes), taken(&events, &gadget_writes));
    assert_eq!((crd_taken.len(), gadget_taken.len()), (1, 1), "one write each taken: {events:#?}");
    assert!(crd_taken[0] < gadget_taken[0], "the CRD taken first: {events:#?}");
    assert!(!report.changes.has_failures(), "{actions:#?}");
    assert_eq!(report.sent.applied_early, 2, "{actions:#?}");
}

/// One push makes a Namespace invalid (the API server rejects its label) and changes the image
/// of a Deployment in it: the Namespace fails (early, and again in the whole sync, which reports
/// it), the Deployment is skipped for it and never sent, and keeps its image.
#[tokio::test]
async fn a_rejected_namespace_change_keeps_the_deployment_in_it_back() {
    let ns = common::unique("rejected");
    let mut unit =
        Unit::synced("early-rej", &[("ns.yaml", namespace(&ns, "")), ("web.yaml", deployment(&ns, "nginx:1.0"))]).await;
    let labels = "  labels:\n    team: \"not a valid label value!\"\n";
    let (report, events) =
        unit.push_and_sync(&[("ns.yaml", namespace(&ns, labels)), ("web.yaml", deployment(&ns, "nginx:1.1"))]).await;
    let actions = common::actions(&report);
    let live = Api::<Deployment>::namespaced(unit.env.client.clone(), &ns).get("web").await.unwrap();
    assert_eq!(image(&live), "nginx:1.0", "the last good state stays in force");
    assert_eq!(writes(&events, "deployments", "web"), Vec::<usize>::new(), "never sent: {events:#?}");
    assert_eq!(report.sent.applied_early, 0, "{actions:#?}");
    let entry = |kind: &str| report.changes.entries.iter().find(|e| e.object.gk.kind == kind).unwrap().clone();
    assert_eq!(entry("Namespace").action, Action::Failed, "{actions:#?}");
    let web = entry("Deployment");
    assert_eq!(web.action, Action::Skipped, "{actions:#?}");
    assert!(web.message.unwrap_or_default().contains(&format!("Namespace/{ns}")), "{actions:#?}");
}

/// One push adds a ConfigMap and changes the Deployment that mounts it: the ConfigMap, new, waits
/// for the whole sync (its ownership check), and so does the Deployment, created after it.
#[tokio::test]
async fn a_deployment_waits_for_the_new_config_map_it_mounts() {
    let ns = common::unique("mounts");
    let mut unit =
        Unit::synced("early-new", &[("ns.yaml", namespace(&ns, "")), ("web.yaml", deployment(&ns, "nginx:1.0"))]).await;
    let config_map = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\n");
    let (report, events) =
        unit.push_and_sync(&[("settings.yaml", config_map), ("web.yaml", deployment(&ns, "nginx:1.1"))]).await;
    let actions = common::actions(&report);
    let (config_map_writes, deployment_writes) =
        (writes(&events, "configmaps", "settings"), writes(&events, "deployments", "web"));
    assert!(config_map_writes[0] < deployment_writes[0], "the ConfigMap first: {events:#?}");
    assert_eq!((config_map_writes.len(), deployment_writes.len()), (1, 1), "one write each: {events:#?}");
    assert!(!report.changes.has_failures(), "{actions:#?}");
    assert_eq!(report.sent.applied_early, 0, "{actions:#?}");
    let web = Api::<Deployment>::namespaced(unit.env.client.clone(), &ns).get("web").await.unwrap();
    assert_eq!(image(&web), "nginx:1.1");
}

/// One push breaks a CRD's schema (the API server rejects it) and changes a custom resource of
/// it: the CRD fails, the custom resource is skipped for it and never sent, and keeps its spec.
#[tokio::test]
async fn a_rejected_crd_change_keeps_its_custom_resources_back() {
    let probe = common::unique("early-crd-rej");
    let group = format!("{probe}.gitward.dev");
    let gadget =
        |size: u32| format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  size: {size}\n");
    let mut unit = Unit::synced("early-crd-rej", &[("crd.yaml", crd(&group, false)), ("gadget.yaml", gadget(3))]).await;
    let broken = crd(&group, false).replace("type: integer", "type: no-such-type");
    let (report, events) = unit.push_and_sync(&[("crd.yaml", broken), ("gadget.yaml", gadget(4))]).await;
    let actions = common::actions(&report);
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(unit.env.client.clone(), &unit.env.namespace, &ar);
    assert_eq!(gadgets.get("g1").await.unwrap().data["spec"]["size"], 3, "the last good state stays in force");
    assert_eq!(writes(&events, "gadgets", "g1"), Vec::<usize>::new(), "never sent: {events:#?}");
    assert_eq!(report.sent.applied_early, 0, "{actions:#?}");
    let entry = |kind: &str| report.changes.entries.iter().find(|e| e.object.gk.kind == kind).unwrap().clone();
    assert_eq!(entry("CustomResourceDefinition").action, Action::Failed, "{actions:#?}");
    assert_eq!(entry("Gadget").action, Action::Skipped, "{actions:#?}");
}
