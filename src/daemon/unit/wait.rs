//! The engine's side of the health-wait phase.
//!
//! After an apply the task waits (at most the unit's `health_timeout`) for the objects the sync
//! changed, and the members an earlier wait left not `Current`, to become healthy, logging a
//! `health` event per change (`wait="none"` when there is nothing to wait on); then the engine
//! finishes the sync ([`crate::sync::Engine::finish`]: judged, post hooks, recorded on the ApplySet
//! parent in place of the wait in progress that [`crate::sync::Engine::begin_health`] recorded with
//! the apply) and the unit's observers (log, metrics, readiness) are told its
//! [`crate::sync::Outcome`].
//!
//! The wait runs beside the task's one loop, which goes on listening (`machine` decides what
//! each event does): shutdown and SIGHUP (a reload) cancel the wait; a trigger from the channel
//! or a poll tick fetches, and a revision other than the one waited for cancels the wait and is
//! synced at once (a new revision always wins over waiting for the old one; it records itself,
//! the cancelled wait records nothing); a trigger asked for explicitly that finds the same
//! revision runs after the wait. Drifted objects are healed during the wait, without a sync
//! slot (so an object that never becomes healthy does not stop self-heal); the resync waits
//! until it ends.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::oneshot;

use super::Ctx;
use crate::health::wait::{HealthWait, WaitEnd};
use crate::observe::Observer;
use crate::observe::log::log_health;
use crate::sync::Report;
use crate::sync::outcome::{HealthStep, Pending};

/// The wait as it runs: it owns its [`HealthWait`] and gives it back when it ends or is
/// cancelled, so that its last statuses can be judged either way.
type Running = Pin<Box<dyn Future<Output = (HealthWait, Option<WaitEnd>)> + Send>>;

/// A health wait in progress, and what its end needs: the daemon's cancellable handle on it.
pub(super) struct WaitHandle {
    /// The sync whose changes are waited on.
    pending: Pending,
    /// The wait.
    run: Running,
    /// Dropping it cancels the wait ([`WaitHandle::cancel`]).
    cancel: Option<oneshot::Sender<()>>,
}

impl WaitHandle {
    /// Starts `wait` for `pending`'s unit, bounded by `timeout`.
    fn start(mut wait: HealthWait, timeout: std::time::Duration, pending: Pending) -> Self {
        let (cancel, cancelled) = oneshot::channel::<()>();
        let unit = pending.report().unit.clone();
        let run = Box::pin(async move {
            let end = tokio::select! {
                biased;
                _ = cancelled => None,
                end = wait.run(timeout, |object, status| log_health(&unit, object, status)) => Some(end),
            };
            (wait, end)
        });
        Self { pending, run, cancel: Some(cancel) }
    }

    /// Resolves when the wait ends by itself. Poll it no more once it has.
    pub(super) async fn ended(&mut self) -> (HealthWait, WaitEnd) {
        match (&mut self.run).await {
            (wait, Some(end)) => (wait, end),
            // Only a cancel ends it without an end, and a cancelled wait is not polled here.
            (_, None) => std::future::pending().await,
        }
    }

    /// Cancels the wait and takes its [`HealthWait`] back.
    async fn cancel(&mut self) -> HealthWait {
        self.cancel.take();
        (&mut self.run).await.0
    }
}

impl Ctx {
    /// Starts the health step of `report` ([`crate::sync::Engine::begin_health`]): the wait, or —
    /// skipped, disabled, nothing to wait on — `None`, the sync finished, recorded and observed at
    /// once.
    pub(super) async fn begin_wait(&mut self, report: Report) -> Option<WaitHandle> {
        let cause = self.cause;
        match self.engine.begin_health(report, cause, true).await {
            HealthStep::Done(outcome) => {
                self.observers.finished(&outcome);
                None
            }
            HealthStep::Wait(waiting) => {
                let (pending, wait) = *waiting;
                // Ready (and READY=1) follows the apply, not the wait.
                self.readiness().set(pending.report(), true, None, self.engine.cache().len(), true);
                let timeout = self.engine.health_timeout();
                Some(WaitHandle::start(wait, timeout, pending))
            }
        }
    }

    /// Ends `waiting`: with how it `ended`, else cancelled; the engine finishes the sync
    /// ([`crate::sync::Engine::finish`], recorded when `record`) and the observers are told its
    /// outcome.
    pub(super) async fn end_wait(
        &mut self,
        mut waiting: WaitHandle,
        ended: Option<(HealthWait, WaitEnd)>,
        record: bool,
    ) {
        let (wait, end) = match ended {
            Some((wait, end)) => (wait, Some(end)),
            None => (waiting.cancel().await, None),
        };
        let outcome = self.engine.finish(waiting.pending, &wait, end, record).await;
        self.observers.finished(&outcome);
    }
}
