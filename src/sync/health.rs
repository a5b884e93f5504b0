//! The health step of a sync, as the engine serves it: which objects a health wait covers (what
//! the sync changed, and the members an earlier wait left not `Current`), and the result its
//! outcome gives the unit. Running the wait is the caller's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::{Engine, Report};
use crate::changeset::ChangeSet;
use crate::cluster::inventory::PART_OF;
use crate::health::record::SyncResult;
use crate::health::wait::{HealthWait, Target, WaitEnd};
use crate::health::{Counts, Health, survey};
use crate::object::{GroupKind, ObjectRef};
use crate::plan::Desired;

impl Engine {
    /// A health wait ([`crate::health::wait`]) over what `report`'s sync changed, over the
    /// members an earlier wait left not `Current` that git still holds (a sync that changes
    /// nothing still waits for the Deployment an earlier revision never rolled out), and over
    /// the members whose status moved since they were last judged ([`Engine::take_touched`]):
    /// a wait with no targets then means every member was judged `Current`, not assumed so. Before
    /// this engine's first judgement (a daemon's first sync, every `gitward sync --wait`) the
    /// unit's health-bearing members are read once ([`survey`]) to learn which those are; the
    /// wait then covers every member that was not `Current` ([`HealthWait::covers_all`]). A
    /// failed read is logged and the wait covers what the sync changed.
    pub async fn health_wait(&mut self, report: &Report) -> HealthWait {
        let selector = format!("{PART_OF}={}", self.parent.inventory.id);
        let covers_all = self.record.unhealthy.is_none() && self.survey().await;
        let desired: HashSet<&ObjectRef> =
            self.last.desired.iter().flat_map(|(_, d)| d.iter().map(|d| &d.object)).collect();
        let mut targets = report.sent.health_targets.clone();
        let mut changed: HashSet<ObjectRef> = targets.iter().map(|t| t.object.clone()).collect();
        for t in self.record.unhealthy.iter().flatten() {
            if desired.contains(&t.object) && changed.insert(t.object.clone()) {
                targets.push(t.clone());
            }
        }
        // Members whose status moved since they were last judged are judged by this wait.
        for t in self.take_touched() {
            if changed.insert(t.object.clone()) {
                targets.push(t);
            }
        }
        let wait = HealthWait::new(self.view.writer().clone(), selector, &targets);
        if covers_all { wait.covering_all() } else { wait }
    }

    /// The result a health wait that ended with `outcome` (`None`: cancelled) gives the unit,
    /// and what later waits must wait for. `healthy` only when every member with health is
    /// `Current`: when the wait covered only some of them, the unit's health-bearing members
    /// are read once more ([`survey`]) and any that is not `Current` makes it `progressing`
    /// (`degraded` if one is `Failed`). A failed read makes it `progressing` too (unknown is
    /// not healthy). A wait with no targets (call it with `Healthy` without running it) reads
    /// nothing when the last judgement left nothing unhealthy.
    pub async fn judge_health(&mut self, wait: &HealthWait, outcome: Option<WaitEnd>) -> SyncResult {
        match outcome {
            Some(WaitEnd::Healthy) if wait.covers_all() => {
                self.judged(Vec::new());
                SyncResult::Healthy
            }
            // Nothing was waited on, and the last judgement found nothing else unhealthy: a
            // resync that changes nothing reads nothing.
            Some(WaitEnd::Healthy) if wait.targets().is_empty() && self.record.unhealthy.is_some() => {
                SyncResult::Healthy
            }
            Some(WaitEnd::Healthy) => {
                let before = self.record.unhealthy.take();
                match self.read_unhealthy().await {
                    Ok(found) if found.is_empty() => {
                        self.judged(Vec::new());
                        SyncResult::Healthy
                    }
                    Ok(found) => {
                        let failed = found.iter().any(|(_, s)| s.health == Health::Failed);
                        self.judged(found.into_iter().map(|(t, s)| (t, s.health)).collect());
                        if failed { SyncResult::Degraded } else { SyncResult::Progressing }
                    }
                    Err(e) => {
                        tracing::warn!(unit = %self.unit.name, error = %crate::telemetry::error_chain(&e), "could not read the unit's health; not recorded healthy");
                        self.record.unhealthy = before;
                        SyncResult::Progressing
                    }
                }
            }
            Some(WaitEnd::Degraded) => {
                self.judged(not_current(wait));
                SyncResult::Degraded
            }
            Some(WaitEnd::TimedOut) | None => {
                self.judged(not_current(wait));
                SyncResult::Progressing
            }
        }
    }

    /// Remembers `unhealthy`, the members found not `Current` with their health, as the
    /// unit's judgement: the targets of the next waits, and its health counts.
    fn judged(&mut self, unhealthy: Vec<(Target, Health)>) {
        self.record.unhealthy_failed =
            unhealthy.iter().filter(|(_, h)| *h == Health::Failed).map(|(t, _)| t.object.clone()).collect();
        self.record.unhealthy = Some(unhealthy.into_iter().map(|(t, _)| t).collect());
    }

    /// The unit's members by health bucket, counted as `gitward status` counts them: every
    /// member the cache holds, `Current` unless the last judgement found it not `Current`
    /// (`Failed`: degraded; any other: progressing); members of kinds without health are
    /// healthy, and members not in the cluster are not counted. `None` until this engine has
    /// judged the unit (no health wait ran yet, or `health_timeout = 0`).
    pub fn members_health(&self) -> Option<Counts> {
        let unhealthy = self.record.unhealthy.as_ref()?;
        let cache = self.cache();
        let present: Vec<&ObjectRef> = unhealthy.iter().map(|t| &t.object).filter(|o| cache.get(o).is_some()).collect();
        let degraded = present.iter().filter(|o| self.record.unhealthy_failed.contains(**o)).count();
        Some(Counts {
            healthy: cache.len().saturating_sub(present.len()),
            progressing: present.len() - degraded,
            degraded,
        })
    }

    /// Reads the unit's health-bearing members once ([`survey`]) and remembers those not
    /// `Current` as targets of the next waits; false (logged) when the read failed.
    pub(super) async fn survey(&mut self) -> bool {
        match self.read_unhealthy().await {
            Ok(found) => {
                self.judged(found.into_iter().map(|(t, s)| (t, s.health)).collect());
                true
            }
            Err(e) => {
                tracing::warn!(unit = %self.unit.name, error = %crate::telemetry::error_chain(&e), "could not read the unit's health");
                false
            }
        }
    }

    /// The members of the kinds git holds that bear health and are not `Current`, and that git
    /// still holds (a member left behind by a refused prune is not this revision's).
    pub(super) async fn read_unhealthy(
        &self,
    ) -> std::result::Result<Vec<(Target, crate::health::Status)>, survey::Error> {
        let Some((_, desired)) = &self.last.desired else { return Ok(Vec::new()) };
        let mut kinds: BTreeMap<&GroupKind, survey::Kind> = BTreeMap::new();
        for d in desired.iter().filter(|d| crate::health::bears_health(&d.object.gk)) {
            kinds.entry(&d.object.gk).or_insert_with(|| survey::Kind {
                gk: d.object.gk.clone(),
                resource: d.resource.clone(),
                namespaced: d.object.namespace.is_some(),
            });
        }
        let kinds: Vec<survey::Kind> = kinds.into_values().collect();
        let selector = format!("{PART_OF}={}", self.parent.inventory.id);
        let held: HashSet<&ObjectRef> = desired.iter().map(|d| &d.object).collect();
        let found = survey::not_current(self.view.client(), &kinds, &selector).await?;
        Ok(found.into_iter().filter(|(t, _)| held.contains(&t.object)).collect())
    }
}

/// The targets of `wait` that are not `Current` (or not seen yet: in progress), with their
/// health.
fn not_current(wait: &HealthWait) -> Vec<(Target, Health)> {
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
