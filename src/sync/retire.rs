//! A unit retired: it left its `[[sync_set]]` (its directory is gone from the set's listing).
//! One verb over the parts a prune needs — the cluster view, the ApplySet parent, the hooks'
//! record — and nothing of the unit's source: no mirror is opened, nothing is fetched, and the
//! unit's objects are read from its ApplySet parent, not from the CLI's status reader.
//!
//! With `prune`, the members the parent records are pruned as a sync of a revision that
//! desires nothing would prune them ([`super::prune_step::prune_and_narrow`]), under the same
//! guards: the empty-revision rule and `max_prune_fraction` refuse it unless the unit says
//! `allow_prune_all` or the set says `prune_removed_unguarded`; another unit's `adopt_from`
//! defers it; a kind whose live state cannot be read refuses it. Without, the objects stay and
//! their number is returned.

use std::collections::HashMap;
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::Result;
use super::hooks::Hooks;
use super::parent::ApplySetParent;
use super::prune_step::{self, Guards, Parts, PruneInputs, deferral};
use super::state::ClusterView;
use crate::changeset::ChangeSet;
use crate::cluster::cache::MetadataCache;
use crate::cluster::fence::Fence;
use crate::config::{ClusterConfig, SyncUnit};
use crate::object::GroupKind;
use crate::prune::PruneOptions;

/// What retiring a unit did.
#[derive(Debug)]
pub enum Retired {
    /// Its objects are kept (the set does not prune what leaves it): how many members its
    /// ApplySet parent records (0 when it has none).
    Kept {
        /// Members the parent records.
        members: usize,
    },
    /// Its members were pruned, or the prune was refused ([`ChangeSet::prune_refused`]).
    Pruned(ChangeSet),
}

/// How a unit is retired.
#[derive(Debug, Clone, Copy)]
pub struct Retiring {
    /// Prune the unit's members (`prune_removed`); else keep them and count them.
    pub prune: bool,
    /// Prune past the empty-revision rule and `max_prune_fraction` (`prune_removed_unguarded`).
    pub unguarded: bool,
}

/// Retires `unit` on the cluster of `client` (checked by `fence` under a Lease), as `how`
/// says: deletes go through the client impersonating the unit's ServiceAccount, when it has
/// one, which sends `user_agent`.
///
/// Errors: [`super::Error::Cluster`] when the parent cannot be read or narrowed, a kind cannot be
/// resolved, or the impersonating client cannot be built.
pub async fn retire(
    client: kube::Client,
    cluster: &ClusterConfig,
    unit: &SyncUnit,
    fence: &Fence,
    user_agent: &str,
    how: Retiring,
) -> Result<Retired> {
    let unit = Arc::new(unit.clone());
    let mut parent = ApplySetParent::new(Arc::clone(&unit));
    let mut hooks = Hooks::default();
    let writer = match &unit.service_account {
        Some(sa) if how.prune => {
            crate::cluster::connect_impersonating(cluster, &unit.namespace, sa, fence, user_agent).await?
        }
        _ => client.clone(),
    };
    let mut cache = MetadataCache::new(client.clone(), &parent.inventory().id);
    cache.set_field_manager(&unit.field_manager);
    cache.list_only();
    let mut view = ClusterView::new(client, writer, cache, fence.clone());
    let Some(recorded) = parent.read_known(&view, &mut hooks).await? else {
        return Ok(Retired::Kept { members: 0 });
    };
    if !how.prune {
        return Ok(Retired::Kept { members: recorded.members.len() });
    }
    let mut changes = ChangeSet::default();
    let mut resources: HashMap<GroupKind, (Arc<ApiResource>, bool)> = HashMap::new();
    for gk in &recorded.group_kinds {
        if let Some(r) = view.resolve_group_kind(gk).await? {
            resources.insert(gk.clone(), (r.resource, r.namespaced));
        }
    }
    let kinds: Vec<(Arc<ApiResource>, bool)> = resources.values().cloned().collect();
    let unreadable: Vec<String> = view
        .ensure_all(&kinds)
        .await
        .into_iter()
        .filter_map(|(gk, listed)| listed.err().map(|e| format!("{gk}: {e}")))
        .collect();
    if !unreadable.is_empty() {
        changes.prune_refused = Some(format!("the live state of {} cannot be read", unreadable.join(", ")));
        return Ok(Retired::Pruned(changes));
    }
    let options =
        PruneOptions { max_fraction: unit.max_prune_fraction, allow_all: unit.allow_prune_all || how.unguarded };
    let guards = Guards { options, deferred: deferral(&unit.name, &unit.adopted_by) };
    let inputs = PruneInputs { desired: &[], resources: &resources, members_before: view.cache().len(), partial: &[] };
    let parts = Parts { view: &mut view, parent: &mut parent, hooks: &hooks };
    prune_step::prune_and_narrow(parts, &guards, inputs, &recorded, &mut changes).await?;
    Ok(Retired::Pruned(changes))
}
