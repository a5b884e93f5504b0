//! Logging: `tracing` set-up (`text` or `json`) and the events that report a sync.
//!
//! One event per object that is not `unchanged` (`object`, `action`, `message`; `unchanged`
//! ones at debug), one `health` event per changed object whose health changes during the
//! wait, then one `sync complete` event with the counts by action and by health, how the wait
//! ended and the result recorded (STYLE.md, Logs) — at warn when the result is `failed` or
//! `degraded` or the wait timed out. Secret data never reaches a log: the engine's messages
//! carry refs and API server messages only.
//!
//! Files: `text` (the text format: no module targets, span fields not repeated).

mod text;

use tracing::{debug, info, warn};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::changeset::Action;
use crate::health::record::SyncResult;
use crate::health::{Counts, Health, Status};
use crate::object::ObjectRef;
use crate::sync::Report;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (default): `TIME LEVEL message key=value…`.
    #[default]
    Text,
    /// One JSON object per event, for log pipelines.
    Json,
}

/// Installs the global subscriber writing to stderr. The level comes from `RUST_LOG`
/// (default `info`). kube's client logs every failed request at error on its own
/// (`kube_client`); gitward reports those failures itself, once, with the server named, so
/// `kube_client` is silenced unless `RUST_LOG` names it. Calling it twice is harmless (the
/// second call does nothing).
pub fn init(format: LogFormat) {
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let mut filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    if !directives.contains("kube_client") {
        filter = filter.add_directive("kube_client=off".parse().expect("a valid directive"));
    }
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        LogFormat::Text => registry
            .with(text::SpanFieldsLayer)
            .with(tracing_subscriber::fmt::layer().event_format(text::TextFormat { ansi }).with_writer(std::io::stderr))
            .try_init(),
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json().flatten_event(true).with_writer(std::io::stderr))
            .try_init(),
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
        warn!(unit, revision, reason = %reason, "prune refused");
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
    }};
}

/// Logs the `sync complete` event: counts by action, then by health, the wait and the result;
/// at warn when the result is `failed` or `degraded` or the wait timed out (someone should
/// look), else at info.
pub fn log_summary(report: &Report, health: &HealthSummary) {
    let warn = matches!(health.result, SyncResult::Failed | SyncResult::Degraded) || health.wait == "timeout";
    if warn {
        summary_event!(warn, report, health);
    } else {
        summary_event!(info, report, health);
    }
}

/// The error and its sources, `: `-separated: the chain printed once, at the top (STYLE.md,
/// Errors). A source whose text its error already printed is left out (kube's, hyper's and
/// kube-runtime's errors print their source and return it too), and a kube API error reads
/// `<message> (<reason>, <code>)` — wherever it appears in the chain, also inside an error
/// that printed it — rather than kube's debug dump of the whole `Status`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = describe(e);
    let mut source = if is_whole(e) { None } else { e.source() };
    while let Some(s) = source {
        let (raw, part) = (s.to_string(), describe(s));
        if !raw.is_empty() && text.contains(&raw) {
            text = text.replace(&raw, &part);
        } else if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = if is_whole(s) { None } else { s.source() };
    }
    text
}

/// Whether [`describe`] prints `e` with everything its sources would add.
fn is_whole(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(_) | kube::Error::Service(_)))
}

/// [`error_chain`] of an error about `unit`, without the `<unit>: ` that source errors start
/// with, for an event that carries the unit as a field already.
pub fn unit_error(unit: &str, e: &(dyn std::error::Error + 'static)) -> String {
    let text = error_chain(e);
    match text.strip_prefix(unit).and_then(|rest| rest.strip_prefix(": ")) {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

/// One error of a chain as text: a kube API error as `<message> (<reason>, <code>)`, a kube
/// transport error as its cause ([`crate::cluster::server::RequestFailed`]), any other as
/// its `Display`.
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    match e.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => {
            let reason = if status.reason.is_empty() { String::new() } else { format!("{}, ", status.reason) };
            format!("{} ({reason}{})", status.message, status.code)
        }
        Some(kube::Error::Service(inner)) => error_chain(inner.as_ref()),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("discovery of v1")]
    struct Outer {
        source: kube::Error,
    }

    #[test]
    fn the_chain_prints_each_cause_once_and_api_errors_without_the_debug_dump() {
        let status = kube::core::Status::failure("namespaces \"shop\" not found", "NotFound").with_code(404);
        let e = Outer { source: kube::Error::Api(Box::new(status)) };
        assert_eq!(error_chain(&e), "discovery of v1: namespaces \"shop\" not found (NotFound, 404)");
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let failed = crate::cluster::server::RequestFailed::new("https://127.0.0.1:1", &io);
        let e = Outer { source: kube::Error::Service(Box::new(failed.clone())) };
        assert_eq!(error_chain(&e), format!("discovery of v1: {failed}"));
        assert_eq!(error_chain(&e).matches("connection refused").count(), 1, "{}", error_chain(&e));
        // An error that prints its kube source inline gets the readable form there.
        let status = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
        let e = kube::runtime::watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        assert_eq!(error_chain(&e), "failed to perform initial object list: forbidden (Forbidden, 403)");
    }

    #[test]
    fn a_unit_error_does_not_repeat_the_unit() {
        let e = crate::source::Error::RefNotFound { unit: "app".into(), reference: "main".into() };
        assert!(unit_error("app", &e).starts_with("reference \"main\" not found"), "{}", unit_error("app", &e));
        assert!(unit_error("other", &e).starts_with("app: "));
    }
}
