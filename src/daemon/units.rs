//! The set of running unit tasks: started, restarted and stopped as [`super::decide`] plans,
//! each in a span carrying `unit` and `cluster`, with its cluster's client from a
//! [`Registry`]. With sharding, only the units whose Lease this replica holds run: one that
//! loses it is aborted at once, one handed over to another replica is stopped after its
//! in-flight sync and only then reported stopped (its Lease is released after that).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::{Instrument, error, info, warn};

use super::decide::{self, UnitPlan};
use super::metrics::Metrics;
use super::route::Followed;
use super::shared_watch::{RepoWatches, Subscription};
use super::trigger::{self, Statuses, Trigger, TriggerKind, TriggerSender, UnitStatus};
use super::unit::{UnitTask, UnitTiming};
use crate::cluster::fence::{Fence, WRITE_TIMEOUT};
use crate::cluster::registry::Registry;
use crate::config::{Config, SyncUnit};
use crate::lease::shard::{Ownership, Running};
use crate::sync::Engine;

/// How long a stop waits for in-flight syncs before abandoning them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// How long a reload that restarts a unit in its health wait waits for the old task to end
/// the wait and record it (one write of the parent) before aborting it; the new task starts
/// after. Short: the daemon's loop must stay free to act on a lost Lease.
pub const WAIT_END_GRACE: Duration = Duration::from_secs(5);

/// One running unit task and what talks to it.
pub(super) struct RunningUnit {
    /// The settings it was started with: a reload that changes them restarts it.
    config: Arc<SyncUnit>,
    /// Its trigger channel (webhooks, reloads).
    triggers: TriggerSender,
    /// Its side of the path-unchanged rule ([`super::quiet`]), for webhooks.
    quiet: Option<Arc<super::quiet::Quiet>>,
    /// Asks it to stop after its in-flight sync.
    stop: watch::Sender<bool>,
    /// Its task.
    task: tokio::task::JoinHandle<()>,
    /// Its share of the watch of its local repository's refs, if any; dropped with it.
    _watch: Option<Subscription>,
    /// The watch of its `[sync.substitute] from` objects, if any; stopped when dropped.
    _vars: Option<super::vars_watch::VarsWatch>,
}

/// The set of running unit tasks.
pub(super) struct Units {
    /// One client per cluster.
    pub(super) clusters: Registry,
    /// The permits every unit task draws from.
    pub(super) concurrency: Concurrency,
    /// The per-unit status the tasks publish.
    pub(super) status: Statuses,
    /// The daemon's metrics.
    pub(super) metrics: Arc<Metrics>,
    /// How many unit tasks this process started: the index of the next one's
    /// [`super::unit::resync_phase`].
    pub(super) started: std::sync::atomic::AtomicU64,
    /// The tasks running, by unit name.
    pub(super) running: BTreeMap<String, RunningUnit>,
    /// Which units this replica holds, and those it is handing over.
    pub(super) holding: Holding,
    /// Failed starts in a row of each unit that is wanted here and not running; reported to
    /// the sharding loop ([`Running::failed`]) from [`START_TRIES`] on.
    pub(super) start_failures: BTreeMap<String, u32>,
    /// One watch of each local repository's refs, shared by the units that follow it.
    pub(super) repo_watches: RepoWatches,
    /// What the dashboard shows, fed by each unit task's [`super::ui::Recorder`]; `None`
    /// without `[daemon.ui]`.
    pub(super) board: Option<super::ui::Board>,
    /// The notifiers (`[[notify]]`), put in force again at each reconcile (a reload).
    pub(super) notify: crate::notify::Notifications,
    /// The pull-request preview tasks (`[[preview]]`), put in force at each reconcile; never
    /// started on a sharded replica (every replica would post).
    pub(super) previews: super::preview::Previews,
}

/// The permits every unit task draws from, sized at start.
pub(super) struct Concurrency {
    /// `[daemon] max_concurrent_syncs` slots.
    pub(super) sync_slots: Arc<super::slots::Slots>,
    /// The fetch permits of each remote host (`[daemon] max_fetches_per_host`): a fetch holds
    /// its host's, and no sync slot.
    pub(super) fetch_hosts: Arc<super::slots::FetchHosts>,
    /// The push lane ([`super::unit::PUSH_LANE`] permits): a push's early apply holds one of
    /// these instead of a sync slot.
    pub(super) push_lane: Arc<tokio::sync::Semaphore>,
}

/// Which units this replica holds, and those it is handing over, with the fences of their
/// writes.
pub(super) struct Holding {
    /// With sharding, the units this replica holds the Lease of (only those run); `None`
    /// without sharding (every unit runs).
    pub(super) owned: Option<BTreeSet<String>>,
    /// Units handed over and stopping after their in-flight sync: their tasks' abort
    /// handles (for a Lease lost meanwhile); a stopper task reports on `stopped` when done.
    pub(super) stopping: BTreeMap<String, tokio::task::AbortHandle>,
    /// Where stoppers report the unit they stopped.
    pub(super) stopped: mpsc::UnboundedSender<String>,
    /// The fence of every unit's writes: with leader election the Lease's ([`Fences::Leader`]),
    /// with sharding each unit's own, from the [`Ownership`] ([`Fences::Units`]).
    pub(super) fences: Fences,
}

/// Which Lease fences the units' writes ([`crate::cluster::fence`]).
#[derive(Debug, Clone)]
pub(super) enum Fences {
    /// No Lease: one replica, writes never fenced.
    None,
    /// Leader election: every unit runs under the one Lease.
    Leader(Fence),
    /// Sharding: each unit under its own Lease, as the last ownership gave them.
    Units(BTreeMap<String, Fence>),
}

impl Fences {
    /// The fence of `unit`; a closed one when sharding gave none (it is not held here).
    pub(super) fn of(&self, unit: &str) -> Fence {
        match self {
            Fences::None => Fence::unfenced(),
            Fences::Leader(fence) => fence.clone(),
            Fences::Units(fences) => fences.get(unit).cloned().unwrap_or_else(|| Fence::new(format!("unit {unit}"))),
        }
    }

    /// Every fence.
    pub(super) fn all(&self) -> Vec<(Option<String>, Fence)> {
        match self {
            Fences::None => Vec::new(),
            Fences::Leader(fence) => vec![(None, fence.clone())],
            Fences::Units(fences) => fences.iter().map(|(u, f)| (Some(u.clone()), f.clone())).collect(),
        }
    }
}

/// Failed starts in a row after which a sharded replica gives a unit up for a while
/// ([`Running::failed`]): a full or read-only state directory, a mirror that cannot be opened.
pub(super) const START_TRIES: u32 = 3;

impl Units {
    /// Starts every unit of `config` that is not running with the same settings, each task's
    /// first sync logged as `first` (`reload` after a SIGHUP); stops the rest
    /// ([`decide::plan_units`]). Units whose engine cannot start (its mirror cannot be opened:
    /// a read-only or full state directory) are logged and marked failed. Returns whether any
    /// such unit is left, for the caller to try again with backoff, and the plan carried out.
    pub(super) async fn reconcile(&mut self, config: &Config, first: TriggerKind) -> (bool, UnitPlan) {
        self.notify.configure(&config.notify);
        if self.holding.owned.is_none() {
            self.previews.configure(config, &self.clusters);
        }
        let owned = |u: &&SyncUnit| self.holding.owned.as_ref().is_none_or(|o| o.contains(&u.name));
        let wanted: BTreeMap<&str, &SyncUnit> =
            config.units.iter().filter(owned).map(|u| (u.name.as_str(), u)).collect();
        if let Some(board) = &self.board {
            board.set_units(config.units.iter().filter(owned));
        }
        let running: BTreeMap<&str, &SyncUnit> = self.running.iter().map(|(n, r)| (n.as_str(), &*r.config)).collect();
        let stopping: BTreeSet<&str> = self.holding.stopping.keys().map(String::as_str).collect();
        let plan = decide::plan_units(&running, &stopping, &wanted);
        let mut waiting = Vec::new();
        for name in &plan.stop {
            // Aborted, not awaited: the daemon's loop must stay free to act on a lost Lease,
            // and the restarted unit syncs again at once. A unit in its health wait is asked
            // to stop instead, which ends the wait at once and records it on the parent (the
            // result in place of the wait); aborted, it would leave the parent saying it waits.
            let Some(r) = self.running.remove(name) else { continue };
            if self.status.snapshot().get(name).is_some_and(|s| s.waiting) {
                waiting.push(r);
            } else {
                r.task.abort();
            }
        }
        // Before the new tasks start, so that no record of the old wait lands after theirs.
        stop(waiting, WAIT_END_GRACE).await;
        for name in &plan.forget {
            self.metrics.forget_unit(name);
        }
        self.status.retain(&wanted.keys().map(|u| u.to_string()).collect::<Vec<_>>());
        self.start_failures.retain(|u, _| wanted.contains_key(u.as_str()));
        let mut started = Vec::new();
        for name in &plan.start {
            let unit = wanted[name.as_str()];
            match self.start(config, unit, first).await {
                Ok(r) => {
                    self.start_failures.remove(&unit.name);
                    started.push(unit.name.clone());
                    // Pending until its first sync: a unit still waiting for a sync slot must
                    // keep /readyz at 503 (readiness counts only units with a status).
                    if !self.status.snapshot().contains_key(&unit.name) {
                        self.status.set(&unit.name, UnitStatus::default());
                    }
                    self.running.insert(unit.name.clone(), r);
                }
                Err(e) => {
                    *self.start_failures.entry(unit.name.clone()).or_default() += 1;
                    let error = crate::telemetry::Masked::new(crate::telemetry::unit_error(&unit.name, &e));
                    error!(unit = %unit.name, error = %error, "unit not started");
                    self.metrics.observe_error(&unit.name, &e);
                    let last_error = Some(crate::telemetry::Masked::new(format!("not started: {error}")));
                    self.status
                        .set(&unit.name, UnitStatus { last_sync_ok: Some(false), last_error, ..Default::default() });
                }
            }
        }
        let missing = wanted.keys().any(|u| !self.running.contains_key(*u) && !self.holding.stopping.contains_key(*u));
        (missing, UnitPlan { start: started, ..plan })
    }

    /// Acts on a new [`Ownership`] ([`decide::plan_ownership`]): units that lost their Lease
    /// are aborted at once (fencing), units being handed over are stopped after their
    /// in-flight sync, newly held units are started. Returns whether some unit could not start
    /// (as [`Self::reconcile`]).
    pub(super) async fn own(&mut self, config: &Config, ownership: &Ownership) -> bool {
        let plan = decide::plan_ownership(self.running.keys(), self.holding.stopping.keys(), ownership);
        for name in plan.abort_stopping {
            warn!(unit = %name, "unit lease lost while stopping; aborted");
            if let Some(abort) = self.holding.stopping.remove(&name) {
                abort.abort();
            }
        }
        for name in plan.hand_over {
            let Some(r) = self.running.remove(&name) else { continue };
            self.metrics.forget_unit(&name);
            info!(unit = %name, "unit assigned to another replica; stopping after its sync");
            self.holding.stopping.insert(name.clone(), r.task.abort_handle());
            let stopped = self.holding.stopped.clone();
            let fence = ownership.fences.get(&name).cloned().unwrap_or_else(Fence::unfenced);
            tokio::spawn(async move {
                stop(vec![r], SHUTDOWN_GRACE).await;
                // The Lease is released once reported stopped: first let every write the
                // task sent be answered (or, abandoned, pass its bound), so the next owner's
                // first write cannot be overtaken by one of ours.
                if !fence.drained(WRITE_TIMEOUT).await {
                    warn!(unit = %name, in_flight = fence.in_flight(), "writes of the unit still in flight at hand-over");
                }
                let _ = stopped.send(name);
            });
        }
        for name in plan.abort {
            let Some(r) = self.running.remove(&name) else { continue };
            self.metrics.forget_unit(&name);
            warn!(unit = %name, "unit lease lost: stopping the unit at once");
            r.task.abort();
        }
        self.holding.owned = Some(ownership.held.clone());
        self.holding.fences = Fences::Units(ownership.fences.clone());
        self.reconcile(config, TriggerKind::Startup).await.0
    }

    /// What the sharding loop reads before releasing a Lease.
    pub(super) fn report(&self, generation: u64) -> Running {
        let units = self.running.keys().chain(self.holding.stopping.keys()).cloned().collect();
        let failed = self.start_failures.iter().filter(|(_, n)| **n >= START_TRIES).map(|(u, _)| u.clone()).collect();
        Running { generation, units, failed }
    }

    /// How many units should run here: every unit of `config`, or with sharding those held.
    pub(super) fn expected(&self, config: &Config) -> usize {
        self.holding.owned.as_ref().map_or(config.units.len(), BTreeSet::len)
    }

    async fn start(&self, config: &Config, unit: &SyncUnit, first: TriggerKind) -> crate::sync::Result<RunningUnit> {
        let fence = self.holding.fences.of(&unit.name);
        let client = self
            .clusters
            .fenced_client(&unit.cluster, &fence)
            .expect("clusters are fixed at start and every unit names one");
        let shared = Arc::new(unit.clone());
        let agent = self.clusters.user_agent();
        let mut engine =
            Engine::fenced(client.clone(), config.cluster_of(unit), &config.daemon.state_dir, &shared, &fence, agent)
                .await?;
        if let Some(watches) = self.clusters.watches(&unit.cluster) {
            engine.share_watches(watches);
        }
        if let Some(answers) = self.clusters.answers(&unit.cluster) {
            engine.share_discovery(answers);
        }
        let (triggers, rx) = trigger::channel();
        let (stop, stop_rx) = watch::channel(false);
        let quiet = unit.is_git().then(|| super::quiet::Quiet::new(&unit.name, engine.repo().clone()));
        let watch = unit.local_repo().and_then(|path| match self.repo_watches.subscribe(&path, triggers.clone(), quiet.clone()) {
            Ok(w) => Some(w),
            Err(e) => {
                warn!(unit = %unit.name, repo = %path.display(), error = %e, "cannot watch the repository; polling only");
                None
            }
        });
        let vars = super::vars_watch::watch(&client, unit, triggers.clone());
        let task = UnitTask {
            engine,
            triggers: rx,
            status: self.status.clone(),
            metrics: self.metrics.clone(),
            timing: UnitTiming {
                interval: config.daemon.interval,
                resync_interval: config.daemon.resync_interval,
                self_heal: config.daemon.self_heal,
                resync_phase: super::unit::resync_phase(
                    self.started.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                ),
            },
            queues: super::unit::Queues {
                sync_slots: self.concurrency.sync_slots.clone(),
                fetch_host: fetch_host(unit).map(|host| self.concurrency.fetch_hosts.of(&host)),
                push_lane: unit.is_git().then(|| self.concurrency.push_lane.clone()),
                quiet: quiet.clone(),
            },
            first,
            links: super::unit::Links {
                notify: crate::observe::notify::Watch::new(&self.notify, unit),
                board: self.board.clone(),
                depends: super::unit::Gate::new(unit, &self.clusters),
            },
        };
        self.metrics.set_unit_cluster(&unit.name, &unit.cluster);
        let span = tracing::info_span!("unit", unit = %unit.name, cluster = %unit.cluster);
        let handle = tokio::spawn(task.run(stop_rx).instrument(span));
        Ok(RunningUnit { config: shared, triggers, quiet, stop, task: handle, _watch: watch, _vars: vars })
    }

    /// The units webhooks can trigger: name, what it follows and trigger channel of each.
    pub(super) fn senders(&self) -> Vec<super::http::UnitRoute> {
        let route =
            |r: &RunningUnit| (r.config.name.clone(), Followed::of(&r.config), r.triggers.clone(), r.quiet.clone());
        self.running.values().map(route).collect()
    }

    /// Sends a reload trigger to each of `names` that runs (a full channel means a sync is
    /// queued already: it will read the new config).
    pub(super) fn trigger_reload(&self, names: &[String]) {
        for r in names.iter().filter_map(|name| self.running.get(name)) {
            let _ = r.triggers.offer(Trigger::now(TriggerKind::Reload));
        }
    }

    /// Stops every unit now, without waiting: leadership was lost.
    pub(super) fn abort_all(&mut self) {
        self.previews.stop();
        for (_, r) in std::mem::take(&mut self.running) {
            r.task.abort();
        }
    }

    /// Stops every unit at shutdown: running ones after their in-flight sync (at most
    /// [`SHUTDOWN_GRACE`]), those still stopping after a hand-over at once.
    pub(super) async fn shut_down(&mut self) {
        self.previews.stop();
        stop(std::mem::take(&mut self.running).into_values().collect(), SHUTDOWN_GRACE).await;
        for (_, abort) in std::mem::take(&mut self.holding.stopping) {
            abort.abort();
        }
    }
}

/// Asks units to stop after their in-flight sync, waits up to `grace` for all of them (one
/// deadline, not one per unit), then aborts those still running.
async fn stop(units: Vec<RunningUnit>, grace: Duration) {
    for r in &units {
        let _ = r.stop.send(true);
    }
    let deadline = tokio::time::Instant::now() + grace;
    for r in units {
        let abort = r.task.abort_handle();
        if tokio::time::timeout_at(deadline, r.task).await.is_err() {
            abort.abort();
        }
    }
}

/// The remote host `unit`'s fetch goes to (a chart unit's chart repository, else its
/// repository or registry); `None` for a local repository.
fn fetch_host(unit: &crate::config::SyncUnit) -> Option<String> {
    match &unit.helm.chart {
        Some(chart) => crate::source::remote_host(&chart.repo_url),
        None => crate::source::remote_host(&unit.repo),
    }
}
