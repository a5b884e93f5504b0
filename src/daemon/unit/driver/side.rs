//! The driver's smaller acts: what a suspended unit ignores, the note of a request queued
//! behind a health wait, the gate's judgement, the count of a job's trigger, and the report of
//! the sync that ran, and the record of a failure with the retry drawn for it.

use tracing::info;

use super::super::effect::Effect;
use super::super::{Ctx, release_freed_memory};
use super::Driver;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::daemon::unit::machine::Event;
use crate::source::Revision;

impl Driver {
    /// Counts and logs a trigger a suspended unit does not act on.
    pub(super) fn ignored(&mut self, kind: TriggerKind) {
        self.shared.metrics.observe_suspended_trigger(&self.shared.unit, kind);
        info!(unit = self.shared.unit.as_str(), trigger = %kind, "trigger not acted on: unit suspended");
    }

    /// Notes on the parent, beside the loop, that the request taken waits for the health wait
    /// (a failed write is logged at debug: `reconcile` then says no daemon handled it).
    pub(super) fn note_queued(&mut self) {
        let (Some(token), Some(ctx)) = (self.controls.taken.clone(), self.ctx.as_ref()) else { return };
        let (note, unit) = (ctx.engine.note_request_queued(token), self.shared.unit.clone());
        tokio::spawn(async move {
            if let Err(e) = note.await {
                tracing::debug!(unit, error = %crate::telemetry::error_chain(&e), "request not noted as queued");
            }
        });
    }

    /// Judges the units the unit depends on for `revision` ([`crate::daemon::unit::depends::Seen::check`]),
    /// their records as they are now: [`Event::Gated`] once a tree it compares is read.
    pub(super) fn gate(&mut self, revision: Revision) {
        let seen = self.sources.gate.as_mut().map(crate::daemon::unit::depends::Gate::seen);
        let repo = self.shared.repo.clone();
        self.effects.io = Some(Box::pin(async move {
            let Some(seen) = seen else { return Event::Gated(Vec::new()) };
            Event::Gated(seen.check(&repo, &revision).await)
        }));
    }

    /// Counts a trigger that starts a job (by its kind); a job with a reconcile merged into it
    /// answers the request taken.
    pub(super) fn observe(&mut self, trigger: &Trigger) {
        if trigger.includes(TriggerKind::Reconcile) {
            self.controls.answering = self.controls.taken.clone();
        }
        self.shared.metrics.observe_trigger(&self.shared.unit, trigger.kind);
    }

    /// The context, at home between engine effects (`step` asks for no sync action that needs
    /// it while one runs).
    pub(super) fn home(&mut self) -> &mut Ctx {
        self.ctx.as_mut().expect("the engine is home between its effects")
    }

    /// Publishes the report of the sync that ran (field fights, logs, metrics) and hands the
    /// freed memory back.
    pub(super) fn publish(&mut self, trigger: &Trigger) {
        let report = self.kept.report.take().expect("a report to publish");
        let ctx = self.home();
        ctx.report_fights(&report);
        ctx.publish(trigger, &report);
        self.kept.report = Some(report);
        release_freed_memory();
    }

    /// Records the failure kept for `trigger`, with the time of the retry that follows it: the
    /// backoff's next delay is drawn now, and [`Driver::retry_at`] keeps it.
    pub(super) fn fail(&mut self, trigger: Trigger) {
        let error = self.kept.failure.take().expect("a failure to record");
        let delay = self.kept.backoff.next_delay();
        self.kept.retry = Some(tokio::time::Instant::now() + delay);
        let retry_at = std::time::SystemTime::now() + delay;
        self.start(Effect::Fail(trigger, error, self.state.last_applied.clone(), retry_at));
    }

    /// When the retry scheduled now is due: the one drawn when its failure was recorded, else
    /// now plus the backoff's next delay.
    pub(super) fn retry_at(&mut self) -> tokio::time::Instant {
        let drawn = self.kept.retry.take();
        drawn.unwrap_or_else(|| tokio::time::Instant::now() + self.kept.backoff.next_delay())
    }

    /// Back to the first delay after a success; a retry drawn before is dropped.
    pub(super) fn reset_backoff(&mut self) {
        self.kept.backoff.reset();
        self.kept.retry = None;
    }
}
