//! The kinds a sync watches and the stages it plans: a watch (or list) of every kind the
//! revision and the inventory hold, and the plan against the cache, less what another ApplySet
//! owns ([`crate::sync::ownership`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::Engine;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::Contents;
use crate::object::GroupKind;
use crate::plan::{self, Desired, Stage, Step};
use crate::sync::Result;
use crate::sync::ownership::{Claimant, note_taken};

impl Engine {
    /// Starts (or keeps) a metadata watch for every group-kind in the desired set and the
    /// inventory; returns the resource of each that the server still serves and can be
    /// watched, and apart from those the kinds whose first list failed (403, or not within
    /// the cache timeout) with the reason.
    ///
    /// Errors: [`Error::Cluster`] when discovery fails.
    pub(super) async fn watch_kinds(
        &mut self,
        desired: &[Desired],
        contents: &Contents,
    ) -> Result<(HashMap<GroupKind, (Arc<ApiResource>, bool)>, BTreeMap<GroupKind, String>)> {
        let mut resources: HashMap<GroupKind, (Arc<ApiResource>, bool)> = HashMap::new();
        for d in desired {
            resources.entry(d.object.gk.clone()).or_insert_with(|| (d.resource.clone(), d.object.namespace.is_some()));
        }
        for gk in &contents.group_kinds {
            if resources.contains_key(gk) {
                continue;
            }
            if let Some(r) = self.view.resolve_group_kind(gk).await? {
                resources.insert(gk.clone(), (r.resource, r.namespaced));
            }
        }
        self.view.cache_mut().retain_kinds(|gk| resources.contains_key(gk));
        let mut unwatchable = BTreeMap::new();
        let kinds: Vec<(Arc<ApiResource>, bool)> = resources.values().cloned().collect();
        let keys: Vec<GroupKind> = resources.keys().cloned().collect();
        // All first lists at once: ten new kinds cost one round trip, not ten in a row.
        for (gk, (_, ready)) in keys.into_iter().zip(self.view.ensure_all(&kinds).await) {
            match ready {
                Ok(()) => {}
                Err(e @ crate::cluster::Error::CacheFailed { .. }) => {
                    unwatchable.insert(gk, e.to_string());
                }
                Err(e) => return Err(e.into()),
            }
        }
        resources.retain(|gk, _| !unwatchable.contains_key(gk));
        Ok((resources, unwatchable))
    }

    pub(super) async fn plan_stages(
        &mut self,
        desired: &[Desired],
        changes: &mut ChangeSet,
    ) -> Result<BTreeMap<Stage, Vec<Step>>> {
        self.plan_stages_from(desired, 0, changes).await
    }

    /// Plans `desired[start..]`, refusing objects that carry another ApplySet's label unless
    /// `adopt_from` names their owner ([`crate::sync::state::ClusterView::foreign_members`]); those it may take over are
    /// remembered for `update` mode's adoption check and the change-set note.
    pub(super) async fn plan_stages_from(
        &mut self,
        desired: &[Desired],
        start: usize,
        changes: &mut ChangeSet,
    ) -> Result<BTreeMap<Stage, Vec<Step>>> {
        let live = self.view.cache().snapshot();
        let owner = Claimant { applyset_id: &self.parent.inventory().id, adopt_from: &self.unit.adopt_from };
        let foreign = self.view.foreign_members(owner, &desired[start..], &live, changes).await;
        self.options.apply.adoptable.extend(foreign.adoptable_ids);
        self.last.adoptions.extend(foreign.adopted);
        let mut p = plan::plan(&desired[start..], &live, &foreign.refused);
        for (index, reason) in p.refused.drain(..) {
            let d = &desired[start + index];
            changes.push(d.object.clone(), Action::Failed, Some(format!("{}: {reason}", d.origin)));
        }
        Ok(p.stages
            .into_iter()
            .map(|(stage, steps)| {
                let steps = steps.into_iter().map(|s| Step { index: s.index + start, ..s }).collect();
                (stage, steps)
            })
            .collect())
    }

    /// Adds the notes of what this apply took over and reports the Namespaces it made bare
    /// ([`note_taken`]).
    pub(super) fn note_adoptions(&mut self, changes: &mut ChangeSet) {
        note_taken(changes, self.parent.take_made_bare(), std::mem::take(&mut self.last.adoptions));
    }
}
