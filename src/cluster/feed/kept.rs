//! What a shared member watch keeps of an object no subscriber holds: the metadata a
//! subscriber that later claims it reads ([`crate::cluster::live::live_meta_of`], the object's
//! identity), nothing else.
//!
//! A shared watch keeps the members of every ApplySet in the cluster (`Unclaimed`), whoever
//! owns them — kubectl `--applyset`, another team's gitward, any ApplySet tool — so that a unit
//! added by a reload gets its objects with no list of its own. Held whole, an object's
//! metadata is mostly what no subscriber reads: every field manager's field set, other tools'
//! annotations (kubectl's last-applied copy of the whole object), labels: several KiB an
//! object (README, "Memory at rest", for the figures). Kept here: name, namespace, uid, resourceVersion, generation, the
//! deletion mark, controller ownerReferences, gitward's annotations that [`LiveMeta`] reads,
//! and each server-side apply entry of `managedFields` with its field set replaced by its
//! fingerprint ([`crate::cluster::live::compact_apply_entry`]), which gives the same
//! [`crate::cluster::live::own_apply`] for any field manager.
//!
//! [`LiveMeta`]: crate::cluster::live::LiveMeta

use std::collections::BTreeMap;

use kube::core::ObjectMeta;

use super::Meta;
use crate::cluster::inventory::{DESIRED_HASH, PART_OF, PRUNE};
use crate::cluster::live::compact_apply_entry;

/// `object` as an unclaimed object of the feed of label `label` is kept: compacted for a
/// member feed ([`PART_OF`]), whole for any other (an ApplySet parent's feed, whose
/// subscribers read its annotations: few objects).
pub(super) fn kept(object: Meta, label: &str) -> Meta {
    if label != PART_OF {
        return object;
    }
    let Meta { types, metadata, .. } = object;
    let annotations: BTreeMap<String, String> =
        metadata.annotations.unwrap_or_default().into_iter().filter(|(k, _)| k == DESIRED_HASH || k == PRUNE).collect();
    let labels: BTreeMap<String, String> =
        metadata.labels.unwrap_or_default().into_iter().filter(|(k, _)| k == PART_OF).collect();
    let owners: Vec<_> =
        metadata.owner_references.unwrap_or_default().into_iter().filter(|o| o.controller == Some(true)).collect();
    let applies: Vec<_> = metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .filter(|e| e.operation.as_deref() == Some("Apply") && e.subresource.as_deref().unwrap_or_default().is_empty())
        .map(compact_apply_entry)
        .collect();
    let metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        generation: metadata.generation,
        deletion_timestamp: metadata.deletion_timestamp,
        annotations: (!annotations.is_empty()).then_some(annotations),
        labels: (!labels.is_empty()).then_some(labels),
        owner_references: (!owners.is_empty()).then_some(owners),
        managed_fields: (!applies.is_empty()).then_some(applies),
        ..ObjectMeta::default()
    };
    Meta { types, metadata, _phantom: Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::live::live_meta_of;
    use serde_json::json;

    fn member(annotations: serde_json::Value) -> Meta {
        let metadata = json!({
            "name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "42", "generation": 3,
            "labels": {PART_OF: "applyset-x-v1", "app": "web", "team": "shop"},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "o", "controller": true},
                                {"apiVersion": "v1", "kind": "Y", "name": "y", "uid": "p"}],
            "managedFields": [
                {"manager": "gitward", "operation": "Apply", "apiVersion": "v1", "time": "2026-12-01T10:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}}},
                {"manager": "team-tool", "operation": "Apply", "apiVersion": "v1", "time": "2026-12-01T11:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:c": {}}}},
                {"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2026-12-01T12:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {}}}}
            ]
        });
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})).unwrap()
    }

    #[test]
    fn a_kept_member_reads_as_the_whole_one_for_every_field_manager_and_is_smaller() {
        let annotations = json!({DESIRED_HASH: "h1", PRUNE: "disabled",
            "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(4096)});
        let whole = member(annotations);
        let kept = kept(whole.clone(), PART_OF);
        for manager in ["gitward", "team-tool", "kubectl", "nobody"] {
            assert_eq!(live_meta_of(&kept.metadata, manager), live_meta_of(&whole.metadata, manager), "{manager}");
        }
        assert_eq!(kept.metadata.name, whole.metadata.name);
        assert_eq!(kept.metadata.namespace, whole.metadata.namespace);
        assert_eq!(kept.metadata.labels.as_ref().map(|l| l.len()), Some(1), "the route's label only");
        let size = |m: &Meta| serde_json::to_string(m).unwrap().len();
        assert!(size(&kept) * 8 < size(&whole), "{} of {} bytes", size(&kept), size(&whole));
    }

    #[test]
    fn a_parent_feeds_objects_are_kept_whole() {
        let whole = member(json!({"applyset.kubernetes.io/tooling": "gitward/v1"}));
        let json = |m: &Meta| serde_json::to_value(m).unwrap();
        assert_eq!(json(&kept(whole.clone(), "applyset.kubernetes.io/id")), json(&whole));
    }
}
