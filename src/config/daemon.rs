//! `[daemon]`: how `gitward run` runs, with its `[daemon.sharding]` and
//! `[daemon.leader_election]` tables.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How the daemon runs (`[daemon]`, optional).
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    /// Where bare mirrors (`mirrors/`, one per repository and credentials) and other state live. Default
    /// `/var/lib/gitward`: the FHS place for state, and what systemd's `StateDirectory=gitward`
    /// creates.
    pub state_dir: PathBuf,
    /// How often each unit's remote is polled for a new revision (`"60s"`, `"5m"`; humantime),
    /// longer than zero. Default 60 s: a push is usually seen sooner through the webhook or, for
    /// a local repository, a file watch; the poll is a fallback, and once a minute stays well
    /// inside git hosts' rate limits.
    pub interval: Duration,
    /// How often each unit is fully synced even without a new revision, longer than zero.
    /// Default 10 min: bounds how long drift the watch missed (a lost event, a change while
    /// gitward was down) can last, at one request per object per unit every ten minutes.
    pub resync_interval: Duration,
    /// The address of the HTTP listener (webhook, health, metrics), an `IP:port`. Default `None`:
    /// no port is opened unless asked for.
    pub listen: Option<SocketAddr>,
    /// A file holding the shared secret that signs webhook requests (HMAC-SHA256, GitHub's
    /// `X-Hub-Signature-256`). Default `None`: no secret, so webhook requests are not accepted;
    /// unsigned triggers from the network are never trusted.
    pub webhook_secret_file: Option<PathBuf>,
    /// Whether a change made by someone else to an object gitward manages triggers a sync that
    /// reverts it. Default `true`: the cluster is meant to equal git; `false` leaves drift until
    /// the next revision or resync.
    pub self_heal: bool,
    /// Leader election (`[daemon.leader_election]`, present and not `enabled = false`): only the
    /// replica holding the Lease applies. Default `None`: a single instance applies alone.
    pub leader_election: Option<LeaderElection>,
    /// How many units may sync at once (`max_concurrent_syncs`), at least 1; a unit whose
    /// trigger finds every slot taken waits for one, in arrival order (first come, first served,
    /// so no unit starves). Default 4: each sync already sends up to `cluster.max_in_flight`
    /// (32) requests at once, so 4 keep at most 128 in flight — inside the API server's default
    /// `--max-mutating-requests-inflight` (200) — and bound memory when many units start together
    /// or a webhook flood triggers them all. Health waits do not hold a slot.
    pub max_concurrent_syncs: usize,
    /// How fetches of units' sources are bounded (`max_fetches_per_host`,
    /// `fetch_connect_timeout`, `fetch_idle_timeout`): [`Fetching`].
    pub fetching: Fetching,
    /// Sharding of units across replicas (`[daemon.sharding]`, present): each unit is applied
    /// only by the replica holding its own Lease, assigned by rendezvous hashing over the live
    /// replicas. Default `None`: this replica applies every unit (or, with leader election,
    /// the leader does). Exclusive with `leader_election`.
    pub sharding: Option<Sharding>,
    /// The ServiceAccount every unit that names none writes as (`default_service_account`;
    /// see [`crate::config::SyncUnit::service_account`]): the lockdown Flux offers with
    /// `--default-service-account`. A unit may not then opt out with `service_account = ""`.
    /// Default `None`.
    pub default_service_account: Option<String>,
    /// The read-only web dashboard (`[daemon.ui]`, `enabled = true`) on `listen`: `GET /`, the
    /// unit pages and their live updates (the daemon's `ui` module). Default `None`: off, so the
    /// listener answers only what monitoring and webhooks need unless someone asks for more.
    pub ui: Option<Ui>,
}

/// How the daemon fetches units' sources (git remotes, chart repositories, OCI registries):
/// keys of `[daemon]`. A fetch holds no sync slot; it holds one of its host's permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetching {
    /// How many fetches may run at once against one remote host (host and port) —
    /// `max_fetches_per_host`, at least 1. A host that hangs
    /// or trickles fills only these; units of other hosts, and of local repositories (which
    /// take none), fetch beside it. Default 4.
    pub max_per_host: usize,
    /// How long connecting to a remote may take (`fetch_connect_timeout`, humantime, longer
    /// than zero): libgit2's server connect timeout and the chart/OCI HTTP client's connect
    /// timeout. Default 5 s. Read at start: a reload does not change it.
    pub connect_timeout: Duration,
    /// How long a fetch may wait for the remote's next bytes (`fetch_idle_timeout`, humantime,
    /// longer than zero): libgit2's server timeout on each read, and the HTTP client's read
    /// timeout — a transfer that stops moving fails after it, one that moves slowly goes on.
    /// Default 30 s. Read at start: a reload does not change it.
    pub idle_timeout: Duration,
}

impl Default for Fetching {
    fn default() -> Self {
        Self { max_per_host: 4, connect_timeout: Duration::from_secs(5), idle_timeout: Duration::from_secs(30) }
    }
}

/// `[daemon.ui]`: who may read the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ui {
    /// A file holding the token the dashboard asks for (`Authorization: Bearer <token>`, or
    /// typed once into its login form, which sets a cookie); surrounding whitespace is
    /// trimmed. Default `None`: no token, and then `listen` must be a loopback address
    /// (checked at load) — only this host's users reach it.
    pub token_file: Option<PathBuf>,
}

/// `[daemon.sharding]`: units spread over replicas by `coordination.k8s.io/v1` Leases (the
/// lease module's sharding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharding {
    /// Namespace of the membership and bucket Leases (`gitward-member-<identity>`,
    /// `gitward-bucket-<n>`); the replicas' RBAC must allow `get`, `list`, `watch`, `create`
    /// and `update` of Leases there. Default `gitward-system`, where
    /// deploy/kubernetes-sharded installs gitward.
    pub namespace: String,
    /// The failover bound: a dead replica's units are applied again by others within about
    /// this long (humantime), at least 2 s. The Leases themselves are written with half of it
    /// (`leaseDurationSeconds`, rounded up) so that detecting the death, taking the Lease and
    /// the first sync fit inside it. Default 15 s, as client-go's leader election.
    pub lease_duration: Duration,
    /// This replica's identity, an RFC 1123 label: its membership Lease's name, the
    /// `holderIdentity` of its bucket Leases, and part of its User-Agent. Default `None`: the
    /// host name (or `$POD_NAME`) and the process id, made a valid label.
    pub identity: Option<String>,
    /// The installation this replica belongs to: its Leases are named
    /// `gitward-<group>-member-<identity>` and `gitward-<group>-bucket-<n>`, so two
    /// installations sharing the Lease namespace never count each other's replicas. An RFC
    /// 1123 label of at most 20 characters. Default `None`: `gitward-member-…`,
    /// `gitward-bucket-…`.
    pub group: Option<String>,
    /// The cluster (a `[[cluster]]` name) whose API server holds the Leases. Default: the
    /// first cluster in the file.
    pub cluster: String,
}

impl Sharding {
    /// The default Lease namespace.
    pub const DEFAULT_NAMESPACE: &'static str = "gitward-system";
    /// The default failover bound (client-go's customary `LeaseDuration`).
    pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
}

/// `[daemon.leader_election]`: a `coordination.k8s.io/v1` Lease decides which replica applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// Namespace of the Lease. Default `gitward-system`, where deploy/kubernetes installs gitward.
    pub namespace: String,
    /// Name of the Lease. Default `gitward`.
    pub name: String,
    /// How long a Lease holds without renewal. Default 15 s, as client-go's leader election.
    pub lease_duration: Duration,
    /// How often the holder renews; shorter than `lease_duration`. Default 5 s.
    pub renew_every: Duration,
}

impl Default for LeaderElection {
    fn default() -> Self {
        Self {
            namespace: "gitward-system".into(),
            name: "gitward".into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            state_dir: PathBuf::from("/var/lib/gitward"),
            interval: Duration::from_secs(60),
            resync_interval: Duration::from_secs(600),
            listen: None,
            webhook_secret_file: None,
            self_heal: true,
            leader_election: None,
            max_concurrent_syncs: 4,
            fetching: Fetching::default(),
            sharding: None,
            default_service_account: None,
            ui: None,
        }
    }
}
