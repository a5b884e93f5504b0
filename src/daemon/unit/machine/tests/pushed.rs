//! Rows of the webhook of a push ([`Trigger::pushed`], a payload naming the commit it pushed)
//! as it meets the push the ref watch saw: before it, after it, while its probe or its sync runs.
//! A unit syncs that push once, the webhook's or the watch's trigger, and one whose path it left
//! alone not at all; a webhook naming no commit still re-sends the revision last applied.

use super::*;
use TriggerKind::{Push, Webhook};

/// The webhook of the push to `b`.
fn hook() -> Trigger {
    Trigger::pushed(later())
}

/// A path-only unit that took the watch's push to `b` without a sync (its path left alone).
fn took_b() -> State {
    drive(path_only(), vec![Event::Trigger(Some(t(Push))), touch(false, "b")])
}

/// A unit whose path the push to `b` changed, its sync's rest running, the webhook being
/// fetched meanwhile.
fn applying_with_hook() -> State {
    drive(applying_new(), vec![Event::Trigger(Some(hook()))])
}

/// That unit's health wait ended, the webhook queued meanwhile: it runs next.
fn ending_with_hook() -> State {
    let events = vec![Event::PushFetched(Ok(rev("b"))), rested("b", false), Event::WaitBegun(true), Event::WaitEnded];
    drive(applying_with_hook(), events)
}

fn last(state: &State, revision: &str) -> bool {
    state.last_applied == Some(rev(revision))
}

#[test]
fn the_webhook_of_a_push_the_watch_brought_syncs_nothing_again() {
    check(&[
        row(
            "after the watch's push was taken, the webhook is probed",
            took_b,
            || Event::Trigger(Some(hook())),
            "fetching",
            &["Probe(b)"],
        ),
        row(
            "and finds the revision taken: no sync",
            || drive(took_b(), vec![Event::Trigger(Some(hook()))]),
            || touch(false, "b"),
            "idle",
            &["Log(no new revision webhook b)", "DrainDrift"],
        )
        .then(|s| last(s, "b") && queued(s).is_none()),
        row(
            "a webhook naming no commit still re-sends it",
            || drive(took_b(), vec![Event::Trigger(Some(t(Webhook)))]),
            || touch(false, "b"),
            "slot wait",
            &["AcquireSlot"],
        ),
        row(
            "a unit whose path changed: the webhook during its sync is fetched",
            applying_new,
            || Event::Trigger(Some(hook())),
            "applying",
            &["FetchPush(webhook)"],
        ),
        row(
            "it found the revision being synced: kept for after",
            applying_with_hook,
            || Event::PushFetched(Ok(rev("b"))),
            "applying",
            &[],
        )
        .then(|s| queued(s) == Some(Webhook)),
        row(
            "after the wait it is probed from the revision synced",
            ending_with_hook,
            || Event::WaitFinished,
            "fetching",
            &["ResetBackoff", "DrainDrift", "Probe(b)"],
        ),
        row(
            "and syncs nothing: the push is synced once",
            || drive(ending_with_hook(), vec![Event::WaitFinished]),
            || touch(false, "b"),
            "idle",
            &["Log(no new revision webhook b)", "DrainDrift"],
        )
        .then(|s| last(s, "b")),
        row(
            "the webhook during the health wait of that sync is dropped",
            || drive(waiting(), vec![Event::Trigger(Some(hook()))]),
            || Event::WaitFetched(Some(rev("b"))),
            "health",
            &[],
        )
        .then(|s| matches!(&s.phase, Phase::Health(h) if h.after.is_none())),
        row(
            "while the probe of the watch's push runs, the webhook is queued",
            || drive(path_only(), vec![Event::Trigger(Some(t(Push)))]),
            || Event::Trigger(Some(hook())),
            "fetching",
            &[],
        )
        .then(|s| queued(s) == Some(Webhook)),
        row(
            "once the probe took the revision, the webhook is probed from it",
            || drive(path_only(), vec![Event::Trigger(Some(t(Push))), Event::Trigger(Some(hook()))]),
            || touch(false, "b"),
            "fetching",
            &["Log(path unchanged push a->b)", "DrainDrift", "Probe(b)"],
        ),
        row(
            "and syncs nothing",
            || drive(path_only(), vec![Event::Trigger(Some(t(Push))), Event::Trigger(Some(hook())), touch(false, "b")]),
            || touch(false, "b"),
            "idle",
            &["Log(no new revision webhook b)", "DrainDrift"],
        )
        .then(|s| last(s, "b") && queued(s).is_none()),
    ]);
}

#[test]
fn a_webhook_before_the_watch_syncs_at_once_and_the_watch_then_finds_nothing() {
    check(&[
        row("the webhook is probed", path_only, || Event::Trigger(Some(hook())), "fetching", &["Probe(a)"]),
        row(
            "a path it left alone is taken without a sync",
            || drive(path_only(), vec![Event::Trigger(Some(hook()))]),
            || touch(false, "b"),
            "idle",
            &["Log(path unchanged webhook a->b)", "DrainDrift"],
        )
        .then(|s| last(s, "b")),
        row(
            "the watch's push then finds the revision taken",
            || drive(path_only(), vec![Event::Trigger(Some(hook())), touch(false, "b"), Event::Trigger(Some(t(Push)))]),
            || touch(false, "b"),
            "idle",
            &["Log(no new revision push b)", "DrainDrift"],
        ),
        row(
            "a path it changed is fetched at once",
            || drive(path_only(), vec![Event::Trigger(Some(hook()))]),
            || touch(true, "b"),
            "fetching",
            &["Fetch"],
        ),
        row(
            "and takes the lane",
            || drive(path_only(), vec![Event::Trigger(Some(hook())), touch(true, "b")]),
            || Event::Fetched(Ok(rev("b"))),
            "fetching",
            &["AcquireLane"],
        ),
        row(
            "the watch's push during that sync is fetched",
            || {
                let events =
                    vec![touch(true, "b"), Event::Fetched(Ok(rev("b"))), Event::Lane, Event::Early(1), Event::Slot];
                drive(drive(path_only(), vec![Event::Trigger(Some(hook()))]), events)
            },
            || Event::Trigger(Some(t(Push))),
            "applying",
            &["FetchPush(push)"],
        ),
        row(
            "a unit that never synced syncs for the webhook",
            || State::new(true),
            || Event::Trigger(Some(hook())),
            "fetching",
            &["Probe(-)"],
        ),
    ]);
}
