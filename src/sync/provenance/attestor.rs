//! The attestor, a part of the engine: after a sync that created, configured or pruned
//! anything, it makes the Statement of what was applied, signs it, keeps it in the unit's
//! ConfigMap (written through the sync's seam, by gitward's own fenced client) and appends it
//! to the unit's journal under the state directory. It owns the key, the chain's last link and
//! the cluster's identity; nothing else touches them.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use super::dsse::{self, PAYLOAD_TYPE};
use super::kept::{self, Kept};
use super::key::SigningKey;
use super::members::{self, Member};
use super::statement::{
    Changes, ClusterId, MembersRecord, Predicate, Renderer, Sha256Digest, Signer, Source, Statement, Target,
};
use crate::changeset::{Action, ChangeSet};
use crate::cluster::cache::MetadataCache;
use crate::cluster::inventory::Inventory;
use crate::config::{ClusterConfig, ProvenanceKey, SyncUnit};
use crate::manifest::HashKey;
use crate::plan::Desired;
use crate::sync::Report;
use crate::sync::sealed;
use crate::sync::state::ClusterView;

/// What a concluded sync hands the attestor.
pub(in crate::sync) struct Concluded<'a> {
    /// The sync's report: revision, change set, duration.
    pub(in crate::sync) report: &'a Report,
    /// Its health at the finish (`healthy`, `degraded`, …).
    pub(in crate::sync) health: String,
    /// The desired objects of the revision, as applied.
    pub(in crate::sync) desired: &'a [Desired],
    /// The members' metadata after the sync (gitward's apply entries).
    pub(in crate::sync) cache: &'a MetadataCache,
}

/// Signs and keeps a unit's attestations ([`super`]).
pub(in crate::sync) struct Attestor {
    /// `[provenance] key_file`'s or `key_secret`'s key.
    key: Arc<SigningKey>,
    /// How many the ConfigMap keeps.
    keep: usize,
    /// The unit's journal: `<state_dir>/attestations/<unit>.jsonl`.
    journal: PathBuf,
    /// The renderer as every Statement names it.
    renderer: Arc<Renderer>,
    /// What the attestations name of the cluster, shared by every unit's attestor.
    cluster: Arc<super::shared::Facts>,
    /// What the ConfigMap holds as last read or written; `None` until read (and after a
    /// failed write).
    kept: Option<Kept>,
    /// The install's key, which seals secret values before they are digested
    /// ([`crate::sync::sealed`]).
    install_key: HashKey,
    /// `[provenance] oci_referrers` of an OCI artifact or OCI chart unit: where each envelope
    /// is pushed.
    referrers: Option<super::referrer::Referrers>,
}

impl Attestor {
    /// The attestor of `unit` when its config has `[provenance]`, its key read (a `key_secret`
    /// through `client`, gitward's own) and the CA of `cluster`'s kubeconfig fingerprinted.
    ///
    /// Errors: the key file or Secret cannot be read as a key; the kubeconfig or the install's
    /// key cannot be read.
    pub(in crate::sync) async fn new(
        unit: &SyncUnit,
        cluster: &ClusterConfig,
        state_dir: &Path,
        client: &kube::Client,
    ) -> crate::sync::Result<Option<Self>> {
        let Some(provenance) = &unit.provenance else { return Ok(None) };
        let key = signing_key(&provenance.key, client).await.map_err(crate::sync::Error::Provenance)?;
        let install_key = crate::sync::substitute::install_key(state_dir)?;
        let facts = super::shared::facts(cluster).await?;
        let commit = option_env!("VERGEN_GIT_SHA").unwrap_or("unknown");
        let renderer = Renderer {
            gitward: format!("{} ({commit})", env!("CARGO_PKG_VERSION")),
            tools: env!("GITWARD_PINNED_TOOLS").to_owned(),
            sandbox: crate::render::sandbox::state(unit.render_tools.sandbox),
        };
        Ok(Some(Self {
            key: super::shared::key(key),
            keep: provenance.keep,
            journal: state_dir.join("attestations").join(format!("{}.jsonl", unit.name)),
            renderer: super::shared::renderer(renderer),
            cluster: facts,
            kept: None,
            install_key,
            referrers: super::referrer::Referrers::new(unit),
        }))
    }

    /// Attests `sync` of `unit` when it created, configured or pruned anything: the envelope
    /// chained to the unit's last, kept in its ConfigMap (the oldest past `keep` dropped) and
    /// appended to its journal. Returns whether it attested.
    ///
    /// Errors: the cluster's identity or the ConfigMap cannot be read, or the ConfigMap
    /// written; the journal's own failure (a full disk) too, once the ConfigMap holds it.
    pub(in crate::sync) async fn attest(
        &mut self,
        view: &ClusterView,
        unit: &Arc<SyncUnit>,
        inventory: &Inventory,
        sync: Concluded<'_>,
    ) -> crate::sync::Result<bool> {
        let changes = changes(&sync.report.changes);
        if !changes.applied_anything() {
            return Ok(false);
        }
        let cluster = self.cluster.id(view.client()).await?;
        let members = members(sync.desired, sync.cache, &self.install_key);
        let record = members::text(&members);
        let predicate = Predicate {
            unit: unit.name.clone(),
            source: source(unit, sync.report),
            renderer: (*self.renderer).clone(),
            target: target(unit, cluster),
            changes,
            members: MembersRecord { count: members.len(), sha256: members::digest(&record) },
            health: sync.health,
            started_on: rfc3339(SystemTime::now() - sync.report.took.apply),
            finished_on: rfc3339(SystemTime::now()),
            previous: None,
        };
        let statement = Statement::new(&inventory.id, members::render_digest(&members), predicate);
        let first = first_sync(sync.report);
        let line = self.keep(view, unit, inventory, (statement, kept::gzip(&record)), first).await?;
        append(&self.journal, &line)
            .map_err(|e| crate::sync::Error::Provenance(format!("append to {}: {e}", self.journal.display())))?;
        if let Some(referrers) = &self.referrers {
            referrers.push(&sync.report.revision.0, &line).await;
        }
        Ok(true)
    }

    /// Chains `statement` to the unit's last attestation, signs it and keeps it, with the
    /// gzipped members record, in the unit's ConfigMap; returns the envelope's line. What the
    /// ConfigMap holds is read first unless the attestor knows it, or `first` (the unit's first
    /// sync: nothing to read yet); a write that meets another (409: it exists, or moved since)
    /// reads it and is signed and sent once more.
    ///
    /// Errors: the ConfigMap cannot be read or written.
    async fn keep(
        &mut self,
        view: &ClusterView,
        unit: &SyncUnit,
        inventory: &Inventory,
        (mut statement, gzipped): (Statement, Option<Vec<u8>>),
        first: bool,
    ) -> crate::sync::Result<String> {
        let read = || async {
            let read = kept::read(view.client(), inventory).await.map_err(cluster_error(inventory))?;
            Ok::<_, crate::sync::Error>(read.as_ref().map(Kept::of).unwrap_or_default())
        };
        let mut kept = match self.kept.take() {
            Some(kept) => kept,
            None if first => Kept::default(),
            None => read().await?,
        };
        for retry in [true, false] {
            statement.predicate.previous = kept.last.take().map(|sha256| Sha256Digest { sha256 });
            let payload = serde_json::to_vec(&statement).expect("a statement serializes");
            let envelope = dsse::sign(PAYLOAD_TYPE, &payload, &self.key);
            let line = dsse::to_line(&envelope);
            let (n, mut dropped) = kept.add(line.len(), self.keep);
            if gzipped.is_none() {
                dropped.push(kept::MEMBERS.to_owned());
            }
            let body = kept::body(inventory, &unit.name, (n, &line), gzipped.clone(), kept.resource_version.take());
            match view.writes().keep_attestations(&body, &dropped, &unit.field_manager).await {
                Ok(written) => {
                    kept.resource_version = written.metadata.resource_version;
                    kept.last = Some(dsse::digest(&envelope));
                    self.kept = Some(kept);
                    return Ok(line);
                }
                Err(kube::Error::Api(e)) if retry && e.code == 409 => kept = read().await?,
                Err(e) => return Err(cluster_error(inventory)(e)),
            }
        }
        unreachable!("the second attempt returns")
    }
}

/// Whether `report` is of the unit's first sync in the cluster: every object it wrote was
/// created (none configured, unchanged or pruned), so its attestations' ConfigMap is not
/// there yet.
fn first_sync(report: &Report) -> bool {
    report
        .changes
        .entries
        .iter()
        .all(|e| matches!(e.action, Action::Created | Action::Adopted | Action::Failed | Action::Skipped))
}

/// The key `key` names, read now; the error names the file or Secret.
async fn signing_key(key: &ProvenanceKey, client: &kube::Client) -> Result<SigningKey, String> {
    let (namespace, name) = match key {
        ProvenanceKey::File(path) => return SigningKey::read(path).map_err(|e| format!("key_file {e}")),
        ProvenanceKey::Secret { namespace, name } => (namespace, name),
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get_opt(name).await.map_err(|e| format!("{key}: {}", crate::cluster::api_message(&e)))?;
    let Some(secret) = secret else { return Err(format!("{key}: not found")) };
    let mut data = secret.data.unwrap_or_default();
    let Some(pem) = data.remove(ProvenanceKey::SECRET_KEY) else {
        let held: Vec<&str> = data.keys().map(String::as_str).collect();
        let held = if held.is_empty() { "none".to_owned() } else { held.join(", ") };
        return Err(format!("{key} has no data key {} (it holds: {held})", ProvenanceKey::SECRET_KEY));
    };
    let pem = String::from_utf8(pem.0).map_err(|_| format!("{key} {}: not a PEM text", ProvenanceKey::SECRET_KEY))?;
    SigningKey::from_pem(&pem).map_err(|e| format!("{key} {}: {e}", ProvenanceKey::SECRET_KEY))
}

/// The error of a read or write of `inventory`'s attestations.
fn cluster_error(inventory: &Inventory) -> impl Fn(kube::Error) -> crate::sync::Error + '_ {
    move |e| {
        let object = format!("ConfigMap/{}/{}", kept::namespace(inventory), kept::name(inventory));
        crate::sync::Error::Provenance(format!("{object}: {}", crate::cluster::api_message(&e)))
    }
}

/// Appends `line` to the journal at `path`, made with its directory if missing.
fn append(path: &Path, line: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(format!("{line}\n").as_bytes())?;
    file.sync_data()
}

/// What `changes` created, configured and pruned, the prune refused and what failed.
pub(super) fn changes(changes: &ChangeSet) -> Changes {
    let mut out = Changes::default();
    for entry in &changes.entries {
        let object = entry.object.to_string();
        match entry.action {
            Action::Created | Action::Adopted => out.created.push(object),
            Action::Configured | Action::DriftCorrected => out.configured.push(object),
            Action::Pruned => out.pruned.push(object),
            Action::Failed | Action::Conflict => out.failed.push(object),
            Action::Unchanged | Action::Skipped => {}
        }
    }
    out.refused_prunes.extend(changes.prune_refused.clone());
    out
}

/// The members as applied: each desired object sealed and digested under `key`
/// ([`crate::sync::sealed`]), with gitward's apply entry after the sync.
fn members(desired: &[Desired], cache: &MetadataCache, key: &HashKey) -> Vec<Member> {
    let live = cache.snapshot();
    desired
        .iter()
        .map(|d| Member {
            group: d.resource.group.clone(),
            version: d.resource.version.clone(),
            plural: d.resource.plural.clone(),
            kind: d.resource.kind.clone(),
            namespace: d.object.namespace.as_ref().map(|n| n.as_str().to_owned()),
            name: d.object.name.as_str().to_owned(),
            digest: sealed::object_digest(&sealed::seal(d.body().to_value(), d.decrypted, key)),
            applied: live.get(&d.object).and_then(|m| m.own_apply).map(|f| format!("{f:016x}")),
        })
        .collect()
}

/// The source of the revision `report` applied, and who signed it.
fn source(unit: &SyncUnit, report: &Report) -> Source {
    let revision = report.revision.0.as_str();
    let verify = unit.verify.as_ref();
    let verified_by = [
        ("ssh", verify.is_some_and(|v| v.allowed_signers_file.is_some())),
        ("openpgp", verify.is_some_and(|v| v.openpgp_keys_file.is_some())),
        ("cosign", verify.is_some_and(|v| v.cosign_public_key_file.is_some())),
    ];
    Source {
        repository: crate::telemetry::url::redact(&unit.repo),
        reference: unit.reference.clone(),
        commit: revision.to_owned(),
        path: unit.path.display().to_owned(),
        verified_by: verified_by.iter().filter(|(_, on)| *on).map(|(k, _)| (*k).to_owned()).collect(),
        signers: report.signers.iter().map(signer).collect(),
        digest: revision.rsplit_once("@sha256:").map(|(_, hex)| format!("sha256:{hex}")),
    }
}

/// `signer` as the predicate names it.
fn signer(signer: &crate::source::Signer) -> Signer {
    Signer {
        kind: signer.kind.as_str().to_owned(),
        identity: signer.identity.clone(),
        fingerprint: signer.fingerprint.clone(),
    }
}

/// Where `unit` applies, and as whom.
fn target(unit: &SyncUnit, cluster: ClusterId) -> Target {
    Target {
        cluster,
        service_account: unit.service_account.as_ref().map(|sa| format!("{}/{sa}", unit.namespace)),
        field_manager: unit.field_manager.clone(),
        replica: crate::cluster::agent::process_identity(),
    }
}

/// `time` as RFC 3339 in UTC.
fn rfc3339(time: SystemTime) -> String {
    jiff::Timestamp::try_from(time).map(|t| t.to_string()).unwrap_or_default()
}
