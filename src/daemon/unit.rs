//! One unit's task: waits for triggers, runs at most one sync at a time (one more may be
//! queued), backs off on failure, and publishes status and metrics. Its [`Engine`] — git
//! mirror, parse cache, discovery, metadata watches — stays warm between syncs.
//!
//! The loop is a small state machine over `select!`: a queued trigger runs first; otherwise
//! the next of shutdown, a trigger from the channel (push, webhook, reload), the poll tick, the
//! resync tick, a debounced drift event, or the backoff retry.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep_until};
use tracing::{error, info, warn};

use super::backoff::Backoff;
use super::heal::Heal;
use super::metrics::Metrics;
use super::trigger::{Status, Trigger, TriggerKind, UnitStatus};
use crate::cluster::cache::{Drift, DriftQueue};
use crate::health::Counts;
use crate::health::record::SyncResult;
use crate::health::wait::Outcome;
use crate::source::Revision;
use crate::sync::{Engine, Report};
use crate::telemetry::{self, HealthSummary};

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
    /// Sync slots shared by every unit (`[daemon] max_concurrent_syncs`): a sync or self-heal
    /// holds one while it runs (not during the health wait); tokio's semaphore is fair, so
    /// waiting units get slots in arrival order.
    pub sync_slots: Arc<tokio::sync::Semaphore>,
    /// What the task's first sync is logged as: `startup`, or `reload` for a task started
    /// by a SIGHUP that changed its unit (that one sync is the reload's).
    pub first: TriggerKind,
}

impl UnitTask {
    /// Runs until `shutdown` turns true (checked between syncs: a sync in flight finishes).
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let unit = self.engine.unit_name().to_string();
        let drift = self.engine.cache().subscribe();
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
        let mut queued = Some(Trigger::now(self.first));
        loop {
            if *shutdown.borrow() {
                return;
            }
            if let Some(trigger) = queued.take() {
                // Webhooks are counted by the HTTP server when accepted (coalesced ones too).
                if trigger.kind != TriggerKind::Webhook {
                    self.metrics.observe_trigger(&unit, trigger.kind);
                }
                // Closed only if the daemon dropped it, which it never does while units run.
                let slot = self.sync_slots.clone().acquire_owned().await.ok();
                let healed = match heal_objects.take() {
                    Some(objects) => self.heal(&unit, &trigger, &objects, &mut heal).await,
                    None => None,
                };
                let was_heal = healed.is_some();
                let (ok, report) = match healed {
                    Some((ok, report)) => (Some(ok), Some(report)),
                    None => self.sync(&unit, &trigger, &mut last_applied, &mut heal).await,
                };
                drop(slot);
                if let Some(report) = report {
                    // The health wait: cancelled by a new revision or shutdown; meanwhile a
                    // trigger for the same revision is kept for afterwards.
                    queued = self.wait_health(&unit, report, &mut shutdown, &mut poll, &drift, &mut heal).await;
                }
                match ok {
                    // A heal re-applies a few objects: its success says nothing of a failed
                    // full sync, whose retry and backoff stay as they are.
                    Some(true) if was_heal => {}
                    Some(true) => {
                        backoff.reset();
                        retry_at = None;
                    }
                    Some(false) => retry_at = Some(Instant::now() + backoff.next_delay()),
                    None => {}
                }
                // Our own writes come back as watch events: drop those now, keep the rest.
                self.drain_drift(&drift, &mut heal);
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
                events = drift.next(), if self.timing.self_heal => self.note_drift(events, &mut heal),
                _ = sleep_until(heal.next().unwrap_or(far)), if heal.next().is_some() => {
                    let objects = heal.take_due(Instant::now());
                    if !objects.is_empty() {
                        heal_objects = Some(objects);
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
    fn drain_drift(&self, drift: &DriftQueue, heal: &mut Heal) {
        let events = drift.take();
        if self.timing.self_heal {
            self.note_drift(events, heal);
        }
    }

    /// Hands the events that are not gitward's own writes to `heal`; logs each at debug, with
    /// `own`, so that the log shows what the unit took for drift.
    fn note_drift(&self, events: Vec<Drift>, heal: &mut Heal) {
        let now = Instant::now();
        let unit = self.engine.unit_name();
        for d in &events {
            let own = self.engine.cache().is_own(d);
            tracing::debug!(unit, object = %d.object, resource_version = %d.resource_version, own, "drift event");
            if !own {
                heal.drifted(d, now);
            }
        }
    }

    /// Re-applies only the drifted `objects` ([`Engine::heal`]), with whether that succeeded and
    /// the report (for the health wait); `None` when the engine cannot
    /// (no sync yet, or git no longer holds them): the caller runs a full sync instead.
    async fn heal(
        &mut self,
        unit: &str,
        trigger: &Trigger,
        objects: &std::collections::BTreeSet<crate::object::ObjectRef>,
        heal: &mut Heal,
    ) -> Option<(bool, Report)> {
        info!(unit, trigger = %trigger.kind, objects = objects.len(), "self-heal of drifted objects");
        heal.healed(objects, Instant::now());
        let report = self.engine.heal(objects).await?;
        let ok = !report.changes.has_failures();
        self.report_fights(unit, &report, heal);
        self.publish(unit, trigger, &report);
        Some((ok, report))
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
    /// backoff), `None` nothing to do (a poll or push that found the revision already applied); with
    /// the report when the sync applied, for the health wait.
    async fn sync(
        &mut self,
        unit: &str,
        trigger: &Trigger,
        last_applied: &mut Option<Revision>,
        heal: &mut Heal,
    ) -> (Option<bool>, Option<Report>) {
        let revision = match self.engine.repo().fetch().await {
            Ok(r) => r,
            Err(e) => {
                self.record_failure(unit, &e).await;
                return (Some(self.failed(unit, trigger, e)), None);
            }
        };
        if trigger.kind.needs_new_revision() && last_applied.as_ref() == Some(&revision) {
            tracing::debug!(unit, trigger = %trigger.kind, revision = %revision, "no new revision");
            return (None, None);
        }
        info!(unit, trigger = %trigger.kind, revision = %revision, "sync triggered");
        match self.engine.sync_revision(revision).await {
            Ok(report) => {
                let ok = !report.changes.has_failures();
                // Set even on failure: the backoff retry re-syncs a failed revision, so a poll
                // that finds the same revision has nothing to add.
                *last_applied = Some(report.revision.clone());
                self.report_fights(unit, &report, heal);
                self.publish(unit, trigger, &report);
                release_freed_memory();
                (Some(ok), Some(report))
            }
            Err(e) => {
                self.record_failure(unit, &e).await;
                (Some(self.failed(unit, trigger, e)), None)
            }
        }
    }

    /// After an apply: waits (at most the unit's `health_timeout`) for the objects the sync
    /// changed, and the members an earlier wait left not `Current`, to become healthy, logging
    /// a `health` event per change (`wait="none"` when there is nothing to wait on); then logs
    /// `sync complete`, updates metrics and status, and records the result and the attempt on
    /// the ApplySet parent ([`Engine::judge_health`], [`Engine::record_sync`]).
    ///
    /// The unit's task does nothing else meanwhile, but it still listens: shutdown and SIGHUP
    /// (a reload) cancel the wait; a trigger from the channel or a poll tick fetches, and a
    /// revision other than the one waited for cancels the wait and is returned to be synced at
    /// once (a new revision always wins over waiting for the old one). A trigger that finds the
    /// same revision is returned to run after the wait. Drifted objects are healed during the
    /// wait (so an object that never becomes healthy does not stop self-heal); the resync waits
    /// until it ends.
    async fn wait_health(
        &mut self,
        unit: &str,
        report: Report,
        shutdown: &mut watch::Receiver<bool>,
        poll: &mut tokio::time::Interval,
        drift: &DriftQueue,
        heal: &mut Heal,
    ) -> Option<Trigger> {
        let timeout = self.engine.health_timeout();
        let failed = report.changes.has_failures();
        let (wait, result, counts, next, judged) = if failed {
            ("skipped", SyncResult::Failed, Counts::default(), None, false)
        } else if timeout.is_zero() {
            ("disabled", SyncResult::Applied, Counts::default(), None, false)
        } else {
            let mut wait = self.engine.health_wait(&report).await;
            let judged = wait.covers_all() || !wait.targets().is_empty();
            if wait.targets().is_empty() {
                // Nothing with health changed and nothing is left unhealthy: nothing to wait on.
                let result = self.engine.judge_health(&wait, Some(Outcome::Healthy)).await;
                let counts = Counts::of(&wait.healths());
                self.metrics.observe_health(unit, &counts, None);
                ("none", result, counts, None, judged)
            } else {
                // Ready (and READY=1) follows the apply, not the wait.
                self.set_status(unit, &report, true, None);
                self.set_waiting(unit, true);
                let started = Instant::now();
                let waited = self.run_wait(unit, &report, &mut wait, shutdown, poll, drift, heal).await;
                let counts = Counts::of(&wait.healths());
                let Some(outcome) = waited.outcome else {
                    // Unjudged: recorded as progressing, so a later no-op sync of this revision
                    // cannot call it healthy (and waits for what is still not healthy); a
                    // superseding revision records itself instead.
                    let result = self.engine.judge_health(&wait, None).await;
                    let summary = HealthSummary { counts, wait: "cancelled", result };
                    telemetry::log_summary(&report, &summary);
                    self.set_status(unit, &report, true, None);
                    if !waited.superseded
                        && let Err(e) = self.engine.record_sync(&report, summary.result, judged).await
                    {
                        warn!(unit, error = %telemetry::error_chain(&e), "could not record the sync result on the inventory");
                    }
                    return waited.cancelled_by.or(waited.after);
                };
                let result = self.engine.judge_health(&wait, Some(outcome)).await;
                let took = (result == SyncResult::Healthy).then(|| started.elapsed());
                self.metrics.observe_health(unit, &counts, took);
                (outcome.as_str(), result, counts, waited.after, judged)
            }
        };
        telemetry::log_summary(&report, &HealthSummary { counts, wait, result });
        let waited = wait != "skipped" && wait != "disabled";
        // Objects the API server refused leave the unit ready; failures because it did not
        // answer (an outage) do not.
        let ran = !failed || self.engine.cluster_answers().await;
        self.set_status(unit, &report, ran, waited.then_some(counts));
        if let Err(e) = self.engine.record_sync(&report, result, judged).await {
            warn!(unit, error = %telemetry::error_chain(&e), "could not record the sync result on the inventory");
        }
        next
    }

    /// Runs `wait` (at most the unit's `health_timeout`) while listening, as
    /// [`UnitTask::wait_health`] describes: shutdown and SIGHUP cancel it, a trigger or poll
    /// tick that finds a new revision cancels it (and is returned to sync at once), one that
    /// finds the same revision is kept for afterwards, drifted objects are healed meanwhile.
    #[allow(clippy::too_many_arguments)]
    async fn run_wait(
        &mut self,
        unit: &str,
        report: &Report,
        wait: &mut crate::health::wait::HealthWait,
        shutdown: &mut watch::Receiver<bool>,
        poll: &mut tokio::time::Interval,
        drift: &DriftQueue,
        heal: &mut Heal,
    ) -> Waited {
        let timeout = self.engine.health_timeout();
        let mut waited = Waited::default();
        let run = wait.run(timeout, |object, status| telemetry::log_health(unit, object, status));
        tokio::pin!(run);
        loop {
            let far = Instant::now() + Duration::from_secs(86_400);
            let trigger = tokio::select! {
                outcome = &mut run => {
                    waited.outcome = Some(outcome);
                    return waited;
                }
                _ = shutdown.changed() => return waited,
                t = self.triggers.recv() => match t {
                    Some(t) => t,
                    None => return waited,
                },
                _ = poll.tick() => Trigger::now(TriggerKind::Poll),
                // Self-heal goes on during the wait: drifted objects are re-applied (with their
                // per-object backoff).
                events = drift.next(), if self.timing.self_heal => {
                    self.note_drift(events, heal);
                    continue;
                }
                _ = sleep_until(heal.next().unwrap_or(far)), if heal.next().is_some() => {
                    let objects = heal.take_due(Instant::now());
                    if !objects.is_empty() {
                        let trigger = Trigger::now(TriggerKind::Drift);
                        self.metrics.observe_trigger(unit, trigger.kind);
                        self.heal(unit, &trigger, &objects, heal).await;
                        self.drain_drift(drift, heal);
                    }
                    continue;
                }
            };
            if trigger.kind == TriggerKind::Reload {
                // SIGHUP asks for a sync now, with a config that may have changed.
                info!(unit, revision = %report.revision, trigger = %trigger.kind, "health wait cancelled by a reload");
                waited.cancelled_by = Some(trigger);
                return waited;
            }
            match self.engine.repo().fetch().await {
                Ok(revision) if revision != report.revision => {
                    info!(unit, revision = %report.revision, new_revision = %revision, trigger = %trigger.kind, "health wait cancelled by a new revision");
                    waited.superseded = true;
                    waited.cancelled_by = Some(trigger);
                    return waited;
                }
                _ if trigger.kind.needs_new_revision() => {}
                _ => waited.after = Some(trigger),
            }
        }
    }

    /// Records a sync that failed as a whole on the ApplySet parent (`gitward.dev/last-error`;
    /// written only when it changes). The failure itself is logged by the caller, so a record
    /// that cannot be written (the cluster does not answer either) is logged at debug.
    async fn record_failure(&mut self, unit: &str, e: &crate::sync::Error) {
        if let Err(r) = self.engine.record_failure(e).await {
            tracing::debug!(unit, error = %telemetry::error_chain(&r), "could not record the error on the inventory");
        }
    }

    fn set_waiting(&self, unit: &str, waiting: bool) {
        let mut status = self.status.snapshot().remove(unit).unwrap_or_default();
        status.waiting = waiting;
        self.status.set(unit, status);
    }

    fn set_status(&self, unit: &str, report: &Report, ok: bool, health: Option<Counts>) {
        let applied_once = ok || self.status.snapshot().get(unit).is_some_and(|s| s.applied_once);
        let status = UnitStatus {
            cache_synced: true,
            last_sync_ok: Some(ok),
            failed_objects: report.changes.counts().failed,
            last_revision: Some(report.revision.to_string()),
            tracked_objects: self.engine.cache().len(),
            health,
            waiting: false,
            applied_once,
        };
        self.status.set(unit, status);
    }

    fn publish(&self, unit: &str, trigger: &Trigger, report: &Report) {
        telemetry::log_objects(report);
        if matches!(trigger.kind, TriggerKind::Push | TriggerKind::Webhook) {
            let ms = report.applied_at.saturating_duration_since(trigger.at).as_millis() as u64;
            info!(unit, trigger = %trigger.kind, revision = %report.revision, trigger_to_applied_ms = ms, "trigger applied");
        }
        let tracked = self.engine.cache().len();
        self.metrics.observe_sync(report, tracked);
    }

    fn failed(&self, unit: &str, trigger: &Trigger, e: crate::sync::Error) -> bool {
        error!(unit, trigger = %trigger.kind, error = %telemetry::unit_error(unit, &e), "sync failed");
        self.metrics.observe_error(unit, &e);
        let mut status = self.status.snapshot().remove(unit).unwrap_or_default();
        status.last_sync_ok = Some(false);
        self.status.set(unit, status);
        false
    }
}

/// How [`UnitTask::run_wait`] ended.
#[derive(Default)]
struct Waited {
    /// How the wait itself ended; `None` when it was cancelled (shutdown, SIGHUP, a new
    /// revision).
    outcome: Option<Outcome>,
    /// A trigger for the revision waited for, to run after the wait.
    after: Option<Trigger>,
    /// The trigger that cancelled the wait (SIGHUP, or one that found a new revision), to run
    /// at once.
    cancelled_by: Option<Trigger>,
    /// A new revision cancelled the wait: it records itself, this one records nothing.
    superseded: bool,
}

/// Hands the pages that a sync's transient buffers (parsed YAML, list pages, responses) freed
/// back to the kernel. glibc malloc keeps them in its arenas otherwise: at 10,000 objects the
/// daemon's resident set after a sync stayed ~20 MB above what it holds live (issue 9, README
/// "Benchmarks"). `malloc_trim(0)` (glibc, malloc_trim(3)) releases free memory at the top of
/// every arena and `madvise`s whole free pages inside them; a few milliseconds at that size.
/// The `gitward` binary allocates with jemalloc (src/main.rs), which returns its own freed pages;
/// this still trims what the C libraries (libgit2, OpenSSL) freed on the glibc heap. A no-op
/// with other C libraries.
fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only reorganises glibc's own free lists; it takes no pointer and is
    // thread-safe (it locks each arena).
    unsafe {
        libc::malloc_trim(0);
    }
}
