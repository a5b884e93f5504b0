//! One unit's task: waits for triggers, runs at most one sync at a time (one more may be
//! queued), waits for the health of what it changed, backs off on failure, and publishes
//! status and metrics. Its [`Engine`] — git mirror, parse cache, discovery, metadata watches —
//! stays warm between syncs.
//!
//! The task is one loop over its phases (kube-runtime's watcher: `enum State` + `step`):
//! idle (waiting for a trigger), backing off (idle, and a failed sync is retried at a
//! deadline), syncing (a sync or self-heal, holding a sync slot), waiting for health (no slot
//! held), stopped. The retry deadline goes with the phases: a poll or webhook that syncs while
//! backing off and finds nothing new, or a self-heal, leaves it due.
//! Every event the task listens to comes from one `select!` (`Task::next_event`): shutdown,
//! a trigger from the channel (push, webhook, reload), the poll and resync ticks, drift events,
//! a self-heal that is due, the retry, the end of the health wait. What an event does depends
//! on the phase: a poll starts a sync when idle and, during a wait, fetches to see whether a
//! new revision cancels it (`wait.rs`); the resync and the retry wait for the end of a health
//! wait; drift is healed in both.

mod machine;
mod sync;
mod wait;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at, sleep_until};
use tracing::{error, info, warn};

use self::sync::Synced;
use self::wait::Waiting;
use super::backoff::Backoff;
use super::heal::Heal;
use super::metrics::Metrics;
use super::trigger::{Status, Trigger, TriggerKind, TriggerReceiver, UnitStatus};
use crate::cluster::drift::{Drift, DriftQueue};
use crate::health::Counts;
use crate::health::wait::{HealthWait, Outcome};
use crate::object::ObjectRef;
use crate::report;
use crate::source::Revision;
use crate::sync::{Engine, Report};
use crate::telemetry;

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
    pub triggers: TriggerReceiver,
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
    /// The push lane shared by every unit ([`PUSH_LANE`] permits): a push or webhook fetches and
    /// sends its changed objects early holding one of these instead of a sync slot, so a push
    /// is applied even while every sync slot is taken; the rest of its sync takes a slot.
    /// `None` for a unit whose revision is not a git commit (a chart unit, an OCI artifact):
    /// its fetch is a network download with nothing to send early, and it syncs in a slot.
    pub push_lane: Option<Arc<tokio::sync::Semaphore>>,
    /// What the task's first sync is logged as: `startup`, or `reload` for a task started
    /// by a SIGHUP that changed its unit (that one sync is the reload's).
    pub first: TriggerKind,
}

impl UnitTask {
    /// Runs until `shutdown` turns true (checked between phases: a sync in flight finishes, a
    /// health wait is cancelled and recorded) or the trigger channel closes.
    pub async fn run(self, shutdown: watch::Receiver<bool>) {
        let first = self.first;
        let mut task = Task::new(self, shutdown);
        let mut phase = Phase::Syncing(Job::sync(Trigger::now(first), None));
        loop {
            if *task.shutdown.borrow() && !matches!(phase, Phase::Waiting(_)) {
                return;
            }
            phase = match phase {
                Phase::Stopped => return,
                Phase::Idle => {
                    let event = task.next_event(None, None).await;
                    task.on_idle(event, None)
                }
                Phase::BackingOff(retry_at) => {
                    let event = task.next_event(None, Some(retry_at)).await;
                    task.on_idle(event, Some(retry_at))
                }
                // Boxed: a sync's and a wait's futures are large (the engine's whole sync),
                // and inline they would size the task's future at rest, which is idle
                // (~16 KiB a unit at 1,000 units; README "Fleet").
                Phase::Syncing(job) => Box::pin(task.run_job(job)).await,
                Phase::Waiting(mut waiting) => {
                    let event = task.next_event(Some(&mut waiting), None).await;
                    Box::pin(task.on_waiting(waiting, event)).await
                }
            };
        }
    }
}

/// Where a unit's task is.
enum Phase {
    /// Waiting for a trigger.
    Idle,
    /// Waiting for a trigger, or until this deadline to retry a failed sync (with backoff).
    BackingOff(Instant),
    /// A sync or self-heal to run now.
    Syncing(Job),
    /// Waiting for the health of what the last sync changed.
    Waiting(Box<Waiting>),
    /// Shutdown, or the trigger channel closed.
    Stopped,
}

/// What a [`Phase::Syncing`] runs.
struct Job {
    /// Why.
    trigger: Trigger,
    /// For a self-heal: the drifted objects to re-apply (a full sync when the engine cannot).
    heal: Option<BTreeSet<ObjectRef>>,
    /// The retry of a failed sync that was due when the job began; kept unless the job
    /// decides otherwise ([`retry`]).
    retry_at: Option<Instant>,
    /// The sync slot of a sync that yielded to this one's revision: kept, so the newer
    /// revision does not queue for a slot again.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Job {
    fn sync(trigger: Trigger, retry_at: Option<Instant>) -> Self {
        Self { trigger, heal: None, retry_at, slot: None }
    }
}

/// The idle phase with the retry `retry_at`, if any, still due.
fn idle(retry_at: Option<Instant>) -> Phase {
    retry_at.map_or(Phase::Idle, Phase::BackingOff)
}

/// How a sync or self-heal ended, for the backoff of failed syncs ([`retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// A full sync; whether it succeeded.
    Synced(bool),
    /// A self-heal of a few objects; whether it succeeded.
    Healed(bool),
    /// Nothing to do: a poll or push that found the revision already applied.
    Nothing,
}

/// How a sync or self-heal ended, with the retry that was due when it began: what the retry
/// after its health wait is decided from.
#[derive(Debug, Clone, Copy)]
struct SyncEnd {
    /// What ran and whether it succeeded.
    ran: Ran,
    /// The retry that was due when it began.
    retry_at: Option<Instant>,
}

/// What a sync's end does to the retry of failed syncs (due when backing off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// A full sync succeeded: no retry, the backoff starts over.
    Reset,
    /// A sync or self-heal failed: retry with the next backoff delay.
    Schedule,
    /// Leave the retry and backoff as they are.
    Keep,
}

/// The retry decision after a sync or self-heal. A heal re-applies a few objects: its success
/// says nothing of a failed full sync, whose retry and backoff stay as they are; its failure
/// asks for a full sync.
fn retry(ran: Ran) -> Retry {
    match ran {
        Ran::Synced(true) => Retry::Reset,
        Ran::Synced(false) | Ran::Healed(false) => Retry::Schedule,
        Ran::Healed(true) | Ran::Nothing => Retry::Keep,
    }
}

/// Something a unit's task listens to.
enum Event {
    /// The shutdown flag changed.
    Shutdown,
    /// A trigger from the channel; `None` once it closed.
    Trigger(Option<Trigger>),
    /// The poll tick.
    Poll,
    /// The resync tick.
    Resync,
    /// Drift events from the metadata watches.
    Drift(Vec<Drift>),
    /// A self-heal is due.
    HealDue,
    /// The retry of a failed sync is due.
    RetryDue,
    /// The health wait ended by itself.
    WaitEnded(HealthWait, Outcome),
}

/// A unit's task as it runs: what it needs and what it keeps between phases.
struct Task {
    /// The unit's name, for logs and metrics.
    unit: String,
    engine: Engine,
    triggers: TriggerReceiver,
    status: Status,
    metrics: Arc<Metrics>,
    timing: UnitTiming,
    sync_slots: Arc<tokio::sync::Semaphore>,
    /// The push lane; `None` for a chart or artifact unit ([`UnitTask::push_lane`]).
    push_lane: Option<Arc<tokio::sync::Semaphore>>,
    /// A trigger taken from the channel while a sync ran and kept for after it (the channel's
    /// one queued sync); the next event.
    queued: Option<Trigger>,
    shutdown: watch::Receiver<bool>,
    /// Drift events of the unit's members, from its metadata cache.
    drift: DriftQueue,
    /// Which drifted objects to re-apply when.
    heal: Heal,
    poll: Interval,
    resync: Interval,
    /// Delays between retries of failed syncs.
    backoff: Backoff,
    /// The revision last synced (also a failed one: the retry re-syncs it), so a poll that
    /// finds it again has nothing to do.
    last_applied: Option<Revision>,
}

impl Task {
    fn new(task: UnitTask, shutdown: watch::Receiver<bool>) -> Self {
        let UnitTask { engine, triggers, status, metrics, timing, sync_slots, push_lane, first: _ } = task;
        let start = Instant::now();
        let mut poll = interval_at(start + timing.interval, timing.interval);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let first_resync = first_resync(timing.resync_interval, rand::random::<f64>());
        let mut resync = interval_at(start + first_resync, timing.resync_interval);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self {
            unit: engine.unit_name().to_string(),
            drift: engine.cache().subscribe(),
            engine,
            triggers,
            status,
            metrics,
            timing,
            sync_slots,
            push_lane,
            queued: None,
            shutdown,
            heal: Heal::default(),
            poll,
            resync,
            backoff: Backoff::default(),
            last_applied: None,
        }
    }

    /// The next event; the retry is listened to when backing off until `retry_at`. The resync
    /// is not listened to during a health wait (`waiting`): it waits for its end.
    async fn next_event(&mut self, waiting: Option<&mut Waiting>, retry_at: Option<Instant>) -> Event {
        if let Some(t) = self.queued.take() {
            return Event::Trigger(Some(t));
        }
        let far = Instant::now() + Duration::from_secs(86_400);
        let idle = waiting.is_none();
        let heal_at = self.heal.next();
        tokio::select! {
            _ = self.shutdown.changed() => Event::Shutdown,
            t = self.triggers.recv() => Event::Trigger(t),
            _ = self.poll.tick() => Event::Poll,
            _ = self.resync.tick(), if idle => Event::Resync,
            events = self.drift.next(), if self.timing.self_heal => Event::Drift(events),
            _ = sleep_until(heal_at.unwrap_or(far)), if heal_at.is_some() => Event::HealDue,
            _ = sleep_until(retry_at.unwrap_or(far)), if retry_at.is_some() => Event::RetryDue,
            (wait, outcome) = async { waiting.expect("guarded").ended().await }, if !idle => {
                Event::WaitEnded(wait, outcome)
            }
        }
    }

    /// An event while idle or backing off until `retry_at`: a trigger, tick, due self-heal or
    /// the retry starts a sync.
    fn on_idle(&mut self, event: Event, retry_at: Option<Instant>) -> Phase {
        let trigger = match event {
            // The loop reads the flag.
            Event::Shutdown | Event::WaitEnded(..) => return idle(retry_at),
            Event::Trigger(None) => return Phase::Stopped,
            Event::Trigger(Some(t)) => t,
            Event::Poll => Trigger::now(TriggerKind::Poll),
            Event::Resync => Trigger::now(TriggerKind::Resync),
            Event::Drift(events) => {
                self.note_drift(events);
                return idle(retry_at);
            }
            Event::HealDue => {
                let objects = self.heal.take_due(Instant::now());
                if objects.is_empty() {
                    return idle(retry_at);
                }
                let trigger = Trigger::now(TriggerKind::Drift);
                return Phase::Syncing(Job { trigger, heal: Some(objects), retry_at, slot: None });
            }
            Event::RetryDue => return Phase::Syncing(Job::sync(Trigger::now(TriggerKind::Retry), None)),
        };
        Phase::Syncing(Job::sync(trigger, retry_at))
    }

    /// Runs `job` — a self-heal holding a sync slot, or a sync ([`Task::sync`]) — then starts
    /// the health wait of what it applied; a sync that yielded to a newer revision runs that
    /// one's trigger at once instead.
    async fn run_job(&mut self, job: Job) -> Phase {
        let Job { trigger, heal, retry_at, slot } = job;
        // Webhooks are counted by the HTTP server when accepted (coalesced ones too).
        if trigger.kind != TriggerKind::Webhook {
            self.metrics.observe_trigger(&self.unit, trigger.kind);
        }
        let healed = match heal {
            Some(objects) => {
                let _slot = self.slot().await;
                self.heal_objects(&trigger, &objects).await
            }
            None => None,
        };
        let (ran, report) = match healed {
            Some((ok, report)) => (Ran::Healed(ok), Some(report)),
            None => match self.sync(&trigger, slot).await {
                Synced::Done(ran, report) => (ran, report.map(|r| *r)),
                Synced::Yielded(next, slot) => {
                    return match self.after(SyncEnd { ran: Ran::Nothing, retry_at }, Some(next)) {
                        Phase::Syncing(job) => Phase::Syncing(Job { slot, ..job }),
                        phase => phase,
                    };
                }
            },
        };
        let end = SyncEnd { ran, retry_at };
        match report {
            Some(report) => self.begin_wait(report, end).await,
            None => self.after(end, None),
        }
    }

    /// One of the `max_concurrent_syncs` slots, held until dropped; `None` only if the daemon
    /// closed the semaphore, which it never does while units run.
    async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.sync_slots.clone().acquire_owned().await.ok()
    }

    /// The next phase after a sync and its wait: the retry decided ([`retry`]), the drift events
    /// of our own writes dropped, and `next` (a trigger kept or taken during the wait) run at
    /// once; else idle, or backing off.
    fn after(&mut self, end: SyncEnd, next: Option<Trigger>) -> Phase {
        let retry_at = match retry(end.ran) {
            Retry::Reset => {
                self.backoff.reset();
                None
            }
            Retry::Schedule => Some(Instant::now() + self.backoff.next_delay()),
            Retry::Keep => end.retry_at,
        };
        // Our own writes come back as watch events: drop those now, keep the rest.
        self.drain_drift();
        match next {
            Some(trigger) => Phase::Syncing(Job::sync(trigger, retry_at)),
            None => idle(retry_at),
        }
    }

    /// Takes every pending drift event; those that are not gitward's own go to `heal`.
    fn drain_drift(&mut self) {
        let events = self.drift.take();
        if self.timing.self_heal {
            self.note_drift(events);
        }
    }

    /// Hands the events that are not gitward's own writes to `heal`.
    fn note_drift(&mut self, events: Vec<Drift>) {
        let now = Instant::now();
        let unit = self.unit.as_str();
        for d in &events {
            let own = self.engine.cache().is_own(d);
            tracing::debug!(unit, object = %d.object, resource_version = %d.resource_version, own, "drift event");
            if !own {
                self.heal.drifted(d, now);
            }
        }
    }

    /// Re-applies only the drifted `objects` ([`Engine::heal`]), with whether that succeeded and
    /// the report (for the health wait); `None` when the engine cannot
    /// (no sync yet, or git no longer holds them): the caller runs a full sync instead.
    async fn heal_objects(&mut self, trigger: &Trigger, objects: &BTreeSet<ObjectRef>) -> Option<(bool, Report)> {
        info!(unit = self.unit.as_str(), trigger = %trigger.kind, objects = objects.len(), "self-heal of drifted objects");
        self.heal.healed(objects, Instant::now());
        let report = self.engine.heal(objects).await?;
        let ok = !report.changes.has_failures();
        self.report_fights(&report);
        self.publish(trigger, &report);
        Some((ok, report))
    }

    /// Counts corrections and warns, once per object, about a field fight.
    fn report_fights(&mut self, report: &Report) {
        for fight in self.heal.corrected(&report.changes.entries, Instant::now()) {
            let manager = fight.manager.as_deref().unwrap_or("unknown");
            warn!(
                unit = self.unit.as_str(),
                object = %fight.object,
                manager,
                corrections = fight.corrections,
                "field fight: another field manager keeps changing what git declares; self-heal of it backs off"
            );
        }
    }

    /// A sync that failed as a whole: recorded on the ApplySet parent (`gitward.dev/last-error`;
    /// written only when it changes; a record that cannot be written — the cluster does not
    /// answer either — is logged at debug), logged, counted, and the unit's status set failed.
    async fn failed(&mut self, trigger: &Trigger, e: crate::sync::Error) -> Ran {
        let unit = self.unit.as_str();
        if let Err(r) = self.engine.record_failure(&e).await {
            tracing::debug!(unit, error = %telemetry::error_chain(&r), "could not record the error on the inventory");
        }
        if let crate::sync::Error::Source(crate::source::Error::Unverified {
            revision, failure, signer, reason, ..
        }) = &e
        {
            let kept = self.last_applied.as_ref().map(|r| r.to_string()).unwrap_or_default();
            let signer = signer.as_deref().unwrap_or_default();
            let reason_label = failure.as_str();
            error!(unit, revision = %revision, failure = reason_label, signer, reason, kept, "revision refused: not signed by a trusted key");
            self.metrics.observe_refused(unit, *failure);
        }
        let error = telemetry::unit_error(unit, &e);
        error!(unit, trigger = %trigger.kind, error = %error, "sync failed");
        if matches!(trigger.kind, TriggerKind::Push | TriggerKind::Webhook) {
            // The push's or webhook's outcome, as `trigger applied` tells a clean one.
            warn!(unit, trigger = %trigger.kind, error = %error, "trigger failed");
        }
        self.metrics.observe_error(unit, &e);
        let mut status = self.status.snapshot().remove(unit).unwrap_or_default();
        status.last_sync_ok = Some(false);
        self.status.set(unit, status);
        Ran::Synced(false)
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
        };
        self.status.set(&self.unit, status);
    }

    fn publish(&self, trigger: &Trigger, report: &Report) {
        report::log_objects(report);
        if matches!(trigger.kind, TriggerKind::Push | TriggerKind::Webhook) {
            let unit = self.unit.as_str();
            let c = report.changes.counts();
            let not_applied = c.failed + c.skipped + c.conflict;
            if not_applied == 0 {
                let ms = report.applied_at.saturating_duration_since(trigger.at).as_millis() as u64;
                info!(unit, trigger = %trigger.kind, revision = %report.revision, trigger_to_applied_ms = ms, "trigger applied");
            } else {
                // Not `trigger applied`: the revision is not applied whole, and the time to the
                // last object sent is no time to a change reaching the cluster.
                warn!(unit, trigger = %trigger.kind, revision = %report.revision, failed = c.failed, skipped = c.skipped, conflict = c.conflict, "trigger failed");
            }
        }
        let tracked = self.engine.cache().len();
        self.metrics.observe_sync(report, tracked);
    }
}

/// Permits of the push lane ([`UnitTask::push_lane`]): how many units may fetch and send a
/// push's changed objects at once beside the `max_concurrent_syncs` slots. Each early apply
/// sends the objects of at most [`crate::sync::early::MAX_FILES`] files.
pub const PUSH_LANE: usize = 2;

/// When a unit's first resync is due after its task starts: `interval` × (0.5 + `r`), `r` in
/// [0, 1) drawn at random, so the resyncs of units started together spread over one
/// `resync_interval` (from half to one and a half of it) instead of all landing at start +
/// interval; later ones follow every `interval`. The same window as Config Connector's
/// jittered re-enqueue period (½ to 3⁄2 of the mean); Argo CD spreads its reconciliations with
/// `timeout.reconciliation.jitter`.
fn first_resync(interval: Duration, r: f64) -> Duration {
    interval.mul_f64(0.5 + r.clamp(0.0, 1.0))
}

/// Hands the pages that a sync's transient buffers (parsed YAML, list pages, responses) freed
/// back to the kernel. glibc malloc keeps them in its arenas otherwise: at 10,000 objects the
/// daemon's resident set after a sync stayed ~20 MB above what it holds live (README
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_full_sync_that_succeeded_resets_the_backoff() {
        assert_eq!(retry(Ran::Synced(true)), Retry::Reset);
        assert_eq!(retry(Ran::Synced(false)), Retry::Schedule);
    }

    #[test]
    fn a_self_heal_that_failed_schedules_a_retry_and_one_that_succeeded_leaves_it() {
        assert_eq!(retry(Ran::Healed(false)), Retry::Schedule);
        assert_eq!(retry(Ran::Healed(true)), Retry::Keep, "a failed sync's retry stays due");
    }

    #[test]
    fn first_resyncs_spread_over_one_interval_around_it() {
        let hour = Duration::from_secs(3600);
        assert_eq!(first_resync(hour, 0.0), Duration::from_secs(1800));
        assert_eq!(first_resync(hour, 0.5), hour);
        assert!(first_resync(hour, 0.999) < Duration::from_secs(5400));
        assert!(first_resync(hour, 0.25) != first_resync(hour, 0.75), "not all at one instant");
    }

    #[test]
    fn a_poll_that_found_nothing_new_leaves_the_retry_due() {
        assert_eq!(retry(Ran::Nothing), Retry::Keep);
    }
}
