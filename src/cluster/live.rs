//! Live metadata: what the cache, the apply and the prune keep of one live member.

use super::inventory::{DESIRED_HASH, PRUNE, PRUNE_CASCADE, PRUNE_DISABLED};

/// What the cache holds of one live member: metadata only (DESIGN.md decision 1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LiveMeta {
    /// `metadata.uid`, used as a delete precondition.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.generation`, where the kind has one.
    pub generation: Option<i64>,
    /// The annotation `gitward.dev/desired-hash`, if present (interned: an unchanged member shares
    /// the copy of its desired object's hash).
    pub desired_hash: Option<crate::object::Atom>,
    /// The annotation `gitward.dev/prune: disabled` is set.
    pub prune_disabled: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The annotation `gitward.dev/prune: cascade` is set: a Namespace or CRD member may be
    /// pruned even though objects that are not members would go with it.
    pub prune_cascade: bool,
    /// An ownerReference with `controller: true` is set: the object is some controller's
    /// child (it may have copied its parent's labels), never a member.
    pub controlled: bool,
}

/// Reduces a metadata object to what the cache keeps.
pub fn live_meta(meta: &kube::core::ObjectMeta) -> LiveMeta {
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    LiveMeta {
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        generation: meta.generation,
        desired_hash: annotation(DESIRED_HASH).map(crate::object::Atom::from),
        prune_disabled: annotation(PRUNE).as_deref() == Some(PRUNE_DISABLED),
        deleting: meta.deletion_timestamp.is_some(),
        prune_cascade: annotation(PRUNE).as_deref() == Some(PRUNE_CASCADE),
        controlled: meta.owner_references.iter().flatten().any(|o| o.controller == Some(true)),
    }
}
