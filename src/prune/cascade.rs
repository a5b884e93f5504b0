//! Cascading prunes: deleting a Namespace deletes every object in it, and deleting a CRD every
//! custom resource of its kind, members or not. Before such a delete, [`Checker::check`] lists
//! (metadata only) what would go with it; anything found refuses the prune of that one object,
//! and the refusal message counts it. The annotation `gitward.dev/prune: cascade` on the
//! Namespace or CRD permits the cascade (the caller skips the check).
//!
//! - A **Namespace**: one metadata LIST per namespaced kind the API server serves and can list
//!   (aggregated discovery, two requests, once per prune), in that namespace, `limit=100`,
//!   following `continue` only while nothing has been found. Not counted: objects with a
//!   controller ownerReference (they go with their owner, whose kind is checked too), objects
//!   already being deleted, derived or ephemeral kinds (Events, Endpoints, Leases,
//!   `metrics.k8s.io`), and what Kubernetes puts in every namespace (ServiceAccount `default`,
//!   ConfigMap `kube-root-ca.crt`). Members of this unit still in it count as well: they are
//!   not being pruned (kept, or not members).
//! - A **CRD**: one GET of the CRD (group, plural, a served version), then one metadata LIST of
//!   its custom resources across namespaces, `limit=100`: every one not already being deleted
//!   counts.
//!
//! Anything that cannot be checked (discovery or a LIST fails) refuses the prune too: an
//! unverified cascade is not permission.

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{GroupVersionKind, PartialObjectMeta};
use kube::discovery::{ApiResource, Scope, verbs};

use super::Context;
use crate::changeset::ChangeSet;
use crate::cluster::api_message;
use crate::cluster::inventory::{PRUNE, PRUNE_CASCADE};
use crate::object::ObjectRef;

/// Objects asked for per LIST request.
const PAGE: u32 = 100;
/// At most this many pages per kind before the check gives up (and refuses).
const MAX_PAGES: usize = 20;
/// Objects named in a refusal message.
const SHOWN: usize = 5;

/// Checks the cascades of one prune; discovery is done once, at the first Namespace.
pub struct Checker<'a> {
    ctx: &'a Context<'a>,
    namespaced: Option<Result<Vec<ApiResource>, String>>,
}

/// What a cascade would take.
#[derive(Debug, Default)]
struct Found {
    /// `Kind/ns/name` of objects that are not members and would be deleted.
    objects: Vec<String>,
    /// More pages were not read: at least `objects.len()`.
    more: bool,
    /// What could not be checked, with the reason.
    unverified: Vec<String>,
}

impl<'a> Checker<'a> {
    /// A checker for one prune.
    pub fn new(ctx: &'a Context<'a>) -> Self {
        Self { ctx, namespaced: None }
    }

    /// `Ok` when deleting `object` takes nothing but itself (or it is neither a Namespace nor
    /// a CRD); otherwise the refusal message, which counts what would go with it.
    pub async fn check(&mut self, object: &ObjectRef, changes: &mut ChangeSet) -> Result<(), String> {
        let found = match (object.gk.group.as_str(), object.gk.kind.as_str()) {
            ("", "Namespace") => self.namespace(&object.name, changes).await,
            ("apiextensions.k8s.io", "CustomResourceDefinition") => self.crd(&object.name, changes).await,
            _ => return Ok(()),
        };
        if found.objects.is_empty() && found.unverified.is_empty() {
            return Ok(());
        }
        let mut msg = String::from("not deleted: ");
        if !found.objects.is_empty() {
            let count = format!("{}{}", found.objects.len(), if found.more { " or more" } else { "" });
            let shown: Vec<&str> = found.objects.iter().take(SHOWN).map(String::as_str).collect();
            let ellipsis = if found.objects.len() > SHOWN || found.more { ", …" } else { "" };
            msg.push_str(&format!(
                "deleting it would delete {count} objects that are not members of this unit ({}{ellipsis})",
                shown.join(", ")
            ));
        }
        if !found.unverified.is_empty() {
            if !found.objects.is_empty() {
                msg.push_str("; ");
            }
            msg.push_str(&format!("could not check what deleting it would delete: {}", found.unverified.join("; ")));
        }
        msg.push_str(&format!("; annotate it {PRUNE}: {PRUNE_CASCADE} to permit"));
        Err(msg)
    }

    async fn namespaced_resources(&mut self, changes: &mut ChangeSet) -> Result<Vec<ApiResource>, String> {
        if self.namespaced.is_none() {
            changes.requests += 2;
            let discovered = kube::Discovery::new(self.ctx.client.clone()).run_aggregated().await;
            self.namespaced = Some(match discovered {
                Ok(d) => Ok(d
                    .groups()
                    .flat_map(|g| g.recommended_resources())
                    .filter(|(ar, caps)| {
                        caps.scope == Scope::Namespaced && caps.supports_operation(verbs::LIST) && !ignored_kind(ar)
                    })
                    .map(|(ar, _)| ar)
                    .collect()),
                Err(e) => Err(format!("discovery: {}", api_message(&e))),
            });
        }
        self.namespaced.clone().expect("set above")
    }

    async fn namespace(&mut self, ns: &str, changes: &mut ChangeSet) -> Found {
        let mut found = Found::default();
        let resources = match self.namespaced_resources(changes).await {
            Ok(r) => r,
            Err(e) => {
                found.unverified.push(e);
                return found;
            }
        };
        for ar in resources {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::namespaced_with(self.ctx.client.clone(), ns, &ar);
            let mut params = ListParams::default().limit(PAGE);
            if let Some(name) = furniture(&ar) {
                params = params.fields(&format!("metadata.name!={name}"));
            }
            self.list(&api, params, &ar.kind, true, &mut found, changes).await;
        }
        found
    }

    async fn crd(&mut self, name: &str, changes: &mut ChangeSet) -> Found {
        let mut found = Found::default();
        let crds = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        );
        let api: Api<DynamicObject> = Api::all_with(self.ctx.client.clone(), &crds);
        changes.requests += 1;
        let crd = match api.get(name).await {
            Ok(crd) => crd,
            Err(e) => {
                found.unverified.push(format!("read the CRD: {}", api_message(&e)));
                return found;
            }
        };
        let Some(resource) = served_resource(&crd.data["spec"]) else {
            found.unverified.push("the CRD serves no version to list its custom resources with".into());
            return found;
        };
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(self.ctx.client.clone(), &resource);
        self.list(&api, ListParams::default().limit(PAGE), &resource.kind, false, &mut found, changes).await;
        found
    }

    /// Pages through one LIST until something is found; adds what counts to `found`.
    async fn list(
        &self,
        api: &Api<PartialObjectMeta<DynamicObject>>,
        mut params: ListParams,
        kind: &str,
        skip_controlled: bool,
        found: &mut Found,
        changes: &mut ChangeSet,
    ) {
        for page in 0..MAX_PAGES {
            changes.requests += 1;
            let list = match api.list_metadata(&params).await {
                Ok(list) => list,
                // Listed by discovery but not listable after all (aggregated API quirks).
                Err(e) if crate::cluster::is_status(&e, 404) || crate::cluster::is_status(&e, 405) => return,
                Err(e) => {
                    found.unverified.push(format!("list {kind}: {}", api_message(&e)));
                    return;
                }
            };
            let before = found.objects.len();
            for item in list.items {
                let meta = item.metadata;
                let live = crate::cluster::live_meta(&meta);
                if live.deleting || (skip_controlled && live.controlled) {
                    continue;
                }
                let name = meta.name.unwrap_or_default();
                found.objects.push(match meta.namespace {
                    Some(ns) => format!("{kind}/{ns}/{name}"),
                    None => format!("{kind}/{name}"),
                });
            }
            let next = list.metadata.continue_.filter(|c| !c.is_empty());
            match next {
                None => return,
                Some(_) if found.objects.len() > before => {
                    found.more = true;
                    return;
                }
                Some(token) if page + 1 < MAX_PAGES => params.continue_token = Some(token),
                Some(_) => {
                    found.unverified.push(format!("list {kind}: more than {} objects", PAGE as usize * MAX_PAGES));
                }
            }
        }
    }
}

/// Kinds whose objects are derived or ephemeral: they never block a Namespace's prune.
fn ignored_kind(ar: &ApiResource) -> bool {
    matches!(
        (ar.group.as_str(), ar.kind.as_str()),
        ("", "Event") | ("events.k8s.io", "Event") | ("", "Endpoints") | ("coordination.k8s.io", "Lease")
    ) || ar.group == "metrics.k8s.io"
}

/// The object Kubernetes itself puts in every namespace, for the kinds that have one.
fn furniture(ar: &ApiResource) -> Option<&'static str> {
    match (ar.group.as_str(), ar.kind.as_str()) {
        ("", "ServiceAccount") => Some("default"),
        ("", "ConfigMap") => Some("kube-root-ca.crt"),
        _ => None,
    }
}

/// The resource of a CRD's custom resources at a served version (the storage version if
/// served), from the CRD's `spec`; `None` when it serves none.
pub fn served_resource(spec: &serde_json::Value) -> Option<ApiResource> {
    let group = spec["group"].as_str()?;
    let kind = spec["names"]["kind"].as_str()?;
    let plural = spec["names"]["plural"].as_str()?;
    let versions = spec["versions"].as_array()?;
    let served: Vec<&serde_json::Value> = versions.iter().filter(|v| v["served"] == true).collect();
    let version = served.iter().find(|v| v["storage"] == true).or(served.first())?["name"].as_str()?;
    Some(ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_crd_is_listed_at_its_served_storage_version() {
        let spec = json!({"group": "x.dev", "names": {"kind": "Gadget", "plural": "gadgets"}, "versions": [
            {"name": "v1", "served": false, "storage": false},
            {"name": "v2", "served": true, "storage": false},
            {"name": "v3", "served": true, "storage": true},
        ]});
        let r = served_resource(&spec).unwrap();
        assert_eq!((r.api_version.as_str(), r.plural.as_str()), ("x.dev/v3", "gadgets"));
        let none = json!({"group": "x.dev", "names": {"kind": "G", "plural": "gs"}, "versions": [{"name": "v1", "served": false}]});
        assert!(served_resource(&none).is_none());
    }

    #[test]
    fn events_and_endpoints_never_block_a_namespace_prune_but_pvcs_do() {
        let ar = |g: &str, k: &str| ApiResource::from_gvk(&GroupVersionKind::gvk(g, "v1", k));
        assert!(ignored_kind(&ar("", "Event")));
        assert!(ignored_kind(&ar("", "Endpoints")));
        assert!(!ignored_kind(&ar("", "PersistentVolumeClaim")));
        assert_eq!(furniture(&ar("", "ConfigMap")), Some("kube-root-ca.crt"));
    }
}
