//! Rows of merged triggers: the more urgent kind runs, and a sync runs when any merged
//! trigger asks for one.

use super::*;
use TriggerKind::{Poll, Push, Reconcile, Reload, Resync, Variables};

/// The unit last applied `last`, marked as applied from its path alone at `path_only`.
fn at(state: &State, last: &str, path_only: Option<&str>) -> bool {
    state.last_applied == Some(rev(last)) && state.path_only_at == path_only.map(rev)
}

#[test]
fn a_merged_trigger_syncs_when_any_part_asks_and_keeps_a_pushs_lane() {
    check(&[
        row(
            "a push merged into a queued poll takes the lane",
            idle,
            || Event::Trigger(Some(merged(&[Poll, Push]))),
            "fetching",
            &["Observe(push)", "Probe(a)"],
        ),
        row(
            "a poll alone finding the revision last applied does nothing",
            || drive(idle(), vec![Event::Tick(t(Poll))]),
            || Event::Fetched(Ok(rev("a"))),
            "idle",
            &["Log(no new revision poll a)", "DrainDrift"],
        ),
        row(
            "variables merged into a poll sync the revision last applied",
            || drive(idle(), vec![Event::Trigger(Some(merged(&[Poll, Variables]))), Event::Fetched(Ok(rev("a")))]),
            || Event::Slot,
            "fetching",
            &["Log(sync triggered variables a slot)", "Early(a)"],
        ),
        row(
            "a reload merged into a resync runs as a reload",
            idle,
            || Event::Trigger(Some(merged(&[Resync, Reload]))),
            "fetching",
            &["Observe(reload)", "Fetch"],
        )
        .then(|s| s.slot_class() == SlotClass::Triggered),
        row(
            "variables merged into a push at the revision last applied still sync",
            || drive(idle(), vec![Event::Trigger(Some(merged(&[Push, Variables])))]),
            || touch(false, "a"),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "variables merged into a push that left a path-only unit's path alone still sync",
            || drive(path_only(), vec![Event::Trigger(Some(merged(&[Variables, Push])))]),
            || touch(false, "b"),
            "slot wait",
            &["AcquireSlot"],
        )
        .then(|s| at(s, "a", Some("a"))),
        row(
            "a reconcile merged into a push at the revision last applied still syncs",
            || drive(idle(), vec![Event::Trigger(Some(merged(&[Reconcile, Push])))]),
            || touch(false, "a"),
            "slot wait",
            &["AcquireSlot"],
        ),
    ]);
}

#[test]
fn a_trigger_queued_behind_a_sync_is_merged_not_replaced() {
    // A change of variables queued while a new revision's rest runs, then a push fetched
    // meanwhile that the sync does not yield to: both are kept, the push's lane with them.
    let state = drive(
        applying_new(),
        vec![
            Event::Trigger(Some(t(Variables))),
            Event::Trigger(Some(t(Push))),
            Event::PushFetched(Ok(rev("c"))),
            rested("b", false),
        ],
    );
    let queued = state.queued.as_ref().expect("queued");
    assert_eq!(queued.kind, Push);
    assert!(queued.includes(Variables), "the change of variables is still asked for");
}
