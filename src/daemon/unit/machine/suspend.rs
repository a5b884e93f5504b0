//! A suspended unit (`gitward suspend`, `suspend = true`): it starts no job. Its triggers
//! (webhooks, polls, resyncs, reconcile requests) are counted and logged as not acted on
//! ([`Action::Ignored`]) and kept as the one queued trigger, merged ([`super::keep`]), which
//! runs once when the unit is resumed, as a sync even of the revision last applied
//! ([`TriggerKind::Resume`]). Drift is not listened to while suspended: its events wait in the unit's drift
//! queue (which keeps the latest of each object) and are healed after the resume. A job that
//! runs when the unit is suspended is not cut short — an apply stopped half-way would leave a
//! revision half applied — but takes no new trigger; once it (and its health wait) ends, the
//! unit parks in [`Phase::Suspended`] ([`park`]).

use super::{Action, Event, Job, Listen, Phase, State, Trigger, TriggerKind, keep, start};

/// [`Event::Suspend`] or [`Event::Resume`] in any phase but stopped.
pub(super) fn toggle(mut state: State, event: Event) -> (State, Vec<Action>) {
    let mut actions = Vec::new();
    let suspend = matches!(event, Event::Suspend);
    state.suspended = suspend;
    let phase = std::mem::replace(&mut state.phase, Phase::Stopped);
    state.phase = match phase {
        Phase::Idle if suspend => Phase::Suspended,
        Phase::BackingOff(at) if suspend => {
            state.retry_at = Some(at);
            Phase::Suspended
        }
        Phase::Blocked(t) if suspend => {
            keep(&mut state.queued, t);
            Phase::Suspended
        }
        Phase::Suspended if !suspend => {
            actions.push(Action::Adopt);
            Phase::Adopting
        }
        phase => phase,
    };
    (state, actions)
}

/// Resumed, the recorded revision taken ([`adopting`]): the trigger kept while suspended runs now (counted then, as any trigger that
/// starts a job), with a [`TriggerKind::Resume`] merged into it, so it syncs even the revision
/// last applied: whatever the `from` objects became while the unit was suspended is applied.
/// Without one the unit is idle, or backing off towards a retry still due.
fn resume(state: &mut State, actions: &mut Vec<Action>) -> Phase {
    match state.queued.take() {
        Some(mut t) => {
            t.merge(Trigger::new(TriggerKind::Resume, t.at));
            start(state, Job::new(t, None, false), actions)
        }
        None => state.retry_at.map_or(Phase::Idle, Phase::BackingOff),
    }
}

/// An event while the revision the parent records is taken ([`Phase::Adopting`]): once
/// [`Event::Adopted`] names one, it is the revision last applied — a revision applied by hand
/// while suspended (`gitward sync --revision`, a rollback) is what self-heal heals toward and
/// what a poll compares with, and a push is not judged path-unchanged against the revision
/// before it — then the unit resumes ([`resume`]), or parks again when suspended meanwhile.
/// A trigger meanwhile is kept.
pub(super) fn adopting(state: &mut State, event: Event, actions: &mut Vec<Action>) -> Phase {
    match event {
        Event::Adopted(revision) => {
            if let Some(revision) = revision {
                state.last_applied = Some(revision);
                state.path_only_at = None;
            }
            if state.stopping {
                Phase::Stopped
            } else if state.suspended {
                Phase::Suspended
            } else {
                resume(state, actions)
            }
        }
        Event::Trigger(Some(t)) | Event::Tick(t) => {
            keep(&mut state.queued, t);
            Phase::Adopting
        }
        _ => Phase::Adopting,
    }
}

/// An event while parked in [`Phase::Suspended`]: a trigger or tick is counted and kept.
pub(super) fn suspended(state: &mut State, event: Event, actions: &mut Vec<Action>) -> Phase {
    if let Event::Trigger(Some(t)) | Event::Tick(t) = event {
        actions.push(Action::Ignored(t.kind));
        keep(&mut state.queued, t);
    }
    Phase::Suspended
}

/// The end of a job of a unit suspended while it ran: `next` (a newer revision the job yielded
/// to) is kept with the queued trigger, the slot is released, and the unit parks.
pub(super) fn park(state: &mut State, next: Option<Trigger>, slot: bool, actions: &mut Vec<Action>) -> Phase {
    if let Some(t) = next {
        keep(&mut state.queued, t);
    }
    if slot {
        actions.push(Action::ReleaseSlot);
    }
    Phase::Suspended
}

/// What a suspended unit listens to, given what it would if it were not (`listen`). Parked:
/// triggers and the ticks, to count them — not drift nor the retry. During the job it was
/// suspended in: only the job's own effects (its slot, the end of its health wait).
pub(super) fn listen(state: &State, listen: Listen) -> Listen {
    match &state.phase {
        Phase::Suspended => Listen { triggers: !state.stopping, poll: true, resync: true, ..Listen::default() },
        _ => Listen { slot: listen.slot, wait_end: listen.wait_end, ..Listen::default() },
    }
}
