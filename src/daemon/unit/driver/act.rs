//! The driver's side of `step`'s actions ([`Driver::act`]): each action run — an effect
//! started, a permit asked for or released, a report published, a retry scheduled — and the
//! event it answers at once, if any.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::super::effect::Effect;
use super::super::machine::{Action, Event, Failed};
use super::{Acquire, Driver};

impl Driver {
    /// Starts `effect`, which owns the engine until it ends.
    pub(super) fn start(&mut self, effect: Effect) {
        let ctx = self.ctx.take().expect("one engine effect at a time");
        self.effects.engine_job = Some(Box::pin(ctx.run(effect)));
    }

    /// Starts the fetch of a sync once it holds a permit of the unit's remote host (no slot).
    fn fetch(&mut self, at: std::time::Instant) {
        let (ctx, host) = (self.ctx.take().expect("one engine effect at a time"), self.shared.fetch_host.clone());
        self.effects.engine_job = Some(Box::pin(async move {
            let _permit = if let Some(host) = host { host.acquire_owned().await.ok() } else { None };
            ctx.run(Effect::Fetch(at)).await
        }));
    }

    /// Asks for a permit of `semaphore`.
    fn acquire(semaphore: &Arc<Semaphore>) -> Acquire {
        let semaphore = semaphore.clone();
        Box::pin(async move { semaphore.acquire_owned().await.ok() })
    }

    /// Runs `action`; the event it answers at once, if any.
    pub(super) fn act(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Observe(trigger) => self.observe(&trigger),
            Action::Ignored(kind) => self.ignored(kind),
            Action::Log(log) => {
                super::super::log::write(&self.shared.unit, log, &self.shared.status, &self.shared.metrics)
            }
            Action::Probe { from, at } => {
                let repo = self.shared.repo.clone();
                self.effects.io =
                    Some(Box::pin(async move { Event::Probed(repo.push_touches(from.as_ref(), at).await) }));
            }
            Action::AcquireLane => match &self.shared.push_lane {
                Some(lane) => self.permits.lane_wanted = Some(Self::acquire(lane)),
                None => return Some(Event::Lane),
            },
            Action::ReleaseLane => (self.permits.lane, self.permits.lane_wanted) = (None, None),
            Action::AcquireSlot => {
                let class = self.state.slot_class();
                self.permits.slot_wanted = Some(Box::pin(self.shared.sync_slots.clone().acquire(class)));
            }
            Action::ReleaseSlot => (self.permits.slot, self.permits.slot_wanted) = (None, None),
            Action::Fetch { at } => {
                if let Some(token) = self.controls.answering.take() {
                    self.home().engine.answer_request(token);
                }
                self.fetch(at);
            }
            Action::Gate(revision) => self.gate(revision),
            Action::Early(revision) => self.start(Effect::Early(revision)),
            Action::Rest => {
                let early = self.kept.early.take().expect("an early apply before the rest");
                self.start(Effect::Rest(early));
            }
            Action::FetchPush(t) => {
                let repo = self.shared.repo.clone();
                let fetch = async move { Event::PushFetched(repo.fetch_since(t.at).await.map_err(|_| Failed)) };
                self.effects.push = Some(Box::pin(fetch));
            }
            Action::AbandonPush => self.effects.push = None,
            Action::RaiseYield => self.shared.yield_signal.raise(),
            Action::LogObjects => {
                if let Some(report) = self.kept.report.take() {
                    crate::observe::log::log_objects(&report);
                }
            }
            Action::Publish(trigger) => self.publish(&trigger),
            Action::Heal(trigger, objects) => self.start(Effect::Heal(trigger, objects)),
            Action::Fail(trigger) => self.fail(trigger),
            Action::BeginWait => {
                let report = self.kept.report.take().expect("a report to wait on");
                self.start(Effect::Begin(report));
            }
            Action::WaitFetch => {
                let repo = self.shared.repo.clone();
                self.effects.io = Some(Box::pin(async move { Event::WaitFetched(repo.fetch().await.ok()) }));
            }
            Action::HealDuringWait(objects) => self.start(Effect::HealDuringWait(objects)),
            Action::EndWait { cancel, record } => {
                let waiting = self.effects.waiting.take().expect("a wait to end");
                let ended = if cancel { None } else { self.effects.ended.take() };
                self.effects.ended = None;
                self.start(Effect::End(Box::new((waiting, ended)), record));
            }
            Action::NoteDrift(events) => self.home().note_drift(events),
            Action::DrainDrift => {
                // Our own writes come back as watch events: drop those now, keep the rest.
                let events = self.sources.drift.take();
                if self.sources.self_heal {
                    self.home().note_drift(events);
                }
            }
            Action::ResetBackoff => self.reset_backoff(),
            Action::ScheduleRetry => return Some(Event::RetryAt(self.retry_at())),
            Action::Adopt => self.start(Effect::Adopt),
            Action::NoteQueued => self.note_queued(),
        }
        None
    }
}
