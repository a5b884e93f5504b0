//! The job phases of [`super::step`]: fetching (probe, lane, fetch, early apply), waiting for a
//! slot, applying (the rest of the sync, a self-heal, the record of a failure).

use super::{
    Action, Busy, Doing, Event, Failed, Health, Job, Log, Phase, Rested, State, begin_sync, fetch, keep, start, suspend,
};
use std::time::Instant;

use crate::daemon::unit::{Ran, Retry, retry};

use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::health::ready::Blocker;
use crate::source::{Revision, Touch};

/// An event while probing, waiting for the lane, fetching or applying early.
pub(super) fn fetching(state: &mut State, mut job: Job, event: Event, actions: &mut Vec<Action>) -> Phase {
    match (&job.doing, event) {
        (Doing::Probe, Event::Probed(touch)) => probed(state, job, touch, actions),
        (Doing::Lane, Event::Lane) => {
            job.held.lane = true;
            let revision = job.revision.clone().expect("a revision fetched before the lane");
            early(job, revision, actions)
        }
        (Doing::Fetch, Event::Fetched(Err(Failed))) => {
            state.fetch_failing = true;
            Phase::Fetching(fail(job, actions))
        }
        (Doing::Fetch, Event::Fetched(Ok(revision))) => {
            state.fetch_failing = false;
            fetched(state, job, revision, actions)
        }
        (Doing::Gate, Event::Gated(waiting)) => gated(state, job, waiting, actions),
        (Doing::Early, Event::Early(objects)) => early_done(job, objects, actions),
        (Doing::Fail, Event::FailRecorded) => after(state, Ran::Synced(false), None, false, actions),
        (_, Event::Trigger(Some(t))) => {
            keep(&mut state.queued, t);
            Phase::Fetching(job)
        }
        _ => Phase::Fetching(job),
    }
}

/// What the probe of a push told: a push that left the unit's path alone waits for a slot
/// (or does nothing, when it brought the revision last applied and needs a new one, or a new
/// revision whose objects are those last applied: [`path_unchanged`]); one that touched it, or
/// whose effect cannot be told, takes the lane.
fn probed(state: &mut State, mut job: Job, touch: Option<Touch>, actions: &mut Vec<Action>) -> Phase {
    match touch {
        Some(Touch { touched: false, to }) => {
            if job.trigger.needs_new_revision() && state.last_applied.as_ref() == Some(&to) {
                actions.push(Action::Log(Log::NoNewRevision { kind: job.trigger.kind, revision: to }));
                return after(state, Ran::Nothing, None, false, actions);
            }
            if let Some(from) = path_unchanged(state, &to).filter(|_| job.trigger.git_only()) {
                actions.push(Action::Log(Log::PathUnchanged { kind: job.trigger.kind, from, revision: to.clone() }));
                state.last_applied = Some(to.clone());
                state.path_only_at = Some(to);
                return after(state, Ran::Nothing, None, false, actions);
            }
            job.doing = Doing::Untouched(to);
            actions.push(Action::AcquireSlot);
            Phase::SlotWait(job)
        }
        _ => fetch(job, actions),
    }
}

/// The revision last applied, when a push to `to` that left the unit's path alone brings the
/// objects it applied: its sync applied them all from that path alone, and no retry of a
/// failure is due.
pub(super) fn path_unchanged(state: &State, to: &Revision) -> Option<Revision> {
    let from = state.last_applied.as_ref()?;
    let same = state.path_only_at.as_ref() == Some(from) && from != to && state.retry_at.is_none();
    same.then(|| from.clone())
}

/// The revision a push is probed from for the unit while it rests, when a push that leaves its
/// path alone would change nothing but the revision last applied ([`path_unchanged`]): idle
/// (not backing off, suspended or stopping), nothing queued, a git unit. The repository's
/// watch answers such a push without waking the unit ([`crate::daemon::quiet`]).
pub(in crate::daemon::unit) fn quiet(state: &State) -> Option<&Revision> {
    let from = state.last_applied.as_ref()?;
    let idle = matches!(state.phase, Phase::Idle) && !state.stopping && !state.suspended && state.queued.is_none();
    let rule = state.lane && state.retry_at.is_none() && state.path_only_at.as_ref() == Some(from);
    (idle && rule).then_some(from)
}

/// A push seen at `at` moved the branch to `to` and left the path alone while the unit rested
/// ([`Event::Taken`]): `to` is the revision last applied, as the unit's own probe would have
/// made it (logged by the watch that answered). Should the rule no longer hold, the push runs
/// as a trigger.
pub(super) fn take(state: &mut State, idle: Phase, to: Revision, at: Instant, actions: &mut Vec<Action>) -> Phase {
    if state.last_applied.as_ref() == Some(&to) {
        return idle;
    }
    if path_unchanged(state, &to).is_some() {
        state.last_applied = Some(to.clone());
        state.path_only_at = Some(to);
        return idle;
    }
    super::start(state, Job::new(Trigger::new(TriggerKind::Push, at), None, false), actions)
}

/// A push or webhook while the unit backs off from a failed fetch: the backoff starts over and
/// the push runs at once (ticks meanwhile start nothing: the retry is the next attempt).
pub(super) fn start_over(state: &mut State, t: Trigger, actions: &mut Vec<Action>) -> Phase {
    actions.push(Action::ResetBackoff);
    state.retry_at = None;
    super::start(state, Job::new(t, None, false), actions)
}

/// Drops the lane and the slot the job holds.
fn release(job: &mut Job, actions: &mut Vec<Action>) {
    if std::mem::take(&mut job.held.lane) {
        actions.push(Action::ReleaseLane);
    }
    if std::mem::take(&mut job.held.slot) {
        actions.push(Action::ReleaseSlot);
    }
}

/// The sync failed as a whole: its permits dropped, the failure recorded.
fn fail(mut job: Job, actions: &mut Vec<Action>) -> Job {
    release(&mut job, actions);
    actions.push(Action::Fail(job.trigger.clone()));
    job.doing = Doing::Fail;
    job
}

/// The fetch found `revision`: nothing to do for a trigger that needs a new revision and found
/// the one last applied; else the early apply.
fn fetched(state: &mut State, mut job: Job, revision: Revision, actions: &mut Vec<Action>) -> Phase {
    let kind = job.trigger.kind;
    if job.trigger.needs_new_revision() && state.last_applied.as_ref() == Some(&revision) {
        release(&mut job, actions);
        actions.push(Action::Log(Log::NoNewRevision { kind, revision }));
        return after(state, Ran::Nothing, None, false, actions);
    }
    job.revision = Some(revision.clone());
    if state.depends.gated && state.last_applied.as_ref() != Some(&revision) {
        job.doing = Doing::Gate;
        actions.push(Action::Gate(revision));
        return Phase::Fetching(job);
    }
    permit_then_early(state, job, revision, actions)
}

/// The revision fetched goes, once the job holds what its early apply runs in: a push of a
/// git unit waits for the lane, any other job for a slot; one that holds either goes at once.
/// The fetch before held neither, so a fetch that hangs keeps no other unit waiting.
pub(super) fn permit_then_early(state: &State, mut job: Job, revision: Revision, actions: &mut Vec<Action>) -> Phase {
    if job.held.slot || job.held.lane {
        return early(job, revision, actions);
    }
    if job.trigger.kind.is_push() && state.lane {
        job.doing = Doing::Lane;
        actions.push(Action::AcquireLane);
        return Phase::Fetching(job);
    }
    job.doing = Doing::EarlySlot;
    actions.push(Action::AcquireSlot);
    Phase::SlotWait(job)
}

/// The slot for the early apply of the revision fetched came.
fn early_in_slot(mut job: Job, actions: &mut Vec<Action>) -> Phase {
    job.held.slot = true;
    let revision = job.revision.clone().expect("a revision fetched before the slot");
    early(job, revision, actions)
}

/// The revision fetched goes: the sync is logged as triggered and applies early.
fn early(mut job: Job, revision: Revision, actions: &mut Vec<Action>) -> Phase {
    let kind = job.trigger.kind;
    actions.push(Action::Log(Log::Triggered { kind, revision: revision.clone(), lane: Some(job.held.lane) }));
    actions.push(Action::Early(revision));
    job.doing = Doing::Early;
    Phase::Fetching(job)
}

/// What the gate found for the revision fetched: with every dependency ready the sync goes
/// on (`dependencies ready` logged after a wait); else its permits are dropped and it waits
/// in [`Phase::Blocked`], logged when what it waits for changed.
fn gated(state: &mut State, mut job: Job, waiting: Vec<Blocker>, actions: &mut Vec<Action>) -> Phase {
    let revision = job.revision.clone().expect("a revision fetched before the gate");
    if waiting.is_empty() {
        if state.depends.blocked_by.take().is_some() {
            actions.push(Action::Log(Log::DependenciesReady { revision: revision.clone() }));
        }
        return permit_then_early(state, job, revision, actions);
    }
    release(&mut job, actions);
    if state.depends.blocked_by.as_ref() != Some(&waiting) {
        actions.push(Action::Log(Log::Blocked { revision, waiting: waiting.clone() }));
        state.depends.blocked_by = Some(waiting);
    }
    Phase::Blocked(job.trigger)
}

/// The early apply sent `objects`: the lane is dropped; the rest runs in the slot held, else
/// waits for one.
fn early_done(mut job: Job, objects: usize, actions: &mut Vec<Action>) -> Phase {
    job.early = objects;
    if std::mem::take(&mut job.held.lane) {
        actions.push(Action::ReleaseLane);
    }
    if job.held.slot {
        return rest(job, actions);
    }
    job.doing = Doing::RestSlot;
    actions.push(Action::AcquireSlot);
    Phase::SlotWait(job)
}

/// The rest of the sync, holding the slot.
fn rest(mut job: Job, actions: &mut Vec<Action>) -> Phase {
    job.doing = Doing::Rest;
    actions.push(Action::Rest);
    Phase::Applying(job)
}

/// An event while waiting for a slot.
pub(super) fn slot_wait(state: &mut State, mut job: Job, event: Event, actions: &mut Vec<Action>) -> Phase {
    let doing = std::mem::replace(&mut job.doing, Doing::Slot);
    match (doing, event) {
        (Doing::Slot, Event::Slot) => {
            job.held.slot = true;
            match job.heal.clone() {
                Some(objects) => {
                    job.doing = Doing::Heal;
                    actions.push(Action::Heal(job.trigger.clone(), objects));
                    Phase::Applying(job)
                }
                None => fetch(job, actions),
            }
        }
        (Doing::EarlySlot, Event::Slot) => early_in_slot(job, actions),
        (Doing::Untouched(_), Event::Slot) => {
            job.held.slot = true;
            fetch(job, actions)
        }
        (Doing::Untouched(to), Event::Trigger(Some(t))) if t.kind.is_push() => {
            actions.push(Action::Probe { from: Some(to), at: t.at });
            job.doing = Doing::Reprobe(t);
            Phase::SlotWait(job)
        }
        (Doing::Reprobe(t), Event::Probed(touch)) => match touch {
            // Left alone again: the wait goes on, for the branch where it is now.
            Some(Touch { touched: false, to }) => {
                job.doing = Doing::Untouched(to);
                Phase::SlotWait(job)
            }
            // Touched (or cannot be told): the later push ends the wait and takes the lane.
            _ => {
                actions.push(Action::ReleaseSlot);
                job.trigger.merge(t);
                begin_sync(state, job, actions)
            }
        },
        (Doing::RestSlot, Event::Slot) => {
            job.held.slot = true;
            rest(job, actions)
        }
        (Doing::RestSlot, Event::Trigger(Some(t))) if t.kind.is_push() && state.lane => {
            actions.push(Action::FetchPush(t.clone()));
            job.fetching = Some(t);
            job.doing = Doing::RestSlot;
            Phase::SlotWait(job)
        }
        (Doing::RestSlot, Event::PushFetched(found)) => take_place(state, job, found, actions),
        (Doing::NewerLane, Event::Lane) => {
            job.held.lane = true;
            let revision = job.revision.clone().expect("a newer revision");
            actions.push(Action::Log(Log::Triggered {
                kind: job.trigger.kind,
                revision: revision.clone(),
                lane: None,
            }));
            actions.push(Action::Early(revision));
            job.doing = Doing::NewerEarly;
            Phase::SlotWait(job)
        }
        (Doing::NewerEarly, Event::Early(objects)) => {
            job.early = objects;
            if std::mem::take(&mut job.held.lane) {
                actions.push(Action::ReleaseLane);
            }
            job.doing = Doing::RestSlot;
            Phase::SlotWait(job)
        }
        (doing, event) => {
            if let Event::Trigger(Some(t)) = event {
                keep(&mut state.queued, t);
            }
            job.doing = doing;
            Phase::SlotWait(job)
        }
    }
}

/// A push fetched while the sync waits for its slot after its early apply: a newer revision
/// takes the sync's place (its early apply in the lane, then the slot asked for goes to its
/// rest) unless the unit has dependencies (its sync must pass the gate); the same revision, a
/// failed fetch, or that newer one of a unit with dependencies, is queued.
fn take_place(state: &mut State, mut job: Job, found: Result<Revision, Failed>, actions: &mut Vec<Action>) -> Phase {
    job.doing = Doing::RestSlot;
    let Some(t) = job.fetching.take() else { return Phase::SlotWait(job) };
    match found {
        // A unit with dependencies sends nothing early past the gate: the newer one waits its turn.
        Ok(to) if job.revision.as_ref() != Some(&to) && !state.depends.gated => {
            let revision = job.revision.clone().expect("fetched");
            let (kind, objects) = (t.kind, job.early);
            actions.push(Action::Log(Log::Yielded { revision, to: to.clone(), kind, objects }));
            if kind != TriggerKind::Webhook {
                actions.push(Action::Observe(t.clone()));
            }
            actions.push(Action::AcquireLane);
            job.trigger.merge(t);
            job.revision = Some(to);
            job.doing = Doing::NewerLane;
        }
        _ => keep(&mut state.queued, t),
    }
    Phase::SlotWait(job)
}

/// An event while the rest of a sync or a self-heal runs, or a failure is recorded.
pub(super) fn applying(state: &mut State, mut job: Job, event: Event, actions: &mut Vec<Action>) -> Phase {
    match event {
        Event::Trigger(Some(t)) => {
            let watching = matches!(job.doing, Doing::Rest) && job.fetching.is_none() && job.next.is_none();
            if watching && t.kind.is_push() && state.lane {
                actions.push(Action::FetchPush(t.clone()));
                job.fetching = Some(t);
            } else {
                keep(&mut state.queued, t);
            }
            Phase::Applying(job)
        }
        Event::PushFetched(found) => {
            if let Some(t) = job.fetching.take() {
                match found {
                    Ok(to) if job.revision.as_ref() != Some(&to) => {
                        // Only a re-send of the revision last applied yields: a new revision's
                        // sync runs to its end, so pushes faster than syncs cannot starve it.
                        if state.last_applied == job.revision {
                            actions.push(Action::RaiseYield);
                        }
                        job.next = Some((t, to));
                    }
                    _ => keep(&mut state.queued, t),
                }
            }
            Phase::Applying(job)
        }
        Event::Rest(result) => rested(state, job, result, actions),
        Event::Healed(None) => {
            // The engine cannot heal these objects: a full sync of the same trigger instead.
            actions.push(Action::ReleaseSlot);
            job.held.slot = false;
            job.heal = None;
            begin_sync(state, job, actions)
        }
        Event::Healed(Some((ok, revision))) => {
            actions.push(Action::ReleaseSlot);
            actions.push(Action::BeginWait);
            Phase::Health(Health { revision, ran: Ran::Healed(ok), after: None, busy: Busy::Beginning })
        }
        Event::FailRecorded => after(state, Ran::Synced(false), None, false, actions),
        _ => Phase::Applying(job),
    }
}

/// The rest of the sync ended: a push still being fetched is queued; a failure is recorded; a
/// sync that yielded hands its slot to the newer revision, run at once; else the report is
/// published and the health wait begins, a newer revision found meanwhile queued.
fn rested(state: &mut State, mut job: Job, result: Result<Rested, Failed>, actions: &mut Vec<Action>) -> Phase {
    if let Some(t) = job.fetching.take() {
        actions.push(Action::AbandonPush);
        keep(&mut state.queued, t);
    }
    let Ok(rested) = result else {
        if let Some((t, _)) = job.next.take() {
            keep(&mut state.queued, t);
        }
        return Phase::Applying(fail(job, actions));
    };
    match job.next.take() {
        Some((t, to)) if rested.yielded => {
            actions.push(Action::LogObjects);
            let revision = job.revision.clone().unwrap_or_else(|| rested.revision.clone());
            actions.push(Action::Log(Log::Yielded { revision, to, kind: t.kind, objects: rested.objects }));
            // Not applied whole: the next sync runs even for a trigger that needs a new revision.
            state.last_applied = None;
            return after(state, Ran::Nothing, Some(t), job.held.slot, actions);
        }
        // The apply had ended, or this sync was of a new revision: the newer one runs next,
        // cancelling the health wait.
        Some((t, _)) => keep(&mut state.queued, t),
        None => {}
    }
    if job.held.slot {
        actions.push(Action::ReleaseSlot);
    }
    state.last_applied = Some(rested.revision.clone());
    state.path_only_at = (rested.ok && rested.path_only).then(|| rested.revision.clone());
    actions.push(Action::Publish(job.trigger));
    actions.push(Action::BeginWait);
    Phase::Health(Health { revision: rested.revision, ran: Ran::Synced(rested.ok), after: None, busy: Busy::Beginning })
}

/// The next phase after a job (and its wait) that `ran`: the retry decided ([`retry`]), the
/// drift events of its own writes dropped, and `next` (else the queued trigger) run at once,
/// holding the slot when `slot`; else idle or backing off; stopped when stopping.
pub(in crate::daemon::unit) fn after(
    state: &mut State,
    ran: Ran,
    next: Option<Trigger>,
    slot: bool,
    actions: &mut Vec<Action>,
) -> Phase {
    match retry(ran) {
        Retry::Reset => {
            actions.push(Action::ResetBackoff);
            state.retry_at = None;
        }
        Retry::Schedule => {
            actions.push(Action::ScheduleRetry);
            state.retry_at = None;
        }
        Retry::Keep => {}
    }
    actions.push(Action::DrainDrift);
    if state.suspended && !state.stopping {
        return suspend::park(state, next, slot, actions);
    }
    let next = if state.stopping { None } else { next.or_else(|| state.queued.take()) };
    match next {
        Some(t) => start(state, Job::new(t, None, slot), actions),
        None => {
            if slot {
                actions.push(Action::ReleaseSlot);
            }
            match (state.stopping, state.retry_at) {
                (true, _) => Phase::Stopped,
                (false, Some(at)) => Phase::BackingOff(at),
                (false, None) => Phase::Idle,
            }
        }
    }
}
