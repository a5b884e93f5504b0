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
//!
//! Files: the resolved types by table — `unit` (`[[sync]]`), `ignore` (`[[sync.ignore]]`), `cluster`,
//! `daemon`, `render`, `remote` (`[render] remote_base_hosts`), `substitute` (`[sync.substitute]`), `set` (`[[sync_set]]` and its
//! expansion into units), `notify` (`[[notify]]`), `preview` (`[[preview]]`), `depends` (`depends_on`: names,
//! expressions and cycles checked), `allow` (`[render] chart_repositories`), `address` (the
//! addresses gitward reaches only when listed: private, loopback, metadata…) —
//! then `raw` (the file as written, and its JSON Schema), `resolve` (raw → resolved, validation), `unread` (keys a
//! unit's kind does not read, refused), `hint` (did you mean), `tests`.

mod address;
mod allow;
mod chart;
mod cluster;
mod constraint;
mod daemon;
mod depends;
mod fetching;
mod hint;
mod ignore;
mod notify;
mod path;
mod preview;
mod provenance;
mod raw;
mod remote;
mod render;
mod resolve;
mod set;
mod set_identity;
pub use set_identity::wildcard_matches;
#[cfg(test)]
mod set_tests;
mod sharding;
mod substitute;
mod tenancy;
#[cfg(test)]
mod tests;
mod ui;
mod unit;
mod unread;
mod verify;

pub use address::{Restricted, refused_resolution, restricted_host, restricted_ip};
pub use allow::{ChartRepositories, Location, artifact_repository};
pub use chart::ChartSource;
pub use cluster::ClusterConfig;
pub use constraint::{VersionConstraint, lenient_version};
pub use daemon::{DaemonConfig, Fetching, LeaderElection, Sharding, Ui};
pub use depends::{Dependency, GeneratedDependency};
pub use ignore::IgnoreRule;
pub use notify::{Notify, NotifyEvent, NotifyKind, repository_path};
pub use path::UnitPath;
pub use preview::{DEFAULT_PREVIEW_INTERVAL, ForgeAuth, ForgeKind, Preview};
pub use provenance::{Provenance, ProvenanceKey};
/// The config file's JSON Schema, as pretty JSON: what `gitward schema` prints and
/// `schema/config.schema.json` holds.
pub use raw::schema::json_schema;
pub use remote::{Origin, RemoteBaseHosts, RemoteBases};
pub use render::{RenderTools, SandboxMode};
pub use set::{DEFAULT_MAX_UNITS, SyncSet};
pub use substitute::{Substitute, VarSource, is_var_name};
use unit::is_url_or_scp;
pub use unit::{
    ApplyMode, Decryption, GitCredentials, HelmOptions, InventoryConfig, InventoryKind, RenderMode, SyncUnit,
};
pub use verify::Verify;

use std::path::{Path, PathBuf};

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
    /// The sets of units generated from a repository's directories (`[[sync_set]]`), in file
    /// order. Their units are not in [`Config::units`] as loaded: [`Config::expand`] makes them
    /// from a listing of the tree and [`Config::with_sets`] adds them.
    pub sets: Vec<SyncSet>,
    /// Where syncs are told of beyond the log (`[[notify]]`), in file order; default none.
    pub notify: Vec<Notify>,
    /// The forge repositories whose pull requests are previewed (`[[preview]]`), in file
    /// order; default none.
    pub preview: Vec<Preview>,
    /// The `depends_on` entries of `[[sync]]` units that name units only a set makes, in file
    /// order: added to [`SyncUnit::depends_on`] by [`Config::with_sets`] once a set makes them.
    pub generated_dependencies: Vec<GeneratedDependency>,
    /// `[provenance]`: the key that signs each sync's attestation; `None` makes none. Each
    /// unit holds a copy ([`SyncUnit::provenance`]).
    pub provenance: Option<Provenance>,
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
        let config = resolve::Resolver { text, origin, base_dir }.config(raw)?;
        // A token written into a repository URL is masked in every line gitward writes.
        for unit in &config.units {
            crate::telemetry::url::register(&unit.repo);
            if let Some(chart) = &unit.helm.chart {
                crate::telemetry::url::register(&chart.repo_url);
            }
        }
        Ok(config)
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
