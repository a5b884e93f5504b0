//! `[cluster]` and `[daemon]` as written, with `[daemon]`'s sub-tables (`leader_election`,
//! `sharding`, `ui`). Each field's doc comment is its `description` in the JSON Schema (module
//! `schema`), taken from `config.toml`.

use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::HumanDuration;

/// One `[cluster]` or `[[cluster]]` table: a cluster to apply to.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawCluster {
    /// The cluster's name in logs, metrics and [[sync]] cluster: an RFC 1123 label, unique.
    /// Default: "default".
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// The kubeconfig file. Default: none (in-cluster, else $KUBECONFIG, else ~/.kube/config).
    #[schemars(with = "Option<String>")]
    pub kubeconfig: Option<Spanned<String>>,
    /// The kubeconfig context. Default: the kubeconfig's current context.
    #[schemars(with = "Option<String>")]
    pub context: Option<Spanned<String>>,
    /// At most this many object requests in flight per sync unit; at least 1. Default: 32.
    #[schemars(with = "Option<usize>", range(min = 1))]
    pub max_in_flight: Option<Spanned<usize>>,
}

/// `[daemon]`: how `gitward run` polls, serves and schedules.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawDaemon {
    /// Bare mirrors and other state. Default: "/var/lib/gitward".
    #[schemars(with = "Option<String>")]
    pub state_dir: Option<Spanned<String>>,
    /// How often each remote is polled for a new revision; more than zero. Default: "60s".
    #[schemars(with = "Option<HumanDuration>")]
    pub interval: Option<Spanned<HumanDuration>>,
    /// How often each unit is fully synced even without a new revision; more than zero.
    /// Default: "10m".
    #[schemars(with = "Option<HumanDuration>")]
    pub resync_interval: Option<Spanned<HumanDuration>>,
    /// The HTTP listener (webhook, /healthz, /readyz, /metrics, dashboard) as IP:port.
    /// Default: none (no port is opened).
    pub listen: Option<SocketAddr>,
    /// A file holding the webhook's shared secret (HMAC-SHA256). Default: none (webhook
    /// requests are refused).
    #[schemars(with = "Option<String>")]
    pub webhook_secret_file: Option<Spanned<String>>,
    /// Revert changes that others make to managed objects. Default: true.
    pub self_heal: Option<bool>,
    /// Leader election: only the replica holding the Lease applies. Its presence turns it on
    /// (exclusive with sharding).
    pub leader_election: Option<RawLeaderElection>,
    /// How many units may sync at once; at least 1. Default: 4.
    #[schemars(with = "Option<usize>", range(min = 1))]
    pub max_concurrent_syncs: Option<Spanned<usize>>,
    /// How many fetches may run at once per remote host (host and port); at least 1.
    /// Default: 4.
    #[schemars(with = "Option<usize>", range(min = 1))]
    pub max_fetches_per_host: Option<Spanned<usize>>,
    /// How long connecting to a remote may take; more than zero, at most 24h. Default: "5s".
    #[schemars(with = "Option<HumanDuration>")]
    pub fetch_connect_timeout: Option<Spanned<HumanDuration>>,
    /// How long a fetch may wait for the remote's next bytes; more than zero, at most 24h.
    /// Default: "30s".
    #[schemars(with = "Option<HumanDuration>")]
    pub fetch_idle_timeout: Option<Spanned<HumanDuration>>,
    /// Sharding: spread the units over several replicas. Its presence turns it on (exclusive
    /// with leader_election).
    #[schemars(with = "Option<RawSharding>")]
    pub sharding: Option<Spanned<RawSharding>>,
    /// The ServiceAccount every unit that names none writes as (impersonated). Default: none
    /// (units write as gitward).
    #[schemars(with = "Option<String>")]
    pub default_service_account: Option<Spanned<String>>,
    /// The read-only web dashboard on `listen`.
    pub ui: Option<RawUi>,
}

/// `[daemon.ui]`: the read-only web dashboard.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawUi {
    /// Serve the dashboard. Default: false.
    pub enabled: Option<bool>,
    /// A file holding the token the dashboard asks for. Default: none (then `listen` must be
    /// a loopback address).
    #[schemars(with = "Option<String>")]
    pub token_file: Option<Spanned<String>>,
}

/// `[daemon.sharding]`: units spread over replicas by Leases.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawSharding {
    /// Namespace of the Leases. Default: "gitward-system".
    #[schemars(with = "Option<String>")]
    pub namespace: Option<Spanned<String>>,
    /// The failover bound: a dead replica's units sync again within about this long; at least
    /// "2s". Default: "15s".
    #[schemars(with = "Option<HumanDuration>")]
    pub lease_duration: Option<Spanned<HumanDuration>>,
    /// This replica's name, an RFC 1123 label unique per replica. Default: $POD_NAME (else
    /// the host name) and the process id.
    #[schemars(with = "Option<String>")]
    pub identity: Option<Spanned<String>>,
    /// The installation, in the Leases' names: an RFC 1123 label of at most 20 characters.
    /// Default: none.
    #[schemars(with = "Option<String>")]
    pub group: Option<Spanned<String>>,
    /// The cluster (a [[cluster]] name) holding the Leases. Default: the first cluster.
    #[schemars(with = "Option<String>")]
    pub cluster: Option<Spanned<String>>,
}

/// `[daemon.leader_election]`: one active replica, by a Lease.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawLeaderElection {
    /// Default: true (the table's presence turns it on).
    pub enabled: Option<bool>,
    /// Namespace of the Lease. Default: "gitward-system".
    pub namespace: Option<String>,
    /// Name of the Lease. Default: "gitward".
    pub name: Option<String>,
    /// How long the Lease holds without renewal. Default: "15s".
    #[schemars(with = "Option<HumanDuration>")]
    pub lease_duration: Option<Spanned<HumanDuration>>,
    /// How often the leader renews; shorter than lease_duration. Default: "5s".
    #[schemars(with = "Option<HumanDuration>")]
    pub renew_every: Option<Spanned<HumanDuration>>,
}
