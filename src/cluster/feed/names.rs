//! A shared feed's index of every object it watches, by namespace and name, to the value of
//! the feed's label on it: whether an object carries the label, and whose, with no request.
//!
//! The ownership check of a sync asks it which of the objects about to be created already
//! carry another ApplySet's `part-of` ([`super::Watches::labels_of`]). Answered by a
//! label-selected LIST instead, that check scanned every labelled object of the kind in the
//! namespace on the API server, and a fleet of units sharing one namespace paid O(units²) for
//! its first syncs (ARCHITECTURE.md, "Figures"). The index is as fresh as the watch: an
//! object another unit created a moment ago may not be in it yet, as it could have been
//! created just after such a list.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::Meta;

/// `(namespace, name)`; no namespace for a cluster-scoped object.
type Key = (Option<Arc<str>>, Box<str>);

/// The label value of every object as of the feed's last complete list and the watch events
/// since; one entry per object, label values and namespaces interned.
#[derive(Default)]
pub(super) struct Names {
    /// The index in force.
    kept: HashMap<Key, Arc<str>>,
    /// Being built by the list in progress (made `kept` at its end, [`Names::listed`]).
    listing: HashMap<Key, Arc<str>>,
    /// One copy of each namespace and label value the index holds.
    strings: HashSet<Arc<str>>,
}

impl Names {
    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(held) = self.strings.get(s) {
            return held.clone();
        }
        let held: Arc<str> = Arc::from(s);
        self.strings.insert(held.clone());
        held
    }

    fn key(&mut self, object: &Meta) -> Key {
        let namespace = object.metadata.namespace.as_deref().map(|ns| self.intern(ns));
        (namespace, object.metadata.name.as_deref().unwrap_or_default().into())
    }

    /// A list began: the index it builds starts empty.
    pub(super) fn list_begun(&mut self) {
        self.listing.clear();
    }

    /// An object of the list in progress, carrying the label `value`.
    pub(super) fn list_item(&mut self, object: &Meta, value: &str) {
        let key = self.key(object);
        let value = self.intern(value);
        self.listing.insert(key, value);
    }

    /// The list completed: its objects are the index. Strings no entry uses any more go.
    pub(super) fn listed(&mut self) {
        self.kept = std::mem::take(&mut self.listing);
        self.strings.retain(|s| Arc::strong_count(s) > 1);
    }

    /// A watch event: `object` carries `value` now, or was `deleted` (or lost the label).
    pub(super) fn event(&mut self, object: &Meta, value: &str, deleted: bool) {
        let key = self.key(object);
        let namespace = key.0.clone();
        let before = if deleted {
            let before = self.kept.remove(&key);
            drop(key);
            before
        } else {
            let value = self.intern(value);
            self.kept.insert(key, value)
        };
        // A string no entry uses any more goes now: a daemon's watch may never list again.
        for gone in before.into_iter().chain(namespace) {
            if Arc::strong_count(&gone) == 2 {
                self.strings.remove(&gone);
            }
        }
    }

    /// The label value each of `names` (`(namespace, name)`) carries, `None` for one the index
    /// does not hold (it does not carry the label, or does not exist).
    pub(super) fn values(&self, names: &[(Option<&str>, &str)]) -> Vec<Option<String>> {
        names
            .iter()
            .map(|(namespace, name)| {
                let key: Key = (namespace.map(Arc::from), Box::from(*name));
                self.kept.get(&key).map(|v| v.to_string())
            })
            .collect()
    }

    /// Objects in the index.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: Option<&str>, name: &str) -> Meta {
        let mut m: Meta = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}
        }))
        .unwrap();
        m.metadata.namespace = namespace.map(str::to_owned);
        m
    }

    #[test]
    fn the_index_is_the_last_list_and_the_events_since() {
        let mut names = Names::default();
        names.list_begun();
        names.list_item(&meta(Some("a"), "x"), "set-1");
        names.list_item(&meta(Some("a"), "y"), "set-2");
        names.list_item(&meta(None, "z"), "set-1");
        let asked = [(Some("a"), "x"), (Some("a"), "y"), (None, "z"), (Some("b"), "x")];
        assert_eq!(names.values(&asked), vec![None, None, None, None], "not in force before the list ends");
        names.listed();
        let values = names.values(&asked);
        assert_eq!(values, vec![Some("set-1".into()), Some("set-2".into()), Some("set-1".into()), None]);

        names.event(&meta(Some("a"), "x"), "set-3", false);
        names.event(&meta(Some("a"), "y"), "set-2", true);
        names.event(&meta(Some("b"), "x"), "set-1", false);
        let values = names.values(&asked);
        assert_eq!(values, vec![Some("set-3".into()), None, Some("set-1".into()), Some("set-1".into())]);
        assert!(!names.strings.contains("set-2"), "no entry carries set-2 any more");

        // A relist replaces the index whole: what it no longer holds is gone.
        names.list_begun();
        names.list_item(&meta(Some("a"), "x"), "set-3");
        names.listed();
        assert_eq!(names.len(), 1);
        assert_eq!(names.values(&asked)[2], None);
        assert_eq!(names.strings.len(), 2, "only `a` and `set-3` are still used");
    }
}
