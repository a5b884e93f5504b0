//! The log lines the state machine decides ([`Log`]), written with the unit's name.

use tracing::info;

use super::machine::Log;

/// Writes a log event `step` decided.
pub(super) fn write(unit: &str, log: Log) {
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
        Log::CancelledByRevision { revision, new_revision, kind } => {
            info!(unit, revision = %revision, new_revision = %new_revision, trigger = %kind, "health wait cancelled by a new revision");
        }
    }
}
