//! The self-heal: re-applies only the drifted objects of the last synced revision.

use std::time::Instant;

use super::Engine;
use crate::apply::Blocked;
use crate::changeset::{ChangeSet, DRIFT_DIFFS};
use crate::object::ObjectRef;
use crate::plan::Desired;
use crate::sync::Report;

use crate::sync::health::health_targets;

impl Engine {
    /// Takes the revision the unit's ApplySet parent records as applied (`last-revision`) as
    /// the one self-heal heals toward, when it is not the one this engine applied last:
    /// another process applied it (`gitward sync --revision` while the daemon had the unit
    /// suspended, a rollback). Reads the parent (one GET, which also refreshes the record every
    /// later parent write carries), then loads and resolves that revision without applying
    /// anything. Returns the revision taken; `None` when the record names the revision held
    /// already, or none.
    ///
    /// Errors: [`crate::sync::Error::Cluster`] when the parent cannot be read; the revision's load or
    /// resolve errors, after which self-heal has nothing to heal toward (the desired state of
    /// the revision before is dropped, never healed back to).
    pub async fn adopt_recorded(&mut self) -> super::Result<Option<crate::source::Revision>> {
        self.parent.forget(false);
        self.parent.read(&self.view, &mut self.hooks).await?;
        let Some(recorded) = self.parent.recorded().map(|r| crate::source::Revision(r.revision.clone())) else {
            return Ok(None);
        };
        if self.last.desired.as_ref().is_some_and(|(held, _)| *held == recorded) {
            return Ok(None);
        }
        let previous = self.last.desired.take();
        let defaults = self.defaults();
        let loaded = self.loader.load(self.view.client(), &recorded).await?;
        let previous = previous.as_ref().map(|(_, d)| d.as_slice()).unwrap_or_default();
        let resolved = self
            .view
            .resolve_desired(loaded.manifests, &defaults, previous)
            .await
            .map_err(|e| crate::sync::desired::hinted(e, &loaded.skipped))?;
        self.last.desired = Some((recorded.clone(), resolved.desired));
        Ok(Some(recorded))
    }

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
        let diffed = if self.view.admits() { &desired[..desired.len().min(DRIFT_DIFFS)] } else { &[] };
        let drift_diffs = self.drift_diffs(diffed).await;
        let mut changes = ChangeSet { drift_diffs, requests: 2 * diffed.len(), ..Default::default() };
        let stages = self.plan_stages(&desired, &mut changes).await.ok()?;
        let mut blocked = Blocked::default();
        for (stage, steps) in stages {
            changes.extend(self.view.apply(stage, &steps, &desired, &mut blocked, &self.options.apply).await);
        }
        self.note_adoptions(&mut changes);
        let applied_at = changes.changes_applied_at.unwrap_or_else(Instant::now);
        let health_targets = health_targets(&desired, &changes);
        let signers = self.loader.signers(&revision);
        Some(Report {
            unit: self.unit.name.clone(),
            revision,
            changes,
            skipped_files: Vec::new(),
            took: crate::sync::Timings { apply: started.elapsed(), ..Default::default() },
            sent: crate::sync::Sent { applied_at, health_targets, applied_early: 0 },
            heal: true,
            yielded: false,
            path_only: false,
            path_tree: None,
            signers,
        })
    }
}
