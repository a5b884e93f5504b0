//! One unit's task: waits for triggers, runs at most one sync at a time (one more may be
//! queued), waits for the health of what it changed, backs off on failure, and publishes
//! status and metrics. Its [`Engine`] — git mirror, parse cache, discovery, metadata watches —
//! stays warm between syncs.
//!
//! The task is one state machine (kube-runtime's watcher: `enum State` + `step`):
//! `machine` holds the phases — idle, fetching, waiting for a slot, applying, waiting for
//! health, backing off, suspended, stopped — and the pure [`machine::step`] that decides what
//! every event does (coalescing, the push lane, yielding to a newer revision, the health wait's
//! cancel rules, retries). `driver` is the one loop that reads the trigger channel, the ticks,
//! drift and the effects it started (one `select!`), feeds each event to `step` and runs the
//! actions it returns (`log` writes the log lines it decides); the effects that use the engine (`sync`: fetch, early apply, the rest of
//! the sync, self-heal, the record of a failure; `wait`: the start and end of the health wait)
//! run one at a time, owning the engine while they run. Between jobs, `follow` has the engine
//! judge again the members whose status moved, so readiness, metrics, the dashboard and the
//! parent's record follow the members' health without a sync. The retry deadline goes with the
//! phases: a poll or webhook that finds nothing new while backing off, or a self-heal, leaves
//! it due.

mod depends;
mod driver;
mod effect;
mod follow;
mod log;
mod machine;
mod publish;
mod sync;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::heal::Heal;
use super::metrics::Metrics;
use super::trigger::{Statuses, TriggerKind, TriggerReceiver};
use crate::observe::board::{Board, Recorder};
use crate::observe::unit::{Metered, Readiness};
use crate::observe::{Observers, log::Log, notify::Watch};
use crate::sync::{Cause, Engine};
pub use depends::Gate;

/// Timing of a unit's task.
#[derive(Debug, Clone)]
pub struct UnitTiming {
    /// Poll interval (fetch; sync when the revision moved).
    pub interval: Duration,
    /// Full resync interval.
    pub resync_interval: Duration,
    /// Sync on drift events.
    pub self_heal: bool,
    /// Where in the window of its first resync this unit's falls, in [0, 1)
    /// ([`resync_phase`]).
    pub resync_phase: f64,
}

/// A unit's task and what it needs.
pub struct UnitTask {
    /// The engine.
    pub engine: Engine,
    /// Triggers from outside (push, webhook, reload); capacity 1, so one sync is queued at most.
    pub triggers: TriggerReceiver,
    /// Shared status for /readyz and sd_notify.
    pub status: Statuses,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Timing.
    pub timing: UnitTiming,
    /// The sync slots and the push lane it waits in.
    pub queues: Queues,
    /// What the task's first sync is logged as: `startup`, or `reload` for a task started
    /// by a SIGHUP that changed its unit (that one sync is the reload's).
    pub first: TriggerKind,
    /// Its notifiers and the units it depends on.
    pub links: Links,
}

/// The queues shared by every unit that a unit's syncs wait in.
pub struct Queues {
    /// Sync slots shared by every unit (`[daemon] max_concurrent_syncs`): a sync or self-heal
    /// holds one while it runs (not during the health wait); handed out first to units that
    /// have not synced yet, then to triggered syncs, then to resyncs ([`crate::daemon::slots`]).
    pub sync_slots: Arc<crate::daemon::slots::Slots>,
    /// The fetch permits of the unit's remote host ([`crate::daemon::slots::FetchHosts`]),
    /// held by each fetch of a sync instead of a slot; `None` for a local repository.
    pub fetch_host: Option<Arc<tokio::sync::Semaphore>>,
    /// The push lane shared by every unit ([`PUSH_LANE`] permits): a push or webhook sends its
    /// changed objects early holding one of these instead of a sync slot, so a push is applied
    /// even while every sync slot is taken; the rest of its sync takes a slot.
    /// `None` for a unit whose revision is not a git commit (a chart unit, an OCI artifact):
    /// its fetch is a network download with nothing to send early, and it syncs in a slot.
    pub push_lane: Option<Arc<tokio::sync::Semaphore>>,
    /// The unit's side of the path-unchanged rule, shared with its repository's watch: while
    /// it rests under the rule, a push that leaves its path alone does not wake it
    /// ([`crate::daemon::quiet`]). `None` for a unit whose revision is not a git commit.
    pub quiet: Option<Arc<crate::daemon::quiet::Quiet>>,
}

/// What a unit's task is linked to besides the cluster: its notifiers, the dashboard and its
/// dependencies.
pub struct Links {
    /// The observer that tells the unit's notifiers (`[[notify]]`) of its syncs.
    pub notify: Watch,
    /// What the dashboard shows: each sync's end is recorded there ([`Recorder`]);
    /// `None` without the dashboard.
    pub board: Option<Board>,
    /// The watched records of the units it depends on (`depends_on`), judged before it syncs
    /// a new revision; `None` for a unit without dependencies.
    pub depends: Option<Gate>,
}

impl UnitTask {
    /// Runs until `shutdown` turns true (a sync in flight finishes, a health wait is cancelled
    /// and recorded) or the trigger channel closes.
    ///
    /// Not an `async fn`: its argument would stay in the task's future beside the driver it
    /// was moved into, a second copy of the unit's state for as long as the unit runs.
    pub fn run(self, shutdown: watch::Receiver<bool>) -> impl std::future::Future<Output = ()> + Send {
        driver::Driver::new(self, shutdown).run()
    }
}

/// What the engine's effects need, owned by the effect that runs (one at a time): the engine
/// and the observers a sync's end is told to.
struct Ctx {
    /// The unit's name, for logs and metrics.
    unit: String,
    engine: Engine,
    status: Statuses,
    /// Which drifted objects to re-apply when.
    heal: Heal,
    /// What asked for the sync in progress (set when its objects are sent).
    cause: Cause,
    /// The log, metrics, readiness status, Kubernetes Events, notifiers and the dashboard, told
    /// of each sync
    /// ([`crate::observe::Observer`]).
    observers: Observers,
}

impl Ctx {
    fn new(
        engine: Engine,
        status: Statuses,
        metrics: Arc<Metrics>,
        first: TriggerKind,
        (notify, board): (Watch, Option<Board>),
    ) -> Self {
        let unit = engine.unit_name().to_string();
        // Its Events are written by a task that runs only while some are queued.
        let (events, _flush) = crate::observe::events::Events::for_engine(&engine);
        let mut observers = Observers::default()
            .with(Log::default())
            .with(Metered::new(unit.clone(), metrics))
            .with(Readiness::new(unit.clone(), Arc::new(status.clone())))
            .with(events)
            .with(notify);
        if let Some(board) = board {
            observers = observers.with(Recorder(board));
        }
        let cause = Cause::from(&super::trigger::Trigger::now(first));
        Self { unit, engine, status, heal: Heal::default(), cause, observers }
    }

    /// The readiness status of the unit, as its observer keeps it.
    fn readiness(&self) -> Readiness {
        Readiness::new(self.unit.clone(), Arc::new(self.status.clone()))
    }
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

/// Permits of the push lane ([`Queues::push_lane`]): how many units may fetch and send a
/// push's changed objects at once beside the `max_concurrent_syncs` slots. Each early apply
/// sends the objects of at most [`crate::sync::early::MAX_FILES`] files.
pub const PUSH_LANE: usize = 2;

/// When a unit's first resync is due after its task starts: `interval` × (0.5 + `r`), `r` in
/// [0, 1) the unit's [`resync_phase`], so the resyncs of units started together spread evenly
/// over one `resync_interval` (from half to one and a half of it) instead of all landing at
/// start + interval; later ones follow every `interval`. The same window as Config Connector's
/// jittered re-enqueue period (½ to 3⁄2 of the mean); Argo CD spreads its reconciliations with
/// `timeout.reconciliation.jitter`.
fn first_resync(interval: Duration, r: f64) -> Duration {
    interval.mul_f64(0.5 + r.clamp(0.0, 1.0))
}

/// The [`first_resync`] fraction of the `k`th unit task started (from 0): `k·(φ−1) mod 1`, the
/// golden-ratio (Weyl) sequence, whose first `n` points split [0, 1) into gaps of at most three
/// lengths, the largest under 2.7/`n` (the three-gap theorem) — evenly for every `n`, without
/// knowing how many units will start, where `n` random draws leave gaps up to about ln(n)/`n`.
/// So the fleet's resyncs fall at a flat rate over the interval, not in random clumps.
pub(crate) fn resync_phase(k: u64) -> f64 {
    (k as f64 * 0.618_033_988_749_894_9).fract()
}

/// Hands the pages that a sync's transient buffers (parsed YAML, list pages, responses) freed
/// back to the kernel. glibc malloc keeps them in its arenas otherwise: at 10,000 objects the
/// daemon's resident set after a sync stayed ~20 MB above what it holds live (`benches/RESULTS.md`,
/// "Memory and push latency at 10,000 objects"). `malloc_trim(0)` (glibc, malloc_trim(3)) releases free memory at the top of
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
    fn resync_phases_of_any_number_of_units_are_spread_evenly() {
        for n in [10u64, 1_000, 10_000] {
            let mut phases: Vec<f64> = (0..n).map(resync_phase).collect();
            phases.sort_by(f64::total_cmp);
            phases.push(phases[0] + 1.0);
            let widest = phases.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
            assert!(widest < 2.7 / n as f64, "{n} units: a gap of {widest} (even: {})", 1.0 / n as f64);
        }
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
