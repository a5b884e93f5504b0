//! `gitward run`: the long-lived daemon. Wiring only — the engine, the unit tasks, the HTTP
//! server and leader election each live in their own module.
//!
//! [`run`] takes an already-bound listener (or binds `[daemon] listen`) and a shutdown future,
//! so tests bind port 0 and stop the daemon on demand (mini-redis `server::run`). SIGHUP
//! reloads the config (a bad config is logged and the old one kept) and syncs every unit.
//! With leader election, unit tasks run only while this replica holds the Lease and are
//! aborted the moment it is lost. With sharding (`[daemon.sharding]`, see [`crate::lease::shard`]), a
//! unit task runs only while this replica holds the unit's Lease: one that loses it is aborted
//! at once, one handed over to another replica is stopped after its in-flight sync and only
//! then released. Units of several clusters each use their cluster's client from a
//! [`Registry`]; their tasks run in a span carrying `unit` and `cluster`. Clusters and sharding
//! are read at start: a SIGHUP that changes them is refused (the previous config is kept).
//! With systemd (`Type=notify`), `READY=1` follows the first
//! sync of every unit that applied, `STATUS=` carries a summary, and `WATCHDOG=1` is sent when
//! enabled.
//!
//! What they follow: `READY=1` and `/readyz` follow the apply (`READY=1`: every unit has applied
//! once — a sync that ran to the end, objects the API server refused aside; a daemon whose
//! syncs all fail, e.g. the cluster unreachable, never sends it, and systemd's start timeout
//! applies; `/readyz`: every unit's last sync not failed as a whole, an API server that does
//! not answer counting as failed), not health — an application that does not become healthy is
//! not a reason to restart or unroute gitward. `STATUS=` shows per unit the state, revision,
//! tracked objects and, once a health wait ended, the changed objects by health:
//! `app: synced 3f2a9c1e0b7d (12 objects; 2 healthy, 0 progressing, 1 degraded)`.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};
use tracing::{Instrument, error, info, warn};

use super::backoff::Backoff;
use super::http::{self, HttpState};
use super::metrics::Metrics;
use super::repo_watch::{self, RepoWatch};
use super::trigger::{Status, Trigger, TriggerKind, UnitStatus};
use super::unit::{UnitTask, UnitTiming};
use crate::cluster::registry::Registry;
use crate::config::{Config, SyncUnit};
use crate::lease::election::{self as leader, LeaderConfig};
use crate::lease::shard::{self, Ownership, Running, ShardConfig};
use crate::sync::Engine;
use crate::telemetry::error_chain;

/// How long shutdown waits for in-flight syncs before abandoning them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// Errors that stop the daemon from starting. Not worth retrying without a fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config file is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::Error),
    /// The cluster cannot be reached (kubeconfig).
    #[error(transparent)]
    Cluster(#[from] crate::cluster::Error),
    /// A client for the cluster `name` could not be built (its kubeconfig or context).
    #[error("cluster {name}")]
    ClusterNamed {
        /// The cluster's name in the config.
        name: String,
        /// Why.
        #[source]
        source: crate::cluster::Error,
    },
    /// The HTTP listener, the webhook secret or a signal handler could not be set up.
    #[error("{what}")]
    Io {
        /// What was being set up.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

struct RunningUnit {
    config: SyncUnit,
    triggers: mpsc::Sender<Trigger>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    _watch: Option<RepoWatch>,
}

/// The set of running unit tasks.
struct Units {
    /// One client per cluster.
    clusters: Registry,
    /// `[daemon] max_concurrent_syncs` slots, shared by every unit task.
    sync_slots: Arc<tokio::sync::Semaphore>,
    status: Status,
    metrics: Arc<Metrics>,
    running: BTreeMap<String, RunningUnit>,
    /// With sharding, the units this replica holds the Lease of (only those run); `None`
    /// without sharding (every unit runs).
    owned: Option<BTreeSet<String>>,
    /// Units handed over and stopping after their in-flight sync: their tasks' abort
    /// handles (for a Lease lost meanwhile); a stopper task reports on `stopped` when done.
    stopping: BTreeMap<String, tokio::task::AbortHandle>,
    /// Where stoppers report the unit they stopped.
    stopped: mpsc::UnboundedSender<String>,
}

impl Units {
    /// Starts every unit of `config` that is not running with the same settings, each task's
    /// first sync logged as `first` (`reload` after a SIGHUP); stops the rest. Units whose
    /// engine cannot start (its mirror cannot be opened: a read-only or full state directory)
    /// are logged and marked failed. Returns whether any such unit is left, for the caller to
    /// try again with backoff, and the units started.
    async fn reconcile(&mut self, config: &Config, first: TriggerKind) -> (bool, BTreeSet<String>) {
        let owned = |u: &&SyncUnit| self.owned.as_ref().is_none_or(|o| o.contains(&u.name));
        let wanted: BTreeMap<&str, &SyncUnit> =
            config.units.iter().filter(owned).map(|u| (u.name.as_str(), u)).collect();
        let stale: Vec<String> = self
            .running
            .iter()
            .filter(|(name, r)| wanted.get(name.as_str()).is_none_or(|u| **u != r.config))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            // Aborted, not awaited: the daemon's loop must stay free to act on a lost Lease,
            // and the restarted unit syncs again at once.
            if let Some(r) = self.running.remove(&name) {
                r.task.abort();
            }
            if !wanted.contains_key(name.as_str()) {
                self.metrics.forget_unit(&name);
            }
        }
        self.status.retain(&wanted.keys().map(|u| u.to_string()).collect::<Vec<_>>());
        let mut started = BTreeSet::new();
        for unit in wanted.values() {
            if self.running.contains_key(&unit.name) || self.stopping.contains_key(&unit.name) {
                continue;
            }
            match self.start(config, unit, first).await {
                Ok(r) => {
                    started.insert(unit.name.clone());
                    // Pending until its first sync: a unit still waiting for a sync slot must
                    // keep /readyz at 503 (readiness counts only units with a status).
                    if !self.status.snapshot().contains_key(&unit.name) {
                        self.status.set(&unit.name, UnitStatus::default());
                    }
                    self.running.insert(unit.name.clone(), r);
                }
                Err(e) => {
                    error!(unit = %unit.name, error = %crate::telemetry::unit_error(&unit.name, &e), "unit not started");
                    self.metrics.observe_error(&unit.name, &e);
                    self.status.set(&unit.name, UnitStatus { last_sync_ok: Some(false), ..Default::default() });
                }
            }
        }
        let missing = wanted.keys().any(|u| !self.running.contains_key(*u) && !self.stopping.contains_key(*u));
        (missing, started)
    }

    /// Acts on a new [`Ownership`]: units that lost their Lease are aborted at once (fencing),
    /// units being handed over are stopped after their in-flight sync, newly held units are
    /// started. Returns whether some unit could not start (as [`Self::reconcile`]).
    async fn own(&mut self, config: &Config, ownership: &Ownership) -> bool {
        for name in self.stopping.keys().cloned().collect::<Vec<_>>() {
            if !ownership.releasing.contains(&name) {
                warn!(unit = %name, "unit lease lost while stopping; aborted");
                if let Some(abort) = self.stopping.remove(&name) {
                    abort.abort();
                }
            }
        }
        let leaving: Vec<String> = self.running.keys().filter(|u| !ownership.held.contains(*u)).cloned().collect();
        for name in leaving {
            let Some(r) = self.running.remove(&name) else { continue };
            self.metrics.forget_unit(&name);
            if ownership.releasing.contains(&name) {
                info!(unit = %name, "unit assigned to another replica; stopping after its sync");
                self.stopping.insert(name.clone(), r.task.abort_handle());
                let stopped = self.stopped.clone();
                tokio::spawn(async move {
                    stop(vec![r], SHUTDOWN_GRACE).await;
                    let _ = stopped.send(name);
                });
            } else {
                warn!(unit = %name, "unit lease lost: stopping the unit at once");
                r.task.abort();
            }
        }
        self.owned = Some(ownership.held.clone());
        self.reconcile(config, TriggerKind::Startup).await.0
    }

    /// What the sharding loop reads before releasing a Lease.
    fn report(&self, generation: u64) -> Running {
        let units = self.running.keys().chain(self.stopping.keys()).cloned().collect();
        Running { generation, units }
    }

    async fn start(&self, config: &Config, unit: &SyncUnit, first: TriggerKind) -> crate::sync::Result<RunningUnit> {
        let client = self.clusters.client(&unit.cluster).expect("clusters are fixed at start and every unit names one");
        let engine = Engine::new(client.clone(), config.cluster_of(unit), &config.daemon.state_dir, unit).await?;
        let (triggers, rx) = mpsc::channel(1);
        let (stop, stop_rx) = watch::channel(false);
        let watch = unit.local_repo().and_then(|path| match repo_watch::watch(&path, triggers.clone()) {
            Ok(w) => Some(w),
            Err(e) => {
                warn!(unit = %unit.name, repo = %path.display(), error = %e, "cannot watch the repository; polling only");
                None
            }
        });
        let task = UnitTask {
            engine,
            triggers: rx,
            status: self.status.clone(),
            metrics: self.metrics.clone(),
            timing: UnitTiming {
                interval: config.daemon.interval,
                resync_interval: config.daemon.resync_interval,
                self_heal: config.daemon.self_heal,
            },
            sync_slots: self.sync_slots.clone(),
            first,
        };
        self.metrics.set_unit_cluster(&unit.name, &unit.cluster);
        let span = tracing::info_span!("unit", unit = %unit.name, cluster = %unit.cluster);
        let handle = tokio::spawn(task.run(stop_rx).instrument(span));
        Ok(RunningUnit { config: unit.clone(), triggers, stop, task: handle, _watch: watch })
    }

    fn senders(&self) -> Vec<(String, String, mpsc::Sender<Trigger>)> {
        self.running.values().map(|r| (r.config.name.clone(), r.config.reference.clone(), r.triggers.clone())).collect()
    }

    /// Stops every unit now, without waiting: leadership was lost.
    fn abort_all(&mut self) {
        for (_, r) in std::mem::take(&mut self.running) {
            r.task.abort();
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

fn read_secret(config: &Config) -> Result<Option<Arc<Vec<u8>>>> {
    match &config.daemon.webhook_secret_file {
        None => Ok(None),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(io(format!("webhook secret {}", path.display())))?;
            Ok(Some(Arc::new(text.trim().as_bytes().to_vec())))
        }
    }
}

/// This replica's identity for leader election: `$POD_NAME` when set and not empty (unique
/// per pod), else the hostname with a random suffix.
fn identity() -> String {
    match std::env::var("POD_NAME") {
        Ok(name) if !name.trim().is_empty() => name.trim().to_string(),
        _ => leader::default_identity(),
    }
}

fn summary(status: &Status) -> String {
    status
        .snapshot()
        .iter()
        .map(|(name, s)| {
            let state = match s.last_sync_ok {
                Some(true) => "synced",
                Some(false) => "failed",
                None => "pending",
            };
            let rev = s.last_revision.as_deref().map(|r| &r[..r.len().min(12)]).unwrap_or("-");
            let health = match (s.health, s.waiting) {
                (_, true) => "; waiting for health".to_string(),
                (Some(h), false) => {
                    format!("; {} healthy, {} progressing, {} degraded", h.healthy, h.progressing, h.degraded)
                }
                (None, false) => String::new(),
            };
            let failed = match s.failed_objects {
                0 => String::new(),
                n => format!(", {n} failed"),
            };
            format!("{name}: {state} {rev} ({} objects{failed}{health})", s.tracked_objects)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Logs the version of each render tool at start. A missing tool is a warning when a unit
/// asks for it by name (`render = "kustomize"`/`"helm"`, or `[sync.decryption]` for sops), and
/// an info line otherwise (`render = "auto"` needs it only if the path turns out to hold a
/// kustomization or a chart).
fn log_render_tools(config: &Config) {
    use crate::config::RenderMode;
    let needs = |tool: &str| {
        config.units.iter().any(|u| match tool {
            "kustomize" => u.render == RenderMode::Kustomize,
            "helm" => u.render == RenderMode::Helm,
            _ => u.decryption.is_some(),
        })
    };
    for (tool, found) in crate::render::tool_versions(&config.render) {
        match found {
            Ok((path, version)) => info!(tool, version, path = %path.display(), "render tool"),
            Err(reason) if needs(tool) => warn!(tool, reason, "render tool unavailable"),
            Err(reason) => info!(tool, reason, "render tool unavailable"),
        }
    }
}

/// The sharding settings of `config`, with the identity resolved, if sharding is on.
fn shard_config(config: &Config) -> Option<ShardConfig> {
    config.daemon.sharding.as_ref().map(|s| ShardConfig {
        namespace: s.namespace.clone(),
        identity: s.identity.clone().unwrap_or_else(shard::default_identity),
        lease_duration: s.lease_duration,
    })
}

/// Sharding as the run loop drives it: the loop's channels and task.
struct Sharded {
    /// Settings (identity resolved).
    cfg: ShardConfig,
    /// The client of the cluster holding the Leases.
    client: kube::Client,
    /// What this replica may run.
    ownership: watch::Receiver<Ownership>,
    /// The unit names of the config, for the loop.
    units: watch::Sender<Vec<String>>,
    /// What runs here, for the loop.
    running: watch::Sender<Running>,
    /// The loop's task.
    task: tokio::task::JoinHandle<()>,
}

/// Runs the daemon with the config at `config_path` until `shutdown` completes.
///
/// `listener`: an already-bound HTTP listener, else `[daemon] listen` is bound, else none.
///
/// Errors: [`Error`] when the config, a cluster client, the listener or the webhook secret
/// cannot be set up at start. Once running, failures are logged and retried, never returned.
pub async fn run(config_path: &Path, listener: Option<TcpListener>, shutdown: impl Future<Output = ()>) -> Result<()> {
    let config_path: PathBuf = config_path.to_path_buf();
    let mut config = Config::load(&config_path)?;
    let shard_cfg = shard_config(&config);
    let user_agent = shard_cfg.as_ref().map_or_else(|| crate::TOOLING.to_owned(), |s| shard::user_agent(&s.identity));
    let clusters = Registry::connect(&config.clusters, &user_agent)
        .await
        .map_err(|(name, source)| Error::ClusterNamed { name, source })?;
    log_render_tools(&config);
    let status = Status::default();
    let metrics = Arc::new(Metrics::new());
    let http_state = HttpState::new(read_secret(&config)?, status.clone(), metrics.clone());
    let listener = match (listener, config.daemon.listen) {
        (Some(l), _) => Some(l),
        (None, Some(addr)) => Some(TcpListener::bind(addr).await.map_err(io(format!("listen on {addr}")))?),
        (None, None) => None,
    };
    let (http_stop, http_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let http_task = listener.map(|l| {
        match l.local_addr() {
            Ok(addr) => info!(listen = %addr, "http listening"),
            Err(_) => info!("http listening"),
        }
        tokio::spawn(http::serve(l, http_state.clone(), async move {
            let _ = http_stop_rx.await;
        }))
    });

    // Leader election and sharding use the first cluster's client (sharding: its own
    // `cluster`); resolution guarantees it exists.
    let first = config.clusters[0].name.clone();
    let lease_cluster = config.daemon.sharding.as_ref().map_or(first, |s| s.cluster.clone());
    let client = clusters.client(&lease_cluster).expect("the Lease cluster is configured").clone();
    let lease = config.daemon.leader_election.clone().map(|le| LeaderConfig {
        namespace: le.namespace,
        name: le.name,
        identity: identity(),
        lease_duration: le.lease_duration,
        renew_every: le.renew_every,
    });
    let (mut leadership, leader_task) = match &lease {
        Some(cfg) => {
            let (l, t) = leader::spawn(client.clone(), cfg.clone());
            (Some(l), Some(t))
        }
        None => (None, None),
    };
    let (stopped_tx, mut stopped_rx) = mpsc::unbounded_channel();
    // Sized at start; a reload does not resize it (the running units keep their slots).
    let sync_slots = Arc::new(tokio::sync::Semaphore::new(config.daemon.max_concurrent_syncs));
    let mut units = Units {
        clusters: clusters.clone(),
        sync_slots,
        status: status.clone(),
        metrics: metrics.clone(),
        running: BTreeMap::new(),
        owned: shard_cfg.as_ref().map(|_| BTreeSet::new()),
        stopping: BTreeMap::new(),
        stopped: stopped_tx,
    };
    let mut sharded = shard_cfg.map(|cfg| {
        let (units_tx, units_rx) = watch::channel(config.units.iter().map(|u| u.name.clone()).collect());
        let (running_tx, running_rx) = watch::channel(Running::default());
        let (ownership, task) = shard::spawn(client.clone(), cfg.clone(), units_rx, running_rx, metrics.clone());
        Sharded { cfg, client: client.clone(), ownership, units: units_tx, running: running_tx, task }
    });
    let mut leading = leadership.is_none();
    status.set_standby(!leading || sharded.is_some());
    // Units that could not start are started again with backoff (1 s doubling to 5 min), so
    // a state directory made writable again needs no restart: no crash loop, no manual step.
    let mut start_backoff = Backoff::default();
    let mut restart_at: Option<tokio::time::Instant> = None;
    let mut schedule_restart = |missing: bool, restart_at: &mut Option<tokio::time::Instant>| {
        *restart_at = missing.then(|| tokio::time::Instant::now() + start_backoff.next_delay());
        if !missing {
            start_backoff.reset();
        }
    };
    if leading {
        let (missing, _) = units.reconcile(&config, TriggerKind::Startup).await;
        schedule_restart(missing, &mut restart_at);
        http_state.set_units(units.senders());
    }
    let mut hangup = signal(SignalKind::hangup()).map_err(io("SIGHUP handler"))?;
    let watchdog = sd_notify::watchdog_enabled();
    let mut tick =
        tokio::time::interval(watchdog.map_or(Duration::from_secs(1), |w| (w / 2).min(Duration::from_secs(1))));
    let mut ready_sent = false;
    let mut last_status = String::new();
    let mut generation = 0;
    tokio::pin!(shutdown);
    info!(
        units = config.units.len(),
        clusters = config.clusters.len(),
        leader_election = lease.is_some(),
        sharding = sharded.is_some(),
        identity = sharded.as_ref().map(|s| s.cfg.identity.as_str()),
        "gitward running"
    );
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = hangup.recv() => {
                match Config::load(&config_path) {
                    Ok(new) if new.clusters != config.clusters || new.daemon.sharding != config.daemon.sharding => {
                        error!(config = %config_path.display(), "config reload refused: [cluster] and [daemon.sharding] are read at start; restart to change them; keeping the previous config");
                    }
                    Ok(new) => {
                        info!(config = %config_path.display(), "config reloaded");
                        config = new;
                        if let Ok(secret) = read_secret(&config) {
                            http_state.set_secret(secret);
                        }
                        if let Some(s) = &sharded {
                            s.units.send_replace(config.units.iter().map(|u| u.name.clone()).collect());
                        }
                        if leading {
                            // A unit the new config changed is started again and its first
                            // sync is the reload's: one sync per unit, not a startup and a reload.
                            let (missing, started) = units.reconcile(&config, TriggerKind::Reload).await;
                            schedule_restart(missing, &mut restart_at);
                            http_state.set_units(units.senders());
                            for (name, r) in &units.running {
                                if !started.contains(name) {
                                    let _ = r.triggers.try_send(Trigger::now(TriggerKind::Reload));
                                }
                            }
                        }
                    }
                    Err(e) => error!(config = %config_path.display(), error = %error_chain(&e), "config reload failed; keeping the previous config"),
                }
            }
            changed = async { sharded.as_mut().expect("guarded").ownership.changed().await }, if sharded.is_some() => {
                let s = sharded.as_mut().expect("guarded");
                if changed.is_err() {
                    error!("sharding loop stopped; applying nothing until restarted");
                    units.own(&config, &Ownership::default()).await;
                    sharded = None;
                } else {
                    let ownership = s.ownership.borrow_and_update().clone();
                    let missing = units.own(&config, &ownership).await;
                    schedule_restart(missing, &mut restart_at);
                    generation = ownership.generation;
                    s.running.send_replace(units.report(generation));
                    status.set_standby(ownership.held.is_empty());
                }
                http_state.set_units(units.senders());
            }
            Some(name) = stopped_rx.recv() => {
                units.stopping.remove(&name);
                if let Some(s) = &sharded {
                    s.running.send_replace(units.report(generation));
                }
            }
            changed = async { leadership.as_mut().expect("guarded").changed().await }, if leadership.is_some() => {
                // The election loop ending (Err) is leadership lost: never apply without a Lease.
                let now = changed.is_ok() && leadership.as_ref().is_some_and(|l| l.is_leader());
                if changed.is_err() {
                    error!("leader election stopped; applying nothing until restarted");
                    leadership = None;
                }
                if now && !leading {
                    info!("leading: starting units");
                    status.set_standby(false);
                    let (missing, _) = units.reconcile(&config, TriggerKind::Startup).await;
                    schedule_restart(missing, &mut restart_at);
                    http_state.set_units(units.senders());
                } else if !now && leading {
                    warn!("leadership lost: stopping units at once");
                    units.abort_all();
                    restart_at = None;
                    http_state.set_units(Vec::new());
                    status.set_standby(true);
                }
                leading = now;
            }
            _ = tokio::time::sleep_until(restart_at.unwrap_or_else(tokio::time::Instant::now)), if restart_at.is_some() && leading => {
                let (missing, _) = units.reconcile(&config, TriggerKind::Startup).await;
                schedule_restart(missing, &mut restart_at);
                http_state.set_units(units.senders());
                if let Some(s) = &sharded {
                    s.running.send_replace(units.report(generation));
                }
            }
            _ = tick.tick() => {
                let snapshot = status.snapshot();
                let expected = units.owned.as_ref().map_or(config.units.len(), BTreeSet::len);
                // READY=1 once every unit has applied (a sync that ran to the end against an
                // API server that answered), not merely tried: a daemon whose syncs all fail
                // is not ready, and systemd's start timeout is what ends a start that never is.
                if !ready_sent && leading && !snapshot.is_empty() && snapshot.len() == expected
                    && snapshot.values().all(|s| s.applied_once)
                {
                    ready_sent = true;
                    let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
                    info!("ready: every unit has synced once");
                }
                let text = summary(&status);
                if text != last_status {
                    let _ = sd_notify::notify(&[sd_notify::NotifyState::Status(&text)]);
                    last_status = text;
                }
                if watchdog.is_some() {
                    let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
                }
            }
        }
    }
    info!("shutting down");
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    let mut held: BTreeSet<String> = units.owned.clone().unwrap_or_default();
    held.extend(units.running.keys().chain(units.stopping.keys()).cloned());
    stop(std::mem::take(&mut units.running).into_values().collect(), SHUTDOWN_GRACE).await;
    for (_, abort) in std::mem::take(&mut units.stopping) {
        abort.abort();
    }
    if let (Some(cfg), Some(task)) = (&lease, leader_task) {
        task.abort();
        leader::release(client.clone(), cfg.clone()).await;
    }
    if let Some(s) = sharded {
        s.task.abort();
        let _ = s.task.await;
        shard::leave(s.client, &s.cfg, held).await;
    }
    let _ = http_stop.send(());
    if let Some(task) = http_task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    Ok(())
}
