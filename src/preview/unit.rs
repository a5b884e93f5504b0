//! One unit's preview: its base and the revision rendered as a sync renders them, their
//! digests compared, and for a changed render the dry-run diff against the live cluster split
//! into what the change does and what is drift.

use std::collections::BTreeSet;

use super::effect::{self, EffectKind, Sealed};
use super::{MergeAction, MergeEntry, PruneView, Request, UnitChanges, UnitOutcome};
use crate::cluster::discovery::Answers;
use crate::cluster::registry::Registry;
use crate::config::{Config, SyncUnit};
use crate::health::record::LAST_REVISION;
use crate::manifest::HashKey;
use crate::object::ObjectRef;
use crate::source::Revision;
use crate::sync::diff::DiffReport;
use crate::sync::{Engine, Result};
use crate::telemetry::mask::mask;

/// The preview of `unit` at `request`'s revision ([`super::preview`]).
///
/// Errors: the source's, the render's, the parse's, discovery's and the cluster's
/// ([`crate::sync::Error`]), at the base or at the revision.
pub(super) async fn preview_unit(
    config: &Config,
    clusters: &Registry,
    unit: &SyncUnit,
    request: &Request,
) -> Result<UnitOutcome> {
    if unit.helm.chart.is_some() || unit.repo.starts_with("oci://") {
        let message = "not previewed: a chart or OCI artifact unit names its version in the config, not in git";
        return Ok(UnitOutcome::Error { message: message.to_owned() });
    }
    let Some(client) = clusters.client(&unit.cluster) else {
        return Ok(UnitOutcome::Error { message: format!("no client of cluster {}", unit.cluster) });
    };
    let key = crate::sync::substitute::install_key(&config.daemon.state_dir)?;
    let answers = clusters.answers(&unit.cluster);
    let mut engine = pinned(config, client, answers, unit, &request.revision).await?;
    let revision = engine.repo().fetch().await?;
    let recorded = engine.inventory().read(client).await?;
    let base_ref = request.base.clone().or_else(|| recorded.and_then(|p| p.annotations.get(LAST_REVISION).cloned()));
    let base = match &base_ref {
        Some(reference) => {
            let mut at_base = pinned(config, client, answers, unit, reference).await?;
            let base = at_base.repo().fetch().await?;
            let sealed = sealed_at(&mut at_base, &base, &key).await?;
            Some((base, sealed))
        }
        None => None,
    };
    let after = sealed_at(&mut engine, &revision, &key).await?;
    let digest = effect::digest(&after);
    let base_digest = base.as_ref().map(|(_, sealed)| effect::digest(sealed));
    if base_digest.as_deref() == Some(digest.as_str()) {
        return Ok(UnitOutcome::Unchanged { digest });
    }
    let effect = effect::effect(base.as_ref().map(|(_, sealed)| sealed), &after);
    let report = engine.diff(Some(revision.clone())).await?;
    let mut changes = UnitChanges {
        base: base.map(|(b, _)| b.0),
        revision: revision.0,
        digests: (base_digest, digest),
        merge: Vec::new(),
        unchanged: 0,
        effect,
        drift: Vec::new(),
        prune: PruneView { disabled: !unit.prune, ..PruneView::default() },
        warnings: report.warnings.iter().map(|w| mask(w).into_owned()).collect(),
    };
    split(&report, &after, &mut changes);
    Ok(UnitOutcome::Changed(Box::new(changes)))
}

/// An engine of `unit` whose ref is `reference`, as `gitward sync --revision` pins it, reading
/// members and parent by one list each, and taking discovery's answers from `answers`, the
/// registry's for the unit's cluster: the units of a preview round (and, in a daemon, its
/// syncs) ask the API server once per group-version, not once per engine.
///
/// Errors: as [`Engine::new`].
async fn pinned(
    config: &Config,
    client: &kube::Client,
    answers: Option<&Answers>,
    unit: &SyncUnit,
    reference: &str,
) -> Result<Engine> {
    let mut at = unit.clone();
    at.reference = reference.to_owned();
    let mut engine = Engine::new(client.clone(), config.cluster_of(unit), &config.daemon.state_dir, &at).await?;
    if let Some(answers) = answers {
        engine.share_discovery(answers);
    }
    engine.one_shot();
    Ok(engine)
}

/// `revision`'s objects as `engine` resolves them, sealed under `key` ([`effect::seal`]).
///
/// Errors: as [`Engine::desired_at`].
async fn sealed_at(engine: &mut Engine, revision: &Revision, key: &HashKey) -> Result<Sealed> {
    let (desired, pending) = engine.desired_at(revision).await?;
    let mut sealed = Sealed::new();
    for d in &desired {
        sealed.insert(d.object.clone(), effect::seal(d.body().to_value(), d.decrypted, key));
    }
    for m in &pending {
        let object = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
        sealed.insert(object, effect::seal(m.body.to_value(), m.hash_key.is_some(), key));
    }
    Ok(sealed)
}

/// `report`'s objects into `changes`: those the change adds or changes (or whose sync would
/// fail) as what a merge does, the other differences as drift, the rest counted unchanged;
/// the prune as the guards judge it. Every text masked.
fn split(report: &DiffReport, after: &Sealed, changes: &mut UnitChanges) {
    let touched: BTreeSet<&str> =
        changes.effect.iter().filter(|e| e.kind != EffectKind::Removed).map(|e| e.object.as_str()).collect();
    let mut differing = BTreeSet::new();
    for d in &report.changed {
        let object = d.object.to_string();
        let action = if d.created { MergeAction::Create } else { MergeAction::Configure };
        let entry = MergeEntry { object: object.clone(), action, diff: mask(&d.diff).into_owned() };
        match touched.contains(object.as_str()) {
            true => changes.merge.push(entry),
            false => changes.drift.push(entry),
        }
        differing.insert(d.object.clone());
    }
    for (object, message) in &report.failed {
        let entry =
            MergeEntry { object: object.to_string(), action: MergeAction::WouldFail, diff: mask(message).into_owned() };
        changes.merge.push(entry);
        differing.insert(object.clone());
    }
    changes.unchanged = after.keys().filter(|o| !differing.contains(*o)).count();
    let prune = &report.prune;
    changes.prune.prunes = prune.prunes.iter().map(ToString::to_string).collect();
    changes.prune.not_pruned = prune.not_pruned.iter().map(|(o, r)| (o.to_string(), mask(r).into_owned())).collect();
    changes.prune.released = prune.released.as_ref().map(ToString::to_string);
    changes.prune.refused = prune.refused.as_ref().map(|r| mask(r).into_owned());
}
