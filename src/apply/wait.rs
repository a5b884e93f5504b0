//! Bounded, event-driven waits after the Foundations stage: CustomResourceDefinitions until
//! Established (their kinds are served), Namespaces until Active. Uses kube-runtime's
//! `await_condition` (a watch on the one object), never a fixed sleep.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::wait::{Condition, await_condition, conditions};

use crate::changeset::{Action, ChangeSet};
use crate::manifest::Body;
use crate::object::{GroupKind, ObjectRef};
use crate::plan::Desired;

fn is_crd(object: &ObjectRef) -> bool {
    object.gk.group == "apiextensions.k8s.io" && object.gk.kind == "CustomResourceDefinition"
}

fn is_namespace(object: &ObjectRef) -> bool {
    object.gk.group.is_empty() && object.gk.kind == "Namespace"
}

fn namespace_active() -> impl Condition<Namespace> {
    |ns: Option<&Namespace>| ns.and_then(|n| n.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some("Active")
}

/// Waits for every CRD and Namespace that `changes` created or configured to be usable; one
/// that is not within `timeout` becomes `failed` with the reason. Unchanged ones were waited
/// for when they were created, so a steady-state sync sends no request here.
pub async fn foundations(client: &kube::Client, changes: &mut ChangeSet, timeout: Duration) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let waits = changes
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.action, Action::Created | Action::Adopted | Action::Configured))
        .filter_map(|(i, e)| {
            let name = e.object.name.clone();
            let fut: futures::future::BoxFuture<'static, bool> = if is_crd(&e.object) {
                let api = crds.clone();
                Box::pin(async move {
                    let w = await_condition(api, &name, conditions::is_crd_established());
                    tokio::time::timeout(timeout, w).await.is_ok_and(|r| r.is_ok())
                })
            } else if is_namespace(&e.object) {
                let api = namespaces.clone();
                Box::pin(async move {
                    let w = await_condition(api, &name, namespace_active());
                    tokio::time::timeout(timeout, w).await.is_ok_and(|r| r.is_ok())
                })
            } else {
                return None;
            };
            Some(async move { (i, fut.await) })
        });
    let results = futures::future::join_all(waits).await;
    for (i, ready) in results {
        if !ready {
            let e = &mut changes.entries[i];
            let what = if is_crd(&e.object) { "Established" } else { "Active" };
            e.action = Action::Failed;
            e.message = Some(format!("not {what} within {timeout:?}"));
        }
    }
}

/// The group-kind a desired CRD defines (`spec.group` + `spec.names.kind`), if `object` is one.
pub fn crd_group_kind(desired: &[Desired], object: &ObjectRef) -> Option<GroupKind> {
    if !is_crd(object) {
        return None;
    }
    let d = desired.iter().find(|d| &d.object == object)?;
    defined_kind(&d.source)
}

/// The group-kind a CRD body defines (`spec.group`, `spec.names.kind`); `None` when either is
/// missing or not a string.
///
/// Reads only those two fields from the compact text: the rest (a CRD's schema can be close to
/// a megabyte) is skipped without building values, since every sync asks this of every CRD in
/// git.
pub fn defined_kind(body: &Body) -> Option<GroupKind> {
    #[derive(serde::Deserialize)]
    struct Crd {
        spec: Spec,
    }
    #[derive(serde::Deserialize)]
    struct Spec {
        group: String,
        names: Names,
    }
    #[derive(serde::Deserialize)]
    struct Names {
        kind: String,
    }
    let crd: Crd = serde_json::from_str(body.as_str()).ok()?;
    Some(GroupKind::new(crd.spec.group, crd.spec.names.kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_crd_defines_its_group_and_kind_and_other_bodies_define_none() {
        let crd = json!({"kind": "CustomResourceDefinition", "spec": {"group": "x.dev", "names": {"kind": "Widget",
            "plural": "widgets"}, "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        assert_eq!(defined_kind(&crd.into()), Some(GroupKind { group: "x.dev".into(), kind: "Widget".into() }));
        assert_eq!(defined_kind(&json!({"spec": {"group": "x.dev"}}).into()), None);
        assert_eq!(defined_kind(&json!({"spec": {"group": 1, "names": {"kind": "W"}}}).into()), None);
        assert_eq!(defined_kind(&json!({"kind": "ConfigMap", "data": {}}).into()), None);
    }
}
