//! Prune: delete inventory members that git no longer holds (DESIGN.md decision 8).
//!
//! Runs only after an apply with no failures. Refused outright (nothing deleted, the reason in
//! [`ChangeSet::prune_refused`]) when the desired set is empty or when more than
//! [`PruneOptions::max_fraction`] of the members would go, unless [`PruneOptions::allow_all`].
//! Deletes go in reverse stage order, each with a precondition on the uid the cache holds (a
//! re-created object of the same name is never hit); membership is the cache's selection by
//! the `part-of` label. A failed delete leaves the member in the inventory. A member whose
//! kind is no longer served (its CRD was deleted) went with it: it is counted pruned.

use std::collections::HashMap;

use kube::api::{Api, DeleteParams, DynamicObject, Preconditions, PropagationPolicy};
use kube::discovery::ApiResource;

use crate::changeset::{Action, ChangeSet};
use crate::cluster::cache::MetadataCache;
use crate::cluster::{api_message, is_status};
use crate::object::GroupKind;
use crate::plan::PruneStep;

/// Prune settings of a unit.
#[derive(Debug, Clone)]
pub struct PruneOptions {
    /// Largest fraction of the inventory one sync may delete. Default 0.5.
    pub max_fraction: f64,
    /// Permit emptying the inventory and exceeding `max_fraction`. Default false.
    pub allow_all: bool,
}

impl Default for PruneOptions {
    fn default() -> Self {
        Self { max_fraction: 0.5, allow_all: false }
    }
}

/// Why a prune must be refused, if it must: `desired` objects in git, `members` in the
/// inventory, `doomed` to be deleted. Pure.
pub fn refusal(desired: usize, members: usize, doomed: usize, opts: &PruneOptions) -> Option<String> {
    if doomed == 0 || opts.allow_all {
        return None;
    }
    if desired == 0 {
        return Some(format!(
            "the revision holds no objects: refusing to prune all {doomed} members (set allow_prune_all to permit)"
        ));
    }
    let fraction = doomed as f64 / members.max(1) as f64;
    (fraction > opts.max_fraction).then(|| {
        format!(
            "would prune {doomed} of {members} members ({:.0}%), over max_prune_fraction {:.0}% (set allow_prune_all to permit)",
            fraction * 100.0,
            opts.max_fraction * 100.0
        )
    })
}

/// Deletes `steps` (already in reverse stage order). `resources` maps each group-kind to its
/// resource and whether it is namespaced.
pub async fn prune(
    client: &kube::Client,
    steps: &[PruneStep],
    resources: &HashMap<GroupKind, (ApiResource, bool)>,
    cache: &MetadataCache,
) -> ChangeSet {
    let mut changes = ChangeSet::default();
    for step in steps {
        let Some((resource, _)) = resources.get(&step.object.gk) else {
            let msg = format!("{} is no longer served: the object went with its CRD", step.object.gk);
            cache.forget(&step.object);
            changes.push(step.object.clone(), Action::Pruned, Some(msg));
            continue;
        };
        let api: Api<DynamicObject> = match &step.object.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
            None => Api::all_with(client.clone(), resource),
        };
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions {
                uid: Some(step.uid.clone()),
                // Not the resourceVersion: a controller's status write would make every busy
                // object unprunable. The uid guards against a re-created object of the name;
                // membership is the cache's label selection.
                resource_version: None,
            }),
            ..Default::default()
        };
        changes.requests += 1;
        match api.delete(&step.object.name, &params).await {
            Ok(_) => {
                cache.forget(&step.object);
                changes.push(step.object.clone(), Action::Pruned, None);
            }
            Err(e) if is_status(&e, 404) => {
                cache.forget(&step.object);
                changes.push(step.object.clone(), Action::Pruned, Some("already gone".into()));
            }
            Err(e) if is_status(&e, 409) => {
                let msg = format!("changed since it was planned, not deleted this time: {}", api_message(&e));
                changes.push(step.object.clone(), Action::Skipped, Some(msg));
            }
            Err(e) => changes.push(step.object.clone(), Action::Failed, Some(format!("delete: {}", api_message(&e)))),
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_refused_when_path_emptied() {
        let r = refusal(0, 10, 10, &PruneOptions::default());
        assert!(r.unwrap().contains("no objects"));
    }

    #[test]
    fn prune_refused_over_max_fraction() {
        let r = refusal(3, 10, 6, &PruneOptions::default());
        assert!(r.unwrap().contains("6 of 10"));
        assert_eq!(refusal(5, 10, 5, &PruneOptions::default()), None);
    }

    #[test]
    fn allow_all_permits_emptying() {
        let opts = PruneOptions { allow_all: true, ..Default::default() };
        assert_eq!(refusal(0, 10, 10, &opts), None);
    }

    #[test]
    fn nothing_to_prune_is_never_refused() {
        assert_eq!(refusal(0, 0, 0, &PruneOptions::default()), None);
    }
}
