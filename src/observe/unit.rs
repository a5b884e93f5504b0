//! The daemon's observers of a unit's syncs: its metrics ([`Metered`]) and its readiness status
//! (/readyz, sd_notify `STATUS=`: [`Readiness`]). What they write to is the daemon's — its
//! metrics registry and its status map — reached through two small interfaces it implements,
//! [`UnitMetrics`] and [`ReadinessStore`]. The log is [`super::log::Log`].

use std::sync::Arc;
use std::time::Duration;

use super::Observer;
use crate::health::Counts;
use crate::health::record::SyncResult;
use crate::source::VerifyFailure;
use crate::sync::follow::Followed;
use crate::sync::outcome::{Cause, Ended, Failure, Outcome, Wait};
use crate::sync::{Error, Report};
use crate::telemetry::Masked;

/// Where a unit's metrics go (the daemon's registry implements it; each method is the metric
/// family of the same name there).
pub trait UnitMetrics: Send + Sync {
    /// A sync's objects were sent: its duration, actions and requests, revision and members
    /// tracked.
    fn observe_sync(&self, report: &Report, tracked: usize);
    /// A revision of `unit` was refused by `[sync.verify]` for `reason`.
    fn observe_refused(&self, unit: &str, reason: VerifyFailure);
    /// A sync of `unit` failed as a whole with `error`.
    fn observe_error(&self, unit: &str, error: &Error);
    /// `unit`'s members by health as last judged, and how long a wait that ended healthy took.
    fn observe_health(&self, unit: &str, counts: &Counts, time_to_healthy: Option<Duration>);
    /// A sync of `unit` ended with `outcome` at unix time `now` (seconds): its readiness, failure
    /// streak, members, cache size and timings.
    fn observe_outcome(&self, unit: &str, outcome: &Outcome, now: i64);
    /// `unit`'s members were judged again between syncs: its result and health counts.
    fn observe_followed(&self, unit: &str, result: SyncResult, counts: &Counts);
}

/// Counts a unit's syncs in the metrics: durations and actions at the apply; at the end, the
/// members by health as the engine last judged them (`gitward_objects_health`, counted as
/// `gitward status` counts them), `gitward_time_to_healthy_seconds` when a wait ended healthy,
/// errors of a sync that failed as a whole (and refusals of unsigned revisions), and the
/// unit's readiness, failure streak, members, cache size and timings
/// ([`UnitMetrics::observe_outcome`]).
pub struct Metered {
    unit: String,
    metrics: Arc<dyn UnitMetrics>,
}

impl Metered {
    /// The observer that counts `unit`'s syncs in `metrics`.
    pub fn new(unit: String, metrics: Arc<dyn UnitMetrics>) -> Self {
        Self { unit, metrics }
    }
}

impl Observer for Metered {
    fn applied(&mut self, _cause: &Cause, report: &Report, tracked: usize) {
        self.metrics.observe_sync(report, tracked);
    }

    fn finished(&mut self, outcome: &Outcome) {
        if let Ended::Failed(failure) = &outcome.ended {
            if let Error::Source(crate::source::Error::Unverified { failure: why, .. }) = &failure.error {
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

/// What a sync that ran says of its unit's readiness ([`ReadinessStore::synced`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// It ran against a cluster that answered (objects the API server refused included).
    pub ok: bool,
    /// Objects it could not apply.
    pub failed_objects: usize,
    /// The revision it applied.
    pub revision: String,
    /// Members the unit's cache tracks.
    pub tracked: usize,
    /// The members by health when a wait judged them; `None` when none did.
    pub health: Option<Counts>,
    /// Its health wait is running.
    pub waiting: bool,
}

/// Where a unit's readiness status is kept (the daemon's status map, read by `/readyz`,
/// sd_notify `STATUS=` and the dashboard, implements it).
pub trait ReadinessStore: Send + Sync {
    /// A sync of `unit` ran: its status becomes `synced`, its last error cleared; it counts as
    /// applied once from the first `ok` sync on.
    fn synced(&self, unit: &str, synced: Synced);
    /// A sync of `unit` failed as a whole with `error` (masked): the unit becomes not ready
    /// unless `keeps_readiness` ([`keeps_readiness`]).
    fn failed(&self, unit: &str, keeps_readiness: bool, error: Masked);
    /// `unit`'s members were judged again between syncs: their health counts follow them,
    /// unless a health wait is running (it judges them itself).
    fn followed(&self, unit: &str, counts: Counts);
}

/// Whether a sync that failed as a whole with `error` leaves the unit's readiness as it was: a
/// revision that does not parse (a manifest error, an unreadable blob aside) is bad
/// input that changes nothing — the last revision applied stays in force, and a replica taken
/// out of its Service would miss the webhook of the fix. Every other failure (git, render, the
/// cluster) makes the unit not ready.
pub fn keeps_readiness(error: &Error) -> bool {
    matches!(error, Error::Manifest(e) if e.is_bad_input())
}

/// Keeps a unit's readiness status: ready once a sync ran against a cluster that answered
/// (objects the API server refused leave it ready, an outage does not; a parse error keeps
/// what it was, [`keeps_readiness`]), with the health counts of a judged wait and the last error
/// (the failure's masked message, [`Masked`]).
pub struct Readiness {
    unit: String,
    store: Arc<dyn ReadinessStore>,
}

impl Readiness {
    /// The observer that keeps `unit`'s readiness in `store`.
    pub fn new(unit: String, store: Arc<dyn ReadinessStore>) -> Self {
        Self { unit, store }
    }

    /// Sets the unit's status after `report`'s sync: `ok` whether it ran against a cluster
    /// that answered, `health` the counts of a judged wait, `waiting` while its wait runs.
    pub fn set(&self, report: &Report, ok: bool, health: Option<Counts>, tracked: usize, waiting: bool) {
        let failed_objects = report.changes.counts().failed;
        let revision = report.revision.to_string();
        self.store.synced(&self.unit, Synced { ok, failed_objects, revision, tracked, health, waiting });
    }

    fn failed(&self, failure: &Failure) {
        let error = match &failure.attempted {
            Some(r) => Masked::new(format!("revision {}: {}", r.short(), failure.message)),
            None => failure.message.clone(),
        };
        self.store.failed(&self.unit, keeps_readiness(&failure.error), error);
    }
}

impl Observer for Readiness {
    fn finished(&mut self, outcome: &Outcome) {
        match &outcome.ended {
            Ended::Failed(failure) => self.failed(failure),
            Ended::Applied(report) => {
                // The members by health as judged (as `gitward status` counts them), not only
                // what the wait covered.
                let health = outcome.health.wait.judged().then(|| outcome.live.health.unwrap_or(outcome.health.counts));
                self.set(report, outcome.live.answered, health, outcome.live.tracked, false);
            }
        }
    }

    /// The members' health counts follow them between syncs (sd_notify `STATUS=`).
    fn followed(&mut self, followed: &Followed) {
        self.store.followed(&self.unit, followed.counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_revision_that_does_not_parse_keeps_the_units_readiness() {
        let file = || "a.yaml".to_string();
        let parse = crate::manifest::Error::Encoding { file: file(), message: "invalid UTF-8".into() };
        assert!(keeps_readiness(&Error::Manifest(parse)));
        let blob = crate::manifest::Error::ReadBlob { file: file(), message: "object not found".into() };
        assert!(!keeps_readiness(&Error::Manifest(blob)), "the mirror, not the content");
        assert!(!keeps_readiness(&Error::Task("cancelled".into())));
    }
}
