//! The TOML config file: what it says (module `raw`) resolved into a [`Config`] with every default
//! applied (module `resolve`).
//!
//! [`Config::load`] reads a file; [`Config::from_toml`] parses text. Relative paths in the file
//! (`state_dir`, key and secret files, `kubeconfig`, a `repo` that is a plain local path) are
//! anchored at the config file's directory, so a config works the same from any working
//! directory. The documented example is `config.toml` at the repository root.
//!
//! Errors name the file, the line and the key. A misspelt or missing key, or a value of the
//! wrong type, comes from the TOML parser
//! (``config.toml: line 7: daemon: unknown key `intervall`: did you mean `interval`, as in
//! `interval = "60s"`?``, the hint from module `hint`); a value of
//! the right type that is not allowed comes from validation
//! (``config.toml: line 12: sync[1].name: duplicate unit name `shop` (also sync[0])``).

mod hint;
mod raw;
mod resolve;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Why the config could not be loaded. None of these is worth retrying without a change to the
/// file (a [`Error::ReadFailed`] may be a transient I/O error, or a missing file); the daemon
/// keeps its previous config when a reload fails.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{}: read failed", path.display())]
    ReadFailed {
        /// The path as given to [`Config::load`].
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not TOML, or does not fit the schema: an unknown key, a missing required
    /// key, a value of the wrong type, an unknown enum value, a bad duration or size.
    #[error("{origin}: {}{message}", location(*line, key.as_deref()))]
    ParseFailed {
        /// How the file is named in messages (its path, or `origin` of [`Config::from_toml`]).
        origin: String,
        /// The 1-based line the TOML parser points at, when it points at one.
        line: Option<usize>,
        /// The dotted key (or table) at fault, without array indexes (`sync.git`), when the
        /// parser knows it; `None` for TOML syntax errors.
        key: Option<String>,
        /// The TOML parser's message; it names the key or value at fault.
        message: String,
    },
    /// A value parsed but is not allowed: a bad unit name, a duplicate, a path with `..`, a
    /// fraction outside 0.0..=1.0, no `[[sync]]` at all.
    #[error("{origin}: {}{message}", location(*line, Some(key)))]
    Invalid {
        /// How the file is named in messages.
        origin: String,
        /// The 1-based line of the offending value; `None` for something missing altogether.
        line: Option<usize>,
        /// The key, dotted, with 0-based indexes for `[[sync]]`: `sync[1].inventory.name`.
        key: String,
        /// What is wrong with the value.
        message: String,
    },
}

/// `"line 12: sync[1].name: "`, either part left out when unknown.
fn location(line: Option<usize>, key: Option<&str>) -> String {
    let line = line.map(|line| format!("line {line}: ")).unwrap_or_default();
    let key = key.map(|key| format!("{key}: ")).unwrap_or_default();
    line + &key
}

/// The result of loading a config.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The resolved config: every default applied, every value checked, every path anchored.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The clusters units apply to, in file order, names unique; at least one. A single
    /// `[cluster]` table (or none) is the one cluster named `default`; `[[cluster]]` tables
    /// name theirs. Units pick one with `cluster = "name"` ([`SyncUnit::cluster`]).
    pub clusters: Vec<ClusterConfig>,
    /// How the daemon runs (`[daemon]`).
    pub daemon: DaemonConfig,
    /// The sync units (`[[sync]]`), in file order; at least one, names unique.
    pub units: Vec<SyncUnit>,
    /// The render tools and their limits (`[render]`); each unit holds a copy in
    /// [`SyncUnit::render_tools`].
    pub render: RenderTools,
}

/// The render tools and their limits (`[render]`, optional), which the render step reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderTools {
    /// The `kustomize` binary (v5). Default `None`: `kustomize` found on `PATH` when a unit
    /// renders with it.
    pub kustomize: Option<PathBuf>,
    /// The `helm` binary (v3.19+ or v4). Default `None`: `helm` on `PATH`.
    pub helm: Option<PathBuf>,
    /// The `sops` binary (v3), used for `[sync.decryption]`. Default `None`: `sops` on `PATH`.
    pub sops: Option<PathBuf>,
    /// How long one run of a tool may take before it is killed and the revision refused.
    /// Default 60 s: a real overlay or chart renders in well under a second; a template
    /// looping over a huge range must not hold the unit forever.
    pub timeout: Duration,
    /// The most bytes one render may write to stdout; more kills the tool and refuses the
    /// revision. Default 64 MiB: far above real charts (etcd's 1.5 MiB per object bounds
    /// what is useful), low enough that a runaway template cannot exhaust memory.
    pub max_output_bytes: u64,
    /// The Kubernetes version Helm renders for when no cluster is asked (`gitward validate`):
    /// `helm template --kube-version`, seen by a chart's `kubeVersion` constraint and
    /// `.Capabilities.KubeVersion`. A sync asks the cluster instead. Default
    /// [`RenderTools::DEFAULT_KUBE_VERSION`].
    pub kube_version: String,
    /// API versions (`group/version` or `group/version/Kind`) Helm is told exist besides its
    /// built-in ones when no cluster is asked (`--api-versions`, seen by
    /// `.Capabilities.APIVersions.Has`): the CRDs a chart checks for. Default: none.
    pub api_versions: Vec<String>,
}

impl RenderTools {
    /// The newest Kubernetes minor the pinned Helm (v3.22.0, `scripts/tools`) knows: it is built
    /// against `k8s.io/client-go` v0.37.0, and Helm's own release builds set this as their
    /// default (`Makefile`: `chartutil.k8sVersionMinor` from client-go's version). A `go install`
    /// build, as `scripts/tools` makes, keeps the source default v1.20.0, which charts asking for
    /// a recent Kubernetes (`kubeVersion: ">= 1.28.0-0"`) refuse.
    pub const DEFAULT_KUBE_VERSION: &'static str = "v1.37.0";
}

impl Default for RenderTools {
    fn default() -> Self {
        Self {
            kustomize: None,
            helm: None,
            sops: None,
            timeout: Duration::from_secs(60),
            max_output_bytes: 64 << 20,
            kube_version: Self::DEFAULT_KUBE_VERSION.to_owned(),
            api_versions: Vec::new(),
        }
    }
}

/// How a unit's path becomes manifests (`render`: `"auto"`, `"plain"`, `"kustomize"`,
/// `"helm"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenderMode {
    /// The default: kustomize when the unit's path holds `kustomization.yaml`,
    /// `kustomization.yml` or `Kustomization`; Helm when it holds `Chart.yaml`; else plain.
    Auto,
    /// The YAML and JSON files under the path, read as they are (kustomization files skipped).
    Plain,
    /// `kustomize build` of the path.
    Kustomize,
    /// `helm template` of the chart at the path.
    Helm,
}

impl fmt::Display for RenderMode {
    /// Writes the config spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Plain => "plain",
            Self::Kustomize => "kustomize",
            Self::Helm => "helm",
        })
    }
}

/// `[sync.helm]`: how a chart is templated (Helm's `helm template` flags).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HelmOptions {
    /// The release name (`.Release.Name`). Default `None`: the unit's name.
    pub release: Option<String>,
    /// Values files, `/`-separated paths in the repository (not relative to the chart),
    /// applied in order as `helm template -f`, normalized like `path`. Default: none (the
    /// chart's own `values.yaml` applies).
    pub values_files: Vec<String>,
    /// Inline values (`[sync.helm.values]`), applied after the files, so they win. Default:
    /// empty.
    pub values: serde_json::Map<String, serde_json::Value>,
}

/// `[sync.decryption]`: SOPS decryption of the unit's files before they are rendered or parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decryption {
    /// The age identity file (`AGE-SECRET-KEY-1…` lines, as `age-keygen` writes them), given
    /// to `sops` as `SOPS_AGE_KEY_FILE`. Required.
    pub age_key_file: PathBuf,
}

/// How to reach one cluster (`[cluster]`, optional, or one of several `[[cluster]]` tables).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// The cluster's name, an RFC 1123 label, unique in the file; units name it in `cluster`,
    /// logs and metrics carry it as `cluster`. Required in `[[cluster]]`; default `"default"`
    /// for a single `[cluster]` table, so existing configs keep working.
    pub name: String,
    /// The kubeconfig file. Default `None`: kube's inference order (`kube::Config::infer`) —
    /// in-cluster service account, else `$KUBECONFIG`, else `~/.kube/config` — so one config
    /// works both as a systemd service and as a Deployment.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context. Default `None`: the kubeconfig's current context, as kubectl.
    pub context: Option<String>,
    /// At most this many object requests in flight per sync unit, at least 1. Default 32: enough
    /// to hide round-trip latency over thousands of objects, and far below the apiserver's
    /// default `--max-requests-inflight` of 400, so one unit cannot starve other clients.
    pub max_in_flight: usize,
}

impl ClusterConfig {
    /// The name of the cluster of a single `[cluster]` table (or of none): `default`.
    pub const DEFAULT_NAME: &'static str = "default";
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self { name: ClusterConfig::DEFAULT_NAME.to_owned(), kubeconfig: None, context: None, max_in_flight: 32 }
    }
}

/// How the daemon runs (`[daemon]`, optional).
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    /// Where bare mirrors and other state live, one subdirectory per unit. Default
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
    /// Sharding of units across replicas (`[daemon.sharding]`, present): each unit is applied
    /// only by the replica holding its own Lease, assigned by rendezvous hashing over the live
    /// replicas. Default `None`: this replica applies every unit (or, with leader election,
    /// the leader does). Exclusive with `leader_election`.
    pub sharding: Option<Sharding>,
}

/// `[daemon.sharding]`: units spread over replicas by `coordination.k8s.io/v1` Leases (the
/// lease module's sharding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharding {
    /// Namespace of the membership and unit Leases (`gitward-member-<identity>`,
    /// `gitward-unit-<unit>`); the replicas' RBAC must allow `get`, `list`, `watch`, `create`
    /// and `update` of Leases there. Default `gitward-system`, where
    /// deploy/kubernetes/sharded installs gitward.
    pub namespace: String,
    /// The failover bound: a dead replica's units are applied again by others within about
    /// this long (humantime), at least 2 s. The Leases themselves are written with half of it
    /// (`leaseDurationSeconds`, rounded up) so that detecting the death, taking the Lease and
    /// the first sync fit inside it. Default 15 s, as client-go's leader election.
    pub lease_duration: Duration,
    /// This replica's identity, an RFC 1123 label: its membership Lease's name, the
    /// `holderIdentity` of its unit Leases, and part of its User-Agent. Default `None`: the
    /// host name (or `$POD_NAME`) and the process id, made a valid label.
    pub identity: Option<String>,
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
            sharding: None,
        }
    }
}

/// One sync unit (`[[sync]]`): a (repository, ref, path) kept equal to one set of cluster
/// objects.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncUnit {
    /// The unit's name, required: an RFC 1123 label (`[a-z0-9-]`, at most 63 characters,
    /// starting and ending with a letter or digit), unique in the file, because it names the
    /// unit's state directory, its inventory and its log span.
    pub name: String,
    /// The repository, required, as git reads it: an `https://`, `ssh://`, `git://` or
    /// `file://` URL, an scp-like `user@host:path`, or a local path. A relative local path is
    /// anchored at the config file's directory; URLs are kept as written.
    pub repo: String,
    /// The cluster the unit applies to: the `name` of a `[[cluster]]`. Default: the only
    /// cluster (`default` for a `[cluster]` table); required when the file declares several.
    pub cluster: String,
    /// The branch, tag or commit SHA to follow (`ref` in the file). Default `"main"`, git's
    /// and the major hosts' default branch name.
    pub reference: String,
    /// The `/`-separated directory inside the repository whose manifests are applied,
    /// normalized (`./a//b/` → `a/b`); never `..` or absolute. Default `""`: the root.
    pub path: String,
    /// The namespace given to namespaced objects that name none. Default `"default"`, as kubectl.
    pub namespace: String,
    /// How objects are written. Default [`ApplyMode::ServerSideApply`] (see there for why).
    pub apply_mode: ApplyMode,
    /// Whether objects removed from git are deleted from the cluster. Default `true`: git is the
    /// source of truth; [`SyncUnit::max_prune_fraction`] and [`SyncUnit::allow_prune_all`]
    /// guard against mistakes.
    pub prune: bool,
    /// The field manager name server-side apply records ownership under, at most 128
    /// characters. Default `"gitward"`. Changing it later leaves fields owned by the old name.
    pub field_manager: String,
    /// Whether server-side apply takes fields over from other managers (`force=true`). Default
    /// `true`: what git declares wins, which is the point of GitOps; `false` reports such
    /// conflicts as failed objects instead.
    pub force_conflicts: bool,
    /// Field managers whose fields gitward takes over when it server-side applies an object
    /// they last wrote, each at most 128 characters. Their `managedFields` entries are merged
    /// into gitward's own apply entry (with a JSON patch, RFC 6902) and the annotation
    /// `kubectl.kubernetes.io/last-applied-configuration` is dropped, so that a field removed
    /// from git is really removed instead of staying, owned by the old manager (KEP-555's
    /// client-side to server-side apply upgrade; kubectl's `csaupgrade`). gitward's own
    /// `Update` entry (left by `apply_mode = "update"`) is always taken over. Default
    /// `["kubectl-client-side-apply", "before-first-apply"]`: the managers of `kubectl apply`
    /// without `--server-side` and of objects that predate field management — tools that
    /// declared whole objects, as git now does. Hand edits (`kubectl-edit`, `kubectl-patch`)
    /// and controllers are not taken over by default: their fields are not git's to remove.
    pub takeover_managers: Vec<String>,
    /// Whether an object whose update is refused because an immutable field changed is deleted
    /// and created again. Default `false`: recreating loses the object's state (a Job's pods, a
    /// Service's cluster IP), so it must be asked for.
    pub recreate_on_immutable: bool,
    /// A prune that would delete more than this fraction of the inventory is refused, 0.0..=1.0.
    /// Default 0.5: a commit that deletes most of what a unit manages is more often a mistake
    /// (a wrong path, a bad merge) than an intent.
    pub max_prune_fraction: f64,
    /// Whether a prune may empty the inventory altogether. Default `false`: an emptied path (a
    /// renamed directory, a wrong ref) would otherwise delete everything.
    pub allow_prune_all: bool,
    /// Files larger than this many bytes are not read. In the file: an integer of bytes or a
    /// string with a unit (`"4MiB"`, `"512KiB"`, `"2MB"`; units `B`, `KiB`, `MiB`, `GiB`, `kB`,
    /// `MB`, `GB`), at least 1. Default 4 MiB: bounds what a stray binary or generated file in a
    /// commit costs, while etcd's 1.5 MiB per-object limit leaves room for multi-document files.
    pub max_file_bytes: u64,
    /// How long the daemon (and `gitward sync --wait`) waits, after an apply, for the objects
    /// the sync created or configured to become healthy (kstatus `Current`), humantime
    /// (`"5m"`, `"90s"`); `"0s"` disables the wait. A `Failed` object ends the wait at once;
    /// a new revision cancels it. Default 5 minutes: a Deployment's own
    /// `progressDeadlineSeconds` defaults to 10 minutes, but most rollouts that will succeed
    /// do so within a few, and a bounded wait keeps the reported result timely.
    pub health_timeout: Duration,
    /// The unit's ApplySet parent (`[sync.inventory]`); no two units may share one.
    pub inventory: InventoryConfig,
    /// Credentials for the repository (`[sync.git]`).
    pub git: GitCredentials,
    /// How the path becomes manifests. Default [`RenderMode::Auto`].
    pub render: RenderMode,
    /// Whether kustomize may fetch remote resources (`https://…`, `github.com/…`). Default
    /// `false`: a render reads only the revision, so what is applied is what git holds (Flux's
    /// `--no-remote-bases`).
    pub allow_remote_bases: bool,
    /// Whether the unit's `namespace` is created when missing (a GET, then a bare create), as
    /// Argo CD's `CreateNamespace=true`. Such a namespace is shared: it belongs to no unit's
    /// ApplySet, is never relabelled, never pruned, and an existing one (even one another
    /// ApplySet owns) is left as it is, so several units may each set this for one namespace.
    /// A Namespace manifest in the revision is a member as any other object. Default `false`.
    pub create_namespace: bool,
    /// Units (by name) or ApplySets (by id, `applyset-…-v1`) whose objects this unit may take
    /// over when its revision declares them: how objects move between units (a unit renamed
    /// names its old name; a unit split off names the unit it came from; a unit whose
    /// inventory moved names itself). An object's owner is found from its
    /// `applyset.kubernetes.io/part-of` label by the ApplySet parent carrying that id, whose
    /// annotation `gitward.dev/unit` names its unit. Default empty: an object another ApplySet
    /// owns is never taken over (DESIGN.md decision 6). See also [`SyncUnit::adopted_by`].
    pub adopt_from: Vec<String>,
    /// Resolved, not in the file: the other units of the same file whose `adopt_from` names
    /// this unit. While there is any, this unit prunes nothing (the prune is refused with that
    /// reason), so an object moving to one of them is never deleted before it is taken over,
    /// whichever unit syncs first. Empty once the move is done and `adopt_from` removed.
    pub adopted_by: Vec<String>,
    /// `[sync.helm]`, used when the unit renders with Helm.
    pub helm: HelmOptions,
    /// `[sync.decryption]`. Default `None`: a SOPS-encrypted file refuses the revision.
    pub decryption: Option<Decryption>,
    /// A copy of the file's `[render]` table, so the engine needs only the unit.
    pub render_tools: RenderTools,
}

impl SyncUnit {
    /// A unit with every default applied: `name` and `repo` are taken as given (neither
    /// checked nor anchored), the inventory is `Secret` `<default namespace>/gitward-<name>`.
    pub fn new(name: impl Into<String>, repo: impl Into<String>) -> Self {
        let name = name.into();
        let namespace = "default".to_owned();
        Self {
            inventory: InventoryConfig {
                kind: InventoryKind::Secret,
                namespace: namespace.clone(),
                name: format!("gitward-{name}"),
            },
            name,
            repo: repo.into(),
            cluster: ClusterConfig::DEFAULT_NAME.to_owned(),
            reference: "main".to_owned(),
            path: String::new(),
            namespace,
            apply_mode: ApplyMode::ServerSideApply,
            prune: true,
            field_manager: "gitward".to_owned(),
            force_conflicts: true,
            takeover_managers: vec!["kubectl-client-side-apply".to_owned(), "before-first-apply".to_owned()],
            recreate_on_immutable: false,
            max_prune_fraction: 0.5,
            allow_prune_all: false,
            max_file_bytes: 4 << 20,
            health_timeout: Duration::from_secs(300),
            git: GitCredentials::default(),
            render: RenderMode::Auto,
            allow_remote_bases: false,
            create_namespace: false,
            adopt_from: Vec::new(),
            adopted_by: Vec::new(),
            helm: HelmOptions::default(),
            decryption: None,
            render_tools: RenderTools::default(),
        }
    }

    /// The repository's directory when it is on this host: a local path, or the path of a
    /// `file://` URL (not percent-decoded). `None` for network URLs and scp-like addresses.
    /// Local repositories are watched for pushes instead of only polled.
    pub fn local_repo(&self) -> Option<PathBuf> {
        match self.repo.strip_prefix("file://") {
            Some(path) => Some(PathBuf::from(path)),
            None if is_url_or_scp(&self.repo) => None,
            None => Some(PathBuf::from(&self.repo)),
        }
    }
}

/// Whether git reads `repo` as a URL (`scheme://…`) or an scp-like address (`host:path`, a `:`
/// before any `/`) rather than a local path.
fn is_url_or_scp(repo: &str) -> bool {
    repo.contains("://") || repo.find(':').is_some_and(|colon| !repo[..colon].contains('/'))
}

/// How desired objects are written (`apply_mode`: `"server-side-apply"` or `"update"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApplyMode {
    /// Server-side apply (`application/apply-patch+yaml`), the default: works for built-ins and
    /// CRDs alike, records field ownership, needs no client-side merge or `last-applied`
    /// annotation.
    ServerSideApply,
    /// Hash-gated Get-Modify-Update with optimistic locking (`resourceVersion`), for clusters
    /// or objects where server-side apply is not wanted: `POST` to create; for an object git
    /// changed, `GET` then `PUT` with the read resourceVersion, replacing the top-level fields
    /// the manifest declares; for an unchanged one, a merge patch of gitward's label and
    /// annotation carrying the cached resourceVersion. A 409 Conflict is reported as
    /// `conflict` and not retried in place (DESIGN.md decision 5; ARCHITECTURE.md, Apply modes).
    Update,
}

impl fmt::Display for ApplyMode {
    /// Writes the config spelling: `server-side-apply` or `update`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ServerSideApply => "server-side-apply",
            Self::Update => "update",
        })
    }
}

/// The ApplySet parent of a unit (KEP-3659), `[sync.inventory]`, optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryConfig {
    /// The parent's kind. Default [`InventoryKind::Secret`], as kubectl's `--applyset`.
    pub kind: InventoryKind,
    /// The parent's namespace, an RFC 1123 label. Default: the unit's `namespace`.
    pub namespace: String,
    /// The parent's name, an RFC 1123 subdomain. Default `gitward-<unit name>`, so units never
    /// collide by default.
    pub name: String,
}

/// The kinds an ApplySet parent may be (`"Secret"` or `"ConfigMap"` in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum InventoryKind {
    /// A `v1` Secret, the default: fewer actors may read Secrets than ConfigMaps.
    Secret,
    /// A `v1` ConfigMap.
    ConfigMap,
}

impl fmt::Display for InventoryKind {
    /// Writes the kind as Kubernetes spells it: `Secret` or `ConfigMap`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Secret => "Secret",
            Self::ConfigMap => "ConfigMap",
        })
    }
}

/// Credentials for a unit's repository (`[sync.git]`, optional); all default to `None`. Only
/// file paths are held here, never the secrets themselves, so this may be logged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitCredentials {
    /// A private key for `ssh://` and scp-like remotes.
    pub ssh_key_file: Option<PathBuf>,
    /// The `known_hosts` file that ssh remotes' host keys are checked against.
    pub known_hosts_file: Option<PathBuf>,
    /// A file holding a token (or password) for `https://` remotes.
    pub token_file: Option<PathBuf>,
    /// The user name sent with the token or key; `None` lets the URL or the transport decide.
    pub username: Option<String>,
}

/// Checks a Kubernetes version as `[render] kube_version` takes it (`v1.34.2`, `1.34`), for
/// flags that override it; the error says what to write.
pub fn check_kube_version(value: &str) -> std::result::Result<(), String> {
    resolve::kube_version(value)
}

impl Config {
    /// Reads and resolves the config file at `path`.
    ///
    /// Relative paths in the file are anchored at the file's directory, made absolute against
    /// the current directory (not canonicalized). Blocking file I/O; errors name `path`.
    ///
    /// Errors: [`Error::ReadFailed`], then as [`Config::from_toml`].
    pub fn load(path: &Path) -> Result<Config> {
        let read_failed = |source| Error::ReadFailed { path: path.to_owned(), source };
        let text = std::fs::read_to_string(path).map_err(read_failed)?;
        let absolute = std::path::absolute(path).map_err(read_failed)?;
        let base_dir = absolute.parent().unwrap_or(Path::new("/"));
        Self::from_toml(&text, base_dir, &path.display().to_string())
    }

    /// Parses and resolves config text. `base_dir` anchors relative paths (used as given);
    /// `origin` names the text in errors (a file name).
    ///
    /// Errors: [`Error::ParseFailed`] for what the TOML parser refuses (unknown or missing keys,
    /// wrong types), [`Error::Invalid`] for values it accepts but the schema does not.
    pub fn from_toml(text: &str, base_dir: &Path, origin: &str) -> Result<Config> {
        let raw: raw::RawConfig = toml::from_str(text).map_err(|e| {
            let key = key_path(&e);
            Error::ParseFailed {
                origin: origin.to_owned(),
                line: e.span().map(|span| resolve::line_of(text, span.start)),
                message: hint::explain(key.as_deref(), e.message().trim_end()),
                key,
            }
        })?;
        resolve::Resolver { text, origin, base_dir }.config(raw)
    }

    /// The unit named `name`, if any.
    pub fn unit(&self, name: &str) -> Option<&SyncUnit> {
        self.units.iter().find(|unit| unit.name == name)
    }

    /// The cluster named `name`, if any.
    pub fn cluster(&self, name: &str) -> Option<&ClusterConfig> {
        self.clusters.iter().find(|cluster| cluster.name == name)
    }

    /// The cluster `unit` applies to. A resolved config always has it (validation refuses a
    /// unit naming an unknown cluster); for a hand-built config whose unit names none of its
    /// clusters, the first cluster.
    pub fn cluster_of(&self, unit: &SyncUnit) -> &ClusterConfig {
        self.cluster(&unit.cluster).unwrap_or(&self.clusters[0])
    }
}

/// The dotted key path of a TOML error (`daemon.listen`). `toml::de::Error` keeps it private
/// and prints it, as a last line ``in `daemon.listen` ``, only when it has no input to quote;
/// so an input-less copy is printed and that line read back.
fn key_path(error: &toml::de::Error) -> Option<String> {
    let mut bare = error.clone();
    bare.set_input(None);
    let printed = bare.to_string();
    let line = printed.lines().rev().find(|line| line.starts_with("in `"))?;
    Some(line.strip_prefix("in `")?.strip_suffix('`')?.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[[sync]]\nname = \"shop\"\nrepo = \"https://git.example.com/shop.git\"\n";

    fn parse(text: &str) -> Result<Config> {
        Config::from_toml(text, Path::new("/etc/gitward"), "config.toml")
    }

    fn error(text: &str) -> String {
        parse(text).expect_err("config should be refused").to_string()
    }

    #[test]
    fn defaults_are_applied_to_a_minimal_config() {
        let config = parse(MINIMAL).unwrap();
        assert_eq!(config.clusters, vec![ClusterConfig::default()]);
        assert_eq!(config.daemon, DaemonConfig::default());
        assert_eq!(config.units, vec![SyncUnit::new("shop", "https://git.example.com/shop.git")]);
        let unit = config.unit("shop").unwrap();
        assert_eq!(unit.reference, "main");
        assert_eq!(unit.path, "");
        assert_eq!(unit.apply_mode, ApplyMode::ServerSideApply);
        assert_eq!(unit.max_file_bytes, 4 * 1024 * 1024);
        assert_eq!(unit.inventory.name, "gitward-shop");
        assert!(config.unit("cart").is_none());
    }

    #[test]
    fn inventory_namespace_defaults_to_the_units_namespace() {
        let config =
            parse(&format!("{MINIMAL}namespace = \"shop\"\n[sync.inventory]\nkind = \"ConfigMap\"\n")).unwrap();
        let inventory = &config.units[0].inventory;
        assert_eq!((inventory.kind, inventory.namespace.as_str()), (InventoryKind::ConfigMap, "shop"));
    }

    #[test]
    fn durations_and_sizes_are_parsed() {
        let text = format!(
            "[daemon]\ninterval = \"5m\"\nresync_interval = \"1h 30m\"\nlisten = \"127.0.0.1:9090\"\n\
             {MINIMAL}max_file_bytes = 1024\napply_mode = \"update\"\nhealth_timeout = \"0s\"\n"
        );
        let config = parse(&text).unwrap();
        assert_eq!(config.daemon.interval, Duration::from_secs(300));
        assert_eq!(config.daemon.resync_interval, Duration::from_secs(5400));
        assert_eq!(config.daemon.listen, Some("127.0.0.1:9090".parse().unwrap()));
        assert_eq!(config.units[0].max_file_bytes, 1024);
        assert_eq!(config.units[0].apply_mode.to_string(), "update");
        assert_eq!(config.units[0].health_timeout, Duration::ZERO, "0s disables the health wait");
    }

    #[test]
    fn concurrent_syncs_default_to_four_and_zero_is_refused() {
        assert_eq!(parse(MINIMAL).unwrap().daemon.max_concurrent_syncs, 4);
        let config = parse(&format!("[daemon]\nmax_concurrent_syncs = 1\n{MINIMAL}")).unwrap();
        assert_eq!(config.daemon.max_concurrent_syncs, 1);
        let message = error(&format!("[daemon]\nmax_concurrent_syncs = 0\n{MINIMAL}"));
        assert!(message.contains("daemon.max_concurrent_syncs: must be at least 1"), "{message}");
    }

    #[test]
    fn takeover_managers_default_to_client_side_apply_and_can_be_set() {
        let unit = &parse(MINIMAL).unwrap().units[0];
        assert_eq!(unit.takeover_managers, ["kubectl-client-side-apply", "before-first-apply"]);
        let config = parse(&format!("{MINIMAL}takeover_managers = [\"helm\", \"kubectl-edit\"]\n")).unwrap();
        assert_eq!(config.units[0].takeover_managers, ["helm", "kubectl-edit"]);
        assert!(parse(&format!("{MINIMAL}takeover_managers = []\n")).unwrap().units[0].takeover_managers.is_empty());
        let message = error(&format!("{MINIMAL}takeover_managers = [\"ok\", \"\"]\n"));
        assert!(message.starts_with("config.toml: line 4: sync[0].takeover_managers: "), "{message}");
    }

    #[test]
    fn render_settings_are_resolved_and_copied_into_each_unit() {
        let text = format!(
            "[render]\nhelm = \"bin/helm\"\ntimeout = \"5s\"\nmax_output_bytes = \"1MiB\"\n{MINIMAL}\
             render = \"helm\"\n[sync.helm]\nvalues_files = [\"./values//prod.yaml\"]\n\
             [sync.helm.values]\nreplicas = 2\nimage = {{ tag = \"v1\" }}\n\
             [sync.decryption]\nage_key_file = \"age.key\"\n"
        );
        let config = parse(&text).unwrap();
        let unit = &config.units[0];
        assert_eq!(unit.render, RenderMode::Helm);
        assert_eq!(unit.render_tools, config.render);
        assert_eq!(config.render.helm, Some(PathBuf::from("/etc/gitward/bin/helm")));
        assert_eq!(config.render.kustomize, None);
        assert_eq!((config.render.timeout, config.render.max_output_bytes), (Duration::from_secs(5), 1 << 20));
        assert_eq!(unit.helm.values_files, ["values/prod.yaml"]);
        assert_eq!(
            serde_json::Value::Object(unit.helm.values.clone()),
            serde_json::json!({"replicas": 2, "image": {"tag": "v1"}})
        );
        assert_eq!(
            unit.decryption.as_ref().map(|d| d.age_key_file.clone()),
            Some(PathBuf::from("/etc/gitward/age.key"))
        );
        let defaults = &parse(MINIMAL).unwrap().units[0];
        assert_eq!(
            (defaults.render, defaults.allow_remote_bases, defaults.create_namespace),
            (RenderMode::Auto, false, false)
        );
        assert_eq!(defaults.render_tools.timeout, Duration::from_secs(60));
    }

    #[test]
    fn helm_renders_for_the_newest_kubernetes_it_knows_unless_told_otherwise() {
        let defaults = parse(MINIMAL).unwrap().render;
        assert_eq!((defaults.kube_version.as_str(), defaults.api_versions.len()), ("v1.37.0", 0));
        let text =
            format!("[render]\nkube_version = \"v1.31.4\"\napi_versions = [\"monitoring.coreos.com/v1\"]\n{MINIMAL}");
        let config = parse(&text).unwrap();
        assert_eq!(config.units[0].render_tools.kube_version, "v1.31.4");
        assert_eq!(config.units[0].render_tools.api_versions, ["monitoring.coreos.com/v1"]);
        let message = error(&format!("[render]\nkube_version = \"latest\"\n{MINIMAL}"));
        assert!(
            message.starts_with("config.toml: line 2: render.kube_version: `latest` is not a Kubernetes version"),
            "{message}"
        );
        let message = error(&format!("[render]\napi_versions = [\"v1\", \"a b/v1\"]\n{MINIMAL}"));
        assert!(message.starts_with("config.toml: line 2: render.api_versions: "), "{message}");
    }

    #[test]
    fn a_values_file_outside_the_repository_is_refused() {
        let message = error(&format!("{MINIMAL}[sync.helm]\nvalues_files = [\"../secrets.yaml\"]\n"));
        assert!(message.starts_with("config.toml: line 5: sync[0].helm.values_files: "), "{message}");
        assert!(error(&format!("{MINIMAL}render = \"jsonnet\"\n")).contains("render"));
    }

    #[test]
    fn a_bad_duration_names_its_line() {
        let message = error(&format!("[daemon]\ninterval = \"soon\"\n{MINIMAL}"));
        assert!(message.starts_with("config.toml: line 2: daemon.interval: "), "{message}");
        assert!(error(&format!("[daemon]\ninterval = \"0s\"\n{MINIMAL}")).contains("line 2: daemon.interval"));
    }

    #[test]
    fn an_unknown_key_error_names_the_key_and_line() {
        let message = error(&format!("[daemon]\nintervall = \"60s\"\n{MINIMAL}"));
        assert_eq!(
            message,
            "config.toml: line 2: daemon: unknown key `intervall`: did you mean `interval`, as in `interval = \"60s\"`?"
        );
        let message = error(&format!("{MINIMAL}\n[sync.git]\nssh_key = \"id\"\n"));
        assert!(
            message.starts_with("config.toml: line 6: sync.git: unknown key `ssh_key`: did you mean `ssh_key_file`"),
            "{message}"
        );
    }

    #[test]
    fn a_single_sync_table_says_to_write_two_brackets() {
        let message = error("[sync]\nname = \"shop\"\nrepo = \"/r\"\n");
        assert!(message.contains("sync: `[sync]` is a single table"), "{message}");
        assert!(message.contains("write `[[sync]]`"), "{message}");
    }

    #[test]
    fn a_missing_repo_error_names_the_key() {
        let message = error("[[sync]]\nname = \"shop\"\n");
        assert_eq!(message, "config.toml: line 1: sync: missing field `repo`");
    }

    #[test]
    fn a_config_without_units_is_refused() {
        assert_eq!(error("[daemon]\n"), "config.toml: sync: at least one [[sync]] unit is required");
    }

    #[test]
    fn duplicate_unit_names_are_refused_with_their_line() {
        let message = error(&format!("{MINIMAL}{MINIMAL}"));
        assert_eq!(message, "config.toml: line 5: sync[1].name: duplicate unit name `shop` (also sync[0])");
    }

    #[test]
    fn units_sharing_an_inventory_are_refused() {
        let text = format!(
            "{MINIMAL}[[sync]]\nname = \"cart\"\nrepo = \"/srv/git/cart\"\n[sync.inventory]\nname = \"gitward-shop\"\n"
        );
        let message = error(&text);
        assert!(
            message.starts_with("config.toml: line 7: sync[1].inventory: Secret/default/gitward-shop"),
            "{message}"
        );
    }

    #[test]
    fn a_bad_unit_name_is_refused_with_its_line() {
        let message = error("[[sync]]\nname = \"Shop_1\"\nrepo = \"/srv/git/shop\"\n");
        assert!(message.starts_with("config.toml: line 2: sync[0].name: `Shop_1`"), "{message}");
    }

    #[test]
    fn a_prune_fraction_outside_zero_to_one_is_refused() {
        let message = error(&format!("{MINIMAL}max_prune_fraction = 1.5\n"));
        assert!(
            message.starts_with("config.toml: line 4: sync[0].max_prune_fraction: 1.5 is out of range"),
            "{message}"
        );
        assert!(error(&format!("{MINIMAL}max_prune_fraction = nan\n")).contains("max_prune_fraction"));
        assert_eq!(parse(&format!("{MINIMAL}max_prune_fraction = 1\n")).unwrap().units[0].max_prune_fraction, 1.0);
    }

    #[test]
    fn dot_dot_in_path_is_refused() {
        let message = error(&format!("{MINIMAL}path = \"deploy/../../etc\"\n"));
        assert!(message.starts_with("config.toml: line 4: sync[0].path: "), "{message}");
        assert!(error(&format!("{MINIMAL}path = \"/deploy\"\n")).contains("sync[0].path"));
        assert_eq!(parse(&format!("{MINIMAL}path = \"./deploy/prod/\"\n")).unwrap().units[0].path, "deploy/prod");
    }

    #[test]
    fn relative_paths_are_resolved_against_the_files_directory() {
        let text = "[cluster]\nkubeconfig = \"kube/config\"\n[daemon]\nstate_dir = \"state\"\n\
                    webhook_secret_file = \"/run/secrets/hook\"\n\
                    [[sync]]\nname = \"local\"\nrepo = \"repos/shop.git\"\n[sync.git]\nssh_key_file = \"keys/id\"\n\
                    [[sync]]\nname = \"remote\"\nrepo = \"git@github.com:acme/shop.git\"\n";
        let config = parse(text).unwrap();
        assert_eq!(config.clusters[0].kubeconfig, Some(PathBuf::from("/etc/gitward/kube/config")));
        assert_eq!(config.daemon.state_dir, PathBuf::from("/etc/gitward/state"));
        assert_eq!(config.daemon.webhook_secret_file, Some(PathBuf::from("/run/secrets/hook")));
        let local = config.unit("local").unwrap();
        assert_eq!(local.repo, "/etc/gitward/repos/shop.git");
        assert_eq!(local.local_repo(), Some(PathBuf::from("/etc/gitward/repos/shop.git")));
        assert_eq!(local.git.ssh_key_file, Some(PathBuf::from("/etc/gitward/keys/id")));
        let remote = config.unit("remote").unwrap();
        assert_eq!(remote.repo, "git@github.com:acme/shop.git");
        assert_eq!(remote.local_repo(), None);
    }

    #[test]
    fn a_tilde_path_is_refused_rather_than_misread() {
        let message = error("[cluster]\nkubeconfig = \"~/.kube/config\"\n[[sync]]\nname = \"a\"\nrepo = \"/r\"\n");
        assert!(message.starts_with("config.toml: line 2: cluster.kubeconfig: "), "{message}");
    }

    #[test]
    fn load_reads_a_file_and_anchors_at_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gitward.toml");
        std::fs::write(&path, "[[sync]]\nname = \"shop\"\nrepo = \"shop.git\"\n").unwrap();
        let config = Config::load(&path).unwrap();
        assert_eq!(config.units[0].repo, dir.path().join("shop.git").to_str().unwrap());
        let missing = Config::load(&dir.path().join("missing.toml")).unwrap_err();
        assert!(matches!(missing, Error::ReadFailed { .. }), "{missing}");
    }

    const TWO_CLUSTERS: &str = "[[cluster]]\nname = \"prod\"\nkubeconfig = \"prod.kubeconfig\"\n\
                                [[cluster]]\nname = \"edge\"\ncontext = \"edge-1\"\nmax_in_flight = 8\n";

    #[test]
    fn a_single_cluster_table_is_the_cluster_named_default() {
        let config = parse(&format!("[cluster]\nmax_in_flight = 4\n{MINIMAL}")).unwrap();
        assert_eq!(config.clusters.len(), 1);
        assert_eq!((config.clusters[0].name.as_str(), config.clusters[0].max_in_flight), ("default", 4));
        assert_eq!(config.units[0].cluster, "default");
        assert_eq!(config.cluster_of(&config.units[0]).max_in_flight, 4);
    }

    #[test]
    fn units_pick_one_of_several_named_clusters() {
        let text = format!(
            "{TWO_CLUSTERS}{MINIMAL}cluster = \"edge\"\n[[sync]]\nname = \"cart\"\nrepo = \"/r\"\ncluster = \"prod\"\n"
        );
        let config = parse(&text).unwrap();
        let names: Vec<_> = config.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["prod", "edge"]);
        assert_eq!(config.cluster_of(config.unit("shop").unwrap()).context.as_deref(), Some("edge-1"));
        assert_eq!(
            config.cluster_of(config.unit("cart").unwrap()).kubeconfig,
            Some(PathBuf::from("/etc/gitward/prod.kubeconfig"))
        );
        let one = parse(&format!("[[cluster]]\nname = \"prod\"\n{MINIMAL}")).unwrap();
        assert_eq!(one.units[0].cluster, "prod", "the only cluster is the default");
    }

    #[test]
    fn cluster_mistakes_name_their_line_and_key() {
        let message = error(&format!("{TWO_CLUSTERS}{MINIMAL}"));
        assert!(
            message.starts_with("config.toml: line 9: sync[0].cluster: required: the file declares 2 clusters"),
            "{message}"
        );
        let message = error(&format!("{TWO_CLUSTERS}{MINIMAL}cluster = \"staging\"\n"));
        assert!(message.starts_with("config.toml: line 11: sync[0].cluster: no cluster named `staging`"), "{message}");
        let message = error(&format!("[[cluster]]\nname = \"a\"\n[[cluster]]\nname = \"a\"\n{MINIMAL}"));
        assert_eq!(message, "config.toml: line 4: cluster[1].name: duplicate cluster name `a` (also cluster[0])");
        let message = error(&format!("[[cluster]]\nkubeconfig = \"k\"\n{MINIMAL}"));
        assert!(message.starts_with("config.toml: line 1: cluster[0].name: required"), "{message}");
        let message = error(&format!("[[cluster]]\nname = \"a\"\nmax_in_flight = 0\n{MINIMAL}"));
        assert!(message.starts_with("config.toml: line 3: cluster[0].max_in_flight: "), "{message}");
        let message = error(&format!("[[cluster]]\nname = \"a\"\nkubeconfg = \"k\"\n{MINIMAL}"));
        assert!(
            message.starts_with("config.toml: line 3: cluster: unknown key `kubeconfg`: did you mean `kubeconfig`"),
            "{message}"
        );
        let message = error(&format!("[cluster]\nname = \"A b\"\n{MINIMAL}"));
        assert!(message.starts_with("config.toml: line 2: cluster.name: "), "{message}");
    }

    #[test]
    fn sharding_is_on_when_its_table_is_present() {
        assert_eq!(parse(MINIMAL).unwrap().daemon.sharding, None);
        let config = parse(&format!("[daemon.sharding]\n{MINIMAL}")).unwrap();
        let sharding = config.daemon.sharding.unwrap();
        assert_eq!(sharding.namespace, "gitward-system");
        assert_eq!(sharding.lease_duration, Duration::from_secs(15));
        assert_eq!((sharding.identity, sharding.cluster.as_str()), (None, "default"));
        let text = format!(
            "{TWO_CLUSTERS}[daemon.sharding]\nnamespace = \"ops\"\nlease_duration = \"4s\"\n\
             identity = \"replica-a\"\ncluster = \"edge\"\n{MINIMAL}cluster = \"prod\"\n"
        );
        let sharding = parse(&text).unwrap().daemon.sharding.unwrap();
        assert_eq!(sharding.lease_duration, Duration::from_secs(4));
        assert_eq!((sharding.namespace.as_str(), sharding.cluster.as_str()), ("ops", "edge"));
        assert_eq!(sharding.identity.as_deref(), Some("replica-a"));
    }

    #[test]
    fn sharding_mistakes_name_their_line_and_key() {
        let message = error(&format!("[daemon.sharding]\nlease_duration = \"1s\"\n{MINIMAL}"));
        assert!(message.starts_with("config.toml: line 2: daemon.sharding.lease_duration: "), "{message}");
        let message = error(&format!("[daemon.sharding]\ncluster = \"nope\"\n{MINIMAL}"));
        assert!(
            message.starts_with("config.toml: line 2: daemon.sharding.cluster: no cluster named `nope`"),
            "{message}"
        );
        let message = error(&format!("[daemon.sharding]\nidentity = \"Pod_1\"\n{MINIMAL}"));
        assert!(message.starts_with("config.toml: line 2: daemon.sharding.identity: "), "{message}");
        let message = error(&format!("[daemon.leader_election]\n[daemon.sharding]\n{MINIMAL}"));
        assert!(message.contains("daemon.sharding: cannot be combined with [daemon.leader_election]"), "{message}");
        let message = error(&format!("[daemon.sharding]\nnamespce = \"x\"\n{MINIMAL}"));
        assert!(
            message
                .starts_with("config.toml: line 2: daemon.sharding: unknown key `namespce`: did you mean `namespace`"),
            "{message}"
        );
    }

    #[test]
    fn adopt_from_names_units_or_applyset_ids_and_marks_the_units_it_names() {
        let id = format!("applyset-{}-v1", "A".repeat(43));
        let text = format!(
            "{MINIMAL}[[sync]]\nname = \"shop-db\"\nrepo = \"https://git.example.com/shop.git\"\n\
             adopt_from = [\"shop\", \"{id}\"]\n"
        );
        let config = parse(&text).unwrap();
        assert_eq!(config.unit("shop-db").unwrap().adopt_from, ["shop".to_string(), id]);
        assert_eq!(config.unit("shop").unwrap().adopted_by, ["shop-db"]);
        assert!(config.unit("shop-db").unwrap().adopted_by.is_empty());
        let message = error(&format!("{MINIMAL}adopt_from = [\"Shop_1\"]\n"));
        assert!(message.starts_with("config.toml: line 4: sync[0].adopt_from: "), "{message}");
        let message = error(&format!("{MINIMAL}adopt_from = [\"applyset-short-v1\"]\n"));
        assert!(message.contains("not an ApplySet id"), "{message}");
    }

    #[test]
    fn the_sharded_deployments_config_parses() {
        let yaml = include_str!("../../deploy/kubernetes/sharded/configmap.yaml");
        let (_, body) = yaml.split_once("config.toml: |\n").expect("a config.toml key");
        let text: Vec<&str> = body.lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
        let config =
            Config::from_toml(&text.join("\n"), Path::new("/"), "configmap.yaml").unwrap_or_else(|e| panic!("{e}"));
        let sharding = config.daemon.sharding.expect("[daemon.sharding]");
        assert_eq!((sharding.namespace.as_str(), sharding.lease_duration), ("gitward-system", Duration::from_secs(15)));
        assert_eq!(config.units.len(), 3);
    }

    #[test]
    fn the_multi_cluster_example_parses() {
        let text = include_str!("../../examples/multi-cluster.toml");
        let config = Config::from_toml(text, Path::new("/src"), "multi-cluster.toml").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.clusters.len(), 2);
        assert_eq!(config.cluster_of(config.unit("platform-edge").unwrap()).context.as_deref(), Some("edge-eu-1"));
    }

    #[test]
    fn the_example_config_toml_parses() {
        let config = Config::from_toml(include_str!("../../config.toml"), Path::new("/src/gitward"), "config.toml")
            .unwrap_or_else(|e| panic!("{e}"));
        let unit = config.unit("example").unwrap();
        assert_eq!(unit.repo, "/src/gitward/target/example-repo.git");
        let helm = config.unit("example-helm").unwrap();
        assert_eq!(helm.helm.values_files, ["helm/values/demo.yaml"]);
        assert_eq!(helm.helm.release.as_deref(), Some("hello"));
        assert!(helm.create_namespace);
        assert_eq!(helm.render_tools.helm, Some(PathBuf::from("/src/gitward/target/tools/bin/helm")));
        assert_eq!(config.daemon.state_dir, PathBuf::from("/src/gitward/target/gitward-state"));
        assert_eq!(config.clusters[0].kubeconfig, None);
    }
}
