//! `gitward diff` as the engine runs it: the revision loaded and resolved as a sync would,
//! then compared with the live objects through dry runs, and the prunes, cascades, namespaces
//! and ownership a sync would meet — nothing written ([`crate::sync::diff`]'s report).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Engine;
use crate::apply::server_side;
use crate::cluster::api_message;
use crate::cluster::inventory::{Contents, PART_OF};
use crate::cluster::owner::{self, Verdict};
use crate::health::record::LAST_REVISION;
use crate::object::ObjectRef;
use crate::plan::{self, Desired};
use crate::source::Revision;
use crate::sync::Result;
use crate::sync::desired::Resolution;
use crate::sync::diff::*;
use crate::sync::sealed;

impl Engine {
    /// Computes what [`Engine::sync`] would do at `revision` (`None`: the unit's ref, fetched),
    /// by dry run, and what it would refuse, so that `gitward diff` agrees with `gitward sync`:
    ///
    /// - objects of a namespace that does not exist yet, and that the revision (a Namespace
    ///   manifest) or `create_namespace` would make, are shown as created, whole, without a
    ///   dry run (the API server would refuse one: the namespace is not there);
    /// - objects another ApplySet owns are not dry-run but reported failed with the ownership
    ///   check's message ([`crate::cluster::owner`]), unless `adopt_from` takes them;
    /// - prunes are listed only when a sync would do them: the prune guard (empty revision,
    ///   `max_prune_fraction`, a revision read in part, a unit that adopts from this one) sets
    ///   [`crate::sync::diff::PrunePreview::refused`] instead; a unit with `prune = false` lists none;
    /// - a Namespace or CRD whose prune would take other objects with it is listed in
    ///   [`crate::sync::diff::PrunePreview::not_pruned`] with the sync's refusal ([`crate::prune::cascade`]); the
    ///   unit's own namespace under `create_namespace` is listed as released, not pruned;
    /// - an ApplySet parent to be created in a namespace nothing makes is the error a sync
    ///   would stop on; objects that belong to another parent of this unit (the inventory moved
    ///   or the ApplySet id changed) are warned about: that parent's other members would be
    ///   orphaned.
    ///
    /// Errors: as [`Engine::sync`] before its first write (source, render, parse, discovery),
    /// and [`crate::cluster::Error::ParentNamespaceMissing`].
    pub async fn diff(&mut self, revision: Option<Revision>) -> Result<DiffReport> {
        let revision = match revision {
            Some(revision) => revision,
            None => self.loader.fetch().await?,
        };
        let loaded = self.loader.load(self.view.client(), &revision).await?;
        let defaults = self.defaults();
        let Resolution { desired, pending } = self.view.resolve_desired(loaded.manifests, &defaults, &[]).await?;
        let parent = self.parent.inventory().read(self.view.client()).await?;
        let contents = parent.as_ref().map(|p| p.contents.clone()).unwrap_or_default();
        self.watch_kinds(&desired, &contents).await?;
        let applied = parent.as_ref().and_then(|p| p.annotations.get(LAST_REVISION)).cloned();
        let mut report = DiffReport::new(revision, applied);
        report.render = Some(self.render_digest(&desired, &pending)?);
        let namespaces = self.diff_namespaces(&desired, parent.is_none(), &mut report).await?;
        self.diff_objects(&desired, &namespaces, &mut report).await;
        for m in &pending {
            let object = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
            let diff =
                format!("{object}: would be created once its CustomResourceDefinition (in this revision) is applied\n");
            report.changed.push(ObjectDiff { object, diff, created: true });
        }
        if self.unit.prune {
            self.diff_prunes(&desired, pending.len(), &contents, &loaded.partial, &mut report).await;
        }
        Ok(report)
    }

    /// The digest of a revision's render as [`crate::sync::sealed`] makes it, under the
    /// install's key: what `gitward preview` prints for the revision and what an attestation's
    /// subject names once it is applied.
    ///
    /// Errors: the install's key can be neither read nor made.
    fn render_digest(&self, desired: &[Desired], pending: &[crate::manifest::Manifest]) -> Result<String> {
        let key = crate::sync::substitute::install_key(&self.state_dir)?;
        let mut digests = Vec::with_capacity(desired.len() + pending.len());
        for d in desired {
            digests
                .push((d.object.clone(), sealed::object_digest(&sealed::seal(d.body().to_value(), d.decrypted, &key))));
        }
        for m in pending {
            let object = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
            digests.push((object, sealed::object_digest(&sealed::seal(m.body.to_value(), m.hash_key.is_some(), &key))));
        }
        Ok(sealed::render_digest(digests.iter().map(|(o, d)| (o, d.as_str()))))
    }

    /// The objects a sync of `revision` would send, as it resolves them (loaded, variables
    /// substituted, default namespace, ApplySet label): what `gitward preview` compares between
    /// two revisions. Custom resources whose CRD the revision brings come as they were parsed.
    ///
    /// Errors: as [`Engine::diff`] before its dry runs (source, render, parse, discovery).
    pub async fn desired_at(&mut self, revision: &Revision) -> Result<(Vec<Desired>, Vec<crate::manifest::Manifest>)> {
        let loaded = self.loader.load(self.view.client(), revision).await?;
        let defaults = self.defaults();
        let Resolution { desired, pending } = self.view.resolve_desired(loaded.manifests, &defaults, &[]).await?;
        Ok((desired, pending))
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
    /// the prune ([`crate::sync::diff::PrunePreview::refused`]); the unit's own namespace released; the
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
        report.prune.released = self.parent.releasable_namespace(&self.view, desired);
        let mut live = self.view.cache().snapshot();
        if let Some(released) = &report.prune.released {
            live.remove(released);
        }
        let steps = plan::prune_plan(desired, &live, &contents.members).steps;
        let refusal = match () {
            _ if steps.is_empty() => None,
            _ if !partial.is_empty() => Some(crate::sync::prune_step::partial_refusal(partial)),
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
    /// [`crate::sync::diff::PrunePreview::not_pruned`] with the refusal a sync would give; every other step to
    /// [`crate::sync::diff::DiffReport::prunes`]. The members the prune deletes first are not counted.
    async fn diff_cascades(
        &self,
        steps: Vec<plan::PruneStep>,
        live: &BTreeMap<ObjectRef, crate::cluster::LiveMeta>,
        report: &mut DiffReport,
    ) {
        let first = steps.iter().map(|s| s.object.clone());
        let mut checker =
            crate::prune::cascade::Checker::new(self.view.writer(), &self.parent.inventory().id).deleted_first(first);
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
        let parent_ns = self.parent.inventory().parent.namespace.as_deref().filter(|_| parent_missing);
        let create = self.unit.create_namespace.then_some(self.unit.namespace.as_str());
        let needed: BTreeSet<&str> =
            desired.iter().filter_map(|d| d.object.namespace.as_deref()).chain(parent_ns).chain(create).collect();
        let mut found = Namespaces::default();
        for ns in needed {
            let present = crate::apply::namespace::exists(self.view.client(), ns).await.map_err(|e| {
                crate::cluster::Error::InventoryFailed {
                    parent: self.parent.inventory().parent.to_string(),
                    message: format!("read namespace {ns}: {}", api_message(&e)),
                }
            })?;
            if present {
                continue;
            }
            found.missing.insert(ns.to_string());
            let defined = desired.iter().any(|d| d.object == crate::sync::namespaces::namespace_ref(ns));
            if defined || create == Some(ns) {
                found.made.insert(ns.to_string());
            }
        }
        if let Some(ns) = parent_ns.filter(|ns| found.missing.contains(*ns) && !found.made.contains(*ns)) {
            let parent = self.parent.inventory().parent.to_string();
            return Err(crate::cluster::Error::ParentNamespaceMissing { parent, namespace: ns.to_string() }.into());
        }
        if let Some(ns) = create.filter(|ns| found.missing.contains(*ns)) {
            let object = crate::sync::namespaces::namespace_ref(ns);
            let defined = desired.iter().any(|d| d.object == object);
            if !defined {
                let diff = format!(
                    "{object}: would be created (create_namespace; kept by no unit, a member of no ApplySet)\n"
                );
                report.changed.push(ObjectDiff { object, diff, created: true });
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
            if let Some(id) = id.filter(|id| *id != self.parent.inventory().id) {
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
                    o.parent,
                    self.parent.inventory().parent,
                    self.parent.inventory().id
                ));
            }
            if let Verdict::Refuse(reason) = verdict {
                refused.insert(object, reason);
            }
        }
        refused
    }
}
