//! Rows of the path-unchanged rule as a push meets it: a push that left a path-only unit's
//! path alone taken as applied, and which syncs mark a unit path-only.

use super::*;
use TriggerKind::{Push, Webhook};

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
