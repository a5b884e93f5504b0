//! What a shared member watch keeps of an object no subscriber holds: the metadata a
//! subscriber that later claims it reads ([`crate::cluster::live::live_meta_of`], the object's
//! identity), nothing else, in a struct of its own ([`Member`]).
//!
//! A shared watch keeps the members of every ApplySet in the cluster (`Unclaimed`), whoever
//! owns them — kubectl `--applyset`, another team's gitward, any ApplySet tool — so that a unit
//! added by a reload gets its objects with no list of its own. Held whole, an object's
//! metadata is mostly what no subscriber reads: every field manager's field set, other tools'
//! annotations (kubectl's last-applied copy of the whole object), labels: several KiB an
//! object (`benches/RESULTS.md`, "Memory and push latency at 10,000 objects", for the figures). Kept here: name and namespace (the
//! key), uid, resourceVersion, generation, whether it is being deleted, whether a controller
//! owns it, gitward's annotations that [`LiveMeta`] reads, and each server-side apply entry of
//! `managedFields` as its field manager and fingerprint
//! ([`crate::cluster::live::fingerprint`]); [`Kept::meta`] rebuilds an object from them that
//! gives the same [`crate::cluster::live::own_apply`] for any field manager.
//!
//! [`LiveMeta`]: crate::cluster::live::LiveMeta

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference, Time};
use kube::core::ObjectMeta;

use super::Meta;
use crate::cluster::inventory::{DESIRED_HASH, PART_OF, PRUNE};
use crate::cluster::live::{compact_apply_entry, fingerprint};

/// `(namespace, name)` of a kept object; no namespace for a cluster-scoped one.
pub(super) type Key = (Option<Box<str>>, Box<str>);

/// What a shared feed keeps of one unclaimed object.
pub(super) enum Kept {
    /// An object of a parent feed, whole.
    Whole(Box<Meta>),
    /// A member, compacted to what [`crate::cluster::live::live_meta_of`] reads.
    Member(Member),
}

/// A member no subscriber holds, as a shared member feed keeps it: about 150 bytes beside its
/// strings (name and namespace are the key's), where the same object held as [`Meta`] took
/// several KiB even with its field sets fingerprinted — `ObjectMeta` is some 400 bytes of
/// options, and each of its maps allocates a whole B-tree node for one entry.
pub(super) struct Member {
    uid: Box<str>,
    resource_version: Box<str>,
    generation: Option<i64>,
    deleting: bool,
    /// An ownerReference with `controller: true` is set.
    controlled: bool,
    desired_hash: Option<Box<str>>,
    prune: Option<Box<str>>,
    /// Each server-side apply entry on the object (not a subresource): its field manager
    /// and the fingerprint of its apiVersion, time and field set.
    applies: Box<[(Box<str>, u64)]>,
}

/// `object` as an unclaimed object of the feed of label `label` is kept: compacted for a
/// member feed ([`PART_OF`]), whole for any other (an ApplySet parent's feed, whose
/// subscribers read its annotations: few objects).
pub(super) fn kept(object: Meta, label: &str) -> Kept {
    if label != PART_OF {
        return Kept::Whole(Box::new(object));
    }
    let metadata = object.metadata;
    let annotation = |key: &str| metadata.annotations.as_ref().and_then(|a| a.get(key)).map(|v| v.as_str().into());
    let applies = metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| e.operation.as_deref() == Some("Apply") && e.subresource.as_deref().unwrap_or_default().is_empty())
        .map(|e| (e.manager.as_deref().unwrap_or_default().into(), fingerprint(e)))
        .collect();
    Kept::Member(Member {
        uid: metadata.uid.as_deref().unwrap_or_default().into(),
        resource_version: metadata.resource_version.as_deref().unwrap_or_default().into(),
        generation: metadata.generation,
        deleting: metadata.deletion_timestamp.is_some(),
        controlled: metadata.owner_references.iter().flatten().any(|o| o.controller == Some(true)),
        desired_hash: annotation(DESIRED_HASH),
        prune: annotation(PRUNE),
        applies,
    })
}

/// The key `object` is kept under.
pub(super) fn key_of(object: &Meta) -> Key {
    (object.metadata.namespace.as_deref().map(Into::into), object.metadata.name.as_deref().unwrap_or_default().into())
}

impl Kept {
    /// The object as a subscriber reads it: whole, or rebuilt from what was kept — with the
    /// route's label, the annotations, the controller mark and the fingerprinted apply entries
    /// that [`crate::cluster::live::live_meta_of`] reads, the same [`crate::cluster::live::LiveMeta`]
    /// for any field manager as the object it was kept from.
    pub(super) fn meta(&self, (namespace, name): &Key, value: &str) -> Cow<'_, Meta> {
        let member = match self {
            Kept::Whole(object) => return Cow::Borrowed(object),
            Kept::Member(member) => member,
        };
        let annotations: BTreeMap<String, String> = [(DESIRED_HASH, &member.desired_hash), (PRUNE, &member.prune)]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v.as_deref()?.to_owned())))
            .collect();
        let controller = OwnerReference { controller: Some(true), ..OwnerReference::default() };
        let applies: Vec<ManagedFieldsEntry> =
            member.applies.iter().map(|(manager, fingerprint)| compact_apply_entry(manager, *fingerprint)).collect();
        let metadata = ObjectMeta {
            name: Some(name.to_string()),
            namespace: namespace.as_deref().map(str::to_owned),
            uid: Some(member.uid.to_string()),
            resource_version: Some(member.resource_version.to_string()),
            generation: member.generation,
            deletion_timestamp: member.deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
            annotations: (!annotations.is_empty()).then_some(annotations),
            labels: Some(BTreeMap::from([(PART_OF.to_owned(), value.to_owned())])),
            owner_references: member.controlled.then(|| vec![controller]),
            managed_fields: (!applies.is_empty()).then_some(applies),
            ..ObjectMeta::default()
        };
        Cow::Owned(Meta { types: None, metadata, _phantom: Default::default() })
    }
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

    /// The bytes a kept member takes: its own size and its strings' (allocator rounding aside).
    fn bytes(member: &Member) -> usize {
        let strings =
            [Some(&member.uid), Some(&member.resource_version), member.desired_hash.as_ref(), member.prune.as_ref()];
        std::mem::size_of::<Member>()
            + strings.into_iter().flatten().map(|s| s.len()).sum::<usize>()
            + member.applies.iter().map(|(m, _)| m.len() + std::mem::size_of::<(Box<str>, u64)>()).sum::<usize>()
    }

    #[test]
    fn a_kept_member_reads_as_the_whole_one_for_every_field_manager_and_is_small() {
        let annotations = json!({DESIRED_HASH: "h1", PRUNE: "disabled",
            "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(4096)});
        let whole = member(annotations);
        let key = key_of(&whole);
        let Kept::Member(compact) = kept(whole.clone(), PART_OF) else { panic!("a member is compacted") };
        assert!(bytes(&compact) < 400, "{} bytes", bytes(&compact));
        let kept = Kept::Member(compact);
        let read = kept.meta(&key, "applyset-x-v1");
        for manager in ["gitward", "team-tool", "kubectl", "nobody"] {
            assert_eq!(live_meta_of(&read.metadata, manager), live_meta_of(&whole.metadata, manager), "{manager}");
        }
        assert_eq!(read.metadata.name, whole.metadata.name);
        assert_eq!(read.metadata.namespace, whole.metadata.namespace);
        let labels = read.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels,
            BTreeMap::from([(PART_OF.to_owned(), "applyset-x-v1".to_owned())]),
            "the route's label only"
        );
    }

    #[test]
    fn a_kept_member_keeps_its_deletion_mark_and_a_cluster_scoped_one_has_no_namespace() {
        let mut whole = member(json!({}));
        whole.metadata.namespace = None;
        whole.metadata.owner_references = None;
        whole.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        let key = key_of(&whole);
        let read = kept(whole.clone(), PART_OF).meta(&key, "v").into_owned();
        assert_eq!(read.metadata.namespace, None);
        let (live, was) = (live_meta_of(&read.metadata, "gitward"), live_meta_of(&whole.metadata, "gitward"));
        assert_eq!(live, was);
        assert!(live.deleting && !live.controlled);
    }

    #[test]
    fn a_parent_feeds_objects_are_kept_whole() {
        let whole = member(json!({"applyset.kubernetes.io/tooling": "gitward/v1"}));
        let json = |m: &Meta| serde_json::to_value(m).unwrap();
        let key = key_of(&whole);
        assert_eq!(json(&kept(whole.clone(), "applyset.kubernetes.io/id").meta(&key, "x")), json(&whole));
    }
}
