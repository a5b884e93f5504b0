//! The watch of a unit's `[sync.substitute] from` objects: a change to one of them sends the
//! unit a [`TriggerKind::Variables`] trigger, so the new values are applied without waiting
//! for the resync (Flux reconciles on its interval only).

use futures::StreamExt;
use tracing::info;

use super::trigger::{Trigger, TriggerKind, TriggerSender};
use crate::config::SyncUnit;

/// A running watch of one unit's variable sources; stopped when dropped (with its unit).
pub(super) struct VarsWatch(tokio::task::JoinHandle<()>);

impl Drop for VarsWatch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts the watch of `unit`'s `from` objects with `client` (gitward's own identity, as they
/// are read), sending `triggers` one trigger per change; `None` when the unit reads none. It
/// ends by itself when the unit's task has ended.
pub(super) fn watch(client: &kube::Client, unit: &SyncUnit, triggers: TriggerSender) -> Option<VarsWatch> {
    let sources = &unit.substitute.from;
    if sources.is_empty() {
        return None;
    }
    let mut changes = crate::cluster::vars::changes(client, sources);
    let task = tokio::spawn(async move {
        while let Some(source) = changes.next().await {
            info!(source = %source, "variables changed");
            if triggers.offer(Trigger::now(TriggerKind::Variables)).is_err() {
                return;
            }
        }
    });
    Some(VarsWatch(task))
}
