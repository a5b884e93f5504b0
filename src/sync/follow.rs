//! Following the unit's health between syncs. A health wait judges what a sync changed; after
//! it, a Deployment can still fail (`ProgressDeadlineExceeded`) or recover without any sync.
//! The metadata watches note every member of a kind with health whose resourceVersion moved
//! ([`crate::cluster::cache::MetadataCache::touched`]: a controller's status update moves it);
//! [`Engine::follow_health`] reads those members again (one GET each, or one survey of the
//! unit's kinds when many moved), folds their health into the unit's judgement (the members
//! not `Current`, which the next wait covers too) and, when the unit's result changes, rewrites
//! `gitward.dev/last-result` on the ApplySet parent, so `depends_on` and any reader of the
//! record see the unit as it is. A sync's health wait, while it runs, is the only judge: the
//! caller follows only between syncs, and a wait takes the members touched before it as
//! targets of its own ([`Engine::health_wait`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::Engine;
use crate::health::record::{Record, SyncResult};
use crate::health::wait::Target;
use crate::health::{Counts, Health, Status, bears_health, survey};
use crate::object::ObjectRef;

/// Members read one by one, at most; past this many touched at once, one survey of the unit's
/// kinds (a paged list per kind) reads them all for less.
pub const FOLLOW_GETS: usize = 32;

/// What following the unit's health found ([`Engine::follow_health`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed {
    /// The unit's name.
    pub unit: String,
    /// The unit's health as now judged: `healthy` (every member with health `Current`),
    /// `degraded` (one is `Failed`) or `progressing`.
    pub result: SyncResult,
    /// The result judged before this read.
    pub before: SyncResult,
    /// The members by health bucket, counted as `gitward status` counts them
    /// ([`Engine::members_health`]).
    pub counts: Counts,
    /// The members read, with their status (`None`: no longer in the cluster).
    pub read: Vec<(ObjectRef, Option<Status>)>,
    /// True when `read` holds every member not `Current` (a survey read them all), not only
    /// those touched.
    pub whole: bool,
}

impl Followed {
    /// True when the unit's result changed with this read.
    pub fn changed(&self) -> bool {
        self.result != self.before
    }
}

/// The unit's result from its members not `Current`: `degraded` when one is `Failed`,
/// `progressing` when any other is not `Current`, else `healthy`.
pub fn result_of(unhealthy: usize, failed: usize) -> SyncResult {
    if failed > 0 {
        SyncResult::Degraded
    } else if unhealthy > 0 {
        SyncResult::Progressing
    } else {
        SyncResult::Healthy
    }
}

/// The result a followed judgement writes over the parent's `recorded` one: `Some(result)` when
/// they differ and the recorded one is a judgement of health that may be replaced — not
/// `failed` (objects did not apply: only a sync ends that) and not while a wait is recorded in
/// progress (the wait judges).
pub fn rewrite(recorded: Option<&Record>, result: SyncResult) -> Option<SyncResult> {
    let recorded = recorded?;
    let replaceable = matches!(
        recorded.result,
        SyncResult::Healthy | SyncResult::Progressing | SyncResult::Degraded | SyncResult::Applied
    );
    (replaceable && recorded.waiting.is_none() && recorded.result != result).then_some(result)
}

impl Engine {
    /// The members touched since the last take that git holds and whose kind bears health,
    /// as wait targets (their resource from the desired objects).
    pub(super) fn take_touched(&self) -> Vec<Target> {
        let touched = self.cache().touched().take();
        let Some((_, desired)) = &self.last.desired else { return Vec::new() };
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

    /// Judges again the members touched since the last judgement ([`Engine::take_touched`]):
    /// one GET each (at most [`FOLLOW_GETS`]; more are read by one survey of the unit's kinds),
    /// folded into the unit's judgement. When the unit's result changes, the parent's record
    /// says so ([`rewrite`]; a failed write is logged and tried again by the next change or
    /// sync). `None` when nothing was read: nothing touched that git holds with health, or this
    /// engine has not judged the unit yet (its first wait reads every member). A read that
    /// fails is logged and leaves that member's health as it was.
    pub async fn follow_health(&mut self) -> Option<Followed> {
        let targets = self.take_touched();
        self.record.unhealthy.as_ref()?;
        if targets.is_empty() {
            return None;
        }
        let before = self.judged_result();
        let (read, whole) = if targets.len() > FOLLOW_GETS {
            match self.read_unhealthy().await {
                Ok(found) => {
                    let read = found.iter().map(|(t, s)| (t.object.clone(), Some(s.clone()))).collect();
                    self.judged_statuses(found);
                    (read, true)
                }
                Err(e) => {
                    let error = crate::telemetry::error_chain(&e);
                    tracing::warn!(unit = %self.unit.name, error, "could not read the unit's health");
                    return None;
                }
            }
        } else {
            (self.read_each(&targets).await, false)
        };
        let result = self.judged_result();
        if let Some(result) = rewrite(self.record.recorded.as_ref(), result) {
            let record = self.record.recorded.clone().map(|r| Record { result, ..r });
            if let Err(e) = self.write_record(record, self.record.attempt.clone()).await {
                let error = crate::telemetry::error_chain(&e);
                tracing::warn!(unit = %self.unit.name, error, "could not record the unit's health on the inventory");
            }
        }
        let counts = self.members_health().unwrap_or_default();
        Some(Followed { unit: self.unit.name.clone(), result, before, counts, read, whole })
    }

    /// Reads each of `targets` once and folds its health into the judgement; those whose read
    /// failed are logged and left out.
    async fn read_each(&mut self, targets: &[Target]) -> Vec<(ObjectRef, Option<Status>)> {
        let reads = targets.iter().map(|t| survey::judge_one(self.view.client(), t));
        let answers = futures::future::join_all(reads).await;
        let mut read = Vec::with_capacity(targets.len());
        for (target, answer) in targets.iter().zip(answers) {
            match answer {
                Ok(status) => {
                    self.fold(target, status.as_ref().map(|s| s.health));
                    read.push((target.object.clone(), status));
                }
                Err(e) => {
                    let error = crate::telemetry::error_chain(&e);
                    tracing::warn!(unit = %self.unit.name, object = %target.object, error, "could not read a member's health");
                }
            }
        }
        read
    }

    /// Folds one member's health into the judgement: `None` (gone) or `Current` leaves the
    /// members not `Current`; any other joins them (`Failed`: degraded).
    fn fold(&mut self, target: &Target, health: Option<Health>) {
        let Some(unhealthy) = self.record.unhealthy.as_mut() else { return };
        unhealthy.retain(|t| t.object != target.object);
        self.record.unhealthy_failed.remove(&target.object);
        match health {
            None | Some(Health::Current) => {}
            Some(health) => {
                unhealthy.push(target.clone());
                if health == Health::Failed {
                    self.record.unhealthy_failed.insert(target.object.clone());
                }
            }
        }
    }

    /// Replaces the judgement with `found`, every member not `Current` with its status.
    fn judged_statuses(&mut self, found: Vec<(Target, Status)>) {
        self.record.unhealthy_failed =
            found.iter().filter(|(_, s)| s.health == Health::Failed).map(|(t, _)| t.object.clone()).collect();
        self.record.unhealthy = Some(found.into_iter().map(|(t, _)| t).collect());
    }

    /// The unit's result as last judged ([`result_of`]), over the members git holds.
    fn judged_result(&self) -> SyncResult {
        let held: Option<HashSet<&ObjectRef>> =
            self.last.desired.as_ref().map(|(_, d)| d.iter().map(|d| &d.object).collect());
        let held = |o: &ObjectRef| held.as_ref().is_none_or(|h| h.contains(o));
        let unhealthy = self.record.unhealthy.iter().flatten().filter(|t| held(&t.object)).count();
        let failed = self.record.unhealthy_failed.iter().filter(|o| held(o)).count();
        result_of(unhealthy, failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(result: SyncResult, waiting: bool) -> Record {
        let waiting = waiting.then(|| crate::health::record::Waiting::now::<&ObjectRef>(&[]));
        Record { revision: "3f2a".into(), applied_at: "2026-12-02T00:00:00Z".into(), result, waiting, path_tree: None }
    }

    #[test]
    fn a_failed_member_degrades_and_any_other_not_current_is_progressing() {
        assert_eq!(result_of(0, 0), SyncResult::Healthy);
        assert_eq!(result_of(2, 0), SyncResult::Progressing);
        assert_eq!(result_of(2, 1), SyncResult::Degraded);
    }

    #[test]
    fn the_record_follows_health_but_never_over_a_failure_or_a_wait_in_progress() {
        let healthy = record(SyncResult::Healthy, false);
        assert_eq!(rewrite(Some(&healthy), SyncResult::Degraded), Some(SyncResult::Degraded));
        assert_eq!(rewrite(Some(&healthy), SyncResult::Healthy), None, "nothing changed: nothing written");
        let degraded = record(SyncResult::Degraded, false);
        assert_eq!(rewrite(Some(&degraded), SyncResult::Healthy), Some(SyncResult::Healthy), "recovered");
        assert_eq!(rewrite(Some(&record(SyncResult::Failed, false)), SyncResult::Healthy), None);
        assert_eq!(rewrite(Some(&record(SyncResult::Progressing, true)), SyncResult::Degraded), None);
        assert_eq!(rewrite(None, SyncResult::Degraded), None, "a unit never recorded");
    }
}
