//! The engine's health verbs: the wait after a sync, its judgement, and the unit's health
//! followed between syncs. What a wait covers and the judgement kept are
//! [`crate::sync::health`]'s; the record they change is the parent's.

use std::collections::HashSet;

use super::Engine;
use crate::health::record::{Record, SyncResult};
use crate::health::wait::{HealthWait, Target, WaitEnd};
use crate::health::{Counts, Health, Status, survey};
use crate::object::ObjectRef;
use crate::sync::Report;
use crate::sync::follow::{FOLLOW_GETS, Followed, rewrite};
use crate::sync::health::{not_current, read_unhealthy, take_touched};

impl Engine {
    /// A health wait ([`crate::health::wait`]) over what `report`'s sync changed, over the
    /// members an earlier wait left not `Current` that git still holds (a sync that changes
    /// nothing still waits for the Deployment an earlier revision never rolled out), and over
    /// the members whose status moved since they were last judged ([`take_touched`]):
    /// a wait with no targets then means every member was judged `Current`, not assumed so. Before
    /// this engine's first judgement (a daemon's first sync, every `gitward sync --wait`) the
    /// unit's health-bearing members are read once ([`survey`]) to learn which those are; the
    /// wait then covers every member that was not `Current` ([`HealthWait::covers_all`]). A
    /// failed read is logged and the wait covers what the sync changed.
    pub async fn health_wait(&mut self, report: &Report) -> HealthWait {
        let selector = format!("{}={}", crate::cluster::inventory::PART_OF, self.parent.inventory().id);
        let covers_all = !self.health.is_judged() && self.survey().await;
        let desired: HashSet<&ObjectRef> = self.last_desired().into_iter().flatten().map(|d| &d.object).collect();
        let mut targets = report.sent.health_targets.clone();
        let mut changed: HashSet<ObjectRef> = targets.iter().map(|t| t.object.clone()).collect();
        for t in self.health.unhealthy() {
            if desired.contains(&t.object) && changed.insert(t.object.clone()) {
                targets.push(t.clone());
            }
        }
        // Members whose status moved since they were last judged are judged by this wait.
        for t in take_touched(self.view.cache(), self.last_desired()) {
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
                self.health.judged(Vec::new());
                SyncResult::Healthy
            }
            // Nothing was waited on, and the last judgement found nothing else unhealthy: a
            // resync that changes nothing reads nothing.
            Some(WaitEnd::Healthy) if wait.targets().is_empty() && self.health.is_judged() => SyncResult::Healthy,
            Some(WaitEnd::Healthy) => match self.read_unhealthy().await {
                Ok(found) if found.is_empty() => {
                    self.health.judged(Vec::new());
                    SyncResult::Healthy
                }
                Ok(found) => {
                    let failed = found.iter().any(|(_, s)| s.health == Health::Failed);
                    self.health.judged(found.into_iter().map(|(t, s)| (t, s.health)).collect());
                    if failed { SyncResult::Degraded } else { SyncResult::Progressing }
                }
                Err(e) => {
                    tracing::warn!(unit = %self.unit.name, error = %crate::telemetry::error_chain(&e), "could not read the unit's health; not recorded healthy");
                    SyncResult::Progressing
                }
            },
            Some(WaitEnd::Degraded) => {
                self.health.judged(not_current(wait));
                SyncResult::Degraded
            }
            Some(WaitEnd::TimedOut) | None => {
                self.health.judged(not_current(wait));
                SyncResult::Progressing
            }
        }
    }

    /// The unit's members by health bucket, counted as `gitward status` counts them: every
    /// member the cache holds, `Current` unless the last judgement found it not `Current`
    /// (`Failed`: degraded; any other: progressing); members of kinds without health are
    /// healthy, and members not in the cluster are not counted. `None` until this engine has
    /// judged the unit (no health wait ran yet, or `health_timeout = 0`).
    pub fn members_health(&self) -> Option<Counts> {
        self.health.counts(self.view.cache())
    }

    /// Reads the unit's health-bearing members once ([`survey`]) and remembers those not
    /// `Current` as targets of the next waits; false (logged) when the read failed.
    pub(super) async fn survey(&mut self) -> bool {
        match self.read_unhealthy().await {
            Ok(found) => {
                self.health.judged(found.into_iter().map(|(t, s)| (t, s.health)).collect());
                true
            }
            Err(e) => {
                tracing::warn!(unit = %self.unit.name, error = %crate::telemetry::error_chain(&e), "could not read the unit's health");
                false
            }
        }
    }

    /// The members git holds that bear health and are not `Current` ([`read_unhealthy`]).
    async fn read_unhealthy(&self) -> std::result::Result<Vec<(Target, Status)>, survey::Error> {
        read_unhealthy(self.view.client(), &self.parent.inventory().id, self.last_desired()).await
    }

    /// Judges again the members touched since the last judgement ([`take_touched`]):
    /// one GET each (at most [`FOLLOW_GETS`]; more are read by one survey of the unit's kinds),
    /// folded into the unit's judgement. When the unit's result changes, the parent's record
    /// says so ([`rewrite`]; a failed write is logged and tried again by the next change or
    /// sync). `None` when nothing was read: nothing touched that git holds with health, or this
    /// engine has not judged the unit yet (its first wait reads every member). A read that
    /// fails is logged and leaves that member's health as it was.
    pub async fn follow_health(&mut self) -> Option<Followed> {
        let targets = take_touched(self.view.cache(), self.last_desired());
        if !self.health.is_judged() {
            return None;
        }
        if targets.is_empty() {
            return None;
        }
        let before = self.health.result(self.last_desired());
        let (read, whole) = if targets.len() > FOLLOW_GETS {
            match self.read_unhealthy().await {
                Ok(found) => {
                    let read = found.iter().map(|(t, s)| (t.object.clone(), Some(s.clone()))).collect();
                    self.health.judged_statuses(found);
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
        let result = self.health.result(self.last_desired());
        if let Some(result) = rewrite(self.parent.recorded(), result) {
            let record = self.parent.recorded().cloned().map(|r| Record { result, ..r });
            if let Err(e) = self.parent.rewrite_record(&self.view, &mut self.hooks, record).await {
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
                    self.health.fold(target, status.as_ref().map(|s| s.health));
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
}
