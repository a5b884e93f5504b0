//! The health-wait phase of [`super::step`]: how the wait ends, what a trigger does during it
//! ([`during_wait`]), self-heal during it.

use super::{Action, Busy, Event, Health, Log, Phase, State, after, keep};
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::source::{Revision, Touch};

/// An event during the health step.
pub(super) fn health(state: &mut State, mut h: Health, event: Event, actions: &mut Vec<Action>) -> Phase {
    let busy = std::mem::replace(&mut h.busy, Busy::Nothing);
    match (busy, event) {
        (Busy::Beginning, Event::WaitBegun(false)) => after(state, h.ran, None, false, actions),
        (Busy::Beginning, Event::WaitBegun(true)) => waiting(state, h, actions),
        (Busy::Heal, Event::HealedDuringWait) => {
            actions.push(Action::DrainDrift);
            waiting(state, h, actions)
        }
        (Busy::Nothing, Event::WaitEnded) => end(h, false, true, None, actions),
        (Busy::Nothing, Event::Shutdown | Event::Trigger(None)) => {
            state.stopping = true;
            end(h, true, true, None, actions)
        }
        (Busy::Nothing, Event::Trigger(Some(t)) | Event::Tick(t)) => on_trigger(h, t, actions),
        (Busy::Fetch(t), Event::WaitFetched(found)) => fetched(state, h, t, found, actions),
        (Busy::Probe(t, found), Event::Probed(touch)) => probed(state, h, t, found, touch, actions),
        (Busy::Nothing, Event::Drift(events)) => {
            actions.push(Action::NoteDrift(events));
            Phase::Health(h)
        }
        (Busy::Nothing, Event::HealDue(objects, at)) if !objects.is_empty() => {
            actions.push(Action::Observe(Trigger::new(TriggerKind::Drift, at)));
            actions.push(Action::HealDuringWait(objects));
            h.busy = Busy::Heal;
            Phase::Health(h)
        }
        (Busy::Ending(next), Event::WaitFinished) => after(state, h.ran, next, false, actions),
        (busy, event) => {
            match event {
                Event::Shutdown | Event::Trigger(None) => state.stopping = true,
                Event::Trigger(Some(t)) => keep(&mut state.queued, t),
                _ => {}
            }
            h.busy = busy;
            Phase::Health(h)
        }
    }
}

/// Back to waiting, after the wait began or a fetch or self-heal during it: the wait is
/// cancelled at once when stopping (shutdown arrived meanwhile).
fn waiting(state: &mut State, h: Health, actions: &mut Vec<Action>) -> Phase {
    if state.stopping {
        return end(h, true, true, None, actions);
    }
    Phase::Health(h)
}

/// Ends the wait (cancelled when `cancel`; recorded when `record`); `by`, the trigger that
/// cancelled it, runs next, else the one kept for after it.
fn end(mut h: Health, cancel: bool, record: bool, by: Option<Trigger>, actions: &mut Vec<Action>) -> Phase {
    actions.push(Action::EndWait { cancel, record });
    let next = by.or_else(|| h.after.take());
    h.busy = Busy::Ending(next);
    Phase::Health(h)
}

/// A trigger or poll during the wait: a reload or a change of variables cancels it
/// ([`during_wait`]: it does not fetch);
/// the resync waits for its end; any other fetches first.
fn on_trigger(mut h: Health, t: Trigger, actions: &mut Vec<Action>) -> Phase {
    let (revision, kind) = (h.revision.clone(), t.kind);
    match during_wait(&t, false) {
        DuringWait::CancelForReload => {
            actions.push(Action::Log(Log::CancelledByReload { revision, kind }));
            return end(h, true, true, Some(t), actions);
        }
        DuringWait::CancelForVariables => {
            actions.push(Action::Log(Log::CancelledByVariables { revision, kind }));
            return end(h, true, false, Some(t), actions);
        }
        _ => {}
    }
    if t.kind == TriggerKind::Resync {
        // Not listened to during a wait; should one come, it waits for the end.
        return Phase::Health(h);
    }
    actions.push(Action::WaitFetch);
    h.busy = Busy::Fetch(t);
    Phase::Health(h)
}

/// What the fetch for `t` during the wait found ([`during_wait`]).
fn fetched(state: &mut State, mut h: Health, t: Trigger, found: Option<Revision>, actions: &mut Vec<Action>) -> Phase {
    // A revision a push that left the path alone made the one last applied during this wait
    // is nothing new either.
    let new_revision = found.filter(|r| *r != h.revision && state.last_applied.as_ref() != Some(r));
    match during_wait(&t, new_revision.is_some()) {
        DuringWait::Ignore => waiting(state, h, actions),
        DuringWait::RunAfter => {
            if t.includes(TriggerKind::Reconcile) {
                actions.push(Action::NoteQueued);
            }
            keep(&mut h.after, t);
            waiting(state, h, actions)
        }
        DuringWait::CancelForReload => end(h, true, true, Some(t), actions),
        DuringWait::CancelForVariables => end(h, true, false, Some(t), actions),
        DuringWait::CancelForRevision => {
            let new_revision = new_revision.expect("a new revision");
            if let Some(from) = super::job::path_unchanged(state, &new_revision).filter(|_| t.git_only() && state.lane)
            {
                actions.push(Action::Probe { from: Some(from), at: t.at });
                h.busy = Busy::Probe(t, new_revision);
                return Phase::Health(h);
            }
            cancel_for_revision(h, t, new_revision, actions)
        }
    }
}

/// What the probe of the push that brought `found` during the wait told: one that left the
/// unit's path alone makes the branch's revision the one last applied (as a resting unit's
/// would, [`Log::PathUnchanged`]) and the wait goes on, to be judged; one that touched the
/// path, or whose effect cannot be told, cancels it.
fn probed(
    state: &mut State,
    h: Health,
    t: Trigger,
    found: Revision,
    touch: Option<Touch>,
    actions: &mut Vec<Action>,
) -> Phase {
    let (untouched, to) = match touch {
        Some(Touch { touched, to }) => (!touched, to),
        None => (false, found),
    };
    if untouched && state.last_applied.as_ref() == Some(&to) {
        return waiting(state, h, actions);
    }
    match super::job::path_unchanged(state, &to).filter(|_| untouched) {
        Some(from) => {
            actions.push(Action::Log(Log::PathUnchanged { kind: t.kind, from, revision: to.clone() }));
            state.last_applied = Some(to.clone());
            state.path_only_at = Some(to);
            waiting(state, h, actions)
        }
        None => cancel_for_revision(h, t, to, actions),
    }
}

/// A new revision cancels the wait (recording nothing: its own sync records itself) and runs.
fn cancel_for_revision(h: Health, t: Trigger, new_revision: Revision, actions: &mut Vec<Action>) -> Phase {
    let (revision, kind) = (h.revision.clone(), t.kind);
    actions.push(Action::Log(Log::CancelledByRevision { revision, new_revision, kind }));
    end(h, true, false, Some(t), actions)
}

/// What a trigger that arrives during a health wait does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DuringWait {
    /// SIGHUP asks for a sync now, with a config that may have changed: cancel and run it.
    CancelForReload,
    /// A new revision always wins over waiting for the old one: cancel (recording nothing:
    /// the new revision records itself) and run it.
    CancelForRevision,
    /// A `from` Secret or ConfigMap of the unit's variables changed: what the revision renders
    /// to changed as a new revision's would, so the same: cancel (recording nothing: the sync
    /// with the new values records itself, its wait covering what this one left) and run it
    /// at once. It does not fetch.
    CancelForVariables,
    /// The same revision, asked for explicitly (webhook, startup, retry, ...): run it after.
    RunAfter,
    /// The same revision, for a trigger that only means "git may have moved": nothing to do.
    Ignore,
}

/// What trigger `t` does during a wait (a reload merged into it counts as a reload);
/// `new_revision`: a fetch found a revision other than the one waited for (a reload does not
/// fetch).
fn during_wait(t: &Trigger, new_revision: bool) -> DuringWait {
    if t.includes(TriggerKind::Reload) {
        DuringWait::CancelForReload
    } else if t.includes(TriggerKind::Variables) {
        DuringWait::CancelForVariables
    } else if new_revision {
        DuringWait::CancelForRevision
    } else if t.needs_new_revision() {
        DuringWait::Ignore
    } else {
        DuringWait::RunAfter
    }
}
