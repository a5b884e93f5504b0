//! Rows of suspend and resume.

use super::*;
use TriggerKind::{Poll, Push, Reconcile, Resync, Variables, Webhook};

fn suspended() -> State {
    drive(idle(), vec![Event::Suspend])
}

fn suspended_with_push() -> State {
    drive(suspended(), vec![Event::Trigger(Some(t(Push)))])
}

/// Suspended; a poll came and was kept.
fn suspended_with_poll() -> State {
    drive(suspended(), vec![Event::Tick(t(Poll))])
}

/// Resumed with a poll kept: its sync fetches.
fn resumed_poll() -> State {
    drive(suspended_with_poll(), vec![Event::Resume, Event::Adopted(None)])
}

/// Resumed with a poll kept, then the change of variables merged into it.
fn resumed_variables() -> State {
    drive(suspended_with_poll(), vec![Event::Trigger(Some(t(Variables))), Event::Resume, Event::Adopted(None)])
}

/// Resumed: the recorded revision is being read.
fn adopting(given: fn() -> State) -> State {
    drive(given(), vec![Event::Resume])
}

/// Suspended after the sync of `a` from the unit's path alone, a push kept.
fn path_only_suspended_with_push() -> State {
    drive(path_only(), vec![Event::Suspend, Event::Trigger(Some(t(Push)))])
}

/// Resumed after `r` was applied by hand (a rollback), a push kept: its probe is from `r`.
fn rolled_back_with_push() -> State {
    drive(path_only_suspended_with_push(), vec![Event::Resume, Event::Adopted(Some(rev("r")))])
}

fn suspended_backing_off() -> State {
    drive(backing_off(), vec![Event::Suspend])
}

/// Suspended while the rest of a push's sync of `b` runs.
fn suspended_applying() -> State {
    drive(applying_new(), vec![Event::Suspend])
}

/// Suspended during the health wait of `b`.
fn suspended_waiting() -> State {
    drive(waiting(), vec![Event::Suspend])
}

#[test]
fn a_suspended_unit_starts_nothing() {
    check(&[
        row("an idle unit parks at once", idle, || Event::Suspend, "suspended", &[]),
        row("a unit backing off parks, its retry kept", backing_off, || Event::Suspend, "suspended", &[])
            .then(|s| s.retry_at == Some(retry_deadline())),
        row(
            "a push is counted as not acted on and kept",
            suspended,
            || Event::Trigger(Some(t(Push))),
            "suspended",
            &["Ignored(push)"],
        )
        .then(|s| queued(s) == Some(Push)),
        row("a webhook too", suspended, || Event::Trigger(Some(t(Webhook))), "suspended", &["Ignored(webhook)"])
            .then(|s| queued(s) == Some(Webhook)),
        row("a poll too", suspended, || Event::Tick(t(Poll)), "suspended", &["Ignored(poll)"]),
        row(
            "a later poll coalesces into the kept push",
            suspended_with_push,
            || Event::Tick(t(Resync)),
            "suspended",
            &["Ignored(resync)"],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "a reconcile request is merged into the kept push, which keeps its lane",
            suspended_with_push,
            || Event::Trigger(Some(t(Reconcile))),
            "suspended",
            &["Ignored(reconcile)"],
        )
        .then(|s| queued(s) == Some(Push) && s.queued.as_ref().is_some_and(|t| t.includes(Reconcile))),
        row(
            "a reconcile request takes a kept poll's kind",
            suspended_with_poll,
            || Event::Trigger(Some(t(Reconcile))),
            "suspended",
            &["Ignored(reconcile)"],
        )
        .then(|s| queued(s) == Some(Reconcile)),
        row(
            "a change of variables takes a kept poll's kind",
            suspended_with_poll,
            || Event::Trigger(Some(t(Variables))),
            "suspended",
            &["Ignored(variables)"],
        )
        .then(|s| queued(s) == Some(Variables)),
        row("a due self-heal does nothing", suspended, || Event::HealDue(objects(), base()), "suspended", &[]),
        row("a due retry does nothing", suspended_backing_off, || Event::RetryDue(later()), "suspended", &[]),
        row("shutdown stops it", suspended, || Event::Shutdown, "stopped", &[]),
    ]);
}

#[test]
fn a_suspended_unit_listens_to_triggers_and_ticks_only() {
    let listen = suspended().listen();
    assert!(listen.triggers && listen.poll && listen.resync, "{listen:?}");
    assert!(!listen.drift && listen.retry.is_none(), "{listen:?}");
    let during = suspended_applying().listen();
    assert_eq!(during, Listen::default(), "the job's rest takes no trigger");
    let waiting = suspended_waiting().listen();
    assert!(waiting.wait_end && !waiting.triggers && !waiting.poll && !waiting.drift, "{waiting:?}");
}

#[test]
fn resume_runs_one_sync_of_what_is_pending() {
    check(&[
        row("the recorded revision is read first", suspended_with_push, || Event::Resume, "adopting", &["Adopt"])
            .then(|s| queued(s) == Some(Push) && !s.suspended),
        row(
            "a trigger meanwhile is kept",
            || adopting(suspended),
            || Event::Trigger(Some(t(Webhook))),
            "adopting",
            &[],
        )
        .then(|s| queued(s) == Some(Webhook)),
        row(
            "the kept push is probed as a push",
            || adopting(suspended_with_push),
            || Event::Adopted(None),
            "fetching",
            &["Observe(push)", "Probe(a)"],
        )
        .then(|s| queued(s).is_none() && !s.suspended),
        row("nothing kept: idle", || adopting(suspended), || Event::Adopted(None), "idle", &[]),
        row(
            "a kept poll runs as a resume",
            || adopting(suspended_with_poll),
            || Event::Adopted(None),
            "fetching",
            &["Observe(resume)", "Fetch"],
        ),
        row(
            "which syncs the revision last applied again (the variables may have changed)",
            || drive(resumed_poll(), vec![Event::Fetched(Ok(rev("a")))]),
            || Event::Slot,
            "fetching",
            &["Log(sync triggered resume a slot)", "Early(a)"],
        ),
        row(
            "so does a change of variables merged into the kept poll",
            || drive(resumed_variables(), vec![Event::Fetched(Ok(rev("a")))]),
            || Event::Slot,
            "fetching",
            &["Log(sync triggered variables a slot)", "Early(a)"],
        ),
        row(
            "a kept push with a reconcile merged is probed as a push",
            || adopting(|| drive(suspended_with_push(), vec![Event::Trigger(Some(t(Reconcile)))])),
            || Event::Adopted(None),
            "fetching",
            &["Observe(push)", "Probe(a)"],
        ),
        row(
            "a retry still due: backing off",
            || adopting(suspended_backing_off),
            || Event::Adopted(None),
            "backing off",
            &[],
        ),
        row(
            "suspended again meanwhile: parks",
            || drive(suspended(), vec![Event::Resume, Event::Suspend]),
            || Event::Adopted(None),
            "suspended",
            &[],
        ),
        row("shutdown meanwhile: stops", || adopting(suspended), || Event::Shutdown, "stopped", &[]),
        row(
            "resumed during the sync it was suspended in: it goes on",
            suspended_applying,
            || Event::Resume,
            "applying",
            &[],
        )
        .then(|s| !s.suspended),
    ]);
}

#[test]
fn a_revision_applied_by_hand_while_suspended_is_the_one_last_applied_after_resume() {
    check(&[
        row(
            "the kept push is probed from the rollback's revision",
            || adopting(path_only_suspended_with_push),
            || Event::Adopted(Some(rev("r"))),
            "fetching",
            &["Observe(push)", "Probe(r)"],
        )
        .then(|s| s.last_applied == Some(rev("r")) && s.path_only_at.is_none()),
        row(
            "a push that left the path alone is synced, not taken as the revision before's tree",
            rolled_back_with_push,
            || touch(false, "b"),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "a failed sync of the tip keeps the rollback as the revision last applied",
            || drive(rolled_back_with_push(), vec![touch(true, "b")]),
            || Event::Fetched(Err(Failed)),
            "fetching",
            &["Fail(push)"],
        )
        .then(|s| s.last_applied == Some(rev("r"))),
        row(
            "nothing kept: a poll then finds the tip, a new revision to sync",
            || drive(suspended(), vec![Event::Resume, Event::Adopted(Some(rev("r"))), Event::Tick(t(Poll))]),
            || Event::Fetched(Ok(rev("a"))),
            "slot wait",
            &["AcquireSlot"],
        ),
    ]);
}

#[test]
fn suspend_during_a_sync_lets_it_finish_and_then_stops() {
    check(&[
        row("the rest runs on", applying_new, || Event::Suspend, "applying", &[]).then(|s| s.suspended),
        row(
            "its end publishes and begins the health wait",
            suspended_applying,
            || rested("b", false),
            "health",
            &["ReleaseSlot", "Publish(push)", "BeginWait"],
        ),
        row(
            "no wait needed: it parks, the slot already released",
            || drive(suspended_applying(), vec![rested("b", false)]),
            || Event::WaitBegun(false),
            "suspended",
            &["ResetBackoff", "DrainDrift"],
        ),
        row(
            "the wait ends by itself and is recorded",
            suspended_waiting,
            || Event::WaitEnded,
            "health",
            &["EndWait(cancel=false,record=true)"],
        ),
        row(
            "then it parks",
            || drive(suspended_waiting(), vec![Event::WaitEnded]),
            || Event::WaitFinished,
            "suspended",
            &["ResetBackoff", "DrainDrift"],
        ),
    ]);
}

#[test]
fn a_trigger_queued_before_the_suspend_waits_for_the_resume() {
    let state = drive(applying_new(), vec![Event::Trigger(Some(t(Resync)))]);
    assert_eq!(queued(&state), Some(Resync), "queued while the rest runs");
    let state = drive(state, vec![Event::Suspend, rested("b", false), Event::WaitBegun(false)]);
    assert_eq!((state.phase.name(), queued(&state)), ("suspended", Some(Resync)));
    let (state, actions) = step(drive(state, vec![Event::Resume]), Event::Adopted(None));
    let got: Vec<String> = actions.iter().map(tag).collect();
    assert_eq!((state.phase.name(), got), ("fetching", vec!["Observe(resume)".to_string(), "Fetch".into()]));
}
