//! Logging: `tracing` set-up (`text` or `json`) and the events that report a sync.
//!
//! One event per object that is not `unchanged` (`object`, `action`, `message`; `unchanged`
//! ones at debug), one `health` event per changed object whose health changes during the
//! wait, then one `sync complete` event with the counts by action and by health, how the wait
//! ended and the result recorded (STYLE.md, Logs). Secret
//! data never reaches a log: the engine's messages carry refs and API server messages only.

use tracing::{debug, error, info, warn};
use tracing_subscriber::EnvFilter;

use crate::changeset::Action;
use crate::health::record::SyncResult;
use crate::health::{Counts, Health, Status};
use crate::object::ObjectRef;
use crate::sync::Report;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (default).
    #[default]
    Text,
    /// One JSON object per event, for log pipelines.
    Json,
}

/// Installs the global subscriber writing to stderr. The level comes from `RUST_LOG`
/// (default `info`). Calling it twice is harmless (the second call does nothing).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// What the health wait after a sync found, for the `sync complete` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthSummary {
    /// Objects the sync changed, by health bucket at the end of the wait.
    pub counts: Counts,
    /// How the wait ended: `healthy`, `degraded`, `timeout`, `cancelled` (a new revision),
    /// `disabled` (`health_timeout = 0`), `none` (nothing waited on: `gitward sync` without
    /// `--wait`, or no member with health changed or was left unhealthy), `skipped` (objects
    /// failed to apply).
    pub wait: &'static str,
    /// What is recorded on the ApplySet parent.
    pub result: SyncResult,
}

/// Logs a sync's report: skipped files, each object that is not `unchanged`, the summary
/// (no health wait: `gitward sync` without `--wait`).
pub fn log_report(report: &Report) {
    log_objects(report);
    let result = if report.changes.has_failures() { SyncResult::Failed } else { SyncResult::Applied };
    log_summary(report, &HealthSummary { counts: Counts::default(), wait: "none", result });
}

/// Logs one `health` event (`object`, `health`, `reason`, `detail`): an object the sync changed
/// has a new health (`Failed` at warn).
pub fn log_health(unit: &str, object: &ObjectRef, status: &Status) {
    let object = object.to_string();
    // `detail`, not `message`: tracing's `message` field is the event's own message.
    let (health, reason, detail) = (status.health.as_str(), status.reason.as_str(), status.message.as_str());
    match status.health {
        Health::Failed => warn!(unit, object, health, reason, detail, "health"),
        _ => info!(unit, object, health, reason, detail, "health"),
    }
}

/// Logs skipped files and each object that is not `unchanged` (at once after the apply; the
/// summary follows the health wait).
pub fn log_objects(report: &Report) {
    let unit = report.unit.as_str();
    let revision = report.revision.to_string();
    for s in &report.skipped_files {
        match s.index {
            Some(i) => info!(unit, file = %s.file, document = i + 1, reason = %s.reason, "file skipped"),
            None => info!(unit, file = %s.file, reason = %s.reason, "file skipped"),
        }
    }
    for e in &report.changes.entries {
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
    for (object, reason) in &report.changes.not_members {
        debug!(unit, object = %object, reason = %reason, "labelled but not a member: not pruned");
    }
    if let Some(reason) = &report.changes.prune_refused {
        error!(unit, revision, reason = %reason, "prune refused");
    }
}

/// Logs the `sync complete` event: counts by action, then by health, the wait and the result.
pub fn log_summary(report: &Report, health: &HealthSummary) {
    let unit = report.unit.as_str();
    let revision = report.revision.to_string();
    let c = report.changes.counts();
    info!(
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
        applied_early = report.applied_early,
        requests = report.changes.requests,
        duration_ms = report.duration.as_millis() as u64,
        healthy = health.counts.healthy,
        progressing = health.counts.progressing,
        degraded = health.counts.degraded,
        wait = health.wait,
        result = health.result.as_str(),
        "sync complete"
    );
}

/// The error and its sources, `: `-separated: the chain printed once, at the top (STYLE.md,
/// Errors).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
