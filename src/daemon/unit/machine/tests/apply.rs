//! Rows of the applying phase: pushes during the rest of a sync, the yield to a newer
//! revision, how the rest or a self-heal ends, and shutdown during a sync.

use super::*;
use TriggerKind::{Push, Resync, Webhook};

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
