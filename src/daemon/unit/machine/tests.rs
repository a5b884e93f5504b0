//! Table tests of [`step`]: each row gives a state (reached by driving events from a fresh one),
//! one event, and the phase and actions expected; some rows check what the state keeps.

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::Instant;

use super::*;
use crate::daemon::slots::SlotClass;
use crate::health::ready::Blocker;
use crate::object::{GroupKind, ObjectRef};
use crate::source::{Revision, Touch};

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn later() -> Instant {
    base() + std::time::Duration::from_secs(5)
}

fn retry_deadline() -> tokio::time::Instant {
    tokio::time::Instant::from_std(base() + std::time::Duration::from_secs(60))
}

fn t(kind: TriggerKind) -> Trigger {
    Trigger::new(kind, base())
}

/// The kinds in `kinds` merged in that order, at [`base`].
fn merged(kinds: &[TriggerKind]) -> Trigger {
    let mut trigger = t(kinds[0]);
    kinds[1..].iter().for_each(|k| trigger.merge(t(*k)));
    trigger
}

fn rev(s: &str) -> Revision {
    Revision(s.to_string())
}

fn objects() -> BTreeSet<ObjectRef> {
    let gk = GroupKind { group: "apps".into(), kind: "Deployment".into() };
    BTreeSet::from([ObjectRef::new(gk, Some("default"), "web")])
}

fn touch(touched: bool, to: &str) -> Event {
    Event::Probed(Some(Touch { touched, to: rev(to) }))
}

fn rested(revision: &str, yielded: bool) -> Event {
    Event::Rest(Ok(Rested { revision: rev(revision), yielded, objects: 7, ok: true, path_only: false }))
}

/// The rest of a sync of `revision` from the unit's path alone, every object applied when `ok`.
fn rested_path_only(revision: &str, ok: bool) -> Event {
    Event::Rest(Ok(Rested { revision: rev(revision), yielded: false, objects: 7, ok, path_only: true }))
}

fn drive(mut state: State, events: Vec<Event>) -> State {
    for event in events {
        state = step(state, event).0;
    }
    state
}

/// A git unit (it has a push lane) that last applied `a`.
fn idle() -> State {
    let mut state = State::new(true);
    state.last_applied = Some(rev("a"));
    state
}

/// A git unit that last applied every object of `a` from its path alone.
fn path_only() -> State {
    State { path_only_at: Some(rev("a")), ..idle() }
}

/// A chart unit (no push lane) that last applied `a`.
fn chart() -> State {
    State { lane: false, ..idle() }
}

fn backing_off() -> State {
    drive(idle(), vec![Event::RetryAt(retry_deadline())])
}

fn probing(kind: TriggerKind) -> State {
    drive(idle(), vec![Event::Trigger(Some(t(kind)))])
}

/// A push that left the unit's path alone (the branch at `b`) waits for a slot.
fn untouched() -> State {
    drive(probing(TriggerKind::Push), vec![touch(false, "b")])
}

/// A push that touched the unit's path fetching, holding neither the lane nor a slot.
fn lane_fetching() -> State {
    drive(probing(TriggerKind::Push), vec![touch(true, "b")])
}

/// A push applying `b` early, in the lane.
fn early_in_lane() -> State {
    drive(lane_fetching(), vec![Event::Fetched(Ok(rev("b"))), Event::Lane])
}

/// A push of `b` waiting for a slot for its rest, after its early apply sent 3 objects.
fn rest_slot() -> State {
    drive(early_in_lane(), vec![Event::Early(3)])
}

/// A resync (re-send of `a`, the revision last applied) fetching, holding no slot.
fn resync_fetching() -> State {
    drive(idle(), vec![Event::Tick(t(TriggerKind::Resync))])
}

/// A resync re-sending `a`: its rest runs.
fn resending() -> State {
    drive(resync_fetching(), vec![Event::Fetched(Ok(rev("a"))), Event::Slot, Event::Early(0)])
}

/// A push of the new revision `b`: its rest runs.
fn applying_new() -> State {
    drive(rest_slot(), vec![Event::Slot])
}

fn push_fetching_during_resend() -> State {
    drive(resending(), vec![Event::Trigger(Some(t(TriggerKind::Push)))])
}

fn resend_with_newer() -> State {
    drive(push_fetching_during_resend(), vec![Event::PushFetched(Ok(rev("c")))])
}

fn new_with_newer() -> State {
    drive(applying_new(), vec![Event::Trigger(Some(t(TriggerKind::Push))), Event::PushFetched(Ok(rev("c")))])
}

fn healing() -> State {
    drive(idle(), vec![Event::HealDue(objects(), base()), Event::Slot])
}

/// Waiting for the health of `b` (a push's sync).
fn waiting() -> State {
    drive(applying_new(), vec![rested("b", false), Event::WaitBegun(true)])
}

fn beginning() -> State {
    drive(applying_new(), vec![rested("b", false)])
}

fn wait_fetching(kind: TriggerKind) -> State {
    drive(waiting(), vec![Event::Trigger(Some(t(kind)))])
}

fn failed() -> State {
    drive(lane_fetching(), vec![Event::Fetched(Err(Failed))])
}

/// Backing off after a fetch that failed (the source unreachable).
fn source_down() -> State {
    drive(failed(), vec![Event::FailRecorded, Event::RetryAt(retry_deadline())])
}

fn tag(action: &Action) -> String {
    match action {
        Action::Observe(t) => format!("Observe({})", t.kind),
        Action::Ignored(kind) => format!("Ignored({kind})"),
        Action::Log(log) => format!("Log({})", log_tag(log)),
        Action::Probe { from, .. } => format!("Probe({})", from.as_ref().map_or("-".into(), |r| r.to_string())),
        Action::AcquireLane => "AcquireLane".into(),
        Action::ReleaseLane => "ReleaseLane".into(),
        Action::AcquireSlot => "AcquireSlot".into(),
        Action::ReleaseSlot => "ReleaseSlot".into(),
        Action::Fetch { .. } => "Fetch".into(),
        Action::Gate(r) => format!("Gate({r})"),
        Action::Early(r) => format!("Early({r})"),
        Action::Rest => "Rest".into(),
        Action::FetchPush(t) => format!("FetchPush({})", t.kind),
        Action::AbandonPush => "AbandonPush".into(),
        Action::RaiseYield => "RaiseYield".into(),
        Action::LogObjects => "LogObjects".into(),
        Action::Publish(t) => format!("Publish({})", t.kind),
        Action::Heal(t, objects) => format!("Heal({},{})", t.kind, objects.len()),
        Action::Fail(t) => format!("Fail({})", t.kind),
        Action::BeginWait => "BeginWait".into(),
        Action::WaitFetch => "WaitFetch".into(),
        Action::HealDuringWait(objects) => format!("HealDuringWait({})", objects.len()),
        Action::EndWait { cancel, record } => format!("EndWait(cancel={cancel},record={record})"),
        Action::NoteDrift(events) => format!("NoteDrift({})", events.len()),
        Action::DrainDrift => "DrainDrift".into(),
        Action::ResetBackoff => "ResetBackoff".into(),
        Action::ScheduleRetry => "ScheduleRetry".into(),
        Action::Adopt => "Adopt".into(),
        Action::NoteQueued => "NoteQueued".into(),
    }
}

fn log_tag(log: &Log) -> String {
    match log {
        Log::Triggered { kind, revision, lane } => {
            let lane = lane.map_or("", |l| if l { " lane" } else { " slot" });
            format!("sync triggered {kind} {revision}{lane}")
        }
        Log::NoNewRevision { kind, revision } => format!("no new revision {kind} {revision}"),
        Log::PathUnchanged { kind, from, revision } => format!("path unchanged {kind} {from}->{revision}"),
        Log::Yielded { revision, to, kind, objects } => format!("yielded {revision}->{to} {kind} {objects}"),
        Log::CancelledByReload { revision, kind } => format!("cancelled by reload {revision} {kind}"),
        Log::CancelledByVariables { revision, kind } => format!("cancelled by variables {revision} {kind}"),
        Log::CancelledByRevision { revision, new_revision, kind } => {
            format!("cancelled by revision {revision}->{new_revision} {kind}")
        }
        Log::Blocked { revision, waiting } => {
            let units: Vec<&str> = waiting.iter().map(|w| w.unit.as_str()).collect();
            format!("blocked {revision} on {}", units.join(","))
        }
        Log::DependenciesReady { revision } => format!("dependencies ready {revision}"),
    }
}

/// One row: in `given`, `event` leads to `phase` with `actions`, and `then` holds.
struct Row {
    name: &'static str,
    given: fn() -> State,
    event: fn() -> Event,
    phase: &'static str,
    actions: &'static [&'static str],
    then: fn(&State) -> bool,
}

const ANY: fn(&State) -> bool = |_| true;

fn queued(state: &State) -> Option<TriggerKind> {
    state.queued.as_ref().map(|t| t.kind)
}

fn check(rows: &[Row]) {
    let mut failures = Vec::new();
    for row in rows {
        let (state, actions) = step((row.given)(), (row.event)());
        let got: Vec<String> = actions.iter().map(tag).collect();
        let want: Vec<String> = row.actions.iter().map(|s| s.to_string()).collect();
        if state.phase.name() != row.phase || got != want || !(row.then)(&state) {
            failures.push(format!(
                "{}: got {} {:?} (then: {}), want {} {:?}",
                row.name,
                state.phase.name(),
                got,
                (row.then)(&state),
                row.phase,
                want
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} rows:\n{}", failures.len(), rows.len(), failures.join("\n"));
}

fn row(
    name: &'static str,
    given: fn() -> State,
    event: fn() -> Event,
    phase: &'static str,
    actions: &'static [&'static str],
) -> Row {
    Row { name, given, event, phase, actions, then: ANY }
}

impl Row {
    fn then(self, then: fn(&State) -> bool) -> Row {
        Row { then, ..self }
    }
}

mod apply;
mod depends;
mod fetch;
mod idle;
mod merge;
mod pushed;
mod quiet;
mod slot;
mod suspend;
mod unchanged;
mod wait;
