//! Setting the daemon up: the clusters' clients, the HTTP server, leader election and
//! sharding, the unit tasks; and what that reads (the webhook secret, this replica's identity,
//! the render tools' versions).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

use super::{Daemon, Election, Error, HttpServer, Notifier, Restart, Result, Role, Sharded, io};
use crate::cluster::registry::Registry;
use crate::config::Config;
use crate::daemon::http::{self, HttpState};
use crate::daemon::metrics::Metrics;
use crate::daemon::trigger::{Statuses, TriggerKind};
use crate::daemon::ui::{Board, Dashboard, Token};
use crate::daemon::units::{Concurrency, Fences, Holding, Units};
use crate::lease::election::{self as leader, LeaderConfig};
use crate::lease::shard::{self, Running, ShardConfig};

impl Daemon {
    /// Sets everything up and starts the units (when this replica may run them).
    pub(super) async fn start(config_path: &Path, listener: Option<TcpListener>) -> Result<Self> {
        let config = super::load(config_path)?;
        let shard_cfg = shard_config(&config);
        // The identity the Leases name is the one every request names too (its User-Agent).
        let leader_identity = identity();
        let replica = match (&shard_cfg, &config.daemon.leader_election) {
            (Some(s), _) => s.identity.clone(),
            (None, Some(_)) => leader_identity.clone(),
            (None, None) => crate::cluster::agent::process_identity(),
        };
        let user_agent = crate::cluster::agent::user_agent(&replica);
        let clusters = Registry::connect(&config.clusters, &user_agent)
            .await
            .map_err(|(name, source)| Error::ClusterNamed { name, source })?;
        log_render_tools(&config);
        let (status, metrics, board) = (Statuses::default(), Arc::new(Metrics::new()), Board::default());
        let http = http_state(&config, &status, &metrics, &board)?;
        let listener = match (listener, config.daemon.listen) {
            (Some(l), _) => Some(l),
            (None, Some(addr)) => Some(TcpListener::bind(addr).await.map_err(io(format!("listen on {addr}")))?),
            (None, None) => None,
        };
        let http_server = listener.map(|l| serve(l, http.clone()));
        // Leader election and sharding use the first cluster's client (sharding: its own
        // `cluster`); resolution guarantees it exists.
        let first = config.clusters[0].name.clone();
        let lease_cluster = config.daemon.sharding.as_ref().map_or(first, |s| s.cluster.clone());
        let client = clusters.client(&lease_cluster).expect("the Lease cluster is configured").clone();
        let election = config.daemon.leader_election.clone().map(|le| elect(&client, le, leader_identity));
        let (stopped_tx, stopped) = mpsc::unbounded_channel();
        let fences = match (&election, &shard_cfg) {
            (Some(e), _) => Fences::Leader(e.leadership.as_ref().expect("just started").fence().clone()),
            (None, Some(_)) => Fences::Units(Default::default()),
            (None, None) => Fences::None,
        };
        let mut units = units(&config, clusters, (&status, &metrics), shard_cfg.is_some(), fences, stopped_tx);
        units.previews = previews(&config, &http, shard_cfg.is_some());
        let (sets, config) = listed_sets(config, &units).await;
        // Without the dashboard nothing reads the board: its units' records are not kept (1.1 KiB a unit).
        units.board = config.daemon.ui.is_some().then_some(board);
        let sharded = shard_cfg.map(|cfg| {
            let (units_tx, units_rx) = watch::channel(shard::fingerprints(&config.units));
            let (running_tx, running_rx) = watch::channel(Running::default());
            let (ownership, task) = shard::spawn(client.clone(), cfg.clone(), units_rx, running_rx, metrics.clone());
            Sharded { cfg, client: client.clone(), ownership, units: units_tx, running: running_tx, task }
        });
        let leading = election.is_none();
        status.set_standby(!leading || sharded.is_some());
        let hangup = signal(SignalKind::hangup()).map_err(io("SIGHUP handler"))?;
        let mut daemon = Daemon {
            config_path: config_path.to_path_buf(),
            config,
            sets,
            units,
            status,
            http,
            http_server,
            role: Role { election, leading, sharded, generation: 0 },
            stopped,
            restart: Restart::default(),
            notifier: Notifier::new(),
            hangup,
        };
        if daemon.role.leading {
            daemon.reconcile(TriggerKind::Startup).await;
        }
        // The first tick at once after the units started, however long that took.
        daemon.notifier.tick.reset_immediately();
        info!(
            units = daemon.config.units.len(),
            clusters = daemon.config.clusters.len(),
            leader_election = daemon.role.election.is_some(),
            sharding = daemon.role.sharded.is_some(),
            identity = daemon.role.sharded.as_ref().map(|s| s.cfg.identity.as_str()),
            "gitward running"
        );
        Ok(daemon)
    }
}

/// The `[[preview]]` tasks' holder, woken by the HTTP server's webhooks; a sharded replica runs
/// none (every replica would post), and says so.
fn previews(config: &Config, http: &HttpState, sharded: bool) -> crate::daemon::preview::Previews {
    if sharded && !config.preview.is_empty() {
        warn!(
            "[[preview]] is not run by a sharded replica: every replica would post; run previews from an unsharded gitward"
        );
    }
    crate::daemon::preview::Previews::new(http.previews.clone())
}

/// The `[[sync_set]]`s of `config`, each listed once, and the config with their units.
async fn listed_sets(config: Config, units: &Units) -> (crate::daemon::sets::Sets, Config) {
    let mut sets = crate::daemon::sets::Sets::new(config);
    sets.seed_recorded();
    sets.start(&units.repo_watches).await;
    let config = sets.config();
    (sets, config)
}

/// Starts the leader election of `le` on `client` under `identity`.
fn elect(client: &kube::Client, le: crate::config::LeaderElection, identity: String) -> Election {
    let cfg = LeaderConfig {
        namespace: le.namespace,
        name: le.name,
        identity,
        lease_duration: le.lease_duration,
        renew_every: le.renew_every,
    };
    let (leadership, task) = leader::spawn(client.clone(), cfg.clone());
    Election { cfg, client: client.clone(), leadership: Some(leadership), task }
}

/// The set of running units, none started yet: the sync slots and the push lane sized from
/// `config`, the status and metrics shared with the HTTP server, `sharded` when this replica
/// holds only the units of its buckets.
fn units(
    config: &Config,
    clusters: Registry,
    (status, metrics): (&Statuses, &Arc<Metrics>),
    sharded: bool,
    fences: Fences,
    stopped: mpsc::UnboundedSender<String>,
) -> Units {
    Units {
        clusters,
        // Sized at start; a reload does not resize them (the running units keep their slots).
        concurrency: Concurrency {
            sync_slots: crate::daemon::slots::Slots::new(config.daemon.max_concurrent_syncs),
            fetch_hosts: crate::daemon::slots::FetchHosts::new(config.daemon.fetching.max_per_host),
            push_lane: Arc::new(tokio::sync::Semaphore::new(crate::daemon::unit::PUSH_LANE)),
        },
        status: status.clone(),
        metrics: metrics.clone(),
        running: Default::default(),
        started: Default::default(),
        holding: Holding { owned: sharded.then(Default::default), stopping: Default::default(), stopped, fences },
        start_failures: Default::default(),
        repo_watches: Default::default(),
        board: Default::default(),
        notify: crate::notify::Notifications::start(&config.notify, metrics.notify().clone()),
        previews: crate::daemon::preview::Previews::new(Arc::default()),
    }
}

impl Notifier {
    fn new() -> Self {
        let watchdog = sd_notify::watchdog_enabled();
        let every = watchdog.map_or(Duration::from_secs(1), |w| (w / 2).min(Duration::from_secs(1)));
        Self { ready_sent: false, last_status: String::new(), watchdog, tick: tokio::time::interval(every) }
    }
}

/// Serves HTTP on `listener` until told to stop.
fn serve(listener: TcpListener, state: HttpState) -> HttpServer {
    match listener.local_addr() {
        Ok(addr) => info!(listen = %addr, "http listening"),
        Err(_) => info!("http listening"),
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    HttpServer { stop, task }
}

pub(super) fn read_secret(config: &Config) -> Result<Option<Arc<Vec<u8>>>> {
    match &config.daemon.webhook_secret_file {
        None => Ok(None),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(io(format!("webhook secret {}", path.display())))?;
            Ok(Some(Arc::new(text.trim().as_bytes().to_vec())))
        }
    }
}

/// The HTTP listener's state: the webhook secret, the units' status, the metrics, the sandbox
/// setting and, with `[daemon.ui]`, the dashboard of `board`.
fn http_state(config: &Config, status: &Statuses, metrics: &Arc<Metrics>, board: &Board) -> Result<HttpState> {
    let mut http = HttpState::new(read_secret(config)?, status.clone(), metrics.clone());
    if let Some(ui) = &config.daemon.ui {
        http = http.with_ui(Dashboard::new(board.clone(), status.clone(), read_token(ui)?));
    }
    http.set_sandbox(config.render.sandbox);
    Ok(http)
}

/// The dashboard's token of `ui` (`token_file`, whitespace trimmed); `None` without one.
/// Errors: the file cannot be read, or holds only whitespace.
fn read_token(ui: &crate::config::Ui) -> Result<Option<Token>> {
    let Some(path) = &ui.token_file else {
        return Ok(None);
    };
    let what = format!("dashboard token {}", path.display());
    let text = std::fs::read_to_string(path).map_err(io(what.clone()))?;
    let empty = || io(what)(std::io::Error::new(std::io::ErrorKind::InvalidData, "the file is empty"));
    Token::new(&text).map(Some).ok_or_else(empty)
}

/// This replica's identity for leader election: `$POD_NAME` when set and not empty, else the
/// hostname with a random suffix. `$POD_NAME` is shared by the processes of one Pod (a
/// restarted container) and can be set alike by hand; the process nonce the election writes
/// on the Lease keeps two such processes from both leading ([`crate::lease::election`]).
fn identity() -> String {
    match std::env::var("POD_NAME") {
        Ok(name) if !name.trim().is_empty() => name.trim().to_string(),
        _ => leader::default_identity(),
    }
}

/// Logs the version of each render tool at start. A missing tool is a warning when a unit
/// asks for it by name (`render = "kustomize"`/`"helm"`, or `[sync.decryption]` for sops), and
/// an info line otherwise (`render = "auto"` needs it only if the path turns out to hold a
/// kustomization or a chart). Then the render sandbox, once: what the kernel enforces, a
/// warning when `[render] sandbox = "off"`, an error when it is on and the kernel cannot
/// confine a tool (every unit that runs one is then refused).
fn log_render_tools(config: &Config) {
    use crate::config::{RenderMode, SandboxMode};
    use crate::render::sandbox::{Support, state};
    let support = Support::probe();
    match (config.render.sandbox, support.missing()) {
        (SandboxMode::Off, _) => crate::render::sandbox::warn_if_off(SandboxMode::Off),
        (SandboxMode::On, Some(reason)) => {
            error!(reason, "render sandbox unavailable: units that run kustomize, helm or sops are refused")
        }
        (SandboxMode::On, None) => info!(sandbox = state(SandboxMode::On), "render sandbox"),
    }
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
        group: s.group.clone(),
    })
}
