//! The health step of a sync, as the engine serves it: which objects a health wait covers (what
//! the sync changed, and the members an earlier wait left not `Current`), and the result its
//! outcome gives the unit. Running the wait is the caller's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::follow::result_of;
use crate::changeset::ChangeSet;
use crate::cluster::cache::MetadataCache;
use crate::cluster::inventory::PART_OF;
use crate::health::record::SyncResult;
use crate::health::wait::{HealthWait, Target};
use crate::health::{Counts, Health, Status, bears_health, survey};
use crate::object::{GroupKind, ObjectRef};
use crate::plan::Desired;

/// What the engine last judged of the unit's health: the members that were not `Current`
/// when a health wait (or a survey, or a followed change) last judged them, and of those the
/// `Failed` ones. `None` of either until a judgement of this engine: a fresh engine reads the
/// unit's members once ([`survey`]) before its first wait.
#[derive(Default)]
pub(super) struct Judgement {
    /// Members not `Current` when last judged: targets of the next wait too, so a sync that
    /// changes nothing still waits for the Deployment an earlier revision left unhealthy.
    unhealthy: Option<Vec<Target>>,
    /// Of `unhealthy`, those whose health was `Failed`: the rest are in progress.
    failed: HashSet<ObjectRef>,
}

impl Judgement {
    /// Whether this engine has judged the unit yet.
    pub(super) fn is_judged(&self) -> bool {
        self.unhealthy.is_some()
    }

    /// The members last judged not `Current`.
    pub(super) fn unhealthy(&self) -> impl Iterator<Item = &Target> {
        self.unhealthy.iter().flatten()
    }

    /// Replaces the judgement with `unhealthy`, the members found not `Current` with their
    /// health.
    pub(super) fn judged(&mut self, unhealthy: Vec<(Target, Health)>) {
        self.failed = unhealthy.iter().filter(|(_, h)| *h == Health::Failed).map(|(t, _)| t.object.clone()).collect();
        self.unhealthy = Some(unhealthy.into_iter().map(|(t, _)| t).collect());
    }

    /// [`Judgement::judged`] from a survey's statuses.
    pub(super) fn judged_statuses(&mut self, found: Vec<(Target, Status)>) {
        self.judged(found.into_iter().map(|(t, s)| (t, s.health)).collect());
    }

    /// Folds one member's health into the judgement: `None` (gone) or `Current` leaves the
    /// members not `Current`; any other joins them (`Failed`: degraded). Nothing before the
    /// first judgement.
    pub(super) fn fold(&mut self, target: &Target, health: Option<Health>) {
        let Some(unhealthy) = self.unhealthy.as_mut() else { return };
        unhealthy.retain(|t| t.object != target.object);
        self.failed.remove(&target.object);
        match health {
            None | Some(Health::Current) => {}
            Some(health) => {
                unhealthy.push(target.clone());
                if health == Health::Failed {
                    self.failed.insert(target.object.clone());
                }
            }
        }
    }

    /// The unit's result as last judged ([`result_of`]), over the members git holds (`held`:
    /// the last sync's desired objects; `None`, every member judged).
    pub(super) fn result(&self, held: Option<&[Desired]>) -> SyncResult {
        let held: Option<HashSet<&ObjectRef>> = held.map(|d| d.iter().map(|d| &d.object).collect());
        let held = |o: &ObjectRef| held.as_ref().is_none_or(|h| h.contains(o));
        let unhealthy = self.unhealthy().filter(|t| held(&t.object)).count();
        let failed = self.failed.iter().filter(|o| held(o)).count();
        result_of(unhealthy, failed)
    }

    /// The unit's members by health bucket, counted as `gitward status` counts them: every
    /// member `cache` holds, `Current` unless the last judgement found it not `Current`
    /// (`Failed`: degraded; any other: progressing); members of kinds without health are
    /// healthy, and members not in the cluster are not counted. `None` before the first
    /// judgement.
    pub(super) fn counts(&self, cache: &MetadataCache) -> Option<Counts> {
        let unhealthy = self.unhealthy.as_ref()?;
        let present: Vec<&ObjectRef> = unhealthy.iter().map(|t| &t.object).filter(|o| cache.get(o).is_some()).collect();
        let degraded = present.iter().filter(|o| self.failed.contains(**o)).count();
        Some(Counts {
            healthy: cache.len().saturating_sub(present.len()),
            progressing: present.len() - degraded,
            degraded,
        })
    }
}

/// The members of `desired`'s kinds that bear health and are not `Current`, and that `desired`
/// holds (a member left behind by a refused prune is not this revision's): one list per kind
/// through `client`, selected by the ApplySet `applyset_id`. None when nothing was synced yet.
///
/// Errors: [`survey::Error`] when a kind cannot be listed.
pub(super) async fn read_unhealthy(
    client: &kube::Client,
    applyset_id: &str,
    desired: Option<&[Desired]>,
) -> std::result::Result<Vec<(Target, Status)>, survey::Error> {
    let Some(desired) = desired else { return Ok(Vec::new()) };
    let mut kinds: BTreeMap<&GroupKind, survey::Kind> = BTreeMap::new();
    for d in desired.iter().filter(|d| bears_health(&d.object.gk)) {
        kinds.entry(&d.object.gk).or_insert_with(|| survey::Kind {
            gk: d.object.gk.clone(),
            resource: d.resource.clone(),
            namespaced: d.object.namespace.is_some(),
        });
    }
    let kinds: Vec<survey::Kind> = kinds.into_values().collect();
    let selector = format!("{PART_OF}={applyset_id}");
    let held: HashSet<&ObjectRef> = desired.iter().map(|d| &d.object).collect();
    let found = survey::not_current(client, &kinds, &selector).await?;
    Ok(found.into_iter().filter(|(t, _)| held.contains(&t.object)).collect())
}

/// The members `cache` saw touched since the last take that `desired` holds and whose kind
/// bears health, as wait targets (their resource from the desired objects), in ref order.
pub(super) fn take_touched(cache: &MetadataCache, desired: Option<&[Desired]>) -> Vec<Target> {
    let touched = cache.touched().take();
    let Some(desired) = desired else { return Vec::new() };
    if touched.is_empty() {
        return Vec::new();
    }
    let resources: HashMap<&ObjectRef, &Arc<ApiResource>> =
        desired.iter().filter(|d| bears_health(&d.object.gk)).map(|d| (&d.object, &d.resource)).collect();
    let mut targets: Vec<Target> = touched
        .into_iter()
        .filter_map(|object| {
            let resource = Arc::clone(resources.get(&object)?);
            Some(Target { object, resource })
        })
        .collect();
    targets.sort_by(|a, b| a.object.cmp(&b.object));
    targets
}

/// The targets of `wait` that are not `Current` (or not seen yet: in progress), with their
/// health.
pub(super) fn not_current(wait: &HealthWait) -> Vec<(Target, Health)> {
    let statuses = wait.statuses();
    wait.not_current()
        .into_iter()
        .map(|t| {
            let health = statuses.get(&t.object).map_or(Health::InProgress, |s| s.health);
            (t, health)
        })
        .collect()
}

/// The objects a sync created, adopted, configured or drift-corrected, with their resources.
pub(super) fn health_targets(desired: &[Desired], changes: &ChangeSet) -> Vec<Target> {
    let resources: HashMap<&ObjectRef, &Arc<ApiResource>> = desired.iter().map(|d| (&d.object, &d.resource)).collect();
    changes
        .entries
        .iter()
        .filter(|e| e.action.applied_change())
        .filter_map(|e| {
            let resource = resources.get(&e.object)?;
            Some(Target { object: e.object.clone(), resource: Arc::clone(resource) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changeset::Action;
    use crate::sync::desired::tests::configmap;

    #[test]
    fn health_targets_are_the_objects_whose_change_was_applied_with_their_resource() {
        let desired = [configmap("created"), configmap("same"), configmap("failed"), configmap("adopted")];
        let mut changes = ChangeSet::default();
        changes.push(desired[0].object.clone(), Action::Created, None);
        changes.push(desired[1].object.clone(), Action::Unchanged, None);
        changes.push(desired[2].object.clone(), Action::Failed, Some("denied".into()));
        changes.push(desired[3].object.clone(), Action::Adopted, None);
        let pruned = ObjectRef::new(GroupKind::new("", "ConfigMap"), Some("shop"), "gone");
        changes.push(pruned, Action::Pruned, None);
        let targets = health_targets(&desired, &changes);
        let names: Vec<&str> = targets.iter().map(|t| t.object.name.as_str()).collect();
        assert_eq!(names, ["created", "adopted"]);
        assert!(Arc::ptr_eq(&targets[0].resource, &desired[0].resource), "the resource is shared, not copied");
    }
}
