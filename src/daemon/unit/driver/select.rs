//! The driver's one `select!` ([`Driver::next_event`]): which sources and effects it listens to
//! in the machine's state, and what each got becomes — an [`Event`] for `step`, with the effect
//! that ended cleared and what it found that `step` does not need kept for the actions that
//! follow.

use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, sleep_until};
use tracing::info;

use super::super::Ctx;
use super::super::effect::Done;
use super::super::machine::{Event, Failed, Rested};
use super::{Driver, Effects, Permits, Sources};
use crate::daemon::slots::Slot;
use crate::daemon::trigger::{Trigger, TriggerKind};
use crate::health::wait::{HealthWait, WaitEnd};

/// What the one `select!` got, before it becomes an [`Event`].
pub(super) enum Got {
    Event(Event),
    HealDue,
    Engine(Box<Ctx>, Box<Done>),
    Slot(Option<Slot>),
    Lane(Option<OwnedSemaphorePermit>),
    WaitEnded(HealthWait, WaitEnd),
    /// The controls on the ApplySet parent changed (`false`: their watch ended).
    Control(bool),
    /// A sync request seen on the parent is due as a trigger.
    Request,
    /// A member with health moved: judge the members again after the debounce.
    Touched,
    /// The debounce after a moved member passed.
    FollowDue,
}
impl Driver {
    /// The next event: the one `select!` of the task, over the sources the state listens to
    /// ([`State::listen`](crate::daemon::unit::machine::State::listen)) and the effects in flight.
    pub(super) async fn next_event(&mut self) -> Option<Event> {
        if !self.state.stopping && *self.sources.shutdown.borrow() {
            return Some(Event::Shutdown);
        }
        let listen = self.state.listen();
        let far = Instant::now() + Duration::from_secs(86_400);
        let heal_at = if listen.drift { self.ctx.as_ref().and_then(|c| c.heal.next()) } else { None };
        let drift_on = listen.drift && self.sources.self_heal && self.ctx.is_some();
        let stopping = self.state.stopping;
        let request = listen.triggers && self.controls.due.is_some();
        let follow = self.ctx.is_some() && super::super::follow::follows(&self.state.phase);
        let Self { sources, effects, permits, .. } = self;
        let Sources { shutdown, triggers, poll, resync, drift, control, gate, touched, follow_at, .. } = sources;
        let Effects { engine_job, io, push, waiting, .. } = effects;
        let Permits { slot_wanted, lane_wanted, .. } = permits;
        let got = tokio::select! {
            _ = shutdown.changed(), if !stopping => Got::Event(Event::Shutdown),
            t = triggers.recv(), if listen.triggers => Got::Event(Event::Trigger(t)),
            _ = poll.tick(), if listen.poll => Got::Event(Event::Tick(Trigger::now(TriggerKind::Poll))),
            _ = resync.tick(), if listen.resync => Got::Event(Event::Tick(Trigger::now(TriggerKind::Resync))),
            events = drift.next(), if drift_on => Got::Event(Event::Drift(events)),
            _ = sleep_until(heal_at.unwrap_or(far)), if heal_at.is_some() => Got::HealDue,
            _ = sleep_until(listen.retry.unwrap_or(far)), if listen.retry.is_some() => {
                Got::Event(Event::RetryDue(std::time::Instant::now()))
            }
            (ctx, done) = async { engine_job.as_mut().expect("guarded").await }, if engine_job.is_some() => {
                Got::Engine(ctx, Box::new(done))
            }
            event = async { io.as_mut().expect("guarded").await }, if io.is_some() => Got::Event(event),
            event = async { push.as_mut().expect("guarded").await }, if push.is_some() => Got::Event(event),
            permit = async { slot_wanted.as_mut().expect("guarded").await }, if listen.slot && slot_wanted.is_some() => {
                Got::Slot(permit)
            }
            permit = async { lane_wanted.as_mut().expect("guarded").await }, if lane_wanted.is_some() => {
                Got::Lane(permit)
            }
            (wait, outcome) = async { waiting.as_mut().expect("guarded").ended().await }, if listen.wait_end && waiting.is_some() => {
                Got::WaitEnded(wait, outcome)
            }
            changed = async { control.as_mut().expect("guarded").changed().await }, if control.is_some() => {
                Got::Control(changed.is_ok())
            }
            () = async { gate.as_mut().expect("guarded").changed().await }, if listen.depends && gate.is_some() => {
                Got::Event(Event::DependencyChanged)
            }
            () = std::future::ready(()), if request => Got::Request,
            () = touched.wait(), if follow && follow_at.is_none() => Got::Touched,
            _ = sleep_until(follow_at.unwrap_or(far)), if follow && follow_at.is_some() => Got::FollowDue,
        };
        match got {
            Got::Touched => {
                self.sources.follow_at = Some(Instant::now() + super::super::follow::FOLLOW_DEBOUNCE);
                None
            }
            Got::FollowDue => {
                self.sources.follow_at = None;
                self.home().follow_health().await;
                None
            }
            got => self.event(got),
        }
    }

    /// What the `select!` got, as an event for `step` (none for a change of the controls that
    /// asks nothing): the effect that ended is cleared, and what it found that `step` does not
    /// need is kept for the actions that follow.
    fn event(&mut self, got: Got) -> Option<Event> {
        Some(match got {
            Got::Event(event) => {
                match event {
                    Event::Probed(_) | Event::WaitFetched(_) | Event::Gated(_) => self.effects.io = None,
                    Event::PushFetched(_) => self.effects.push = None,
                    _ => {}
                }
                event
            }
            Got::HealDue => {
                let objects = self.ctx.as_mut().map(|c| c.heal.take_due(Instant::now())).unwrap_or_default();
                Event::HealDue(objects, std::time::Instant::now())
            }
            Got::Engine(ctx, done) => {
                self.effects.engine_job = None;
                self.ctx = Some(ctx);
                self.done(*done)
            }
            Got::Slot(permit) => {
                self.permits.slot_wanted = None;
                self.permits.slot = permit;
                Event::Slot
            }
            Got::Lane(permit) => {
                self.permits.lane_wanted = None;
                self.permits.lane = permit;
                Event::Lane
            }
            Got::WaitEnded(wait, outcome) => {
                self.effects.ended = Some((wait, outcome));
                Event::WaitEnded
            }
            Got::Control(open) => {
                if !open {
                    self.sources.control = None;
                }
                let control =
                    self.sources.control.as_mut().and_then(|c| c.borrow_and_update().clone()).unwrap_or_default();
                return self.on_control(control);
            }
            Got::Touched | Got::FollowDue => return None,
            Got::Request => {
                self.controls.taken = self.controls.due.take();
                info!(
                    unit = self.shared.unit.as_str(),
                    requested_at = self.controls.taken.as_deref(),
                    "sync requested"
                );
                Event::Trigger(Some(Trigger::now(TriggerKind::Reconcile)))
            }
        })
    }

    /// The event of an engine effect that ended.
    fn done(&mut self, done: Done) -> Event {
        match done {
            Done::Fetched(fetched) => Event::Fetched(fetched.map_err(|e| self.keep_failure(e))),
            Done::Early(early) => {
                let objects = early.changes().entries.len();
                self.kept.early = Some(early);
                Event::Early(objects)
            }
            Done::Rest(Ok(report)) => {
                let revision = report.revision.clone();
                let (yielded, objects, ok) =
                    (report.yielded, report.changes.entries.len(), !report.changes.has_failures());
                let path_only = report.path_only;
                self.kept.report = Some(report);
                Event::Rest(Ok(Rested { revision, yielded, objects, ok, path_only }))
            }
            Done::Rest(Err(e)) => Event::Rest(Err(self.keep_failure(e))),
            Done::Healed(healed) => Event::Healed(healed.map(|(ok, report)| {
                let revision = report.revision.clone();
                self.kept.report = Some(report);
                (ok, revision)
            })),
            Done::FailRecorded => Event::FailRecorded,
            Done::Began(waiting) => {
                let began = waiting.is_some();
                self.effects.waiting = waiting;
                Event::WaitBegun(began)
            }
            Done::Finished => Event::WaitFinished,
            Done::HealedDuringWait => Event::HealedDuringWait,
            Done::Adopted(revision) => Event::Adopted(revision),
        }
    }

    fn keep_failure(&mut self, e: crate::sync::Error) -> Failed {
        self.kept.failure = Some(e);
        Failed
    }
}
