//! Rows of the health wait and of what follows a job; the listen table.

use super::*;
use TriggerKind::{Poll, Push, Reconcile, Reload, Resync, Variables, Webhook};

#[test]
fn the_health_wait() {
    check(&[
        row(
            "with nothing to wait on, the sync is finished and the backoff reset",
            beginning,
            || Event::WaitBegun(false),
            "idle",
            &["ResetBackoff", "DrainDrift"],
        ),
        row("the wait runs", beginning, || Event::WaitBegun(true), "health", &[]),
        row(
            "a wait that ended is recorded",
            waiting,
            || Event::WaitEnded,
            "health",
            &["EndWait(cancel=false,record=true)"],
        ),
        row(
            "after the wait, idle",
            || drive(waiting(), vec![Event::WaitEnded]),
            || Event::WaitFinished,
            "idle",
            &["ResetBackoff", "DrainDrift"],
        ),
        row(
            "a reload cancels the wait, which is recorded",
            waiting,
            || Event::Trigger(Some(t(Reload))),
            "health",
            &["Log(cancelled by reload b reload)", "EndWait(cancel=true,record=true)"],
        ),
        row(
            "then the reload runs",
            || drive(waiting(), vec![Event::Trigger(Some(t(Reload)))]),
            || Event::WaitFinished,
            "fetching",
            &["ResetBackoff", "DrainDrift", "Observe(reload)", "Fetch"],
        ),
        row("a poll during the wait fetches", waiting, || Event::Tick(t(Poll)), "health", &["WaitFetch"]),
        row(
            "a new revision cancels the wait and records nothing",
            || wait_fetching(Push),
            || Event::WaitFetched(Some(rev("c"))),
            "health",
            &["Log(cancelled by revision b->c push)", "EndWait(cancel=true,record=false)"],
        ),
        row(
            "then the new revision syncs",
            || drive(wait_fetching(Push), vec![Event::WaitFetched(Some(rev("c")))]),
            || Event::WaitFinished,
            "fetching",
            &["ResetBackoff", "DrainDrift", "Observe(push)", "Probe(b)"],
        ),
        row(
            "a poll's new revision cancels the wait too",
            || wait_fetching(Poll),
            || Event::WaitFetched(Some(rev("c"))),
            "health",
            &["Log(cancelled by revision b->c poll)", "EndWait(cancel=true,record=false)"],
        ),
        row(
            "a push of the same revision is ignored",
            || wait_fetching(Push),
            || Event::WaitFetched(Some(rev("b"))),
            "health",
            &[],
        )
        .then(|s| matches!(&s.phase, Phase::Health(h) if h.after.is_none())),
        row(
            "a poll of the same revision is ignored",
            || wait_fetching(Poll),
            || Event::WaitFetched(Some(rev("b"))),
            "health",
            &[],
        )
        .then(|s| matches!(&s.phase, Phase::Health(h) if h.after.is_none())),
        row(
            "a webhook of the same revision runs after the wait",
            || wait_fetching(Webhook),
            || Event::WaitFetched(Some(rev("b"))),
            "health",
            &[],
        )
        .then(|s| matches!(&s.phase, Phase::Health(h) if h.after.as_ref().map(|t| t.kind) == Some(Webhook))),
        row(
            "which starts once the wait ended",
            || drive(wait_fetching(Webhook), vec![Event::WaitFetched(Some(rev("b"))), Event::WaitEnded]),
            || Event::WaitFinished,
            "fetching",
            &["ResetBackoff", "DrainDrift", "Probe(b)"],
        ),
        row(
            "a failed fetch during the wait is ignored",
            || wait_fetching(Poll),
            || Event::WaitFetched(None),
            "health",
            &[],
        ),
        row("the resync waits for the end of the wait", waiting, || Event::Tick(t(Resync)), "health", &[]),
        row(
            "shutdown cancels the wait, which is recorded",
            waiting,
            || Event::Shutdown,
            "health",
            &["EndWait(cancel=true,record=true)"],
        ),
        row(
            "the channel closed cancels the wait, which is recorded",
            waiting,
            || Event::Trigger(None),
            "health",
            &["EndWait(cancel=true,record=true)"],
        ),
        row(
            "then the unit stops",
            || drive(waiting(), vec![Event::Shutdown]),
            || Event::WaitFinished,
            "stopped",
            &["ResetBackoff", "DrainDrift"],
        ),
        row(
            "shutdown while the wait begins cancels it once begun",
            || drive(beginning(), vec![Event::Shutdown]),
            || Event::WaitBegun(true),
            "health",
            &["EndWait(cancel=true,record=true)"],
        ),
        row("drift is noted during the wait", waiting, || Event::Drift(vec![]), "health", &["NoteDrift(0)"]),
        row(
            "drifted objects are healed during the wait, without a slot",
            waiting,
            || Event::HealDue(objects(), base()),
            "health",
            &["Observe(drift)", "HealDuringWait(1)"],
        ),
        row(
            "then the wait goes on",
            || drive(waiting(), vec![Event::HealDue(objects(), base())]),
            || Event::HealedDuringWait,
            "health",
            &["DrainDrift"],
        ),
    ]);
}

#[test]
fn retries_and_the_queued_trigger() {
    check(&[
        row(
            "a self-heal that failed schedules a retry",
            || drive(healing(), vec![Event::Healed(Some((false, rev("a"))))]),
            || Event::WaitBegun(false),
            "idle",
            &["ScheduleRetry", "DrainDrift"],
        ),
        row(
            "a self-heal that succeeded leaves the retry due",
            || {
                drive(
                    backing_off(),
                    vec![Event::HealDue(objects(), base()), Event::Slot, Event::Healed(Some((true, rev("a"))))],
                )
            },
            || Event::WaitBegun(false),
            "backing off",
            &["DrainDrift"],
        ),
        row(
            "a poll that found nothing new leaves the retry due",
            || drive(backing_off(), vec![Event::Tick(t(Poll))]),
            || Event::Fetched(Ok(rev("a"))),
            "backing off",
            &["Log(no new revision poll a)", "DrainDrift"],
        ),
        row(
            "a retry scheduled while a queued job runs is kept for after it",
            || drive(failed(), vec![Event::Trigger(Some(t(Resync)))]),
            || Event::FailRecorded,
            "fetching",
            &["ScheduleRetry", "DrainDrift", "Observe(resync)", "Fetch"],
        ),
        row(
            "the trigger queued during a sync runs after it",
            || drive(applying_new(), vec![Event::Trigger(Some(t(Resync))), rested("b", false)]),
            || Event::WaitBegun(false),
            "fetching",
            &["ResetBackoff", "DrainDrift", "Observe(resync)", "Fetch"],
        ),
        row(
            "when stopping, the queued trigger does not run",
            || drive(applying_new(), vec![Event::Trigger(Some(t(Resync))), Event::Shutdown, rested("b", false)]),
            || Event::WaitBegun(false),
            "stopped",
            &["ResetBackoff", "DrainDrift"],
        ),
    ]);
}

#[test]
fn coalesced_triggers_keep_the_more_urgent_kind_and_the_later_instant() {
    let mut q = None;
    keep(&mut q, t(Poll));
    keep(&mut q, Trigger::new(Push, later()));
    keep(&mut q, t(Variables));
    let q = q.expect("kept");
    assert_eq!((q.kind, q.at), (Push, later()));
    assert!(q.includes(Variables) && q.includes(Poll), "what each asked for is kept");
}

#[test]
fn a_merged_trigger_during_the_wait_does_what_each_part_asks() {
    check(&[
        row(
            "a reload merged into a push still cancels the wait",
            waiting,
            || Event::Trigger(Some(merged(&[Push, Reload]))),
            "health",
            &["Log(cancelled by reload b push)", "EndWait(cancel=true,record=true)"],
        ),
        row(
            "variables merged into a poll cancel the wait at once, without a fetch",
            waiting,
            || Event::Trigger(Some(merged(&[Poll, Variables]))),
            "health",
            &["Log(cancelled by variables b variables)", "EndWait(cancel=true,record=false)"],
        ),
    ]);
}

#[test]
fn a_change_of_variables_is_applied_at_once_and_a_reconcile_is_noted_as_queued() {
    check(&[
        row(
            "a change of variables cancels the wait, recording nothing",
            waiting,
            || Event::Trigger(Some(t(Variables))),
            "health",
            &["Log(cancelled by variables b variables)", "EndWait(cancel=true,record=false)"],
        ),
        row(
            "and its sync runs next, of the same revision",
            || drive(waiting(), vec![Event::Trigger(Some(t(Variables)))]),
            || Event::WaitFinished,
            "fetching",
            &["ResetBackoff", "DrainDrift", "Observe(variables)", "Fetch"],
        ),
        row(
            "a reconcile request at the same revision runs after the wait, noted as queued",
            || drive(waiting(), vec![Event::Trigger(Some(t(Reconcile)))]),
            || Event::WaitFetched(Some(rev("b"))),
            "health",
            &["NoteQueued"],
        )
        .then(|s| matches!(&s.phase, Phase::Health(h) if h.after.as_ref().is_some_and(|t| t.kind == Reconcile))),
        row(
            "a webhook at the same revision runs after it too, noting nothing",
            || drive(waiting(), vec![Event::Trigger(Some(t(Webhook)))]),
            || Event::WaitFetched(Some(rev("b"))),
            "health",
            &[],
        ),
        row(
            "a reconcile request that finds a new revision cancels the wait",
            || drive(waiting(), vec![Event::Trigger(Some(t(Reconcile)))]),
            || Event::WaitFetched(Some(rev("c"))),
            "health",
            &["Log(cancelled by revision b->c reconcile)", "EndWait(cancel=true,record=false)"],
        ),
    ]);
}

#[test]
fn what_each_phase_listens_to() {
    let l = idle().listen();
    assert!(l.triggers && l.poll && l.resync && l.drift && l.retry.is_none());
    assert_eq!(backing_off().listen().retry, Some(retry_deadline()));
    assert_eq!(lane_fetching().listen(), Listen::default(), "a fetch reads nothing else");
    let l = untouched().listen();
    assert!(l.triggers && l.slot);
    let l = drive(untouched(), vec![Event::Trigger(Some(t(Push)))]).listen();
    assert!(!l.triggers && !l.slot, "a probe is awaited alone");
    let l = rest_slot().listen();
    assert!(l.triggers && l.slot);
    assert_eq!(
        drive(idle(), vec![Event::Tick(t(Poll))]).listen(),
        Listen::default(),
        "a poll's fetch reads nothing else"
    );
    let l = drive(idle(), vec![Event::Tick(t(Poll)), Event::Fetched(Ok(rev("b")))]).listen();
    assert!(l.slot && !l.triggers, "a slot before the early apply is awaited alone");
    assert!(source_down().listen().retry.is_some(), "a unit whose source fails waits for its retry");
    assert!(resending().listen().triggers);
    assert!(!push_fetching_during_resend().listen().triggers, "one push fetched at a time");
    assert!(!resend_with_newer().listen().triggers, "the newer revision is known");
    let l = waiting().listen();
    assert!(l.triggers && l.poll && !l.resync && l.drift && l.wait_end && l.retry.is_none());
    assert_eq!(wait_fetching(Poll).listen(), Listen::default(), "a fetch during the wait is awaited alone");
    assert!(!drive(applying_new(), vec![Event::Shutdown]).listen().triggers, "stopping");
}

/// Waiting for the health of `b`, whose sync applied every object from the unit's path alone.
fn waiting_path_only() -> State {
    drive(applying_new(), vec![rested_path_only("b", true), Event::WaitBegun(true)])
}

/// During that wait, a push's fetch found the new revision `c`, which is probed.
fn wait_probing() -> State {
    drive(waiting_path_only(), vec![Event::Trigger(Some(t(Push))), Event::WaitFetched(Some(rev("c")))])
}

#[test]
fn a_new_revision_that_left_the_path_alone_does_not_cancel_the_wait() {
    check(&[
        row(
            "the push that brought it is probed from the revision waited for",
            || drive(waiting_path_only(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::WaitFetched(Some(rev("c"))),
            "health",
            &["Probe(b)"],
        ),
        row(
            "left alone: the new revision is the one last applied and the wait goes on",
            wait_probing,
            || touch(false, "c"),
            "health",
            &["Log(path unchanged push b->c)"],
        )
        .then(|s| s.last_applied == Some(rev("c")) && s.path_only_at == Some(rev("c")) && s.listen().wait_end),
        row(
            "and ends judged and recorded",
            || drive(wait_probing(), vec![touch(false, "c")]),
            || Event::WaitEnded,
            "health",
            &["EndWait(cancel=false,record=true)"],
        ),
        row(
            "a later fetch that finds the revision it took is nothing new: the wait goes on",
            || drive(wait_probing(), vec![touch(false, "c"), Event::Tick(t(Poll))]),
            || Event::WaitFetched(Some(rev("c"))),
            "health",
            &[],
        )
        .then(|s| s.last_applied == Some(rev("c")) && s.listen().wait_end),
        row(
            "a poll's new revision too",
            || drive(waiting_path_only(), vec![Event::Tick(t(Poll))]),
            || Event::WaitFetched(Some(rev("c"))),
            "health",
            &["Probe(b)"],
        ),
        row(
            "touched: it cancels the wait, recording nothing, and runs",
            wait_probing,
            || touch(true, "c"),
            "health",
            &["Log(cancelled by revision b->c push)", "EndWait(cancel=true,record=false)"],
        ),
        row(
            "a probe that cannot tell cancels it too",
            wait_probing,
            || Event::Probed(None),
            "health",
            &["Log(cancelled by revision b->c push)", "EndWait(cancel=true,record=false)"],
        ),
        row(
            "a reload merged into the push still cancels the wait, recorded",
            waiting_path_only,
            || Event::Trigger(Some(merged(&[Push, Reload]))),
            "health",
            &["Log(cancelled by reload b push)", "EndWait(cancel=true,record=true)"],
        ),
        row(
            "a unit that read outside its path is not probed: the wait is cancelled",
            || drive(waiting(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::WaitFetched(Some(rev("c"))),
            "health",
            &["Log(cancelled by revision b->c push)", "EndWait(cancel=true,record=false)"],
        ),
    ]);
}
