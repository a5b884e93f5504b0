//! Prune: delete inventory members that git no longer holds (DESIGN.md decision 8).
//!
//! Runs only after an apply with no failures. Refused outright (nothing deleted, the reason in
//! [`ChangeSet::prune_refused`]) when the desired set is empty or when more than
//! [`PruneOptions::max_fraction`] of the members would go, unless [`PruneOptions::allow_all`].
//! Only members are pruned ([`crate::plan::not_member`]); each is read again just before its
//! delete, which carries uid and resourceVersion preconditions ([`prune`]); Namespaces and
//! CRDs that would take non-members with them are refused ([`cascade`]). ARCHITECTURE.md,
//! "Prune rules", states every rule in one place. A failed delete leaves the member in the
//! inventory. A member whose kind is not served is never counted pruned: it stays recorded.

use std::collections::HashMap;

use kube::api::{Api, DeleteParams, DynamicObject, Preconditions, PropagationPolicy};
use kube::discovery::ApiResource;

pub(crate) mod cascade;

use crate::changeset::{Action, ChangeSet};
use crate::cluster::cache::MetadataCache;
use crate::cluster::fence::Fence;
use crate::cluster::inventory::{DESIRED_HASH, PART_OF};
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
            "the revision holds no objects: refusing to prune all {doomed} members \
             (set allow_prune_all, or run `gitward sync --allow-prune` once, to permit)"
        ));
    }
    let fraction = doomed as f64 / members.max(1) as f64;
    (fraction > opts.max_fraction).then(|| {
        format!(
            "would prune {doomed} of {members} members ({:.0}%), over max_prune_fraction {:.0}% \
             (raise max_prune_fraction, set allow_prune_all, or run `gitward sync --allow-prune` once, to permit)",
            fraction * 100.0,
            opts.max_fraction * 100.0
        )
    })
}

/// What [`prune`] needs besides the steps.
pub struct Context<'a> {
    /// The API server.
    pub client: &'a kube::Client,
    /// Each group-kind's resource and whether it is namespaced.
    pub resources: &'a HashMap<GroupKind, (std::sync::Arc<ApiResource>, bool)>,
    /// The unit's metadata cache: pruned members are forgotten; members still held in a
    /// Namespace (or of a CRD's kind) block that Namespace's (CRD's) prune.
    pub cache: &'a MetadataCache,
    /// The unit's ApplySet id (the `part-of` label value a member must still carry).
    pub applyset_id: &'a str,
    /// The fence of the Lease the unit runs under, checked again between each re-check's
    /// read and its delete ([`crate::cluster::fence`]).
    pub fence: &'a Fence,
}

/// Deletes `steps` (already in reverse stage order), each only after a metadata GET confirms
/// it is still a member (same uid, this unit's `part-of` label, the desired-hash annotation,
/// no controller ownerReference), with the uid **and** the resourceVersion that GET returned
/// as preconditions: a 409 skips the object this time. A Namespace or CRD that would take
/// objects that are not members with it is not deleted unless annotated
/// `gitward.dev/prune: cascade` ([`cascade`]).
pub async fn prune(ctx: &Context<'_>, steps: &[PruneStep]) -> ChangeSet {
    let mut changes = ChangeSet::default();
    let mut cascades = cascade::Checker::new(ctx.client, ctx.applyset_id);
    for step in steps {
        let Some((resource, _)) = ctx.resources.get(&step.object.gk) else {
            // Not served is not deleted: the CRD may only have stopped serving a version.
            let msg = format!("{} is not served: not deleted, kept in the inventory", step.object.gk);
            changes.push(step.object.clone(), Action::Skipped, Some(msg));
            continue;
        };
        let api: Api<DynamicObject> = match &step.object.namespace {
            Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, resource.as_ref()),
            None => Api::all_with(ctx.client.clone(), resource.as_ref()),
        };
        changes.requests += 1;
        let meta = match api.get_metadata_opt(&step.object.name).await {
            Ok(Some(m)) => m.metadata,
            Ok(None) => {
                ctx.cache.forget(&step.object);
                changes.push(step.object.clone(), Action::Pruned, Some("already gone".into()));
                continue;
            }
            Err(e) => {
                let msg = format!("read before delete: {}", api_message(&e));
                changes.push(step.object.clone(), Action::Failed, Some(msg));
                continue;
            }
        };
        match recheck(&meta, &step.uid, ctx.applyset_id) {
            Recheck::Delete => {}
            Recheck::Skip(reason) => {
                changes.push(step.object.clone(), Action::Skipped, Some(format!("not deleted: {reason}")));
                continue;
            }
            // Annotated while the cache lagged behind: kept as the plan keeps such a member (no
            // entry, no failure; it stays in the inventory while it lives).
            Recheck::Keep => continue,
        }
        let live = crate::cluster::live_meta(&meta);
        if !live.prune_cascade {
            match cascades.check(&step.object, &mut changes).await {
                Ok(()) => {}
                Err(reason) => {
                    changes.push(step.object.clone(), Action::Skipped, Some(reason));
                    continue;
                }
            }
        }
        delete(ctx, &api, &step.object, &meta, &mut changes).await;
    }
    changes
}

/// Deletes `object` (read as `meta` just before) with its uid and resourceVersion as
/// preconditions, unless the fence says this replica may no longer write; the result goes to
/// `changes`.
async fn delete(
    ctx: &Context<'_>,
    api: &Api<DynamicObject>,
    object: &crate::object::ObjectRef,
    meta: &kube::core::ObjectMeta,
    changes: &mut ChangeSet,
) {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions { uid: meta.uid.clone(), resource_version: meta.resource_version.clone() }),
        ..Default::default()
    };
    // The re-check's read is fresh even when this replica was paused before it and its
    // Lease has passed to another: the delete's preconditions would then pass, and it
    // would remove what the new owner just applied. The fence says whether it may still
    // write; the client's fence layer checks again as the request leaves.
    if let Err(fenced) = ctx.fence.check("DELETE", &object.to_string()) {
        changes.push(object.clone(), Action::Skipped, Some(format!("not deleted: {fenced}")));
        return;
    }
    changes.requests += 1;
    match api.delete(&object.name, &params).await {
        Ok(_) => {
            ctx.cache.forget(object);
            changes.push(object.clone(), Action::Pruned, None);
        }
        Err(e) if is_status(&e, 404) => {
            ctx.cache.forget(object);
            changes.push(object.clone(), Action::Pruned, Some("already gone".into()));
        }
        Err(e) if is_status(&e, 409) => {
            let msg = format!("changed since it was read, not deleted this time: {}", api_message(&e));
            changes.push(object.clone(), Action::Skipped, Some(msg));
        }
        Err(e) => changes.push(object.clone(), Action::Failed, Some(format!("delete: {}", api_message(&e)))),
    }
}

/// What the re-check before a delete decides of the object just read ([`recheck`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Recheck {
    /// Still a member that may be deleted.
    Delete,
    /// No longer a member ([`still_member`]): not deleted, with the reason.
    Skip(String),
    /// A member annotated `gitward.dev/prune: disabled` since the plan: kept.
    Keep,
}

/// The re-check of the object just read before its delete: [`Recheck::Skip`] when it is no
/// longer a member ([`still_member`]), [`Recheck::Keep`] when it was annotated
/// `gitward.dev/prune: disabled` after the plan read the cache, else [`Recheck::Delete`].
/// Pure.
pub fn recheck(meta: &kube::core::ObjectMeta, uid: &str, applyset_id: &str) -> Recheck {
    match still_member(meta, uid, applyset_id) {
        Some(reason) => Recheck::Skip(reason),
        None if crate::cluster::live_meta(meta).prune_disabled => Recheck::Keep,
        None => Recheck::Delete,
    }
}

/// Why the object just read is no longer a member that may be deleted, if it is not: a
/// re-created object (other uid), the `part-of` label removed or changed, the desired-hash
/// annotation removed, a controller ownerReference added, or already being deleted. Pure.
pub fn still_member(meta: &kube::core::ObjectMeta, uid: &str, applyset_id: &str) -> Option<String> {
    let label = meta.labels.as_ref().and_then(|l| l.get(PART_OF));
    let live = crate::cluster::live_meta(meta);
    if meta.uid.as_deref() != Some(uid) {
        Some("re-created since it was planned (another uid)".into())
    } else if label.map(String::as_str) != Some(applyset_id) {
        Some(format!("its {PART_OF} label is no longer {applyset_id}"))
    } else if live.desired_hash.is_none() {
        Some(format!("its {DESIRED_HASH} annotation was removed"))
    } else if live.controlled {
        Some("it has a controller ownerReference".into())
    } else if live.deleting {
        Some("it is already being deleted".into())
    } else {
        None
    }
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
        let r = refusal(3, 10, 6, &PruneOptions::default()).unwrap();
        assert!(r.contains("6 of 10"), "{r}");
        // The message names the setting and both ways past it.
        for words in ["max_prune_fraction 50%", "allow_prune_all", "--allow-prune"] {
            assert!(r.contains(words), "{r}");
        }
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

    #[test]
    fn a_member_annotated_prune_disabled_after_the_plan_is_kept_at_the_recheck() {
        let member = |annotations: &[(&str, &str)]| kube::core::ObjectMeta {
            uid: Some("u1".into()),
            labels: Some([(PART_OF.to_string(), "applyset-x".to_string())].into()),
            annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        };
        let hash = (DESIRED_HASH, "abc");
        assert_eq!(recheck(&member(&[hash]), "u1", "applyset-x"), Recheck::Delete);
        assert_eq!(recheck(&member(&[hash, ("gitward.dev/prune", "disabled")]), "u1", "applyset-x"), Recheck::Keep);
        assert!(matches!(recheck(&member(&[hash]), "u2", "applyset-x"), Recheck::Skip(_)));
    }
}
