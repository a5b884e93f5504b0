//! Rows of the job phases: idle, fetching, waiting for a slot, applying.

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

#[test]
fn the_push_lane_and_the_fetch() {
    check(&[
        row(
            "a push that left the path alone, at the revision last applied, does nothing",
            || probing(Push),
            || touch(false, "a"),
            "idle",
            &["Log(no new revision push a)", "DrainDrift"],
        ),
        row(
            "a webhook that left the path alone syncs the same revision, in a slot",
            || probing(Webhook),
            || touch(false, "a"),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "a push that left the path alone waits for a slot, not the lane",
            || probing(Push),
            || touch(false, "b"),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "a push that touched the path fetches, holding no lane yet",
            || probing(Push),
            || touch(true, "b"),
            "fetching",
            &["Fetch"],
        ),
        row(
            "a push whose effect cannot be told fetches",
            || probing(Push),
            || Event::Probed(None),
            "fetching",
            &["Fetch"],
        ),
        row(
            "a push that fetched the revision last applied does nothing",
            lane_fetching,
            || Event::Fetched(Ok(rev("a"))),
            "idle",
            &["Log(no new revision push a)", "DrainDrift"],
        ),
        row(
            "a push that fetched a new revision waits for the lane",
            lane_fetching,
            || Event::Fetched(Ok(rev("b"))),
            "fetching",
            &["AcquireLane"],
        ),
        row(
            "in the lane, the push applies early",
            || drive(lane_fetching(), vec![Event::Fetched(Ok(rev("b")))]),
            || Event::Lane,
            "fetching",
            &["Log(sync triggered push b lane)", "Early(b)"],
        ),
        row(
            "a webhook re-sends the revision last applied",
            || drive(probing(Webhook), vec![Event::Probed(None), Event::Fetched(Ok(rev("a")))]),
            || Event::Lane,
            "fetching",
            &["Log(sync triggered webhook a lane)", "Early(a)"],
        ),
        row(
            "a poll that found the revision last applied does nothing, having held no slot",
            || drive(idle(), vec![Event::Tick(t(Poll))]),
            || Event::Fetched(Ok(rev("a"))),
            "idle",
            &["Log(no new revision poll a)", "DrainDrift"],
        ),
        row(
            "a resync that fetched waits for a slot to re-send the revision last applied",
            resync_fetching,
            || Event::Fetched(Ok(rev("a"))),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "in its slot, the resync re-sends",
            || drive(resync_fetching(), vec![Event::Fetched(Ok(rev("a")))]),
            || Event::Slot,
            "fetching",
            &["Log(sync triggered resync a slot)", "Early(a)"],
        ),
        row(
            "a failed fetch is recorded; it held nothing, and the source is failing",
            lane_fetching,
            || Event::Fetched(Err(Failed)),
            "fetching",
            &["Fail(push)"],
        )
        .then(|s| s.fetch_failing),
        row(
            "a recorded failure schedules a retry",
            failed,
            || Event::FailRecorded,
            "idle",
            &["ScheduleRetry", "DrainDrift"],
        ),
        row(
            "after its early apply a push drops the lane and waits for a slot",
            early_in_lane,
            || Event::Early(3),
            "slot wait",
            &["ReleaseLane", "AcquireSlot"],
        ),
        row(
            "holding a slot, the rest runs after the early apply",
            || drive(resync_fetching(), vec![Event::Fetched(Ok(rev("a"))), Event::Slot]),
            || Event::Early(0),
            "applying",
            &["Rest"],
        ),
        row(
            "a trigger during the fetch is kept for after the sync",
            lane_fetching,
            || Event::Trigger(Some(t(Poll))),
            "fetching",
            &[],
        )
        .then(|s| queued(s) == Some(Poll)),
    ]);
}

#[test]
fn waiting_for_a_slot() {
    check(&[
        row(
            "a push that left the path alone fetches once it has a slot",
            untouched,
            || Event::Slot,
            "fetching",
            &["Fetch"],
        ),
        row("a later push is probed", untouched, || Event::Trigger(Some(t(Push))), "slot wait", &["Probe(b)"]),
        row(
            "a later push that touched the path ends the wait and takes the lane",
            || drive(untouched(), vec![Event::Trigger(Some(t(Push)))]),
            || touch(true, "c"),
            "fetching",
            &["ReleaseSlot", "Probe(a)"],
        ),
        row(
            "a later push that left the path alone again keeps waiting",
            || drive(untouched(), vec![Event::Trigger(Some(t(Push)))]),
            || touch(false, "c"),
            "slot wait",
            &[],
        ),
        row(
            "a poll while a push waits for a slot is queued",
            untouched,
            || Event::Trigger(Some(t(Poll))),
            "slot wait",
            &[],
        )
        .then(|s| queued(s) == Some(Poll)),
        row(
            "a push while the rest waits for a slot is fetched at once",
            rest_slot,
            || Event::Trigger(Some(t(Push))),
            "slot wait",
            &["FetchPush(push)"],
        ),
        row(
            "a newer revision takes the place of a sync waiting for a slot",
            || drive(rest_slot(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::PushFetched(Ok(rev("c"))),
            "slot wait",
            &["Log(yielded b->c push 3)", "Observe(push)", "AcquireLane"],
        ),
        row(
            "a webhook that takes the place is not counted again",
            || drive(rest_slot(), vec![Event::Trigger(Some(t(Webhook)))]),
            || Event::PushFetched(Ok(rev("c"))),
            "slot wait",
            &["Log(yielded b->c webhook 3)", "AcquireLane"],
        ),
        row(
            "the newer revision applies early in the lane",
            || drive(rest_slot(), vec![Event::Trigger(Some(t(Push))), Event::PushFetched(Ok(rev("c")))]),
            || Event::Lane,
            "slot wait",
            &["Log(sync triggered push c)", "Early(c)"],
        ),
        row(
            "then waits for the slot the yielded sync asked for",
            || drive(rest_slot(), vec![Event::Trigger(Some(t(Push))), Event::PushFetched(Ok(rev("c"))), Event::Lane]),
            || Event::Early(2),
            "slot wait",
            &["ReleaseLane"],
        ),
        row(
            "and runs its rest in that slot",
            || {
                drive(
                    rest_slot(),
                    vec![Event::Trigger(Some(t(Push))), Event::PushFetched(Ok(rev("c"))), Event::Lane, Event::Early(2)],
                )
            },
            || Event::Slot,
            "applying",
            &["Rest"],
        ),
        row(
            "a push that found the revision being synced is queued",
            || drive(rest_slot(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::PushFetched(Ok(rev("b"))),
            "slot wait",
            &[],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "a push whose fetch failed is queued",
            || drive(rest_slot(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::PushFetched(Err(Failed)),
            "slot wait",
            &[],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "other triggers wait for the end of the sync",
            rest_slot,
            || Event::Trigger(Some(t(Resync))),
            "slot wait",
            &[],
        )
        .then(|s| queued(s) == Some(Resync)),
        row("the rest runs once it has a slot", rest_slot, || Event::Slot, "applying", &["Rest"]),
        row(
            "a self-heal in its slot heals",
            || drive(idle(), vec![Event::HealDue(objects(), base())]),
            || Event::Slot,
            "applying",
            &["Heal(drift,1)"],
        ),
    ]);
}

#[test]
fn applying_and_yielding() {
    check(&[
        row(
            "a push during the rest is fetched at once",
            resending,
            || Event::Trigger(Some(t(Push))),
            "applying",
            &["FetchPush(push)"],
        ),
        row(
            "a newer revision makes a re-send of the revision last applied yield",
            push_fetching_during_resend,
            || Event::PushFetched(Ok(rev("c"))),
            "applying",
            &["RaiseYield"],
        ),
        row(
            "a new revision's sync does not yield",
            || drive(applying_new(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::PushFetched(Ok(rev("c"))),
            "applying",
            &[],
        ),
        row(
            "a push of the revision being synced is queued",
            || drive(applying_new(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::PushFetched(Ok(rev("b"))),
            "applying",
            &[],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "once a newer revision is found, later triggers are queued",
            resend_with_newer,
            || Event::Trigger(Some(t(Webhook))),
            "applying",
            &[],
        )
        .then(|s| queued(s) == Some(Webhook)),
        row(
            "a chart unit's push waits for the end of its sync",
            || drive(chart(), vec![Event::Tick(t(Resync)), Event::Fetched(Ok(rev("a"))), Event::Slot, Event::Early(0)]),
            || Event::Trigger(Some(t(Push))),
            "applying",
            &[],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "a yielded sync hands its slot to the newer revision, which fetches at once",
            resend_with_newer,
            || rested("a", true),
            "fetching",
            &["LogObjects", "Log(yielded a->c push 7)", "DrainDrift", "Observe(push)", "Fetch"],
        )
        .then(|s| s.last_applied.is_none()),
        row(
            "a re-send whose apply ended before the yield: the newer revision is queued",
            resend_with_newer,
            || rested("a", false),
            "health",
            &["ReleaseSlot", "Publish(resync)", "BeginWait"],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "a new revision's sync ends, the newer push queued",
            new_with_newer,
            || rested("b", false),
            "health",
            &["ReleaseSlot", "Publish(push)", "BeginWait"],
        )
        .then(|s| queued(s) == Some(Push) && s.last_applied == Some(rev("b"))),
        row(
            "a push still being fetched when the sync ends is queued",
            push_fetching_during_resend,
            || rested("a", false),
            "health",
            &["AbandonPush", "ReleaseSlot", "Publish(resync)", "BeginWait"],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "a failed rest is recorded, the newer push queued",
            resend_with_newer,
            || Event::Rest(Err(Failed)),
            "applying",
            &["ReleaseSlot", "Fail(resync)"],
        )
        .then(|s| queued(s) == Some(Push)),
        row(
            "a sync that ran records its revision as the last applied",
            applying_new,
            || rested("b", false),
            "health",
            &["ReleaseSlot", "Publish(push)", "BeginWait"],
        )
        .then(|s| s.last_applied == Some(rev("b"))),
        row(
            "a self-heal the engine cannot do is a full sync, fetching without the slot",
            healing,
            || Event::Healed(None),
            "fetching",
            &["ReleaseSlot", "Fetch"],
        ),
        row(
            "a self-heal that ran waits for health",
            healing,
            || Event::Healed(Some((true, rev("a")))),
            "health",
            &["ReleaseSlot", "BeginWait"],
        ),
        row("shutdown during a sync lets it run", applying_new, || Event::Shutdown, "applying", &[])
            .then(|s| s.stopping),
        row(
            "a yielded sync when stopping gives its slot back",
            || drive(resend_with_newer(), vec![Event::Shutdown]),
            || rested("a", true),
            "stopped",
            &["LogObjects", "Log(yielded a->c push 7)", "DrainDrift", "ReleaseSlot"],
        ),
    ]);
}

#[test]
fn the_slot_queue_a_job_waits_in() {
    check(&[
        row(
            "a unit that has synced nothing waits for its first sync first",
            || drive(State::new(true), vec![Event::Tick(t(Poll))]),
            || Event::Fetched(Ok(rev("b"))),
            "slot wait",
            &["AcquireSlot"],
        )
        .then(|s| s.slot_class() == SlotClass::First),
        row(
            "a poll of a unit that synced waits as triggered",
            || drive(idle(), vec![Event::Tick(t(Poll))]),
            || Event::Fetched(Ok(rev("b"))),
            "slot wait",
            &["AcquireSlot"],
        )
        .then(|s| s.slot_class() == SlotClass::Triggered),
        row("a resync waits last", resync_fetching, || Event::Fetched(Ok(rev("a"))), "slot wait", &["AcquireSlot"])
            .then(|s| s.slot_class() == SlotClass::Resync),
        row("a push that left the path alone waits as triggered", untouched, || Event::Slot, "fetching", &["Fetch"])
            .then(|s| s.slot_class() == SlotClass::Triggered),
    ]);
}

fn at(state: &State, last: &str, path_only: Option<&str>) -> bool {
    state.last_applied == Some(rev(last)) && state.path_only_at == path_only.map(rev)
}

#[test]
fn a_push_that_leaves_a_path_only_units_path_alone_is_not_synced() {
    check(&[
        row(
            "a push to a new revision that left the path alone is taken as applied",
            || drive(path_only(), vec![Event::Trigger(Some(t(Push)))]),
            || touch(false, "b"),
            "idle",
            &["Log(path unchanged push a->b)", "DrainDrift"],
        )
        .then(|s| at(s, "b", Some("b"))),
        row(
            "so is a webhook's",
            || drive(path_only(), vec![Event::Trigger(Some(t(Webhook)))]),
            || touch(false, "b"),
            "idle",
            &["Log(path unchanged webhook a->b)", "DrainDrift"],
        )
        .then(|s| at(s, "b", Some("b"))),
        row(
            "the next push is probed from the revision taken",
            || drive(path_only(), vec![Event::Trigger(Some(t(Push))), touch(false, "b")]),
            || Event::Trigger(Some(t(Push))),
            "fetching",
            &["Observe(push)", "Probe(b)"],
        ),
        row(
            "a webhook at the revision last applied still syncs it",
            || drive(path_only(), vec![Event::Trigger(Some(t(Webhook)))]),
            || touch(false, "a"),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "a push that touched the path fetches",
            || drive(path_only(), vec![Event::Trigger(Some(t(Push)))]),
            || touch(true, "b"),
            "fetching",
            &["Fetch"],
        ),
        row(
            "with a retry due, the push syncs",
            || drive(path_only(), vec![Event::RetryAt(retry_deadline()), Event::Trigger(Some(t(Push)))]),
            || touch(false, "b"),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "a unit whose objects may come from outside its path syncs",
            || probing(Push),
            || touch(false, "b"),
            "slot wait",
            &["AcquireSlot"],
        )
        .then(|s| at(s, "a", None)),
        row(
            "a sync from the path alone with every object applied is marked",
            applying_new,
            || rested_path_only("b", true),
            "health",
            &["ReleaseSlot", "Publish(push)", "BeginWait"],
        )
        .then(|s| at(s, "b", Some("b"))),
        row(
            "one with a failed object is not",
            applying_new,
            || rested_path_only("b", false),
            "health",
            &["ReleaseSlot", "Publish(push)", "BeginWait"],
        )
        .then(|s| at(s, "b", None)),
        row(
            "nor one that read more than the path",
            || State { path_only_at: Some(rev("a")), ..applying_new() },
            || rested("b", false),
            "health",
            &["ReleaseSlot", "Publish(push)", "BeginWait"],
        )
        .then(|s| at(s, "b", None)),
    ]);
}
