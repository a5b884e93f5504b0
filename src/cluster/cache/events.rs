//! Where a kind's watch events reach one unit: each listed, applied or deleted object goes
//! into the store; a change whose resourceVersion is not that of gitward's own write is drift;
//! a new resourceVersion of a followed kind's member is noted as touched. The cache's side of
//! both queues (drift, touched) and the test of an event as gitward's own are here too.

use std::collections::{BTreeMap, btree_map};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::discovery::ApiResource;
use tokio::sync::watch;

use super::{MetadataCache, Store};
use crate::cluster::drift::{Drift, DriftQueue, Entry, Touched, is_change, newer};
use crate::cluster::feed::{Meta, Sink};
use crate::cluster::live::live_meta_of;
use crate::cluster::relist::{self, Listed};
use crate::object::{GroupKind, ObjectRef};

/// State of one group-kind's watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Sync {
    /// The first list has not completed.
    Pending,
    /// The first list failed transiently (the message) and is being retried with backoff.
    Retrying(String),
    /// The store holds a complete list.
    Ready,
    /// The first list failed (RBAC, unknown resource): the message.
    Failed(String),
}

impl MetadataCache {
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
pub(super) struct Members {
    pub(super) gk: GroupKind,
    pub(super) namespaced: bool,
    pub(super) store: Store,
    pub(super) state: watch::Sender<Sync>,
    pub(super) drift: DriftQueue,
    /// Where a new resourceVersion of a member is noted, for kinds that bear health.
    pub(super) touched: Option<Touched>,
    pub(super) errored: Arc<AtomicBool>,
    pub(super) field_manager: Arc<str>,
    /// The store already holds a complete list of the kind: the next list is a relist.
    pub(super) listed: AtomicBool,
    /// To read again the members a relist cannot tell about ([`relist::reread`]).
    pub(super) client: kube::Client,
    pub(super) resource: Arc<ApiResource>,
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
        // A status write while the watch was down (a rollout ending) moves no generation and
        // is no drift: the health of a followed kind's member is read again all the same.
        if let Some(touched) = &self.touched {
            for object in swapped.moved {
                touched.push(object);
            }
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
}
