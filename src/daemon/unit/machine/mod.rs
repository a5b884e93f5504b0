//! A unit's life as one state machine: [`State`] (its [`Phase`] and what it keeps between
//! phases) and [`step`], a pure function from the state and one [`Event`] to the next state and
//! the [`Action`]s the driver (`driver.rs`) runs. Nothing here waits, reads the clock or touches
//! the engine: the instants come in the events, and what the effects found comes back as
//! events. The shape is kube-runtime's watcher (`enum State` + `step`).
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
//! - **No new revision.** A poll or push that finds the revision last applied does nothing
//!   (unless something that asks for a sync anyway was merged into it:
//!   [`Trigger::needs_new_revision`]).
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

use std::collections::BTreeSet;
use std::time::Instant;

mod blocked;
mod health;
mod job;
mod listen;
mod log;
mod suspend;
#[cfg(test)]
mod tests;

use super::Ran;
use crate::cluster::drift::Drift;
use crate::daemon::slots::SlotClass;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::health::ready::Blocker;
use crate::object::ObjectRef;
use crate::source::{Revision, Touch};
pub(super) use job::{after, quiet};
pub(super) use listen::Listen;
pub(super) use log::Log;

/// A unit's state: its phase and what it keeps between phases.
pub(super) struct State {
    /// Where the unit is.
    pub(super) phase: Phase,
    /// The one trigger kept for after the running job (the channel's one queued sync).
    pub(super) queued: Option<Trigger>,
    /// The revision last synced (also a failed one: the retry re-syncs it).
    pub(super) last_applied: Option<Revision>,
    /// The revision last applied when its sync applied every object, read from the plain files
    /// of the unit's path alone ([`Rested::path_only`]): a push that leaves that path's tree as
    /// it is brings the same objects, and is not synced ([`Log::PathUnchanged`]).
    pub(super) path_only_at: Option<Revision>,
    /// The retry of a failed sync that was due when the running job began (when idle, the one
    /// [`Phase::BackingOff`] waits for).
    pub(super) retry_at: Option<tokio::time::Instant>,
    /// The unit has a push lane (a git unit): its pushes are probed and fetched at once.
    pub(super) lane: bool,
    /// Shutdown, or the trigger channel closed: stop once the running job (and the health
    /// wait, cancelled) ends.
    pub(super) stopping: bool,
    /// Suspended (`gitward suspend`, `suspend = true`): start no job; the running one ends,
    /// then [`Phase::Suspended`].
    pub(super) suspended: bool,
    /// The unit's `depends_on` gate.
    pub(super) depends: Depends,
    /// The last fetch failed: while backing off, ticks start nothing ([`job::start_over`]).
    pub(super) fetch_failing: bool,
}

/// A unit's `depends_on` gate, as the machine keeps it.
#[derive(Debug, Default)]
pub(super) struct Depends {
    /// The unit has `depends_on`: a new revision passes the gate ([`Action::Gate`]) first.
    pub(super) gated: bool,
    /// The dependencies not ready, as last logged: the wait is logged again only when they
    /// change, and `dependencies ready` once they are.
    pub(super) blocked_by: Option<Vec<Blocker>>,
}

impl State {
    /// The queue the job asks for a sync slot in: [`SlotClass::First`] until the unit has
    /// synced a revision in this process, [`SlotClass::Resync`] for the periodic resync, else
    /// [`SlotClass::Triggered`].
    pub(super) fn slot_class(&self) -> SlotClass {
        let resync = match &self.phase {
            Phase::Fetching(job) | Phase::SlotWait(job) | Phase::Applying(job) => {
                job.trigger.kind == TriggerKind::Resync
            }
            _ => false,
        };
        if self.last_applied.is_none() {
            SlotClass::First
        } else if resync {
            SlotClass::Resync
        } else {
            SlotClass::Triggered
        }
    }

    /// A unit that has synced nothing yet, idle; `lane`: [`State::lane`].
    pub(super) fn new(lane: bool) -> Self {
        Self {
            phase: Phase::Idle,
            queued: None,
            last_applied: None,
            path_only_at: None,
            retry_at: None,
            lane,
            stopping: false,
            suspended: false,
            depends: Depends::default(),
            fetch_failing: false,
        }
    }
}

/// Where a unit is.
pub(super) enum Phase {
    /// Waiting for a trigger.
    Idle,
    /// Waiting for a trigger, or until this instant to retry a failed sync.
    BackingOff(tokio::time::Instant),
    /// Probing a push, waiting for the push lane, fetching, or applying early.
    Fetching(Job),
    /// Waiting for a sync slot.
    SlotWait(Job),
    /// Holding a slot: the rest of the sync, or a self-heal, runs (or a failure is recorded).
    Applying(Job),
    /// Waiting for the health of what the last job changed; no slot held.
    Health(Health),
    /// A new revision waits until the units it depends on are ready (`depends_on`); no slot
    /// held. Holds the trigger, run again when a dependency's record changes.
    Blocked(Trigger),
    /// Suspended: starting nothing until resumed ([`Event::Resume`]); triggers are counted
    /// and kept as [`State::queued`].
    Suspended,
    /// Resumed: the revision the ApplySet parent records as applied is being taken as the one
    /// last applied ([`Action::Adopt`]), before the trigger kept while suspended runs.
    Adopting,
    /// Shutdown, or the trigger channel closed.
    Stopped,
}

impl Phase {
    /// The phase's name, for tests and logs.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::BackingOff(_) => "backing off",
            Phase::Fetching(_) => "fetching",
            Phase::SlotWait(_) => "slot wait",
            Phase::Applying(_) => "applying",
            Phase::Health(_) => "health",
            Phase::Blocked(_) => "blocked",
            Phase::Suspended => "suspended",
            Phase::Adopting => "adopting",
            Phase::Stopped => "stopped",
        }
    }
}

/// One sync or self-heal in progress.
pub(super) struct Job {
    /// Why.
    pub(super) trigger: Trigger,
    /// For a self-heal: the drifted objects to re-apply.
    heal: Option<BTreeSet<ObjectRef>>,
    /// The revision being synced, once fetched.
    pub(super) revision: Option<Revision>,
    /// What runs now.
    doing: Doing,
    /// The permits held.
    held: Held,
    /// A push seen during the sync, being fetched ([`Action::FetchPush`]).
    fetching: Option<Trigger>,
    /// A push that fetched a newer revision during the rest of the sync, and that revision.
    next: Option<(Trigger, Revision)>,
    /// The objects the early apply sent.
    early: usize,
}

/// The permits a job holds.
#[derive(Debug, Default)]
struct Held {
    /// A sync slot.
    slot: bool,
    /// A push-lane permit.
    lane: bool,
}

impl Job {
    fn new(trigger: Trigger, heal: Option<BTreeSet<ObjectRef>>, slot: bool) -> Self {
        Self {
            trigger,
            heal,
            revision: None,
            doing: Doing::Slot,
            held: Held { slot, lane: false },
            fetching: None,
            next: None,
            early: 0,
        }
    }
}

/// What a job runs now.
#[derive(Debug)]
enum Doing {
    /// Probing whether a push touched the unit's path.
    Probe,
    /// Waiting for a push-lane permit for the early apply of the revision fetched.
    Lane,
    /// Fetching the revision.
    Fetch,
    /// Asking whether the dependencies are ready for the revision fetched.
    Gate,
    /// Applying the changed objects early.
    Early,
    /// Waiting for a slot before a self-heal.
    Slot,
    /// Waiting for a slot for the early apply of the revision fetched (not a git unit's push).
    EarlySlot,
    /// Waiting for a slot for a push that left the unit's path alone (the branch now here):
    /// a later push that touches it ends the wait.
    Untouched(Revision),
    /// Probing the later push seen while [`Doing::Untouched`] (from where the branch was): one
    /// that touched the path takes the lane.
    Reprobe(Trigger),
    /// Waiting for a slot for the rest, after the early apply: a newer revision takes the place.
    RestSlot,
    /// The newer revision that took the place waits for the lane.
    NewerLane,
    /// The newer revision that took the place applies early.
    NewerEarly,
    /// The rest of the sync runs.
    Rest,
    /// The self-heal runs.
    Heal,
    /// The failure is recorded.
    Fail,
}

/// The health-wait phase.
pub(super) struct Health {
    /// The revision waited for.
    revision: Revision,
    /// How the job ended, for the retry decided after the wait.
    ran: Ran,
    /// A trigger for the revision waited for, to run after the wait.
    after: Option<Trigger>,
    /// What runs now.
    busy: Busy,
}

/// What runs during the health wait.
#[derive(Debug)]
enum Busy {
    /// The wait is being started (or found needless and finished).
    Beginning,
    /// Nothing but the wait.
    Nothing,
    /// A fetch for this trigger, to see whether it brings a new revision.
    Fetch(Trigger),
    /// The new revision this trigger's fetch found is probed: a push that left the unit's
    /// path alone, under the path-unchanged rule, does not cancel the wait.
    Probe(Trigger, Revision),
    /// A self-heal of drifted objects.
    Heal,
    /// The wait is being judged and recorded; this trigger runs next.
    Ending(Option<Trigger>),
}

/// A failure the driver keeps (the error goes to [`Action::Fail`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Failed;

/// What the rest of a sync ended with (the driver keeps the report).
#[derive(Debug, Clone)]
pub(super) struct Rested {
    /// The revision applied.
    pub(super) revision: Revision,
    /// It stopped at the yield signal.
    pub(super) yielded: bool,
    /// The objects whose requests were answered.
    pub(super) objects: usize,
    /// No object failed.
    pub(super) ok: bool,
    /// The objects came from the unit's path alone ([`crate::sync::Report::path_only`]).
    pub(super) path_only: bool,
}

/// Something that happened to a unit.
pub(super) enum Event {
    /// The shutdown flag turned true.
    Shutdown,
    /// A trigger from the channel; `None` once it closed.
    Trigger(Option<Trigger>),
    /// A poll or resync tick, as a trigger.
    Tick(Trigger),
    /// Drift events from the metadata watches.
    Drift(Vec<Drift>),
    /// These drifted objects are due for a self-heal (possibly none), at this instant.
    HealDue(BTreeSet<ObjectRef>, Instant),
    /// The retry of a failed sync is due, at this instant.
    RetryDue(Instant),
    /// The retry asked for by [`Action::ScheduleRetry`] is due at this instant.
    RetryAt(tokio::time::Instant),
    /// What [`Action::Probe`] found.
    Probed(Option<Touch>),
    /// A push-lane permit was granted.
    Lane,
    /// A sync slot was granted.
    Slot,
    /// The fetch of [`Action::Fetch`] ended.
    Fetched(Result<Revision, Failed>),
    /// The early apply ended, having sent this many objects.
    Early(usize),
    /// The fetch of [`Action::FetchPush`] ended.
    PushFetched(Result<Revision, Failed>),
    /// The rest of the sync ended.
    Rest(Result<Rested, Failed>),
    /// The self-heal ended: whether it succeeded and the revision it re-applied from; `None`
    /// when the engine cannot heal (a full sync runs instead).
    Healed(Option<(bool, Revision)>),
    /// The failure was recorded.
    FailRecorded,
    /// The health step began: a wait runs (`true`), or none was needed and the job is finished.
    WaitBegun(bool),
    /// The health wait ended by itself.
    WaitEnded,
    /// The fetch of [`Action::WaitFetch`] found this revision (`None`: it failed).
    WaitFetched(Option<Revision>),
    /// The self-heal during the wait ended.
    HealedDuringWait,
    /// The wait was judged, finished and recorded.
    WaitFinished,
    /// The unit was suspended.
    Suspend,
    /// The unit was resumed.
    Resume,
    /// What [`Action::Adopt`] found: the revision the parent records as applied, when it is
    /// not the one the engine held (another process applied it: a rollback).
    Adopted(Option<Revision>),
    /// What [`Action::Gate`] found: the dependencies not ready (none: all ready).
    Gated(Vec<Blocker>),
    /// A dependency's record changed.
    DependencyChanged,
    /// While the unit rested idle, a push (seen at this instant) moved its branch to this
    /// revision and left its path alone: answered by the repository's watch ([`job::take`]).
    Taken(Revision, Instant),
}

/// What the driver does for the machine.
pub(super) enum Action {
    /// Count the trigger in metrics (by its kind); a reconcile merged into it is answered.
    Observe(Trigger),
    /// Count and log a trigger a suspended unit does not act on.
    Ignored(TriggerKind),
    /// Write a log event.
    Log(Log),
    /// Tell whether the push at `at` touched the unit's path since `from` ([`Event::Probed`]).
    Probe { from: Option<Revision>, at: Instant },
    /// Ask for a push-lane permit ([`Event::Lane`]).
    AcquireLane,
    /// Drop the push-lane permit.
    ReleaseLane,
    /// Ask for a sync slot ([`Event::Slot`]).
    AcquireSlot,
    /// Drop the slot, or the request for one.
    ReleaseSlot,
    /// Judge the dependencies for this revision, at once ([`Event::Gated`]).
    Gate(Revision),
    /// Fetch with the engine, not before `at` ([`Event::Fetched`]).
    Fetch { at: Instant },
    /// Apply the changed objects of this revision early ([`Event::Early`]).
    Early(Revision),
    /// Run the rest of the sync ([`Event::Rest`]).
    Rest,
    /// Fetch for this push through a clone of the repository handle ([`Event::PushFetched`]).
    FetchPush(Trigger),
    /// Drop the fetch of [`Action::FetchPush`] (its trigger was queued).
    AbandonPush,
    /// Raise the engine's yield signal.
    RaiseYield,
    /// Log the objects of the yielded sync's report.
    LogObjects,
    /// Publish the sync's report (logs, metrics, field fights) for this trigger.
    Publish(Trigger),
    /// Re-apply these objects for this trigger ([`Event::Healed`]).
    Heal(Trigger, BTreeSet<ObjectRef>),
    /// Record, log and count the failure for this trigger ([`Event::FailRecorded`]).
    Fail(Trigger),
    /// Start the health step of the report ([`Event::WaitBegun`]).
    BeginWait,
    /// Fetch to see whether a new revision cancels the wait ([`Event::WaitFetched`]).
    WaitFetch,
    /// Heal these objects during the wait, without a slot ([`Event::HealedDuringWait`]).
    HealDuringWait(BTreeSet<ObjectRef>),
    /// End the wait (cancel it first when `cancel`), judge it, finish the sync and record it
    /// when `record` ([`Event::WaitFinished`]).
    EndWait { cancel: bool, record: bool },
    /// Hand these drift events to the self-heal schedule.
    NoteDrift(Vec<Drift>),
    /// Take the pending drift events (the job's own writes among them).
    DrainDrift,
    /// A full sync succeeded: the backoff starts over.
    ResetBackoff,
    /// Retry with the next backoff delay ([`Event::RetryAt`]).
    ScheduleRetry,
    /// Note on the parent that the reconcile request merged into the trigger just kept for
    /// after the health wait is queued behind it.
    NoteQueued,
    /// Take the revision the parent records as applied as the one self-heal heals toward
    /// ([`Event::Adopted`]).
    Adopt,
}

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
