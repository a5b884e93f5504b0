//! The log events [`super::machine::step`] decides, written; the wait for dependencies also
//! sets the unit's status and gauge.

use tracing::info;

use super::machine::Log;
use crate::daemon::metrics::Metrics;
use crate::daemon::trigger::Statuses;

/// Writes a log event `step` decided.
pub(super) fn write(unit: &str, log: Log, status: &Statuses, metrics: &Metrics) {
    match log {
        Log::Triggered { kind, revision, lane: Some(lane) } => {
            info!(unit, trigger = %kind, revision = %revision, push_lane = lane, "sync triggered");
        }
        Log::Triggered { kind, revision, lane: None } => {
            info!(unit, trigger = %kind, revision = %revision, "sync triggered");
        }
        Log::NoNewRevision { kind, revision } => {
            tracing::debug!(unit, trigger = %kind, revision = %revision, "no new revision");
        }
        Log::PathUnchanged { kind, from, revision } => {
            tracing::debug!(unit, trigger = %kind, from = %from, revision = %revision, "path unchanged, nothing to sync");
        }
        Log::Yielded { revision, to, kind, objects } => info!(
            unit,
            revision = %revision,
            to = %to,
            trigger = %kind,
            objects_sent = objects,
            "sync yielded to a newer revision"
        ),
        Log::CancelledByReload { revision, kind } => {
            info!(unit, revision = %revision, trigger = %kind, "health wait cancelled by a reload");
        }
        Log::CancelledByVariables { revision, kind } => {
            info!(unit, revision = %revision, trigger = %kind, "health wait cancelled by a change of variables");
        }
        Log::CancelledByRevision { revision, new_revision, kind } => {
            info!(unit, revision = %revision, new_revision = %new_revision, trigger = %kind, "health wait cancelled by a new revision");
        }
        Log::Blocked { revision, waiting } => {
            let text: Vec<String> = waiting.iter().map(ToString::to_string).collect();
            let units: Vec<&str> = waiting.iter().map(|w| w.unit.as_str()).collect();
            let text = text.join("; ");
            info!(unit, revision = %revision, dependencies = units.join(","), waiting_for = text.as_str(), "waiting for dependencies");
            status.set_blocked(unit, Some(crate::telemetry::Masked::new(text)));
            metrics.set_blocked(unit, true);
        }
        Log::DependenciesReady { revision } => {
            info!(unit, revision = %revision, "dependencies ready");
            status.set_blocked(unit, None);
            metrics.set_blocked(unit, false);
        }
    }
}
