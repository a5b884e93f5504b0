//! Following the members' health between syncs, on the unit's task.
//!
//! The metadata watches note each member of a kind with health whose resourceVersion moved
//! ([`crate::cluster::drift::Touched`]). While the unit is between jobs (idle, backing off,
//! waiting for its dependencies, suspended) and no health wait runs, the driver waits
//! [`FOLLOW_DEBOUNCE`] after the first such note, so a rollout's many status updates are read
//! once, and then has the engine judge those members again
//! ([`crate::sync::Engine::follow_health`]: a GET each, or one survey when many moved; the
//! parent's record rewritten when the unit's result changes). The observers are told
//! ([`crate::observe::Observer::followed`]): `gitward_unit_ready`'s reason and
//! `gitward_objects_health`, sd_notify `STATUS=`, the dashboard, `HealthDegraded` and
//! `HealthRecovered` Events, and a `health changed` log line. No sync slot is taken. During a
//! sync or a health wait nothing is read here: the notes stay, and the wait takes them as
//! targets of its own ([`crate::sync::Engine::health_wait`]).

use std::time::Duration;

use super::Ctx;
use super::machine::Phase;
use crate::observe::Observer;

/// How long after the first note of a moved member the unit's members are judged again: the
/// status updates of one rollout (or of an HPA's scale) within it are read once.
pub(super) const FOLLOW_DEBOUNCE: Duration = Duration::from_secs(1);

/// True in the phases between jobs, where the engine is free and no health wait runs.
pub(super) fn follows(phase: &Phase) -> bool {
    matches!(phase, Phase::Idle | Phase::BackingOff(_) | Phase::Blocked(_) | Phase::Suspended)
}

/// The longest the unit's task spends judging moved members again: its loop waits meanwhile,
/// so an API server that stops answering holds it no longer than this (the members read then
/// are judged by the next sync's wait, which takes what is still noted).
pub(super) const FOLLOW_TIMEOUT: Duration = Duration::from_secs(15);

impl Ctx {
    /// Judges the touched members again and tells the observers what was found; gives up
    /// after [`FOLLOW_TIMEOUT`] (logged).
    pub(super) async fn follow_health(&mut self) {
        match tokio::time::timeout(FOLLOW_TIMEOUT, self.engine.follow_health()).await {
            Ok(Some(followed)) => self.observers.followed(&followed),
            Ok(None) => {}
            Err(_) => tracing::warn!(
                unit = self.unit.as_str(),
                "judging moved members again took too long; left to the next sync"
            ),
        }
    }
}
