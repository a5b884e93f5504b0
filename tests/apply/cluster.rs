//! The test cluster is a real kube-apiserver: these tests show the behaviours gitward relies
//! on — server-side apply and managedFields, no-op applies, optimistic locking, CRDs,
//! metadata-only lists and watches, RBAC, and the audit log.

use crate::common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind, PartialObjectMeta};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use serde_json::json;

fn config_map(name: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "probe"}}, "data": {"key": value}})
}

#[tokio::test]
async fn server_side_apply_records_field_manager_gitward() {
    let env = common::setup("ssa").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let cm = api.patch("conf", &PatchParams::apply("gitward"), &Patch::Apply(config_map("conf", "a"))).await.unwrap();
    let managers: Vec<_> = cm.metadata.managed_fields.unwrap().into_iter().map(|m| (m.manager, m.operation)).collect();
    assert_eq!(managers, vec![(Some("gitward".to_string()), Some("Apply".to_string()))]);
}

#[tokio::test]
async fn unchanged_apply_keeps_the_resource_version() {
    let env = common::setup("noop").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let params = PatchParams::apply("gitward");
    let first = api.patch("conf", &params, &Patch::Apply(config_map("conf", "a"))).await.unwrap();
    let again = api.patch("conf", &params, &Patch::Apply(config_map("conf", "a"))).await.unwrap();
    assert_eq!(first.metadata.resource_version, again.metadata.resource_version);
    let changed = api.patch("conf", &params, &Patch::Apply(config_map("conf", "b"))).await.unwrap();
    assert_ne!(first.metadata.resource_version, changed.metadata.resource_version);
}

#[tokio::test]
async fn put_with_a_stale_resource_version_gets_409_conflict() {
    let env = common::setup("conflict").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let cm: ConfigMap = serde_json::from_value(config_map("conf", "a")).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let mut newer = created.clone();
    newer.data = Some([("key".to_string(), "b".to_string())].into());
    api.replace("conf", &PostParams::default(), &newer).await.unwrap();
    let mut stale = created;
    stale.data = Some([("key".to_string(), "c".to_string())].into());
    let err = api.replace("conf", &PostParams::default(), &stale).await.unwrap_err();
    assert!(gitward::cluster::is_status(&err, 409), "expected 409 Conflict, got {err:?}");
}

#[tokio::test]
async fn custom_resource_applies_once_its_crd_is_established() {
    let env = common::setup("crd").await;
    let group = format!("{}.gitward.dev", env.namespace);
    let crd_name = format!("widgets.{group}");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    });
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.patch(&crd_name, &PatchParams::apply("gitward"), &Patch::Apply(crd)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), await_condition(crds, &crd_name, conditions::is_crd_established()))
        .await
        .expect("CRD Established within 30s")
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &env.namespace, &ar);
    let body =
        json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}});
    let w = widgets.patch("w", &PatchParams::apply("gitward"), &Patch::Apply(body)).await.unwrap();
    assert_eq!(w.data["spec"]["size"], 3);
}

#[tokio::test]
async fn metadata_only_list_and_watch_select_by_label() {
    let env = common::setup("meta").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let params = PatchParams::apply("gitward");
    api.patch("one", &params, &Patch::Apply(config_map("one", "1"))).await.unwrap();
    let mut other = config_map("two", "2");
    other["metadata"]["labels"]["app"] = json!("other");
    api.patch("two", &params, &Patch::Apply(other)).await.unwrap();

    let meta: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(env.client.clone(), &env.namespace);
    let list = meta.list_metadata(&ListParams::default().labels("app=probe")).await.unwrap();
    let names: Vec<_> = list.items.iter().map(|i| i.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, vec!["one"]);
    assert_eq!(list.types.kind, "PartialObjectMetadataList");

    // "three" is made once the watcher's first list is done, so it arrives as a watch event.
    let stream = watcher::watcher(meta, watcher::Config::default().labels("app=probe")).boxed();
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        let mut stream = stream;
        while let Some(event) = stream.try_next().await.unwrap() {
            match event {
                watcher::Event::InitDone => {
                    let three = Patch::Apply(config_map("three", "3"));
                    api.patch("three", &PatchParams::apply("gitward"), &three).await.unwrap();
                }
                watcher::Event::Apply(o) => return o,
                _ => {}
            }
        }
        panic!("watch ended")
    })
    .await
    .expect("watch event within 20s");
    assert_eq!(seen.metadata.name.as_deref(), Some("three"));
}

#[tokio::test]
async fn limited_identity_is_forbidden_where_admin_is_allowed() {
    let env = common::setup("rbac").await;
    let admin: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    admin.list(&ListParams::default()).await.expect("admin may list");
    let limited: Api<ConfigMap> = Api::namespaced(common::limited("gitward-test-limited").await, &env.namespace);
    let err = limited.list(&ListParams::default()).await.unwrap_err();
    assert!(gitward::cluster::is_status(&err, 403), "expected 403 Forbidden, got {err:?}");
}

#[tokio::test]
async fn audit_log_records_each_request_of_a_test() {
    let env = common::setup("audit").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let params = PatchParams::apply("gitward");
    for name in ["a", "b", "c"] {
        api.patch(name, &params, &Patch::Apply(config_map(name, "x"))).await.unwrap();
    }
    api.get("a").await.unwrap();
    api.delete("b", &Default::default()).await.unwrap();
    let configmaps = |events: &[serde_json::Value]| -> Vec<serde_json::Value> {
        events.iter().filter(|e| e["objectRef"]["resource"] == "configmaps").cloned().collect()
    };
    let events = common::audit_events_until(&env.user_agent, |e| configmaps(e).len() >= 5).await;
    let events = configmaps(&events);
    let verbs = common::verbs(&events);
    assert_eq!(verbs.get("patch"), Some(&3), "{verbs:?}");
    assert_eq!(verbs.get("get"), Some(&1), "{verbs:?}");
    assert_eq!(verbs.get("delete"), Some(&1), "{verbs:?}");
    assert!(events.iter().all(|e| e["user"]["username"] == "admin"));
}
