//! `gitward preview`: what a revision — a pull request's head — would do to the live cluster,
//! unit by unit, before it is merged.
//!
//! Each unit of the config (or of the `--sync` filter) is rendered at its base (the revision
//! its ApplySet parent records as last applied, or `--base`) and at the revision, as a sync
//! renders them ([`crate::sync::Engine::desired_at`]); a unit whose two renders have one
//! digest ([`effect::digest`]) is unchanged and not diffed, whatever paths the change touched
//! (a kustomize `../base`, a Helm `file://` dependency or a values file outside the unit's path
//! counts as it changes the render). For every other unit, per object:
//!
//! - what a merge would do: the live object against the revision, by server-side dry run as the
//!   unit's writer ([`crate::sync::Engine::diff`]): create, configure (with the field diff),
//!   unchanged, or would fail (the API server's message);
//! - the change's effect: base render against the revision's ([`effect::effect`]), added,
//!   changed, removed. What the live cluster differs in from the revision that the change does
//!   not touch is drift already there, shown apart ([`UnitChanges::drift`]);
//! - the prune plan with the prune guards' verdict.
//!
//! Secrets are changed, never shown: Secret values, decrypted values and values taken from a
//! `from` Secret print `***`, a changed one `*** (changed)` ([`effect`]), and every text the
//! report holds went through the process's mask set ([`crate::telemetry::mask`]).

pub mod effect;
mod output;
mod sets;
pub use output::MARKER;
pub use sets::SetChange;
mod unit;

use serde::Serialize;

use crate::cluster::registry::Registry;
use crate::config::{Config, SyncUnit};
pub use effect::{EffectEntry, EffectKind};

/// Errors of a preview as a whole; a unit that cannot be previewed is reported in its
/// [`UnitOutcome::Error`] instead.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `--sync` name that is no unit of the config.
    #[error("no sync unit named {0}")]
    UnknownUnit(String),
}

/// What to preview: the revision, its base and which units.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The revision previewed: a commit SHA, or a tag or branch, resolved per unit.
    pub revision: String,
    /// The revision compared against (`--base`); `None`: the one each unit last applied.
    pub base: Option<String>,
    /// Only these units (`--sync`); empty: every unit of the config.
    pub units: Vec<String>,
}

/// The preview of a revision over the units of a config, in `depends_on` order.
#[derive(Debug, Clone, Serialize)]
pub struct PreviewReport {
    /// The revision previewed, as asked.
    pub revision: String,
    /// One entry per unit previewed, those a `[[sync_set]]` directory of the revision adds
    /// included.
    pub units: Vec<UnitPreview>,
    /// The units the revision adds or removes through `[[sync_set]]` directories, per set.
    pub sets: Vec<SetChange>,
}

/// One unit's preview.
#[derive(Debug, Clone, Serialize)]
pub struct UnitPreview {
    /// The unit's name.
    pub unit: String,
    /// Unchanged, changed (with what), or not previewed (why).
    #[serde(flatten)]
    pub outcome: UnitOutcome,
}

/// What the revision does to one unit.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum UnitOutcome {
    /// The render is the same at the base and at the revision: not diffed.
    Unchanged {
        /// The digest of both renders ([`effect::digest`]).
        digest: String,
    },
    /// The render changes: what a merge would do.
    Changed(Box<UnitChanges>),
    /// The unit could not be previewed: the error, masked.
    Error {
        /// What failed (source, render, parse, discovery, the cluster).
        message: String,
    },
}

/// What a merge of the revision would do to one unit whose render it changes.
#[derive(Debug, Clone, Serialize)]
pub struct UnitChanges {
    /// The base the change is measured from (a commit); `None` when the unit never applied.
    pub base: Option<String>,
    /// The revision previewed, resolved (a commit).
    pub revision: String,
    /// The digest of the base render and of the revision's ([`effect::digest`]).
    pub digests: (Option<String>, String),
    /// Per object the change touches, or a merge would fail: what a sync of the revision would
    /// do to the live object.
    pub merge: Vec<MergeEntry>,
    /// How many of the revision's objects a sync would leave as they are live.
    pub unchanged: usize,
    /// The change's effect, desired against desired.
    pub effect: Vec<EffectEntry>,
    /// Live objects that differ from the revision where the change does not touch them:
    /// drift already in the cluster, not the change's doing.
    pub drift: Vec<MergeEntry>,
    /// The members a sync would prune, and the prune guards' verdict.
    pub prune: PruneView,
    /// What a person should know beyond the objects (an inventory that moved).
    pub warnings: Vec<String>,
}

/// What a sync would do to one live object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeAction {
    /// The object does not exist: created.
    Create,
    /// The object exists and differs: configured.
    Configure,
    /// The API server (or the ownership check, or a missing namespace) would refuse it.
    WouldFail,
}

/// One object of a merge.
#[derive(Debug, Clone, Serialize)]
pub struct MergeEntry {
    /// `Kind/ns/name`.
    pub object: String,
    /// Create, configure or would fail.
    pub action: MergeAction,
    /// The unified diff, live against the dry run's result (secrets masked); for
    /// [`MergeAction::WouldFail`], the reason (the API server's message).
    pub diff: String,
}

/// The prune a sync of the revision would do ([`crate::sync::diff::PrunePreview`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PruneView {
    /// Members that would be deleted.
    pub prunes: Vec<String>,
    /// Members that left git and would be kept, with the refusal (a cascade).
    pub not_pruned: Vec<(String, String)>,
    /// The unit's namespace, released instead of pruned (`create_namespace`).
    pub released: Option<String>,
    /// Why the prune guard would refuse the prune: `max_prune_fraction`, an empty revision, a
    /// revision read in part, a unit adopting from this one.
    pub refused: Option<String>,
    /// The unit has `prune = false`: nothing is ever pruned.
    pub disabled: bool,
}

impl PreviewReport {
    /// Whether a merge would fail: an object a sync would fail, a prune the guards would
    /// refuse, or a unit that cannot be previewed. A forge's commit status reads it.
    pub fn failing(&self) -> bool {
        self.units.iter().any(|u| match &u.outcome {
            UnitOutcome::Unchanged { .. } => false,
            UnitOutcome::Error { .. } => true,
            UnitOutcome::Changed(c) => {
                c.prune.refused.is_some() || c.merge.iter().any(|m| m.action == MergeAction::WouldFail)
            }
        })
    }

    /// Whether the live cluster would change, or differs from the revision: an object created,
    /// configured, failed or drifted, a member pruned or kept past a refusal.
    pub fn has_changes(&self) -> bool {
        self.sets.iter().any(|s| !s.added.is_empty() || !s.removed.is_empty())
            || self.units.iter().any(|u| match &u.outcome {
                UnitOutcome::Changed(c) => {
                    !c.merge.is_empty()
                        || !c.drift.is_empty()
                        || !c.effect.is_empty()
                        || !c.prune.prunes.is_empty()
                        || !c.prune.not_pruned.is_empty()
                        || c.prune.released.is_some()
                        || c.prune.refused.is_some()
                }
                _ => false,
            })
    }

    /// Whether a unit could not be previewed.
    pub fn has_errors(&self) -> bool {
        self.sets.iter().any(|s| s.error.is_some())
            || self.units.iter().any(|u| matches!(u.outcome, UnitOutcome::Error { .. }))
    }

    /// The exit code of `gitward preview`, as `kubectl diff`'s: 0 no change, 1 changes, 2 a
    /// unit could not be previewed.
    pub fn exit_code(&self) -> u8 {
        match () {
            _ if self.has_errors() => 2,
            _ if self.has_changes() => 1,
            _ => 0,
        }
    }
}

/// Previews `request.revision` over the units of `config` (those `request.units` names, or
/// all), each through its cluster's client in `clusters`, in `depends_on` order. Nothing is
/// written to the cluster; mirrors under the config's `state_dir` are fetched, and the install's
/// key is made there when missing ([`crate::sync::substitute::install_key`]).
///
/// Errors: [`Error::UnknownUnit`]. A unit that cannot be previewed (unreachable source, a
/// render that fails, a cluster that does not answer) is reported as [`UnitOutcome::Error`].
pub async fn preview(config: &Config, clusters: &Registry, request: &Request) -> Result<PreviewReport, Error> {
    if let Some(unknown) = request.units.iter().find(|n| !config.units.iter().any(|u| &&u.name == n)) {
        return Err(Error::UnknownUnit(unknown.clone()));
    }
    let (sets, added) =
        if request.units.is_empty() { sets::set_changes(config, request).await } else { Default::default() };
    // A unit the revision removes is named in `sets`, not previewed: its path is gone.
    let removed = |u: &SyncUnit| sets.iter().any(|s| s.removed.contains(&u.name));
    let chosen: Vec<&SyncUnit> = config
        .units
        .iter()
        .filter(|u| (request.units.is_empty() || request.units.contains(&u.name)) && !removed(u))
        .collect();
    // A unit the revision adds has no applied revision: previewed against nothing.
    let new = Request { base: None, ..request.clone() };
    let mut units = Vec::new();
    for unit in in_dependency_order(chosen.into_iter().chain(&added).collect()) {
        let request = if added.iter().any(|a| a.name == unit.name) { &new } else { request };
        let outcome = match unit::preview_unit(config, clusters, unit, request).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let message = crate::telemetry::unit_error(&unit.name, &e).to_string();
                UnitOutcome::Error { message: crate::telemetry::mask::mask(&message).into_owned() }
            }
        };
        units.push(UnitPreview { unit: unit.name.clone(), outcome });
    }
    Ok(PreviewReport { revision: request.revision.clone(), units, sets })
}

/// `units` with each after the units of its `depends_on` among them, file order otherwise (a
/// cycle, which the config refuses, leaves the rest in file order).
fn in_dependency_order(mut units: Vec<&SyncUnit>) -> Vec<&SyncUnit> {
    let mut ordered: Vec<&SyncUnit> = Vec::with_capacity(units.len());
    while !units.is_empty() {
        // Ready: none of its dependencies is still waiting to be ordered.
        let ready = units.iter().position(|u| u.depends_on.iter().all(|d| !units.iter().any(|o| o.name == d.unit)));
        ordered.push(units.remove(ready.unwrap_or(0)));
    }
    ordered
}

#[cfg(test)]
mod tests;
