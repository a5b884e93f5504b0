//! The engine's side of the health-wait phase.
//!
//! After an apply the task waits (at most the unit's `health_timeout`) for the objects the sync
//! changed, and the members an earlier wait left not `Current`, to become healthy, logging a
//! `health` event per change (`wait="none"` when there is nothing to wait on); then logs
//! `sync complete`, updates metrics and status, and records the result and the attempt on the
//! ApplySet parent ([`Engine::record_sync`]), in place of the wait in progress that
//! [`crate::report::begin`] recorded with the apply.
//!
//! The wait runs beside the task's one loop, which goes on listening (`machine` decides what
//! each event does): shutdown and SIGHUP (a reload) cancel the wait; a trigger from the channel
//! or a poll tick fetches, and a revision other than the one waited for cancels the wait and is
//! synced at once (a new revision always wins over waiting for the old one; it records itself,
//! the cancelled wait records nothing); a trigger asked for explicitly that finds the same
//! revision runs after the wait. Drifted objects are healed during the wait, without a sync
//! slot (so an object that never becomes healthy does not stop self-heal); the resync waits
//! until it ends.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::warn;

use super::Ctx;
use crate::daemon::trigger::UnitStatus;
use crate::health::Counts;
use crate::health::record::SyncResult;
use crate::health::wait::{HealthWait, Outcome};
use crate::report::{self, HealthStep, HealthSummary};
use crate::sync::{Engine, Report};
use crate::telemetry;

/// The wait as it runs: it owns its [`HealthWait`] and gives it back when it ends or is
/// cancelled, so that its last statuses can be judged either way.
type Running = Pin<Box<dyn Future<Output = (HealthWait, Option<Outcome>)> + Send>>;

/// A health wait in progress, and what its end needs.
pub(super) struct Waiting {
    /// The sync whose changes are waited on.
    report: Report,
    /// The engine judges the unit's health with the wait ([`Engine::record_sync`]'s `judged`).
    judged: bool,
    /// When the wait began, for `gitward_time_to_healthy_seconds`.
    started: Instant,
    /// The wait.
    run: Running,
    /// Dropping it cancels the wait ([`Waiting::cancel`]).
    cancel: Option<oneshot::Sender<()>>,
}

impl Waiting {
    /// Starts `wait` for `report`'s unit, bounded by `timeout`.
    fn start(mut wait: HealthWait, timeout: std::time::Duration, report: Report, judged: bool) -> Self {
        let (cancel, cancelled) = oneshot::channel::<()>();
        let unit = report.unit.clone();
        let run = Box::pin(async move {
            let outcome = tokio::select! {
                biased;
                _ = cancelled => None,
                outcome = wait.run(timeout, |object, status| report::log_health(&unit, object, status)) => Some(outcome),
            };
            (wait, outcome)
        });
        Self { report, judged, started: Instant::now(), run, cancel: Some(cancel) }
    }

    /// Resolves when the wait ends by itself. Poll it no more once it has.
    pub(super) async fn ended(&mut self) -> (HealthWait, Outcome) {
        match (&mut self.run).await {
            (wait, Some(outcome)) => (wait, outcome),
            // Only a cancel ends it without an outcome, and a cancelled wait is not polled here.
            (_, None) => std::future::pending().await,
        }
    }

    /// Cancels the wait and takes its [`HealthWait`] back.
    async fn cancel(&mut self) -> HealthWait {
        self.cancel.take();
        (&mut self.run).await.0
    }
}

impl Ctx {
    /// Starts the health step of `report` ([`report::begin`]): the wait, or — skipped,
    /// disabled, nothing to wait on — `None`, the sync finished and recorded at once.
    pub(super) async fn begin_wait(&mut self, report: Report) -> Option<Waiting> {
        match report::begin(&mut self.engine, &report, true).await {
            HealthStep::Done { summary, judged } => {
                if summary.wait.judged() {
                    self.metrics.observe_health(&self.unit, &summary.counts, None);
                }
                self.finish(&report, &summary, judged, true).await;
                None
            }
            HealthStep::Wait { wait, judged } => {
                // Ready (and READY=1) follows the apply, not the wait.
                self.set_status(&report, true, None);
                self.set_waiting(true);
                let timeout = self.engine.health_timeout();
                Some(Waiting::start(wait, timeout, report, judged))
            }
        }
    }

    /// Ends `waiting`: with the outcome it `ended` with, else cancelled; judges it
    /// ([`report::judge`]; a cancelled one is judged as progressing, so a later no-op sync of
    /// this revision cannot call it healthy, and waits for what is still not healthy), and
    /// finishes the sync, recorded when `record`.
    pub(super) async fn end_wait(&mut self, mut waiting: Waiting, ended: Option<(HealthWait, Outcome)>, record: bool) {
        let (wait, outcome) = match ended {
            Some((wait, outcome)) => (wait, Some(outcome)),
            None => (waiting.cancel().await, None),
        };
        let summary = report::judge(&mut self.engine, &wait, outcome).await;
        if outcome.is_some() {
            let took = (summary.result == SyncResult::Healthy).then(|| waiting.started.elapsed());
            self.metrics.observe_health(&self.unit, &summary.counts, took);
        }
        self.finish(&waiting.report, &summary, waiting.judged, record).await;
    }

    /// The end of a sync's health step: `sync complete` logged, the unit's status set, the
    /// result and the attempt recorded on the ApplySet parent when `record`.
    async fn finish(&mut self, report: &Report, summary: &HealthSummary, judged: bool, record: bool) {
        // Post hooks run once the revision is judged healthy (not after a cancelled wait).
        let after_hooks = if record { report::post_hooks(&mut self.engine, report, summary).await } else { None };
        let (report, summary) = after_hooks.as_ref().map_or((report, summary), |(r, s)| (r, s));
        report::log_summary(report, summary);
        // Objects the API server refused leave the unit ready; failures because it did not
        // answer (an outage) do not.
        let ran = !report.changes.has_failures() || self.engine.cluster_answers().await;
        self.set_status(report, ran, summary.wait.judged().then_some(summary.counts));
        if record {
            record_sync(&mut self.engine, &self.unit, report, summary.result, judged).await;
        }
    }

    fn set_waiting(&self, waiting: bool) {
        let mut status = self.status.snapshot().remove(&self.unit).unwrap_or_default();
        status.waiting = waiting;
        self.status.set(&self.unit, status);
    }

    fn set_status(&self, report: &Report, ok: bool, health: Option<Counts>) {
        let applied_once = ok || self.status.snapshot().get(&self.unit).is_some_and(|s| s.applied_once);
        let status = UnitStatus {
            cache_synced: true,
            last_sync_ok: Some(ok),
            failed_objects: report.changes.counts().failed,
            last_revision: Some(report.revision.to_string()),
            tracked_objects: self.engine.cache().len(),
            health,
            waiting: false,
            applied_once,
            last_error: None,
        };
        self.status.set(&self.unit, status);
    }
}

/// Records the result and the attempt on the ApplySet parent; a failure is logged.
async fn record_sync(engine: &mut Engine, unit: &str, report: &Report, result: SyncResult, judged: bool) {
    if let Err(e) = engine.record_sync(report, result, judged).await {
        warn!(unit, error = %telemetry::error_chain(&e), "could not record the sync result on the inventory");
    }
}
