//! The self-heal: re-applies only the drifted objects of the last synced revision.

use std::time::{Duration, Instant};

use super::{Engine, Report};
use crate::apply::{self, Blocked};
use crate::changeset::{ChangeSet, DRIFT_DIFFS};
use crate::object::ObjectRef;
use crate::plan::Desired;

use super::health::health_targets;

impl Engine {
    /// Re-applies only `objects` of the last synced revision (a drift trigger, DESIGN.md
    /// decision 9): planned from the cache, applied stage by stage; no fetch, no inventory
    /// write, no prune. What it is about to change of the first objects is kept as diffs
    /// ([`ChangeSet::drift_diffs`], two requests per object before the apply) while the unit's
    /// fence admits writes: a replica past its Lease neither reads for diffs nor dry-runs, and
    /// its applies fail as [`crate::cluster::fence::Fenced`]. `None` before the first sync, or
    /// when git holds none of `objects`.
    pub async fn heal(&mut self, objects: &std::collections::BTreeSet<ObjectRef>) -> Option<Report> {
        let started = Instant::now();
        self.options.apply.yield_to.clear();
        let (revision, last) = self.last.desired.as_ref()?;
        let desired: Vec<Desired> = last.iter().filter(|d| objects.contains(&d.object)).cloned().collect();
        let revision = revision.clone();
        if desired.is_empty() {
            return None;
        }
        let diffed = if self.live.fence.admits() { &desired[..desired.len().min(DRIFT_DIFFS)] } else { &[] };
        let drift_diffs = self.drift_diffs(diffed).await;
        let mut changes = ChangeSet { drift_diffs, requests: 2 * diffed.len(), ..Default::default() };
        let stages = self.plan_stages(&desired, &mut changes).await.ok()?;
        let mut blocked = Blocked::default();
        for (stage, steps) in stages {
            changes.extend(
                apply::apply_stage(
                    &self.live.writer,
                    stage,
                    &steps,
                    &desired,
                    &self.live.cache,
                    &mut blocked,
                    &self.options.apply,
                )
                .await,
            );
        }
        self.note_adoptions(&mut changes);
        let applied_at = changes.changes_applied_at.unwrap_or_else(Instant::now);
        let health_targets = health_targets(&desired, &changes);
        Some(Report {
            unit: self.unit.name.clone(),
            revision,
            changes,
            skipped_files: Vec::new(),
            took: crate::sync::Took { total: started.elapsed(), render: Duration::ZERO },
            sent: crate::sync::Sent { applied_at, health_targets, applied_early: 0 },
            heal: true,
            yielded: false,
            path_only: false,
            path_tree: None,
        })
    }
}
