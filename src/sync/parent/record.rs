//! The record of a sync on the ApplySet parent: the revision and result applied, and the last
//! attempt (revision, error, objects not applied), written only when they change; and the
//! health wait in progress, written with the apply so that `gitward status` names the revision
//! in the cluster while its health is waited on.

use super::super::hooks::Hooks;
use super::super::outcome::Failure;
use super::super::state::ClusterView;
use super::super::{Error, Report, Result};
use super::ApplySetParent;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::control::HANDLED_AT;
use crate::cluster::owner::UNIT;
use crate::health::record::{Attempt, NotApplied, Record, SyncResult, Waiting};
use crate::health::wait::HealthWait;
use crate::source::Revision;
use std::time::SystemTime;

impl ApplySetParent {
    /// Records `result` for `revision` on the ApplySet parent ([`crate::health::record`]),
    /// keeping the recorded attempt: one server-side apply of the parent, carrying its current
    /// contents, and only when the revision or the result differs from what the parent
    /// records — a sync that changes neither sends nothing. Returns whether it wrote.
    ///
    /// Errors: [`Error::Cluster`] when the parent cannot be read or written.
    pub(in crate::sync) async fn record(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        revision: &Revision,
        result: SyncResult,
    ) -> Result<bool> {
        let attempt = self.attempt.clone();
        self.write_record(view, hooks, Some(Record::now(revision.to_string(), result)), attempt).await
    }

    /// Records a sync's `report` with `result`: the revision and result ([`ApplySetParent::record`]),
    /// and the attempt — the revision, and unless every object applied and the prune ran (or
    /// had nothing to do), `gitward.dev/last-error` and the objects not applied; a clean sync
    /// clears them. A sync of the revision already recorded that judged nothing (`judged`
    /// false: no wait ran, or it had nothing to wait for and read nothing) keeps what the
    /// parent says of that revision's result, unless that was `failed`. A self-heal ([`Report::heal`]) keeps the attempt.
    /// Writes only when something recorded changes; returns whether it wrote.
    ///
    /// Errors: as [`ApplySetParent::record`].
    pub(in crate::sync) async fn record_sync(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        report: &Report,
        result: SyncResult,
        judged: bool,
    ) -> Result<bool> {
        let revision = report.revision.to_string();
        // A judgement of this revision stands until another judges it; a failure never does.
        let same_revision =
            self.recorded.as_ref().is_some_and(|r| r.revision == revision && r.result != SyncResult::Failed);
        let says_nothing = result == SyncResult::Applied || (result == SyncResult::Healthy && !judged);
        let record = if says_nothing && same_revision {
            self.recorded.clone().map(|r| Record { waiting: None, ..r })
        } else {
            Some(self.applied_record(report, result))
        };
        let attempt = if report.heal { self.attempt.clone() } else { attempt_of(&revision, &report.changes) };
        self.write_record(view, hooks, record, attempt).await
    }

    /// Records, with the apply of `report`'s revision and before `wait` runs, what the parent
    /// must say meanwhile: that revision, its apply time, `progressing`, the wait in progress
    /// ([`Waiting`]: since now, for `wait`'s targets) and the attempt. One write of the parent;
    /// [`ApplySetParent::record_sync`] after the wait replaces the wait with its result. Returns
    /// whether it wrote.
    ///
    /// Errors: as [`ApplySetParent::record`].
    pub(in crate::sync) async fn record_waiting(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        report: &Report,
        wait: &HealthWait,
    ) -> Result<bool> {
        let objects: Vec<&crate::object::ObjectRef> = wait.targets().iter().map(|t| &t.object).collect();
        let record =
            Record { waiting: Some(Waiting::now(&objects)), ..self.applied_record(report, SyncResult::Progressing) };
        let attempt =
            if report.heal { self.attempt.clone() } else { attempt_of(&report.revision.to_string(), &report.changes) };
        self.write_record(view, hooks, Some(record), attempt).await
    }

    /// What the unit follows, as an unresolved attempt names it: the git ref or OCI tag, or
    /// for a chart unit `<chart>@<version range>`.
    fn followed(&self) -> String {
        match &self.unit.helm.chart {
            Some(chart) => format!("{}@{}", chart.chart, chart.version),
            None => self.unit.reference.clone(),
        }
    }

    /// The record of `report`'s revision with `result`: applied when the parent says it was, if
    /// it records that revision already, else when `report`'s apply ended; with the report's
    /// path tree (a self-heal keeps the one recorded for the revision).
    fn applied_record(&self, report: &Report, result: SyncResult) -> Record {
        let revision = report.revision.to_string();
        match self.recorded.as_ref().filter(|r| r.revision == revision) {
            Some(r) => {
                let kept = if report.heal { r.path_tree.clone() } else { None };
                let path_tree = report.path_tree.clone().or(kept);
                Record { revision, applied_at: r.applied_at.clone(), result, waiting: None, path_tree }
            }
            None => Record {
                path_tree: report.path_tree.clone(),
                ..Record::applied(revision, report.sent.applied_at.elapsed(), result)
            },
        }
    }

    /// Records that the sync in progress failed as a whole with `failure` (a parse or render
    /// error, an unknown kind, git or the cluster unreachable): `gitward.dev/last-error` (its
    /// masked [`Failure::message`]) and
    /// what was attempted — the revision, or when the ref resolved to none (not found, the
    /// fetch failed) the ref, never the revision applied before —, leaving the last applied
    /// revision and its result as they are (a wait the parent says is in progress is over:
    /// it is removed). With `retry_at` (the daemon's next try, when it backs off), the same
    /// write records it as `gitward.dev/retry-at`; a one-shot sync passes `None`. Writes only
    /// when that changes, so without a retry time the retries of one broken revision write
    /// once (with one, each retry writes its new time). Returns whether it wrote.
    ///
    /// Errors: as [`ApplySetParent::record`] (an unreachable cluster cannot be written to either).
    pub(in crate::sync) async fn record_failure(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        failure: &Failure,
        retry_at: Option<SystemTime>,
    ) -> Result<bool> {
        if self.known.is_none() {
            // The recorded attempt is compared with the parent's, which a fresh engine reads.
            let parent = self.read(view, hooks).await?;
            self.known = parent;
        }
        let chain = &failure.message;
        let refused = match &failure.error {
            Error::Source(crate::source::Error::Unverified { revision, .. }) => Some(revision.to_string()),
            _ => None,
        };
        let attempt = match refused.or_else(|| self.attempting.as_ref().map(ToString::to_string)) {
            Some(revision) => Attempt::failed(revision, chain),
            None => Attempt::unresolved(self.followed(), chain),
        };
        let attempt = match retry_at {
            Some(at) => attempt.retrying_at(at),
            None => attempt,
        };
        let record = self.recorded.clone().map(|r| Record { waiting: None, ..r });
        self.write_record(view, hooks, record, attempt).await
    }

    /// Writes `record` with the attempt as it stands ([`ApplySetParent::write_record`]): the
    /// unit's result followed between syncs.
    ///
    /// Errors: as [`ApplySetParent::record`].
    pub(in crate::sync) async fn rewrite_record(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        record: Option<Record>,
    ) -> Result<bool> {
        let attempt = self.attempt.clone();
        self.write_record(view, hooks, record, attempt).await
    }

    /// Writes `record` and `attempt` on the parent unless both say what it records already
    /// (the record's time does not count).
    pub(in crate::sync) async fn write_record(
        &mut self,
        view: &ClusterView,
        hooks: &mut Hooks,
        record: Option<Record>,
        attempt: Attempt,
    ) -> Result<bool> {
        let same_record = match (&self.recorded, &record) {
            (Some(a), Some(b)) => a.same_outcome(b),
            (a, b) => a.is_none() && b.is_none(),
        };
        // A request is answered by the record that ends its sync, not by the one written while
        // its health is waited on.
        let final_record = record.as_ref().is_none_or(|r| r.waiting.is_none());
        let handled = match &self.handling {
            Some(request) if final_record => Some(request.clone()),
            _ => self.handled.clone(),
        };
        let same_handled = handled == self.handled;
        if same_record && same_handled && self.attempt == attempt && hooks.recorded() {
            return Ok(false);
        }
        let mut annotations = record.as_ref().map(Record::annotations).unwrap_or_default();
        annotations.extend(attempt.annotations());
        annotations.insert(UNIT.to_string(), self.unit.name.clone());
        if let Some(ran) = hooks.ran() {
            annotations.insert(super::super::hooks::HOOKS_RAN.to_string(), ran.value());
        }
        if let Some(handled) = &handled {
            annotations.insert(HANDLED_AT.to_string(), handled.clone());
        }
        self.write(view, hooks, Some(&annotations), |existing| {
            existing.map(|p| p.contents.clone()).unwrap_or_default()
        })
        .await?;
        self.recorded = record;
        self.attempt = attempt;
        if final_record {
            self.handling = None;
        }
        self.handled = handled;
        Ok(true)
    }
}

/// The attempt a sync of `revision` with `changes` records: clean, or with the refused prune
/// and the objects that failed, were skipped or met a conflict (in ref order, so retries of
/// one failure record the same words and write nothing new).
fn attempt_of(revision: &str, changes: &ChangeSet) -> Attempt {
    let mut objects: Vec<NotApplied> = changes
        .entries
        .iter()
        .filter(|e| matches!(e.action, Action::Failed | Action::Skipped | Action::Conflict))
        .map(|e| NotApplied {
            object: e.object.to_string(),
            action: e.action.to_string(),
            reason: e.message.clone().unwrap_or_default(),
        })
        .collect();
    if objects.is_empty() && changes.prune_refused.is_none() {
        return Attempt::clean(revision);
    }
    objects.sort_by(|a, b| a.object.cmp(&b.object));
    Attempt::partial(revision, objects, changes.prune_refused.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{GroupKind, ObjectRef};

    fn cm(name: &str) -> ObjectRef {
        ObjectRef::new(GroupKind::new("", "ConfigMap"), Some("shop"), name)
    }

    #[test]
    fn a_sync_that_applied_everything_records_a_clean_attempt() {
        let mut changes = ChangeSet::default();
        changes.push(cm("a"), Action::Configured, None);
        changes.push(cm("b"), Action::Unchanged, None);
        assert_eq!(attempt_of("3f2a", &changes), Attempt::clean("3f2a"));
    }

    #[test]
    fn the_objects_not_applied_are_recorded_in_ref_order_with_the_refused_prune() {
        let mut changes = ChangeSet::default();
        changes.push(cm("z"), Action::Failed, Some("denied".into()));
        changes.push(cm("a"), Action::Conflict, Some("resourceVersion 2, live 3".into()));
        changes.push(cm("m"), Action::Configured, None);
        changes.push(cm("b"), Action::Skipped, None);
        changes.prune_refused = Some("would prune 2 of 4".into());
        let attempt = attempt_of("3f2a", &changes);
        let objects: Vec<(&str, &str)> =
            attempt.failed.iter().map(|o| (o.object.as_str(), o.action.as_str())).collect();
        assert_eq!(
            objects,
            [("ConfigMap/shop/a", "conflict"), ("ConfigMap/shop/b", "skipped"), ("ConfigMap/shop/z", "failed")]
        );
        assert!(attempt.error.as_deref().unwrap().starts_with("prune refused: would prune 2 of 4"), "{attempt:?}");
        assert_eq!(attempt.revision.as_deref(), Some("3f2a"));
        let only_prune =
            ChangeSet { prune_refused: Some("the metadata cache cannot be trusted".into()), ..Default::default() };
        assert_ne!(attempt_of("3f2a", &only_prune), Attempt::clean("3f2a"), "a refused prune is no clean sync");
    }
}
