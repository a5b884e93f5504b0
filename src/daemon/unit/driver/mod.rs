//! The driver of a unit's state machine: the one loop that waits for the next event — from the
//! trigger channel, the ticks, drift, or an effect it started — in one `select!`
//! ([`Driver::next_event`]), hands it to [`step`], and runs the actions it returns
//! ([`Driver::act`]). An effect that uses the engine owns it (with the rest of [`Ctx`]) while it
//! runs and hands it back with its result, so only one runs at a time; a push fetched during a
//! sync, a probe and a fetch during the health wait go through a clone of the [`Repo`] handle.
//! Every effect is boxed: a sync's future is large, and inline it would size the task at rest,
//! which is idle (~16 KiB a unit at 1,000 units; README "Fleet").

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at, sleep_until};
use tracing::info;

mod side;

use super::effect::{Done, Effect};
use super::machine::{Action, Depends, Event, Failed, Phase, Rested, State, step};
use super::wait::WaitHandle;
use super::{Ctx, Links, Queues, UnitTask};
use crate::cluster::drift::DriftQueue;
use crate::cluster::inventory::Control;
use crate::daemon::backoff::Backoff;
use crate::daemon::metrics::Metrics;
use crate::daemon::slots::{Slot, Slots};
use crate::daemon::trigger::{Trigger, TriggerKind, TriggerReceiver};
use crate::health::wait::{HealthWait, WaitEnd};
use crate::sync::Report;
use crate::sync::early::EarlyApply;
use crate::sync::repo::Repo;

/// How long the first sync waits for the first list of the parent's watch before it reads the
/// parent's controls itself ([`Driver::first_control`]).
const FIRST_LIST: Duration = Duration::from_secs(5);

/// An effect that owns the engine, and gives it back with what it found.
type EngineJob = Pin<Box<dyn Future<Output = (Box<Ctx>, Done)> + Send>>;
/// An effect that does not use the engine; its result as an event.
type Io = Pin<Box<dyn Future<Output = Event> + Send>>;
/// A request for a permit of a semaphore.
type Acquire = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;
/// A request for a sync slot.
type AcquireSlot = Pin<Box<dyn Future<Output = Option<Slot>> + Send>>;

/// What the one `select!` got, before it becomes an [`Event`].
enum Got {
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

/// A unit's task as it runs: its state, the event sources, the effects in flight and what
/// they left for the next ones.
pub(super) struct Driver {
    state: State,
    /// The engine and what its effects need; `None` while an engine effect owns it.
    ctx: Option<Box<Ctx>>,
    effects: Effects,
    permits: Permits,
    kept: Kept,
    sources: Sources,
    shared: Shared,
    /// The controls of the request and suspension, as the driver acted on them.
    controls: Controls,
}

/// The effects in flight that do not own the engine's slot in [`Driver::ctx`], and the one
/// that does.
#[derive(Default)]
struct Effects {
    engine_job: Option<EngineJob>,
    /// A probe, the gate's judgement, or a fetch during the health wait.
    io: Option<Io>,
    /// A push fetched during a sync.
    push: Option<Io>,
    waiting: Option<WaitHandle>,
    /// How the health wait ended by itself, for its end.
    ended: Option<(HealthWait, WaitEnd)>,
}

/// The sync slot and the push-lane permit: wanted, or held.
#[derive(Default)]
struct Permits {
    slot_wanted: Option<AcquireSlot>,
    slot: Option<Slot>,
    lane_wanted: Option<Acquire>,
    lane: Option<OwnedSemaphorePermit>,
}

/// What an effect left for the actions that follow it, and the retry backoff.
#[derive(Default)]
struct Kept {
    early: Option<EarlyApply>,
    report: Option<Report>,
    failure: Option<crate::sync::Error>,
    backoff: Backoff,
    /// The retry instant last published (status, metrics).
    backoff_shown: Option<Instant>,
    /// The retry instant drawn when a failure was recorded (and recorded with it), which the
    /// retry scheduled after it keeps.
    retry: Option<Instant>,
}

/// The event sources the driver listens to besides its effects.
struct Sources {
    triggers: TriggerReceiver,
    shutdown: watch::Receiver<bool>,
    /// Drift events of the unit's members, from its metadata cache.
    drift: DriftQueue,
    /// Drift events start a self-heal.
    self_heal: bool,
    poll: Interval,
    resync: Interval,
    /// The controls on the unit's ApplySet parent ([`Control`]), from its watch; `None` once
    /// the watch ended.
    control: Option<watch::Receiver<Option<Control>>>,
    /// The records of the units it depends on, watched (`depends_on`); `None` without any.
    gate: Option<super::depends::Gate>,
    /// Members with health whose status moved, from the metadata cache, and when they are
    /// judged again ([`super::follow`]).
    touched: crate::cluster::drift::Touched,
    follow_at: Option<Instant>,
}

/// The unit's name and what the driver shares with the rest of the daemon.
struct Shared {
    unit: String,
    /// A handle on the unit's mirror (clones share it).
    repo: Repo,
    yield_signal: crate::apply::Yield,
    metrics: Arc<Metrics>,
    sync_slots: Arc<Slots>,
    fetch_host: Option<Arc<Semaphore>>,
    push_lane: Option<Arc<Semaphore>>,
    /// The unit's side of the path-unchanged rule, shared with its repository's watch.
    quiet: Option<Arc<crate::daemon::quiet::Quiet>>,
    first: TriggerKind,
    status: crate::daemon::trigger::Statuses,
}

/// What the driver did with the controls on the parent.
#[derive(Default)]
struct Controls {
    /// The unit's config suspends it.
    by_config: bool,
    /// A request seen and not yet handed to the machine as a trigger.
    due: Option<String>,
    /// The request last handed to the machine: not handed again while its sync runs.
    taken: Option<String>,
    /// The request the next job of kind reconcile answers, once it fetches.
    answering: Option<String>,
}

impl Driver {
    pub(super) fn new(task: UnitTask, shutdown: watch::Receiver<bool>) -> Self {
        let UnitTask { engine, triggers, status, metrics, timing, queues, first, links } = task;
        let (Queues { sync_slots, fetch_host, push_lane, quiet }, Links { notify, board, depends }) = (queues, links);
        let start = Instant::now();
        let mut poll = interval_at(start + timing.interval, timing.interval);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let first_resync = super::first_resync(timing.resync_interval, timing.resync_phase);
        let mut resync = interval_at(start + first_resync, timing.resync_interval);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let unit = engine.unit_name().to_string();
        let mut engine = engine;
        let (repo, yield_signal, drift) = (engine.repo().clone(), engine.yield_signal(), engine.cache().subscribe());
        let control = Some(engine.control());
        let touched = engine.cache().touched();
        let controls = Controls { by_config: engine.suspended_by_config(), ..Controls::default() };
        let ctx = Ctx::new(engine, status.clone(), metrics.clone(), first, (notify, board));
        Self {
            state: State {
                depends: Depends { gated: depends.is_some(), blocked_by: None },
                ..State::new(push_lane.is_some())
            },
            ctx: Some(Box::new(ctx)),
            effects: Effects::default(),
            permits: Permits::default(),
            kept: Kept::default(),
            sources: Sources {
                triggers,
                shutdown,
                drift,
                self_heal: timing.self_heal,
                poll,
                resync,
                control,
                gate: depends,
                touched,
                follow_at: None,
            },
            shared: Shared {
                unit,
                repo,
                yield_signal,
                metrics,
                sync_slots,
                fetch_host,
                push_lane,
                quiet,
                first,
                status,
            },
            controls,
        }
    }

    /// Runs the first sync, then every event, until the machine stops. The first sync waits
    /// for the parent's controls ([`Driver::first_control`]), so a suspended unit applies
    /// nothing at start.
    ///
    /// The driver goes on the heap and the future borrows it: an `async fn` taking the driver
    /// by value keeps it twice in its state (its argument, and the local it is moved into:
    /// rust-lang/rust#62958), for as long as the unit runs.
    pub(super) fn run(self) -> impl std::future::Future<Output = ()> + Send {
        let mut driver = Box::new(self);
        async move { driver.drive().await }
    }

    async fn drive(&mut self) {
        self.shared.metrics.set_suspended(&self.shared.unit, false);
        let Some(control) = self.first_control().await else { return };
        if let Some(event) = self.on_control(control) {
            self.feed(event);
        }
        self.feed(Event::Trigger(Some(Trigger::now(self.shared.first))));
        while !matches!(self.state.phase, Phase::Stopped) {
            if let Some(quiet) = &self.shared.quiet {
                quiet.rest(super::machine::quiet(&self.state));
            }
            let event = self.next_event().await;
            // Woken for anything: a revision a push left while the unit rested is taken first.
            if let Some(to) = self.shared.quiet.as_ref().and_then(|q| q.wake()) {
                self.feed(Event::Taken(to, std::time::Instant::now()));
            }
            if let Some(event) = event {
                self.feed(event);
            }
        }
    }

    /// The controls on the parent before the first sync: from its watch's first list, or, when
    /// that takes longer than [`FIRST_LIST`] (the API server slow or unreachable), from one GET
    /// of the parent; when that fails too, none (logged): the first sync then meets the same
    /// unreachable API server and fails, as it did before the controls. `None` on shutdown.
    async fn first_control(&mut self) -> Option<Control> {
        let Some(watch) = self.sources.control.as_mut() else { return Some(Control::default()) };
        let listed = tokio::select! {
            _ = self.sources.shutdown.wait_for(|stop| *stop) => return None,
            listed = tokio::time::timeout(FIRST_LIST, watch.wait_for(Option::is_some)) => {
                listed.map(|seen| seen.map(|control| control.clone().unwrap_or_default()))
            }
        };
        match listed {
            Ok(Ok(control)) => return Some(control),
            Ok(Err(_)) => self.sources.control = None,
            Err(_) => {}
        }
        // Boxed: inline, the GET's future would size the unit's task for as long as it runs.
        let engine = &self.ctx.as_ref().expect("the engine is home before the first sync").engine;
        let read = Box::pin(engine.read_control()).await;
        Some(read.unwrap_or_else(|e| {
            let error = crate::telemetry::error_chain(&e);
            tracing::warn!(unit = self.shared.unit.as_str(), %error, "controls on the ApplySet parent not read: the unit starts unsuspended unless its config suspends it");
            Control::default()
        }))
    }

    /// What the controls on the parent now ask of the machine: a suspend or resume when the
    /// unit's suspension (by its config or the parent) changed; a new sync request is kept as
    /// due ([`Got::Request`]).
    fn on_control(&mut self, control: Control) -> Option<Event> {
        let pending = control.pending_request().map(str::to_owned);
        if pending.is_some() && pending != self.controls.taken {
            self.controls.due = pending;
        }
        let suspended = self.controls.by_config || control.suspended;
        if suspended == self.state.suspended {
            return None;
        }
        self.shared.metrics.set_suspended(&self.shared.unit, suspended);
        self.shared.status.set_suspended(&self.shared.unit, suspended);
        if suspended {
            let by = if control.suspended { control.suspended_by.unwrap_or_default() } else { "config".to_owned() };
            info!(unit = self.shared.unit.as_str(), by, "unit suspended");
            Some(Event::Suspend)
        } else {
            info!(unit = self.shared.unit.as_str(), "unit resumed");
            Some(Event::Resume)
        }
    }

    /// Steps the machine with `event`, and with the events the actions answer at once.
    fn feed(&mut self, event: Event) {
        let mut events = VecDeque::from([event]);
        while let Some(event) = events.pop_front() {
            let state = std::mem::replace(&mut self.state, State::new(false));
            let (state, actions) = step(state, event);
            tracing::trace!(unit = self.shared.unit.as_str(), phase = state.phase.name(), "unit phase");
            self.state = state;
            for action in actions {
                events.extend(self.act(action));
            }
        }
        let at = if let Phase::BackingOff(at) = self.state.phase { Some(at) } else { None };
        let shared = (&self.shared.status, &*self.shared.metrics);
        super::publish::backoff(&self.shared.unit, shared, &mut self.kept.backoff_shown, at);
    }
}

impl Driver {
    /// The next event: the one `select!` of the task, over the sources the state listens to
    /// ([`State::listen`]) and the effects in flight.
    async fn next_event(&mut self) -> Option<Event> {
        if !self.state.stopping && *self.sources.shutdown.borrow() {
            return Some(Event::Shutdown);
        }
        let listen = self.state.listen();
        let far = Instant::now() + Duration::from_secs(86_400);
        let heal_at = if listen.drift { self.ctx.as_ref().and_then(|c| c.heal.next()) } else { None };
        let drift_on = listen.drift && self.sources.self_heal && self.ctx.is_some();
        let stopping = self.state.stopping;
        let request = listen.triggers && self.controls.due.is_some();
        let follow = self.ctx.is_some() && super::follow::follows(&self.state.phase);
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
                self.sources.follow_at = Some(Instant::now() + super::follow::FOLLOW_DEBOUNCE);
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

    /// Starts `effect`, which owns the engine until it ends.
    fn start(&mut self, effect: Effect) {
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
    fn act(&mut self, action: Action) -> Option<Event> {
        match action {
            Action::Observe(trigger) => self.observe(&trigger),
            Action::Ignored(kind) => self.ignored(kind),
            Action::Log(log) => super::log::write(&self.shared.unit, log, &self.shared.status, &self.shared.metrics),
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
