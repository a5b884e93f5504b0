//! The in-toto Statement v1 (<https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md>)
//! of one sync: its subject the unit's manifest set as applied, its predicate
//! ([`PREDICATE_TYPE`]) what was applied from where, by what, to which cluster, what changed
//! and how it ended, and the digest of the unit's previous envelope.

use serde::{Deserialize, Serialize};

/// The Statement's `_type`.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// The predicate type of gitward's attestation of an applied revision.
pub const PREDICATE_TYPE: &str = "https://gitward.dev/attestation/applied-revision/v1";

/// A Statement of [`PREDICATE_TYPE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    /// [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// The manifest set as applied: one subject, `applyset:<id>`.
    pub subject: Vec<Subject>,
    /// [`PREDICATE_TYPE`].
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// What the sync did.
    pub predicate: Predicate,
}

/// A subject: a name and its digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    /// `applyset:<ApplySet id>`.
    pub name: String,
    /// `sha256`: the digest of the render applied ([`super::members::render_digest`]), what
    /// `gitward preview` and `gitward diff` print for the revision.
    pub digest: Sha256Digest,
}

/// A digest by its one algorithm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sha256Digest {
    /// Lowercase hex.
    pub sha256: String,
}

/// What one sync did, as the predicate says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Predicate {
    /// The sync unit's name.
    pub unit: String,
    /// Where the manifests came from.
    pub source: Source,
    /// What made them into objects.
    pub renderer: Renderer,
    /// Where they were applied, and as whom.
    pub target: Target,
    /// What the sync changed.
    pub changes: Changes,
    /// The members as applied: how many, and the sha256 of their record
    /// ([`super::members`]), kept beside the envelopes; `gitward attest verify --config` reads
    /// it to compare the live objects with.
    pub members: MembersRecord,
    /// The unit's health when the sync finished (`healthy`, `degraded`, `progressing`, `failed`).
    pub health: String,
    /// When the sync started (RFC 3339).
    pub started_on: String,
    /// When it finished (RFC 3339).
    pub finished_on: String,
    /// The digest of this unit's previous envelope ([`super::dsse::digest`]); `null`
    /// for its first.
    pub previous: Option<Sha256Digest>,
}

/// The source of the manifests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// The repository URL, credentials redacted.
    pub repository: String,
    /// The ref followed.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The revision applied: a commit, a chart's `name@version@sha256:…`, an artifact's digest.
    pub commit: String,
    /// The unit's path in the repository.
    pub path: String,
    /// The signature checks `[sync.verify]` made of the revision before it was applied
    /// (`ssh`, `openpgp`, `cosign`); empty when the unit verifies nothing.
    pub verified_by: Vec<String>,
    /// Who signed the revision applied, as those checks found them when it was fetched: one
    /// signer, or two for a chart verified by cosign whose values come from a verified git
    /// commit. Empty when the unit verifies nothing (and in attestations made before gitward
    /// recorded it).
    #[serde(default)]
    pub signers: Vec<Signer>,
    /// The chart's or OCI artifact's content digest, where the revision names one.
    pub digest: Option<String>,
}

/// A signer of the revision applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signer {
    /// The check that verified the signature: `ssh` (a commit's or tag's, against
    /// `allowed_signers_file`), `openpgp` (against `openpgp_keys_file`), `cosign` (an OCI
    /// manifest's, against `cosign_public_key_file`).
    pub kind: String,
    /// The name the trusted keys give the signer: the allowed_signers entry's principals, the
    /// OpenPGP key's first user ID (`null` when it has none), the cosign public key's file.
    pub identity: Option<String>,
    /// The signing key's fingerprint: an SSH key's as `ssh-keygen -l` prints it
    /// (`SHA256:<base64>`), an OpenPGP primary key's (uppercase hex), a cosign key's
    /// `sha256:<hex>` of its SubjectPublicKeyInfo DER.
    pub fingerprint: String,
}

/// What rendered the manifests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Renderer {
    /// `gitward <version> (<commit>)`.
    pub gitward: String,
    /// The render tools gitward pins (`kustomize v…, helm v…, sops v…`).
    pub tools: String,
    /// The render sandbox's layers as `gitward status` prints them.
    pub sandbox: String,
}

/// Where the manifests were applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The cluster.
    pub cluster: ClusterId,
    /// The ServiceAccount the unit's writes impersonate (`namespace/name`), if any.
    pub service_account: Option<String>,
    /// The field manager of its applies.
    pub field_manager: String,
    /// The replica that applied (`gitward::cluster::agent::process_identity`).
    pub replica: String,
}

/// A cluster's identity: the kube-system Namespace's uid and the API server CA's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterId {
    /// `metadata.uid` of Namespace `kube-system`.
    pub kube_system_uid: String,
    /// sha256 hex of the API server CA certificate's DER, as the kubeconfig gives it; empty
    /// when it names none.
    pub ca_sha256: String,
}

/// What a sync changed, each object as `Kind/namespace/name`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Changes {
    /// Created or adopted.
    pub created: Vec<String>,
    /// Configured, or drift corrected.
    pub configured: Vec<String>,
    /// Pruned.
    pub pruned: Vec<String>,
    /// Why the prune was refused, if it was.
    pub refused_prunes: Vec<String>,
    /// Objects whose write failed.
    pub failed: Vec<String>,
}

impl Changes {
    /// Whether the sync created, configured or pruned anything: only then is it attested.
    pub fn applied_anything(&self) -> bool {
        !(self.created.is_empty() && self.configured.is_empty() && self.pruned.is_empty())
    }
}

/// The members record an attestation binds ([`super::members`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MembersRecord {
    /// How many members.
    pub count: usize,
    /// sha256 hex of the record's text ([`super::members::digest`]).
    pub sha256: String,
}

impl Statement {
    /// The Statement of `predicate` for the ApplySet `applyset_id`, the render applied
    /// digested as `render` ([`super::members::render_digest`]).
    pub fn new(applyset_id: &str, render: String, predicate: Predicate) -> Self {
        let digest = Sha256Digest { sha256: render };
        Self {
            statement_type: STATEMENT_TYPE.to_owned(),
            subject: vec![Subject { name: format!("applyset:{applyset_id}"), digest }],
            predicate_type: PREDICATE_TYPE.to_owned(),
            predicate,
        }
    }
}
