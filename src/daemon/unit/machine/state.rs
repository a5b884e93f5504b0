//! The machine's state: [`State`], what a unit keeps between phases, and its [`Phase`] — the
//! [`Job`] of a sync or self-heal in progress (what it runs now, the permits it holds), the
//! health wait ([`Health`]) — as [`step`](super::step) and the rules of each phase read and
//! write them.

use std::collections::BTreeSet;

use super::super::Ran;
use crate::daemon::slots::SlotClass;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::health::ready::Blocker;
use crate::object::ObjectRef;
use crate::source::Revision;

/// A unit's state: its phase and what it keeps between phases.
pub(in crate::daemon::unit) struct State {
    /// Where the unit is.
    pub(in crate::daemon::unit) phase: Phase,
    /// The one trigger kept for after the running job (the channel's one queued sync).
    pub(in crate::daemon::unit) queued: Option<Trigger>,
    /// The revision last synced (also a failed one: the retry re-syncs it).
    pub(in crate::daemon::unit) last_applied: Option<Revision>,
    /// The revision last applied when its sync applied every object, read from the plain files of
    /// the unit's path alone ([`Rested::path_only`](super::Rested::path_only)): a push that leaves
    /// that path's tree as it is brings the same objects, and is not synced
    /// ([`Log::PathUnchanged`](super::Log::PathUnchanged)).
    pub(in crate::daemon::unit) path_only_at: Option<Revision>,
    /// The retry of a failed sync that was due when the running job began (when idle, the one
    /// [`Phase::BackingOff`] waits for).
    pub(in crate::daemon::unit) retry_at: Option<tokio::time::Instant>,
    /// The unit has a push lane (a git unit): its pushes are probed and fetched at once.
    pub(in crate::daemon::unit) lane: bool,
    /// Shutdown, or the trigger channel closed: stop once the running job (and the health
    /// wait, cancelled) ends.
    pub(in crate::daemon::unit) stopping: bool,
    /// Suspended (`gitward suspend`, `suspend = true`): start no job; the running one ends,
    /// then [`Phase::Suspended`].
    pub(in crate::daemon::unit) suspended: bool,
    /// The unit's `depends_on` gate.
    pub(in crate::daemon::unit) depends: Depends,
    /// The last fetch failed: while backing off, ticks start nothing
    /// ([`job::start_over`](super::job::start_over)).
    pub(in crate::daemon::unit) fetch_failing: bool,
}

/// A unit's `depends_on` gate, as the machine keeps it.
#[derive(Debug, Default)]
pub(in crate::daemon::unit) struct Depends {
    /// The unit has `depends_on`: a new revision passes the gate
    /// ([`Action::Gate`](super::Action::Gate)) first.
    pub(in crate::daemon::unit) gated: bool,
    /// The dependencies not ready, as last logged: the wait is logged again only when they
    /// change, and `dependencies ready` once they are.
    pub(in crate::daemon::unit) blocked_by: Option<Vec<Blocker>>,
}

impl State {
    /// The queue the job asks for a sync slot in: [`SlotClass::First`] until the unit has
    /// synced a revision in this process, [`SlotClass::Resync`] for the periodic resync, else
    /// [`SlotClass::Triggered`].
    pub(in crate::daemon::unit) fn slot_class(&self) -> SlotClass {
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
    pub(in crate::daemon::unit) fn new(lane: bool) -> Self {
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
pub(in crate::daemon::unit) enum Phase {
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
    /// Suspended: starting nothing until resumed ([`Event::Resume`](super::Event::Resume));
    /// triggers are counted and kept as [`State::queued`].
    Suspended,
    /// Resumed: the revision the ApplySet parent records as applied is being taken as the one last
    /// applied ([`Action::Adopt`](super::Action::Adopt)), before the trigger kept while suspended
    /// runs.
    Adopting,
    /// Shutdown, or the trigger channel closed.
    Stopped,
}

impl Phase {
    /// The phase's name, for tests and logs.
    pub(in crate::daemon::unit) fn name(&self) -> &'static str {
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
pub(in crate::daemon::unit) struct Job {
    /// Why.
    pub(in crate::daemon::unit) trigger: Trigger,
    /// For a self-heal: the drifted objects to re-apply.
    pub(super) heal: Option<BTreeSet<ObjectRef>>,
    /// The revision being synced, once fetched.
    pub(in crate::daemon::unit) revision: Option<Revision>,
    /// What runs now.
    pub(super) doing: Doing,
    /// The permits held.
    pub(super) held: Held,
    /// A push seen during the sync, being fetched
    /// ([`Action::FetchPush`](super::Action::FetchPush)).
    pub(super) fetching: Option<Trigger>,
    /// A push that fetched a newer revision during the rest of the sync, and that revision.
    pub(super) next: Option<(Trigger, Revision)>,
    /// The objects the early apply sent.
    pub(super) early: usize,
}

/// The permits a job holds.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// A sync slot.
    pub(super) slot: bool,
    /// A push-lane permit.
    pub(super) lane: bool,
}

impl Job {
    pub(super) fn new(trigger: Trigger, heal: Option<BTreeSet<ObjectRef>>, slot: bool) -> Self {
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
pub(super) enum Doing {
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
pub(in crate::daemon::unit) struct Health {
    /// The revision waited for.
    pub(super) revision: Revision,
    /// How the job ended, for the retry decided after the wait.
    pub(super) ran: Ran,
    /// A trigger for the revision waited for, to run after the wait.
    pub(super) after: Option<Trigger>,
    /// What runs now.
    pub(super) busy: Busy,
}

/// What runs during the health wait.
#[derive(Debug)]
pub(super) enum Busy {
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
