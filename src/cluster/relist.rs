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

use std::collections::BTreeMap;

use super::cache::{Drift, Entry, is_change, newer};
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

/// Replaces `store`'s entries of `gk` with the list `fresh` and returns the drift it shows
/// when `relist` is true (a list after the first; the first list only fills the store).
///
/// - A held entry whose resourceVersion is newer than the listed one (gitward wrote it after
///   the list was taken; compared as etcd revisions) stays as held.
/// - A held entry missing from the list stays when gitward's own write of it is newer than
///   every listed object (created after the list was taken), else it is dropped: drift.
/// - gitward's own resourceVersions stay known across the swap, so a listed object at the
///   version gitward wrote is no drift.
pub(super) fn swap_in(
    store: &mut BTreeMap<ObjectRef, Entry>,
    gk: &GroupKind,
    fresh: BTreeMap<ObjectRef, Listed>,
    relist: bool,
) -> Vec<Drift> {
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
    for (key, listed) in fresh {
        let entry = match held.remove(&key) {
            Some(entry) if newer(&entry.meta.resource_version, &listed.meta.resource_version) => entry,
            Some(entry) => {
                let ours = entry.own.as_deref() == Some(listed.meta.resource_version.as_str());
                if relist && !ours && is_change(Some(&entry.meta), &listed.meta) {
                    drifts.push(drift(&key, &listed));
                }
                Entry { meta: listed.meta, own: entry.own }
            }
            None => {
                if relist {
                    drifts.push(drift(&key, &listed));
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
            store.insert(key, entry);
        } else if relist {
            drifts.push(Drift { object: key, resource_version: String::new(), manager: None });
        }
    }
    compact(store);
    drifts
}

/// Rebuilds `store` from its entries in key order, which `BTreeMap`'s `FromIterator` packs into
/// full nodes. Filled one insert at a time in key order, as a list is swapped in, a `BTreeMap`
/// splits each full node in two and leaves the left half behind: nodes about half full. A
/// unit's store of 10,000 members held 2.97 MB so, 1.55 MB rebuilt (heaptrack of the daemon at
/// rest, 2026-11-26). O(n) moves, once per list; the store is what a unit holds for every
/// member while at rest.
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
        let drifts = swap_in(&mut store, &GroupKind::new("", "ConfigMap"), configmaps, true);
        let mut seen: Vec<(&str, &str)> =
            drifts.iter().map(|d| (d.object.name.as_str(), d.resource_version.as_str())).collect();
        seen.sort();
        assert_eq!(seen, vec![("appeared", "21"), ("deleted", ""), ("edited", "20")]);
        assert_eq!(store[&cm("written-after")].meta.resource_version, "40", "a later own write stays");
        assert!(store.contains_key(&cm("created-after")), "created after the list was taken");
        assert!(!store.contains_key(&cm("deleted")));
        assert_eq!(store[&cm("edited")].own.as_deref(), Some("11"), "own writes stay known");
        assert_eq!(drifts.iter().find(|d| d.object.name == "edited").unwrap().manager.as_deref(), Some("kubectl-edit"));

        assert!(store.contains_key(&deployment("spec")), "another kind's entries are left alone");
        let deployments = BTreeMap::from([
            (deployment("status-only"), listed("22", Some(2))),
            (deployment("spec"), listed("23", Some(3))),
        ]);
        let drifts = swap_in(&mut store, &GroupKind::new("apps", "Deployment"), deployments, true);
        let names: Vec<&str> = drifts.iter().map(|d| d.object.name.as_str()).collect();
        assert_eq!(names, vec!["spec"], "a status write (same generation) is no drift");
    }

    #[test]
    fn the_first_list_fills_the_store_without_drift() {
        let mut store = BTreeMap::from([(cm("recorded"), entry("5", None, Some("5")))]);
        let fresh = BTreeMap::from([(cm("recorded"), listed("5", None)), (cm("other"), listed("6", None))]);
        assert!(swap_in(&mut store, &GroupKind::new("", "ConfigMap"), fresh, false).is_empty());
        assert_eq!(store.len(), 2);
        assert_eq!(store[&cm("recorded")].own.as_deref(), Some("5"));
    }
}
