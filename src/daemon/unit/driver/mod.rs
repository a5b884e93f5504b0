//! The driver of a unit's state machine: the one loop that waits for the next event — from the
//! trigger channel, the ticks, drift, or an effect it started — in one `select!`
//! ([`Driver::next_event`], in `select`), hands it to [`step`], and runs the actions it returns
//! ([`Driver::act`], in `act`; the smaller acts in `side`). This file holds the driver's state
//! in its parts, the loop around `step`, and the controls on the parent as the loop reads them.
//! An effect that uses the engine owns it (with the rest of [`Ctx`]) while it runs and hands it
//! back with its result, so only one runs at a time; a push fetched during a sync, a probe and a
//! fetch during the health wait go through a clone of the [`Repo`] handle. Every effect is
//! boxed: a sync's future is large, and inline it would size the task at rest, which is idle
//! (~16 KiB a unit at 1,000 units; `benches/RESULTS.md`, "Fleet").

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at};
use tracing::info;

mod act;
mod select;
mod side;

use super::effect::Done;
use super::machine::{Depends, Event, Phase, State, step};
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
    /// due ([`select::Got::Request`]).
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
