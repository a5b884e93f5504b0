//! The daemon's observers of a unit's syncs ([`crate::sync::Observer`]): its metrics and its
//! readiness status (/readyz, sd_notify `STATUS=`). The log is [`crate::report::Log`].

use std::sync::Arc;

use crate::daemon::metrics::Metrics;
use crate::daemon::trigger::{Statuses, UnitStatus};
use crate::health::Counts;
use crate::health::record::SyncResult;
use crate::sync::Report;
use crate::sync::follow::Followed;
use crate::sync::outcome::{Cause, Failure, Observer, Outcome, Wait};
use crate::telemetry::Masked;

/// Counts a unit's syncs in the metrics: durations and actions at the apply; at the end, the
/// members by health as the engine last judged them (`gitward_objects_health`, counted as
/// `gitward status` counts them), `gitward_time_to_healthy_seconds` when a wait ended healthy,
/// errors of a sync that failed as a whole (and refusals of unsigned revisions), and the
/// unit's readiness, failure streak, members, cache size and timings
/// ([`Metrics::observe_outcome`]).
pub(super) struct Metered {
    pub(super) unit: String,
    pub(super) metrics: Arc<Metrics>,
}

impl Observer for Metered {
    fn applied(&mut self, _cause: &Cause, report: &Report, tracked: usize) {
        self.metrics.observe_sync(report, tracked);
    }

    fn finished(&mut self, outcome: &Outcome) {
        if let Some(failure) = &outcome.failure {
            if let crate::sync::Error::Source(crate::source::Error::Unverified { failure: why, .. }) = &failure.error {
                self.metrics.observe_refused(&self.unit, *why);
            }
            self.metrics.observe_error(&self.unit, &failure.error);
        }
        if let Some(members) = &outcome.live.health {
            let healthy = outcome.health.wait == Wait::Healthy && outcome.health.result == SyncResult::Healthy;
            let took = healthy.then_some(outcome.timings.wait);
            self.metrics.observe_health(&self.unit, members, took);
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.metrics.observe_outcome(&self.unit, outcome, i64::try_from(now).unwrap_or(i64::MAX));
    }

    fn followed(&mut self, followed: &Followed) {
        self.metrics.observe_followed(&self.unit, followed.result, &followed.counts);
    }
}

/// Publishes that `unit` backs off until `at` (its next attempt), or no longer does (`None`),
/// when that differs from `shown` (then updated): in its status (`/readyz?verbose`),
/// `gitward_unit_backoff_until_seconds` and the log.
pub(super) fn backoff(
    unit: &str,
    (status, metrics): (&Statuses, &Metrics),
    shown: &mut Option<tokio::time::Instant>,
    at: Option<tokio::time::Instant>,
) {
    if *shown == at {
        return;
    }
    *shown = at;
    let wait = at.map(|at| at.saturating_duration_since(tokio::time::Instant::now()));
    let until = wait.map(|wait| std::time::SystemTime::now() + wait);
    let unix = until.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    status.set_backoff(unit, until);
    metrics.set_backoff(unit, unix.map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)));
    if let Some(wait) = wait {
        let retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        tracing::info!(unit, retry_in_ms, "backing off");
    }
}

/// Keeps a unit's readiness status: ready once a sync ran against a cluster that answered
/// (objects the API server refused leave it ready, an outage does not; a parse error keeps
/// what it was, [`crate::daemon::decide::keeps_readiness`]), with the health counts of a
/// judged wait and the last error (the failure's masked message, [`Masked`]).
pub(super) struct Readiness {
    pub(super) unit: String,
    pub(super) status: Statuses,
}

impl Readiness {
    /// Sets the unit's status after `report`'s sync: `ok` whether it ran against a cluster
    /// that answered, `health` the counts of a judged wait, `waiting` while its wait runs.
    pub(super) fn set(&self, report: &Report, ok: bool, health: Option<Counts>, tracked: usize, waiting: bool) {
        let applied_once = ok || self.status.snapshot().get(&self.unit).is_some_and(|s| s.applied_once);
        let status = UnitStatus {
            cache_synced: true,
            last_sync_ok: Some(ok),
            failed_objects: report.changes.counts().failed,
            last_revision: Some(report.revision.to_string()),
            tracked_objects: tracked,
            health,
            waiting,
            applied_once,
            last_error: None,
            suspended: false,
            blocked: None,
            backoff_until: None,
        };
        self.status.set(&self.unit, status);
    }

    fn failed(&self, failure: &Failure) {
        let mut status = self.status.snapshot().remove(&self.unit).unwrap_or_default();
        if !crate::daemon::decide::keeps_readiness(&failure.error) {
            status.last_sync_ok = Some(false);
        }
        status.last_error = Some(match &failure.attempted {
            Some(r) => Masked::new(format!("revision {}: {}", r.short(), failure.message)),
            None => failure.message.clone(),
        });
        self.status.set(&self.unit, status);
    }
}

impl Observer for Readiness {
    fn finished(&mut self, outcome: &Outcome) {
        match (&outcome.report, &outcome.failure) {
            (_, Some(failure)) => self.failed(failure),
            (Some(report), None) => {
                // The members by health as judged (as `gitward status` counts them), not only
                // what the wait covered.
                let health = outcome.health.wait.judged().then(|| outcome.live.health.unwrap_or(outcome.health.counts));
                self.set(report, outcome.live.answered, health, outcome.live.tracked, false);
            }
            (None, None) => {}
        }
    }

    /// The members' health counts follow them between syncs (sd_notify `STATUS=`).
    fn followed(&mut self, followed: &Followed) {
        let mut status = self.status.snapshot().remove(&self.unit).unwrap_or_default();
        if status.waiting {
            return;
        }
        status.health = Some(followed.counts);
        self.status.set(&self.unit, status);
    }
}
