//! The effects that use a unit's engine: what the driver asks of it, and what each found.

use std::collections::BTreeSet;

use super::Ctx;
use super::wait::WaitHandle;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::health::wait::{HealthWait, WaitEnd};
use crate::object::ObjectRef;
use crate::source::Revision;
use crate::sync::Report;
use crate::sync::early::EarlyApply;

/// An effect that uses the engine.
pub(super) enum Effect {
    Fetch(std::time::Instant),
    Early(Revision),
    Rest(EarlyApply),
    Heal(Trigger, BTreeSet<ObjectRef>),
    Fail(Trigger, crate::sync::Error, Option<Revision>, std::time::SystemTime),
    Begin(Report),
    /// Boxed: a wait and its end are twice the size of the other effects.
    End(Box<(WaitHandle, Option<(HealthWait, WaitEnd)>)>, bool),
    HealDuringWait(BTreeSet<ObjectRef>),
    /// Take the revision the parent records as applied ([`crate::sync::Engine::adopt_recorded`]).
    Adopt,
}

/// What an engine effect found (the driver keeps the heavy parts and tells `step` the rest).
pub(super) enum Done {
    Fetched(crate::sync::Result<Revision>),
    Early(EarlyApply),
    Rest(crate::sync::Result<Report>),
    Healed(Option<(bool, Report)>),
    FailRecorded,
    Began(Option<WaitHandle>),
    Finished,
    HealedDuringWait,
    /// The revision taken, when it was not the one held.
    Adopted(Option<Revision>),
}

impl Ctx {
    /// Takes the revision the parent records as applied as the one self-heal heals toward
    /// ([`crate::sync::Engine::adopt_recorded`]), logged when it is another than the one held
    /// (`recorded revision adopted`); when it cannot be read or loaded, logged as a warning and
    /// none.
    async fn adopt_recorded(&mut self) -> Option<Revision> {
        let unit = self.engine.unit_name().to_string();
        match self.engine.adopt_recorded().await {
            Ok(Some(revision)) => {
                tracing::info!(unit, revision = %revision, "recorded revision adopted: self-heal heals toward it");
                Some(revision)
            }
            Ok(None) => None,
            Err(e) => {
                let error = crate::telemetry::unit_error(&unit, &e);
                tracing::warn!(unit, %error, "recorded revision not adopted: self-heal heals toward nothing until a sync");
                None
            }
        }
    }

    /// Runs `effect`, owning the context, and hands it back.
    pub(super) async fn run(mut self: Box<Self>, effect: Effect) -> (Box<Self>, Done) {
        let done = match effect {
            Effect::Fetch(at) => Done::Fetched(self.engine.fetch_since(at).await),
            Effect::Early(revision) => Done::Early(self.engine.early(&revision).await),
            Effect::Rest(early) => Done::Rest(self.engine.sync_rest(early).await),
            Effect::Heal(trigger, objects) => Done::Healed(self.heal_objects(&trigger, &objects).await),
            Effect::Fail(trigger, error, kept, retry_at) => {
                self.failed(&trigger, error, kept, retry_at).await;
                Done::FailRecorded
            }
            Effect::Begin(report) => Done::Began(self.begin_wait(report).await),
            Effect::End(wait, record) => {
                let (waiting, ended) = *wait;
                self.end_wait(waiting, ended, record).await;
                Done::Finished
            }
            Effect::HealDuringWait(objects) => {
                let trigger = Trigger::now(TriggerKind::Drift);
                self.heal_objects(&trigger, &objects).await;
                Done::HealedDuringWait
            }
            Effect::Adopt => Done::Adopted(self.adopt_recorded().await),
        };
        (self, done)
    }
}
