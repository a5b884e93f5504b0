//! A list of one group-kind swapped into the metadata cache, and what it changed.
//!
//! kube's watcher lists again after a `410 Gone` (routine after an API server restart, or when
//! a watch fell too far behind): `Init`, one `InitApply` per object, `InitDone` — "objects that
//! were previously applied but are not listed … should be assumed to have been deleted"
//! (kube-runtime `watcher::Event::InitDone`). Whatever happened while the watch was down
//! arrives only this way, so the new list is compared with what the store held: a member
//! missing from it was deleted, one whose generation (for kinds without one, resourceVersion)
//! moved was changed by someone, one not held before appeared — each is drift, as its watch
//! event would have been. Entries gitward wrote after the list was taken are kept.
//!
//! kube's `watcher` does not hand out the list's own collection resourceVersion, and the
//! listed objects' versions are no stand-in for it: a member gitward wrote last has a later
//! version than every other listed object, so when it alone was deleted nothing listed is
//! newer than gitward's write of it. Such a member — missing from the list while gitward's
//! write of it is newer than every listed object — may have been written after the list was
//! taken or deleted before it; it is kept and read again ([`reread`]): gone, it was deleted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;

use super::drift::{Drift, DriftQueue, Entry, is_change, newer};
use super::live::LiveMeta;
use crate::object::{GroupKind, ObjectRef};

/// One listed object: its metadata and the likely writer (see [`Drift::manager`]).
#[derive(Debug, Clone)]
pub(super) struct Listed {
    /// What the cache keeps of it.
    pub(super) meta: LiveMeta,
    /// The manager of its most recently written `managedFields` entry, other than gitward.
    pub(super) manager: Option<String>,
}

/// What a relist showed: drift, and the members to read again to know whether they exist.
#[derive(Debug, Default)]
pub(super) struct Swapped {
    /// Changes made while the watch was down.
    pub(super) drifts: Vec<Drift>,
    /// Held members missing from the list, kept because gitward's write of each (the
    /// resourceVersion given) is newer than every listed object: written after the list was
    /// taken, or deleted before it. Empty unless a relist.
    pub(super) unsure: Vec<(ObjectRef, String)>,
    /// Listed members whose resourceVersion moved from the one held, or that were not held
    /// (a status write moves it with no drift): what the health of a followed kind is read
    /// again for ([`crate::cluster::drift::Touched`]). Empty unless a relist.
    pub(super) moved: Vec<ObjectRef>,
}

/// Replaces `store`'s entries of `gk` with the list `fresh` and returns the drift it shows
/// when `relist` is true (a list after the first; the first list only fills the store).
///
/// - A held entry whose resourceVersion is newer than the listed one (gitward wrote it after
///   the list was taken; compared as etcd revisions) stays as held.
/// - A held entry missing from the list is dropped (drift), unless gitward's own write of it
///   is newer than every listed object: then it stays, and on a relist is
///   [unsure](Swapped::unsure) — the newest member deleted alone looks the same as one
///   created after the list was taken.
/// - gitward's own resourceVersions stay known across the swap, so a listed object at the
///   version gitward wrote is no drift.
pub(super) fn swap_in(
    store: &mut BTreeMap<ObjectRef, Entry>,
    gk: &GroupKind,
    fresh: BTreeMap<ObjectRef, Listed>,
    relist: bool,
) -> Swapped {
    let listed_up_to = fresh.values().filter_map(|l| l.meta.resource_version.parse::<u64>().ok()).max();
    let mut held: BTreeMap<ObjectRef, Entry> = BTreeMap::new();
    store.retain(|k, e| {
        if k.gk != *gk {
            return true;
        }
        held.insert(k.clone(), std::mem::take(e));
        false
    });
    let mut drifts = Vec::new();
    let mut unsure = Vec::new();
    let mut moved = Vec::new();
    for (key, listed) in fresh {
        let entry = match held.remove(&key) {
            Some(entry) if newer(&entry.meta.resource_version, &listed.meta.resource_version) => entry,
            Some(entry) => {
                let ours = entry.own.as_deref() == Some(listed.meta.resource_version.as_str());
                if relist && !ours && is_change(Some(&entry.meta), &listed.meta) {
                    drifts.push(drift(&key, &listed));
                }
                if relist && entry.meta.resource_version != listed.meta.resource_version {
                    moved.push(key.clone());
                }
                Entry { meta: listed.meta, own: entry.own }
            }
            None => {
                if relist {
                    drifts.push(drift(&key, &listed));
                    moved.push(key.clone());
                }
                Entry { meta: listed.meta, own: None }
            }
        };
        store.insert(key, entry);
    }
    for (key, entry) in held {
        let written_after = match (entry.own.as_deref(), listed_up_to) {
            (Some(own), Some(up_to)) => newer(own, &up_to.to_string()),
            _ => false,
        };
        if written_after {
            if relist && let Some(own) = entry.own.clone() {
                unsure.push((key.clone(), own));
            }
            store.insert(key, entry);
        } else if relist {
            drifts.push(Drift { object: key, resource_version: String::new(), manager: None });
        }
    }
    compact(store);
    Swapped { drifts, unsure, moved }
}

/// Reads each [unsure](Swapped::unsure) member of `resource` again (a metadata GET each): one
/// the API server no longer has was deleted while the watch was down — dropped from `store`
/// and reported to `drift`, unless gitward wrote it again meanwhile (its own write moved). A
/// member still there was written after the list; the watch reports any later change of it.
/// A failed read marks the kind stale (`errored`), so no prune trusts the store until a
/// fresh list.
pub(super) async fn reread(
    client: kube::Client,
    resource: ApiResource,
    unsure: Vec<(ObjectRef, String)>,
    store: Arc<Mutex<BTreeMap<ObjectRef, Entry>>>,
    drift: DriftQueue,
    errored: Arc<AtomicBool>,
) {
    for (object, own) in unsure {
        let api: Api<DynamicObject> = match &object.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        match api.get_metadata_opt(&object.name).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                let mut held = store.lock().expect("cache lock");
                if held.get(&object).is_some_and(|e| e.own.as_deref() == Some(own.as_str())) {
                    held.remove(&object);
                    drop(held);
                    tracing::info!(object = %object, "relist: a member gitward wrote last is gone");
                    drift.push(Drift { object, resource_version: String::new(), manager: None });
                }
            }
            Err(e) => {
                let message = crate::telemetry::error_chain(&e);
                tracing::warn!(object = %object, error = %message, "relist: reading a member missing from the list failed");
                errored.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// Rebuilds `store` from its entries in key order, which `BTreeMap`'s `FromIterator` packs into
/// full nodes. Filled one insert at a time in key order, as a list is swapped in, a `BTreeMap`
/// splits each full node in two and leaves the left half behind: nodes about half full
/// (ARCHITECTURE.md, "Figures"). O(n) moves, once per list; the store is what a unit holds for
/// every member while at rest.
fn compact(store: &mut BTreeMap<ObjectRef, Entry>) {
    *store = std::mem::take(store).into_iter().collect();
}

fn drift(key: &ObjectRef, listed: &Listed) -> Drift {
    Drift {
        object: key.clone(),
        resource_version: listed.meta.resource_version.clone(),
        manager: listed.manager.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> ObjectRef {
        ObjectRef { gk: GroupKind::new("", "ConfigMap"), namespace: Some("default".into()), name: name.into() }
    }

    fn deployment(name: &str) -> ObjectRef {
        ObjectRef { gk: GroupKind::new("apps", "Deployment"), namespace: Some("default".into()), name: name.into() }
    }

    fn meta(rv: &str, generation: Option<i64>) -> LiveMeta {
        LiveMeta { resource_version: rv.into(), generation, ..Default::default() }
    }

    fn entry(rv: &str, generation: Option<i64>, own: Option<&str>) -> Entry {
        Entry { meta: meta(rv, generation), own: own.map(String::from) }
    }

    fn listed(rv: &str, generation: Option<i64>) -> Listed {
        Listed { meta: meta(rv, generation), manager: Some("kubectl-edit".into()) }
    }

    #[test]
    fn a_relist_reports_members_deleted_edited_and_appearing_and_keeps_later_own_writes() {
        let mut store = BTreeMap::from([
            (cm("deleted"), entry("10", None, Some("10"))),
            (cm("edited"), entry("11", None, Some("11"))),
            (cm("same"), entry("12", None, Some("12"))),
            (cm("written-after"), entry("40", None, Some("40"))),
            (cm("created-after"), entry("41", None, Some("41"))),
            (deployment("status-only"), entry("13", Some(2), Some("13"))),
            (deployment("spec"), entry("14", Some(2), Some("14"))),
        ]);
        let configmaps = BTreeMap::from([
            (cm("edited"), listed("20", None)),
            (cm("same"), listed("12", None)),
            (cm("appeared"), listed("21", None)),
            (cm("written-after"), listed("30", None)),
        ]);
        let Swapped { drifts, unsure, moved } = swap_in(&mut store, &GroupKind::new("", "ConfigMap"), configmaps, true);
        assert_eq!(moved, vec![cm("appeared"), cm("edited")], "listed in name order; `same` did not move");
        let mut seen: Vec<(&str, &str)> =
            drifts.iter().map(|d| (d.object.name.as_str(), d.resource_version.as_str())).collect();
        seen.sort();
        assert_eq!(seen, vec![("appeared", "21"), ("deleted", ""), ("edited", "20")]);
        assert_eq!(store[&cm("written-after")].meta.resource_version, "40", "a later own write stays");
        assert!(store.contains_key(&cm("created-after")), "created after the list was taken");
        assert_eq!(unsure, vec![(cm("created-after"), "41".to_string())], "or deleted before it: read again");
        assert!(!store.contains_key(&cm("deleted")));
        assert_eq!(store[&cm("edited")].own.as_deref(), Some("11"), "own writes stay known");
        assert_eq!(drifts.iter().find(|d| d.object.name == "edited").unwrap().manager.as_deref(), Some("kubectl-edit"));

        assert!(store.contains_key(&deployment("spec")), "another kind's entries are left alone");
        let deployments = BTreeMap::from([
            (deployment("status-only"), listed("22", Some(2))),
            (deployment("spec"), listed("23", Some(3))),
        ]);
        let swapped = swap_in(&mut store, &GroupKind::new("apps", "Deployment"), deployments, true);
        let names: Vec<&str> = swapped.drifts.iter().map(|d| d.object.name.as_str()).collect();
        assert_eq!(names, vec!["spec"], "a status write (same generation) is no drift");
        assert_eq!(swapped.moved, vec![deployment("spec"), deployment("status-only")], "but its health is read again");
    }

    #[test]
    fn the_first_list_fills_the_store_without_drift() {
        let mut store = BTreeMap::from([(cm("recorded"), entry("5", None, Some("5")))]);
        let fresh = BTreeMap::from([(cm("recorded"), listed("5", None)), (cm("other"), listed("6", None))]);
        let swapped = swap_in(&mut store, &GroupKind::new("", "ConfigMap"), fresh, false);
        assert!(swapped.drifts.is_empty() && swapped.unsure.is_empty() && swapped.moved.is_empty());
        assert_eq!(store.len(), 2);
        assert_eq!(store[&cm("recorded")].own.as_deref(), Some("5"));
    }

    /// Only the member gitward wrote last was deleted while the watch was down: nothing listed
    /// is newer than gitward's write of it, as for a member created after the list was taken.
    /// It is not taken for present: it is read again, and so are only such members.
    #[test]
    fn a_relist_without_the_newest_written_member_reads_it_again() {
        let mut store = BTreeMap::from([
            (cm("a"), entry("10", None, Some("10"))),
            (cm("b"), entry("11", None, Some("11"))),
            (cm("newest"), entry("12", None, Some("12"))),
        ]);
        let fresh = BTreeMap::from([(cm("a"), listed("10", None)), (cm("b"), listed("11", None))]);
        let Swapped { drifts, unsure, moved } = swap_in(&mut store, &GroupKind::new("", "ConfigMap"), fresh, true);
        assert!(drifts.is_empty() && moved.is_empty(), "a and b are as gitward wrote them: {drifts:?}");
        assert_eq!(unsure, vec![(cm("newest"), "12".to_string())]);
    }
}
