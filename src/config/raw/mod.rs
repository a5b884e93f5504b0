//! The raw config: what the file says, before defaults and validation.
//!
//! Every field is optional unless the schema requires it, so that [`super::resolve`] alone
//! decides defaults. Fields that validation may reject after parsing are wrapped in
//! [`Spanned`], so that the error can name the line they are on. `deny_unknown_fields` makes a
//! misspelt key a parse error that names the key and its line.
//!
//! The same types, with `schemars`, make the file's JSON Schema (module `schema`): each field's
//! doc comment is its `description`, taken from `config.toml`. Files by table: this one (the
//! file, `[render]`, `[[notify]]`, durations and sizes), `daemon` (`[cluster]`, `[daemon]`),
//! `sync` (`[[sync]]` and its tables), `schema`.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::{self, Visitor};
use toml::Spanned;

use super::{ForgeKind, NotifyEvent, NotifyKind, SandboxMode};

mod daemon;
pub mod schema;
mod sync;

pub(super) use daemon::{RawCluster, RawDaemon, RawLeaderElection, RawSharding, RawUi};
pub(super) use sync::{
    RawDependency, RawGit, RawHelm, RawIgnore, RawInventory, RawLabelSelector, RawSubstitute, RawSyncUnit, RawVerify,
};

/// gitward's config file (`config.toml`). Unknown keys are errors; relative paths are relative
/// to the file's directory; durations are humantime strings ("30s", "5m", "1h 30m").
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    /// The cluster to apply to: one [cluster] table (the cluster named "default"), or
    /// [[cluster]] tables, each with a unique `name`. Read at start.
    #[serde(default)]
    pub cluster: RawClusters,
    /// How `gitward run` polls, serves and schedules.
    #[serde(default)]
    pub daemon: RawDaemon,
    /// One [[sync]] table per sync unit: a (repository, ref, path) kept equal to a set of
    /// objects. At least one [[sync]] or [[sync_set]] is required.
    #[serde(default)]
    #[schemars(with = "Vec<RawSyncUnit>")]
    pub sync: Vec<Spanned<RawSyncUnit>>,
    /// `[[sync_set]]`: kept as tables, since every `[[sync]]` key in them is a template that
    /// is parsed as a `[[sync]]` table only once expanded (module `set`).
    #[serde(default)]
    #[schemars(
        with = "Vec<schema::SyncSetSchema>",
        description = "[[sync_set]] tables: units generated from the directories of a repository, one per \
                       directory that path_glob matches."
    )]
    pub sync_set: Vec<Spanned<toml::Table>>,
    /// The render tools (kustomize, Helm, SOPS), run as child processes for units that render.
    #[serde(default)]
    pub render: RawRender,
    /// One [[notify]] table per notifier, told of failed, degraded, recovered (and applied)
    /// revisions.
    #[serde(default)]
    #[schemars(with = "Vec<RawNotify>")]
    pub notify: Vec<Spanned<RawNotify>>,
    /// One [[preview]] table per forge repository whose pull requests get a preview report
    /// as comments and a `gitward/preview` commit status.
    #[serde(default)]
    #[schemars(with = "Vec<RawPreview>")]
    pub preview: Vec<Spanned<RawPreview>>,
    /// Signed attestations of what each sync applied: one in-toto Statement in a DSSE
    /// envelope per sync that created, configured or pruned anything, chained per unit, kept
    /// in the cluster beside the unit's ApplySet parent and appended to the state directory.
    /// Default: none made.
    pub provenance: Option<RawProvenance>,
}

/// `[provenance]`: the key that signs each sync's attestation, and how many are kept.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvenance {
    /// The private key that signs the attestations: an unencrypted PKCS#8 PEM file of an
    /// ECDSA P-256 or an Ed25519 key (`openssl genpkey -algorithm ed25519`, or `openssl
    /// genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`). Exactly one of key_file and
    /// key_secret is set.
    #[schemars(with = "Option<String>")]
    pub key_file: Option<Spanned<String>>,
    /// The private key as a Kubernetes Secret, "namespace/name": its data key `key.pem` holds
    /// the same unencrypted PKCS#8 PEM as key_file would (`kubectl create secret generic NAME
    /// --from-file=key.pem=provenance.key`). Read with gitward's own identity (not a unit's
    /// ServiceAccount) from the unit's cluster when its engine starts, so gitward needs `get` on
    /// that Secret. Exactly one of key_file and key_secret is set.
    #[schemars(with = "Option<String>")]
    pub key_secret: Option<Spanned<String>>,
    /// How many of a unit's last attestations its ConfigMap in the cluster keeps (the state
    /// directory keeps them all). Default: 20.
    #[schemars(with = "Option<u32>")]
    pub keep: Option<Spanned<u32>>,
    /// Whether each attestation of a unit whose source is in an OCI registry is also pushed
    /// there, as an OCI 1.1 referrer of the manifest applied (artifactType
    /// `application/vnd.in-toto+json`, one `application/vnd.dsse.envelope.v1+json` layer
    /// holding the envelope): for an OCI artifact unit (`repo = "oci://…"`) the artifact's
    /// manifest; for a chart unit with `[sync.helm] repo_url = "oci://…"` the manifest of the
    /// applied version's tag, once its chart layer is checked to be the applied chart's (a tag
    /// moved since is a failed push, not a referrer of another manifest). It is pushed with the
    /// unit's registry credentials and the same transport rules as its fetch; a registry
    /// without the referrers API gets the `sha256-<hex>` tag of the distribution spec's
    /// fallback. A push that fails is a warning, and the sync stands: the ConfigMap and the
    /// journal stay the record. Git units and charts from an HTTP chart repository (no manifest
    /// to attach to) are not affected. Default: false.
    pub oci_referrers: Option<bool>,
}

/// `[render]`: the render tools and their limits.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRender {
    /// The kustomize binary (v5). Default: "kustomize" on PATH.
    #[schemars(with = "Option<String>")]
    pub kustomize: Option<Spanned<String>>,
    /// The helm binary (v3.19+ or v4). Default: "helm" on PATH.
    #[schemars(with = "Option<String>")]
    pub helm: Option<Spanned<String>>,
    /// The sops binary (v3), for [sync.decryption]. Default: "sops" on PATH.
    #[schemars(with = "Option<String>")]
    pub sops: Option<Spanned<String>>,
    /// One run of a tool is killed after this long, and the revision refused. Default: "60s".
    #[schemars(with = "Option<HumanDuration>")]
    pub timeout: Option<Spanned<HumanDuration>>,
    /// One render may write at most this much. Default: "64MiB".
    pub max_output_bytes: Option<ByteSize>,
    /// The files one render writes into its scratch directory may total at most this much.
    /// Default: "32MiB".
    pub max_tree_bytes: Option<ByteSize>,
    /// The Kubernetes version Helm charts are rendered for when no cluster is asked.
    /// Default: "v1.37.0".
    #[schemars(with = "Option<String>")]
    pub kube_version: Option<Spanned<String>>,
    /// API versions Helm is told exist besides the built-in ones when no cluster is asked.
    /// Default: none.
    #[schemars(with = "Option<Vec<String>>")]
    pub api_versions: Option<Vec<Spanned<String>>>,
    /// Chart repositories and registries gitward may fetch from besides each unit's own; each
    /// entry allows its path and below. Default: none.
    #[schemars(with = "Option<Vec<String>>")]
    pub chart_repositories: Option<Vec<Spanned<String>>>,
    /// The hosts ("host" or "host:port") that units with allow_remote_bases may fetch
    /// kustomize remote bases from. Default: none.
    #[schemars(with = "Option<Vec<String>>")]
    pub remote_base_hosts: Option<Vec<Spanned<String>>>,
    /// A PEM file of the certificates git trusts when it fetches remote bases. Default: the
    /// system's trust store.
    #[schemars(with = "Option<String>")]
    pub remote_base_ca_file: Option<Spanned<String>>,
    /// Run render tools in an OS sandbox (Landlock, namespaces). Default: "on".
    pub sandbox: Option<SandboxMode>,
    /// The most private writable memory one run of a tool may map. Default: "1GiB".
    pub max_memory: Option<ByteSize>,
    /// How old a chart repository's last good index answer may be to be used while the
    /// repository cannot be reached; "0s" never. Default: "24h".
    #[schemars(with = "Option<HumanDuration>")]
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

/// One `[[notify]]` table as written: a notifier and what it is told of.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotify {
    /// Required. Where notifications go.
    pub kind: NotifyKind,
    /// Required. The webhook URL, or the forge's API base (GitHub: "https://api.github.com").
    #[schemars(with = "String")]
    pub url: Spanned<String>,
    /// A file holding the API token; required for github, gitlab and gitea.
    #[schemars(with = "Option<String>")]
    pub token_file: Option<Spanned<String>>,
    /// Webhook only: a file holding the X-Gitward-Signature-256 HMAC key.
    #[schemars(with = "Option<String>")]
    pub secret_file: Option<Spanned<String>>,
    /// The units told of, by name. Default: every unit.
    #[schemars(with = "Option<Vec<String>>")]
    pub units: Option<Vec<Spanned<String>>>,
    /// The events told of. Default: ["failed", "degraded", "recovered"].
    pub on: Option<Vec<NotifyEvent>>,
    /// Forges: the repository ("owner/name") statuses are set on. Default: read from the
    /// unit's repo URL.
    #[schemars(with = "Option<String>")]
    pub repository: Option<Spanned<String>>,
}

/// One `[[preview]]` table as written: a forge repository whose pull requests are previewed.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPreview {
    /// Required. The forge: "github", "gitlab" or "gitea" (Forgejo speaks Gitea's API).
    pub forge: ForgeKind,
    /// The forge's API base, without a trailing "/". Default: "https://api.github.com" for
    /// github, "https://gitlab.com/api/v4" for gitlab; required for gitea
    /// ("https://gitea.host/api/v1").
    #[schemars(with = "Option<String>")]
    pub api_url: Option<Spanned<String>>,
    /// Required. The repository whose pull requests are previewed: "owner/name"; GitLab: the
    /// project's full path ("group/sub/name") or its numeric id.
    #[schemars(with = "String")]
    pub repository: Spanned<String>,
    /// A file holding the API token (read at each use, trimmed). Required unless a GitHub App
    /// (app_id, installation_id, private_key_file) is given instead.
    #[schemars(with = "Option<String>")]
    pub token_file: Option<Spanned<String>>,
    /// GitHub only: the App's id, to post as the App (with installation_id and
    /// private_key_file) instead of with a token_file.
    pub app_id: Option<u64>,
    /// GitHub only: the App installation's id on the repository's owner.
    pub installation_id: Option<u64>,
    /// GitHub only: a file holding the App's private key (PEM), which signs the JWT.
    #[schemars(with = "Option<String>")]
    pub private_key_file: Option<Spanned<String>>,
    /// Preview pull requests whose head is in a fork. Default: false.
    pub allow_forks: Option<bool>,
    /// How often the pull requests' heads are fetched when no webhook says a push or a pull
    /// request happened ("30s", "5m"). Default: "1m".
    #[schemars(with = "Option<HumanDuration>")]
    pub interval: Option<Spanned<HumanDuration>>,
    /// The units previewed, by name: each a [[sync]] unit, or one a [[sync_set]] could make.
    /// Default: every unit.
    #[schemars(with = "Option<Vec<String>>")]
    pub sync: Option<Vec<Spanned<String>>>,
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
