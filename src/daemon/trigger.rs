//! Why a unit syncs: the [`Trigger`] sent to a unit's task, and the [`Statuses`] of every unit that
//! `/readyz`, `/metrics` and sd_notify read.
//!
//! A unit keeps one queued trigger; one offered while another is queued is merged into it
//! ([`Trigger::merge`]), and the merge loses nothing that either asked for:
//! - **Its kind is the more urgent one** ([`TriggerKind::urgency`]), most urgent first:
//!   webhook, push (they take the push lane and are fetched at once), reconcile (an explicit
//!   request, answered on the unit's parent), reload (the config may have changed), variables
//!   and resume (the `from` objects may have changed), startup, retry, drift, resync, poll. A
//!   push merged into a queued poll keeps its lane; a reload merged into a queued poll still
//!   cancels a health wait.
//! - **It syncs even the revision last applied when any merged trigger would**
//!   ([`Trigger::needs_new_revision`]): a change of variables merged into a queued push or
//!   poll re-reads the `from` objects even when git did not move, where it would otherwise be
//!   dropped as `no new revision`. A push that leaves the unit's path alone is answered
//!   without a sync only when every merged trigger means "git may have moved" and nothing else
//!   ([`Trigger::git_only`]). A webhook that names the commit its push brought
//!   ([`Trigger::pushed`]) means only that, as the ref watch's push does: a unit that already
//!   took that push (synced it, or took it without a sync) does nothing for it.
//! - **Its instant is the later one**, so its fetch begins after the newer push.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// What started a sync (DESIGN.md, Triggers). Also a metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TriggerKind {
    /// The first sync after start or leadership.
    Startup,
    /// The poll interval elapsed (fetch; sync only when the revision moved).
    Poll,
    /// A ref of a local repository changed on disk (a `git push` into it).
    Push,
    /// `POST /hooks/git` with a valid signature.
    Webhook,
    /// Someone else changed a member (self-heal).
    Drift,
    /// The periodic full resync.
    Resync,
    /// SIGHUP: config reloaded.
    Reload,
    /// A retry after a failed sync (exponential backoff).
    Retry,
    /// A ConfigMap or Secret the unit's `[sync.substitute] from` reads changed.
    Variables,
    /// `gitward reconcile`: a new `gitward.dev/requested-at` on the unit's ApplySet parent.
    Reconcile,
    /// `gitward resume` (or `suspend = false`): the trigger kept while the unit was suspended
    /// runs with this merged into it, so the revision last applied is synced again with what
    /// its `from` objects hold now.
    Resume,
}

impl TriggerKind {
    /// Lowercase name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Startup => "startup",
            TriggerKind::Poll => "poll",
            TriggerKind::Push => "push",
            TriggerKind::Webhook => "webhook",
            TriggerKind::Drift => "drift",
            TriggerKind::Resync => "resync",
            TriggerKind::Reload => "reload",
            TriggerKind::Retry => "retry",
            TriggerKind::Variables => "variables",
            TriggerKind::Reconcile => "reconcile",
            TriggerKind::Resume => "resume",
        }
    }

    /// How urgent a trigger of this kind is, higher first ([module docs](self)): a merged
    /// trigger takes the kind of the more urgent one. Webhook 10, push 9 (both take the push
    /// lane), reconcile 8, reload 7, variables 6, resume 5, startup 4, retry 3, drift 2,
    /// resync 1, poll 0; no two kinds are equal, so the kind kept does not depend on the order.
    pub fn urgency(self) -> u8 {
        match self {
            TriggerKind::Webhook => 10,
            TriggerKind::Push => 9,
            TriggerKind::Reconcile => 8,
            TriggerKind::Reload => 7,
            TriggerKind::Variables => 6,
            TriggerKind::Resume => 5,
            TriggerKind::Startup => 4,
            TriggerKind::Retry => 3,
            TriggerKind::Drift => 2,
            TriggerKind::Resync => 1,
            TriggerKind::Poll => 0,
        }
    }

    /// This kind's bit in [`Trigger`]'s set of merged kinds.
    fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// True for the triggers that only mean "git may have moved" (poll, and the ref watch of a
    /// local repository): they sync only when the fetched revision differs from the one last
    /// applied. One `git push` can raise more than one ref event; without this each would
    /// re-send every object. A webhook naming no commit is an explicit request and syncs even
    /// the same revision, as do startup, drift, resync, reload, retry, a change of variables and
    /// reconcile; one naming the commit it pushed is [`Trigger::pushed`].
    pub fn needs_new_revision(self) -> bool {
        matches!(self, TriggerKind::Poll | TriggerKind::Push)
    }

    /// True for the triggers that say only that git may have moved (poll, push, webhook): a
    /// push that leaves the unit's path alone answers them without a sync. Every other kind
    /// asks for a sync whatever git did (a reload, a change of variables, a resume…).
    pub fn git_only(self) -> bool {
        matches!(self, TriggerKind::Poll | TriggerKind::Push | TriggerKind::Webhook)
    }
}

impl fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request to sync one unit, possibly several merged into one ([module docs](self)).
#[derive(Debug, Clone)]
pub struct Trigger {
    /// What asked: the most urgent of the kinds merged ([`TriggerKind::urgency`]). Says whether
    /// the sync takes the push lane, and names it in logs and metrics.
    pub kind: TriggerKind,
    /// When, for the `trigger_to_applied_ms` log field: the latest of those merged.
    pub at: Instant,
    /// Every kind merged into this trigger, `kind` included, one bit each
    /// ([`TriggerKind::bit`]), and [`PUSHED`]: what the sync must do is the union of what each
    /// asked.
    merged: u16,
}

/// The bit of a webhook that names the commit its push brought ([`Trigger::pushed`]), set
/// instead of [`TriggerKind::Webhook`]'s: it asks for nothing but a new revision.
const PUSHED: u16 = 1 << 15;

impl From<&Trigger> for crate::sync::Cause {
    fn from(t: &Trigger) -> Self {
        Self { name: t.kind.as_str(), at: t.at, push: t.kind.is_push() }
    }
}

impl Trigger {
    /// A trigger of `kind` at `at`.
    pub fn new(kind: TriggerKind, at: Instant) -> Self {
        Self { kind, at, merged: kind.bit() }
    }

    /// A trigger of `kind`, now.
    pub fn now(kind: TriggerKind) -> Self {
        Self::new(kind, Instant::now())
    }

    /// A webhook at `at` for a push that names the commit it brought (`after`): of kind
    /// [`TriggerKind::Webhook`] (the push lane, its metrics label) but asking, as the ref
    /// watch's push does, only for a revision other than the one last applied. So a webhook
    /// that follows a push the unit already took, by a sync or without one (its path left
    /// alone), syncs nothing, and a unit whose path the push changed syncs it once, not once
    /// for the watch and again for the webhook.
    pub fn pushed(at: Instant) -> Self {
        Self { kind: TriggerKind::Webhook, at, merged: PUSHED }
    }

    /// Merges `other` into this trigger: the more urgent kind, the later instant, the union of
    /// the kinds merged ([module docs](self)).
    pub fn merge(&mut self, other: Trigger) {
        if other.kind.urgency() > self.kind.urgency() {
            self.kind = other.kind;
        }
        self.at = self.at.max(other.at);
        self.merged |= other.merged;
    }

    /// Whether a trigger of `kind` was merged into this one (or is it); a webhook naming its
    /// commit ([`Trigger::pushed`]) counts as a webhook.
    pub fn includes(&self, kind: TriggerKind) -> bool {
        let webhook = kind == TriggerKind::Webhook && self.merged & PUSHED != 0;
        webhook || self.merged & kind.bit() != 0
    }

    /// True when every kind merged only asks for a new revision
    /// ([`TriggerKind::needs_new_revision`]): the sync is skipped when the fetch finds the
    /// revision last applied.
    pub fn needs_new_revision(&self) -> bool {
        self.kinds().all(TriggerKind::needs_new_revision)
    }

    /// True when every kind merged says only that git may have moved
    /// ([`TriggerKind::git_only`]).
    pub fn git_only(&self) -> bool {
        self.kinds().all(TriggerKind::git_only)
    }

    /// The kinds merged whose bit is set: a webhook naming its commit, which asks for nothing
    /// a push does not, is not among them.
    fn kinds(&self) -> impl Iterator<Item = TriggerKind> + '_ {
        ALL_KINDS.into_iter().filter(|k| self.merged & k.bit() != 0)
    }
}

/// Every [`TriggerKind`].
const ALL_KINDS: [TriggerKind; 11] = [
    TriggerKind::Startup,
    TriggerKind::Poll,
    TriggerKind::Push,
    TriggerKind::Webhook,
    TriggerKind::Drift,
    TriggerKind::Resync,
    TriggerKind::Reload,
    TriggerKind::Retry,
    TriggerKind::Variables,
    TriggerKind::Reconcile,
    TriggerKind::Resume,
];

/// A unit's trigger channel: capacity 1, so one sync is queued at most. A trigger offered while
/// one is queued is merged into it rather than dropped ([`Trigger::merge`]): the queued one is
/// received with the more urgent kind, what each asked for, and the later of the two times, so
/// that its fetch ([`crate::sync::repo::Repo::fetch_since`]) is one that began after the newer
/// push, not one that began between the two and missed it.
///
/// One slot under a lock and a [`tokio::sync::Notify`] (about 100 bytes a unit): a tokio
/// `mpsc` channel allocates a block of 32 slots even at capacity 1 (ARCHITECTURE.md,
/// "Figures").
pub fn channel() -> (TriggerSender, TriggerReceiver) {
    let slot = Arc::new(Slot {
        state: Mutex::new(SlotState { queued: None, senders: 1, received: true }),
        ready: tokio::sync::Notify::new(),
    });
    (TriggerSender(slot.clone()), TriggerReceiver(slot))
}

/// The channel's one slot, shared by its senders and its receiver.
#[derive(Debug)]
struct Slot {
    state: Mutex<SlotState>,
    /// Signalled when a trigger is queued or the last sender goes.
    ready: tokio::sync::Notify,
}

#[derive(Debug)]
struct SlotState {
    /// The queued trigger, with everything merged into it.
    queued: Option<Trigger>,
    /// Senders alive: the receiver gets `None` once there are none and nothing is queued.
    senders: usize,
    /// The receiver is alive: an offer fails with [`Closed`] once it is not.
    received: bool,
}

impl Slot {
    fn state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().expect("trigger lock")
    }
}

/// The sending side of [`channel`]; cheap to clone.
#[derive(Debug)]
pub struct TriggerSender(Arc<Slot>);

impl Clone for TriggerSender {
    fn clone(&self) -> Self {
        self.0.state().senders += 1;
        Self(self.0.clone())
    }
}

impl Drop for TriggerSender {
    fn drop(&mut self) {
        let last = {
            let mut state = self.0.state();
            state.senders -= 1;
            state.senders == 0
        };
        if last {
            self.0.ready.notify_one();
        }
    }
}

/// The unit's task has ended: nothing receives its triggers any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl TriggerSender {
    /// Queues `trigger`, or merges it into the one already queued ([`Trigger::merge`]). Never
    /// waits.
    ///
    /// Errors: [`Closed`] when the unit's task has ended.
    pub fn offer(&self, trigger: Trigger) -> Result<(), Closed> {
        {
            let mut state = self.0.state();
            if !state.received {
                return Err(Closed);
            }
            match &mut state.queued {
                Some(queued) => queued.merge(trigger),
                None => state.queued = Some(trigger),
            }
        }
        self.0.ready.notify_one();
        Ok(())
    }
}

/// The receiving side of [`channel`], held by the unit's task.
#[derive(Debug)]
pub struct TriggerReceiver(Arc<Slot>);

impl Drop for TriggerReceiver {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.received = false;
        state.queued = None;
    }
}

impl TriggerReceiver {
    /// The next trigger, with the time of any merged into it; `None` once every sender is
    /// gone and nothing is queued. Cancel-safe (a trigger is taken only when it is returned).
    pub async fn recv(&mut self) -> Option<Trigger> {
        loop {
            {
                let mut state = self.0.state();
                if let Some(trigger) = state.queued.take() {
                    return Some(trigger);
                }
                if state.senders == 0 {
                    return None;
                }
            }
            // A signal sent between the check and this wait is kept as the Notify's permit.
            self.0.ready.notified().await;
        }
    }

    /// The trigger queued now, if any, as [`TriggerReceiver::recv`] gives it; never waits.
    pub fn try_recv(&mut self) -> Option<Trigger> {
        self.0.state().queued.take()
    }
}

/// What is known of one unit, for `/readyz`, `/metrics` and sd_notify.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitStatus {
    /// The unit has completed at least one sync attempt and its caches are synced.
    pub cache_synced: bool,
    /// Outcome of the last sync that read its revision: `Some(true)` it ran to the end against
    /// an API server that answered (some objects may have failed: see `failed_objects`),
    /// `Some(false)` it failed as a whole (git, render, the cluster unreachable), `None` none
    /// yet. A revision that does not parse leaves it as it was
    /// ([`crate::observe::unit::keeps_readiness`]): the last revision applied is still in force.
    pub last_sync_ok: Option<bool>,
    /// The error of the last sync that failed as a whole, one line (`revision <short>: ` and
    /// the chain, the file and document of a parse error), masked, for `/readyz?verbose`;
    /// `None` once a sync runs to the end.
    pub last_error: Option<crate::telemetry::Masked>,
    /// Objects the last sync could not apply (rejected by the API server, RBAC or an admission
    /// webhook). They are logged, counted in metrics and shown in `STATUS=`; they do not make
    /// the unit unready: a pod taken out of its Service would miss the webhook of the fix.
    pub failed_objects: usize,
    /// The revision last applied.
    pub last_revision: Option<String>,
    /// Members in the unit's inventory.
    pub tracked_objects: usize,
    /// The objects the last sync changed, by health at the end of its wait; `None` while the
    /// wait runs or when none ran. Shown in sd_notify `STATUS=`; `/readyz` does not follow it
    /// (an application that does not become healthy is not a reason to restart gitward).
    pub health: Option<crate::health::Counts>,
    /// A health wait is running (sd_notify `STATUS=` says `waiting for health`).
    pub waiting: bool,
    /// A sync of the unit has run to the end against an API server that answered
    /// (`last_sync_ok` was `Some(true)`) at least once since its task started; it stays true.
    /// `READY=1` waits for this of every unit, so a daemon whose syncs all failed (the cluster
    /// unreachable) does not say it is ready.
    pub applied_once: bool,
    /// The unit is suspended (`gitward suspend`, `suspend = true`): it counts as ready for
    /// `/readyz` and `READY=1` whatever its last sync did, as a replica standing by does — a
    /// suspended unit is one a person chose to hold still, not one gitward failed at. Kept by
    /// [`Statuses::set`]; set by [`Statuses::set_suspended`].
    pub suspended: bool,
    /// While a new revision waits for the units it depends on (`depends_on`): each one not
    /// ready and why (`base: not healthy (progressing)`), `; `-separated. Such a unit counts as
    /// ready for `/readyz` and `READY=1`, as a suspended one does: it waits on purpose and
    /// syncs once they are ready. Masked: a `ready_expr` error may quote what it read. Kept
    /// by [`Statuses::set`]; set by [`Statuses::set_blocked`].
    pub blocked: Option<crate::telemetry::Masked>,
    /// While the unit backs off after a failed sync (its source unreachable or hung, its apply
    /// failed): when its next attempt is due. Polls start nothing meanwhile while its source
    /// fails; a push or webhook starts the backoff over. `None` when it is not backing off.
    /// Kept by [`Statuses::set`]; set by [`Statuses::set_backoff`].
    pub backoff_until: Option<std::time::SystemTime>,
}

/// The status of every unit, shared between unit tasks and the HTTP server; and whether this
/// replica is standing by for leadership.
#[derive(Debug, Clone, Default)]
pub struct Statuses(Arc<RwLock<BTreeMap<String, UnitStatus>>>, Arc<AtomicBool>);

impl Statuses {
    /// Marks this replica as standing by (leader election on, not the leader) or not.
    pub fn set_standby(&self, standby: bool) {
        self.1.store(standby, Ordering::SeqCst);
    }

    /// True while this replica stands by for leadership: it applies nothing, counts as ready
    /// (so a rolling update can bring it up while another replica leads), and refuses webhooks
    /// with 503 so the sender knows to retry.
    pub fn standby(&self) -> bool {
        self.1.load(Ordering::SeqCst)
    }

    /// Replaces the status of `unit`, keeping whether it is suspended.
    pub fn set(&self, unit: &str, mut status: UnitStatus) {
        let mut units = self.0.write().expect("status lock");
        status.suspended = units.get(unit).is_some_and(|s| s.suspended);
        status.blocked = units.get(unit).and_then(|s| s.blocked.clone());
        status.backoff_until = units.get(unit).and_then(|s| s.backoff_until);
        units.insert(unit.to_string(), status);
    }

    /// Sets or clears what `unit` waits for ([`UnitStatus::blocked`]).
    pub fn set_blocked(&self, unit: &str, blocked: Option<crate::telemetry::Masked>) {
        self.0.write().expect("status lock").entry(unit.to_string()).or_default().blocked = blocked;
    }

    /// Sets or clears when `unit`'s next attempt is due while it backs off
    /// ([`UnitStatus::backoff_until`]).
    pub fn set_backoff(&self, unit: &str, until: Option<std::time::SystemTime>) {
        self.0.write().expect("status lock").entry(unit.to_string()).or_default().backoff_until = until;
    }

    /// Marks `unit` suspended or not ([`UnitStatus::suspended`]).
    pub fn set_suspended(&self, unit: &str, suspended: bool) {
        self.0.write().expect("status lock").entry(unit.to_string()).or_default().suspended = suspended;
    }

    /// Forgets units not in `names` (after a reload).
    pub fn retain(&self, names: &[String]) {
        self.0.write().expect("status lock").retain(|k, _| names.contains(k));
    }

    /// A copy of all units' status.
    pub fn snapshot(&self) -> BTreeMap<String, UnitStatus> {
        self.0.read().expect("status lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_trigger_offered_while_one_is_queued_is_merged_into_it() {
        let (tx, mut rx) = channel();
        let first = Instant::now();
        let later = first + Duration::from_secs(5);
        tx.offer(Trigger::new(TriggerKind::Poll, first)).unwrap();
        tx.offer(Trigger::new(TriggerKind::Webhook, later)).unwrap();
        tx.offer(Trigger::new(TriggerKind::Push, first + Duration::from_secs(1))).unwrap();
        let got = rx.recv().await.unwrap();
        // The most urgent kind, the newest time of the three.
        assert_eq!((got.kind, got.at), (TriggerKind::Webhook, later));
        assert!(got.includes(TriggerKind::Poll) && got.includes(TriggerKind::Push));
        assert!(rx.try_recv().is_none(), "merged, not queued");
        // The merged time was taken with it: the next trigger keeps its own.
        tx.offer(Trigger::new(TriggerKind::Reload, first)).unwrap();
        let next = rx.recv().await.unwrap();
        assert_eq!((next.kind, next.at), (TriggerKind::Reload, first));
        assert!(!next.includes(TriggerKind::Webhook), "nothing of the trigger taken before");
        drop(rx);
        assert_eq!(tx.offer(Trigger::now(TriggerKind::Push)), Err(Closed));
    }

    /// The kinds in `kinds` merged in that order.
    fn merged(kinds: &[TriggerKind]) -> Trigger {
        let base = Instant::now();
        let mut iter = kinds.iter().enumerate().map(|(i, k)| Trigger::new(*k, base + Duration::from_millis(i as u64)));
        let mut trigger = iter.next().expect("one kind");
        iter.for_each(|t| trigger.merge(t));
        trigger
    }

    #[test]
    fn a_merged_trigger_keeps_the_more_urgent_kind_whatever_the_order() {
        use TriggerKind::*;
        let rows: &[(&[TriggerKind], TriggerKind)] = &[
            (&[Poll, Push], Push),
            (&[Push, Poll], Push),
            (&[Poll, Webhook], Webhook),
            (&[Push, Webhook], Webhook),
            (&[Poll, Variables], Variables),
            (&[Resync, Variables], Variables),
            (&[Poll, Reload], Reload),
            (&[Resync, Reload], Reload),
            (&[Variables, Reload], Reload),
            (&[Push, Variables], Push),
            (&[Poll, Reconcile], Reconcile),
            (&[Push, Reconcile], Push),
            (&[Poll, Resync], Resync),
            (&[Variables, Resume], Variables),
            (&[Poll, Resume], Resume),
        ];
        for (kinds, want) in rows {
            let mut reversed = kinds.to_vec();
            reversed.reverse();
            for order in [kinds.to_vec(), reversed] {
                let got = merged(&order);
                assert_eq!(got.kind, *want, "{order:?}");
                assert!(order.iter().all(|k| got.includes(*k)), "{order:?} keeps every kind");
            }
        }
    }

    #[test]
    fn a_merged_trigger_syncs_the_same_revision_when_any_part_would() {
        use TriggerKind::*;
        let rows: &[(&[TriggerKind], bool, bool)] = &[
            // (kinds, needs a new revision, git only)
            (&[Poll], true, true),
            (&[Poll, Push], true, true),
            (&[Poll, Webhook], false, true),
            (&[Push, Variables], false, false),
            (&[Poll, Variables], false, false),
            (&[Poll, Reload], false, false),
            (&[Push, Resync], false, false),
            (&[Push, Reconcile], false, false),
            (&[Poll, Resume], false, false),
        ];
        for (kinds, needs, git) in rows {
            let got = merged(kinds);
            assert_eq!((got.needs_new_revision(), got.git_only()), (*needs, *git), "{kinds:?}");
        }
        // A webhook naming its commit asks for a new revision as a push does, until a webhook
        // naming none (an explicit request) or a reload is merged into it.
        let pushed = Trigger::pushed(Instant::now());
        assert_eq!((pushed.kind, pushed.includes(Webhook)), (Webhook, true));
        assert!(pushed.needs_new_revision() && pushed.git_only());
        for (other, needs, git) in [(Push, true, true), (Webhook, false, true), (Reload, false, false)] {
            let mut got = Trigger::pushed(Instant::now());
            got.merge(Trigger::now(other));
            assert_eq!((got.needs_new_revision(), got.git_only()), (needs, git), "{other:?}");
        }
    }

    #[test]
    fn every_kind_has_its_own_bit() {
        let bits: std::collections::BTreeSet<u16> = ALL_KINDS.iter().map(|k| k.bit()).collect();
        assert_eq!(bits.len(), ALL_KINDS.len());
        let last = ALL_KINDS.iter().map(|k| *k as usize).max().unwrap();
        assert_eq!(last + 1, ALL_KINDS.len(), "every kind is listed");
        assert!(ALL_KINDS.iter().all(|k| Trigger::now(*k).kinds().eq([*k])));
        let urgencies: std::collections::BTreeSet<u8> = ALL_KINDS.iter().map(|k| k.urgency()).collect();
        assert_eq!(urgencies.len(), ALL_KINDS.len(), "no two kinds are equally urgent");
    }

    #[tokio::test]
    async fn the_receiver_waits_for_an_offer_and_ends_when_every_sender_is_gone() {
        let (tx, mut rx) = channel();
        let other = tx.clone();
        let waiting = tokio::spawn(async move {
            let first = rx.recv().await;
            let second = rx.recv().await;
            (first.map(|t| t.kind), second.map(|t| t.kind), rx.recv().await.is_none())
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.offer(Trigger::now(TriggerKind::Push)).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        other.offer(Trigger::now(TriggerKind::Reload)).unwrap();
        drop(tx);
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(other);
        let got = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("ended").unwrap();
        assert_eq!(got, (Some(TriggerKind::Push), Some(TriggerKind::Reload), true));
    }

    #[tokio::test]
    async fn a_trigger_queued_before_the_last_sender_went_is_still_received() {
        let (tx, mut rx) = channel();
        tx.offer(Trigger::now(TriggerKind::Webhook)).unwrap();
        drop(tx);
        assert_eq!(rx.recv().await.map(|t| t.kind), Some(TriggerKind::Webhook));
        assert!(rx.recv().await.is_none());
    }
}
