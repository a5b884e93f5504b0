//! What goes into the machine and what comes out: the [`Event`]s that happen to a unit (with
//! what an effect found: [`Rested`], [`Failed`]) and the [`Action`]s the driver runs for it.

use std::collections::BTreeSet;
use std::time::Instant;

use super::Log;
use crate::cluster::drift::Drift;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::health::ready::Blocker;
use crate::object::ObjectRef;
use crate::source::{Revision, Touch};

/// A failure the driver keeps (the error goes to [`Action::Fail`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::daemon::unit) struct Failed;

/// What the rest of a sync ended with (the driver keeps the report).
#[derive(Debug, Clone)]
pub(in crate::daemon::unit) struct Rested {
    /// The revision applied.
    pub(in crate::daemon::unit) revision: Revision,
    /// It stopped at the yield signal.
    pub(in crate::daemon::unit) yielded: bool,
    /// The objects whose requests were answered.
    pub(in crate::daemon::unit) objects: usize,
    /// No object failed.
    pub(in crate::daemon::unit) ok: bool,
    /// The objects came from the unit's path alone ([`crate::sync::Report::path_only`]).
    pub(in crate::daemon::unit) path_only: bool,
}

/// Something that happened to a unit.
pub(in crate::daemon::unit) enum Event {
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
    /// While the unit rested idle, a push (seen at this instant) moved its branch to this revision
    /// and left its path alone: answered by the repository's watch
    /// ([`job::take`](super::job::take)).
    Taken(Revision, Instant),
}

/// What the driver does for the machine.
pub(in crate::daemon::unit) enum Action {
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
