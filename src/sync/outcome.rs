//! How a sync ends: the engine finishes it itself — the health step, the post hooks and the
//! record on the ApplySet parent — and hands back one [`Outcome`] (revision, trigger, counts,
//! per-object results, health, error, timings): its objects sent ([`Ended::Applied`]) or the
//! sync failed as a whole ([`Ended::Failed`]). Whatever tells of a sync only *observes* it:
//! the observers of the `observe` module (the log events, the stdout line of `gitward sync`,
//! the daemon's metrics and readiness status, Kubernetes Events, notifiers, the dashboard) are
//! told the outcome by whoever drives the engine; the engine tells no one.
//!
//! The health step: [`Engine::begin_health`](crate::sync::Engine::begin_health) decides whether a wait runs at all
//! ([`Wait::before`]) and, when one is due, records it on the parent and hands it to the
//! caller with a [`Pending`] end; [`Engine::finish`](crate::sync::Engine::finish) judges how the wait ended, runs the post
//! hooks and records the result. Running the wait is the caller's: `gitward sync --wait` runs
//! it to the end, the daemon beside its one loop, on a handle it can cancel (a newer
//! revision, SIGHUP, shutdown).
//!
//! The record is written by the engine from the outcome before any observer sees it, not by an
//! observer: the next sync reads what it recorded (the revision, the result, what is still
//! unhealthy), so its write is part of the sync, and observers neither wait nor fail.

use std::fmt;
use std::time::{Duration, Instant};

use super::{Error, Report};
use crate::health::record::SyncResult;
use crate::health::wait::{HealthWait, WaitEnd};
use crate::health::{Counts, Health, Status};
use crate::object::ObjectRef;
use crate::source::Revision;
use crate::telemetry::Masked;

/// What asked for a sync, as its outcome names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause {
    /// The trigger's name: `cli` for `gitward sync`, else the daemon's trigger kinds
    /// (`startup`, `poll`, `push`, `webhook`, `resync`, `drift`, `retry`, `reload`, …).
    pub name: &'static str,
    /// When it was asked for, for `trigger_to_applied_ms`.
    pub at: Instant,
    /// True for a push or a webhook: someone pushed, and `trigger applied` (or `trigger
    /// failed`) says how it ended.
    pub push: bool,
}

impl Cause {
    /// `gitward sync`, asked for now.
    pub fn cli() -> Self {
        Self { name: "cli", at: Instant::now(), push: false }
    }

    /// The `trigger` field of the events that name it: the daemon's trigger kind; `None` (the
    /// field left out) for `gitward sync`, which has no trigger to name.
    pub fn trigger(&self) -> Option<&'static str> {
        (self.name != "cli").then_some(self.name)
    }
}

/// How the health wait after a sync ended: the `wait` field of `sync complete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Every object waited on became `Current`.
    Healthy,
    /// An object waited on is `Failed`; the wait stopped at once.
    Degraded,
    /// `health_timeout` passed with objects not yet `Current`.
    Timeout,
    /// Cancelled before it ended: a new revision, SIGHUP or shutdown.
    Cancelled,
    /// No wait: `health_timeout = 0`.
    Disabled,
    /// No wait: objects failed to apply.
    Skipped,
    /// Nothing waited on: `gitward sync` without `--wait`, or no member with health changed,
    /// moved since it was last judged, or was left unhealthy.
    None,
}

impl Wait {
    /// The lowercase name for logs: `healthy`, `degraded`, `timeout`, `cancelled`,
    /// `disabled`, `skipped`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Wait::Healthy => "healthy",
            Wait::Degraded => "degraded",
            Wait::Timeout => "timeout",
            Wait::Cancelled => "cancelled",
            Wait::Disabled => "disabled",
            Wait::Skipped => "skipped",
            Wait::None => "none",
        }
    }

    /// The wait a sync gets before any health is read, when none is to run: `Skipped` when
    /// `failed` (objects failed to apply), `None` when no wait was `asked` for (`gitward sync`
    /// without `--wait`), `Disabled` when `timeout` is zero. `Option::None`: a wait is due.
    pub fn before(failed: bool, asked: bool, timeout: Duration) -> Option<Wait> {
        if failed {
            Some(Wait::Skipped)
        } else if !asked {
            Some(Wait::None)
        } else if timeout.is_zero() {
            Some(Wait::Disabled)
        } else {
            None
        }
    }

    /// True when the wait ended by itself, or found nothing to wait on: the health counts
    /// then say what the objects' health is (sd_notify `STATUS=`, `gitward_objects_health`).
    /// False for a wait that was cancelled, disabled or skipped.
    pub fn judged(self) -> bool {
        matches!(self, Wait::Healthy | Wait::Degraded | Wait::Timeout | Wait::None)
    }

    /// True when a wait ran over objects (it ended by itself or was cancelled): only then do
    /// the health counts of `sync complete` count something, the objects it waited on. A sync
    /// with nothing to wait on (`none`), or whose wait was `disabled` or `skipped`, logs no
    /// counts: `healthy=0 … result=healthy` read as a contradiction.
    pub fn waited(self) -> bool {
        matches!(self, Wait::Healthy | Wait::Degraded | Wait::Timeout | Wait::Cancelled)
    }
}

impl From<WaitEnd> for Wait {
    fn from(end: WaitEnd) -> Self {
        match end {
            WaitEnd::Healthy => Wait::Healthy,
            WaitEnd::Degraded => Wait::Degraded,
            WaitEnd::TimedOut => Wait::Timeout,
        }
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the health wait after a sync found, for the `sync complete` event and the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthSummary {
    /// Objects the wait covered, by health bucket at its end (zero when none ran).
    pub counts: Counts,
    /// How the wait ended.
    pub wait: Wait,
    /// What is recorded on the ApplySet parent.
    pub result: SyncResult,
}

impl HealthSummary {
    /// The summary of a sync whose wait did not run (`wait` from [`Wait::before`]): `failed`
    /// when it was skipped for objects that failed to apply, else `applied` (nothing judged).
    pub fn unwaited(wait: Wait) -> Self {
        let result = if wait == Wait::Skipped { SyncResult::Failed } else { SyncResult::Applied };
        Self { counts: Counts::default(), wait, result }
    }

    /// True when `sync complete` is logged at warn: the result is `failed` or `degraded`, or the
    /// wait timed out (someone should look).
    pub fn warns(&self) -> bool {
        matches!(self.result, SyncResult::Failed | SyncResult::Degraded) || self.wait == Wait::Timeout
    }
}

/// Objects a wait left not `Current`, with their last status (`None`: never read).
pub type NotReady = Vec<(ObjectRef, Option<Status>)>;

/// How long the parts of a sync took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timings {
    /// Wall time of the sync up to its health wait: its fetch, render and apply.
    pub apply: Duration,
    /// Of `apply`, the time spent loading the revision: reading its files, rendering them
    /// (kustomize, Helm, SOPS) and parsing the manifests; zero for a self-heal, which renders
    /// nothing, or a sync that failed as a whole.
    pub render: Duration,
    /// Wall time of the health wait: zero when none ran; the timeout itself when it timed out.
    pub wait: Duration,
}

/// A sync that failed as a whole, before or while its objects were read (a parse or render
/// error, an unknown kind, git or the cluster unreachable, a refused revision).
#[derive(Debug)]
pub struct Failure {
    /// The unit's name.
    pub unit: String,
    /// Why: for what the error is (metric labels, readiness, a refused revision's fields).
    pub error: Error,
    /// Why, as text: the error's chain without the unit's name
    /// ([`crate::telemetry::unit_error`]), masked once here ([`Masked`]). Every place that
    /// shows the error — the log, `/readyz`, the dashboard, Events, notifications, the
    /// parent's record — shows this.
    pub message: Masked,
    /// The revision the failed sync attempted, once its fetch resolved one.
    pub attempted: Option<Revision>,
    /// The revision last applied, which stays in force (named when a revision is refused).
    pub kept: Option<Revision>,
}

impl Failure {
    /// The failure of `unit`'s sync with `error`; its [`Failure::message`] masked now, so a
    /// value registered while the sync ran (a decrypted or `from` Secret value) is `***`.
    pub fn new(unit: String, error: Error, attempted: Option<Revision>, kept: Option<Revision>) -> Self {
        let message = Masked::new(crate::telemetry::unit_error(&unit, &error));
        Self { unit, error, message, attempted, kept }
    }
}

/// The cluster as a sync left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    /// False when objects failed because the cluster did not answer (an outage, which takes
    /// readiness); true when it answered, or nothing failed.
    pub answered: bool,
    /// Members the unit's cache tracks.
    pub tracked: usize,
    /// The members by health bucket as the engine last judged them
    /// ([`Engine::members_health`](crate::sync::Engine::members_health): counted as `gitward status` counts them); `None` until a
    /// health wait of this engine judged the unit.
    pub health: Option<Counts>,
    /// An estimate of the bytes the unit's metadata cache holds
    /// ([`crate::cluster::cache::MetadataCache::estimated_bytes`]).
    pub cache_bytes: usize,
}

/// Whether a sync's objects were sent or the sync failed as a whole: one or the other.
#[derive(Debug)]
pub enum Ended {
    /// The objects were sent (each with its own result, failures included): the sync's report
    /// (the revision, counts and per-object results, post hooks included).
    Applied(Report),
    /// The sync failed as a whole, before or while its objects were read.
    Failed(Failure),
}

/// How one sync ended: what every observer of the `observe` module sees.
#[derive(Debug)]
pub struct Outcome {
    /// What asked for it.
    pub cause: Cause,
    /// Its objects sent, or its failure as a whole.
    pub ended: Ended,
    /// How its health step ended (for a failure: skipped, `failed`).
    pub health: HealthSummary,
    /// What the wait left not `Current` (empty when it ended healthy or did not run).
    pub not_ready: NotReady,
    /// How many of the report's entries, at its end, are post hooks: run after the wait.
    pub post_hooks: usize,
    /// The cluster at the end.
    pub live: Live,
    /// How long it took.
    pub timings: Timings,
}

impl Outcome {
    /// The report of a sync whose objects were sent; `None` for one that failed as a whole.
    pub fn report(&self) -> Option<&Report> {
        match &self.ended {
            Ended::Applied(report) => Some(report),
            Ended::Failed(_) => None,
        }
    }

    /// The failure of a sync that failed as a whole; `None` for one whose objects were sent.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.ended {
            Ended::Applied(_) => None,
            Ended::Failed(failure) => Some(failure),
        }
    }

    /// The unit's name.
    pub fn unit(&self) -> &str {
        match &self.ended {
            Ended::Applied(r) => &r.unit,
            Ended::Failed(f) => &f.unit,
        }
    }

    /// The revision the sync applied, or attempted when it failed as a whole (`None`: its
    /// fetch resolved none).
    pub fn revision(&self) -> Option<&Revision> {
        match &self.ended {
            Ended::Applied(r) => Some(&r.revision),
            Ended::Failed(f) => f.attempted.as_ref(),
        }
    }

    /// True when the revision applied whole and its health (when judged) is not failed,
    /// degraded or still progressing: `gitward sync` exits 0 on it.
    pub fn succeeded(&self) -> bool {
        self.report().is_some_and(|r| !r.changes.has_failures())
            && !matches!(self.health.result, SyncResult::Failed | SyncResult::Degraded | SyncResult::Progressing)
    }
}

/// A sync whose objects were sent and whose health wait is due, as [`Engine::finish`](crate::sync::Engine::finish) needs it.
#[derive(Debug)]
pub struct Pending {
    /// The sync's report.
    pub(super) report: Report,
    /// Why the sync ran.
    pub(super) cause: Cause,
    /// The engine judges the unit's health with the wait ([`Engine::record_sync`](crate::sync::Engine::record_sync)'s `judged`).
    pub(super) judged: bool,
    /// When the wait began.
    pub(super) started: Instant,
}

impl Pending {
    /// The sync's report.
    pub fn report(&self) -> &Report {
        &self.report
    }
}

/// How the health step after a sync's apply goes on ([`Engine::begin_health`](crate::sync::Engine::begin_health)).
pub enum HealthStep {
    /// No wait runs: the sync is finished and recorded.
    Done(Box<Outcome>),
    /// A wait is due: run it, then [`Engine::finish`](crate::sync::Engine::finish) with how it ended.
    Wait(Box<(Pending, HealthWait)>),
}

/// The targets of `wait` that are not `Current`, with their last status.
pub(super) fn not_ready(wait: &HealthWait) -> NotReady {
    let statuses = wait.statuses();
    wait.targets()
        .iter()
        .map(|t| (t.object.clone(), statuses.get(&t.object).cloned()))
        .filter(|(_, s)| s.as_ref().is_none_or(|s| s.health != Health::Current))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_wait_runs_for_a_failed_apply_an_unasked_wait_or_a_zero_timeout() {
        let minute = Duration::from_secs(60);
        assert_eq!(Wait::before(true, true, minute), Some(Wait::Skipped));
        assert_eq!(Wait::before(true, false, Duration::ZERO), Some(Wait::Skipped), "a failure wins");
        assert_eq!(Wait::before(false, false, minute), Some(Wait::None));
        assert_eq!(Wait::before(false, false, Duration::ZERO), Some(Wait::None), "not asked wins over disabled");
        assert_eq!(Wait::before(false, true, Duration::ZERO), Some(Wait::Disabled));
        assert_eq!(Wait::before(false, true, minute), None);
    }

    #[test]
    fn a_wait_that_did_not_run_records_failed_only_when_objects_failed() {
        assert_eq!(HealthSummary::unwaited(Wait::Skipped).result, SyncResult::Failed);
        assert_eq!(HealthSummary::unwaited(Wait::Disabled).result, SyncResult::Applied);
        assert_eq!(HealthSummary::unwaited(Wait::None).result, SyncResult::Applied);
        assert_eq!(HealthSummary::unwaited(Wait::None).counts, Counts::default());
    }

    #[test]
    fn each_wait_end_names_its_wait_and_only_waits_that_ended_count_health() {
        assert_eq!(Wait::from(WaitEnd::Healthy).as_str(), "healthy");
        assert_eq!(Wait::from(WaitEnd::Degraded).as_str(), "degraded");
        assert_eq!(Wait::from(WaitEnd::TimedOut).as_str(), "timeout");
        let judged: Vec<&str> =
            [Wait::Healthy, Wait::Degraded, Wait::Timeout, Wait::Cancelled, Wait::Disabled, Wait::Skipped, Wait::None]
                .into_iter()
                .filter(|w| w.judged())
                .map(Wait::as_str)
                .collect();
        assert_eq!(judged, ["healthy", "degraded", "timeout", "none"]);
    }

    #[test]
    fn sync_complete_warns_when_failed_degraded_or_timed_out() {
        let summary = |wait, result| HealthSummary { counts: Counts::default(), wait, result };
        assert!(summary(Wait::Skipped, SyncResult::Failed).warns());
        assert!(summary(Wait::Degraded, SyncResult::Degraded).warns());
        assert!(summary(Wait::Timeout, SyncResult::Progressing).warns());
        assert!(!summary(Wait::Cancelled, SyncResult::Progressing).warns());
        assert!(!summary(Wait::Healthy, SyncResult::Healthy).warns());
        assert!(!summary(Wait::None, SyncResult::Applied).warns());
    }

    #[test]
    fn an_outcome_names_its_unit_and_revision_whether_it_applied_or_failed() {
        let failed = Outcome::failed("shop", Error::Task("the task panicked".into()));
        assert_eq!((failed.unit(), failed.revision()), ("shop", None));
        assert!(failed.report().is_none() && failed.failure().is_some());
        assert!(!failed.succeeded(), "failed as a whole: nothing was applied");
        let applied =
            Outcome::applied(crate::sync::build::report("shop", "82edb11", &[]), Wait::None, SyncResult::Applied);
        assert_eq!((applied.unit(), applied.revision().map(|r| r.0.as_str())), ("shop", Some("82edb11")));
        assert!(applied.succeeded());
    }
}
