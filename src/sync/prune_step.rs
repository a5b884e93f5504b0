//! The prune guards of a sync that are not the prune module's own rules: a revision read in
//! part, and a unit that others are adopting from. The step itself is the engine's
//! ([`super::engine`], `prune`).

use std::collections::HashMap;
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::Result;
use super::hooks::Hooks;
use super::parent::ApplySetParent;
use super::state::ClusterView;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::Contents;
use crate::object::GroupKind;
use crate::plan::{self, Desired};
use crate::prune::{self, PruneOptions};

/// The parts a prune works through: the cluster view (its cache, relists and deletes), the
/// parent it narrows, and the hooks' record that write carries.
pub(super) struct Parts<'a> {
    /// Reads and deletes.
    pub(super) view: &'a mut ClusterView,
    /// Narrowed after a clean prune; releases `create_namespace`'s namespace.
    pub(super) parent: &'a mut ApplySetParent,
    /// The hooks' record, carried by the parent's write.
    pub(super) hooks: &'a Hooks,
}

/// What may refuse a prune besides the cache and the revision: the fraction and
/// empty-revision rules (`allow_all` already folds in a one-off `--allow-prune`), and the
/// unit's deferral to the units adopting from it ([`deferral`]).
pub(super) struct Guards {
    /// The prune rules ([`prune::refusal`]).
    pub(super) options: PruneOptions,
    /// Why nothing is pruned while another unit may take the objects over.
    pub(super) deferred: Option<String>,
}

/// Prunes what git no longer holds (DESIGN.md, Data flow): releases `create_namespace`'s
/// namespace when the revision stopped declaring it, refuses the prune when a guard says so
/// (every step then `skipped` with the reason, [`ChangeSet::prune_refused`] set), deletes
/// through the seam ([`ClusterView::prune`]), and after a clean prune narrows the parent to
/// what remains ([`ApplySetParent::narrow`]). A deferral refuses without skipping: the move
/// is what the user asked for.
///
/// Errors: [`super::Error::Cluster`] when the parent cannot be narrowed.
pub(super) async fn prune_and_narrow(
    parts: Parts<'_>,
    guards: &Guards,
    inputs: PruneInputs<'_>,
    widened: &Contents,
    changes: &mut ChangeSet,
) -> Result<()> {
    let Parts { view, parent, hooks } = parts;
    let PruneInputs { desired, resources, members_before, partial } = inputs;
    parent.release_unit_namespace(view, desired).await;
    let stale = view.relist_stale().await.err();
    let p = plan::prune_plan(desired, &view.cache().snapshot(), &widened.members);
    changes.not_members.extend(p.not_members);
    if let Some(reason) = guards.deferred.clone().filter(|_| !p.steps.is_empty()) {
        changes.prune_refused = Some(reason);
        return Ok(());
    }
    let refused = match stale {
        Some(e) => Some(format!("the metadata cache cannot be trusted: {e}")),
        None if !partial.is_empty() && !p.steps.is_empty() => Some(partial_refusal(partial)),
        None => prune::refusal(desired.len(), members_before, p.steps.len(), &guards.options),
    };
    if let Some(reason) = refused {
        for step in &p.steps {
            changes.push(step.object.clone(), Action::Skipped, Some(format!("prune refused: {reason}")));
        }
        changes.prune_refused = Some(reason);
        return Ok(());
    }
    let pruned = view.prune(resources, &parent.inventory().id, &p.steps).await;
    let clean = !pruned.has_failures();
    changes.extend(pruned);
    if clean {
        parent.narrow(view, hooks, desired, resources, widened).await?;
    }
    Ok(())
}

/// The reason unit `unit` prunes nothing while `adopters` (the units whose `adopt_from` names
/// it) may take its objects over; `None` when none does.
pub(super) fn deferral(unit: &str, adopters: &[String]) -> Option<String> {
    (!adopters.is_empty()).then(|| {
        let units: Vec<String> = adopters.iter().map(|u| format!("`{u}`")).collect();
        format!(
            "unit {} may take over this unit's objects (its adopt_from names `{unit}`): nothing is pruned \
             until the move is done and adopt_from is removed",
            units.join(", "),
        )
    })
}

/// What the prune of one sync starts from.
pub(super) struct PruneInputs<'a> {
    pub(super) desired: &'a [Desired],
    pub(super) resources: &'a HashMap<GroupKind, (Arc<ApiResource>, bool)>,
    /// Members in the cache before the apply (the fraction guard's denominator).
    pub(super) members_before: usize,
    /// Paths the listing skipped that may define objects ([`crate::manifest::Loaded::partial`]).
    pub(super) partial: &'a [String],
}

/// The prune guard's reason when the revision was read only in part (`partial`: the paths not
/// followed).
pub(super) fn partial_refusal(partial: &[String]) -> String {
    format!(
        "the revision was read only in part ({} not followed: symbolic link, submodule or name not UTF-8): \
         what they define would be pruned",
        partial.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_that_others_adopt_from_defers_its_prune_naming_them() {
        assert_eq!(deferral("shop", &[]), None);
        let reason = deferral("shop", &["shop-db".into(), "shop-cache".into()]).unwrap();
        assert!(reason.starts_with("unit `shop-db`, `shop-cache` may take over this unit's objects"), "{reason}");
        assert!(reason.contains("adopt_from names `shop`"), "{reason}");
    }

    #[test]
    fn a_revision_read_in_part_names_the_paths_not_followed() {
        let reason = partial_refusal(&["apps/link.yaml".into(), "vendor/sub".into()]);
        assert!(reason.contains("(apps/link.yaml, vendor/sub not followed"), "{reason}");
        assert!(reason.ends_with("what they define would be pruned"), "{reason}");
    }
}
