//! The engine's side of one sync, and the two ways a push gets ahead of other work (decided by
//! `machine`, run by `driver`).
//!
//! - **The push lane.** A push or webhook fetches (holding only a permit of its remote host,
//!   none for a local repository), then sends its changed objects early ([`Engine::early`])
//!   holding a permit of the small push lane shared by every unit, not a
//!   `max_concurrent_syncs` slot; only the rest of its sync ([`Engine::sync_rest`]) waits for a
//!   slot. Other triggers fetch the same way and then take a slot, and a push that changed no file under the
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
use tracing::{info, warn};

use super::Ctx;
use crate::cluster::drift::Drift;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::object::ObjectRef;
use crate::observe::Observer;
use crate::source::Revision;
use crate::sync::Cause;
use crate::sync::Report;

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

    /// A sync that failed as a whole: the engine records it ([`crate::sync::Engine::fail`])
    /// and the observers are told. `kept`: the revision last applied, named when a revision is
    /// refused; `retry_at`: when the unit's retry is due, recorded with the failure.
    pub(super) async fn failed(
        &mut self,
        trigger: &Trigger,
        e: crate::sync::Error,
        kept: Option<Revision>,
        retry_at: std::time::SystemTime,
    ) {
        let outcome = self.engine.fail(Cause::from(trigger), e, kept, Some(retry_at)).await;
        self.observers.finished(&outcome);
    }

    /// Tells the observers that `report`'s objects were sent (logs, `trigger applied`,
    /// metrics), and remembers `trigger` as what asked for the sync whose end follows. The
    /// members counted are those the parent records ([`crate::sync::Engine::recorded_members`];
    /// the cache's, before it was read).
    pub(super) fn publish(&mut self, trigger: &Trigger, report: &Report) {
        self.cause = Cause::from(trigger);
        let tracked = self.engine.recorded_members().unwrap_or_else(|| self.engine.cache().len());
        self.observers.applied(&self.cause, report, tracked);
    }
}
