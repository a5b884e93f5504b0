//! The gate of a unit with `depends_on`: the records of the units it depends on, watched on
//! their ApplySet parents through the daemon's shared metadata watches of their clusters (the
//! parents of one namespace share one watch, so a dependency costs no request of its own),
//! judged by [`crate::health::ready::judge`] when a new revision asks, and a signal when one
//! of them changes. What the gate reads is what the dependencies' engines wrote, whichever
//! replica runs them, so ordering holds across replicas and under sharding.
//!
//! A dependency on the same repository and ref that records another revision than the one
//! asked for is judged with the tree at its path in that revision (read from the unit's own
//! mirror, which holds it: the unit just fetched it): when it is the tree the dependency
//! records, the revision brings the objects it applied, and the unit goes on at once. A push
//! that touched only the unit's path thus never waits for a dependency that had nothing to do.

use futures::future::select_all;
use tokio::sync::watch;

use crate::cluster::inventory::{Inventory, ParentWatch, Recorded};
use crate::cluster::registry::Registry;
use crate::config::{Dependency, SyncUnit};
use crate::health::ready::{Blocker, Unmet, Wanted, judge};
use crate::health::record::{LAST_PATH_TREE, LAST_REVISION};
use crate::source::Revision;
use crate::sync::repo::Repo;

/// The watched records of a unit's dependencies.
pub struct Gate {
    /// Each dependency, its record as last seen, and the watch that keeps it (dropped with
    /// the gate).
    deps: Vec<(Dependency, watch::Receiver<Option<Recorded>>, ParentWatch)>,
    /// The units a set could make that it depends on and no set has made yet
    /// ([`SyncUnit::depends_on_unmade`]): never ready (the unit is started again when a set
    /// makes one, its config then naming it in `depends_on`).
    unmade: Vec<String>,
}

impl Gate {
    /// The gate of `unit`, watching each dependency's parent through its cluster's shared
    /// watches in `clusters`; `None` for a unit without `depends_on`.
    pub fn new(unit: &SyncUnit, clusters: &Registry) -> Option<Self> {
        if unit.depends_on.is_empty() && unit.depends_on_unmade.is_empty() {
            return None;
        }
        let deps = unit
            .depends_on
            .iter()
            .filter_map(|dep| {
                let watches = clusters.watches(&dep.cluster)?;
                let watch = Inventory::new(&dep.inventory).watch(watches);
                Some((dep.clone(), watch.record(), watch))
            })
            .collect();
        Some(Self { deps, unmade: unit.depends_on_unmade.clone() })
    }

    /// Resolves when a dependency's record changed since it was last judged; never when none
    /// can change (every watch ended).
    pub(super) async fn changed(&mut self) {
        let changes: Vec<_> = self.deps.iter_mut().map(|(_, record, _)| Box::pin(record.changed())).collect();
        if changes.is_empty() {
            return std::future::pending().await;
        }
        if let (Err(_), _, _) = select_all(changes).await {
            std::future::pending::<()>().await;
        }
    }

    /// The dependencies' records as they are now, to judge with [`Seen::check`]. Marks them
    /// seen, so [`Gate::changed`] waits for the next change.
    pub(super) fn seen(&mut self) -> Seen {
        let records = self.deps.iter_mut().map(|(dep, record, _)| (dep.clone(), record.borrow_and_update().clone()));
        Seen { records: records.collect(), unmade: self.unmade.clone() }
    }
}

/// The dependencies' records as the gate saw them, each with its dependency; and the units
/// not made yet.
pub(super) struct Seen {
    records: Vec<(Dependency, Option<Recorded>)>,
    unmade: Vec<String>,
}

impl Seen {
    /// The dependencies not ready for a sync of `revision`, in `depends_on` order, each with
    /// why; empty when all are. For a dependency on the same source that records another
    /// revision and the tree of its path there, the tree at its path in `revision` is read
    /// from `repo` (the unit's own mirror), off the runtime.
    pub(super) async fn check(self, repo: &Repo, revision: &Revision) -> Vec<Blocker> {
        let wanted = revision.to_string();
        let mut waiting = Vec::new();
        for (dep, seen) in self.records {
            let other = |r: &Recorded| r.contains_key(LAST_PATH_TREE) && r.get(LAST_REVISION) != Some(&wanted);
            let path_tree = match &seen {
                Some(r) if dep.same_source && other(r) => repo.path_tree(revision, dep.path.as_str()).await,
                _ => None,
            };
            let wanted = Wanted { revision: wanted.as_str(), path_tree: path_tree.as_deref() };
            if let Some(why) = judge(seen.as_ref(), dep.ready_expr.as_deref(), dep.same_source.then_some(wanted)) {
                waiting.push(Blocker { unit: dep.unit, why });
            }
        }
        waiting.extend(self.unmade.into_iter().map(|unit| Blocker { unit, why: Unmet::NotSynced }));
        waiting
    }
}
