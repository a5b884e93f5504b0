//! Sharding: units spread over the live replicas, each unit applied only by the holder of its
//! bucket's `coordination.k8s.io/v1` Lease (`[daemon.sharding]`).
//!
//! - **Membership.** Every replica holds a Lease `gitward-member-<identity>` in the sharding
//!   namespace, renewed by the same loop as leader election ([`super::election`]); on shutdown it
//!   is released (empty `holderIdentity`), so the others see the replica leave at once.
//! - **Who is alive.** One watch of the Leases in the namespace. A member is live while its
//!   Lease has a holder and its record has changed within its `leaseDurationSeconds`, judged
//!   by this process's monotonic clock from when it saw the record (client-go's rule; clock
//!   skew between machines cannot make a live member look dead).
//! - **Buckets.** Units are grouped into [`super::assignment::BUCKETS`] buckets by the hash of
//!   their name; a bucket is assigned, fenced and handed over whole, under one Lease, so the
//!   Leases renewed stay at most that many however many units there are.
//! - **Assignment.** Rendezvous (highest-random-weight) hashing, Thaler and Ravishankar 1996:
//!   a bucket belongs to the live member with the highest `sha256(identity ‖ 0 ‖ bucket)` weight
//!   ([`super::assignment`]). A member that joins takes only the buckets it now wins (about `1/n`), one that
//!   leaves gives up only its own; every replica computes the same answer from the same view.
//!   Only members that advertise a bucket's units ([`super::member`]: the fingerprints of the
//!   units they run, on their membership Lease) are candidates for it, and only those with the
//!   version of each unit of the member that joined last
//!   ([`super::assignment::assign_bucket`]), so replicas running different configs leave no
//!   unit of the newest config unapplied and never apply two versions in turn.
//! - **Ownership.** A replica runs a leader-election loop on `gitward-bucket-<n>` for each bucket
//!   assigned to it, and runs the bucket's units of its config only while that loop says it
//!   holds the Lease ([`Ownership::held`]). The election loop is [`super::election`]'s: a held Lease is taken
//!   only when released or when its record has not changed for its duration; the holder stops
//!   (publishes `false`) at its renew deadline, before anyone else can take it — fencing; the
//!   unit's clients refuse its writes from that deadline on, request by request
//!   ([`Ownership::fences`], [`crate::cluster::fence`]).
//!   [`leader::spawn_seen`](super::election::spawn_seen) hands it what the watch already saw, so a dead member's bucket
//!   Leases are taken as soon as they expire rather than one lease duration after the new
//!   owner first looks.
//! - **Handover.** The units of a bucket no longer assigned here are listed in
//!   [`Ownership::releasing`]: the daemon stops them after their in-flight syncs while this
//!   loop keeps renewing the Lease; once the daemon reports them all stopped, the Lease is
//!   released and the new owner takes it at its next poll. No unit is applied by two replicas
//!   at once.
//! - **Upgrade.** A gitward older than bucket Leases guards each unit with `gitward-unit-<unit>`
//!   and advertises no bucket count; such a member is a candidate for no bucket, and a bucket
//!   is not claimed while a unit Lease of one of its units is held and unexpired, so old and
//!   new replicas of a rolling update never apply one unit at once. Unit Leases nobody renews
//!   are collected as stale.
//! - **Timing.** The configured `lease_duration` `D` is the failover bound. The Leases are
//!   written with `L = ⌈D/2⌉` s and renewed every `L/3`; a dead replica's units are taken
//!   when its Leases expire, at most `L` after its death, leaving `D − L` for the new owner's
//!   first sync. A member counts for the assignment only once it has been live for `L` by
//!   the judging replica's clock (the settle time; a replica counts itself after its own first
//!   `L`, and the members it first sees within that `L` from the same moment): replicas
//!   started together have all seen each other before anyone claims a unit and count each
//!   other at once, and the owners of a joining replica's share keep applying it until the
//!   newcomer is ready to take it, so the handover leaves no unowned gap of a settle time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

use super::assignment::{bucket, eligible};
use super::election::{self as leader, Seen};
use crate::cluster::fence::Fence;

mod config;
mod state;
mod view;
pub use config::{ShardConfig, default_identity, user_agent};
use state::{Elect, Shard};

/// Name prefix of membership Leases: `gitward-member-<identity>`.
pub const MEMBER_PREFIX: &str = "gitward-member-";
/// Name prefix of bucket Leases: `gitward-bucket-<n>`, `n` below [`super::assignment::BUCKETS`].
pub const BUCKET_PREFIX: &str = "gitward-bucket-";
/// Name prefix of the unit Leases of gitward before bucket Leases, `gitward-unit-<unit>`:
/// respected during an upgrade, then collected.
pub const LEGACY_UNIT_PREFIX: &str = "gitward-unit-";
/// How often the assignment is recomputed and the election loops' state read: well inside
/// the fencing margin (`L/3`, at least 333 ms), so a lost Lease stops its unit in time.
const TICK: Duration = Duration::from_millis(100);
/// A released or expired Lease nobody needs (a dead replica's membership, the Lease of a bucket
/// no unit falls in any more) is deleted once it has stayed so for this many Lease durations `L`.
const STALE_AFTER: u32 = 3;
/// How long a unit this replica could not start ([`Running::failed`]) is left to the others
/// before this replica advertises it again.
pub const BENCH_FOR: Duration = Duration::from_secs(300);

/// What this replica may run, published by the sharding loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    /// Counts changes; the daemon echoes the last one it acted on in [`Running::generation`],
    /// so a Lease is never released on the strength of a report older than the request to
    /// stop its unit.
    pub generation: u64,
    /// Units whose bucket's Lease this replica holds and which are still assigned to it: run
    /// these. A unit that leaves this set without entering [`Self::releasing`] lost its Lease
    /// (or is about to): stop it at once.
    pub held: BTreeSet<String>,
    /// Units whose bucket's Lease this replica still holds and renews, but which are assigned
    /// to another replica now: stop them after their in-flight sync and report them stopped
    /// (the `running` channel of [`spawn`]); the Lease is released once all are.
    pub releasing: BTreeSet<String>,
    /// The fence of each unit in `held` or `releasing`: the deadline of its bucket's Lease, for the
    /// unit's clients ([`crate::cluster::fence`]). Wait for it to drain before reporting a
    /// unit handed over stopped.
    pub fences: BTreeMap<String, Fence>,
}

/// A unit changing hands at this replica (with its bucket's Lease), as [`ShardEvents::handover`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handover {
    /// This replica took the Lease of the unit's bucket.
    Acquired,
    /// This replica handed the unit over: it stopped the unit and released its bucket's Lease.
    Released,
}

impl Handover {
    /// `acquired` or `released`, the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Handover::Acquired => "acquired",
            Handover::Released => "released",
        }
    }
}

/// What the sharding loop reports as it runs; the daemon's metrics implement it
/// (`gitward_shard_*`), so this module does not depend on the daemon.
pub trait ShardEvents: Send + Sync {
    /// This replica (`identity`) now holds `held` unit Leases.
    fn units_held(&self, identity: &str, held: usize);
    /// A unit was acquired or handed over by `identity` (one call per unit of the bucket).
    fn handover(&self, identity: &str, direction: Handover);
    /// `identity` took `unit` over after its previous holder died at `died` (its membership
    /// Lease's expiry, by this process's clock).
    fn failover_started(&self, unit: &str, identity: &str, died: std::time::Instant);
    /// `unrenewed` of the units some live member runs are in a bucket whose Lease nobody renews
    /// (missing, released or expired), as `identity` sees it.
    fn units_unrenewed(&self, identity: &str, unrenewed: usize);
}

/// What the daemon runs, reported back to the sharding loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Running {
    /// The last [`Ownership::generation`] the daemon has acted on.
    pub generation: u64,
    /// Units whose task runs or is still stopping.
    pub units: BTreeSet<String>,
    /// Units held here that failed to start several times in a row: the sharding loop stops
    /// advertising them for [`BENCH_FOR`] and hands their Lease over, so another replica runs
    /// them instead of nobody.
    pub failed: BTreeSet<String>,
}

/// Starts the sharding loop on the current runtime: joins as a member, watches the Leases,
/// and elects this replica for the units assigned to it.
///
/// `units`: every unit of the config (it may change on reload), name → fingerprint
/// ([`crate::config::SyncUnit::fingerprint`]), advertised on the membership Lease. `running`: the units the
/// daemon is running or still stopping, which the loop reads before releasing a Lease.
/// Returns the [`Ownership`] channel and the loop's task; aborting the task stops every
/// election loop it started without releasing anything (as a crash would) — call [`leave`]
/// after it for a clean exit. Errors are logged and retried (the watch backs off; the
/// election loops retry each round); nothing is returned.
pub fn spawn(
    client: kube::Client,
    cfg: ShardConfig,
    units: watch::Receiver<BTreeMap<String, String>>,
    running: watch::Receiver<Running>,
    metrics: Arc<dyn ShardEvents>,
) -> (watch::Receiver<Ownership>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(Ownership::default());
    let shard = Shard::new(client, cfg, units, running, tx, metrics);
    (rx, tokio::spawn(shard.run()))
}

/// Releases this replica's Leases on shutdown — every bucket Lease it holds, then its
/// membership — so that the others take over at once instead of after the Leases expire.
/// The bucket Leases are listed rather than taken from what ran: a Lease won during the
/// shutdown's grace ran no unit but is held all the same. The bucket of a unit in `undrained`
/// (a write of it may still be in flight, [`Fence::drained`]) keeps its Lease until it
/// expires, so its next owner cannot be overtaken by that write. Stop the units and abort the loop of
/// [`spawn`] before. Best effort, in parallel, bounded as [`leader::release`] is; the list is
/// bounded by [`LIST_BOUND`].
pub async fn leave(client: kube::Client, cfg: &ShardConfig, undrained: &BTreeSet<String>) {
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let listed = tokio::time::timeout(LIST_BOUND, api.list(&Default::default())).await;
    let leases = match listed {
        Ok(Ok(list)) => list.items,
        Ok(Err(e)) => {
            warn!(namespace = %cfg.namespace, error = %crate::telemetry::error_chain(&e), "sharding: cannot list Leases to release them; they expire");
            Vec::new()
        }
        Err(_) => {
            warn!(namespace = %cfg.namespace, "sharding: listing Leases to release them timed out; they expire");
            Vec::new()
        }
    };
    let mut releases = tokio::task::JoinSet::new();
    for lease in leases {
        let Some(b) = lease.metadata.name.as_deref().and_then(|n| cfg.bucket_of_lease(n)) else { continue };
        let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref());
        if holder != Some(cfg.identity.as_str()) {
            continue;
        }
        if let Some(unit) = undrained.iter().find(|u| bucket(u) == b) {
            warn!(
                unit,
                bucket = b,
                "sharding: a write of the unit may still be in flight; its bucket's Lease is left to expire"
            );
            continue;
        }
        releases.spawn(leader::release(client.clone(), cfg.leader_config(cfg.bucket_lease(b))));
    }
    while releases.join_next().await.is_some() {}
    leader::release(client, cfg.leader_config(cfg.member_lease(&cfg.identity))).await;
}

/// Longest wait for the list of Leases at shutdown ([`leave`]).
const LIST_BOUND: Duration = Duration::from_secs(2);

/// The units of a config as the sharding loop takes them: name → fingerprint.
pub fn fingerprints(units: &[crate::config::SyncUnit]) -> BTreeMap<String, String> {
    units.iter().map(|u| (u.name.clone(), u.fingerprint())).collect()
}

impl Shard {
    /// Runs until aborted (or until nobody reads the ownership any more).
    async fn run(mut self) {
        let member_name = self.cfg.member_lease(&self.cfg.identity);
        let (membership, member_task) = leader::spawn(self.client.clone(), self.cfg.leader_config(member_name));
        // Held for the loop's lifetime; dropping it (the loop aborted) stops the renewals.
        let _member = Elect { leadership: membership, task: member_task, failover_from: None };
        info!(identity = %self.cfg.identity, namespace = %self.cfg.namespace, lease_s = self.cfg.lease().as_secs(), "sharding: joined");
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let mut leases = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let tx = self.tx.clone();
        loop {
            tokio::select! {
                () = tx.closed() => return,
                event = leases.next() => match event {
                    Some(Ok(event)) => self.saw(event, Instant::now()),
                    Some(Err(e)) => warn!(namespace = %self.cfg.namespace, error = %crate::telemetry::error_chain(&e), "sharding: lease watch failed; retrying"),
                    None => return,
                },
                _ = tick.tick() => self.step(Instant::now()),
            }
        }
    }

    /// Records a watch event; a record's time changes only when its spec does.
    fn saw(&mut self, event: Event<Lease>, now: Instant) {
        match event {
            Event::Init => self.leases.relisted = Some(BTreeSet::new()),
            Event::InitApply(lease) => {
                if let Some(name) = self.record(lease, now) {
                    self.leases.relisted.get_or_insert_with(BTreeSet::new).insert(name);
                }
            }
            Event::InitDone => {
                let listed = self.leases.relisted.take().unwrap_or_default();
                self.leases.seen.retain(|name, _| listed.contains(name));
                self.leases.versions.retain(|name, _| listed.contains(name));
            }
            Event::Apply(lease) => {
                self.record(lease, now);
            }
            Event::Delete(lease) => {
                if let Some(name) = lease.metadata.name {
                    self.leases.seen.remove(&name);
                    self.leases.versions.remove(&name);
                }
            }
        }
    }

    /// Stores a gitward Lease's spec if it changed, and a member's advert; returns its name.
    fn record(&mut self, lease: Lease, now: Instant) -> Option<String> {
        let name = lease.metadata.name.clone()?;
        if let Some(identity) = name.strip_prefix(&self.cfg.member_prefix()) {
            self.note_advert(identity, &lease);
        } else if !name.starts_with(&self.cfg.bucket_prefix()) && !name.starts_with(&self.cfg.legacy_unit_prefix()) {
            return None;
        }
        if let Some(version) = &lease.metadata.resource_version {
            self.leases.versions.insert(name.clone(), version.clone());
        }
        let spec = lease.spec.unwrap_or_default();
        if self.leases.seen.get(&name).is_none_or(|s| s.spec != spec) {
            self.leases.seen.insert(name.clone(), Seen { spec, at: now });
        }
        Some(name)
    }

    /// When a record seen at `seen.at` expires, by this process's clock.
    fn expiry(&self, seen: &Seen) -> Instant {
        let secs = seen.spec.lease_duration_seconds.filter(|s| *s > 0).map(|s| u64::from(s.unsigned_abs()));
        seen.at + secs.map_or(self.cfg.lease(), Duration::from_secs)
    }

    /// Live members (always including this replica) and, for members whose Lease has
    /// expired while still naming them, when it expired.
    fn members(&self, now: Instant) -> (BTreeSet<String>, BTreeMap<String, Instant>) {
        let mut live = BTreeSet::from([self.cfg.identity.clone()]);
        let mut dead = BTreeMap::new();
        let prefix = self.cfg.member_prefix();
        for (name, seen) in self.leases.seen.range(prefix.clone()..).take_while(|(n, _)| n.starts_with(&prefix)) {
            let Some(holder) = seen.spec.holder_identity.as_deref().filter(|h| !h.is_empty()) else { continue };
            if name.strip_prefix(&prefix) != Some(holder) {
                continue;
            }
            let expiry = self.expiry(seen);
            if expiry > now {
                live.insert(holder.to_owned());
            } else {
                dead.insert(holder.to_owned(), expiry);
            }
        }
        (live, dead)
    }

    /// One round: assign, start and stop election loops, release what the daemon stopped,
    /// publish.
    fn step(&mut self, now: Instant) {
        if self.membership.refused.is_some() {
            self.buckets.electors.clear();
            self.buckets.releasing.clear();
            self.publish();
            return;
        }
        self.bench(now);
        self.advertise();
        let (live, dead) = self.members(now);
        let settle = self.cfg.lease();
        let eligible = eligible(&mut self.membership.first_live, &live, &self.cfg.identity, settle, now);
        let identity = self.cfg.identity.clone();
        let mine = self.mine(&eligible);
        self.survey(&live, now);
        for b in &mine {
            if !self.buckets.electors.contains_key(b)
                && !self.held_by_the_dead(*b, &live, now)
                && !self.held_by_old(*b, now)
            {
                self.elect(*b, &dead);
            }
        }
        self.buckets.releasing.retain(|b, _| !mine.contains(b));
        let unassigned: Vec<u32> = self.buckets.electors.keys().filter(|b| !mine.contains(*b)).copied().collect();
        for b in unassigned {
            let leading = self.buckets.electors.get(&b).is_some_and(|e| e.leadership.is_leader());
            if leading {
                // The publish below changes the ownership, so it carries generation + 1.
                let next = self.buckets.generation + 1;
                self.buckets.releasing.entry(b).or_insert(next);
            } else {
                // Not holding it (or about to be told it lost it): nothing to hand over. A
                // release in case the loop was mid-acquire; it does nothing if we hold nothing.
                self.buckets.electors.remove(&b);
                self.release(b);
            }
        }
        let running = self.running.borrow().clone();
        let running_buckets: BTreeSet<u32> = running.units.iter().map(|u| self.buckets.memo.of(u)).collect();
        for (b, asked) in self.buckets.releasing.clone() {
            let leading = self.buckets.electors.get(&b).is_some_and(|e| e.leadership.is_leader());
            let stopped = running.generation >= asked && !running_buckets.contains(&b);
            if !leading || stopped {
                self.buckets.releasing.remove(&b);
                self.buckets.electors.remove(&b);
                if leading {
                    self.release(b);
                    let offer = self.offered();
                    let units = offer.by_bucket.get(&b).map_or(&[][..], Vec::as_slice);
                    for _ in units {
                        self.metrics.handover(&identity, Handover::Released);
                    }
                    info!(bucket = b, units = ?units, identity = %identity, "sharding: bucket handed over");
                }
            }
        }
        self.publish();
    }

    /// True while bucket `b`'s Lease names a holder that is not a live member and has not
    /// expired yet: its election loop starts at the first tick after expiry and takes the
    /// Lease in its first round, rather than sleeping a poll period after finding it still valid.
    fn held_by_the_dead(&self, b: u32, live: &BTreeSet<String>, now: Instant) -> bool {
        let Some(seen) = self.leases.seen.get(&self.cfg.bucket_lease(b)) else { return false };
        let holder = seen.spec.holder_identity.as_deref().unwrap_or("");
        !holder.is_empty() && !live.contains(holder) && self.expiry(seen) > now
    }

    /// True while a unit Lease of a gitward older than bucket Leases
    /// ([`LEGACY_UNIT_PREFIX`]) guards a unit of bucket `b`: held and unexpired, so a replica
    /// of the old version may be applying that unit.
    fn held_by_old(&self, b: u32, now: Instant) -> bool {
        let prefix = self.cfg.legacy_unit_prefix();
        self.leases.seen.range(prefix.clone()..).take_while(|(n, _)| n.starts_with(&prefix)).any(|(name, seen)| {
            let held = seen.spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty());
            held && self.expiry(seen) > now && self.buckets.memo.of(&name[prefix.len()..]) == b
        })
    }

    /// Starts the election loop of bucket `b`, seeded with what the watch saw of its Lease.
    fn elect(&mut self, b: u32, dead: &BTreeMap<String, Instant>) {
        let name = self.cfg.bucket_lease(b);
        let seen = self.leases.seen.get(&name).cloned();
        let previous = seen.as_ref().and_then(|s| s.spec.holder_identity.clone()).unwrap_or_default();
        let failover_from = dead.get(&previous).copied();
        let (leadership, task) = leader::spawn_seen(self.client.clone(), self.cfg.leader_config(name), seen);
        self.buckets.electors.insert(b, Elect { leadership, task, failover_from });
    }

    /// Releases bucket `b`'s Lease in the background (bounded; see [`super::election::release`]).
    fn release(&self, b: u32) {
        let cfg = self.cfg.leader_config(self.cfg.bucket_lease(b));
        tokio::spawn(leader::release(self.client.clone(), cfg));
    }

    /// Publishes the ownership if it changed; logs and counts acquisitions and losses.
    fn publish(&mut self) {
        let offer = self.offered();
        let units_of = |buckets: &BTreeSet<u32>| -> BTreeSet<String> {
            buckets.iter().filter_map(|b| offer.by_bucket.get(b)).flatten().cloned().collect()
        };
        let held_buckets: BTreeSet<u32> = self
            .buckets
            .electors
            .iter()
            .filter(|(b, e)| e.leadership.is_leader() && !self.buckets.releasing.contains_key(*b))
            .map(|(b, _)| *b)
            .collect();
        let held = units_of(&held_buckets);
        let releasing = units_of(&self.buckets.releasing.keys().copied().collect());
        let identity = &self.cfg.identity;
        for unit in held.difference(&self.buckets.holding) {
            self.metrics.handover(identity, Handover::Acquired);
            if let Some(from) = self.buckets.electors.get(&self.buckets.memo.of(unit)).and_then(|e| e.failover_from) {
                self.metrics.failover_started(unit, identity, from.into_std());
            }
            info!(unit = %unit, identity = %identity, "sharding: unit acquired");
        }
        for unit in self.buckets.holding.difference(&held) {
            // A unit of a bucket still held left the config (a reload) or was benched.
            if !releasing.contains(unit) && !held_buckets.contains(&self.buckets.memo.of(unit)) {
                warn!(unit = %unit, identity = %identity, "sharding: unit lease lost; unit stopped");
            }
        }
        self.metrics.units_held(identity, held.len());
        self.buckets.holding = held.clone();
        let fences: BTreeMap<String, Fence> = held
            .iter()
            .chain(&releasing)
            .filter_map(|unit| {
                Some((unit.clone(), self.buckets.electors.get(&self.buckets.memo.of(unit))?.leadership.fence().clone()))
            })
            .collect();
        let generation = &mut self.buckets.generation;
        self.tx.send_if_modified(|current| {
            if current.held == held && current.releasing == releasing && current.fences == fences {
                return false;
            }
            *generation += 1;
            *current = Ownership { generation: *generation, held, releasing, fences };
            true
        });
    }
}
