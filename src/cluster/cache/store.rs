//! The store of a unit's members: each member's live metadata and gitward's last write of it
//! ([`Entry`]), read by the plan and the prune, written by what gitward's own requests return
//! or read, and estimated in bytes for the daemon's metrics.

use std::collections::BTreeMap;

use super::MetadataCache;
use crate::cluster::drift::{Entry, newer};
use crate::cluster::live::LiveMeta;
use crate::object::ObjectRef;

/// The bytes of a B-tree node's header and edge pointers each entry is charged with, for
/// [`MetadataCache::estimated_bytes`]: a node holds up to 11 entries beside a parent pointer,
/// lengths and (internal nodes) 12 child pointers, about 16 bytes per entry when half full.
const BTREE_SLOT: usize = 16;

impl MetadataCache {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::drift::tests::{cm, meta};

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
}
