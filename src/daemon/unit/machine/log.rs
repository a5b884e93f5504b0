//! The log events [`super::step`] decides; the driver writes them (`unit/log.rs`).

use crate::daemon::trigger::TriggerKind;
use crate::health::ready::Blocker;
use crate::source::Revision;

/// A log event the machine decides (the driver writes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::daemon::unit) enum Log {
    /// `sync triggered`; `lane`: the `push_lane` field, absent for a revision that took a
    /// waiting sync's place.
    Triggered { kind: TriggerKind, revision: Revision, lane: Option<bool> },
    /// `no new revision` (debug).
    NoNewRevision { kind: TriggerKind, revision: Revision },
    /// `path unchanged, nothing to sync`: a push moved the unit's branch from `from` to
    /// `revision` and left the tree at its path as it was.
    PathUnchanged { kind: TriggerKind, from: Revision, revision: Revision },
    /// `sync yielded to a newer revision`.
    Yielded { revision: Revision, to: Revision, kind: TriggerKind, objects: usize },
    /// `health wait cancelled by a reload`.
    CancelledByReload { revision: Revision, kind: TriggerKind },
    /// `health wait cancelled by a change of variables`.
    CancelledByVariables { revision: Revision, kind: TriggerKind },
    /// `health wait cancelled by a new revision`.
    CancelledByRevision { revision: Revision, new_revision: Revision, kind: TriggerKind },
    /// `waiting for dependencies`: `revision` waits for these.
    Blocked { revision: Revision, waiting: Vec<Blocker> },
    /// `dependencies ready`, after a wait for them.
    DependenciesReady { revision: Revision },
}
