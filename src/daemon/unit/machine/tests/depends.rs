//! Rows of the gate of a unit with `depends_on` and its blocked phase.

use super::*;
use crate::health::ready::Unmet;
use TriggerKind::{Poll, Push, Resync, Webhook};

fn unmet(why: &str) -> Vec<Blocker> {
    vec![Blocker { unit: "base".into(), why: Unmet::NotHealthy(why.into()) }]
}

/// A git unit with dependencies that last applied `a`.
fn gated() -> State {
    State { depends: Depends { gated: true, blocked_by: None }, ..idle() }
}

/// A push of `b` to a unit with dependencies, fetched (holding nothing): the gate is asked.
fn gating() -> State {
    drive(gated(), vec![Event::Trigger(Some(t(Push))), touch(true, "b"), Event::Fetched(Ok(rev("b")))])
}

/// That push blocked: `base` is progressing.
fn blocked() -> State {
    drive(gating(), vec![Event::Gated(unmet("progressing"))])
}

/// Blocked, then a change of `base`'s record fetched `b` again and asks the gate.
fn gating_again() -> State {
    drive(blocked(), vec![Event::DependencyChanged, touch(true, "b"), Event::Fetched(Ok(rev("b")))])
}

/// A poll of a unit with dependencies fetching, holding no slot.
fn poll_fetching() -> State {
    drive(gated(), vec![Event::Tick(t(Poll))])
}

/// A unit with dependencies whose push of `b` passed the gate, waiting for a slot for its rest.
fn gated_rest_slot() -> State {
    drive(gating(), vec![Event::Gated(vec![]), Event::Lane, Event::Early(3)])
}

#[test]
fn a_new_revision_passes_the_gate_first() {
    check(&[
        row(
            "a new revision asks the gate",
            gated_fetching_b,
            || Event::Fetched(Ok(rev("b"))),
            "fetching",
            &["Gate(b)"],
        ),
        row(
            "every dependency ready: the sync goes on, in the lane",
            gating,
            || Event::Gated(vec![]),
            "fetching",
            &["AcquireLane"],
        )
        .then(|s| s.depends.blocked_by.is_none()),
        row(
            "a dependency not ready: the wait is logged (no lane was taken)",
            gating,
            || Event::Gated(unmet("progressing")),
            "blocked",
            &["Log(blocked b on base)"],
        )
        .then(|s| s.depends.blocked_by == Some(unmet("progressing"))),
        row(
            "a poll holds no slot while the gate is asked",
            || drive(poll_fetching(), vec![Event::Fetched(Ok(rev("b")))]),
            || Event::Gated(unmet("progressing")),
            "blocked",
            &["Log(blocked b on base)"],
        ),
        row(
            "a re-send of the revision last applied does not ask the gate",
            || drive(gated(), vec![Event::Tick(t(Resync))]),
            || Event::Fetched(Ok(rev("a"))),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "a unit without dependencies does not ask it",
            lane_fetching,
            || Event::Fetched(Ok(rev("b"))),
            "fetching",
            &["AcquireLane"],
        ),
    ]);
}

/// A push of `b` to a unit with dependencies, fetching.
fn gated_fetching_b() -> State {
    drive(gated(), vec![Event::Trigger(Some(t(Push))), touch(true, "b")])
}

#[test]
fn a_blocked_unit_waits_for_a_change_of_a_dependency() {
    check(&[
        row(
            "a dependency's record changed: the kept push runs again",
            blocked,
            || Event::DependencyChanged,
            "fetching",
            &["Probe(a)"],
        ),
        row(
            "still not ready for the same reason: not logged again",
            gating_again,
            || Event::Gated(unmet("progressing")),
            "blocked",
            &[],
        ),
        row(
            "not ready for another reason: logged",
            gating_again,
            || Event::Gated(unmet("degraded")),
            "blocked",
            &["Log(blocked b on base)"],
        ),
        row(
            "ready at last: said so, and the sync goes on",
            gating_again,
            || Event::Gated(vec![]),
            "fetching",
            &["Log(dependencies ready b)", "AcquireLane"],
        )
        .then(|s| s.depends.blocked_by.is_none()),
        row("a trigger runs at once", blocked, || Event::Trigger(Some(t(Webhook))), "fetching", &["Probe(a)"]),
        row("a poll does nothing", blocked, || Event::Tick(t(Poll)), "blocked", &[]),
        row("drift is noted", blocked, || Event::Drift(vec![]), "blocked", &["NoteDrift(0)"]),
        row(
            "a due self-heal runs, the kept push queued behind it",
            blocked,
            || Event::HealDue(objects(), base()),
            "slot wait",
            &["Observe(drift)", "AcquireSlot"],
        )
        .then(|s| queued(s) == Some(Push)),
        row("suspended: the kept push is queued", blocked, || Event::Suspend, "suspended", &[])
            .then(|s| queued(s) == Some(Push)),
        row("shutdown stops it", blocked, || Event::Shutdown, "stopped", &[]),
        row(
            "a newer push does not take the place of a sync past the gate",
            || drive(gated_rest_slot(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::PushFetched(Ok(rev("c"))),
            "slot wait",
            &[],
        )
        .then(|s| queued(s) == Some(Push)),
    ]);
}

#[test]
fn a_blocked_unit_listens_for_its_dependencies_not_the_ticks() {
    let listen = blocked().listen();
    assert!(listen.depends && listen.triggers && listen.drift, "{listen:?}");
    assert!(!listen.poll && !listen.resync && listen.retry.is_none(), "{listen:?}");
    assert!(!idle().listen().depends, "only a blocked unit listens for its dependencies");
}
