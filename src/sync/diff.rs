//! `gitward diff`: what a sync would change, without changing anything.
//!
//! Each desired object is sent as a server-side dry-run apply (`dryRun=All`) and its result
//! compared with the live object; the difference is a unified diff of YAML with Secret `data`
//! and `stringData` masked (DESIGN.md decision 10), and every value of an object built from
//! SOPS-decrypted content masked, whatever its kind ([`mask_decrypted`]): a decrypted value
//! lands in ConfigMaps, environment variables and custom resources as often as in Secrets. A
//! live value that the revision replaces with a decrypted one is registered in the mask set
//! ([`learn_replaced`]), so the printed diff and every message mask the old value as they mask
//! the new. gitward's own bookkeeping (the `part-of` label, the desired-hash annotation,
//! kubectl's last-applied configuration, the parent's ApplySet and record annotations, the
//! members generation label) is left out of both sides: it says nothing about what git asks for.
//! An object whose only change is there (adopted, labelled a member) gets a line naming the
//! keys instead, since a sync still writes it.
//! The output is headed `revision <applied> → <compared>` ([`DiffReport::render`]). Members a
//! sync would prune are listed, and those it would not: a Namespace or CRD whose cascade it
//! would refuse, with the refusal. What a sync decides before it applies — namespaces it
//! makes, the ownership check, the prune guard, the cascade check — is decided here the same
//! way ([`Engine::diff`]).
//! Like `kubectl diff`, this reads full objects: it is a tool for people, not the sync path.
//! Objects in `update` mode are dry-run with server-side apply too: for fields the manifest
//! declares the result is the same; fields `update` mode would leave alone may show as removed.

use std::collections::BTreeSet;

use serde_json::Value;
use similar::TextDiff;

mod normalize;
use normalize::bookkeeping_changes;
pub use normalize::{learn_replaced, mask_decrypted, normalize};
pub(crate) use normalize::{strip, to_yaml};

use crate::object::ObjectRef;
use crate::plan::Desired;
use crate::source::Revision;

/// One object that would change.
#[derive(Debug, Clone)]
pub struct ObjectDiff {
    /// The object.
    pub object: ObjectRef,
    /// Unified diff (`--- live`, `+++ merged`), or a note for objects that cannot be dry-run.
    pub diff: String,
    /// The object does not exist yet: a sync would create it.
    pub created: bool,
}

/// The result of a diff.
#[derive(Debug, Clone)]
pub struct DiffReport {
    /// The revision compared.
    pub revision: Revision,
    /// The revision the ApplySet parent records as last applied
    /// ([`crate::health::record::LAST_REVISION`]); `None` when nothing was applied yet.
    pub applied: Option<String>,
    /// Objects that would be created or changed.
    pub changed: Vec<ObjectDiff>,
    /// What a sync would prune, keep or release of the members that left git.
    pub prune: PrunePreview,
    /// Objects a sync would fail, with the reason: the API server rejected the dry run,
    /// another ApplySet owns the object, or its namespace does not exist and nothing makes it.
    pub failed: Vec<(ObjectRef, String)>,
    /// What a sync would not say in a change set but a person should know: objects that belong
    /// to an earlier ApplySet parent of this unit, whose other members would be orphaned.
    pub warnings: Vec<String>,
    /// The digest of the revision's render ([`crate::sync::sealed::render_digest`]), what
    /// `gitward preview` prints and an attestation's subject names; `None` until computed.
    pub render: Option<String>,
}

/// What a sync would do with the members that left git.
#[derive(Debug, Clone, Default)]
pub struct PrunePreview {
    /// Members that would be pruned.
    pub prunes: Vec<ObjectRef>,
    /// Members that left git but that a sync would not delete, with the refusal it would give:
    /// Namespaces and CRDs that would take other objects with them ([`crate::prune::cascade`]).
    pub not_pruned: Vec<(ObjectRef, String)>,
    /// The unit's namespace, when a sync would release it instead of pruning it
    /// (`create_namespace`, [`Engine::release_unit_namespace`]).
    pub released: Option<ObjectRef>,
    /// Why a sync would refuse to prune the members that left git (then
    /// [`PrunePreview::prunes`] is empty): the prune guard's reason, as the sync would log it.
    pub refused: Option<String>,
}

impl DiffReport {
    /// The report of `revision` against `applied` (the parent's last applied revision, if
    /// any), with nothing found yet.
    pub fn new(revision: Revision, applied: Option<String>) -> Self {
        Self {
            revision,
            applied,
            changed: Vec::new(),
            prune: PrunePreview::default(),
            failed: Vec::new(),
            warnings: Vec::new(),
            render: None,
        }
    }

    /// True when the cluster differs from the revision: a sync would change something, or
    /// members that left git stay because the prune would be refused.
    pub fn has_changes(&self) -> bool {
        !self.changed.is_empty()
            || !self.prune.prunes.is_empty()
            || !self.prune.not_pruned.is_empty()
            || self.prune.released.is_some()
            || self.prune.refused.is_some()
    }

    /// What `gitward diff` prints for one unit, unmasked (the caller masks): the head
    /// `revision <applied> → <compared>` (short forms, as `gitward status` prints them;
    /// `none` when nothing was applied), then ` (render sha256:<digest>)` when the render's
    /// digest is known, each object's unified diff, then a line per member a
    /// sync would prune (`prune <ref>`), not prune (`not pruned <ref>: <refusal>`) or release
    /// (`release <ref>: …`), and `prune refused: <reason>` when the prune guard refuses.
    pub fn render(&self) -> String {
        let applied = self.applied.as_deref().map_or_else(|| "none".to_string(), crate::source::short_revision);
        let mut out = format!("revision {applied} → {}", crate::source::short_revision(&self.revision.0));
        if let Some(render) = &self.render {
            out.push_str(&format!(" (render sha256:{render})"));
        }
        out.push('\n');
        for d in &self.changed {
            out.push_str(&d.diff);
        }
        for p in &self.prune.prunes {
            out.push_str(&format!("prune {p}\n"));
        }
        for (object, reason) in &self.prune.not_pruned {
            out.push_str(&format!("not pruned {object}: {reason}\n"));
        }
        if let Some(object) = &self.prune.released {
            out.push_str(&format!(
                "release {object}: create_namespace keeps it; no longer a member of this unit, never deleted\n"
            ));
        }
        if let Some(reason) = &self.prune.refused {
            out.push_str(&format!("prune refused: {reason}\n"));
        }
        out
    }
}

/// Which namespaces the objects of a diff live in: those missing now, and of those the ones a
/// sync would make first (a Namespace manifest of the revision, or `create_namespace`).
#[derive(Debug, Default)]
pub(super) struct Namespaces {
    /// Namespaces the objects name that do not exist now.
    pub(super) missing: BTreeSet<String>,
    /// Of those, the ones a sync would make first.
    pub(super) made: BTreeSet<String>,
}

impl Namespaces {
    /// Why `object` cannot be dry-run: its namespace does not exist; `Ok(true)` when a sync
    /// would make that namespace first (the object is shown as created), `Err` when nothing
    /// would (a sync fails it).
    pub(super) fn missing(&self, object: &ObjectRef) -> std::result::Result<bool, String> {
        match object.namespace.as_deref() {
            Some(ns) if self.made.contains(ns) => Ok(true),
            Some(ns) if self.missing.contains(ns) => {
                Err(format!("namespace {ns} does not exist, and neither this revision nor create_namespace creates it"))
            }
            _ => Ok(false),
        }
    }
}

/// What a diff read of one desired object's live state.
pub(super) enum LiveRead {
    /// The live object (`None`: it does not exist).
    Read(Option<Value>),
    /// Its namespace does not exist yet and a sync would make it first.
    NamespaceMade,
    /// It cannot be read or dry-run, and why.
    Failed(String),
}

/// The diff of `d` between `live` (`None`: it does not exist) and `merged` (its dry run of the
/// body a sync would send, so a field an ignore rule leaves to another writer shows no change
/// and one it would reset shows as one), or `None` when they agree: a unified diff of the
/// normalised YAML (decrypted values masked, a changed one shown as `*** (changed)`), or one
/// line naming gitward's bookkeeping when only that changes (a sync still writes it).
///
/// `status` is compared only when git sets it: otherwise it is a controller's, which may write
/// it between the read of `live` and the dry run (as Flux's `ssa` diff drops it).
pub(super) fn compare(d: &Desired, mut live: Option<Value>, mut merged: Value) -> Option<ObjectDiff> {
    let body = d.body().to_value();
    if d.decrypted
        && let Some(live) = &live
    {
        learn_replaced(&body, live);
    }
    if body.get("status").is_none() {
        for v in live.iter_mut().chain(std::iter::once(&mut merged)) {
            if let Some(map) = v.as_object_mut() {
                map.remove("status");
            }
        }
    }
    let bookkeeping = live.as_ref().map(|l| bookkeeping_changes(l, &merged)).unwrap_or_default();
    let (before, after) = match d.decrypted {
        false => (live.clone().map(|l| normalize(l, None)), normalize(merged, live.as_ref())),
        true => {
            // Compared before masking, so a changed value shows as `*** (changed)`.
            let live = live.clone().map(strip);
            let after = mask_decrypted(strip(merged), live.as_ref());
            (live.map(|l| mask_decrypted(l, None)), after)
        }
    };
    let before = before.map(|b| to_yaml(&b)).unwrap_or_default();
    let after = to_yaml(&after);
    if before != after {
        let diff = unified(&d.object, &before, &after);
        Some(ObjectDiff { object: d.object.clone(), diff, created: live.is_none() })
    } else if !bookkeeping.is_empty() {
        // A sync still writes it (labels it a member, records its hash): a change.
        let diff = format!("{}: only gitward's bookkeeping changes ({})\n", d.object, bookkeeping.join(", "));
        Some(ObjectDiff { object: d.object.clone(), diff, created: false })
    } else {
        None
    }
}

/// The diff of an object that would be created whole: every line added.
pub(super) fn created(object: &ObjectRef, body: &Value, decrypted: bool) -> ObjectDiff {
    let body = normalize(body.clone(), None);
    let after = to_yaml(&if decrypted { mask_decrypted(body, None) } else { body });
    ObjectDiff { object: object.clone(), diff: unified(object, "", &after), created: true }
}

/// A unified diff of the YAML before and after, headed `live/<ref>` and `merged/<ref>`.
pub(super) fn unified(object: &ObjectRef, before: &str, after: &str) -> String {
    let name = object.to_string();
    TextDiff::from_lines(before, after)
        .unified_diff()
        .header(&format!("live/{name}"), &format!("merged/{name}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_is_headed_by_the_applied_revision_and_the_compared_one() {
        let mut report = DiffReport::new(Revision("0123456789abcdef0123456789abcdef01234567".into()), None);
        assert_eq!(report.render(), "revision none → 0123456\n");
        report.applied = Some("fedcba9876543210fedcba9876543210fedcba98".into());
        let ns = crate::sync::namespaces::namespace_ref("shop");
        report.prune.not_pruned.push((ns.clone(), "not deleted: it holds 1 other object (ConfigMap/shop/x)".into()));
        assert_eq!(
            report.render(),
            "revision fedcba9 → 0123456\nnot pruned Namespace/shop: not deleted: it holds 1 other object \
             (ConfigMap/shop/x)\n"
        );
        assert!(report.has_changes());
    }

    #[test]
    fn status_is_compared_only_when_git_sets_it() {
        let web = |status: serde_json::Value| {
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "a"}, "spec": {"replicas": 3}, "status": status})
        };
        let (before, after) =
            (web(serde_json::json!({"readyReplicas": 1})), web(serde_json::json!({"readyReplicas": 3})));
        let source = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 3}});
        let d = Desired::of_source("apps/v1", "Deployment", Some("a"), "web", source.clone());
        assert!(compare(&d, Some(before.clone()), after.clone()).is_none(), "a controller's status write");
        let mut with_status = source;
        with_status["status"] = serde_json::json!({"readyReplicas": 3});
        let d = Desired::of_source("apps/v1", "Deployment", Some("a"), "web", with_status);
        let diff = compare(&d, Some(before), after).expect("git sets status").diff;
        assert!(diff.contains("-  readyReplicas: 1") && diff.contains("+  readyReplicas: 3"), "{diff}");
    }
}
