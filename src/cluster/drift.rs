//! What the metadata watches tell a unit's task: a member's entry in the store (its live
//! metadata and gitward's last write of it), the drift events of changes made by others, and
//! the two comparisons that decide both (which resourceVersion is newer, which event is a
//! change). Shared by the watches ([`super::cache`]) and the relist ([`super::relist`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::live::LiveMeta;
use crate::object::ObjectRef;

/// One member in the store: its live metadata and the resourceVersion of gitward's last write
/// of it (`None` until gitward writes it). Kept together so that each member's ref is held
/// once, not again in a map of own writes.
#[derive(Debug, Clone, Default)]
pub(super) struct Entry {
    /// The member's live metadata.
    pub(super) meta: LiveMeta,
    /// The resourceVersion of gitward's last write of it.
    pub(super) own: Option<String>,
}

/// A change made by someone other than gitward, seen on the watch: a new generation, or for
/// kinds without one a new resourceVersion (see [`super::cache::MetadataCache::subscribe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The member that changed.
    pub object: ObjectRef,
    /// Its new resourceVersion.
    pub resource_version: String,
    /// The field manager whose `managedFields` entry is the most recent (the likely writer),
    /// to name the other side of a field fight; `None` for deletes or when none has a time.
    pub manager: Option<String>,
}

/// Drift events not yet taken by the unit's task: the latest per object, with a wake-up for a
/// waiting reader. Bounded by the number of members (one entry each), never by time: a bounded
/// channel (256 events) overflowed during every sync that wrote more objects than that — the
/// events of gitward's own writes can arrive before their responses, and the reader is busy
/// syncing — and an overflow cost a full re-send of every object. Keeping only the latest event
/// of an object loses nothing a heal needs: it re-applies the object from git as it is now.
#[derive(Clone, Default)]
pub struct DriftQueue(Arc<DriftInner>);

#[derive(Default)]
struct DriftInner {
    pending: Mutex<HashMap<ObjectRef, Drift>>,
    wake: Notify,
}

impl DriftQueue {
    /// Adds `drift`, replacing an earlier event of the same object, and wakes the reader.
    pub fn push(&self, drift: Drift) {
        self.0.pending.lock().expect("drift lock").insert(drift.object.clone(), drift);
        self.0.wake.notify_one();
    }

    /// Takes every pending event (in no particular order); empty when there is none.
    pub fn take(&self) -> Vec<Drift> {
        let pending = std::mem::take(&mut *self.0.pending.lock().expect("drift lock"));
        pending.into_values().collect()
    }

    /// Waits until an event is pending, then takes them all. Cancel-safe: events stay queued
    /// when the future is dropped before it returns.
    pub async fn next(&self) -> Vec<Drift> {
        loop {
            let taken = self.take();
            if !taken.is_empty() {
                return taken;
            }
            // A push between `take` and here stores a permit: `notified` returns at once.
            self.0.wake.notified().await;
        }
    }
}

/// Members of the kinds the cache was told to follow ([`super::cache::MetadataCache::follow_kinds`]:
/// those with health) whose resourceVersion moved since the watch last saw them, not yet judged
/// again: a controller's status update moves it without a new generation, so this is how a
/// Deployment that fails or recovers between syncs is noticed.
/// A set: one entry per member however many updates arrive, so it is bounded by the members,
/// and it holds refs only, never objects.
#[derive(Clone, Default)]
pub struct Touched(Arc<TouchedInner>);

#[derive(Default)]
struct TouchedInner {
    pending: Mutex<HashSet<ObjectRef>>,
    wake: Notify,
}

impl Touched {
    /// Adds `object` and wakes the reader.
    pub fn push(&self, object: ObjectRef) {
        self.0.pending.lock().expect("touched lock").insert(object);
        self.0.wake.notify_one();
    }

    /// Takes every member touched since the last take (in no particular order).
    pub fn take(&self) -> Vec<ObjectRef> {
        std::mem::take(&mut *self.0.pending.lock().expect("touched lock")).into_iter().collect()
    }

    /// Waits until a member is touched; takes nothing. Cancel-safe.
    pub async fn wait(&self) {
        loop {
            if !self.0.pending.lock().expect("touched lock").is_empty() {
                return;
            }
            // A push between the check and here stores a permit: `notified` returns at once.
            self.0.wake.notified().await;
        }
    }
}

/// True when resourceVersion `a` is known to be later than `b` (both etcd revisions).
pub(crate) fn newer(a: &str, b: &str) -> bool {
    matches!((a.parse::<u64>(), b.parse::<u64>()), (Ok(a), Ok(b)) if a > b)
}

/// Whether a watch event is a change worth a self-heal: for kinds with `metadata.generation`,
/// only a new generation (a spec change; status updates by controllers do not move it); for
/// kinds without (ConfigMaps, Secrets), any new resourceVersion.
pub(super) fn is_change(previous: Option<&LiveMeta>, current: &LiveMeta) -> bool {
    match (previous, current.generation) {
        (None, _) => true,
        (Some(p), Some(generation)) => p.generation != Some(generation),
        (Some(p), None) => p.resource_version != current.resource_version,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::object::GroupKind;

    /// Live metadata at resourceVersion `rv` and `generation`.
    pub(crate) fn meta(rv: &str, generation: Option<i64>) -> LiveMeta {
        LiveMeta { resource_version: rv.into(), generation, ..Default::default() }
    }

    /// ConfigMap `default/<name>`.
    pub(crate) fn cm(name: &str) -> ObjectRef {
        ObjectRef { gk: GroupKind::new("", "ConfigMap"), namespace: Some("default".into()), name: name.into() }
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
    fn kinds_without_generation_drift_on_any_new_resource_version() {
        assert!(is_change(Some(&meta("10", None)), &meta("11", None)));
        assert!(!is_change(Some(&meta("10", None)), &meta("10", None)));
        assert!(is_change(None, &meta("10", None)));
    }
}
