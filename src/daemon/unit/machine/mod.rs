//! A unit's life as one state machine: [`State`] (its [`Phase`] and what it keeps between
//! phases) and [`step`], a pure function from the state and one [`Event`] to the next state and
//! the [`Action`]s the driver (`driver/`) runs. Nothing here waits, reads the clock or touches
//! the engine: the instants come in the events, and what the effects found comes back as
//! events. The shape is kube-runtime's watcher (`enum State` + `step`).
//!
//! The state types are in `state`, the events and actions in `event`. This file holds the rules
//! in prose (below), `step` and the idle phase; the other phases' parts of `step` are in `job`
//! (fetching, the slot wait, applying), `health`, `suspend` and `blocked`; `listen` says which
//! sources a state listens to, `log` the log events `step` decides.
//!
//! The rules it holds (module docs of `sync.rs` and `wait.rs` give the reasons):
//! - **Coalescing.** A trigger that arrives while a sync runs and does not make it yield is kept
//!   as the one queued trigger ([`keep`]: merged, it takes the more urgent kind and keeps what
//!   each asked for, `crate::daemon::trigger`'s module docs).
//! - **Fetching holds nothing.** A sync fetches before it asks for a slot or the lane (the
//!   driver holds a permit of its remote host): a source that hangs keeps no other unit waiting.
//! - **The push lane.** A push or webhook of a git unit is probed first
//!   ([`Action::Probe`]): one that touched the unit's path (or cannot be told) fetches, applies
//!   early in the lane, then waits for a slot for the rest; one that did not waits for a slot
//!   first, and a later push that touches the path ends that wait and takes the lane.
//! - **No new revision.** A poll, push, or webhook naming the commit it pushed
//!   ([`Trigger::pushed`]) that finds the revision last applied does nothing (unless something
//!   that asks for a sync anyway was merged into it: [`Trigger::needs_new_revision`]): the
//!   webhook of a push the ref watch already brought, whether the unit synced it or took it
//!   without a sync, syncs nothing again.
//! - **Path unchanged.** A push to a new revision that leaves the unit's path as it was, when
//!   the last sync applied every object from the plain files of that path alone, does nothing
//!   but take the new revision as the one last applied: the same tree yields the same objects
//!   (Argo CD's `manifest-generate-paths`). A kustomize or Helm unit, which may read outside its
//!   path, waits for a slot and syncs; so does any unit after a failed or partial sync.
//! - **Yield.** While a sync waits for its slot after its early apply, a push that fetches a
//!   newer revision takes its place (early apply in the lane, the slot for the rest). While its
//!   rest runs, such a push raises the engine's yield signal only when the sync is a re-send of
//!   the revision last applied; a new revision's sync runs to its end and the push is queued.
//!   A push still being fetched when the sync ends is queued.
//! - **Health wait.** A reload cancels the wait; a new revision cancels it and records
//!   nothing (its own sync records itself, and its wait covers what this one left unjudged),
//!   unless the push that brought it left the unit's path alone under the path-unchanged rule:
//!   then the new revision is taken as the one last applied and the wait goes on, to its
//!   judgement. A change of the `from` variables cancels it as a new revision does and syncs
//!   at once. The same revision asked for explicitly runs after it (a reconcile request is
//!   noted on the parent as queued behind the wait), a poll or push is ignored.
//!   Drifted objects are healed during the wait without a slot.
//! - **Retry.** How a job ended decides the backoff ([`retry`]). While a fetch failed, ticks
//!   start nothing until the retry; a push or webhook starts the backoff over.
//! - **Suspend.** A suspended unit starts nothing: its triggers are counted and kept as the one
//!   queued trigger, run once when resumed; a job running when it is suspended runs to its end
//!   (its health wait too, taking no trigger meanwhile), and then the unit stops in
//!   [`Phase::Suspended`] (`suspend.rs`).
//! - **Dependencies.** A unit with `depends_on` syncs a new revision only once every unit it
//!   depends on is ready ([`Action::Gate`], judged from their records): one that is not
//!   drops its permits and waits in [`Phase::Blocked`] until a dependency's record changes,
//!   then fetches again (`blocked.rs`). A re-send of the revision last applied and a
//!   self-heal pass without the gate; a newer revision does not take a waiting sync's place.

mod blocked;
mod event;
mod health;
mod job;
mod listen;
mod log;
mod state;
mod suspend;
#[cfg(test)]
mod tests;

use crate::daemon::trigger::{Trigger, TriggerKind};
pub(super) use event::{Action, Event, Failed, Rested};
pub(super) use job::{after, quiet};
pub(super) use listen::Listen;
pub(super) use log::Log;
use state::{Busy, Doing};
pub(super) use state::{Depends, Health, Job, Phase, State};

/// Keeps `t` as the one queued trigger: as it when there is none, else merged into it
/// ([`Trigger::merge`]: the more urgent kind, what each asked for, the later of the two
/// instants, so that the queued sync's fetch cannot be one that started before `t`'s push).
pub(super) fn keep(queued: &mut Option<Trigger>, t: Trigger) {
    match queued {
        None => *queued = Some(t),
        Some(q) => q.merge(t),
    }
}

/// The next state and what to do, given `event` in `state`.
pub(super) fn step(mut state: State, event: Event) -> (State, Vec<Action>) {
    let mut actions = Vec::new();
    match event {
        Event::RetryAt(at) => {
            state.retry_at = Some(at);
            if matches!(state.phase, Phase::Idle) {
                state.phase = Phase::BackingOff(at);
            }
            return (state, actions);
        }
        Event::Trigger(None) | Event::Shutdown if !matches!(state.phase, Phase::Health(_)) => {
            state.stopping = true;
            let resting = matches!(
                state.phase,
                Phase::Idle | Phase::BackingOff(_) | Phase::Suspended | Phase::Adopting | Phase::Blocked(_)
            );
            if resting {
                state.phase = Phase::Stopped;
            }
            return (state, actions);
        }
        Event::Suspend | Event::Resume => return suspend::toggle(state, event),
        _ => {}
    }
    let phase = std::mem::replace(&mut state.phase, Phase::Stopped);
    state.phase = match phase {
        Phase::Idle => on_idle(&mut state, None, event, &mut actions),
        Phase::BackingOff(at) => on_idle(&mut state, Some(at), event, &mut actions),
        Phase::Fetching(job) => job::fetching(&mut state, job, event, &mut actions),
        Phase::SlotWait(job) => job::slot_wait(&mut state, job, event, &mut actions),
        Phase::Applying(job) => job::applying(&mut state, job, event, &mut actions),
        Phase::Health(h) => health::health(&mut state, h, event, &mut actions),
        Phase::Suspended => suspend::suspended(&mut state, event, &mut actions),
        Phase::Adopting => suspend::adopting(&mut state, event, &mut actions),
        Phase::Blocked(t) => blocked::blocked(&mut state, t, event, &mut actions),
        Phase::Stopped => Phase::Stopped,
    };
    (state, actions)
}

/// An event while idle, or backing off until `retry_at`: a trigger, tick, due self-heal or the
/// retry starts a job.
fn on_idle(
    state: &mut State,
    retry_at: Option<tokio::time::Instant>,
    event: Event,
    actions: &mut Vec<Action>,
) -> Phase {
    let idle = retry_at.map_or(Phase::Idle, Phase::BackingOff);
    state.retry_at = retry_at;
    let source_down = retry_at.is_some() && state.fetch_failing;
    match event {
        Event::Tick(_) if source_down => idle,
        Event::Trigger(Some(t)) if source_down && t.kind.is_push() => job::start_over(state, t, actions),
        Event::Trigger(Some(t)) | Event::Tick(t) => start(state, Job::new(t, None, false), actions),
        Event::Drift(events) => {
            actions.push(Action::NoteDrift(events));
            idle
        }
        Event::HealDue(objects, at) if !objects.is_empty() => {
            let trigger = Trigger::new(TriggerKind::Drift, at);
            start(state, Job::new(trigger, Some(objects), false), actions)
        }
        Event::RetryDue(at) => {
            state.retry_at = None;
            start(state, Job::new(Trigger::new(TriggerKind::Retry, at), None, false), actions)
        }
        Event::Taken(to, at) => job::take(state, idle, to, at, actions),
        _ => idle,
    }
}

/// Starts `job`: counted (webhooks are counted by the HTTP server when accepted), then a
/// self-heal waits for a slot and a sync begins ([`begin_sync`]).
pub(super) fn start(state: &mut State, job: Job, actions: &mut Vec<Action>) -> Phase {
    if job.trigger.kind != TriggerKind::Webhook {
        actions.push(Action::Observe(job.trigger.clone()));
    }
    if job.heal.is_some() {
        actions.push(Action::AcquireSlot);
        return Phase::SlotWait(job);
    }
    begin_sync(state, job, actions)
}

/// The first step of a sync: a push of a git unit holding no slot is probed; any other
/// fetches at once, holding no new slot; the slot or lane is asked for once the fetch found a
/// revision to apply ([`job::permit_then_early`]).
pub(super) fn begin_sync(state: &State, mut job: Job, actions: &mut Vec<Action>) -> Phase {
    if job.trigger.kind.is_push() && !job.held.slot && state.lane {
        job.doing = Doing::Probe;
        actions.push(Action::Probe { from: state.last_applied.clone(), at: job.trigger.at });
        Phase::Fetching(job)
    } else {
        fetch(job, actions)
    }
}

/// Fetches the revision for `job`.
pub(super) fn fetch(mut job: Job, actions: &mut Vec<Action>) -> Phase {
    job.doing = Doing::Fetch;
    actions.push(Action::Fetch { at: job.trigger.at });
    Phase::Fetching(job)
}
