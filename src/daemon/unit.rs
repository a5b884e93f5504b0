//! One unit's task: waits for triggers, runs at most one sync at a time (one more may be
//! queued), backs off on failure, and publishes status and metrics. Its [`Engine`] — git
//! mirror, parse cache, discovery, metadata watches — stays warm between syncs.
//!
//! The loop is a small state machine over `select!`: a queued trigger runs first; otherwise
//! the next of shutdown, a trigger from the channel (push, webhook, reload), the poll tick, the
//! resync tick, a debounced drift event, or the backoff retry.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep_until};
use tracing::{error, info};

use super::backoff::Backoff;
use super::metrics::Metrics;
use super::trigger::{Status, Trigger, TriggerKind, UnitStatus};
use crate::source::Revision;
use crate::sync::{Engine, Report};
use crate::telemetry;

/// How long drift events are gathered before a self-heal sync starts.
pub const DRIFT_DEBOUNCE: Duration = Duration::from_millis(500);

/// Timing of a unit's task.
#[derive(Debug, Clone)]
pub struct UnitTiming {
    /// Poll interval (fetch; sync when the revision moved).
    pub interval: Duration,
    /// Full resync interval.
    pub resync_interval: Duration,
    /// Sync on drift events.
    pub self_heal: bool,
}

/// A unit's task and what it needs.
pub struct UnitTask {
    /// The engine.
    pub engine: Engine,
    /// Triggers from outside (push, webhook, reload); capacity 1, so one sync is queued at most.
    pub triggers: mpsc::Receiver<Trigger>,
    /// Shared status for /readyz and sd_notify.
    pub status: Status,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Timing.
    pub timing: UnitTiming,
}

impl UnitTask {
    /// Runs until `shutdown` turns true (checked between syncs: a sync in flight finishes).
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let unit = self.engine.unit_name().to_string();
        let mut drift = self.engine.cache().subscribe();
        let start = Instant::now();
        let mut poll = interval_at(start + self.timing.interval, self.timing.interval);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut resync = interval_at(start + self.timing.resync_interval, self.timing.resync_interval);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut backoff = Backoff::default();
        let mut retry_at: Option<Instant> = None;
        let mut drift_at: Option<Instant> = None;
        let mut last_applied: Option<Revision> = None;
        let mut queued = Some(Trigger::now(TriggerKind::Startup));
        loop {
            if *shutdown.borrow() {
                return;
            }
            if let Some(trigger) = queued.take() {
                // Webhooks are counted by the HTTP server when accepted (coalesced ones too).
                if trigger.kind != TriggerKind::Webhook {
                    self.metrics.observe_trigger(&unit, trigger.kind);
                }
                let ok = self.sync(&unit, &trigger, &mut last_applied).await;
                match ok {
                    Some(true) => {
                        backoff.reset();
                        retry_at = None;
                    }
                    Some(false) => retry_at = Some(Instant::now() + backoff.next_delay()),
                    None => {}
                }
                // Our own writes come back as watch events: drop those now, keep the rest.
                drift_at = self.drain_drift(&mut drift).then(|| Instant::now() + DRIFT_DEBOUNCE);
                continue;
            }
            let far = Instant::now() + Duration::from_secs(86_400);
            tokio::select! {
                _ = shutdown.changed() => {}
                t = self.triggers.recv() => match t {
                    Some(t) => queued = Some(t),
                    None => return,
                },
                _ = poll.tick() => queued = Some(Trigger::now(TriggerKind::Poll)),
                _ = resync.tick() => queued = Some(Trigger::now(TriggerKind::Resync)),
                event = drift.recv(), if self.timing.self_heal => match event {
                    Ok(d) if !self.engine.cache().is_own(&d) => {
                        drift_at.get_or_insert(Instant::now() + DRIFT_DEBOUNCE);
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        drift_at.get_or_insert(Instant::now() + DRIFT_DEBOUNCE);
                    }
                    Err(broadcast::error::RecvError::Closed) => {}
                },
                _ = sleep_until(drift_at.unwrap_or(far)), if drift_at.is_some() => {
                    drift_at = None;
                    queued = Some(Trigger::now(TriggerKind::Drift));
                }
                _ = sleep_until(retry_at.unwrap_or(far)), if retry_at.is_some() => {
                    retry_at = None;
                    queued = Some(Trigger::now(TriggerKind::Retry));
                }
            }
        }
    }

    /// Takes every pending drift event; true when any was not gitward's own.
    fn drain_drift(&self, drift: &mut broadcast::Receiver<crate::cluster::cache::Drift>) -> bool {
        let mut foreign = false;
        loop {
            match drift.try_recv() {
                Ok(d) => foreign |= !self.engine.cache().is_own(&d),
                Err(broadcast::error::TryRecvError::Lagged(_)) => foreign = true,
                Err(_) => return foreign && self.timing.self_heal,
            }
        }
    }

    /// Runs one sync for `trigger`. `Some(true)` succeeded, `Some(false)` failed (retry with
    /// backoff), `None` nothing to do (a poll that found the revision already synced).
    async fn sync(&mut self, unit: &str, trigger: &Trigger, last_applied: &mut Option<Revision>) -> Option<bool> {
        let revision = match self.engine.repo().fetch().await {
            Ok(r) => r,
            Err(e) => return Some(self.failed(unit, trigger, e)),
        };
        if trigger.kind.is_poll() && last_applied.as_ref() == Some(&revision) {
            return None;
        }
        info!(unit, trigger = %trigger.kind, revision = %revision, "sync triggered");
        match self.engine.sync_revision(revision).await {
            Ok(report) => {
                let ok = !report.changes.has_failures();
                // Set even on failure: the backoff retry re-syncs a failed revision, so a poll
                // that finds the same revision has nothing to add.
                *last_applied = Some(report.revision.clone());
                self.publish(unit, trigger, &report, ok);
                Some(ok)
            }
            Err(e) => Some(self.failed(unit, trigger, e)),
        }
    }

    fn publish(&self, unit: &str, trigger: &Trigger, report: &Report, ok: bool) {
        telemetry::log_report(report);
        if matches!(trigger.kind, TriggerKind::Push | TriggerKind::Webhook) {
            let ms = report.applied_at.saturating_duration_since(trigger.at).as_millis() as u64;
            info!(unit, trigger = %trigger.kind, revision = %report.revision, trigger_to_applied_ms = ms, "trigger applied");
        }
        let tracked = self.engine.cache().len();
        self.metrics.observe_sync(report, tracked);
        self.status.set(
            unit,
            UnitStatus {
                cache_synced: true,
                last_sync_ok: Some(ok),
                last_revision: Some(report.revision.to_string()),
                tracked_objects: tracked,
            },
        );
    }

    fn failed(&self, unit: &str, trigger: &Trigger, e: crate::sync::Error) -> bool {
        error!(unit, trigger = %trigger.kind, error = %telemetry::error_chain(&e), "sync failed");
        self.metrics.observe_error(unit, &e);
        let mut status = self.status.snapshot().remove(unit).unwrap_or_default();
        status.last_sync_ok = Some(false);
        self.status.set(unit, status);
        false
    }
}
