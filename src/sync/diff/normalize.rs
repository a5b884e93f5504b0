//! What a diff compares of an object: its YAML without volatile metadata and without gitward's
//! bookkeeping ([`strip`]), Secret values masked ([`normalize`]), every value of an object built
//! from decrypted content masked ([`mask_decrypted`]).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::cluster::inventory::{
    ADDITIONAL_NAMESPACES, CONTAINS_GROUP_KINDS, DESIRED_HASH, GENERATION, ID, LAST_APPLIED, MEMBERS_OF, PART_OF,
    TOOLING,
};
use crate::cluster::owner::UNIT;
use crate::health::record::{
    LAST_APPLIED_AT, LAST_ATTEMPTED_REF, LAST_ATTEMPTED_REVISION, LAST_ERROR, LAST_FAILED, LAST_PATH_TREE, LAST_RESULT,
    LAST_REVISION, WAITING_FOR, WAITING_SINCE,
};

/// Fields that change on every write and say nothing about what git asks for.
const VOLATILE: [&str; 5] = ["managedFields", "resourceVersion", "generation", "creationTimestamp", "uid"];

/// Strips volatile metadata and masks Secret values, so the YAML shows only meaningful change.
/// `before` is the live object when `v` is the merged one: a value that differs from it is
/// shown as `*** (changed)`; with `None` every value is `***`.
pub fn normalize(v: Value, before: Option<&Value>) -> Value {
    let mut v = strip(v);
    let is_secret = v.get("kind").and_then(Value::as_str) == Some("Secret")
        && v.get("apiVersion").and_then(Value::as_str) == Some("v1");
    // kubectl's client-side apply leaves the whole Secret, data included, in an annotation:
    // `strip` has dropped it with the rest of the bookkeeping.
    if is_secret {
        for field in ["data", "stringData"] {
            let theirs = before.and_then(|o| o.get(field)).and_then(Value::as_object).cloned().unwrap_or_default();
            if let Some(map) = v.get_mut(field).and_then(Value::as_object_mut) {
                for (k, val) in map.iter_mut() {
                    let changed = before.is_some() && theirs.get(k) != Some(val);
                    *val = Value::String(if changed { "*** (changed)".into() } else { "***".into() });
                }
            }
        }
    }
    v
}

/// Labels gitward (or kubectl's ApplySet) keeps for its own bookkeeping: not what git asks for.
const BOOKKEEPING_LABELS: [&str; 4] = [PART_OF, ID, GENERATION, MEMBERS_OF];

/// Annotations gitward (or kubectl) keeps for its own bookkeeping: the desired hash, kubectl's
/// last applied configuration (dropped when gitward takes an object over), the ApplySet
/// parent's annotations and the last sync's record on it.
fn bookkeeping_annotation(key: &str) -> bool {
    [DESIRED_HASH, LAST_APPLIED, TOOLING, CONTAINS_GROUP_KINDS, ADDITIONAL_NAMESPACES, UNIT].contains(&key)
        || [
            LAST_REVISION,
            LAST_APPLIED_AT,
            LAST_RESULT,
            LAST_ATTEMPTED_REVISION,
            LAST_ATTEMPTED_REF,
            LAST_ERROR,
            LAST_FAILED,
            LAST_PATH_TREE,
            WAITING_SINCE,
            WAITING_FOR,
        ]
        .contains(&key)
}

/// The bookkeeping labels and annotations ([`BOOKKEEPING_LABELS`], [`bookkeeping_annotation`])
/// whose value differs between `live` and `merged` (or that one of them lacks), sorted, keys
/// only (a value may be masked).
pub(super) fn bookkeeping_changes(live: &Value, merged: &Value) -> Vec<String> {
    let mut keys = BTreeSet::new();
    for (field, is_bookkeeping) in [
        ("labels", &(|k: &str| BOOKKEEPING_LABELS.contains(&k)) as &dyn Fn(&str) -> bool),
        ("annotations", &bookkeeping_annotation),
    ] {
        let map = |v: &Value| v["metadata"][field].as_object().cloned().unwrap_or_default();
        let (l, m) = (map(live), map(merged));
        for key in l.keys().chain(m.keys()).filter(|k| is_bookkeeping(k)) {
            if l.get(key) != m.get(key) {
                keys.insert(key.clone());
            }
        }
    }
    keys.into_iter().collect()
}

/// `v` without the volatile metadata ([`VOLATILE`]) and without gitward's bookkeeping labels
/// and annotations ([`BOOKKEEPING_LABELS`], [`bookkeeping_annotation`]); a map left empty is
/// dropped.
pub(crate) fn strip(mut v: Value) -> Value {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in VOLATILE {
            meta.remove(key);
        }
        let mut prune = |field: &str, drop: &dyn Fn(&str) -> bool| {
            if let Some(map) = meta.get_mut(field).and_then(Value::as_object_mut) {
                map.retain(|k, _| !drop(k));
                if map.is_empty() {
                    meta.remove(field);
                }
            }
        };
        prune("labels", &|k| BOOKKEEPING_LABELS.contains(&k));
        prune("annotations", &bookkeeping_annotation);
    }
    v
}

/// The fields of an object that are never masked: its kind.
const IDENTITY: [&str; 2] = ["apiVersion", "kind"];

/// The fields of `metadata` whose values are masked: the rest of it (name, namespace) names
/// the object.
const MASKED_METADATA: [&str; 2] = ["labels", "annotations"];

/// Masks every value of `v`, an object built from decrypted content, but its identity (kind,
/// name, namespace): label and annotation values too, keys kept. A value equal to the same
/// place in `before` (the live object, when `v` is the merged one) is `***`, one that differs
/// `*** (changed)`; with `None` every value is `***`. Maps and lists keep their shape, so the
/// diff still shows where a change is.
pub fn mask_decrypted(mut v: Value, before: Option<&Value>) -> Value {
    fn mask(v: &mut Value, before: Option<&Value>, compare: bool) {
        match v {
            Value::Object(map) => {
                for (k, val) in map.iter_mut() {
                    mask(val, before.and_then(|b| b.get(k)), compare);
                }
            }
            Value::Array(items) => {
                for (i, val) in items.iter_mut().enumerate() {
                    mask(val, before.and_then(|b| b.get(i)), compare);
                }
            }
            Value::Null => {}
            leaf => {
                let changed = compare && before != Some(&*leaf);
                *leaf = Value::String(if changed { "*** (changed)".into() } else { "***".into() });
            }
        }
    }
    let compare = before.is_some();
    if let Value::Object(map) = &mut v {
        for (k, val) in map.iter_mut().filter(|(k, _)| !IDENTITY.contains(&k.as_str())) {
            let theirs = before.and_then(|b| b.get(k));
            if k == "metadata" {
                // Labels and annotations may carry the values (kubectl's last-applied
                // configuration does; a decrypted label is the file's own).
                for field in MASKED_METADATA {
                    if let Some(values) = val.get_mut(field) {
                        mask(values, theirs.and_then(|m| m.get(field)), compare);
                    }
                }
            } else {
                mask(val, theirs, compare);
            }
        }
    }
    v
}

/// Registers in the mask set ([`crate::telemetry::mask`]) each string of `live` that stands
/// where `desired` holds a decrypted value and differs from it: the value an earlier revision
/// decrypted, which this process never decrypted, so that no message or line shows it either.
pub fn learn_replaced(desired: &Value, live: &Value) {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => {
            for (k, dv) in d {
                if let Some(lv) = l.get(k) {
                    learn_replaced(dv, lv);
                }
            }
        }
        (Value::Array(d), Value::Array(l)) => d.iter().zip(l).for_each(|(dv, lv)| learn_replaced(dv, lv)),
        (Value::String(d), Value::String(l)) if d != l && crate::telemetry::mask::is_registered(d) => {
            crate::telemetry::mask::register([l]);
        }
        _ => {}
    }
}

/// `v` as YAML (pretty JSON when it cannot be written as YAML).
pub(crate) fn to_yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|_| serde_json::to_string_pretty(v).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_values_are_masked_and_changes_marked() {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "b2xk", "same": "eA=="}});
        let merged = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "bmV3", "same": "eA=="}});
        let after = normalize(merged.clone(), Some(&live));
        assert_eq!(after["data"]["a"], "*** (changed)");
        assert_eq!(after["data"]["same"], "***");
        let text = to_yaml(&after);
        assert!(!text.contains("bmV3") && !text.contains("eA=="), "{text}");
    }

    #[test]
    fn last_applied_annotation_of_a_secret_is_masked() {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"annotations": {LAST_APPLIED: "{\"data\":{\"a\":\"c2VjcmV0\"}}"}}});
        let text = to_yaml(&normalize(live, None));
        assert!(!text.contains("c2VjcmV0"), "{text}");
    }

    #[test]
    fn bookkeeping_labels_and_annotations_are_left_out_and_the_users_kept() {
        let v = json!({"metadata": {"name": "x",
            "labels": {PART_OF: "applyset-a-v1", "app": "web"},
            "annotations": {DESIRED_HASH: "abc", LAST_APPLIED: "{}", "gitward.dev/prune": "disabled"}}});
        let expected = json!({"metadata": {"name": "x", "labels": {"app": "web"},
            "annotations": {"gitward.dev/prune": "disabled"}}});
        assert_eq!(normalize(v, None), expected);
        let parent = json!({"metadata": {"name": "gitward-app", "labels": {ID: "applyset-a-v1", GENERATION: "2"},
            "annotations": {TOOLING: "gitward/0.1.0", LAST_REVISION: "0123456789abcdef", UNIT: "app"}}});
        assert_eq!(normalize(parent, None), json!({"metadata": {"name": "gitward-app"}}));
    }

    #[test]
    fn a_change_of_bookkeeping_alone_is_named_by_its_keys() {
        let live = json!({"metadata": {"labels": {PART_OF: "applyset-old-v1", "app": "web"},
            "annotations": {DESIRED_HASH: "abc"}}});
        let merged = json!({"metadata": {"labels": {PART_OF: "applyset-new-v1", "app": "web"},
            "annotations": {DESIRED_HASH: "abc", LAST_APPLIED: "{}"}}});
        assert_eq!(bookkeeping_changes(&live, &merged), [PART_OF, LAST_APPLIED]);
        assert!(bookkeeping_changes(&live, &live).is_empty());
    }

    #[test]
    fn volatile_metadata_is_dropped() {
        let v = json!({"metadata": {"name": "x", "resourceVersion": "5", "managedFields": [], "uid": "u"}});
        assert_eq!(normalize(v, None), json!({"metadata": {"name": "x"}}));
    }

    #[test]
    fn the_live_value_a_decrypted_one_replaces_is_learned_and_no_other() {
        crate::telemetry::mask::register(["new-tier-4f1c9"]);
        let desired = json!({"metadata": {"labels": {"tier": "new-tier-4f1c9", "app": "db"}}, "data": {"k": "v-same"}});
        let live = json!({"metadata": {"labels": {"tier": "old-tier-4f1c9", "app": "web"}}, "data": {"k": "v-other"}});
        learn_replaced(&desired, &live);
        let text = crate::telemetry::mask::mask("tier: old-tier-4f1c9 app: web k: v-other").into_owned();
        assert_eq!(text, "tier: *** app: web k: v-other");
    }

    #[test]
    fn every_value_of_a_decrypted_object_is_masked_and_a_change_still_shows() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "db", "namespace": "shop", "labels": {"app": "db"}, "resourceVersion": "7"},
            "data": {"password": "old-hunter2", "user": "app", "ports": [5432, 5433]}});
        let merged = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "db", "namespace": "shop", "labels": {"app": "db"}, "resourceVersion": "8"},
            "data": {"password": "new-correcthorse", "user": "app", "ports": [5432, 5434]}});
        let live = strip(live);
        let after = mask_decrypted(strip(merged), Some(&live));
        let before = mask_decrypted(live, None);
        let text = format!("{}{}", to_yaml(&before), to_yaml(&after));
        assert!(!text.contains("hunter2") && !text.contains("correcthorse") && !text.contains("5434"), "{text}");
        assert_eq!(after["data"]["password"], "*** (changed)");
        assert_eq!(after["data"]["user"], "***");
        assert_eq!(after["data"]["ports"], json!(["***", "*** (changed)"]));
        assert_eq!(after["metadata"]["name"], "db", "identity is kept");
        assert_eq!(after["metadata"]["labels"]["app"], "***", "a label's value is masked, its key kept");
    }
}
