//! Namespaces a sync needs before it writes anything (the first sync of any layout).
//!
//! - With `create_namespace`, the unit's namespace is **shared**: made if missing (a GET, then a
//!   create of the bare Namespace — never a forced server-side apply, which would strip the
//!   fields every other writer under gitward's field manager declared), owned by no unit's
//!   ApplySet, never relabelled, never pruned. An existing Namespace, whoever owns it, is left
//!   as it is. Argo CD's `CreateNamespace=true` behaves the same way.
//! - The ApplySet parent's namespace, when the revision defines it as a Namespace manifest, is
//!   made bare before the parent's first write (crash safety, DESIGN.md decision 6: the parent
//!   is widened before any member is applied); the Foundations stage then applies the Namespace
//!   as the member it is.
//! - The unit's namespace, with `create_namespace`, when it is a member the revision no longer
//!   declares (an earlier revision declared it, or an earlier gitward made it a member for
//!   `create_namespace`, annotated `gitward.dev/prune: disabled`) is released: gitward's own
//!   `part-of` label and desired hash are removed (a JSON patch that first tests the label is
//!   still this unit's), the inventory forgets it at the next narrow, and it is never deleted.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{Engine, Result};
use crate::cluster::inventory::{DESIRED_HASH, PART_OF};
use crate::cluster::{api_message, is_status};
use crate::object::{GroupKind, ObjectRef};
use crate::plan::Desired;

/// Creates Namespace `name` if it does not exist: a GET by `reader`, then a POST of the bare
/// Namespace (`metadata.name` alone) by `writer` under `field_manager`; a 409 AlreadyExists
/// (someone created it in between) is success. Returns whether this call created it. The
/// engine reads as gitward and writes as the unit's writer (its ServiceAccount when it names
/// one), so a tenant's namespace is made only when its ServiceAccount may make it.
///
/// Errors: the API server's, of the GET or the POST.
pub async fn create_if_missing(
    reader: &kube::Client,
    writer: &kube::Client,
    name: &str,
    field_manager: &str,
) -> kube::Result<bool> {
    if Api::<Namespace>::all(reader.clone()).get_metadata_opt(name).await?.is_some() {
        return Ok(false);
    }
    let bare: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("a valid Namespace");
    let params = PostParams { field_manager: Some(field_manager.to_string()), ..Default::default() };
    match Api::<Namespace>::all(writer.clone()).create(&params, &bare).await {
        Ok(_) => Ok(true),
        Err(e) if is_status(&e, 409) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether Namespace `name` exists: one metadata GET.
///
/// Errors: the API server's.
pub async fn exists(client: &kube::Client, name: &str) -> kube::Result<bool> {
    Ok(Api::<Namespace>::all(client.clone()).get_metadata_opt(name).await?.is_some())
}

/// The ref of Namespace `name`.
pub fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef::new(GroupKind::from_api_version("v1", "Namespace"), None::<&str>, name)
}

impl Engine {
    /// With `create_namespace`, makes the unit's namespace if missing ([`create_if_missing`]).
    /// Checked once per engine, and again after a sync with failures (the namespace may have
    /// been deleted by hand since).
    ///
    /// Errors: [`super::Error::Cluster`] ([`crate::cluster::Error::NamespaceFailed`]).
    pub(super) async fn ensure_unit_namespace(&mut self) -> Result<()> {
        if !self.unit.create_namespace || self.namespace_checked {
            return Ok(());
        }
        let name = self.unit.namespace.as_str();
        let created =
            create_if_missing(&self.client, &self.writer, name, &self.apply.field_manager).await.map_err(|e| {
                crate::cluster::Error::NamespaceFailed {
                    namespace: name.to_string(),
                    message: format!("create_namespace: {}", self.refusal(&e)),
                }
            })?;
        if created {
            self.made_bare.push(namespace_ref(name));
        }
        self.namespace_checked = true;
        Ok(())
    }

    /// The unit's namespace, when [`Engine::release_unit_namespace`] would release it: with
    /// `create_namespace`, a member in the cache not being deleted that `desired` does not
    /// declare.
    pub(super) fn releasable_namespace(&self, desired: &[Desired]) -> Option<ObjectRef> {
        if !self.unit.create_namespace {
            return None;
        }
        let object = namespace_ref(&self.unit.namespace);
        self.cache.get(&object).filter(|m| !m.deleting)?;
        (!desired.iter().any(|d| d.object == object)).then_some(object)
    }

    /// Before the ApplySet parent is first written: its namespace, made bare when the revision
    /// defines it (`defined`) and `create_namespace` did not already. Otherwise a missing
    /// namespace is left for the parent's write to report
    /// ([`crate::cluster::Error::ParentNamespaceMissing`]).
    ///
    /// Errors: [`super::Error::Cluster`] when the namespace cannot be read or created.
    pub(super) async fn ensure_parent_namespace(&mut self, defined: bool) -> Result<()> {
        let Some(namespace) = self.inventory.parent.namespace.as_deref() else { return Ok(()) };
        let made = self.unit.create_namespace && self.namespace_checked && namespace == self.unit.namespace;
        if !defined || made {
            return Ok(());
        }
        let fm = &self.apply.field_manager;
        let created = create_if_missing(&self.client, &self.writer, namespace, fm).await.map_err(|e| {
            let parent = self.inventory.parent.to_string();
            crate::cluster::Error::InventoryFailed {
                parent,
                message: format!("create its namespace {namespace}: {}", self.refusal(&e)),
            }
        })?;
        if created {
            // Made by this sync, so its apply reports `created`, not `adopted`.
            self.made_bare.push(namespace_ref(namespace));
        }
        Ok(())
    }

    /// The API server's message for a failed namespace write; a 403 of a unit that names a
    /// ServiceAccount says that ServiceAccount may not create namespaces.
    fn refusal(&self, err: &kube::Error) -> String {
        match &self.unit.service_account {
            Some(sa) if is_status(err, 403) => format!(
                "ServiceAccount {}/{sa} may not create namespaces (grant it `create` on `namespaces`, or create the \
                 namespace): {}",
                self.unit.namespace,
                api_message(err)
            ),
            _ => api_message(err),
        }
    }

    /// Releases the unit's namespace when it is a member that the revision no longer declares,
    /// with `create_namespace` on: the Namespace `create_namespace` makes and shares is never
    /// pruned, whether an earlier gitward made it a member for `create_namespace` (annotated
    /// `gitward.dev/prune: disabled`) or an earlier revision declared it. Its `part-of` label
    /// (tested to still be this unit's) and desired-hash annotation are removed by one JSON
    /// patch, and the cache forgets it, so the narrow drops it from the member record and the
    /// prune never sees it. Labels anyone else set stay. A failed patch leaves it a member,
    /// released at a later sync (the prune refuses it meanwhile if it holds anything). Returns
    /// the namespace released, if any.
    pub(super) async fn release_unit_namespace(&self, desired: &[Desired]) -> Option<ObjectRef> {
        let object = self.releasable_namespace(desired)?;
        let live = self.cache.get(&object)?;
        let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
        let label = format!("/metadata/labels/{}", escape(PART_OF));
        let mut ops = vec![
            json!({"op": "test", "path": label, "value": self.inventory.id}),
            json!({"op": "remove", "path": label}),
        ];
        if live.desired_hash.is_some() {
            ops.push(json!({"op": "remove", "path": format!("/metadata/annotations/{}", escape(DESIRED_HASH))}));
        }
        let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops)).expect("a JSON patch");
        let params = PatchParams { field_manager: Some(self.apply.field_manager.clone()), ..Default::default() };
        let api: Api<Namespace> = Api::all(self.client.clone());
        match api.patch_metadata(&object.name, &params, &Patch::Json::<()>(patch)).await {
            Ok(_) => {
                self.cache.forget(&object);
                Some(object)
            }
            Err(_) => None,
        }
    }
}
