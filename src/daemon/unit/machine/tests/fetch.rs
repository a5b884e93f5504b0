//! Rows of a job's start: the probe of a push, the push lane, the fetch and what it found, the
//! early apply, and a failed fetch recorded.

use super::*;
use TriggerKind::{Poll, Push, Webhook};

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
