//! `[[sync]]`: a sync unit and its tables (`git`, `inventory`, `helm`, `decryption`), its render
//! mode and apply mode.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ClusterConfig, RenderTools, UnitPath, Verify};

/// How a unit's path becomes manifests (`render`: `"auto"`, `"plain"`, `"kustomize"`,
/// `"helm"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
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
    /// Where the chart comes from when it is not in git (`repo_url` and its keys). Default
    /// `None`: the chart is the unit's path in its repository.
    pub chart: Option<super::ChartSource>,
}

/// `[sync.decryption]`: SOPS decryption of the unit's files before they are rendered or parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decryption {
    /// The age identity file (`AGE-SECRET-KEY-1…` lines, as `age-keygen` writes them), given
    /// to `sops` as `SOPS_AGE_KEY_FILE`. Required.
    pub age_key_file: PathBuf,
}

/// One sync unit (`[[sync]]`): a (repository, ref, path) kept equal to one set of cluster
/// objects.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncUnit {
    /// The unit's name, required: an RFC 1123 label (`[a-z0-9-]`, at most 63 characters,
    /// starting and ending with a letter or digit), unique in the file, because it names the
    /// unit's state directory, its inventory and its log span.
    pub name: String,
    /// The repository, required unless the unit takes a chart from a chart repository
    /// ([`HelmOptions::chart`]; then `""`, or the repository its `values_files` are read
    /// from, at `ref`), as git reads it: an `https://`, `ssh://`, `git://` or
    /// `file://` URL, an scp-like `user@host:path`, or a local path. A relative local path is
    /// anchored at the config file's directory; URLs are kept as written.
    pub repo: String,
    /// The cluster the unit applies to: the `name` of a `[[cluster]]`. Default: the only
    /// cluster (`default` for a `[cluster]` table); required when the file declares several.
    pub cluster: String,
    /// The ServiceAccount of the unit's namespace that every write of the unit is sent as
    /// (`service_account`, or `[daemon] default_service_account`): applies, deletes,
    /// re-creates, `update` mode's reads and the health wait's reads carry kube's impersonation
    /// header `Impersonate-User: system:serviceaccount:<namespace>:<name>`, so a repository
    /// can make gitward write only what that ServiceAccount may (Flux's
    /// `spec.serviceAccountName`). Bookkeeping — the metadata cache, the ApplySet parent,
    /// discovery, the ownership check — keeps gitward's own identity. Default `None`: writes
    /// are gitward's own.
    pub service_account: Option<String>,
    /// The branch, tag or commit SHA to follow (`ref` in the file). Default `"main"`, git's
    /// and the major hosts' default branch name.
    pub reference: String,
    /// The `/`-separated directory inside the repository whose manifests are applied,
    /// normalized (`./a//b/` → `a/b`); never `..` or absolute. Default `""`: the root.
    pub path: UnitPath,
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
    /// Whether kustomize may fetch remote resources (`https://…`). Default `false`: a render
    /// reads only the revision, so what is applied is what git holds (Flux's
    /// `--no-remote-bases`). With `true`, a remote base must be `https://` on a host of
    /// `[render] remote_base_hosts` with a plain ref (`render::remote`), and kustomize runs in
    /// its own network namespace whose one reachable address is gitward's `CONNECT` proxy
    /// (`render::proxy`), which tunnels to those bases' hosts alone; where the host allows no
    /// such namespace, the unit's renders are refused.
    pub allow_remote_bases: bool,
    /// Whether the unit's `namespace` is created when missing (a GET, then a bare create), as
    /// Argo CD's `CreateNamespace=true`. Such a namespace is shared: it belongs to no unit's
    /// ApplySet, is never relabelled, never pruned, and an existing one (even one another
    /// ApplySet owns) is left as it is, so several units may each set this for one namespace.
    /// A Namespace manifest in the revision is a member as any other object. Default `false`.
    pub create_namespace: bool,
    /// The daemon applies, prunes and heals nothing of this unit (its triggers are counted and
    /// not acted on), as `gitward suspend` does from the cluster (the annotation
    /// `gitward.dev/suspended` on its ApplySet parent); either suspends it. Not part of the
    /// [`SyncUnit::fingerprint`]: it decides no object written. Default `false`.
    pub suspend: bool,
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
    /// `[sync.verify]`. Default `None`: revisions are not checked for signatures.
    pub verify: Option<Verify>,
    /// `[[sync.ignore]]`: fields of selected objects that gitward does not send, in file order.
    /// Default: none (git owns every field it declares).
    pub ignore: Vec<super::IgnoreRule>,
    /// `[sync.substitute]`: `${var}` references in the unit's objects replaced. Default: no
    /// variables, and no substitution at all (a `${` stays as written).
    pub substitute: super::Substitute,
    /// A copy of the file's `[render]` table, so the engine needs only the unit.
    pub render_tools: RenderTools,
    /// A copy of the file's `[provenance]` table, so the engine needs only the unit: `None`
    /// makes no attestation. Not part of the [`SyncUnit::fingerprint`]: it decides no object
    /// written.
    pub provenance: Option<super::Provenance>,
    /// `depends_on`: the units whose recorded state must be ready before this unit syncs a
    /// new revision (Flux's `dependsOn`), in file order, each once. Default: none. Not part
    /// of the [`SyncUnit::fingerprint`]: it orders syncs and decides no object written.
    pub depends_on: Vec<super::Dependency>,
    /// Names in `depends_on` of units a `[[sync_set]]` could make but none has made yet
    /// (`[[sync]]` units only): the unit waits for each as for a dependency never synced.
    /// Default: none. Filled by [`super::Config::with_sets`].
    pub depends_on_unmade: Vec<String>,
}

impl SyncUnit {
    /// What decides the objects this unit writes and how, as 16 hex digits (the first 8 bytes
    /// of a SHA-256 over the settings' debug form): repository, ref, path, cluster, namespace,
    /// ServiceAccount, apply and prune settings, inventory, render mode and options,
    /// decryption, namespace creation, adoption, ignore rules and substitution. Two replicas whose configs give a unit the
    /// same fingerprint apply the same thing; sharding assigns a unit only among replicas
    /// that advertise one fingerprint for it. Local paths of tools and credentials, size
    /// limits and the health timeout do not count: they may differ between machines.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest as _;
        let settings = format!(
            "{:?}",
            (
                (&self.name, &self.repo, &self.cluster, &self.service_account, &self.reference, &self.path),
                (&self.namespace, self.apply_mode, self.prune, &self.field_manager, self.force_conflicts),
                (&self.takeover_managers, self.recreate_on_immutable, self.max_prune_fraction, self.allow_prune_all),
                (&self.inventory, &self.render, self.allow_remote_bases, self.create_namespace),
                (&self.adopt_from, &self.adopted_by, &self.helm, self.decryption.is_some(), &self.substitute),
                &self.ignore,
            )
        );
        hex::encode(&sha2::Sha256::digest(settings.as_bytes())[..8])
    }

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
                record_chunk_bytes: InventoryConfig::RECORD_CHUNK_BYTES,
            },
            name,
            repo: repo.into(),
            cluster: ClusterConfig::DEFAULT_NAME.to_owned(),
            service_account: None,
            reference: "main".to_owned(),
            path: UnitPath::default(),
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
            suspend: false,
            adopt_from: Vec::new(),
            adopted_by: Vec::new(),
            helm: HelmOptions::default(),
            decryption: None,
            verify: None,
            ignore: Vec::new(),
            substitute: super::Substitute::default(),
            render_tools: RenderTools::default(),
            provenance: None,
            depends_on: Vec::new(),
            depends_on_unmade: Vec::new(),
        }
    }

    /// Whether the unit's revision is a commit of its git repository `repo`: false for a chart
    /// unit ([`HelmOptions::chart`], its revision a chart version, even with values files in
    /// git) and an OCI artifact (`repo = "oci://…"`). Only these take a git push's webhook
    /// and the push lane (the book, "Running the daemon").
    pub fn is_git(&self) -> bool {
        self.helm.chart.is_none() && !self.repo.starts_with("oci://")
    }

    /// The repository's directory when it is on this host: a local path, or the path of a
    /// `file://` URL (not percent-decoded). `None` for network URLs and scp-like addresses.
    /// Local repositories are watched for pushes instead of only polled.
    pub fn local_repo(&self) -> Option<PathBuf> {
        if self.repo.is_empty() {
            return None;
        }
        match self.repo.strip_prefix("file://") {
            Some(path) => Some(PathBuf::from(path)),
            None if is_url_or_scp(&self.repo) => None,
            None => Some(PathBuf::from(&self.repo)),
        }
    }
}

/// Whether git reads `repo` as a URL (`scheme://…`) or an scp-like address (`host:path`, a `:`
/// before any `/`) rather than a local path.
pub(super) fn is_url_or_scp(repo: &str) -> bool {
    repo.contains("://") || repo.find(':').is_some_and(|colon| !repo[..colon].contains('/'))
}

/// How desired objects are written (`apply_mode`: `"server-side-apply"` or `"update"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
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
    /// `record_chunk_bytes`: the largest members record kept in the parent's own `data`, and the
    /// largest piece of a longer record, in bytes (a ByteSize, 1 KiB..=768 KiB). Default 768 KiB:
    /// a Secret's 1 MiB data limit after base64, and room under etcd's 1.5 MiB request limit.
    /// A longer record is split over objects beside the parent (ARCHITECTURE.md, "Where the
    /// member record lives"); lowering it only makes more, smaller pieces.
    pub record_chunk_bytes: usize,
}

impl InventoryConfig {
    /// The default of [`InventoryConfig::record_chunk_bytes`]: 768 KiB.
    pub const RECORD_CHUNK_BYTES: usize = 768 << 10;

    /// `bytes` as a [`InventoryConfig::record_chunk_bytes`]; the message when it is not within
    /// 1 KiB..=768 KiB.
    pub fn chunk_bytes(bytes: u64) -> Result<usize, String> {
        match usize::try_from(bytes) {
            Ok(n) if (1024..=Self::RECORD_CHUNK_BYTES).contains(&n) => Ok(n),
            _ => Err(format!("{bytes} is out of range: must be between 1KiB and 768KiB")),
        }
    }
}

/// The kinds an ApplySet parent may be (`"Secret"` or `"ConfigMap"` in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
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

/// Sets each unit's `adopted_by`: the units whose `adopt_from` names it.
pub(super) fn adopted_by(units: &mut [SyncUnit]) {
    for index in 0..units.len() {
        let name = units[index].name.clone();
        units[index].adopted_by = units
            .iter()
            .filter(|other| other.name != name && other.adopt_from.contains(&name))
            .map(|other| other.name.clone())
            .collect();
    }
}
