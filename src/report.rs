//! What gitward reports of a sync: the log events of its [`Report`] and the health step that
//! ends it, shared by `gitward sync` and the daemon's unit tasks.
//!
//! Events: one per object that is not `unchanged` (`object`, `action`, `reason`; `unchanged`
//! ones at debug), one `health` event per object of the wait whose health changes, then one
//! `sync complete` event with the counts by action and by health (of the objects the wait
//! covered, left out when none ran: `wait="none"` with `result="healthy"` means nothing with
//! health changed or was left unhealthy, so nothing was counted), how the wait ended
//! ([`Wait`]) and the result recorded on the ApplySet parent (STYLE.md, Logs) — at warn when
//! the result is `failed` or `degraded` or the wait timed out. Secret data never reaches a log:
//! the engine's messages carry refs and API server messages only.
//!
//! The health step: [`begin`] decides whether a wait runs at all ([`Wait::before`]) and asks
//! the engine for it; [`judge`] turns how it ended into a [`HealthSummary`]. Running the wait
//! is the caller's: `gitward sync --wait` runs it to the end, a unit task runs it while it
//! listens for triggers and may cancel it.

use std::fmt;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::changeset::Action;
use crate::health::record::SyncResult;
use crate::health::wait::{HealthWait, Outcome};
use crate::health::{Counts, Health, Status};
use crate::object::ObjectRef;
use crate::sync::{Engine, Report};

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
    /// Nothing waited on: `gitward sync` without `--wait`, or no member with health changed or
    /// was left unhealthy.
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

impl From<Outcome> for Wait {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Healthy => Wait::Healthy,
            Outcome::Degraded => Wait::Degraded,
            Outcome::TimedOut => Wait::Timeout,
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

/// How the health step after a sync's apply goes on ([`begin`]).
pub enum HealthStep {
    /// No wait runs: the summary to log and record.
    Done {
        /// What to log and record.
        summary: HealthSummary,
        /// The engine judged the unit's health ([`Engine::record_sync`]'s `judged`).
        judged: bool,
    },
    /// A wait over `wait`'s targets is due: run it, then [`judge`] how it ended.
    Wait {
        /// The wait, not yet run.
        wait: HealthWait,
        /// The engine judges the unit's health with it ([`Engine::record_sync`]'s `judged`).
        judged: bool,
    },
}

/// Starts the health step after `report`'s apply: no wait when [`Wait::before`] says so (a
/// wait is `asked` for in the daemon and by `gitward sync --wait`); else the engine's wait
/// ([`Engine::health_wait`]), judged at once as healthy (`wait="none"`) when it has no
/// targets. A wait that is due is recorded on the ApplySet parent before it runs
/// ([`Engine::record_waiting`]: the revision, its apply time, the attempt and what is waited
/// for), so that `gitward status` tells the truth meanwhile; a failed write is logged.
pub async fn begin(engine: &mut Engine, report: &Report, asked: bool) -> HealthStep {
    let failed = report.changes.has_failures();
    if let Some(wait) = Wait::before(failed, asked, engine.health_timeout()) {
        return HealthStep::Done { summary: HealthSummary::unwaited(wait), judged: false };
    }
    let wait = engine.health_wait(report).await;
    let judged = wait.covers_all() || !wait.targets().is_empty();
    if wait.targets().is_empty() {
        // Nothing with health changed and nothing is left unhealthy: nothing to wait on.
        let summary = judge(engine, &wait, Some(Outcome::Healthy)).await;
        return HealthStep::Done { summary: HealthSummary { wait: Wait::None, ..summary }, judged };
    }
    if let Err(e) = engine.record_waiting(report, &wait).await {
        let error = crate::telemetry::error_chain(&e);
        warn!(unit = %report.unit, error, "could not record the health wait on the inventory");
    }
    HealthStep::Wait { wait, judged }
}

/// The summary of `wait` once it ended with `outcome` (`None`: cancelled), with the result the
/// engine judges ([`Engine::judge_health`]; a cancelled wait is `progressing`, so a later no-op
/// sync of the revision cannot call it healthy).
pub async fn judge(engine: &mut Engine, wait: &HealthWait, outcome: Option<Outcome>) -> HealthSummary {
    let result = engine.judge_health(wait, outcome).await;
    let wait_kind = outcome.map_or(Wait::Cancelled, Wait::from);
    HealthSummary { counts: Counts::of(&wait.healths()), wait: wait_kind, result }
}

/// Runs the post hooks of `report`'s revision once its health step has judged it
/// ([`Engine::post_hooks`]), each logged as an `object` event; returns the report with their
/// entries and the summary with the result they give (`failed` when one failed), or `None`
/// when none was due, so a unit without hooks copies nothing.
pub async fn post_hooks(
    engine: &mut Engine,
    report: &Report,
    summary: &HealthSummary,
) -> Option<(Report, HealthSummary)> {
    let (changes, result) = engine.post_hooks(report, summary.result).await?;
    let ran = Report { changes, skipped_files: Vec::new(), ..report.clone() };
    log_objects(&ran);
    let mut report = report.clone();
    report.changes.extend(ran.changes);
    Some((report, HealthSummary { result, ..*summary }))
}

/// Logs one `health` event (`object`, `health`, `reason`, `detail`): an object of the wait has a
/// new health (`Failed` at warn).
pub fn log_health(unit: &str, object: &ObjectRef, status: &Status) {
    let object = object.to_string();
    // `detail`, not `message`: tracing's `message` field is the event's own message.
    let (health, reason, detail) = (status.health.as_str(), status.reason.as_str(), status.message.as_str());
    match status.health {
        Health::Failed => warn!(unit, object, health, reason, detail, "health"),
        _ => info!(unit, object, health, reason, detail, "health"),
    }
}

/// Logs one `kustomization file in a plain unit` event at warn (`file`, `reason`: the config
/// that builds it, [`crate::sync::repo::plain_kustomization`]) per kustomization file the
/// unit's plain read passed over: its patches were applied as objects. Once per revision: the
/// daemon calls it for a revision it has not warned of yet, `gitward sync` for its one sync.
pub fn warn_kustomizations(report: &Report) {
    let (unit, revision) = (report.unit.as_str(), report.revision.to_string());
    for s in report.skipped_files.iter().filter(|s| s.is_kustomization()) {
        warn!(unit, revision, file = %s.file, reason = %s.reason, "kustomization file in a plain unit");
    }
}

/// Logs skipped files (kustomization files aside: [`warn_kustomizations`] tells of those) and
/// each object that is not `unchanged` (at once after the apply; the summary follows the
/// health wait).
pub fn log_objects(report: &Report) {
    let unit = report.unit.as_str();
    let revision = report.revision.to_string();
    for s in report.skipped_files.iter().filter(|s| !s.is_kustomization()) {
        match s.index {
            Some(i) => info!(unit, file = %s.file, document = i + 1, reason = %s.reason, "file skipped"),
            None => info!(unit, file = %s.file, reason = %s.reason, "file skipped"),
        }
    }
    for e in &report.changes.entries {
        let object = e.object.to_string();
        let reason = e.message.as_deref().unwrap_or("");
        match (e.action, &e.message) {
            (Action::Unchanged, _) => debug!(unit, object, action = %e.action, "object"),
            (Action::Failed, _) => warn!(unit, object, action = %e.action, reason, "object failed"),
            (Action::Skipped, _) => warn!(unit, object, action = %e.action, reason, "object skipped"),
            (Action::Conflict, _) => warn!(unit, object, action = %e.action, reason, "object conflict"),
            (_, Some(_)) => info!(unit, object, action = %e.action, reason, "object"),
            (_, None) => info!(unit, object, action = %e.action, "object"),
        }
    }
    for namespace in &report.changes.namespaces_created {
        info!(unit, namespace = namespace.as_str(), "namespace created");
    }
    for (object, reason) in &report.changes.not_members {
        debug!(unit, object = %object, reason = %reason, "labelled but not a member: not pruned");
    }
    if let Some(reason) = &report.changes.prune_refused {
        warn!(unit, revision, reason = %reason, "prune refused");
    }
}

/// The `sync complete` event at the level `$level` (tracing fixes an event's level where it is
/// written).
macro_rules! summary_event {
    ($level:ident, $report:expr, $health:expr) => {{
        let (report, health): (&Report, &HealthSummary) = ($report, $health);
        let unit = report.unit.as_str();
        let revision = report.revision.to_string();
        let c = report.changes.counts();
        // Absent (not zero) when no wait ran: see `Wait::waited`.
        let h = health.wait.waited().then_some(health.counts);
        $level!(
            unit,
            revision,
            created = c.created,
            adopted = c.adopted,
            configured = c.configured,
            unchanged = c.unchanged,
            drift_corrected = c.drift_corrected,
            pruned = c.pruned,
            skipped = c.skipped,
            failed = c.failed,
            conflict = c.conflict,
            namespaces_created = report.changes.namespaces_created.len(),
            applied_early = report.applied_early,
            requests = report.changes.requests,
            duration_ms = report.duration.as_millis() as u64,
            healthy = h.map(|h| h.healthy),
            progressing = h.map(|h| h.progressing),
            degraded = h.map(|h| h.degraded),
            wait = health.wait.as_str(),
            result = health.result.as_str(),
            "sync complete"
        );
    }};
}

/// Logs the `sync complete` event: counts by action, then by health (the objects the wait
/// covered; left out when no wait ran, [`Wait::waited`]), the wait and the result; at warn
/// when [`HealthSummary::warns`], else at info.
pub fn log_summary(report: &Report, health: &HealthSummary) {
    if health.warns() {
        summary_event!(warn, report, health);
    } else {
        summary_event!(info, report, health);
    }
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
    fn each_outcome_names_its_wait_and_only_waits_that_ended_count_health() {
        assert_eq!(Wait::from(Outcome::Healthy).as_str(), "healthy");
        assert_eq!(Wait::from(Outcome::Degraded).as_str(), "degraded");
        assert_eq!(Wait::from(Outcome::TimedOut).as_str(), "timeout");
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
}
