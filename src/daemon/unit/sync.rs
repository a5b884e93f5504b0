//! One sync of a unit's task, and the two ways a push gets ahead of other work.
//!
//! - **The push lane.** A push or webhook fetches and sends its changed objects early
//!   ([`Engine::early`]) holding a permit of the small push lane shared by every unit, not a
//!   `max_concurrent_syncs` slot; only the rest of its sync ([`Engine::sync_rest`]) waits for a
//!   slot. Other triggers take a slot first, as before, and so does a push that changed no
//!   file under the unit's path ([`crate::sync::repo::Repo::push_touches`]: told from the one
//!   fetch and tree diff of the shared mirror), so that of 1,000 units following one
//!   repository, the one a push changed does not queue in the lane behind the 999 others.
//!   A chart or OCI artifact unit has no lane: its fetch is a download, with nothing to send
//!   early, and every trigger of it takes a slot.
//! - **Yielding to a newer revision.** From the end of the early apply until the sync ends, the
//!   task keeps reading its trigger channel ([`YieldWatch`]). A push or webhook is fetched at
//!   once; when it finds a revision other than the one being synced, the sync yields (in its
//!   apply, only a re-send of the revision last applied: a new revision's sync ends first). Still
//!   waiting for a slot, the newer revision takes its place in the queue: its early apply runs
//!   at once (in the lane), and the rest of its sync gets the slot (so pushes that keep coming do
//!   not send a unit to the back of the queue). In its apply, the sync sends no new request,
//!   waits for those in flight and skips prune and narrow ([`crate::apply::Yield`]); the newer
//!   revision's sync then runs at once, in the slot the yielded one held, with its own early
//!   apply, and sends everything the yielded one had not. Other
//!   triggers (and pushes that found nothing new) are kept for after the sync, as the channel's
//!   one queued sync, and so is a push whose fetch is still running when the sync ends
//!   ([`YieldWatch::abandon`]): no trigger taken off the channel is dropped. A chart or
//!   artifact unit fetches nothing during its sync: its triggers are all kept for after it.

use std::future::Future;
use std::pin::Pin;

use tracing::info;

use super::{Ran, Task};
use crate::daemon::trigger::{Trigger, TriggerKind, TriggerReceiver};
use crate::source::Revision;
use crate::sync::Report;
use crate::sync::early::EarlyApply;
use crate::sync::repo::Repo;

/// How [`Task::sync`] ended.
pub(super) enum Synced {
    /// It ran (or found nothing to do); the report when it applied (boxed: a report is ten
    /// times the size of a trigger).
    Done(Ran, Option<Box<Report>>),
    /// It yielded to a newer revision: the trigger that brought it, to run at once, and the
    /// sync slot it held, for that sync.
    Yielded(Trigger, Option<tokio::sync::OwnedSemaphorePermit>),
}

impl TriggerKind {
    /// True for the triggers that mean "someone pushed" (a local repository's ref, a webhook):
    /// their fetch and early apply take the push lane, and during another sync they are fetched
    /// at once to see whether it should yield.
    pub(crate) fn is_push(self) -> bool {
        matches!(self, TriggerKind::Push | TriggerKind::Webhook)
    }
}

impl Task {
    /// Runs one sync for `trigger`: fetch and early apply (in the push lane for a push, else
    /// holding a sync slot), then the rest holding a slot, yielding to a push that brings a newer
    /// revision meanwhile (module doc).
    pub(super) async fn sync(&mut self, trigger: &Trigger, held: Option<tokio::sync::OwnedSemaphorePermit>) -> Synced {
        let mut trigger = trigger.clone();
        let Some((lane, mut slot)) = self.lane_or_slot(&mut trigger, held).await else {
            return Synced::Done(Ran::Nothing, None);
        };
        let revision = match self.engine.fetch_since(trigger.at).await {
            Ok(r) => r,
            Err(e) => return Synced::Done(self.failed(&trigger, e).await, None),
        };
        if trigger.kind.needs_new_revision() && self.last_applied.as_ref() == Some(&revision) {
            tracing::debug!(unit = self.unit.as_str(), trigger = %trigger.kind, revision = %revision, "no new revision");
            return Synced::Done(Ran::Nothing, None);
        }
        info!(unit = self.unit.as_str(), trigger = %trigger.kind, revision = %revision, push_lane = lane.is_some(), "sync triggered");
        let early = self.engine.early(&revision).await;
        drop(lane);
        let watch = YieldWatch::new(self.engine.repo().clone(), revision.clone(), self.push_lane.is_some());
        let mut begun = Begun { trigger, revision, early, watch };
        if slot.is_none() {
            slot = self.slot_or_newer(&mut begun).await;
        }
        let Begun { trigger, revision, early, mut watch } = begun;
        // Only a re-send of the revision last applied (a resync, webhook, drift or reload) yields:
        // a sync of a new revision runs to its end, prune included, so that pushes arriving faster
        // than a whole sync cannot keep a unit from ever completing one (with yields, the load
        // test's 50 units took 59–146 s from push to a completed sync, where 41 s without).
        let resend = self.last_applied.as_ref() == Some(&revision);
        let (result, next) = self.rest_watching(early, &mut watch, resend).await;
        // A push still being fetched when the sync ended may bring a newer revision: it is
        // kept as the next sync, whose own fetch waits for (or joins) the one in flight.
        if let Some(t) = watch.abandon() {
            keep(&mut self.queued, t);
        }
        let report = match result {
            Ok(report) => report,
            Err(e) => {
                drop(slot);
                if let Some((t, _)) = next {
                    self.queued = Some(t);
                }
                return Synced::Done(self.failed(&trigger, e).await, None);
            }
        };
        match next {
            Some((next, to)) if report.yielded => {
                crate::report::log_objects(&report);
                let answered = report.changes.entries.len();
                return self.yielded(&revision, &to, next, answered, slot);
            }
            // The apply had ended, or this sync was of a new revision: the newer revision runs
            // next, cancelling the health wait.
            Some((next, _)) => self.queued = Some(next),
            None => {}
        }
        drop(slot);
        let ok = !report.changes.has_failures();
        // Set even on failure: the backoff retry re-syncs a failed revision, so a poll
        // that finds the same revision has nothing to add.
        self.last_applied = Some(report.revision.clone());
        self.report_fights(&report);
        self.publish(&trigger, &report);
        super::release_freed_memory();
        Synced::Done(Ran::Synced(ok), Some(Box::new(report)))
    }

    /// What `trigger`'s sync runs in: the push lane for a push that touched the unit's path, else
    /// a sync slot (`held`: one kept from a yielded sync). A push that changed nothing under the
    /// path waits for a slot, and a later push that does change it ends that wait and takes the
    /// lane (it replaces `trigger`). `None`: a push that brings no new revision, nothing to do.
    async fn lane_or_slot(
        &mut self,
        trigger: &mut Trigger,
        mut held: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Option<(Option<tokio::sync::OwnedSemaphorePermit>, Option<tokio::sync::OwnedSemaphorePermit>)> {
        // A push that changed nothing under this unit's path (another unit's, in a shared
        // repository) has nothing to send early: it waits for a slot as other triggers do, and
        // leaves the lane to the units it changed; a later push that does change the path ends
        // that wait and takes the lane.
        let lane = loop {
            if !trigger.kind.is_push() || held.is_some() || self.push_lane.is_none() {
                break None;
            }
            let probe = self.engine.repo().push_touches(self.last_applied.as_ref(), trigger.at).await;
            let Some(to) = probe.filter(|p| !p.touched).map(|p| p.to) else {
                break self.lane().await;
            };
            if trigger.kind.needs_new_revision() && self.last_applied.as_ref() == Some(&to) {
                tracing::debug!(unit = self.unit.as_str(), trigger = %trigger.kind, revision = %to, "no new revision");
                return None;
            }
            match self.slot_unless_pushed(to).await {
                Ok(Some(slot)) => held = Some(slot),
                // The slots are closed (the daemon stops): go on as without one.
                Ok(None) => break None,
                Err(next) => *trigger = next,
            }
        };
        let slot = match (held, &lane) {
            (Some(held), _) => Some(held),
            (None, Some(_)) => None,
            (None, None) => self.slot().await,
        };
        Some((lane, slot))
    }

    /// Waits for a sync slot for the sync `begun`; meanwhile a newer revision takes its place in
    /// the queue: its early apply runs at once, in the lane, and the rest of its sync gets the
    /// slot. `None` when the slots are closed.
    async fn slot_or_newer(&mut self, begun: &mut Begun) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let fetch_pushes = self.push_lane.is_some();
        let waiting = self.sync_slots.clone().acquire_owned();
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                s = &mut waiting => return s.ok(),
                (next, to) = begun.watch.next(&mut self.triggers, &mut self.queued) => {
                    self.log_yield(&begun.revision, &to, &next, begun.early.changes().entries.len());
                    if next.kind != TriggerKind::Webhook {
                        self.metrics.observe_trigger(&self.unit, next.kind);
                    }
                    let _lane = self.lane().await;
                    info!(unit = self.unit.as_str(), trigger = %next.kind, revision = %to, "sync triggered");
                    begun.early = self.engine.early(&to).await;
                    begun.watch = YieldWatch::new(self.engine.repo().clone(), to.clone(), fetch_pushes);
                    (begun.trigger, begun.revision) = (next, to);
                }
            }
        }
    }

    /// The rest of the sync that `early` began, reading the trigger channel meanwhile
    /// (`watch`): the first push that brings a newer revision is returned with the result and,
    /// for a re-send (`resend`), raises the engine's yield signal.
    async fn rest_watching(
        &mut self,
        early: EarlyApply,
        watch: &mut YieldWatch,
        resend: bool,
    ) -> (crate::sync::Result<Report>, Option<(Trigger, Revision)>) {
        let signal = self.engine.yield_signal();
        let rest = self.engine.sync_rest(early);
        tokio::pin!(rest);
        let mut next = None;
        loop {
            tokio::select! {
                r = &mut rest => return (r, next),
                found = watch.next(&mut self.triggers, &mut self.queued), if next.is_none() => {
                    if resend {
                        signal.raise();
                    }
                    next = Some(found);
                }
            }
        }
    }

    /// Waits for a sync slot for a push that left this unit's path alone (the branch now at
    /// `to`), reading the trigger channel meanwhile: a push or webhook that changed the path,
    /// or whose effect cannot be told from the mirror's last fetch
    /// ([`crate::sync::repo::Repo::push_touches`]), ends the wait as `Err` with that trigger,
    /// to be run in the push lane; one that left the path alone again keeps waiting; other
    /// triggers are kept as the queued one. `Ok(None)` when the slots are closed.
    async fn slot_unless_pushed(
        &mut self,
        mut to: Revision,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, Trigger> {
        let waiting = self.sync_slots.clone().acquire_owned();
        tokio::pin!(waiting);
        let mut closed = false;
        loop {
            tokio::select! {
                slot = &mut waiting => return Ok(slot.ok()),
                t = self.triggers.recv(), if !closed => match t {
                    None => closed = true,
                    Some(t) if t.kind.is_push() => {
                        match self.engine.repo().push_touches(Some(&to), t.at).await {
                            Some(probe) if !probe.touched => to = probe.to,
                            _ => return Err(t),
                        }
                    }
                    Some(t) => keep(&mut self.queued, t),
                },
            }
        }
    }

    /// A permit of the push lane, held until dropped; `None` for a unit that has no lane (a
    /// chart or artifact unit) or once the daemon closed it.
    async fn lane(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.push_lane.clone()?.acquire_owned().await.ok()
    }

    /// Logs the yield of the sync of `revision` to `to`, which `next` brought; `answered`: the
    /// objects of it whose requests were answered (field `objects_sent`). The yielded revision is not applied whole, so the next sync runs even for
    /// a trigger that syncs only new revisions.
    fn yielded(
        &mut self,
        revision: &Revision,
        to: &Revision,
        next: Trigger,
        answered: usize,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Synced {
        self.log_yield(revision, to, &next, answered);
        self.last_applied = None;
        Synced::Yielded(next, slot)
    }

    /// The `sync yielded to a newer revision` event (fields `revision`, `to`, `trigger`,
    /// `objects_sent`).
    fn log_yield(&self, revision: &Revision, to: &Revision, next: &Trigger, answered: usize) {
        info!(
            unit = self.unit.as_str(),
            revision = %revision,
            to = %to,
            trigger = %next.kind,
            objects_sent = answered,
            "sync yielded to a newer revision"
        );
    }
}

/// A sync between its early apply and the rest: what a newer push replaces while it waits for
/// a slot.
struct Begun {
    trigger: Trigger,
    revision: Revision,
    early: EarlyApply,
    watch: YieldWatch,
}

/// A fetch started for a push seen during a sync.
type Fetching = Pin<Box<dyn Future<Output = crate::sync::Result<Revision>> + Send>>;

/// Keeps `t` as the task's one queued sync: as the queued trigger when there is none, else
/// coalesced into it (its kind stays, as in the channel) with the later of the two instants, so
/// that the queued sync's fetch cannot be one that started before `t`'s push
/// ([`Repo::fetch_since`]).
fn keep(queued: &mut Option<Trigger>, t: Trigger) {
    match queued {
        None => *queued = Some(t),
        Some(q) => q.at = q.at.max(t.at),
    }
}

/// Reads the trigger channel while a sync runs, for a push that brings a newer revision.
struct YieldWatch {
    /// A handle on the unit's mirror (clones share it).
    repo: Repo,
    /// The revision being synced.
    syncing: Revision,
    /// Whether a push or webhook is fetched at once: false for a unit whose revision is not a
    /// git commit (a chart or an OCI artifact), whose triggers wait for the sync's end.
    fetch_pushes: bool,
    /// The push being looked at and its fetch; kept here, so that [`YieldWatch::next`] can be
    /// cancelled and called again without losing it, and so that a sync that ends first keeps
    /// the trigger ([`YieldWatch::abandon`]).
    fetching: Option<(Trigger, Fetching)>,
    /// The channel closed.
    closed: bool,
}

impl YieldWatch {
    fn new(repo: Repo, syncing: Revision, fetch_pushes: bool) -> Self {
        Self { repo, syncing, fetch_pushes, fetching: None, closed: false }
    }

    /// Resolves with a push or webhook whose fetch found a revision other than the one being
    /// synced, and that revision. The other triggers go to `queued` ([`keep`]), and so does a
    /// push that found nothing new. Cancel-safe.
    async fn next(&mut self, triggers: &mut TriggerReceiver, queued: &mut Option<Trigger>) -> (Trigger, Revision) {
        loop {
            let fetching = self.fetching.is_some();
            tokio::select! {
                t = triggers.recv(), if !self.closed && !fetching => match t {
                    None => self.closed = true,
                    Some(t) if t.kind.is_push() && self.fetch_pushes => {
                        let (repo, at) = (self.repo.clone(), t.at);
                        self.fetching = Some((t, Box::pin(async move { repo.fetch_since(at).await })));
                    }
                    Some(t) => keep(queued, t),
                },
                fetched = async { self.fetching.as_mut().expect("guarded").1.as_mut().await }, if fetching => {
                    let (t, _) = self.fetching.take().expect("guarded");
                    match fetched {
                        Ok(to) if to != self.syncing => return (t, to),
                        // Nothing new (or the fetch failed): the trigger runs after the sync.
                        _ => keep(queued, t),
                    }
                },
                else => std::future::pending::<()>().await,
            }
        }
    }

    /// Ends the watch at the end of the sync: the trigger of a push whose fetch is still
    /// running, to be kept as the next sync (its fetch may bring a newer revision; dropped
    /// here, it would wait for the next poll). The fetch itself is not waited for.
    fn abandon(self) -> Option<Trigger> {
        self.fetching.map(|(t, _)| t)
    }
}
