//! The engine's side of one sync, and the two ways a push gets ahead of other work (decided by
//! `machine`, run by `driver`).
//!
//! - **The push lane.** A push or webhook fetches and sends its changed objects early
//!   ([`Engine::early`]) holding a permit of the small push lane shared by every unit, not a
//!   `max_concurrent_syncs` slot; only the rest of its sync ([`Engine::sync_rest`]) waits for a
//!   slot. Other triggers take a slot first, and so does a push that changed no file under the
//!   unit's path ([`crate::sync::repo::Repo::push_touches`]: told from the one fetch and tree
//!   diff of the shared mirror), so that of 1,000 units following one repository, the one a
//!   push changed does not queue in the lane behind the 999 others; a later push that changes
//!   the path ends that wait and takes the lane. A chart or OCI artifact unit has no lane: its
//!   fetch is a download, with nothing to send early, and every trigger of it takes a slot.
//! - **Yielding to a newer revision.** From the end of the early apply until the sync ends, the
//!   task keeps reading its trigger channel. A push or webhook is fetched at once (through a
//!   clone of the [`crate::sync::repo::Repo`] handle: the engine is the sync's); when it finds a
//!   revision other than the one being synced, the sync yields (in its apply, only a re-send of
//!   the revision last applied: a new revision's sync ends first). Still waiting for a slot,
//!   the newer revision takes its place in the queue: its early apply runs at once (in the
//!   lane), and the rest of its sync gets the slot (so pushes that keep coming do not send a
//!   unit to the back of the queue). In its apply, the sync sends no new request, waits for
//!   those in flight and skips prune and narrow ([`crate::apply::Yield`]); the newer revision's
//!   sync then runs at once, in the slot the yielded one held, with its own early apply, and
//!   sends everything the yielded one had not. Other triggers (and pushes that found nothing
//!   new) are kept for after the sync, as the task's one queued trigger, and so is a push whose
//!   fetch is still running when the sync ends: no trigger taken off the channel is dropped. A
//!   chart or artifact unit fetches nothing during its sync: its triggers are all kept for
//!   after it.

use std::collections::BTreeSet;

use tokio::time::Instant;
use tracing::{error, info, warn};

use super::Ctx;
use crate::cluster::drift::Drift;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::object::ObjectRef;
use crate::report;
use crate::source::Revision;
use crate::sync::Report;
use crate::telemetry;

impl TriggerKind {
    /// True for the triggers that mean "someone pushed" (a local repository's ref, a webhook):
    /// their fetch and early apply take the push lane, and during another sync they are fetched
    /// at once to see whether it should yield.
    pub(crate) fn is_push(self) -> bool {
        matches!(self, TriggerKind::Push | TriggerKind::Webhook)
    }
}

impl Ctx {
    /// Hands the drift events that are not gitward's own writes to the self-heal schedule.
    pub(super) fn note_drift(&mut self, events: Vec<Drift>) {
        let now = Instant::now();
        let unit = self.unit.as_str();
        for d in &events {
            let own = self.engine.cache().is_own(d);
            tracing::debug!(unit, object = %d.object, resource_version = %d.resource_version, own, "drift event");
            if !own {
                self.heal.drifted(d, now);
            }
        }
    }

    /// Re-applies only the drifted `objects` ([`crate::sync::Engine::heal`]), with whether that
    /// succeeded and the report (for the health wait); `None` when the engine cannot (no sync
    /// yet, or git no longer holds them): a full sync runs instead.
    pub(super) async fn heal_objects(
        &mut self,
        trigger: &Trigger,
        objects: &BTreeSet<ObjectRef>,
    ) -> Option<(bool, Report)> {
        info!(unit = self.unit.as_str(), trigger = %trigger.kind, objects = objects.len(), "self-heal of drifted objects");
        self.heal.healed(objects, Instant::now());
        let report = self.engine.heal(objects).await?;
        let ok = !report.changes.has_failures();
        self.report_fights(&report);
        self.publish(trigger, &report);
        Some((ok, report))
    }

    /// Counts corrections and warns, once per object, about a field fight.
    pub(super) fn report_fights(&mut self, report: &Report) {
        for fight in self.heal.corrected(&report.changes.entries, Instant::now()) {
            let manager = fight.manager.as_deref().unwrap_or("unknown");
            warn!(
                unit = self.unit.as_str(),
                object = %fight.object,
                manager,
                corrections = fight.corrections,
                "field fight: another field manager keeps changing what git declares; self-heal of it backs off"
            );
        }
    }

    /// A sync that failed as a whole: recorded on the ApplySet parent (`gitward.dev/last-error`;
    /// written only when it changes; a record that cannot be written — the cluster does not
    /// answer either — is logged at debug), logged, counted, and the unit's status set failed.
    /// `kept`: the revision last applied, named when a revision is refused.
    pub(super) async fn failed(&mut self, trigger: &Trigger, e: crate::sync::Error, kept: Option<Revision>) {
        let unit = self.unit.as_str();
        if let Err(r) = self.engine.record_failure(&e).await {
            tracing::debug!(unit, error = %telemetry::error_chain(&r), "could not record the error on the inventory");
        }
        if let crate::sync::Error::Source(crate::source::Error::Unverified {
            revision, failure, signer, reason, ..
        }) = &e
        {
            let kept = kept.map(|r| r.to_string()).unwrap_or_default();
            let signer = signer.as_deref().unwrap_or_default();
            let reason_label = failure.as_str();
            error!(unit, revision = %revision, failure = reason_label, signer, reason, kept, "revision refused: not signed by a trusted key");
            self.metrics.observe_refused(unit, *failure);
        }
        let error = telemetry::unit_error(unit, &e);
        error!(unit, trigger = %trigger.kind, error = %error, "sync failed");
        if trigger.kind.is_push() {
            // The push's or webhook's outcome, as `trigger applied` tells a clean one.
            warn!(unit, trigger = %trigger.kind, error = %error, "trigger failed");
        }
        self.metrics.observe_error(unit, &e);
        let mut status = self.status.snapshot().remove(unit).unwrap_or_default();
        if !crate::daemon::decide::keeps_readiness(&e) {
            status.last_sync_ok = Some(false);
        }
        let revision = self.engine.attempted().map(|r| format!("revision {}: ", r.short())).unwrap_or_default();
        status.last_error = Some(format!("{revision}{error}"));
        self.status.set(unit, status);
    }

    /// Logs the objects of `report`, says how a push or webhook ended (`trigger applied` with
    /// `trigger_to_applied_ms`, else `trigger failed`) and counts the sync.
    pub(super) fn publish(&mut self, trigger: &Trigger, report: &Report) {
        if self.warned.as_ref() != Some(&report.revision) && !report.heal {
            report::warn_kustomizations(report);
            self.warned = Some(report.revision.clone());
        }
        report::log_objects(report);
        if trigger.kind.is_push() {
            let unit = self.unit.as_str();
            let c = report.changes.counts();
            let not_applied = c.failed + c.skipped + c.conflict;
            if not_applied == 0 {
                let ms = report.applied_at.saturating_duration_since(trigger.at).as_millis() as u64;
                info!(unit, trigger = %trigger.kind, revision = %report.revision, trigger_to_applied_ms = ms, "trigger applied");
            } else {
                // Not `trigger applied`: the revision is not applied whole, and the time to the
                // last object sent is no time to a change reaching the cluster.
                warn!(unit, trigger = %trigger.kind, revision = %report.revision, failed = c.failed, skipped = c.skipped, conflict = c.conflict, "trigger failed");
            }
        }
        let tracked = self.engine.cache().len();
        self.metrics.observe_sync(report, tracked);
    }
}
