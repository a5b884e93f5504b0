//! What gitward logs of a sync: the [`Log`] observer of its [`Outcome`], shared by `gitward
//! sync` and the daemon's unit tasks.
//!
//! Events: at the apply, one per object that is not `unchanged` (`object`, `action`, `reason`;
//! `unchanged` ones at debug), and for a push or webhook `trigger applied` (with
//! `trigger_to_applied_ms`) or `trigger failed`; one `health` event per object of the wait whose
//! health changes; at the end the post hooks' `object` events, then one `sync complete` event with
//! the counts by action and by health (of the objects the wait covered, left out when none ran:
//! `wait="none"` with `result="healthy"` means nothing with health changed, moved since it was
//! judged, or was left unhealthy, so nothing was counted), how the wait ended ([`Wait`](crate::sync::outcome::Wait)) and the
//! result recorded on the ApplySet parent (STYLE.md, Logs) — at warn when the result is `failed` or
//! `degraded` or the wait timed out. A sync that failed as a whole logs `sync failed` (and
//! `revision refused` for an unsigned revision, `trigger failed` for a push). Between syncs, a
//! member whose status moved is judged again: `health changed` when the unit's result did. Secret data never
//! reaches a log: the engine's messages carry refs and API server messages only.

use tracing::{debug, error, info, warn};

use super::Observer;
use crate::changeset::{Action, Entry};
use crate::health::{Health, Status};
use crate::object::ObjectRef;
use crate::source::Revision;
use crate::sync::Report;
use crate::sync::outcome::{Cause, Ended, Failure, HealthSummary, Outcome};

/// The log events of a unit's syncs. Holds the revision whose kustomization files read as
/// plain manifests were last warned of: once per revision, not at every resync.
#[derive(Debug, Default)]
pub struct Log {
    warned: Option<Revision>,
}

impl Observer for Log {
    fn applied(&mut self, cause: &Cause, report: &Report, _tracked: usize) {
        if self.warned.as_ref() != Some(&report.revision) && !report.heal {
            warn_kustomizations(report);
            self.warned = Some(report.revision.clone());
        }
        log_objects(report);
        if cause.push {
            log_trigger(cause, report);
        }
    }

    fn finished(&mut self, outcome: &Outcome) {
        match &outcome.ended {
            Ended::Failed(failure) => log_failure(outcome, failure),
            Ended::Applied(report) => {
                let unit = report.unit.as_str();
                let post = report.changes.entries.len() - outcome.post_hooks;
                log_entries(unit, &report.changes.entries[post..]);
                log_summary(report, &outcome.health);
            }
        }
    }

    /// `health changed` when members judged again between syncs changed the unit's result
    /// (`result`, `was`, the counts), at warn when it is `degraded`; each member read whose
    /// health is not `Current` logs its `health` event.
    fn followed(&mut self, followed: &crate::sync::follow::Followed) {
        for (object, status) in &followed.read {
            if let Some(status) = status.as_ref().filter(|s| s.health != Health::Current) {
                log_health(&followed.unit, object, status);
            }
        }
        if !followed.changed() {
            return;
        }
        let (unit, result, was) = (followed.unit.as_str(), followed.result.as_str(), followed.before.as_str());
        let c = followed.counts;
        let (healthy, progressing, degraded) = (c.healthy, c.progressing, c.degraded);
        if followed.result == crate::health::record::SyncResult::Degraded {
            warn!(unit, result, was, healthy, progressing, degraded, "health changed");
        } else {
            info!(unit, result, was, healthy, progressing, degraded, "health changed");
        }
    }
}

/// Says how a push or webhook ended: `trigger applied` with `trigger_to_applied_ms`, else
/// `trigger failed` with the counts of what was not applied.
fn log_trigger(cause: &Cause, report: &Report) {
    let unit = report.unit.as_str();
    let c = report.changes.counts();
    if c.failed + c.skipped + c.conflict == 0 {
        let ms = report.sent.applied_at.saturating_duration_since(cause.at).as_millis() as u64;
        info!(unit, trigger = cause.name, revision = %report.revision, trigger_to_applied_ms = ms, "trigger applied");
    } else {
        // Not `trigger applied`: the revision is not applied whole, and the time to the last
        // object sent is no time to a change reaching the cluster.
        warn!(unit, trigger = cause.name, revision = %report.revision, failed = c.failed, skipped = c.skipped, conflict = c.conflict, "trigger failed");
    }
}

/// Logs a sync that failed as a whole: `revision refused` for a revision not signed by a
/// trusted key (naming the one `kept`), `sync failed`, and `trigger failed` for a push.
fn log_failure(outcome: &Outcome, failure: &Failure) {
    let unit = outcome.unit();
    if let crate::sync::Error::Source(crate::source::Error::Unverified {
        revision, failure: why, signer, reason, ..
    }) = &failure.error
    {
        let kept = failure.kept.as_ref().map(ToString::to_string).unwrap_or_default();
        let signer = signer.as_deref().unwrap_or_default();
        error!(unit, revision = %revision, failure = why.as_str(), signer, reason, kept, "revision refused: not signed by a trusted key");
    }
    let error = &failure.message;
    error!(unit, trigger = outcome.cause.trigger(), error = %error, "sync failed");
    if outcome.cause.push {
        warn!(unit, trigger = outcome.cause.name, error = %error, "trigger failed");
    }
}

/// Logs one `health` event (`object`, `health`, `reason`, `detail`): an object of the wait has a
/// new health (`Failed` at warn).
pub fn log_health(unit: &str, object: &ObjectRef, status: &Status) {
    let object = object.to_string();
    // `detail`, not `message`: tracing's `message` field is the event's own message.
    let (health, reason, detail) = (status.health.as_str(), status.reason.as_str(), status.message.as_str());
    match status.health {
        Health::Failed => warn!(unit, object, health, reason, detail, "health"),
        _ => info!(unit, object, health, reason, detail, "health"),
    }
}

/// Logs one `kustomization file in a plain unit` event at warn (`file`, `reason`: the config
/// that builds it, [`crate::sync::repo::plain_kustomization`]) per kustomization file the
/// unit's plain read passed over: its patches were applied as objects. Once per revision: the
/// daemon calls it for a revision it has not warned of yet, `gitward sync` for its one sync.
pub fn warn_kustomizations(report: &Report) {
    let (unit, revision) = (report.unit.as_str(), report.revision.to_string());
    for s in report.skipped_files.iter().filter(|s| s.is_kustomization()) {
        warn!(unit, revision, file = %s.file, reason = %s.reason, "kustomization file in a plain unit");
    }
}

/// Logs skipped files (kustomization files aside: [`warn_kustomizations`] tells of those) and
/// each object that is not `unchanged` (at once after the apply; the summary follows the
/// health wait).
pub fn log_objects(report: &Report) {
    let unit = report.unit.as_str();
    let revision = report.revision.to_string();
    for s in report.skipped_files.iter().filter(|s| !s.is_kustomization()) {
        match s.index {
            Some(i) => info!(unit, file = %s.file, document = i + 1, reason = %s.reason, "file skipped"),
            None => info!(unit, file = %s.file, reason = %s.reason, "file skipped"),
        }
    }
    log_entries(unit, &report.changes.entries);
    for namespace in &report.changes.namespaces_created {
        info!(unit, namespace = namespace.as_str(), "namespace created");
    }
    for (object, reason) in &report.changes.not_members {
        debug!(unit, object = %object, reason = %reason, "labelled but not a member: not pruned");
    }
    if let Some(reason) = &report.changes.prune_refused {
        warn!(unit, revision, reason = %reason, "prune refused");
    }
}

/// Logs each of `entries` that is not `unchanged` as an `object` event (`unchanged` ones at
/// debug; failed, skipped and conflict at warn).
fn log_entries(unit: &str, entries: &[Entry]) {
    for e in entries {
        let object = e.object.to_string();
        let reason = e.message.as_deref().unwrap_or("");
        match (e.action, &e.message) {
            (Action::Unchanged, _) => debug!(unit, object, action = %e.action, "object"),
            (Action::Failed, _) => warn!(unit, object, action = %e.action, reason, "object failed"),
            (Action::Skipped, _) => warn!(unit, object, action = %e.action, reason, "object skipped"),
            (Action::Conflict, _) => warn!(unit, object, action = %e.action, reason, "object conflict"),
            (_, Some(_)) => info!(unit, object, action = %e.action, reason, "object"),
            (_, None) => info!(unit, object, action = %e.action, "object"),
        }
    }
}

/// The `sync complete` event at the level `$level` (tracing fixes an event's level where it is
/// written).
macro_rules! summary_event {
    ($level:ident, $report:expr, $health:expr) => {{
        let (report, health): (&Report, &HealthSummary) = ($report, $health);
        let unit = report.unit.as_str();
        let revision = report.revision.to_string();
        let c = report.changes.counts();
        // Absent (not zero) when no wait ran: see `Wait::waited`.
        let h = health.wait.waited().then_some(health.counts);
        $level!(
            unit,
            revision,
            created = c.created,
            adopted = c.adopted,
            configured = c.configured,
            unchanged = c.unchanged,
            drift_corrected = c.drift_corrected,
            pruned = c.pruned,
            skipped = c.skipped,
            failed = c.failed,
            conflict = c.conflict,
            namespaces_created = report.changes.namespaces_created.len(),
            applied_early = report.sent.applied_early,
            requests = report.changes.requests,
            duration_ms = report.took.apply.as_millis() as u64,
            healthy = h.map(|h| h.healthy),
            progressing = h.map(|h| h.progressing),
            degraded = h.map(|h| h.degraded),
            wait = health.wait.as_str(),
            result = health.result.as_str(),
            "sync complete"
        );
    }};
}

/// Logs the `sync complete` event: counts by action, then by health (the objects the wait
/// covered; left out when no wait ran, [`crate::sync::outcome::Wait::waited`]), the wait and the result; at warn
/// when [`HealthSummary::warns`], else at info.
pub fn log_summary(report: &Report, health: &HealthSummary) {
    if health.warns() {
        summary_event!(warn, report, health);
    } else {
        summary_event!(info, report, health);
    }
}
