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

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use similar::TextDiff;

mod normalize;
use normalize::{bookkeeping_changes, strip, to_yaml};
pub use normalize::{learn_replaced, mask_decrypted, normalize};

use super::desired::Resolution;
use super::{Engine, Result};
use crate::apply::server_side;
use crate::cluster::api_message;
use crate::cluster::inventory::{Contents, PART_OF};
use crate::cluster::owner::{self, Verdict};
use crate::health::record::LAST_REVISION;
use crate::object::ObjectRef;
use crate::plan;
use crate::plan::Desired;
use crate::source::Revision;

/// One object that would change.
#[derive(Debug, Clone)]
pub struct ObjectDiff {
    /// The object.
    pub object: ObjectRef,
    /// Unified diff (`--- live`, `+++ merged`), or a note for objects that cannot be dry-run.
    pub diff: String,
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
    /// `none` when nothing was applied), each object's unified diff, then a line per member a
    /// sync would prune (`prune <ref>`), not prune (`not pruned <ref>: <refusal>`) or release
    /// (`release <ref>: …`), and `prune refused: <reason>` when the prune guard refuses.
    pub fn render(&self) -> String {
        let applied = self.applied.as_deref().map_or_else(|| "none".to_string(), crate::source::short_revision);
        let mut out = format!("revision {applied} → {}\n", crate::source::short_revision(&self.revision.0));
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
struct Namespaces {
    missing: BTreeSet<String>,
    made: BTreeSet<String>,
}

impl Namespaces {
    /// Why `object` cannot be dry-run: its namespace does not exist; `Ok(true)` when a sync
    /// would make that namespace first (the object is shown as created), `Err` when nothing
    /// would (a sync fails it).
    fn missing(&self, object: &ObjectRef) -> std::result::Result<bool, String> {
        match object.namespace.as_deref() {
            Some(ns) if self.made.contains(ns) => Ok(true),
            Some(ns) if self.missing.contains(ns) => {
                Err(format!("namespace {ns} does not exist, and neither this revision nor create_namespace creates it"))
            }
            _ => Ok(false),
        }
    }
}

impl Engine {
    /// Computes what [`Engine::sync`] would do at the current revision, by dry run, and what
    /// it would refuse, so that `gitward diff` agrees with `gitward sync`:
    ///
    /// - objects of a namespace that does not exist yet, and that the revision (a Namespace
    ///   manifest) or `create_namespace` would make, are shown as created, whole, without a
    ///   dry run (the API server would refuse one: the namespace is not there);
    /// - objects another ApplySet owns are not dry-run but reported failed with the ownership
    ///   check's message ([`crate::cluster::owner`]), unless `adopt_from` takes them;
    /// - prunes are listed only when a sync would do them: the prune guard (empty revision,
    ///   `max_prune_fraction`, a revision read in part, a unit that adopts from this one) sets
    ///   [`DiffReport::prune_refused`] instead; a unit with `prune = false` lists none;
    /// - a Namespace or CRD whose prune would take other objects with it is listed in
    ///   [`DiffReport::not_pruned`] with the sync's refusal ([`crate::prune::cascade`]); the
    ///   unit's own namespace under `create_namespace` is listed as released, not pruned;
    /// - an ApplySet parent to be created in a namespace nothing makes is the error a sync
    ///   would stop on; objects that belong to another parent of this unit (the inventory moved
    ///   or the ApplySet id changed) are warned about: that parent's other members would be
    ///   orphaned.
    ///
    /// Errors: as [`Engine::sync`] before its first write (source, render, parse, discovery),
    /// and [`crate::cluster::Error::ParentNamespaceMissing`].
    pub async fn diff(&mut self) -> Result<DiffReport> {
        let revision = self.loader.fetch().await?;
        let loaded = self.loader.load(self.view.client(), &revision).await?;
        let defaults = self.defaults();
        let Resolution { desired, pending } = self.view.resolve_desired(loaded.manifests, &defaults, &[]).await?;
        let parent = self.parent.inventory.read(self.view.client()).await?;
        let contents = parent.as_ref().map(|p| p.contents.clone()).unwrap_or_default();
        self.watch_kinds(&desired, &contents).await?;
        let applied = parent.as_ref().and_then(|p| p.annotations.get(LAST_REVISION)).cloned();
        let mut report = DiffReport::new(revision, applied);
        let namespaces = self.diff_namespaces(&desired, parent.is_none(), &mut report).await?;
        self.diff_objects(&desired, &namespaces, &mut report).await;
        for m in &pending {
            let object = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
            let diff =
                format!("{object}: would be created once its CustomResourceDefinition (in this revision) is applied\n");
            report.changed.push(ObjectDiff { object, diff });
        }
        if self.unit.prune {
            self.diff_prunes(&desired, pending.len(), &contents, &loaded.partial, &mut report).await;
        }
        Ok(report)
    }

    /// The object part of a diff: each desired object read live and dry-run applied (as the
    /// unit's writer), compared without volatile fields and gitward's bookkeeping; objects of a
    /// namespace still to be made shown whole; those another ApplySet owns or that cannot be
    /// read reported failed.
    async fn diff_objects(&self, desired: &[Desired], namespaces: &Namespaces, report: &mut DiffReport) {
        let mut lives = Vec::with_capacity(desired.len());
        for d in desired {
            lives.push(match namespaces.missing(&d.object) {
                Ok(false) => match server_side::read(self.view.writer(), d).await {
                    Ok(live) => LiveRead::Read(live),
                    Err(e) => LiveRead::Failed(format!("{}: read: {}", d.origin, api_message(&e))),
                },
                Ok(true) => LiveRead::NamespaceMade,
                Err(reason) => LiveRead::Failed(format!("{}: {reason}", d.origin)),
            });
        }
        let refused = self.diff_ownership(desired, &lives, report).await;
        for (d, live) in desired.iter().zip(lives) {
            let live = match live {
                _ if refused.contains_key(&d.object) => {
                    report.failed.push((d.object.clone(), format!("{}: {}", d.origin, refused[&d.object])));
                    continue;
                }
                LiveRead::Failed(message) => {
                    report.failed.push((d.object.clone(), message));
                    continue;
                }
                LiveRead::NamespaceMade => {
                    report.changed.push(created(&d.object, &d.body().to_value(), d.decrypted));
                    continue;
                }
                LiveRead::Read(live) => live,
            };
            let merged = match server_side::dry_run(
                self.view.writer(),
                d,
                &self.options.apply.field_manager,
                self.options.apply.force,
            )
            .await
            {
                Ok(merged) => merged,
                Err(e) => {
                    report.failed.push((d.object.clone(), format!("{}: {}", d.origin, api_message(&e))));
                    continue;
                }
            };
            if let Some(diff) = compare(d, live, merged) {
                report.changed.push(diff);
            }
        }
    }

    /// What applying each of `desired` would change of its live object, as [`Engine::diff`]
    /// shows it (masked): a GET and a dry-run apply (as the unit's writer) per object. An
    /// object unchanged, or that cannot be read or dry-run, is left out. Used by the self-heal
    /// to keep what it corrects ([`crate::changeset::ChangeSet::drift_diffs`]).
    pub(super) async fn drift_diffs(&self, desired: &[Desired]) -> Vec<(ObjectRef, String)> {
        let (writer, manager) = (self.view.writer(), &self.options.apply.field_manager);
        let mut diffs = Vec::new();
        for d in desired {
            let Ok(live) = server_side::read(writer, d).await else { continue };
            let Ok(merged) = server_side::dry_run(writer, d, manager, self.options.apply.force).await else { continue };
            if let Some(diff) = compare(d, live, merged) {
                diffs.push((diff.object, diff.diff));
            }
        }
        diffs
    }

    /// The prune part of a diff: the members a sync would delete, unless its guard would refuse
    /// the prune ([`DiffReport::prune_refused`]); the unit's own namespace released; the
    /// cascades checked ([`Engine::diff_cascades`]).
    async fn diff_prunes(
        &self,
        desired: &[Desired],
        pending: usize,
        contents: &Contents,
        partial: &[String],
        report: &mut DiffReport,
    ) {
        let members = self.view.cache().len();
        // A sync releases the unit's namespace before it plans the prune.
        report.prune.released = self.releasable_namespace(desired);
        let mut live = self.view.cache().snapshot();
        if let Some(released) = &report.prune.released {
            live.remove(released);
        }
        let steps = plan::prune_plan(desired, &live, &contents.members).steps;
        let refusal = match () {
            _ if steps.is_empty() => None,
            _ if !partial.is_empty() => Some(super::prune_step::partial_refusal(partial)),
            _ => self
                .prune_deferred()
                .or_else(|| crate::prune::refusal(desired.len() + pending, members, steps.len(), &self.options.prune)),
        };
        match refusal {
            Some(reason) => report.prune.refused = Some(reason),
            None => self.diff_cascades(steps, &live, report).await,
        }
    }

    /// The cascade check of a sync's prune ([`crate::prune::cascade`]) on the members `steps`
    /// would delete, run as the unit's writer: a Namespace or CRD that would take other
    /// objects with it, and is not annotated `gitward.dev/prune: cascade` (`live`), goes to
    /// [`DiffReport::not_pruned`] with the refusal a sync would give; every other step to
    /// [`DiffReport::prunes`]. The members the prune deletes first are not counted.
    async fn diff_cascades(
        &self,
        steps: Vec<plan::PruneStep>,
        live: &BTreeMap<ObjectRef, crate::cluster::LiveMeta>,
        report: &mut DiffReport,
    ) {
        let first = steps.iter().map(|s| s.object.clone());
        let mut checker =
            crate::prune::cascade::Checker::new(self.view.writer(), &self.parent.inventory.id).deleted_first(first);
        let mut requests = crate::changeset::ChangeSet::default();
        for step in steps {
            if live.get(&step.object).is_some_and(|m| m.prune_cascade) {
                report.prune.prunes.push(step.object);
                continue;
            }
            match checker.check(&step.object, &mut requests).await {
                Ok(()) => report.prune.prunes.push(step.object),
                Err(reason) => report.prune.not_pruned.push((step.object, reason)),
            }
        }
    }

    /// Reads which namespaces the revision's objects (and a parent to be created) need and do
    /// not have, one metadata GET each, and notes the Namespace `create_namespace` would make.
    ///
    /// Errors: [`crate::cluster::Error::ParentNamespaceMissing`] when the parent must be created
    /// in a namespace nothing makes (the error a sync stops on); a failed GET.
    async fn diff_namespaces(
        &self,
        desired: &[plan::Desired],
        parent_missing: bool,
        report: &mut DiffReport,
    ) -> Result<Namespaces> {
        let parent_ns = self.parent.inventory.parent.namespace.as_deref().filter(|_| parent_missing);
        let create = self.unit.create_namespace.then_some(self.unit.namespace.as_str());
        let needed: BTreeSet<&str> =
            desired.iter().filter_map(|d| d.object.namespace.as_deref()).chain(parent_ns).chain(create).collect();
        let mut found = Namespaces::default();
        for ns in needed {
            let present = crate::apply::namespace::exists(self.view.client(), ns).await.map_err(|e| {
                crate::cluster::Error::InventoryFailed {
                    parent: self.parent.inventory.parent.to_string(),
                    message: format!("read namespace {ns}: {}", api_message(&e)),
                }
            })?;
            if present {
                continue;
            }
            found.missing.insert(ns.to_string());
            let defined = desired.iter().any(|d| d.object == super::namespaces::namespace_ref(ns));
            if defined || create == Some(ns) {
                found.made.insert(ns.to_string());
            }
        }
        if let Some(ns) = parent_ns.filter(|ns| found.missing.contains(*ns) && !found.made.contains(*ns)) {
            let parent = self.parent.inventory.parent.to_string();
            return Err(crate::cluster::Error::ParentNamespaceMissing { parent, namespace: ns.to_string() }.into());
        }
        if let Some(ns) = create.filter(|ns| found.missing.contains(*ns)) {
            let object = super::namespaces::namespace_ref(ns);
            let defined = desired.iter().any(|d| d.object == object);
            if !defined {
                let diff = format!(
                    "{object}: would be created (create_namespace; kept by no unit, a member of no ApplySet)\n"
                );
                report.changed.push(ObjectDiff { object, diff });
            }
        }
        Ok(found)
    }

    /// The ownership check of a sync, on the live objects a diff read: objects that carry
    /// another ApplySet's `part-of` label are refused (with the message a sync gives) unless
    /// `adopt_from` names their owner. Objects that another parent of this very unit owns (the
    /// inventory moved, or the ApplySet id changed) add a warning: that parent's members would
    /// be orphaned. Returns the refused objects and why.
    async fn diff_ownership(
        &self,
        desired: &[plan::Desired],
        lives: &[LiveRead],
        report: &mut DiffReport,
    ) -> BTreeMap<ObjectRef, String> {
        let mut labelled = Vec::new();
        for (d, live) in desired.iter().zip(lives) {
            let LiveRead::Read(Some(live)) = live else { continue };
            let id = live.pointer(&format!("/metadata/labels/{}", PART_OF.replace('/', "~1"))).and_then(Value::as_str);
            if let Some(id) = id.filter(|id| *id != self.parent.inventory.id) {
                labelled.push((d.object.clone(), id.to_string()));
            }
        }
        let mut refused = BTreeMap::new();
        if labelled.is_empty() {
            return refused;
        }
        let ids: BTreeSet<String> = labelled.iter().map(|(_, id)| id.clone()).collect();
        let owners = owner::owners(self.view.client(), &ids).await.unwrap_or_default();
        let mut warned = BTreeSet::new();
        for (object, id) in labelled {
            let found = owners.get(&id);
            let verdict = owner::verdict(&id, found, &self.unit.adopt_from);
            if let Some(o) = found.filter(|o| o.unit.as_deref() == Some(self.unit.name.as_str()))
                && warned.insert(id.clone())
            {
                let fate = match &verdict {
                    Verdict::Adopt(_) => "adopt_from moves them here",
                    Verdict::Refuse(_) => "a sync refuses them unless adopt_from moves them",
                };
                report.warnings.push(format!(
                    "objects of this revision belong to this unit's earlier ApplySet parent {} ({id}), not to \
                     {} ({}): the inventory moved or its ApplySet id changed; {fate}, and that parent's other \
                     members would be orphaned (no unit prunes them)",
                    o.parent, self.parent.inventory.parent, self.parent.inventory.id
                ));
            }
            if let Verdict::Refuse(reason) = verdict {
                refused.insert(object, reason);
            }
        }
        refused
    }
}

/// What a diff read of one desired object's live state.
enum LiveRead {
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
fn compare(d: &Desired, mut live: Option<Value>, mut merged: Value) -> Option<ObjectDiff> {
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
        Some(ObjectDiff { object: d.object.clone(), diff: unified(&d.object, &before, &after) })
    } else if !bookkeeping.is_empty() {
        // A sync still writes it (labels it a member, records its hash): a change.
        let diff = format!("{}: only gitward's bookkeeping changes ({})\n", d.object, bookkeeping.join(", "));
        Some(ObjectDiff { object: d.object.clone(), diff })
    } else {
        None
    }
}

/// The diff of an object that would be created whole: every line added.
fn created(object: &ObjectRef, body: &Value, decrypted: bool) -> ObjectDiff {
    let body = normalize(body.clone(), None);
    let after = to_yaml(&if decrypted { mask_decrypted(body, None) } else { body });
    ObjectDiff { object: object.clone(), diff: unified(object, "", &after) }
}

/// A unified diff of the YAML before and after, headed `live/<ref>` and `merged/<ref>`.
fn unified(object: &ObjectRef, before: &str, after: &str) -> String {
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
