//! `gitward run`: the long-lived daemon. Wiring only — the engine, the unit tasks, the HTTP
//! server and leader election each live in their own module.
//!
//! [`run`] takes an already-bound listener (or binds `[daemon] listen`) and a shutdown future,
//! so tests bind port 0 and stop the daemon on demand (mini-redis `server::run`). It sets up
//! the clusters' clients, the HTTP server, leader election and sharding (`start.rs`), then
//! hands over to a `Daemon`: a struct with one method per event (mini-redis
//! `server::Listener`) whose loop only dispatches, its decisions pure functions in
//! [`super::decide`].
//!
//! SIGHUP reloads the config (a bad config is logged and the old one kept) and syncs every
//! unit. With leader election, unit tasks run only while this replica holds the Lease and are
//! aborted the moment it is lost. With sharding (`[daemon.sharding]`, see
//! [`crate::lease::shard`]), a unit task runs only while this replica holds its bucket's Lease
//! ([`super::units`]). Clusters, leader election and sharding are read at start: a SIGHUP that changes them is
//! refused (the previous config is kept). Units that could not start are started again with
//! backoff. With systemd (`Type=notify`), `READY=1` follows the first sync of every unit that
//! applied ([`super::decide::ready`]), `STATUS=` carries a summary
//! ([`super::decide::status_line`]), and `WATCHDOG=1` is sent when enabled.

mod start;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::Signal;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, Interval};
use tracing::{error, info, warn};

use super::backoff::Backoff;
use super::decide;
use super::http::HttpState;
use super::sets::{self, Listed, Removed, Retiring, Sets};
use super::trigger::{Statuses, TriggerKind};
use super::units::Units;
use crate::config::Config;
use crate::lease::election::{self as leader, LeaderConfig, Leadership};
use crate::lease::shard::{self, Ownership, Running, ShardConfig};
use crate::telemetry::error_chain;

pub use super::units::SHUTDOWN_GRACE;

/// Longest wait at shutdown, after the units stopped, for their writes still in flight to be
/// answered before the Leases are released ([`crate::cluster::fence::Fence::drained`]).
pub const DRAIN_AT_SHUTDOWN: Duration = Duration::from_secs(2);

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
    /// A `depends_on` entry's `ready_expr` reads a key the recorded status does not have, or
    /// gives no bool ([`crate::health::ready::check`]).
    #[error("{config}: unit {unit}: depends_on {dependency}: ready_expr: {message}")]
    ReadyExpr {
        /// The config file.
        config: String,
        /// The dependent unit.
        unit: String,
        /// The unit depended on.
        dependency: String,
        /// Why the expression is refused.
        message: String,
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

/// Checks every `ready_expr` of `config` ([`crate::health::ready::check`]); `path` names the
/// file in the error.
///
/// Errors: [`Error::ReadyExpr`] for the first one refused.
pub fn check_ready_exprs(config: &crate::config::Config, path: &Path) -> Result<()> {
    for unit in &config.units {
        for dependency in &unit.depends_on {
            let Some(expr) = &dependency.ready_expr else { continue };
            crate::health::ready::check(expr).map_err(|message| Error::ReadyExpr {
                config: path.display().to_string(),
                unit: unit.name.clone(),
                dependency: dependency.unit.clone(),
                message,
            })?;
        }
    }
    Ok(())
}

/// The config file at `path` ([`Config::load`]), its `ready_expr`s checked
/// ([`check_ready_exprs`]): what the daemon starts with and reloads.
///
/// Errors: [`Error::Config`], [`Error::ReadyExpr`].
fn load(path: &Path) -> Result<Config> {
    let config = Config::load(path)?;
    check_ready_exprs(&config, path)?;
    Ok(config)
}

/// Runs the daemon with the config at `config_path` until `shutdown` completes.
///
/// `listener`: an already-bound HTTP listener, else `[daemon] listen` is bound, else none.
///
/// Errors: [`Error`] when the config, a cluster client, the listener or the webhook secret
/// cannot be set up at start. Once running, failures are logged and retried, never returned.
pub async fn run(config_path: &Path, listener: Option<TcpListener>, shutdown: impl Future<Output = ()>) -> Result<()> {
    let mut daemon = Daemon::start(config_path, listener).await?;
    tokio::pin!(shutdown);
    loop {
        let event = tokio::select! {
            _ = &mut shutdown => break,
            event = daemon.next_event() => event,
        };
        match event {
            Event::Hangup => daemon.reload().await,
            Event::Ownership(changed) => daemon.ownership_changed(changed).await,
            Event::UnitStopped(name) => daemon.unit_stopped(&name),
            Event::Leadership(changed) => daemon.leadership_changed(changed).await,
            Event::RestartDue => daemon.restart_units().await,
            Event::Tick => daemon.tick(),
            Event::SetListed(listed) => daemon.set_listed(listed).await,
        }
    }
    daemon.shut_down().await;
    Ok(())
}

/// Something the daemon's loop acts on (shutdown aside, which ends it).
enum Event {
    /// SIGHUP: reload the config.
    Hangup,
    /// The sharding loop published a new ownership (`Ok`), or ended (`Err`).
    Ownership(std::result::Result<(), watch::error::RecvError>),
    /// A unit handed over to another replica has stopped.
    UnitStopped(String),
    /// The leader-election state changed (`Ok`), or its loop ended (`Err`).
    Leadership(std::result::Result<(), watch::error::RecvError>),
    /// Time to start again the units that could not start.
    RestartDue,
    /// The sd_notify tick: `READY=1`, `STATUS=`, `WATCHDOG=1`.
    Tick,
    /// A `[[sync_set]]`'s watcher listed its directories.
    SetListed(Listed),
}

/// Sharding as the daemon drives it: the loop's channels and task.
struct Sharded {
    /// Settings (identity resolved).
    cfg: ShardConfig,
    /// The client of the cluster holding the Leases.
    client: kube::Client,
    /// What this replica may run.
    ownership: watch::Receiver<Ownership>,
    /// The unit names of the config, for the loop.
    units: watch::Sender<std::collections::BTreeMap<String, String>>,
    /// What runs here, for the loop.
    running: watch::Sender<Running>,
    /// The loop's task.
    task: JoinHandle<()>,
}

/// Leader election as the daemon drives it.
struct Election {
    /// Settings, for the release at shutdown.
    cfg: LeaderConfig,
    /// The client of the cluster holding the Lease.
    client: kube::Client,
    /// Whether this replica leads; `None` once the election loop ended.
    leadership: Option<Leadership>,
    /// The loop's task.
    task: JoinHandle<()>,
}

/// Units that could not start are started again with backoff (1 s doubling to 5 min), so a
/// state directory made writable again needs no restart: no crash loop, no manual step.
#[derive(Default)]
struct Restart {
    backoff: Backoff,
    /// When; `None` while every unit that should run does.
    at: Option<Instant>,
}

impl Restart {
    /// After a reconcile: schedule the next try when some unit is `missing`, else forget it.
    fn schedule(&mut self, missing: bool) {
        self.at = missing.then(|| Instant::now() + self.backoff.next_delay());
        if !missing {
            self.backoff.reset();
        }
    }
}

/// What the daemon tells systemd (sd_notify).
struct Notifier {
    /// `READY=1` was sent: it is sent once.
    ready_sent: bool,
    /// The last `STATUS=` sent, so an unchanged one is not sent again.
    last_status: String,
    /// The watchdog interval when systemd asked for `WATCHDOG=1` pings.
    watchdog: Option<Duration>,
    /// When to check: every second, or at half the watchdog interval when that is shorter.
    tick: Interval,
}

/// The HTTP server's task and how to stop it.
struct HttpServer {
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

/// What this replica may run, by leader election or sharding (neither: every unit).
struct Role {
    /// Leader election, when configured.
    election: Option<Election>,
    /// Whether this replica may run units: it leads, or runs without leader election.
    leading: bool,
    /// Sharding, when configured and its loop still runs.
    sharded: Option<Sharded>,
    /// The last [`Ownership::generation`] acted on.
    generation: u64,
}

/// The running daemon: its state, one method per event.
struct Daemon {
    /// Where the config is read from again on SIGHUP.
    config_path: PathBuf,
    /// The config in force: the file's `[[sync]]` units and the units its sets made.
    config: Config,
    /// The `[[sync_set]]`s: the config as loaded, their last good units, their watchers.
    sets: Sets,
    /// The unit tasks.
    units: Units,
    /// Per-unit status, shared with the unit tasks and the HTTP server.
    status: Statuses,
    /// What the HTTP handlers read: the units webhooks trigger, the webhook secret.
    http: HttpState,
    /// The HTTP server, when listening.
    http_server: Option<HttpServer>,
    /// What this replica may run: leader election and sharding.
    role: Role,
    /// Where units handed over report that they stopped.
    stopped: mpsc::UnboundedReceiver<String>,
    /// The retry of units that could not start.
    restart: Restart,
    /// sd_notify.
    notifier: Notifier,
    /// SIGHUP.
    hangup: Signal,
}

impl Daemon {
    /// Waits for the next event.
    async fn next_event(&mut self) -> Event {
        let restart_at = self.restart.at.filter(|_| self.role.leading);
        let far = Instant::now() + Duration::from_secs(86_400);
        let sharded = self.role.sharded.as_mut();
        let leadership = self.role.election.as_mut().and_then(|e| e.leadership.as_mut());
        let (sharding, electing) = (sharded.is_some(), leadership.is_some());
        tokio::select! {
            _ = self.hangup.recv() => Event::Hangup,
            changed = async { sharded.expect("guarded").ownership.changed().await }, if sharding => {
                Event::Ownership(changed)
            }
            Some(name) = self.stopped.recv() => Event::UnitStopped(name),
            changed = async { leadership.expect("guarded").changed().await }, if electing => {
                Event::Leadership(changed)
            }
            _ = tokio::time::sleep_until(restart_at.unwrap_or(far)), if restart_at.is_some() => Event::RestartDue,
            _ = self.notifier.tick.tick() => Event::Tick,
            Some(listed) = self.sets.rx.recv() => Event::SetListed(listed),
        }
    }

    /// Reconciles the units with the config, schedules the restart of those that could not
    /// start, and gives the HTTP server the units webhooks can trigger now.
    async fn reconcile(&mut self, first: TriggerKind) -> decide::UnitPlan {
        let (missing, plan) = self.units.reconcile(&self.config, first).await;
        self.restart.schedule(missing);
        self.http.set_units(self.routes());
        plan
    }

    /// What webhooks trigger: the running units and the sets' watchers.
    fn routes(&self) -> Vec<super::http::UnitRoute> {
        let mut routes = self.units.senders();
        routes.extend(self.sets.routes());
        routes
    }

    /// A set listed its directories: when its units changed, the units are reconciled (the new
    /// ones start, the gone ones stop) and the objects of those that ran here are kept and
    /// counted, or pruned ([`sets::retire`]).
    async fn set_listed(&mut self, listed: Listed) {
        let Some(removed) = self.sets.listed(listed) else { return };
        self.units_changed(removed).await;
    }

    /// The config's units changed (a set's listing, a reload): the sharding loop is told,
    /// the units reconciled, and the units that left their set and ran here retired.
    async fn units_changed(&mut self, removed: Vec<Removed>) {
        self.config = self.sets.config();
        if let Some(s) = &self.role.sharded {
            s.units.send_replace(shard::fingerprints(&self.config.units));
        }
        let here = self.running_here(removed);
        if self.role.leading {
            self.reconcile(TriggerKind::Startup).await;
        }
        self.retire(here);
    }

    /// Of the units that left their set, those that run here: their objects are this
    /// replica's to keep or prune.
    fn running_here(&self, removed: Vec<Removed>) -> Vec<Removed> {
        removed.into_iter().filter(|r| self.units.running.contains_key(&r.unit.name)).collect()
    }

    /// Keeps and counts, or prunes, the objects of units that left their set, each in a task.
    fn retire(&self, removed: Vec<Removed>) {
        for removed in removed {
            let fence = self.units.holding.fences.of(&removed.unit.name);
            let Some(client) = self.units.clusters.fenced_client(&removed.unit.cluster, &fence) else { continue };
            let cluster = self.config.cluster_of(&removed.unit).clone();
            tokio::spawn(sets::retire(Retiring { removed, client, cluster, fence }));
        }
    }

    /// SIGHUP: reads the config again; keeps the previous one when it is invalid or changes
    /// what is read only at start (clusters, sharding). Then every unit syncs once: a unit the
    /// new config changed is started again and its first sync is the reload's (one sync per
    /// unit, not a startup and a reload); the others get a reload trigger.
    async fn reload(&mut self) {
        let path = self.config_path.display().to_string();
        let new = match load(&self.config_path) {
            Ok(new) => new,
            Err(e) => {
                error!(config = %path, error = %error_chain(&e), "config reload failed; keeping the previous config");
                return;
            }
        };
        let fixed = decide::fixed_at_start(&self.config, &new);
        if !fixed.is_empty() {
            let changed = fixed.join(", ");
            error!(config = %path, changed, "config reload refused: [cluster], [daemon.leader_election] and [daemon.sharding] are read at start; restart to change them; keeping the previous config");
            return;
        }
        info!(config = %path, "config reloaded");
        let removed = self.sets.replace(new, &self.units.repo_watches).await;
        self.config = self.sets.config();
        let removed = self.running_here(removed);
        if let Ok(secret) = start::read_secret(&self.config) {
            self.http.set_secret(secret);
        }
        self.http.set_sandbox(self.config.render.sandbox);
        if let Some(s) = &self.role.sharded {
            s.units.send_replace(shard::fingerprints(&self.config.units));
        }
        if self.role.leading {
            let plan = self.reconcile(TriggerKind::Reload).await;
            self.units.trigger_reload(&plan.keep);
        }
        self.retire(removed);
    }

    /// The sharding loop published a new ownership, or ended: then this replica runs nothing
    /// until restarted.
    async fn ownership_changed(&mut self, changed: std::result::Result<(), watch::error::RecvError>) {
        let Some(s) = self.role.sharded.as_mut() else { return };
        if changed.is_err() {
            error!("sharding loop stopped; applying nothing until restarted");
            self.units.own(&self.config, &Ownership::default()).await;
            self.role.sharded = None;
        } else {
            let ownership = s.ownership.borrow_and_update().clone();
            let missing = self.units.own(&self.config, &ownership).await;
            self.restart.schedule(missing);
            self.role.generation = ownership.generation;
            s.running.send_replace(self.units.report(self.role.generation));
            self.status.set_standby(ownership.held.is_empty());
        }
        self.http.set_units(self.routes());
    }

    /// A unit handed over has stopped: the sharding loop may release its Lease.
    fn unit_stopped(&mut self, name: &str) {
        self.units.holding.stopping.remove(name);
        self.report_running();
    }

    /// Tells the sharding loop what runs here.
    fn report_running(&self) {
        if let Some(s) = &self.role.sharded {
            s.running.send_replace(self.units.report(self.role.generation));
        }
    }

    /// Leadership changed: units start when it is won and are aborted at once when it is lost.
    /// The election loop ending is leadership lost: never apply without a Lease.
    async fn leadership_changed(&mut self, changed: std::result::Result<(), watch::error::RecvError>) {
        let Some(election) = self.role.election.as_mut() else { return };
        let now = changed.is_ok() && election.leadership.as_ref().is_some_and(Leadership::is_leader);
        if changed.is_err() {
            error!("leader election stopped; applying nothing until restarted");
            election.leadership = None;
        }
        if now && !self.role.leading {
            info!("leading: starting units");
            self.status.set_standby(false);
            self.reconcile(TriggerKind::Startup).await;
        } else if !now && self.role.leading {
            warn!("leadership lost: stopping units at once");
            self.units.abort_all();
            self.restart.at = None;
            self.http.set_units(Vec::new());
            self.status.set_standby(true);
        }
        self.role.leading = now;
    }

    /// Tries again to start the units that could not start.
    async fn restart_units(&mut self) {
        self.reconcile(TriggerKind::Startup).await;
        self.report_running();
    }

    /// sd_notify: `READY=1` once due ([`decide::ready`]), `STATUS=` when it changed,
    /// `WATCHDOG=1` when enabled.
    fn tick(&mut self) {
        let snapshot = self.status.snapshot();
        let expected = self.units.expected(&self.config);
        if !self.notifier.ready_sent && decide::ready(self.role.leading, expected, &snapshot) {
            self.notifier.ready_sent = true;
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
            info!("ready: every unit has synced once");
        }
        let text = crate::telemetry::mask::mask(&decide::status_line(&snapshot)).into_owned();
        if text != self.notifier.last_status {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Status(&text)]);
            self.notifier.last_status = text;
        }
        if self.notifier.watchdog.is_some() {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
        }
    }

    /// Stops the units (in-flight syncs finish, at most [`SHUTDOWN_GRACE`]), releases the
    /// Leases so that other replicas take over at once, and stops the HTTP server (at most 2 s).
    ///
    /// During the grace the election loops keep renewing, and a Lease lost meanwhile closes
    /// its fence: the units it guards send no write from that moment, even while they finish
    /// their sync. A Lease is released only once none of its units' writes can still be in
    /// flight (bounded by [`DRAIN_AT_SHUTDOWN`]; else it is left to expire); with sharding,
    /// every bucket Lease this replica holds is released, those won during the grace too.
    async fn shut_down(mut self) {
        info!("shutting down");
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
        let fences = self.units.holding.fences.clone();
        self.units.shut_down().await;
        let drain_until = Instant::now() + DRAIN_AT_SHUTDOWN;
        if let Some(election) = self.role.election {
            election.task.abort();
            let _ = election.task.await;
            let drained = match fences.all().first() {
                Some((_, fence)) => fence.drained(drain_until.saturating_duration_since(Instant::now())).await,
                None => true,
            };
            if drained {
                leader::release(election.client, election.cfg).await;
            } else {
                warn!(lease = %election.cfg.name, "a write may still be in flight; the Lease is left to expire");
            }
        }
        if let Some(s) = self.role.sharded {
            s.task.abort();
            let _ = s.task.await;
            let mut undrained = std::collections::BTreeSet::new();
            for (unit, fence) in fences.all() {
                if !fence.drained(drain_until.saturating_duration_since(Instant::now())).await {
                    undrained.extend(unit);
                }
            }
            shard::leave(s.client, &s.cfg, &undrained).await;
        }
        if let Some(server) = self.http_server {
            let _ = server.stop.send(());
            let _ = tokio::time::timeout(Duration::from_secs(2), server.task).await;
        }
    }
}
