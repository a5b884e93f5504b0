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
use tracing::{error, info, warn};

use super::backoff::Backoff;
use super::heal::Heal;
use super::metrics::Metrics;
use super::trigger::{Status, Trigger, TriggerKind, UnitStatus};
use crate::source::Revision;
use crate::sync::{Engine, Report};
use crate::telemetry;

pub use super::heal::DRIFT_DEBOUNCE;

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
        let mut heal = Heal::default();
        let mut heal_objects: Option<std::collections::BTreeSet<crate::object::ObjectRef>> = None;
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
                let ok = match heal_objects.take() {
                    Some(objects) => self.heal(&unit, &trigger, &objects, &mut heal).await,
                    None => None,
                };
                let ok = match ok {
                    Some(ok) => Some(ok),
                    None => self.sync(&unit, &trigger, &mut last_applied, &mut heal).await,
                };
                match ok {
                    Some(true) => {
                        backoff.reset();
                        retry_at = None;
                    }
                    Some(false) => retry_at = Some(Instant::now() + backoff.next_delay()),
                    None => {}
                }
                // Our own writes come back as watch events: drop those now, keep the rest.
                self.drain_drift(&mut drift, &mut heal);
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
                    Ok(d) if !self.engine.cache().is_own(&d) => heal.drifted(&d, Instant::now()),
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => heal.lagged(Instant::now()),
                    Err(broadcast::error::RecvError::Closed) => {}
                },
                _ = sleep_until(heal.next().unwrap_or(far)), if heal.next().is_some() => {
                    let (full, objects) = heal.take_due(Instant::now());
                    if !full && !objects.is_empty() {
                        heal_objects = Some(objects);
                    }
                    if full || heal_objects.is_some() {
                        queued = Some(Trigger::now(TriggerKind::Drift));
                    }
                }
                _ = sleep_until(retry_at.unwrap_or(far)), if retry_at.is_some() => {
                    retry_at = None;
                    queued = Some(Trigger::now(TriggerKind::Retry));
                }
            }
        }
    }

    /// Takes every pending drift event; those that are not gitward's own go to `heal`.
    fn drain_drift(&self, drift: &mut broadcast::Receiver<crate::cluster::cache::Drift>, heal: &mut Heal) {
        loop {
            match drift.try_recv() {
                Ok(d) if self.timing.self_heal && !self.engine.cache().is_own(&d) => heal.drifted(&d, Instant::now()),
                Ok(_) => {}
                Err(broadcast::error::TryRecvError::Lagged(_)) if self.timing.self_heal => heal.lagged(Instant::now()),
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    }

    /// Re-applies only the drifted `objects` ([`Engine::heal`]); `None` when the engine cannot
    /// (no sync yet, or git no longer holds them): the caller runs a full sync instead.
    async fn heal(
        &mut self,
        unit: &str,
        trigger: &Trigger,
        objects: &std::collections::BTreeSet<crate::object::ObjectRef>,
        heal: &mut Heal,
    ) -> Option<bool> {
        info!(unit, trigger = %trigger.kind, objects = objects.len(), "self-heal of drifted objects");
        let report = self.engine.heal(objects).await?;
        let ok = !report.changes.has_failures();
        self.report_fights(unit, &report, heal);
        self.publish(unit, trigger, &report, ok);
        Some(ok)
    }

    /// Counts corrections and warns, once per object, about a field fight.
    fn report_fights(&self, unit: &str, report: &Report, heal: &mut Heal) {
        for fight in heal.corrected(&report.changes.entries, Instant::now()) {
            let manager = fight.manager.as_deref().unwrap_or("unknown");
            warn!(
                unit,
                object = %fight.object,
                manager,
                corrections = fight.corrections,
                "field fight: another field manager keeps changing what git declares; self-heal of it backs off"
            );
        }
    }

    /// Runs one sync for `trigger`. `Some(true)` succeeded, `Some(false)` failed (retry with
    /// backoff), `None` nothing to do (a poll that found the revision already synced).
    async fn sync(
        &mut self,
        unit: &str,
        trigger: &Trigger,
        last_applied: &mut Option<Revision>,
        heal: &mut Heal,
    ) -> Option<bool> {
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
                self.report_fights(unit, &report, heal);
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
