//! The prune step of a sync: the prune plan, the guards that refuse it (a stale cache, a
//! revision read in part, the fraction and empty-revision rules, a unit being adopted from),
//! the deletes, and the narrowed inventory after a clean prune.

use std::collections::HashMap;
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::{Engine, Result};
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::Contents;
use crate::object::GroupKind;
use crate::plan::{self, Desired};
use crate::prune::{self, PruneOptions};

impl Engine {
    pub(super) async fn prune_and_narrow(
        &mut self,
        inputs: PruneInputs<'_>,
        widened: &Contents,
        changes: &mut ChangeSet,
    ) -> Result<()> {
        let PruneInputs { desired, resources, members_before, partial } = inputs;
        self.release_unit_namespace(desired).await;
        let stale = self.view.relist_stale().await.err();
        let p = plan::prune_plan(desired, &self.view.cache().snapshot(), &widened.members);
        changes.not_members.extend(p.not_members);
        if let Some(reason) = self.prune_deferred().filter(|_| !p.steps.is_empty()) {
            // Not a failure: the move is what the user asked for; the members stay recorded.
            changes.prune_refused = Some(reason);
            return Ok(());
        }
        let refused = match stale {
            Some(e) => Some(format!("the metadata cache cannot be trusted: {e}")),
            None if !partial.is_empty() && !p.steps.is_empty() => Some(partial_refusal(partial)),
            None => {
                let opts = PruneOptions {
                    allow_all: self.options.prune.allow_all || self.options.allow_prune_once,
                    ..self.options.prune.clone()
                };
                prune::refusal(desired.len(), members_before, p.steps.len(), &opts)
            }
        };
        if let Some(reason) = refused {
            for step in &p.steps {
                changes.push(step.object.clone(), Action::Skipped, Some(format!("prune refused: {reason}")));
            }
            changes.prune_refused = Some(reason);
            return Ok(());
        }
        let pruned = self.view.prune(resources, &self.parent.inventory.id, &p.steps).await;
        let clean = !pruned.has_failures();
        changes.extend(pruned);
        if clean {
            self.narrow_inventory(desired, resources, widened).await?;
        }
        Ok(())
    }

    /// Why this unit prunes nothing now, if so: another unit of the config names it in
    /// `adopt_from` ([`crate::config::SyncUnit::adopted_by`]), so what left this unit's revision
    /// may be moving there, and must not be deleted before that unit takes it over, whichever
    /// syncs first.
    pub fn prune_deferred(&self) -> Option<String> {
        deferral(&self.unit.name, &self.unit.adopted_by)
    }
}

/// The reason unit `unit` prunes nothing while `adopters` (the units whose `adopt_from` names
/// it) may take its objects over; `None` when none does.
fn deferral(unit: &str, adopters: &[String]) -> Option<String> {
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
