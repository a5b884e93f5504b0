//! `[[sync]]` as written: the unit table and its sub-tables (`git`, `inventory`, `helm`,
//! `decryption`, `verify`, `substitute`, `[[sync.ignore]]`) and `depends_on`. Each field's doc
//! comment is its `description` in the JSON Schema (module `schema`), taken from `config.toml`.

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::super::{ApplyMode, InventoryKind, RenderMode};
use super::{ByteSize, HumanDuration};

/// One `[[sync]]` table: a sync unit, a (repository, ref, path) kept equal to a set of objects.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawSyncUnit {
    /// Required. Unique; lowercase letters, digits and "-", at most 63 characters.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// The repository: an https://, ssh://, git:// or file:// URL, an scp-like user@host:path,
    /// or a local path. Required unless the unit takes a chart from a chart repository.
    #[schemars(with = "Option<String>")]
    pub repo: Option<Spanned<String>>,
    /// The cluster to apply to: a [[cluster]] name. Default: the only cluster; required when
    /// the file declares several.
    #[schemars(with = "Option<String>")]
    pub cluster: Option<Spanned<String>>,
    /// The branch, tag or commit SHA to follow. Default: "main".
    #[serde(rename = "ref")]
    #[schemars(with = "Option<String>")]
    pub reference: Option<Spanned<String>>,
    /// The directory inside the repository to apply; no "..", no leading "/". Default: ""
    /// (the root).
    #[schemars(with = "Option<String>")]
    pub path: Option<Spanned<String>>,
    /// The namespace for namespaced objects that name none. Default: "default".
    #[schemars(with = "Option<String>")]
    pub namespace: Option<Spanned<String>>,
    /// How desired objects are written. Default: "server-side-apply".
    pub apply_mode: Option<ApplyMode>,
    /// Delete objects that were removed from git (members only). Default: true.
    pub prune: Option<bool>,
    /// The field manager server-side apply records ownership under. Default: "gitward".
    #[schemars(with = "Option<String>")]
    pub field_manager: Option<Spanned<String>>,
    /// Take over fields that other managers own, so git wins (server-side apply force=true).
    /// Default: true.
    pub force_conflicts: Option<bool>,
    /// Field managers whose fields are merged into gitward's own at a server-side apply.
    /// Default: ["kubectl-client-side-apply", "before-first-apply"].
    #[schemars(with = "Option<Vec<String>>")]
    pub takeover_managers: Option<Vec<Spanned<String>>>,
    /// Delete and recreate an object when an immutable field changed (never a
    /// PersistentVolumeClaim). Default: false.
    pub recreate_on_immutable: Option<bool>,
    /// Refuse a prune that would delete more than this fraction of the unit's objects; 0.0 to
    /// 1.0. Default: 0.5.
    #[schemars(with = "Option<f64>", range(min = 0.0, max = 1.0))]
    pub max_prune_fraction: Option<Spanned<f64>>,
    /// Permit a prune that deletes every object of the unit. Default: false.
    pub allow_prune_all: Option<bool>,
    /// Files larger than this are not read. Default: "4MiB".
    pub max_file_bytes: Option<ByteSize>,
    /// After an apply, wait this long for what the sync changed to become healthy; "0s"
    /// disables the wait. Default: "5m".
    pub health_timeout: Option<HumanDuration>,
    /// The unit's inventory: the ApplySet parent object that lists what it manages. No two
    /// units may share one.
    #[schemars(with = "Option<RawInventory>")]
    pub inventory: Option<Spanned<RawInventory>>,
    /// Credentials for the repository, files only; every key defaults to none.
    #[serde(default)]
    pub git: RawGit,
    /// How the path becomes manifests. Default: "auto" (kustomize for a kustomization, Helm
    /// for a Chart.yaml, else plain).
    pub render: Option<RenderMode>,
    /// Let kustomize fetch remote bases from [render] remote_base_hosts. Default: false.
    pub allow_remote_bases: Option<bool>,
    /// Create the unit's namespace if it is missing (shared, never pruned). Default: false.
    pub create_namespace: Option<bool>,
    /// Hold the unit still: the daemon applies, prunes and heals nothing of it. Default: false.
    pub suspend: Option<bool>,
    /// Units (by name) or ApplySets (by id) whose objects this unit may take over; while any
    /// is named, the unit prunes nothing. Default: [].
    #[schemars(with = "Option<Vec<String>>")]
    pub adopt_from: Option<Vec<Spanned<String>>>,
    /// The ServiceAccount of the unit's namespace that every write is sent as (impersonated);
    /// "" writes as gitward itself. Default: [daemon] default_service_account, else none.
    #[schemars(with = "Option<String>")]
    pub service_account: Option<Spanned<String>>,
    /// How a chart is templated (helm template), or fetched from a chart repository.
    #[serde(default)]
    pub helm: RawHelm,
    /// SOPS decryption for this unit; without it a SOPS-encrypted file refuses the revision.
    pub decryption: Option<RawDecryption>,
    /// Signed revisions only: the revision must carry a valid signature by a key in these
    /// files, or it is refused.
    #[schemars(with = "Option<RawVerify>")]
    pub verify: Option<Spanned<RawVerify>>,
    /// Fields gitward leaves to another writer (an HPA's replicas, ...). Any number.
    #[serde(default)]
    #[schemars(with = "Vec<RawIgnore>")]
    pub ignore: Vec<Spanned<RawIgnore>>,
    /// Post-build variable substitution of ${var} in every object of the unit.
    pub substitute: Option<RawSubstitute>,
    /// Units of this file this unit syncs after: a name, or { unit, ready_expr }. Default: [].
    #[schemars(with = "Option<Vec<RawDependency>>")]
    pub depends_on: Option<Spanned<Vec<Spanned<RawDependency>>>>,
}

/// One `[[sync.ignore]]` table: fields gitward leaves to another writer.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawIgnore {
    /// Required: the kind whose fields are ignored.
    #[schemars(with = "Option<String>")]
    pub kind: Option<Spanned<String>>,
    /// Only objects of this API group ("" is the core group).
    #[schemars(with = "Option<String>")]
    pub group: Option<Spanned<String>>,
    /// Only the object of this name.
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// Only objects in this namespace.
    #[schemars(with = "Option<String>")]
    pub namespace: Option<Spanned<String>>,
    /// Only objects whose manifest carries these labels.
    #[schemars(with = "Option<RawLabelSelector>")]
    pub label_selector: Option<Spanned<RawLabelSelector>>,
    /// JSON pointers (RFC 6901) of the ignored fields; "~1" writes a "/" inside a key.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub paths: Vec<Spanned<String>>,
    /// Field managers whose fields in the live object are left out.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub managers: Vec<Spanned<String>>,
}

/// `label_selector` of `[[sync.ignore]]`: Kubernetes' `LabelSelector` in snake case.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawLabelSelector {
    /// Labels the manifest must carry, name to value.
    #[serde(default)]
    pub match_labels: std::collections::BTreeMap<String, String>,
    /// Requirements on labels: { key, operator, values }.
    #[serde(default)]
    pub match_expressions: Vec<RawRequirement>,
}

/// One of `match_expressions`: Kubernetes' `LabelSelectorRequirement`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawRequirement {
    /// The label's name.
    pub key: String,
    /// "In", "NotIn", "Exists" or "DoesNotExist".
    pub operator: String,
    /// The values for "In" and "NotIn".
    pub values: Option<Vec<String>>,
}

/// `[sync.substitute]`: Flux's postBuild.substitute and substituteFrom.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawSubstitute {
    /// Inline variables, name to value; they win over every `from` object.
    #[schemars(with = "Option<std::collections::BTreeMap<String, String>>")]
    pub vars: Option<std::collections::BTreeMap<String, Spanned<String>>>,
    /// ConfigMaps and Secrets ("ConfigMap/<namespace>/<name>") whose data keys are variables,
    /// a later one winning.
    #[schemars(with = "Option<Vec<String>>")]
    pub from: Option<Vec<Spanned<String>>>,
}

/// `[sync.helm]`: how a chart is templated, and where it comes from when not from git.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawHelm {
    /// The release name. Default: the unit's name.
    #[schemars(with = "Option<String>")]
    pub release: Option<Spanned<String>>,
    /// Values files, repository paths, applied in order. Default: none (the chart's
    /// values.yaml).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub values_files: Vec<Spanned<String>>,
    /// Inline values ([sync.helm.values]), applied last. Default: none.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub values: Option<toml::Table>,
    /// A chart repository: https:// or http:// (its index.yaml), or oci://host/path.
    #[schemars(with = "Option<String>")]
    pub repo_url: Option<Spanned<String>>,
    /// The chart's name in repo_url.
    #[schemars(with = "Option<String>")]
    pub chart: Option<Spanned<String>>,
    /// Helm's constraint syntax (">=1.19.0 <1.20.0", "~1.19", "^1"). Default: the newest
    /// release.
    #[schemars(with = "Option<String>")]
    pub version: Option<Spanned<String>>,
    /// The user name for HTTP Basic, with password_file.
    #[schemars(with = "Option<String>")]
    pub username: Option<Spanned<String>>,
    /// A file holding the password for HTTP Basic.
    #[schemars(with = "Option<String>")]
    pub password_file: Option<Spanned<String>>,
    /// Extra trusted CA certificates (PEM) for the repository.
    #[schemars(with = "Option<String>")]
    pub ca_file: Option<Spanned<String>>,
    /// oci:// only: a Docker config.json whose auths entry for the registry host is used.
    #[schemars(with = "Option<String>")]
    pub docker_config_file: Option<Spanned<String>>,
}

/// `[sync.decryption]`: SOPS decryption with an age key.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawDecryption {
    /// Required. The age identity file that sops decrypts with.
    #[schemars(with = "String")]
    pub age_key_file: Spanned<String>,
}

/// `[sync.verify]`: the keys a revision must be signed with.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawVerify {
    /// SSH signers, git's gpg.ssh.allowedSignersFile format.
    #[schemars(with = "Option<String>")]
    pub allowed_signers_file: Option<Spanned<String>>,
    /// OpenPGP public keys, ASCII-armored.
    #[schemars(with = "Option<String>")]
    pub openpgp_keys_file: Option<Spanned<String>>,
    /// The cosign public key (ECDSA P-256) an OCI artifact's or chart's manifest must be
    /// signed by.
    #[schemars(with = "Option<String>")]
    pub cosign_public_key_file: Option<Spanned<String>>,
}

/// `[sync.inventory]`: the unit's ApplySet parent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawInventory {
    /// The parent's kind. Default: "Secret".
    pub kind: Option<InventoryKind>,
    /// The parent's namespace. Default: the unit's namespace.
    #[schemars(with = "Option<String>")]
    pub namespace: Option<Spanned<String>>,
    /// The parent's name. Default: "gitward-<unit name>".
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// The largest members record kept in the parent, and the largest piece of a longer one;
    /// 1KiB..=768KiB. Default: "768KiB".
    #[schemars(with = "Option<ByteSize>")]
    pub record_chunk_bytes: Option<Spanned<ByteSize>>,
}

/// `[sync.git]`: credentials for the repository, files only.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawGit {
    /// A private key for ssh:// and scp-like remotes.
    #[schemars(with = "Option<String>")]
    pub ssh_key_file: Option<Spanned<String>>,
    /// The known_hosts file that ssh host keys are checked against.
    #[schemars(with = "Option<String>")]
    pub known_hosts_file: Option<Spanned<String>>,
    /// A file holding a token or password for https:// remotes.
    #[schemars(with = "Option<String>")]
    pub token_file: Option<Spanned<String>>,
    /// The user name sent with the token or key.
    #[schemars(with = "Option<String>")]
    pub username: Option<Spanned<String>>,
}

/// One entry of `depends_on` as the file writes it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(in crate::config) enum RawDependency {
    /// `"base"`: the unit's name.
    Name(String),
    /// `{ unit = "base", ready_expr = "…" }`.
    Table(RawDependencyTable),
}

/// `{ unit = "…", ready_expr = "…" }` in `depends_on`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(in crate::config) struct RawDependencyTable {
    /// The unit's name.
    pub unit: String,
    /// A CEL expression over the unit's recorded `status` that must be true. Default: synced,
    /// applied its current revision and healthy.
    pub ready_expr: Option<String>,
}
