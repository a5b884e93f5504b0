//! Rows of a unit at rest, idle or backing off: what starts a job from there (a push probed,
//! a poll or resync fetching, a self-heal waiting for a slot, the retry), what a failing source
//! starts, and what stops the unit.

use super::*;
use TriggerKind::{Poll, Push, Reload, Resync, Webhook};

#[test]
fn idle_and_backing_off() {
    check(&[
        row(
            "a push of a git unit is probed first",
            idle,
            || Event::Trigger(Some(t(Push))),
            "fetching",
            &["Observe(push)", "Probe(a)"],
        ),
        row(
            "a webhook is probed, not counted again (the HTTP server counts it)",
            idle,
            || Event::Trigger(Some(t(Webhook))),
            "fetching",
            &["Probe(a)"],
        ),
        row(
            "a poll fetches at once, holding no slot",
            idle,
            || Event::Tick(t(Poll)),
            "fetching",
            &["Observe(poll)", "Fetch"],
        ),
        row(
            "a push of a chart unit has no lane: it fetches holding nothing",
            chart,
            || Event::Trigger(Some(t(Push))),
            "fetching",
            &["Observe(push)", "Fetch"],
        ),
        row(
            "a resync fetches holding no slot",
            idle,
            || Event::Tick(t(Resync)),
            "fetching",
            &["Observe(resync)", "Fetch"],
        ),
        row(
            "a reload fetches holding no slot",
            idle,
            || Event::Trigger(Some(t(Reload))),
            "fetching",
            &["Observe(reload)", "Fetch"],
        ),
        row("drift is noted", idle, || Event::Drift(vec![]), "idle", &["NoteDrift(0)"]),
        row(
            "a due self-heal waits for a slot",
            idle,
            || Event::HealDue(objects(), base()),
            "slot wait",
            &["Observe(drift)", "AcquireSlot"],
        ),
        row("a self-heal with nothing due does nothing", idle, || Event::HealDue(BTreeSet::new(), base()), "idle", &[]),
        row("the retry syncs", backing_off, || Event::RetryDue(base()), "fetching", &["Observe(retry)", "Fetch"])
            .then(|s| s.retry_at.is_none()),
        row(
            "a poll while backing off keeps the retry due",
            backing_off,
            || Event::Tick(t(Poll)),
            "fetching",
            &["Observe(poll)", "Fetch"],
        )
        .then(|s| s.retry_at == Some(retry_deadline())),
        row(
            "while the source fails, a poll starts nothing: the retry is next",
            source_down,
            || Event::Tick(t(Poll)),
            "backing off",
            &[],
        )
        .then(|s| s.retry_at == Some(retry_deadline())),
        row(
            "while the source fails, a resync starts nothing",
            source_down,
            || Event::Tick(t(Resync)),
            "backing off",
            &[],
        ),
        row(
            "while the source fails, a push starts the backoff over and fetches",
            source_down,
            || Event::Trigger(Some(t(Push))),
            "fetching",
            &["ResetBackoff", "Observe(push)", "Probe(a)"],
        )
        .then(|s| s.retry_at.is_none()),
        row(
            "while the source fails, its retry fetches",
            source_down,
            || Event::RetryDue(base()),
            "fetching",
            &["Observe(retry)", "Fetch"],
        ),
        row("a scheduled retry backs off", idle, || Event::RetryAt(retry_deadline()), "backing off", &[]),
        row("shutdown stops an idle unit", idle, || Event::Shutdown, "stopped", &[]),
        row("shutdown stops a unit backing off", backing_off, || Event::Shutdown, "stopped", &[]),
        row("the channel closed stops an idle unit", idle, || Event::Trigger(None), "stopped", &[]),
        row(
            "a suspended unit syncs nothing (it counts the trigger: tests/suspend.rs)",
            || State { phase: Phase::Suspended, ..idle() },
            || Event::Trigger(Some(t(Push))),
            "suspended",
            &["Ignored(push)"],
        ),
        row(
            "a suspended unit stops",
            || State { phase: Phase::Suspended, ..idle() },
            || Event::Shutdown,
            "stopped",
            &[],
        ),
    ]);
}
