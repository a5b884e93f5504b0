//! The gate of a unit with `depends_on`: the records of the units it depends on, watched on
//! their ApplySet parents through the daemon's shared metadata watches of their clusters (the
//! parents of one namespace share one watch, so a dependency costs no request of its own),
//! judged by [`crate::health::ready::judge`] when a new revision asks, and a signal when one
//! of them changes. What the gate reads is what the dependencies' engines wrote, whichever
//! replica runs them, so ordering holds across replicas and under sharding.

use futures::future::select_all;
use tokio::sync::watch;

use crate::cluster::inventory::{Inventory, ParentWatch, Recorded};
use crate::cluster::registry::Registry;
use crate::config::{Dependency, SyncUnit};
use crate::health::ready::{Waiting, judge};
use crate::source::Revision;

/// The watched records of a unit's dependencies.
pub struct Gate {
    /// Each dependency, its record as last seen, and the watch that keeps it (dropped with
    /// the gate).
    deps: Vec<(Dependency, watch::Receiver<Option<Recorded>>, ParentWatch)>,
}

impl Gate {
    /// The gate of `unit`, watching each dependency's parent through its cluster's shared
    /// watches in `clusters`; `None` for a unit without `depends_on`.
    pub fn new(unit: &SyncUnit, clusters: &Registry) -> Option<Self> {
        if unit.depends_on.is_empty() {
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
        Some(Self { deps })
    }

    /// The dependencies not ready for a sync of `revision`, in `depends_on` order, each with
    /// why; empty when all are. Marks their records seen, so [`Gate::changed`] waits for the
    /// next change.
    pub(super) fn check(&mut self, revision: &Revision) -> Vec<Waiting> {
        let wanted = revision.to_string();
        let mut waiting = Vec::new();
        for (dep, record, _) in &mut self.deps {
            let seen = record.borrow_and_update();
            let wanted = dep.same_source.then_some(wanted.as_str());
            if let Some(why) = judge(seen.as_ref(), dep.ready_expr.as_deref(), wanted) {
                waiting.push(Waiting { unit: dep.unit.clone(), why });
            }
        }
        waiting
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
}
