//! The metadata-only cache of a unit's members (DESIGN.md decision 1).
//!
//! One kube `metadata_watcher` per group-kind (metadata requests only: no spec, no status),
//! across all namespaces, for the unit's label `applyset.kubernetes.io/part-of=<id>`: in the
//! daemon one watch per kind shared by every unit of the cluster and fanned out by the label's
//! value ([`super::feed`]), in one-shot commands a watch of the unit's own. Each event is
//! reduced at once to a [`LiveMeta`]
//! (uid, resourceVersion, generation, our two annotations); managedFields and everything else
//! is dropped, so memory grows with what gitward manages, not with the cluster.
//!
//! The engine writes the resourceVersion each apply returns straight into the cache
//! ([`MetadataCache::record`]), so the next plan needs no read after write. A watch event whose
//! resourceVersion differs from the one recorded may be someone else's change: it goes into the
//! [`DriftQueue`] of [`MetadataCache::subscribe`] (the daemon's drift trigger), which keeps the
//! latest event per object, so none is lost however long a sync keeps its reader busy. A
//! relist (after a 410 Gone) raises drift for what changed while the watch was down
//! ([`super::relist`]).

use std::collections::{BTreeMap, HashMap, HashSet, btree_map};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::discovery::ApiResource;
use tokio::sync::watch;

use super::drift::{Drift, DriftQueue, Entry, Touched, is_change, newer};
use super::feed::{Meta, Sink, Subscription, Watches};
use super::live::{LiveMeta, live_meta_of};
use super::relist::{self, Listed};
use super::{Error, Result};
use crate::object::{GroupKind, ObjectRef};

type Store = Arc<Mutex<BTreeMap<ObjectRef, Entry>>>;

/// The bytes of a B-tree node's header and edge pointers each entry is charged with, for
/// [`MetadataCache::estimated_bytes`]: a node holds up to 11 entries beside a parent pointer,
/// lengths and (internal nodes) 12 child pointers, about 16 bytes per entry when half full.
const BTREE_SLOT: usize = 16;

/// State of one group-kind's watch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sync {
    /// The first list has not completed.
    Pending,
    /// The first list failed transiently (the message) and is being retried with backoff.
    Retrying(String),
    /// The store holds a complete list.
    Ready,
    /// The first list failed (RBAC, unknown resource): the message.
    Failed(String),
}

struct KindWatch {
    state: watch::Receiver<Sync>,
    /// The unit's place in the kind's watch ([`Watches`]); dropping it stops the deliveries.
    _subscription: Subscription<Members>,
    /// Set on any watch error, cleared when a full list completes: while set, the store may
    /// miss changes, so no prune may trust it ([`MetadataCache::relist_stale`]).
    errored: Arc<AtomicBool>,
    /// Discovery's one copy of the kind.
    resource: Arc<ApiResource>,
    namespaced: bool,
}

/// Live metadata of one unit's members, kept current by watches.
pub struct MetadataCache {
    watches: Watches,
    /// The unit's ApplySet id: the value of `applyset.kubernetes.io/part-of` on its members.
    id: String,
    store: Store,
    kinds: HashMap<GroupKind, KindWatch>,
    drift: DriftQueue,
    /// Members of the followed kinds whose resourceVersion moved ([`MetadataCache::touched`]).
    touched: Touched,
    /// Which kinds' members are noted in `touched` ([`MetadataCache::follow_kinds`]); none
    /// until set.
    follow: Option<fn(&GroupKind) -> bool>,
    /// The members gitward deleted, so the watch's delete event of them is known as its own;
    /// the resourceVersion of its other writes is kept in the store ([`Entry::own`]).
    own_deletes: OwnDeletes,
    /// gitward's field manager, never named as the other side of a drift ([`Drift::manager`]).
    field_manager: Arc<str>,
}

/// The members gitward deleted; shared with the watch tasks.
type OwnDeletes = Arc<Mutex<HashSet<ObjectRef>>>;

impl MetadataCache {
    /// An empty cache for members labelled `applyset.kubernetes.io/part-of=<applyset_id>`,
    /// watched by watches of its own ([`Watches::private`]) until [`MetadataCache::share`].
    pub fn new(client: kube::Client, applyset_id: &str) -> Self {
        let drift = DriftQueue::default();
        Self {
            watches: Watches::private(client),
            id: applyset_id.to_owned(),
            store: Arc::default(),
            kinds: HashMap::new(),
            drift,
            touched: Touched::default(),
            follow: None,
            own_deletes: OwnDeletes::default(),
            field_manager: Arc::from("gitward"),
        }
    }

    /// Watches the unit's kinds through `watches` (the daemon's, shared by the units of the
    /// cluster) instead of watches of its own. Kinds already watched keep their watch until
    /// it restarts ([`MetadataCache::relist_stale`]).
    pub fn share(&mut self, watches: &Watches) {
        self.watches = watches.clone();
    }

    /// Lists the unit's kinds once and keeps no watch of them ([`Watches::listed`]): for a
    /// one-shot command, whose store then changes only by what it records. Kinds already
    /// watched keep their watch. Call before the first sync.
    pub fn list_only(&mut self) {
        self.watches = self.watches.to_listed();
    }

    /// The watches this cache subscribes through (the unit's ApplySet parent is watched through
    /// them too).
    pub fn watches(&self) -> &Watches {
        &self.watches
    }

    /// The `applyset.kubernetes.io/part-of` value each of `names` (`(namespace, name)` of
    /// `resource`) carries, when it is not this unit's: read from the cluster's shared watch of
    /// the kind, which holds every object labelled with any ApplySet's id, with no request.
    /// `None` for a name no object carries the label on, or carries this unit's id. The whole
    /// answer is `None` when that watch has no complete list to answer from, or this cache does
    /// not share the daemon's watches (a one-shot command): list from the API server then
    /// ([`super::owner::list_labelled`]).
    pub fn others_part_of(
        &self,
        resource: &ApiResource,
        names: &[(Option<&str>, &str)],
    ) -> Option<Vec<Option<String>>> {
        let values = self.watches.labels_of::<Members>(resource, None, super::inventory::PART_OF, names)?;
        Some(values.into_iter().map(|v| v.filter(|v| *v != self.id)).collect())
    }

    /// Sets gitward's field manager (default `gitward`), so drift events name another one.
    pub fn set_field_manager(&mut self, name: &str) {
        self.field_manager = Arc::from(name);
    }

    /// Starts watching `resource` if not yet watched, and waits (at most `timeout`) until its
    /// first list is in the store.
    ///
    /// Errors: [`Error::CacheFailed`] when the first list fails or times out (retry later).
    pub async fn ensure(&mut self, resource: &Arc<ApiResource>, namespaced: bool, timeout: Duration) -> Result<()> {
        let mut ready = self.ensure_all(&[(resource.clone(), namespaced)], timeout).await;
        ready.pop().map_or(Ok(()), |(_, ready)| ready)
    }

    async fn start(
        &mut self,
        gk: GroupKind,
        resource: &Arc<ApiResource>,
        namespaced: bool,
        timeout: Duration,
    ) -> Result<()> {
        let rx = self.spawn(gk.clone(), resource, namespaced);
        wait_ready(&gk, rx, timeout).await
    }

    /// [`MetadataCache::ensure`] for many kinds at once: starts every watch not yet running,
    /// then waits for all their first lists together (at most `timeout`), so n new kinds cost
    /// about one list's round trip, not n in a row. One result per kind, in the order given.
    pub async fn ensure_all(
        &mut self,
        kinds: &[(Arc<ApiResource>, bool)],
        timeout: Duration,
    ) -> Vec<(GroupKind, Result<()>)> {
        let mut waits = Vec::with_capacity(kinds.len());
        for (resource, namespaced) in kinds {
            let gk = GroupKind::new(&resource.group, &resource.kind);
            let rx = match self.kinds.get(&gk) {
                Some(existing) if !matches!(*existing.state.borrow(), Sync::Failed(_)) => existing.state.clone(),
                _ => self.spawn(gk.clone(), resource, *namespaced),
            };
            waits.push((gk, rx));
        }
        futures::future::join_all(waits.into_iter().map(|(gk, rx)| async move {
            let ready = wait_ready(&gk, rx, timeout).await;
            (gk, ready)
        }))
        .await
    }

    /// Subscribes to the watch of `gk` (replacing any earlier subscription) and returns its
    /// state. The first list after a subscription that had listed
    /// ([`MetadataCache::relist_stale`]) is a relist: its differences from the store are drift.
    fn spawn(&mut self, gk: GroupKind, resource: &Arc<ApiResource>, namespaced: bool) -> watch::Receiver<Sync> {
        let listed = self.kinds.get(&gk).is_some_and(|k| *k.state.borrow() == Sync::Ready);
        // The old subscription goes first: the new one's list must not race its deliveries.
        self.kinds.remove(&gk);
        let (tx, rx) = watch::channel(Sync::Pending);
        let errored = Arc::new(AtomicBool::new(false));
        let sink = Arc::new(Members {
            gk: gk.clone(),
            namespaced,
            store: self.store.clone(),
            state: tx,
            drift: self.drift.clone(),
            touched: self.follow.is_some_and(|follow| follow(&gk)).then(|| self.touched.clone()),
            errored: errored.clone(),
            field_manager: self.field_manager.clone(),
            listed: AtomicBool::new(listed),
            client: self.watches.client().clone(),
            resource: resource.clone(),
        });
        let subscription = self.watches.subscribe(resource, None, super::inventory::PART_OF, &self.id, sink);
        let kind = KindWatch {
            state: rx.clone(),
            _subscription: subscription,
            errored,
            resource: resource.clone(),
            namespaced,
        };
        self.kinds.insert(gk, kind);
        rx
    }

    /// Group-kinds whose watch has had an error since its last complete list: the store may
    /// miss changes of them (a kind stays "ready" while its watch fails, e.g. list RBAC
    /// revoked).
    pub fn stale_kinds(&self) -> Vec<GroupKind> {
        self.kinds.iter().filter(|(_, k)| k.errored.load(Ordering::SeqCst)).map(|(gk, _)| gk.clone()).collect()
    }

    /// Restarts the watch of every [stale kind](MetadataCache::stale_kinds) and waits (at most
    /// `timeout` each) for its fresh complete list, so a prune can trust the store again.
    ///
    /// Errors: [`Error::CacheFailed`] when a fresh list fails or times out: do not prune.
    pub async fn relist_stale(&mut self, timeout: Duration) -> Result<()> {
        for gk in self.stale_kinds() {
            let (resource, namespaced) = {
                let k = &self.kinds[&gk];
                (k.resource.clone(), k.namespaced)
            };
            self.start(gk, &resource, namespaced, timeout).await?;
        }
        Ok(())
    }

    /// Stops watching the group-kinds `keep` rejects and drops their entries: a kind the API
    /// server no longer serves (its group missing from discovery, its version gone) has no
    /// trustworthy members to prune; they stay recorded in the inventory instead.
    pub fn retain_kinds(&mut self, keep: impl Fn(&GroupKind) -> bool) {
        let dropped: Vec<GroupKind> = self.kinds.keys().filter(|gk| !keep(gk)).cloned().collect();
        for gk in &dropped {
            self.kinds.remove(gk);
        }
        if !dropped.is_empty() {
            self.store.lock().expect("cache lock").retain(|k, _| !dropped.contains(&k.gk));
        }
    }

    /// Group-kinds being watched.
    pub fn kinds(&self) -> Vec<GroupKind> {
        self.kinds.keys().cloned().collect()
    }

    /// A copy of the live metadata of every member, by ref.
    pub fn snapshot(&self) -> BTreeMap<ObjectRef, LiveMeta> {
        self.store.lock().expect("cache lock").iter().map(|(k, e)| (k.clone(), e.meta.clone())).collect()
    }

    /// The live metadata of one member, if held.
    pub fn get(&self, object: &ObjectRef) -> Option<LiveMeta> {
        self.store.lock().expect("cache lock").get(object).map(|e| e.meta.clone())
    }

    /// Number of members held.
    pub fn len(&self) -> usize {
        self.store.lock().expect("cache lock").len()
    }

    /// An estimate of the bytes the store holds, for the daemon's `gitward_unit_cache_bytes`:
    /// per member, the inline size of its key and entry ([`ObjectRef`], [`LiveMeta`] and the
    /// resourceVersion of gitward's last write) plus a B-tree slot's share of its node
    /// ([`BTREE_SLOT`]), and the heap bytes of its own strings (uid, resourceVersions) and of
    /// its name. Interned strings that members share (group, kind, namespace, the desired
    /// hash, which the unit's desired objects hold too) are not counted; nor are the watches.
    /// Walks the store under its lock: O(members), about a microsecond per hundred.
    pub fn estimated_bytes(&self) -> usize {
        let inline = std::mem::size_of::<ObjectRef>() + std::mem::size_of::<Entry>() + BTREE_SLOT;
        let store = self.store.lock().expect("cache lock");
        store
            .iter()
            .map(|(object, e)| {
                let own = e.own.as_ref().map_or(0, String::capacity);
                inline + object.name.as_str().len() + e.meta.uid.capacity() + e.meta.resource_version.capacity() + own
            })
            .sum()
    }

    /// True when no member is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records what an apply returned, so that the watch event of this very write is known as
    /// ours and the next plan needs no read.
    ///
    /// The watch may already have delivered a later event (a controller updating status right
    /// after this write, e.g. a CRD becoming Established): then the store keeps that newer
    /// entry. resourceVersions are opaque by API convention; here they are compared as the
    /// etcd revisions they are when both are integers, and otherwise the write wins.
    pub fn record(&self, object: ObjectRef, meta: LiveMeta) {
        self.own_deletes.lock().expect("own lock").remove(&object);
        let mut store = self.store.lock().expect("cache lock");
        let entry = store.entry(object).or_default();
        entry.own = Some(meta.resource_version.clone());
        if !newer(&entry.meta.resource_version, &meta.resource_version) {
            entry.meta = meta;
        }
    }

    /// Stores metadata that gitward read (not wrote), e.g. after a 409 Conflict: the next plan
    /// starts from the live resourceVersion even when the watch lags behind, and the watch
    /// event of the other writer's change still counts as someone else's.
    pub fn observe(&self, object: ObjectRef, meta: LiveMeta) {
        self.store.lock().expect("cache lock").entry(object).or_default().meta = meta;
    }

    /// Forgets a member that gitward deleted.
    pub fn forget(&self, object: &ObjectRef) {
        self.own_deletes.lock().expect("own lock").insert(object.clone());
        self.store.lock().expect("cache lock").remove(object);
    }

    /// True when a watch event reports gitward's own write: its resourceVersion equals the one
    /// gitward's request returned (DESIGN.md decision 9). Such events must not trigger a sync.
    pub fn is_own(&self, drift: &Drift) -> bool {
        if drift.resource_version.is_empty() {
            return self.own_deletes.lock().expect("own lock").contains(&drift.object);
        }
        let store = self.store.lock().expect("cache lock");
        store.get(&drift.object).and_then(|e| e.own.as_deref()) == Some(drift.resource_version.as_str())
    }

    /// Changes by others (resourceVersion differs from the one gitward recorded), as a queue
    /// shared with the watch tasks. Check each event with [`MetadataCache::is_own`] when taken:
    /// the event of gitward's own write can arrive before the write's response is recorded.
    pub fn subscribe(&self) -> DriftQueue {
        self.drift.clone()
    }

    /// The members of the followed kinds ([`MetadataCache::follow_kinds`]) whose
    /// resourceVersion moved since the watch last saw them (a status update, a spec change,
    /// gitward's own write, a new member): shared with the watch tasks. What the unit's task
    /// judges again between syncs.
    pub fn touched(&self) -> Touched {
        self.touched.clone()
    }

    /// Notes in [`MetadataCache::touched`] the members of the kinds `follow` accepts (the
    /// engine's: the kinds that bear health), from the watches started after this call. Call
    /// before the first sync.
    pub fn follow_kinds(&mut self, follow: fn(&GroupKind) -> bool) {
        self.follow = Some(follow);
    }
}

async fn wait_ready(gk: &GroupKind, mut rx: watch::Receiver<Sync>, timeout: Duration) -> Result<()> {
    let failed = |message: String| Error::CacheFailed { group_kind: gk.to_string(), message };
    let last = rx.clone();
    let outcome = tokio::time::timeout(timeout, rx.wait_for(|s| matches!(s, Sync::Ready | Sync::Failed(_)))).await;
    match outcome {
        Err(_) => Err(failed(match &*last.borrow() {
            Sync::Retrying(last) => format!("first list not complete within {timeout:?}; last error: {last}"),
            _ => format!("first list not complete within {timeout:?}"),
        })),
        Ok(Err(_)) => Err(failed("watch task ended".into())),
        Ok(Ok(state)) => match &*state {
            Sync::Failed(message) => Err(failed(message.clone())),
            _ => Ok(()),
        },
    }
}

/// The manager, other than gitward's `own`, of the most recently written `managedFields` entry
/// that is not of the `status` subresource: a controller's status write (the deployment
/// controller's, after every scale) changes nothing git declares, so it is never the other side.
fn latest_manager(meta: &kube::core::ObjectMeta, own: &str) -> Option<String> {
    let entries = meta.managed_fields.as_ref()?;
    entries
        .iter()
        .filter(|e| e.time.is_some() && e.manager.as_deref() != Some(own) && e.subresource.as_deref() != Some("status"))
        .max_by_key(|e| e.time.as_ref().map(|t| t.0))
        .and_then(|e| e.manager.clone())
}

fn object_ref(gk: &GroupKind, namespaced: bool, meta: &kube::core::ObjectMeta) -> ObjectRef {
    let namespace = if namespaced { meta.namespace.clone() } else { None };
    ObjectRef::new(gk.clone(), namespace, meta.name.clone().unwrap_or_default())
}

/// One unit's subscription to a kind's watch: where its events go — the unit's store, the
/// kind's sync state, drift events, and the record of gitward's own writes (events of those
/// are not drift).
struct Members {
    gk: GroupKind,
    namespaced: bool,
    store: Store,
    state: watch::Sender<Sync>,
    drift: DriftQueue,
    /// Where a new resourceVersion of a member is noted, for kinds that bear health.
    touched: Option<Touched>,
    errored: Arc<AtomicBool>,
    field_manager: Arc<str>,
    /// The store already holds a complete list of the kind: the next list is a relist.
    listed: AtomicBool,
    /// To read again the members a relist cannot tell about ([`relist::reread`]).
    client: kube::Client,
    resource: Arc<ApiResource>,
}

impl Sink for Members {
    type Listing = BTreeMap<ObjectRef, Listed>;

    fn list_item(&self, listing: &mut Self::Listing, object: &Meta) {
        let meta = live_meta_of(&object.metadata, &self.field_manager);
        // Named only in drift, which the first list never raises.
        let relisting = self.listed.load(Ordering::SeqCst);
        let manager = relisting.then(|| latest_manager(&object.metadata, &self.field_manager)).flatten();
        listing.insert(object_ref(&self.gk, self.namespaced, &object.metadata), Listed { meta, manager });
    }

    fn listed(&self, listing: Self::Listing) {
        // A relist after the first (a 410 Gone, a restarted API server): what changed while
        // the watch was down is drift like any watch event.
        let again = self.listed.swap(true, Ordering::SeqCst);
        let swapped = relist::swap_in(&mut self.store.lock().expect("cache lock"), &self.gk, listing, again);
        let drifts = swapped.drifts;
        if !drifts.is_empty() {
            tracing::info!(group_kind = %self.gk, drifted = drifts.len(), "relist found changes made while the watch was down");
        }
        for d in drifts {
            self.drift.push(d);
        }
        self.errored.store(false, Ordering::SeqCst);
        self.state.send_replace(Sync::Ready);
        // After the flag is cleared: a failed read sets it again.
        if !swapped.unsure.is_empty() {
            let (store, drift, errored) = (self.store.clone(), self.drift.clone(), self.errored.clone());
            let reread =
                relist::reread(self.client.clone(), (*self.resource).clone(), swapped.unsure, store, drift, errored);
            tokio::spawn(reread);
        }
    }

    fn applied(&self, object: &Meta) {
        let key = object_ref(&self.gk, self.namespaced, &object.metadata);
        let meta = live_meta_of(&object.metadata, &self.field_manager);
        let (previous, ours) = match self.store.lock().expect("cache lock").entry(key.clone()) {
            btree_map::Entry::Occupied(mut held) => {
                let held = held.get_mut();
                // An event older than what is held (delivered after a list that already had
                // it, or after gitward recorded a later write): nothing new.
                if newer(&held.meta.resource_version, &meta.resource_version) {
                    return;
                }
                let ours = held.own.as_deref() == Some(meta.resource_version.as_str());
                (Some(std::mem::replace(&mut held.meta, meta.clone())), ours)
            }
            btree_map::Entry::Vacant(slot) => {
                slot.insert(Entry { meta: meta.clone(), own: None });
                (None, false)
            }
        };
        if let Some(touched) = &self.touched
            && previous.as_ref().is_none_or(|p| p.resource_version != meta.resource_version)
        {
            touched.push(key.clone());
        }
        if is_change(previous.as_ref(), &meta) && !ours {
            let manager = latest_manager(&object.metadata, &self.field_manager);
            self.drift.push(Drift { object: key, resource_version: meta.resource_version, manager });
        }
    }

    fn deleted(&self, object: &Meta) {
        let key = object_ref(&self.gk, self.namespaced, &object.metadata);
        let rv = object.metadata.resource_version.as_deref().unwrap_or_default();
        let mut store = self.store.lock().expect("cache lock");
        // A delete older than what is held: the object was made again since.
        if store.get(&key).is_some_and(|held| newer(&held.meta.resource_version, rv)) {
            return;
        }
        if store.remove(&key).is_some() {
            drop(store);
            self.drift.push(Drift { object: key, resource_version: String::new(), manager: None });
        }
    }

    fn failed(&self, message: &str, permanent: bool) {
        self.errored.store(true, Ordering::SeqCst);
        if matches!(*self.state.borrow(), Sync::Pending | Sync::Retrying(_)) {
            let message = message.to_owned();
            self.state.send_replace(if permanent { Sync::Failed(message) } else { Sync::Retrying(message) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(rv: &str, generation: Option<i64>) -> LiveMeta {
        LiveMeta { resource_version: rv.into(), generation, ..Default::default() }
    }

    fn cm(name: &str) -> ObjectRef {
        ObjectRef { gk: GroupKind::new("", "ConfigMap"), namespace: Some("default".into()), name: name.into() }
    }

    /// Each member adds its inline size, its name and its own strings; nothing is read from
    /// the (unreachable) cluster.
    #[tokio::test]
    async fn the_size_estimate_counts_each_member_and_its_strings() {
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let cache = MetadataCache::new(client, "id");
        assert_eq!(cache.estimated_bytes(), 0);
        let inline = std::mem::size_of::<ObjectRef>() + std::mem::size_of::<Entry>() + BTREE_SLOT;
        let mut web = meta("12345", Some(1));
        web.uid = "0123456789abcdef".into();
        cache.observe(cm("web"), web);
        assert_eq!(cache.estimated_bytes(), inline + "web".len() + 16 + 5);
        // gitward's own write keeps its resourceVersion twice: in the metadata and as its own.
        cache.record(cm("db"), meta("99", None));
        assert_eq!(cache.estimated_bytes(), inline + 3 + 16 + 5 + inline + "db".len() + 2 + 2);
    }

    #[tokio::test]
    async fn the_drift_queue_keeps_the_latest_event_of_every_object_however_many_arrive() {
        let queue = DriftQueue::default();
        // Far more events than the 256 the bounded channel held, several per object.
        for round in 0..3 {
            for i in 0..1000 {
                let rv = format!("{}", round * 1000 + i);
                queue.push(Drift { object: cm(&format!("o-{i}")), resource_version: rv, manager: None });
            }
        }
        let mut taken = queue.next().await;
        taken.sort_by_key(|d| d.resource_version.parse::<u32>().unwrap());
        assert_eq!(taken.len(), 1000);
        assert_eq!(taken[0].resource_version, "2000", "the latest event of o-0");
        assert!(queue.take().is_empty(), "taken once");

        // A reader waiting on an empty queue wakes for the next push.
        let reader = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next().await }
        });
        tokio::task::yield_now().await;
        queue.push(Drift { object: cm("late"), resource_version: "9".into(), manager: Some("kubectl".into()) });
        let woken = tokio::time::timeout(Duration::from_secs(5), reader).await.expect("woken").unwrap();
        assert_eq!(woken.len(), 1);
        assert_eq!(woken[0].object, cm("late"));
    }

    #[test]
    fn a_later_resource_version_is_newer_only_when_both_are_revisions() {
        assert!(newer("12", "9"));
        assert!(!newer("9", "12"));
        assert!(!newer("abc", "9"));
    }

    #[test]
    fn status_updates_are_not_drift_but_spec_changes_are() {
        let before = meta("10", Some(3));
        assert!(!is_change(Some(&before), &meta("11", Some(3))), "status update: same generation");
        assert!(is_change(Some(&before), &meta("12", Some(4))), "spec change: new generation");
    }

    #[test]
    fn a_status_write_is_never_the_other_side_of_a_field_fight() {
        let entry = |manager: &str, second: u32, subresource: Option<&str>| {
            serde_json::json!({"manager": manager, "operation": "Update", "subresource": subresource,
                "time": format!("2026-12-02T07:00:{second:02}Z")})
        };
        let fields = [entry("hpa", 1, Some("scale")), entry("kube-controller-manager", 2, Some("status"))];
        let meta: kube::core::ObjectMeta =
            serde_json::from_value(serde_json::json!({"managedFields": fields})).unwrap();
        assert_eq!(latest_manager(&meta, "gitward").as_deref(), Some("hpa"));
    }

    #[test]
    fn kinds_without_generation_drift_on_any_new_resource_version() {
        assert!(is_change(Some(&meta("10", None)), &meta("11", None)));
        assert!(!is_change(Some(&meta("10", None)), &meta("10", None)));
        assert!(is_change(None, &meta("10", None)));
    }
}
