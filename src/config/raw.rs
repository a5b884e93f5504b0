//! The raw config: what the file says, before defaults and validation.
//!
//! Every field is optional unless the schema requires it, so that [`super::resolve`] alone
//! decides defaults. Fields that validation may reject after parsing are wrapped in
//! [`Spanned`], so that the error can name the line they are on. `deny_unknown_fields` makes a
//! misspelt key a parse error that names the key and its line.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Visitor};
use toml::Spanned;

use super::{ApplyMode, InventoryKind, NotifyEvent, NotifyKind, RenderMode, SandboxMode};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub cluster: RawClusters,
    #[serde(default)]
    pub daemon: RawDaemon,
    #[serde(default)]
    pub sync: Vec<Spanned<RawSyncUnit>>,
    /// `[[sync_set]]`: kept as tables, since every `[[sync]]` key in them is a template that
    /// is parsed as a `[[sync]]` table only once expanded (module `set`).
    #[serde(default)]
    pub sync_set: Vec<Spanned<toml::Table>>,
    #[serde(default)]
    pub render: RawRender,
    #[serde(default)]
    pub notify: Vec<Spanned<RawNotify>>,
}

/// `[render]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRender {
    pub kustomize: Option<Spanned<String>>,
    pub helm: Option<Spanned<String>>,
    pub sops: Option<Spanned<String>>,
    pub timeout: Option<Spanned<HumanDuration>>,
    pub max_output_bytes: Option<ByteSize>,
    pub max_tree_bytes: Option<ByteSize>,
    pub kube_version: Option<Spanned<String>>,
    pub api_versions: Option<Vec<Spanned<String>>>,
    pub chart_repositories: Option<Vec<Spanned<String>>>,
    pub remote_base_hosts: Option<Vec<Spanned<String>>>,
    pub remote_base_ca_file: Option<Spanned<String>>,
    pub sandbox: Option<SandboxMode>,
    pub max_memory: Option<ByteSize>,
    pub max_index_age: Option<Spanned<HumanDuration>>,
}

/// `[cluster]` (one table) or `[[cluster]]` (an array of tables): TOML gives both the key
/// `cluster`, so one field takes either shape.
#[derive(Debug, Default)]
pub(super) enum RawClusters {
    /// No `cluster` key at all.
    #[default]
    Absent,
    /// `[cluster]`: the single cluster, named `default` unless it says otherwise.
    One(RawCluster),
    /// `[[cluster]]`: named clusters, in file order.
    Many(Vec<Spanned<RawCluster>>),
}

impl<'de> Deserialize<'de> for RawClusters {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ClustersVisitor)
    }
}

/// Hands a table or an array to the derived deserializers, so their errors (unknown key,
/// wrong type) keep the TOML parser's line and key.
struct ClustersVisitor;

impl<'de> Visitor<'de> for ClustersVisitor {
    type Value = RawClusters;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [cluster] table or [[cluster]] tables")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawClusters, A::Error> {
        RawCluster::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawClusters::One)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<RawClusters, A::Error> {
        Vec::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(RawClusters::Many)
    }
}

/// One `[cluster]` or `[[cluster]]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    pub name: Option<Spanned<String>>,
    pub kubeconfig: Option<Spanned<String>>,
    pub context: Option<Spanned<String>>,
    pub max_in_flight: Option<Spanned<usize>>,
}

/// `[daemon]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDaemon {
    pub state_dir: Option<Spanned<String>>,
    pub interval: Option<Spanned<HumanDuration>>,
    pub resync_interval: Option<Spanned<HumanDuration>>,
    pub listen: Option<SocketAddr>,
    pub webhook_secret_file: Option<Spanned<String>>,
    pub self_heal: Option<bool>,
    pub leader_election: Option<RawLeaderElection>,
    pub max_concurrent_syncs: Option<Spanned<usize>>,
    pub max_fetches_per_host: Option<Spanned<usize>>,
    pub fetch_connect_timeout: Option<Spanned<HumanDuration>>,
    pub fetch_idle_timeout: Option<Spanned<HumanDuration>>,
    pub sharding: Option<Spanned<RawSharding>>,
    pub default_service_account: Option<Spanned<String>>,
    pub ui: Option<RawUi>,
}

/// `[daemon.ui]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUi {
    pub enabled: Option<bool>,
    pub token_file: Option<Spanned<String>>,
}

/// `[daemon.sharding]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSharding {
    pub namespace: Option<Spanned<String>>,
    pub lease_duration: Option<Spanned<HumanDuration>>,
    pub identity: Option<Spanned<String>>,
    pub group: Option<Spanned<String>>,
    pub cluster: Option<Spanned<String>>,
}

/// `[daemon.leader_election]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLeaderElection {
    pub enabled: Option<bool>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub lease_duration: Option<Spanned<HumanDuration>>,
    pub renew_every: Option<Spanned<HumanDuration>>,
}

/// One `[[sync]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSyncUnit {
    pub name: Spanned<String>,
    pub repo: Option<Spanned<String>>,
    pub cluster: Option<Spanned<String>>,
    #[serde(rename = "ref")]
    pub reference: Option<Spanned<String>>,
    pub path: Option<Spanned<String>>,
    pub namespace: Option<Spanned<String>>,
    pub apply_mode: Option<ApplyMode>,
    pub prune: Option<bool>,
    pub field_manager: Option<Spanned<String>>,
    pub force_conflicts: Option<bool>,
    pub takeover_managers: Option<Vec<Spanned<String>>>,
    pub recreate_on_immutable: Option<bool>,
    pub max_prune_fraction: Option<Spanned<f64>>,
    pub allow_prune_all: Option<bool>,
    pub max_file_bytes: Option<ByteSize>,
    pub health_timeout: Option<HumanDuration>,
    pub inventory: Option<Spanned<RawInventory>>,
    #[serde(default)]
    pub git: RawGit,
    pub render: Option<RenderMode>,
    pub allow_remote_bases: Option<bool>,
    pub create_namespace: Option<bool>,
    pub suspend: Option<bool>,
    pub adopt_from: Option<Vec<Spanned<String>>>,
    pub service_account: Option<Spanned<String>>,
    #[serde(default)]
    pub helm: RawHelm,
    pub decryption: Option<RawDecryption>,
    pub verify: Option<Spanned<RawVerify>>,
    #[serde(default)]
    pub ignore: Vec<Spanned<RawIgnore>>,
    pub substitute: Option<RawSubstitute>,
    pub depends_on: Option<Spanned<Vec<Spanned<RawDependency>>>>,
}

/// One `[[sync.ignore]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIgnore {
    pub kind: Option<Spanned<String>>,
    pub group: Option<Spanned<String>>,
    pub name: Option<Spanned<String>>,
    pub namespace: Option<Spanned<String>>,
    pub label_selector: Option<Spanned<RawLabelSelector>>,
    #[serde(default)]
    pub paths: Vec<Spanned<String>>,
    #[serde(default)]
    pub managers: Vec<Spanned<String>>,
}

/// `label_selector` of `[[sync.ignore]]`: Kubernetes' `LabelSelector` in snake case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLabelSelector {
    #[serde(default)]
    pub match_labels: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<RawRequirement>,
}

/// One of `match_expressions`: Kubernetes' `LabelSelectorRequirement`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequirement {
    pub key: String,
    pub operator: String,
    pub values: Option<Vec<String>>,
}

/// `[sync.substitute]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSubstitute {
    pub vars: Option<std::collections::BTreeMap<String, Spanned<String>>>,
    pub from: Option<Vec<Spanned<String>>>,
}

/// `[sync.helm]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHelm {
    pub release: Option<Spanned<String>>,
    #[serde(default)]
    pub values_files: Vec<Spanned<String>>,
    pub values: Option<toml::Table>,
    pub repo_url: Option<Spanned<String>>,
    pub chart: Option<Spanned<String>>,
    pub version: Option<Spanned<String>>,
    pub username: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub ca_file: Option<Spanned<String>>,
    pub docker_config_file: Option<Spanned<String>>,
}

/// `[sync.decryption]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDecryption {
    pub age_key_file: Spanned<String>,
}

/// `[sync.verify]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVerify {
    pub allowed_signers_file: Option<Spanned<String>>,
    pub openpgp_keys_file: Option<Spanned<String>>,
    pub cosign_public_key_file: Option<Spanned<String>>,
}

/// `[sync.inventory]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInventory {
    pub kind: Option<InventoryKind>,
    pub namespace: Option<Spanned<String>>,
    pub name: Option<Spanned<String>>,
    pub record_chunk_bytes: Option<Spanned<ByteSize>>,
}

/// `[sync.git]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGit {
    pub ssh_key_file: Option<Spanned<String>>,
    pub known_hosts_file: Option<Spanned<String>>,
    pub token_file: Option<Spanned<String>>,
    pub username: Option<Spanned<String>>,
}

/// A duration written the humantime way: `"60s"`, `"5m"`, `"1h 30m"`.
#[derive(Debug, Clone, Copy)]
pub(super) struct HumanDuration(pub Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        humantime_serde::deserialize(deserializer).map(HumanDuration)
    }
}

/// A size in bytes: a TOML integer (`4194304`) or a string with a unit (`"4MiB"`).
///
/// Units: `B`, binary `KiB` `MiB` `GiB`, decimal `kB`/`KB` `MB` `GB`; whole numbers only. Zero
/// is rejected here, so the error points at the value's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ByteSizeVisitor)
    }
}

struct ByteSizeVisitor;

impl Visitor<'_> for ByteSizeVisitor {
    type Value = ByteSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a positive number of bytes, or a string such as \"4MiB\"")
    }

    fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<ByteSize, E> {
        positive(bytes)
    }

    fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<ByteSize, E> {
        u64::try_from(bytes).map_err(|_| E::custom("a size must be at least 1 byte")).and_then(positive)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<ByteSize, E> {
        parse_byte_size(text).map_err(E::custom).and_then(positive)
    }
}

fn positive<E: de::Error>(bytes: u64) -> Result<ByteSize, E> {
    match bytes {
        0 => Err(E::custom("a size must be at least 1 byte")),
        n => Ok(ByteSize(n)),
    }
}

/// Parses `"<digits>[ ]<unit>"`; see [`ByteSize`] for the units.
pub(super) fn parse_byte_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("invalid size `{text}`: expected a whole number and a unit, such as \"4MiB\""))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "invalid size `{text}`: unknown unit `{other}`, expected one of B, KiB, MiB, GiB, kB, MB, GB"
            ));
        }
    };
    number.checked_mul(factor).ok_or_else(|| format!("invalid size `{text}`: too large"))
}

/// One `[[notify]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotify {
    pub kind: NotifyKind,
    pub url: Spanned<String>,
    pub token_file: Option<Spanned<String>>,
    pub secret_file: Option<Spanned<String>>,
    pub units: Option<Vec<Spanned<String>>>,
    pub on: Option<Vec<NotifyEvent>>,
    pub repository: Option<Spanned<String>>,
}

#[cfg(test)]
mod tests {
    use super::parse_byte_size;

    #[test]
    fn byte_sizes_accept_binary_and_decimal_units() {
        assert_eq!(parse_byte_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_byte_size("512 KiB"), Ok(512 << 10));
        assert_eq!(parse_byte_size("2MB"), Ok(2_000_000));
        assert_eq!(parse_byte_size("100"), Ok(100));
        assert_eq!(parse_byte_size("100B"), Ok(100));
    }

    #[test]
    fn byte_sizes_reject_fractions_unknown_units_and_overflow() {
        assert!(parse_byte_size("1.5MiB").is_err());
        assert!(parse_byte_size("4mb").is_err());
        assert!(parse_byte_size("MiB").is_err());
        assert!(parse_byte_size("99999999999GiB").is_err());
    }
}

/// One entry of `depends_on` as the file writes it.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawDependency {
    /// `"base"`: the unit's name.
    Name(String),
    /// `{ unit = "base", ready_expr = "…" }`.
    Table(RawDependencyTable),
}

/// `{ unit = "…", ready_expr = "…" }` in `depends_on`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDependencyTable {
    pub unit: String,
    pub ready_expr: Option<String>,
}
