//! One read of a unit's members of the kinds that bear health, judged by [`super::status`]:
//! what the end of a health wait, a fresh engine's first wait and `gitward status` use to tell
//! whether every member is `Current` — not only those the last sync changed.
//!
//! Per group-kind, one list of full objects in all namespaces, selected by the unit's
//! `applyset.kubernetes.io/part-of=<id>` label, read in pages of [`PAGE`] objects (`limit` and
//! `continue`, API concepts "Retrieving large results sets in chunks"); each object is judged
//! as its page arrives and only its ref and status are kept, so the read holds one page at a
//! time, not every Deployment of the unit.

use std::sync::Arc;

use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;

use super::{Health, Status, bears_health, status};
use crate::health::wait::Target;
use crate::object::{GroupKind, ObjectRef};

/// Objects per page of a survey list.
pub const PAGE: u32 = 500;

/// A list failed: the group-kind and what the API server said. Worth retrying.
#[derive(Debug, thiserror::Error)]
#[error("{group_kind}: listing members failed: {source}")]
pub struct Error {
    /// `Kind.group` being listed.
    pub group_kind: String,
    /// What the API server said.
    pub source: kube::Error,
}

/// One kind to read: its group-kind, resource (shared with discovery) and scope.
#[derive(Debug, Clone)]
pub struct Kind {
    /// The group-kind.
    pub gk: GroupKind,
    /// Its resource (group, version, plural).
    pub resource: Arc<ApiResource>,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// Lists every object of `kind` that `selector` selects, in all namespaces, as full objects in
/// pages of [`PAGE`], and calls `each` with each object's ref and [`super::status`]. Returns
/// how many were read.
///
/// Errors: [`Error`] with the first failed request's answer.
pub async fn each_judged(
    client: &kube::Client,
    kind: &Kind,
    selector: &str,
    mut each: impl FnMut(ObjectRef, Status),
) -> Result<usize, Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), kind.resource.as_ref());
    let mut params = ListParams::default().labels(selector).limit(PAGE);
    let mut read = 0;
    loop {
        let page = api.list(&params).await.map_err(|source| Error { group_kind: kind.gk.to_string(), source })?;
        for item in page.items {
            let namespace = if kind.namespaced { item.metadata.namespace.clone() } else { None };
            let object = ObjectRef::new(kind.gk.clone(), namespace, item.metadata.name.clone().unwrap_or_default());
            let mut value = serde_json::to_value(&item).unwrap_or_default();
            // List items may come without apiVersion and kind.
            value["kind"] = kind.resource.kind.clone().into();
            value["apiVersion"] = kind.resource.api_version.clone().into();
            each(object, status(&value));
            read += 1;
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(read),
        }
    }
}

/// The members of `kinds` (those that bear health; the others are skipped) that `selector`
/// selects and that are not `Current`, as wait targets with their status, in ref order.
///
/// Errors: [`Error`] of the first kind whose list failed.
pub async fn not_current(
    client: &kube::Client,
    kinds: &[Kind],
    selector: &str,
) -> Result<Vec<(Target, Status)>, Error> {
    let mut found = Vec::new();
    for kind in kinds.iter().filter(|k| bears_health(&k.gk)) {
        each_judged(client, kind, selector, |object, status| {
            if status.health != Health::Current {
                found.push((Target { object, resource: kind.resource.clone() }, status));
            }
        })
        .await?;
    }
    found.sort_by(|a, b| a.0.object.cmp(&b.0.object));
    Ok(found)
}

/// Reads `target` once, as a full object, and judges it ([`super::status`]); `None` when it is
/// not in the cluster. The object is dropped once judged.
///
/// Errors: [`Error`] with the API server's answer (a 404 is `None`, not an error).
pub async fn judge_one(client: &kube::Client, target: &Target) -> Result<Option<Status>, Error> {
    let resource = target.resource.as_ref();
    let api: Api<DynamicObject> = match &target.object.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let found = api
        .get_opt(&target.object.name)
        .await
        .map_err(|source| Error { group_kind: target.object.gk.to_string(), source })?;
    Ok(found.map(|item| {
        let mut value = serde_json::to_value(&item).unwrap_or_default();
        value["kind"] = resource.kind.clone().into();
        value["apiVersion"] = resource.api_version.clone().into();
        status(&value)
    }))
}
