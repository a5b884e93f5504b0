//! The sharding loop's state, in parts by role: what the watch saw of the Leases, this
//! replica's membership, the adverts (its own and the others'), and the buckets it runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::super::assignment::BucketMemo;
use super::super::election::{Leadership, Seen};
use super::super::member::{self, Advert};
use super::{Ownership, Running, ShardConfig, ShardEvents, view};

/// The sharding loop's state.
pub(super) struct Shard {
    /// Client of the cluster that holds the Leases.
    pub(super) client: kube::Client,
    /// Settings.
    pub(super) cfg: ShardConfig,
    /// Every gitward Lease in the namespace, as the watch showed it.
    pub(super) leases: Leases,
    /// This replica among the members: who is live since when, and its identity check.
    pub(super) membership: Membership,
    /// What each member advertises, and what this replica offers and writes.
    pub(super) adverts: Adverts,
    /// The buckets assigned here, their election loops and what was published of them.
    pub(super) buckets: Buckets,
    /// Every unit of the config, name → fingerprint.
    pub(super) units: watch::Receiver<BTreeMap<String, String>>,
    /// Units the daemon runs or is stopping.
    pub(super) running: watch::Receiver<Running>,
    /// Publishes [`Ownership`].
    pub(super) tx: watch::Sender<Ownership>,
    /// Where acquisitions, hand-overs and failovers are reported (the daemon's metrics).
    pub(super) metrics: Arc<dyn ShardEvents>,
}

impl Shard {
    /// The loop's state before its first event: nothing seen, nothing held.
    pub(super) fn new(
        client: kube::Client,
        cfg: ShardConfig,
        units: watch::Receiver<BTreeMap<String, String>>,
        running: watch::Receiver<Running>,
        tx: watch::Sender<Ownership>,
        metrics: Arc<dyn ShardEvents>,
    ) -> Self {
        Self {
            client,
            cfg,
            leases: Leases {
                seen: BTreeMap::new(),
                relisted: None,
                versions: BTreeMap::new(),
                collected: Instant::now(),
            },
            membership: Membership {
                first_live: BTreeMap::new(),
                nonce: member::process_nonce().to_owned(),
                confirmed: false,
                refused: None,
            },
            adverts: Adverts {
                by_member: BTreeMap::new(),
                changes: 0,
                texts: BTreeMap::new(),
                offer: None,
                benched: BTreeMap::new(),
                published: None,
                publishing: None,
                refused: Arc::default(),
            },
            buckets: Buckets {
                memo: BucketMemo::default(),
                electors: BTreeMap::new(),
                releasing: BTreeMap::new(),
                generation: 0,
                holding: BTreeSet::new(),
                mine_memo: None,
                advertised_memo: None,
            },
            units,
            running,
            tx,
            metrics,
        }
    }
}

/// Every gitward Lease in the namespace, as the watch showed it.
pub(super) struct Leases {
    /// Each Lease as last seen, and since when unchanged.
    pub(super) seen: BTreeMap<String, Seen>,
    /// Names listed by a relist in progress (`Init` … `InitDone`); the rest are dropped at its end.
    pub(super) relisted: Option<BTreeSet<String>>,
    /// The `resourceVersion` of each as last seen: the precondition of a collection.
    pub(super) versions: BTreeMap<String, String>,
    /// When stale Leases were last looked for.
    pub(super) collected: Instant,
}

/// This replica among the members.
pub(super) struct Membership {
    /// When each live member (this replica too) was first seen live without a break: units
    /// are assigned only to members live for the settle time `L`.
    pub(super) first_live: BTreeMap<String, Instant>,
    /// This process's nonce ([`member::process_nonce`]).
    pub(super) nonce: String,
    /// The watch has shown this process's nonce on its membership Lease.
    pub(super) confirmed: bool,
    /// Set when another process wrote its nonce on this replica's membership Lease after this
    /// one's: two processes were given one identity. This replica then runs nothing.
    pub(super) refused: Option<String>,
}

/// What each member advertises on its membership Lease, and what this replica offers and
/// writes on its own.
pub(super) struct Adverts {
    /// What each member advertises (its membership Lease's annotations), by identity.
    pub(super) by_member: BTreeMap<String, Advert>,
    /// Counts the changes of `by_member`, for the memos of [`Buckets`].
    pub(super) changes: u64,
    /// The annotations each member's advert was last read from.
    pub(super) texts: BTreeMap<String, BTreeMap<String, String>>,
    /// What this replica offers to run, as last made ([`Shard::offered`]).
    pub(super) offer: Option<Arc<view::Offer>>,
    /// Units this replica could not start, left to the others until the instant given.
    pub(super) benched: BTreeMap<String, Instant>,
    /// The advert last written on this replica's membership Lease.
    pub(super) published: Option<Advert>,
    /// A write of the advert in flight, with what it writes.
    pub(super) publishing: Option<(Advert, JoinHandle<bool>)>,
    /// The last write of the advert was refused as invalid (422): warned of once, until a
    /// write succeeds.
    pub(super) refused: Arc<std::sync::atomic::AtomicBool>,
}

/// The buckets assigned here: their election loops, the hand-overs in progress and what was
/// published of them.
pub(super) struct Buckets {
    /// The bucket of each unit name seen ([`super::super::assignment::bucket`]), asked for
    /// every round.
    pub(super) memo: BucketMemo,
    /// Election loops of the buckets assigned here (or being released).
    pub(super) electors: BTreeMap<u32, Elect>,
    /// Buckets held but no longer assigned here, waiting for the daemon to stop their units,
    /// with the first ownership generation that asked for it.
    pub(super) releasing: BTreeMap<u32, u64>,
    /// The generation of the last published ownership.
    pub(super) generation: u64,
    /// Units published as held at the last step, to log and count changes.
    pub(super) holding: BTreeSet<String>,
    /// The buckets [`Shard::mine`] found, and from what.
    pub(super) mine_memo: Option<(view::MineKey, BTreeSet<u32>)>,
    /// The units per bucket [`Shard::survey`] counts, and from what.
    pub(super) advertised_memo: Option<(view::AdvertisedKey, Arc<BTreeMap<u32, usize>>)>,
}

/// An election loop for one Lease; aborted when dropped.
pub(super) struct Elect {
    /// Its outcome.
    pub(super) leadership: Leadership,
    /// Its task.
    pub(super) task: JoinHandle<()>,
    /// When the member that held this bucket's Lease died (its membership Lease expired), if
    /// the bucket was assigned here because of that death: the start of the failover time.
    pub(super) failover_from: Option<Instant>,
}

impl Drop for Elect {
    fn drop(&mut self) {
        self.task.abort();
    }
}
