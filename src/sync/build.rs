//! Builders of the values the observers of a sync are tested with: a [`Report`] of ConfigMaps
//! that ended with given actions, and the [`Outcome`] of a sync that applied one or failed as a
//! whole. One place, so a field added to either is filled in once.

use std::time::Instant;

use super::outcome::{Cause, Ended, Failure, HealthSummary, Live, Outcome, Timings, Wait};
use super::{Error, Report, Sent};
use crate::changeset::{Action, ChangeSet};
use crate::health::Counts;
use crate::health::record::SyncResult;
use crate::object::{GroupKind, ObjectRef};
use crate::source::Revision;

/// `ConfigMap/shop/<name>`.
pub(crate) fn config_map(name: &str) -> ObjectRef {
    ObjectRef::new(GroupKind::new("", "ConfigMap"), Some("shop"), name)
}

/// A report of `unit`'s sync at `revision` whose ConfigMaps `shop/<name>` ended with the
/// actions given, without messages ([`report_of`] for those); nothing else sent or skipped.
pub(crate) fn report(unit: &str, revision: &str, objects: &[(&str, Action)]) -> Report {
    let objects: Vec<(&str, Action, Option<&str>)> = objects.iter().map(|(n, a)| (*n, *a, None)).collect();
    report_of(unit, revision, &objects)
}

/// A report as [`report`] gives, its ConfigMaps named `c0`, `c1`, … in the order of `actions`.
pub(crate) fn report_numbered(unit: &str, revision: &str, actions: &[Action]) -> Report {
    let names: Vec<String> = (0..actions.len()).map(|i| format!("c{i}")).collect();
    let objects: Vec<(&str, Action)> = names.iter().map(String::as_str).zip(actions.iter().copied()).collect();
    report(unit, revision, &objects)
}

/// A report as [`report`] gives, each object with its message (a failure's reason).
pub(crate) fn report_of(unit: &str, revision: &str, objects: &[(&str, Action, Option<&str>)]) -> Report {
    let mut changes = ChangeSet::default();
    for (name, action, message) in objects {
        changes.push(config_map(name), *action, message.map(str::to_owned));
    }
    Report::of(unit, revision, changes)
}

impl Report {
    /// A report of a sync of `unit` at `revision` with `changes`, everything else empty.
    pub(crate) fn of(unit: &str, revision: &str, changes: ChangeSet) -> Self {
        let sent = Sent { applied_at: Instant::now(), health_targets: Vec::new(), applied_early: 0 };
        let (unit, revision) = (unit.to_owned(), Revision(revision.to_owned()));
        Report {
            unit,
            revision,
            changes,
            skipped_files: Vec::new(),
            took: Timings::default(),
            sent,
            heal: false,
            yielded: false,
            path_only: false,
            path_tree: None,
            signers: Vec::new(),
        }
    }
}

impl Outcome {
    /// The outcome of a `gitward sync` that applied `report` and judged it `result` after a wait
    /// that ended `wait`: no health counts, nothing left not ready, no post hooks, a cluster that
    /// answered and tracks nothing, the timings the report took.
    pub(crate) fn applied(report: Report, wait: Wait, result: SyncResult) -> Self {
        let timings = report.took;
        Outcome {
            cause: Cause::cli(),
            ended: Ended::Applied(report),
            health: HealthSummary { counts: Counts::default(), wait, result },
            not_ready: Vec::new(),
            post_hooks: 0,
            live: Live { answered: true, tracked: 0, health: None, cache_bytes: 0 },
            timings,
        }
    }

    /// The outcome of a `gitward sync` of `unit` that failed as a whole with `error`, as
    /// [`super::Engine::fail`] gives it: nothing attempted or kept.
    pub(crate) fn failed(unit: &str, error: Error) -> Self {
        Outcome {
            cause: Cause::cli(),
            ended: Ended::Failed(Failure::new(unit.to_owned(), error, None, None)),
            health: HealthSummary::unwaited(Wait::Skipped),
            not_ready: Vec::new(),
            post_hooks: 0,
            live: Live { answered: true, tracked: 0, health: None, cache_bytes: 0 },
            timings: Timings::default(),
        }
    }

    /// The report of an outcome built by [`Outcome::applied`], to change before it is observed.
    pub(crate) fn report_mut(&mut self) -> &mut Report {
        match &mut self.ended {
            Ended::Applied(report) => report,
            Ended::Failed(_) => panic!("a failed outcome has no report"),
        }
    }
}
