//! What a unit's task publishes besides its observers: its backoff; and the two interfaces
//! the observers of its syncs write through ([`crate::observe::unit`]), implemented by the
//! daemon's status map ([`Statuses`]) and metrics registry ([`Metrics`]).

use std::time::Duration;

use crate::daemon::metrics::Metrics;
use crate::daemon::trigger::{Statuses, UnitStatus};
use crate::health::Counts;
use crate::health::record::SyncResult;
use crate::observe::unit::{ReadinessStore, Synced, UnitMetrics};
use crate::source::VerifyFailure;
use crate::sync::outcome::Outcome;
use crate::sync::{Error, Report};
use crate::telemetry::Masked;

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

impl ReadinessStore for Statuses {
    fn synced(&self, unit: &str, synced: Synced) {
        let applied_once = synced.ok || self.snapshot().get(unit).is_some_and(|s| s.applied_once);
        let status = UnitStatus {
            cache_synced: true,
            last_sync_ok: Some(synced.ok),
            failed_objects: synced.failed_objects,
            last_revision: Some(synced.revision),
            tracked_objects: synced.tracked,
            health: synced.health,
            waiting: synced.waiting,
            applied_once,
            last_error: None,
            suspended: false,
            blocked: None,
            backoff_until: None,
        };
        self.set(unit, status);
    }

    fn failed(&self, unit: &str, keeps_readiness: bool, error: Masked) {
        let mut status = self.snapshot().remove(unit).unwrap_or_default();
        if !keeps_readiness {
            status.last_sync_ok = Some(false);
        }
        status.last_error = Some(error);
        self.set(unit, status);
    }

    fn followed(&self, unit: &str, counts: Counts) {
        let mut status = self.snapshot().remove(unit).unwrap_or_default();
        if status.waiting {
            return;
        }
        status.health = Some(counts);
        self.set(unit, status);
    }
}

impl UnitMetrics for Metrics {
    fn observe_sync(&self, report: &Report, tracked: usize) {
        Metrics::observe_sync(self, report, tracked);
    }

    fn observe_refused(&self, unit: &str, reason: VerifyFailure) {
        Metrics::observe_refused(self, unit, reason);
    }

    fn observe_error(&self, unit: &str, error: &Error) {
        Metrics::observe_error(self, unit, error);
    }

    fn observe_health(&self, unit: &str, counts: &Counts, time_to_healthy: Option<Duration>) {
        Metrics::observe_health(self, unit, counts, time_to_healthy);
    }

    fn observe_outcome(&self, unit: &str, outcome: &Outcome, now: i64) {
        Metrics::observe_outcome(self, unit, outcome, now);
    }

    fn observe_followed(&self, unit: &str, result: SyncResult, counts: &Counts) {
        Metrics::observe_followed(self, unit, result, counts);
    }
}
