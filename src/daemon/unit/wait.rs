//! The health-wait phase of a unit's task.
//!
//! After an apply the task waits (at most the unit's `health_timeout`) for the objects the sync
//! changed, and the members an earlier wait left not `Current`, to become healthy, logging a
//! `health` event per change (`wait="none"` when there is nothing to wait on); then logs
//! `sync complete`, updates metrics and status, and records the result and the attempt on the
//! ApplySet parent ([`Engine::record_sync`]), in place of the wait in progress that
//! [`crate::report::begin`] recorded with the apply.
//!
//! The task goes on listening meanwhile, in its one loop: shutdown and SIGHUP (a reload) cancel
//! the wait; a trigger from the channel or a poll tick fetches, and a revision other than the one
//! waited for cancels the wait and is synced at once (a new revision always wins over waiting
//! for the old one); a trigger that finds the same revision runs after the wait
//! ([`during_wait`]). Drifted objects are healed during the wait, without a sync slot (so an
//! object that never becomes healthy does not stop self-heal); the resync waits until it ends.
//! How the wait ended decides what is recorded and what runs next ([`after_wait`]).

use std::future::Future;
use std::pin::Pin;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{info, warn};

use super::{Event, Phase, SyncEnd, Task};
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::health::record::SyncResult;
use crate::health::wait::{HealthWait, Outcome};
use crate::report::{self, HealthStep, HealthSummary};
use crate::sync::{Engine, Report};
use crate::telemetry;

/// The wait as it runs: it owns its [`HealthWait`] and gives it back when it ends or is
/// cancelled, so that its last statuses can be judged either way.
type Running = Pin<Box<dyn Future<Output = (HealthWait, Option<Outcome>)> + Send>>;

/// A health wait in progress, and what its end needs.
pub(super) struct Waiting {
    /// The sync whose changes are waited on.
    report: Report,
    /// The engine judges the unit's health with the wait ([`Engine::record_sync`]'s `judged`).
    judged: bool,
    /// How the sync ended, for the retry decided after the wait.
    sync: SyncEnd,
    /// When the wait began, for `gitward_time_to_healthy_seconds`.
    started: Instant,
    /// The wait.
    run: Running,
    /// Dropping it cancels the wait ([`Waiting::cancel`]).
    cancel: Option<oneshot::Sender<()>>,
    /// A trigger for the revision waited for, to run after the wait.
    after: Option<Trigger>,
}

impl Waiting {
    /// Starts `wait` for `report`'s unit, bounded by `timeout`.
    fn start(mut wait: HealthWait, timeout: std::time::Duration, report: Report, judged: bool, sync: SyncEnd) -> Self {
        let (cancel, cancelled) = oneshot::channel::<()>();
        let unit = report.unit.clone();
        let run = Box::pin(async move {
            let outcome = tokio::select! {
                biased;
                _ = cancelled => None,
                outcome = wait.run(timeout, |object, status| report::log_health(&unit, object, status)) => Some(outcome),
            };
            (wait, outcome)
        });
        Self { report, judged, sync, started: Instant::now(), run, cancel: Some(cancel), after: None }
    }

    /// Resolves when the wait ends by itself. Poll it no more once it has.
    pub(super) async fn ended(&mut self) -> (HealthWait, Outcome) {
        match (&mut self.run).await {
            (wait, Some(outcome)) => (wait, outcome),
            // Only a cancel ends it without an outcome, and a cancelled wait is not polled here.
            (_, None) => std::future::pending().await,
        }
    }

    /// Cancels the wait and takes its [`HealthWait`] back.
    async fn cancel(&mut self) -> HealthWait {
        self.cancel.take();
        (&mut self.run).await.0
    }
}

/// What a trigger that arrives during a health wait does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DuringWait {
    /// SIGHUP asks for a sync now, with a config that may have changed: cancel the wait and
    /// run the trigger.
    CancelForReload,
    /// A new revision always wins over waiting for the old one: cancel the wait (the new
    /// revision records itself) and run the trigger.
    CancelForRevision,
    /// The same revision, asked for explicitly (webhook, startup, retry, ...): run it after
    /// the wait.
    RunAfter,
    /// The same revision, for a trigger that only means "git may have moved" (poll, push):
    /// nothing to do.
    Ignore,
}

/// What a trigger of `kind` does during a wait; `new_revision`: a fetch found a revision other
/// than the one waited for (a reload does not fetch).
fn during_wait(kind: TriggerKind, new_revision: bool) -> DuringWait {
    if kind == TriggerKind::Reload {
        DuringWait::CancelForReload
    } else if new_revision {
        DuringWait::CancelForRevision
    } else if kind.needs_new_revision() {
        DuringWait::Ignore
    } else {
        DuringWait::RunAfter
    }
}

/// How a health wait ended.
#[derive(Debug, Clone)]
enum WaitEnd {
    /// By itself.
    Outcome(Outcome),
    /// Cancelled: by shutdown or the channel closing (`by: None`), by SIGHUP or a new revision.
    Cancelled {
        /// The trigger that cancelled it, to run at once.
        by: Option<Trigger>,
        /// A new revision cancelled it: that one records itself, this one records nothing.
        superseded: bool,
    },
}

/// What follows a health wait.
#[derive(Debug, Clone)]
struct AfterWait {
    /// Record the result and the attempt on the ApplySet parent.
    record: bool,
    /// The trigger to run at once: the one that cancelled the wait, else one kept for after it.
    next: Option<Trigger>,
}

/// What follows a wait that `ended` so, with `after` kept for after it.
fn after_wait(ended: WaitEnd, after: Option<Trigger>) -> AfterWait {
    match ended {
        WaitEnd::Outcome(_) => AfterWait { record: true, next: after },
        WaitEnd::Cancelled { by, superseded } => AfterWait { record: !superseded, next: by.or(after) },
    }
}

impl Task {
    /// Starts the health step of `report` ([`report::begin`]): the wait phase, or — skipped,
    /// disabled, nothing to wait on — its end at once.
    pub(super) async fn begin_wait(&mut self, report: Report, sync: SyncEnd) -> Phase {
        match report::begin(&mut self.engine, &report, true).await {
            HealthStep::Done { summary, judged } => {
                if summary.wait.judged() {
                    self.metrics.observe_health(&self.unit, &summary.counts, None);
                }
                self.finish(&report, &summary, judged, true).await;
                self.after(sync, None)
            }
            HealthStep::Wait { wait, judged } => {
                // Ready (and READY=1) follows the apply, not the wait.
                self.set_status(&report, true, None);
                self.set_waiting(true);
                let timeout = self.engine.health_timeout();
                Phase::Waiting(Box::new(Waiting::start(wait, timeout, report, judged, sync)))
            }
        }
    }

    /// An event during the wait.
    pub(super) async fn on_waiting(&mut self, mut waiting: Box<Waiting>, event: Event) -> Phase {
        let trigger = match event {
            Event::WaitEnded(wait, outcome) => return self.end_wait(waiting, wait, WaitEnd::Outcome(outcome)).await,
            Event::Shutdown | Event::Trigger(None) => {
                let wait = waiting.cancel().await;
                return self.end_wait(waiting, wait, WaitEnd::Cancelled { by: None, superseded: false }).await;
            }
            Event::Trigger(Some(t)) => t,
            Event::Poll => Trigger::now(TriggerKind::Poll),
            Event::Drift(events) => {
                self.note_drift(events);
                return Phase::Waiting(waiting);
            }
            Event::HealDue => {
                self.heal_during_wait().await;
                return Phase::Waiting(waiting);
            }
            // Not listened to during a wait.
            Event::Resync | Event::RetryDue => return Phase::Waiting(waiting),
        };
        let waited_for = waiting.report.revision.clone();
        let fetched = if trigger.kind == TriggerKind::Reload { None } else { self.engine.repo().fetch().await.ok() };
        let new_revision = fetched.filter(|r| *r != waited_for);
        let (unit, kind) = (self.unit.as_str(), trigger.kind);
        let superseded = match during_wait(kind, new_revision.is_some()) {
            DuringWait::Ignore => return Phase::Waiting(waiting),
            DuringWait::RunAfter => {
                waiting.after = Some(trigger);
                return Phase::Waiting(waiting);
            }
            DuringWait::CancelForReload => {
                info!(unit, revision = %waited_for, trigger = %kind, "health wait cancelled by a reload");
                false
            }
            DuringWait::CancelForRevision => {
                let new_revision = new_revision.expect("a new revision");
                info!(unit, revision = %waited_for, new_revision = %new_revision, trigger = %kind, "health wait cancelled by a new revision");
                true
            }
        };
        let wait = waiting.cancel().await;
        self.end_wait(waiting, wait, WaitEnd::Cancelled { by: Some(trigger), superseded }).await
    }

    /// Re-applies the objects whose self-heal is due, at once and without a sync slot (the
    /// wait holds none); its report is not waited on.
    async fn heal_during_wait(&mut self) {
        let objects = self.heal.take_due(Instant::now());
        if objects.is_empty() {
            return;
        }
        let trigger = Trigger::now(TriggerKind::Drift);
        self.metrics.observe_trigger(&self.unit, trigger.kind);
        self.heal_objects(&trigger, &objects).await;
        self.drain_drift();
    }

    /// Judges the wait that `ended` ([`report::judge`]; a cancelled one is recorded as
    /// progressing, so a later no-op sync of this revision cannot call it healthy, and waits
    /// for what is still not healthy), finishes the sync and goes on ([`after_wait`]).
    async fn end_wait(&mut self, waiting: Box<Waiting>, wait: HealthWait, ended: WaitEnd) -> Phase {
        let outcome = match ended {
            WaitEnd::Outcome(outcome) => Some(outcome),
            WaitEnd::Cancelled { .. } => None,
        };
        let summary = report::judge(&mut self.engine, &wait, outcome).await;
        if outcome.is_some() {
            let took = (summary.result == SyncResult::Healthy).then(|| waiting.started.elapsed());
            self.metrics.observe_health(&self.unit, &summary.counts, took);
        }
        let Waiting { report, judged, sync, after, .. } = *waiting;
        let AfterWait { record, next } = after_wait(ended, after);
        self.finish(&report, &summary, judged, record).await;
        self.after(sync, next)
    }

    /// The end of a sync's health step: `sync complete` logged, the unit's status set, the
    /// result and the attempt recorded on the ApplySet parent when `record`.
    async fn finish(&mut self, report: &Report, summary: &HealthSummary, judged: bool, record: bool) {
        // Post hooks run once the revision is judged healthy (not after a cancelled wait).
        let after_hooks = if record { report::post_hooks(&mut self.engine, report, summary).await } else { None };
        let (report, summary) = after_hooks.as_ref().map_or((report, summary), |(r, s)| (r, s));
        report::log_summary(report, summary);
        // Objects the API server refused leave the unit ready; failures because it did not
        // answer (an outage) do not.
        let ran = !report.changes.has_failures() || self.engine.cluster_answers().await;
        self.set_status(report, ran, summary.wait.judged().then_some(summary.counts));
        if record {
            record_sync(&mut self.engine, &self.unit, report, summary.result, judged).await;
        }
    }
}

/// Records the result and the attempt on the ApplySet parent; a failure is logged.
async fn record_sync(engine: &mut Engine, unit: &str, report: &Report, result: SyncResult, judged: bool) {
    if let Err(e) = engine.record_sync(report, result, judged).await {
        warn!(unit, error = %telemetry::error_chain(&e), "could not record the sync result on the inventory");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_cancels_the_wait_whatever_the_revision() {
        assert_eq!(during_wait(TriggerKind::Reload, false), DuringWait::CancelForReload);
        assert_eq!(during_wait(TriggerKind::Reload, true), DuringWait::CancelForReload);
    }

    #[test]
    fn a_new_revision_cancels_the_wait_whatever_found_it() {
        for kind in [TriggerKind::Poll, TriggerKind::Push, TriggerKind::Webhook, TriggerKind::Retry] {
            assert_eq!(during_wait(kind, true), DuringWait::CancelForRevision, "{kind}");
        }
    }

    #[test]
    fn the_same_revision_runs_after_the_wait_only_when_asked_for_explicitly() {
        assert_eq!(during_wait(TriggerKind::Poll, false), DuringWait::Ignore);
        assert_eq!(during_wait(TriggerKind::Push, false), DuringWait::Ignore);
        assert_eq!(during_wait(TriggerKind::Webhook, false), DuringWait::RunAfter);
        assert_eq!(during_wait(TriggerKind::Startup, false), DuringWait::RunAfter);
    }

    #[test]
    fn a_wait_that_ended_records_and_runs_what_was_kept_for_after_it() {
        let kept = Trigger::now(TriggerKind::Webhook);
        let after = after_wait(WaitEnd::Outcome(Outcome::TimedOut), Some(kept));
        assert!(after.record);
        assert_eq!(after.next.map(|t| t.kind), Some(TriggerKind::Webhook));
        assert!(after_wait(WaitEnd::Outcome(Outcome::Healthy), None).next.is_none());
    }

    #[test]
    fn a_superseded_wait_records_nothing_and_its_canceller_runs_first() {
        let by = Some(Trigger::now(TriggerKind::Poll));
        let kept = Some(Trigger::now(TriggerKind::Webhook));
        let after = after_wait(WaitEnd::Cancelled { by, superseded: true }, kept);
        assert!(!after.record, "the new revision records itself");
        assert_eq!(after.next.map(|t| t.kind), Some(TriggerKind::Poll));
    }

    #[test]
    fn a_wait_cancelled_by_shutdown_or_reload_is_still_recorded() {
        let kept = Some(Trigger::now(TriggerKind::Webhook));
        let shutdown = after_wait(WaitEnd::Cancelled { by: None, superseded: false }, kept);
        assert!(shutdown.record);
        assert_eq!(shutdown.next.map(|t| t.kind), Some(TriggerKind::Webhook));
        let by = Some(Trigger::now(TriggerKind::Reload));
        let reload = after_wait(WaitEnd::Cancelled { by, superseded: false }, None);
        assert!(reload.record);
        assert_eq!(reload.next.map(|t| t.kind), Some(TriggerKind::Reload));
    }
}
