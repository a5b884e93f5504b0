//! The metadata-only cache of a unit's members (DESIGN.md decision 1).
//!
//! One kube `metadata_watcher` per group-kind (metadata requests only: no spec, no status),
//! across all namespaces, for the unit's label `applyset.kubernetes.io/part-of=<id>`: in the
//! daemon one watch per kind shared by every unit of the cluster and fanned out by the label's
//! value ([`super::feed`]), in one-shot commands a watch of the unit's own. Each event is
//! reduced at once to a [`LiveMeta`](super::live::LiveMeta) (uid, resourceVersion,
//! generation, our two annotations); managedFields and everything else is dropped, so memory
//! grows with what gitward manages, not with the cluster.
//!
//! The engine writes the resourceVersion each apply returns straight into the cache
//! ([`MetadataCache::record`]), so the next plan needs no read after write. A watch event whose
//! resourceVersion differs from the one recorded may be someone else's change: it goes into the
//! [`DriftQueue`] of [`MetadataCache::subscribe`] (the daemon's drift trigger), which keeps the
//! latest event per object, so none is lost however long a sync keeps its reader busy. A
//! relist (after a 410 Gone) raises drift for what changed while the watch was down
//! ([`super::relist`]).
//!
//! Its parts, by role: [`store`] holds the members' entries and what gitward's own writes
//! put there; [`kinds`] starts, waits for and restarts the watch of each group-kind; [`events`]
//! is where a kind's watch events reach the unit — the store, drift and the members touched.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::discovery::ApiResource;

use super::drift::{DriftQueue, Entry, Touched};
use super::feed::Watches;
use crate::object::{GroupKind, ObjectRef};
use events::Members;
use kinds::KindWatch;

mod events;
mod kinds;
mod store;

type Store = Arc<Mutex<BTreeMap<ObjectRef, Entry>>>;

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
    /// gitward's field manager, never named as the other side of a drift
    /// ([`Drift::manager`](super::drift::Drift::manager)).
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
}
