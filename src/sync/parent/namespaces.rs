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

use super::super::Result;
use super::super::state::ClusterView;
use super::ApplySetParent;
use crate::cluster::{api_message, is_status};
use crate::object::{GroupKind, ObjectRef};
use crate::plan::Desired;

/// The ref of Namespace `name`.
pub fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef::new(GroupKind::from_api_version("v1", "Namespace"), None::<&str>, name)
}

impl ApplySetParent {
    /// With `create_namespace`, makes the unit's namespace if missing ([`crate::apply::namespace::create_if_missing`], through [`super::writes::Writes::create_namespace`]).
    /// Checked once per engine, and again after a sync with failures (the namespace may have
    /// been deleted by hand since).
    ///
    /// Errors: [`super::Error::Cluster`] ([`crate::cluster::Error::NamespaceFailed`]).
    pub(super) async fn ensure_unit_namespace(&mut self, view: &ClusterView) -> Result<()> {
        if !self.unit.create_namespace || self.namespaces.checked {
            return Ok(());
        }
        let name = self.unit.namespace.as_str();
        let created = view.writes().create_namespace(name, &self.unit.field_manager).await.map_err(|e| {
            crate::cluster::Error::NamespaceFailed {
                namespace: name.to_string(),
                message: format!("create_namespace: {}", self.refusal(&e)),
            }
        })?;
        if created {
            self.namespaces.made_bare.push(namespace_ref(name));
        }
        self.namespaces.checked = true;
        Ok(())
    }

    /// The unit's namespace, when [`ApplySetParent::release_unit_namespace`] would release it: with
    /// `create_namespace`, a member in the cache not being deleted that `desired` does not
    /// declare.
    pub(in crate::sync) fn releasable_namespace(&self, view: &ClusterView, desired: &[Desired]) -> Option<ObjectRef> {
        if !self.unit.create_namespace {
            return None;
        }
        let object = namespace_ref(&self.unit.namespace);
        view.cache().get(&object).filter(|m| !m.deleting)?;
        (!desired.iter().any(|d| d.object == object)).then_some(object)
    }

    /// Before the ApplySet parent is first written: its namespace, made bare when the revision
    /// defines it (`defined`) and `create_namespace` did not already. Otherwise a missing
    /// namespace is left for the parent's write to report
    /// ([`crate::cluster::Error::ParentNamespaceMissing`]).
    ///
    /// Errors: [`super::Error::Cluster`] when the namespace cannot be read or created.
    pub(super) async fn ensure_parent_namespace(&mut self, view: &ClusterView, defined: bool) -> Result<()> {
        let Some(namespace) = self.inventory.parent.namespace.as_deref() else { return Ok(()) };
        let made = self.unit.create_namespace && self.namespaces.checked && namespace == self.unit.namespace;
        if !defined || made {
            return Ok(());
        }
        let fm = &self.unit.field_manager;
        let created = view.writes().create_namespace(namespace, fm).await.map_err(|e| {
            let parent = self.inventory.parent.to_string();
            crate::cluster::Error::InventoryFailed {
                parent,
                message: format!("create its namespace {namespace}: {}", self.refusal(&e)),
            }
        })?;
        if created {
            // Made by this sync, so its apply reports `created`, not `adopted`.
            self.namespaces.made_bare.push(namespace_ref(namespace));
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
    pub(in crate::sync) async fn release_unit_namespace(
        &self,
        view: &ClusterView,
        desired: &[Desired],
    ) -> Option<ObjectRef> {
        let object = self.releasable_namespace(view, desired)?;
        let live = view.cache().get(&object)?;
        let fm = &self.unit.field_manager;
        let id = &self.inventory.id;
        match view.writes().release_namespace(&object.name, id, live.desired_hash.is_some(), fm).await {
            Ok(_) => {
                view.cache().forget(&object);
                Some(object)
            }
            Err(_) => None,
        }
    }
}
