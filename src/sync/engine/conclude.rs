//! A sync's end as the engine serves it: the health step after the apply (no wait, or one
//! recorded before it runs), the post hooks and the record, and the [`Outcome`] the daemon and
//! the CLI report ([`crate::sync::outcome`]).

use std::time::Instant;

use tracing::warn;

use super::Engine;
use crate::health::Counts;
use crate::health::record::SyncResult;
use crate::health::wait::{HealthWait, WaitEnd};
use crate::source::Revision;
use crate::sync::outcome::{
    Cause, Ended, Failure, HealthStep, HealthSummary, Live, NotReady, Outcome, Pending, Timings, Wait, not_ready,
};
use crate::sync::provenance::Concluded;
use crate::sync::{Error, Report};

impl Engine {
    /// Starts the health step after `report`'s apply: no wait when [`Wait::before`] says so (a
    /// wait is `asked` for in the daemon and by `gitward sync --wait`), nor when the engine's
    /// wait ([`Engine::health_wait`]) has no targets (every member judged `Current`: healthy,
    /// `wait="none"`): the sync is then finished ([`Engine::finish`]'s post hooks and record)
    /// and its outcome returned. A wait that is due is recorded on the ApplySet parent before it
    /// runs ([`Engine::record_waiting`]: the revision, its apply time, the attempt and what is
    /// waited for), so that `gitward status` tells the truth meanwhile; a failed write is
    /// logged.
    pub async fn begin_health(&mut self, report: Report, cause: Cause, asked: bool) -> HealthStep {
        let started = Instant::now();
        let failed = report.changes.has_failures();
        if let Some(wait) = Wait::before(failed, asked, self.health_timeout()) {
            let pending = Pending { report, cause, judged: false, started };
            return HealthStep::Done(Box::new(self.conclude(pending, HealthSummary::unwaited(wait), Vec::new()).await));
        }
        let wait = self.health_wait(&report).await;
        let judged = wait.covers_all() || !wait.targets().is_empty();
        let pending = Pending { report, cause, judged, started };
        if wait.targets().is_empty() {
            // Nothing with health changed, none moved since it was judged, and nothing is left
            // unhealthy: every member is judged `Current`, nothing to wait on.
            let summary = self.judge(&wait, Some(WaitEnd::Healthy)).await;
            let summary = HealthSummary { wait: Wait::None, ..summary };
            return HealthStep::Done(Box::new(self.conclude(pending, summary, Vec::new()).await));
        }
        if let Err(e) = self.record_waiting(&pending.report, &wait).await {
            let error = crate::telemetry::error_chain(&e);
            warn!(unit = %pending.report.unit, error, "could not record the health wait on the inventory");
        }
        HealthStep::Wait(Box::new((pending, wait)))
    }

    /// Finishes the sync `pending` whose wait ended with `end` (`None`: cancelled): judges it
    /// ([`Engine::judge_health`]; a cancelled wait is `progressing`, so a later no-op sync of
    /// the revision cannot call it healthy, and waits for what is still not healthy), then —
    /// when `record`; a wait cancelled by a newer revision records nothing, that revision
    /// records itself — runs the post hooks and records the result and the attempt on the
    /// ApplySet parent ([`Engine::record_sync`]; a failed write is logged).
    pub async fn finish(&mut self, pending: Pending, wait: &HealthWait, end: Option<WaitEnd>, record: bool) -> Outcome {
        let summary = self.judge(wait, end).await;
        let not_ready = if end == Some(WaitEnd::Healthy) { Vec::new() } else { not_ready(wait) };
        let waited = match end {
            // A timeout ends at the timeout; a Failed object ends the wait at once.
            Some(WaitEnd::TimedOut) => self.health_timeout(),
            _ => pending.started.elapsed(),
        };
        let mut outcome = if record {
            self.conclude(pending, summary, not_ready).await
        } else {
            // Its record is the newer revision's; what it applied is attested all the same.
            self.attest(&pending.report, summary.result).await;
            self.outcome(pending.report, pending.cause, summary, not_ready).await
        };
        outcome.timings.wait = waited;
        outcome
    }

    /// Records a sync that failed as a whole ([`Engine::record_failure`]; a record that cannot
    /// be written — the cluster does not answer either — is logged at debug) and returns its
    /// outcome. `kept`: the revision last applied, which stays in force; `retry_at`: when the
    /// daemon tries again, recorded with the failure (`None` for a one-shot sync).
    pub async fn fail(
        &mut self,
        cause: Cause,
        error: Error,
        kept: Option<Revision>,
        retry_at: Option<std::time::SystemTime>,
    ) -> Outcome {
        let failure = Failure::new(self.unit_name().to_string(), error, self.attempted().cloned(), kept);
        if let Err(r) = self.record_failure(&failure, retry_at).await {
            let unit = &failure.unit;
            tracing::debug!(unit, error = %crate::telemetry::error_chain(&r), "could not record the error on the inventory");
        }
        Outcome {
            cause,
            ended: Ended::Failed(failure),
            health: HealthSummary::unwaited(Wait::Skipped),
            not_ready: Vec::new(),
            post_hooks: 0,
            live: self.live_now(true),
            timings: Timings::default(),
        }
    }

    /// The summary of `wait` once it ended with `end` (`None`: cancelled), with the result the
    /// engine judges.
    async fn judge(&mut self, wait: &HealthWait, end: Option<WaitEnd>) -> HealthSummary {
        let result = self.judge_health(wait, end).await;
        let wait_kind = end.map_or(Wait::Cancelled, Wait::from);
        HealthSummary { counts: Counts::of(&wait.healths()), wait: wait_kind, result }
    }

    /// The end of a sync judged `summary`: its post hooks (once the revision is judged healthy
    /// or no wait ran, never after a cancelled wait; their entries join the report, a failed
    /// one makes the result `failed`), its record, and its outcome.
    async fn conclude(&mut self, pending: Pending, summary: HealthSummary, not_ready: NotReady) -> Outcome {
        let Pending { mut report, cause, judged, .. } = pending;
        let (mut summary, mut post_hooks) = (summary, 0);
        if let Some((changes, result)) = self.post_hooks(&report, summary.result).await {
            post_hooks = changes.entries.len();
            report.changes.extend(changes);
            summary.result = result;
        }
        if let Err(e) = self.record_sync(&report, summary.result, judged).await {
            let error = crate::telemetry::error_chain(&e);
            warn!(unit = %report.unit, error, "could not record the sync result on the inventory");
        }
        self.attest(&report, summary.result).await;
        let outcome = self.outcome(report, cause, summary, not_ready).await;
        Outcome { post_hooks, ..outcome }
    }

    /// The outcome of `report`'s sync, judged `health`.
    async fn outcome(&self, report: Report, cause: Cause, health: HealthSummary, not_ready: NotReady) -> Outcome {
        // Objects the API server refused leave the unit ready; failures because it did not
        // answer (an outage) do not.
        let answered = !report.changes.has_failures() || self.cluster_answers().await;
        let timings = report.took;
        Outcome {
            cause,
            ended: Ended::Applied(report),
            health,
            not_ready,
            post_hooks: 0,
            live: self.live_now(answered),
            timings,
        }
    }
}

impl Engine {
    /// With `[provenance]`, attests `report`'s sync judged `result` when it created,
    /// configured or pruned anything ([`crate::sync::provenance`]); a failure is logged: the
    /// sync's result stands, and the next attestation links to the last one kept.
    async fn attest(&mut self, report: &Report, result: SyncResult) {
        let Some(attestor) = self.attestor.as_mut() else { return };
        let desired = self.last.desired.as_ref().map(|(_, d)| d.as_slice()).unwrap_or_default();
        let sync = Concluded { report, health: result.to_string(), desired, cache: self.view.cache() };
        match attestor.attest(&self.view, &self.unit, self.parent.inventory(), sync).await {
            Ok(true) => tracing::debug!(unit = %report.unit, "attested"),
            Ok(false) => {}
            Err(e) => {
                let error = crate::telemetry::error_chain(&e);
                warn!(unit = %report.unit, error, "could not keep the sync's attestation");
            }
        }
    }

    /// The cluster as the engine sees it now: `answered` as the caller found it, the members
    /// the cache tracks, their health as last judged and the cache's size.
    fn live_now(&self, answered: bool) -> Live {
        let cache = self.cache();
        Live { answered, tracked: cache.len(), health: self.members_health(), cache_bytes: cache.estimated_bytes() }
    }
}
