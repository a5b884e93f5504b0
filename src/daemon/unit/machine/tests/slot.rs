//! Rows of the slot wait: a push that left the path alone, a newer revision taking the place
//! of a waiting sync, the triggers queued meanwhile, and the queue of slots a job waits in.

use super::*;
use TriggerKind::{Poll, Push, Resync, Webhook};

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
