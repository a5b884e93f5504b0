//! The inventory writes of a sync: the ApplySet parent widened to old ∪ new before anything
//! is applied (DESIGN.md decision 6), narrowed to what remains after a clean prune, read and
//! written with the resourceVersion read as a precondition.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::super::Result;
use super::super::hooks::{HOOKS_RAN, Hooks};
use super::super::state::ClusterView;
use super::{ApplySetParent, namespaces};
use crate::cluster::LiveMeta;
use crate::cluster::inventory::control::HANDLED_AT;
use crate::cluster::inventory::{Contents, Control, Parent, Seen};
use crate::cluster::owner::UNIT;
use crate::health::record::{Attempt, Record};
use crate::object::{Atom, GroupKind, ObjectRef};
use crate::plan::Desired;

impl ApplySetParent {
    /// The controls on the unit's ApplySet parent as its watch sees them
    /// ([`crate::cluster::inventory::ParentWatch::control`]); starts the watch if none runs.
    pub(in crate::sync) fn control(&mut self, view: &ClusterView) -> tokio::sync::watch::Receiver<Option<Control>> {
        self.watch.get_or_insert_with(|| self.inventory.watch(view.cache().watches())).control()
    }

    /// The controls on the unit's ApplySet parent by one metadata GET (none for a parent that
    /// does not exist), for when its watch has not listed yet.
    ///
    /// Errors: [`super::Error::Cluster`] when the parent cannot be read.
    pub(in crate::sync) async fn read_control(&self, view: &ClusterView) -> Result<Control> {
        Ok(self.inventory.control(view.client()).await?.unwrap_or_default())
    }

    /// Notes on the ApplySet parent that the sync request `token` waits for the unit's running
    /// health wait ([`crate::cluster::inventory::control::QUEUED_AT`], which `gitward
    /// reconcile` reads): a future that owns what it needs, to run beside the unit's loop.
    ///
    /// Errors: [`super::Error::Cluster`] when the parent cannot be written.
    pub(in crate::sync) fn note_request_queued(
        &self,
        view: &ClusterView,
        token: String,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        let (inventory, client) = (self.inventory.clone(), view.client().clone());
        async move { Ok(inventory.note_queued(&client, &token).await?) }
    }

    /// Widens the ApplySet parent to what it holds ∪ `wanted` before anything is applied
    /// (DESIGN.md decision 6), writing only when that differs, with the resourceVersion read
    /// as a precondition; on a conflict (someone else wrote it, or it was deleted) reads it
    /// again and retries once. A missing parent is created.
    pub(in crate::sync) async fn widen(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        wanted: &Contents,
    ) -> Result<Contents> {
        let watch = self.watch.get_or_insert_with(|| self.inventory.watch(view.cache().watches()));
        let stale = match (watch.seen(), &self.known) {
            (Seen::Absent, Some(_)) => true,
            (Seen::Present(rv), Some(known)) => crate::cluster::drift::newer(&rv, &known.resource_version),
            _ => false,
        };
        if stale {
            self.known = None;
        }
        self.ensure_unit_namespace(view).await?;
        let parent_namespace = self.inventory.parent.namespace.clone();
        self.namespaces.defined =
            parent_namespace.as_deref().is_some_and(|ns| wanted.members.contains(&namespaces::namespace_ref(ns)));
        self.write(view, hooks, None, |existing| {
            let previous = existing.map(|p| p.contents.clone()).unwrap_or_default();
            let mut widened = previous.union(wanted);
            widened.namespaces.extend(parent_namespace.clone());
            widened
        })
        .await
    }

    /// The one read-modify-write of the ApplySet parent: reads it (unless known and current),
    /// computes the contents with `contents`, and writes them with `annotations` (`None`: the
    /// record as read from the parent, which every write must carry) only when they differ
    /// from what it holds (or the annotations do), with the resourceVersion read as a
    /// precondition; on a conflict (someone else wrote it, or it was deleted) reads it again
    /// and retries once. A missing parent is created, its namespace first when the revision
    /// defines it ([`ApplySetParent::ensure_parent_namespace`]). Returns the contents the parent holds
    /// afterwards.
    ///
    /// Errors: [`Error::Cluster`] when the parent cannot be read or written.
    pub(in crate::sync) async fn write(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        annotations: Option<&BTreeMap<String, String>>,
        contents: impl Fn(Option<&Parent>) -> Contents,
    ) -> Result<Contents> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let existing = match self.known.take() {
                Some(known) => Some(known),
                None => self.read(view, hooks).await?,
            };
            if existing.is_none() {
                self.ensure_parent_namespace(view, self.namespaces.defined).await?;
            }
            let next = contents(existing.as_ref());
            let annotations = annotations.cloned().unwrap_or_else(|| self.record_annotations(hooks));
            if let Some(parent) = existing.as_ref().filter(|p| p.contents == next && p.annotations == annotations) {
                hooks.written(None);
                self.known = Some(parent.clone());
                return Ok(next);
            }
            let fm = &self.unit.field_manager;
            match view.writes().parent(&self.inventory, &next, existing.as_ref(), fm, &annotations).await {
                Ok(parent) => {
                    hooks.written(Some(&parent.annotations));
                    self.known = Some(parent);
                    return Ok(next);
                }
                Err(crate::cluster::Error::InventoryConflict { .. }) if attempts < 2 => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Reads the parent (one GET), remembering its record and attempt.
    pub(in crate::sync) async fn read(&mut self, view: &ClusterView, hooks: &mut Hooks) -> Result<Option<Parent>> {
        let parent = self.inventory.read(view.client()).await?;
        if let Some(p) = &parent {
            self.recorded = Record::from_annotations(&p.annotations);
            self.attempt = Attempt::from_annotations(&p.annotations);
            hooks.read(&p.annotations);
            self.handled = p.annotations.get(HANDLED_AT).cloned();
        }
        Ok(parent)
    }

    /// Reads the parent (one GET) and keeps what it holds as known, so the next write carries
    /// its resourceVersion: its contents, `None` when there is no parent.
    ///
    /// Errors: [`super::super::Error::Cluster`] when the parent cannot be read.
    pub(in crate::sync) async fn read_known(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
    ) -> Result<Option<Contents>> {
        self.known = self.read(view, hooks).await?;
        Ok(self.known.as_ref().map(|p| p.contents.clone()))
    }

    /// The annotations every write of the parent carries: the last sync's record and attempt as
    /// they stand, and the unit's name ([`UNIT`]), by which an ownership conflict names the unit.
    fn record_annotations(&self, hooks: &Hooks) -> BTreeMap<String, String> {
        let mut annotations = self.recorded.as_ref().map(Record::annotations).unwrap_or_default();
        annotations.extend(self.attempt.annotations());
        annotations.insert(UNIT.to_string(), self.unit.name.clone());
        if let Some(ran) = hooks.ran() {
            annotations.insert(HOOKS_RAN.to_string(), ran.value());
        }
        if let Some(handled) = &self.handled {
            annotations.insert(HANDLED_AT.to_string(), handled.clone());
        }
        annotations
    }

    /// Narrows the parent after a clean prune to what remains: desired objects, and recorded
    /// members still live (or of a kind that could not be watched, which stay recorded). A
    /// conflict leaves the parent wide (safe) and makes the next sync read it again.
    pub(in crate::sync) async fn narrow(
        &mut self,
        view: &ClusterView,
        hooks: &Hooks,
        desired: &[Desired],
        resources: &HashMap<GroupKind, (Arc<ApiResource>, bool)>,
        widened: &Contents,
    ) -> Result<()> {
        let remaining = view.cache().snapshot();
        let wanted: BTreeSet<&ObjectRef> = desired.iter().map(|d| &d.object).collect();
        // Members of kinds not served now stay recorded unless their API group is confirmed gone
        // (its CRD deleted: the objects went with it).
        let mut unserved_groups: Vec<&str> =
            widened.members.iter().filter(|r| !resources.contains_key(&r.gk)).map(|r| r.gk.group.as_str()).collect();
        unserved_groups.sort_unstable();
        unserved_groups.dedup();
        let mut gone = BTreeSet::new();
        for group in unserved_groups {
            if crate::cluster::discovery::group_gone(view.client(), group).await {
                gone.insert(group.to_string());
            }
        }
        let parent_namespace = self.inventory.parent.namespace.clone();
        let narrowed =
            narrowed(widened, &wanted, &remaining, &|gk| resources.contains_key(gk), &gone, parent_namespace);
        if &narrowed == widened {
            return Ok(());
        }
        let previous = self.known.take();
        let record = self.record_annotations(hooks);
        let fm = &self.unit.field_manager;
        match view.writes().parent(&self.inventory, &narrowed, previous.as_ref(), fm, &record).await {
            Ok(parent) => self.known = Some(parent),
            Err(crate::cluster::Error::InventoryConflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}

/// What the parent records after a clean prune: of the `widened` members, those git wants,
/// those still live (`remaining`), and those of a kind not `served` now whose API group is not
/// known `gone` (its CRD deleted, the objects with it); the group-kinds and namespaces of what
/// remains live or recorded, and the parent's own namespace.
fn narrowed(
    widened: &Contents,
    wanted: &BTreeSet<&ObjectRef>,
    remaining: &BTreeMap<ObjectRef, LiveMeta>,
    served: &dyn Fn(&GroupKind) -> bool,
    gone: &BTreeSet<String>,
    parent_namespace: Option<Atom>,
) -> Contents {
    let members: Vec<ObjectRef> = widened
        .members
        .iter()
        .filter(|r| {
            wanted.contains(r) || remaining.contains_key(r) || (!served(&r.gk) && !gone.contains(r.gk.group.as_str()))
        })
        .cloned()
        .collect();
    let live = Contents::of(remaining.keys()).union(&Contents::of(members.iter()));
    Contents {
        group_kinds: live.group_kinds,
        namespaces: live.namespaces.into_iter().chain(parent_namespace).collect(),
        members: members.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(kind: &str, group: &str, ns: &str, name: &str) -> ObjectRef {
        ObjectRef::new(GroupKind::new(group, kind), Some(ns), name)
    }

    #[test]
    fn the_narrowed_parent_keeps_what_git_wants_what_lives_and_kinds_it_cannot_see() {
        let (wanted, pruned, live) =
            (r("ConfigMap", "", "shop", "a"), r("ConfigMap", "", "shop", "b"), r("Secret", "", "db", "s"));
        let (unserved, gone) = (r("Widget", "example.com", "shop", "w"), r("Gadget", "old.example.com", "shop", "g"));
        let widened = Contents::of([&wanted, &pruned, &live, &unserved, &gone]);
        let remaining = BTreeMap::from([(live.clone(), LiveMeta::default())]);
        let served = |gk: &GroupKind| gk.group.is_empty();
        let groups_gone = BTreeSet::from(["old.example.com".to_string()]);
        let narrowed =
            narrowed(&widened, &BTreeSet::from([&wanted]), &remaining, &served, &groups_gone, Some("gitward".into()));
        assert_eq!(narrowed.members, BTreeSet::from([wanted, live, unserved]));
        let kinds: Vec<String> = narrowed.group_kinds.iter().map(ToString::to_string).collect();
        assert_eq!(kinds, ["ConfigMap", "Secret", "Widget.example.com"]);
        let namespaces: Vec<&str> = narrowed.namespaces.iter().map(|n| n.as_str()).collect();
        assert_eq!(namespaces, ["db", "gitward", "shop"]);
    }
}
