//! Live metadata: what the cache, the apply and the prune keep of one live member.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

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
    /// A fingerprint (hash) of gitward's own server-side apply entry in `managedFields`
    /// ([`own_apply`]): it moves when an apply of gitward changed the object (the API server
    /// then stamps the entry's `time`) or another writer took fields from gitward, never with a
    /// status write. `None` when not known (read without the field manager's name, or no
    /// such entry).
    pub own_apply: Option<u64>,
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
        own_apply: None,
    }
}

/// [`live_meta`] with [`LiveMeta::own_apply`] read for field manager `manager`.
pub fn live_meta_of(meta: &kube::core::ObjectMeta, manager: &str) -> LiveMeta {
    LiveMeta { own_apply: own_apply(meta, manager), ..live_meta(meta) }
}

/// The fingerprint of `manager`'s server-side apply entry of `managedFields` (operation
/// `Apply`, on the object, not a subresource): a hash of its apiVersion, time and field set.
/// The API server rewrites that entry only when an apply of `manager` changed the object (its
/// `time`) or another writer took some of its fields (its `fieldsV1`); a write of status or of
/// fields `manager` does not own leaves it as it was (KEP-555; apiserver
/// `managedfields/internal/managedfieldsupdater.go`). `None` without such an entry.
pub fn own_apply(meta: &kube::core::ObjectMeta, manager: &str) -> Option<u64> {
    let entry = meta.managed_fields.as_ref()?.iter().find(|e| {
        e.manager.as_deref() == Some(manager)
            && e.operation.as_deref() == Some("Apply")
            && e.subresource.as_deref().unwrap_or_default().is_empty()
    })?;
    Some(fingerprint(entry))
}

/// The key under which [`compact_apply_entry`] keeps an entry's fingerprint in place of its
/// field set. FieldsV1 keys are `f:`, `k:`, `v:`, `i:` or `.`, so the API server never sends it.
const FINGERPRINT: &str = "gitward.dev/fingerprint";

/// The fingerprint [`own_apply`] gives of one `managedFields` entry, or the one a
/// [`compact_apply_entry`] kept. Three parts: the high 32 bits hash the entry's `time` (see
/// [`applied_at`]); the next 16 count the keys of its field set ([`owned_count`]); the low 16
/// hash its apiVersion and field set. Any part moving moves it.
pub fn fingerprint(entry: &ManagedFieldsEntry) -> u64 {
    let kept = entry.fields_v1.as_ref().and_then(|f| f.0.get(FINGERPRINT)).and_then(serde_json::Value::as_u64);
    if let Some(kept) = kept {
        return kept;
    }
    let time = half(&entry.time.as_ref().map(|t| t.0.as_millisecond()));
    let count = entry.fields_v1.as_ref().map_or(0, |f| keys(&f.0)).min(usize::from(u16::MAX));
    let fields = half(&(entry.api_version.as_deref(), entry.fields_v1.as_ref().map(|f| f.0.to_string())));
    (u64::from(time) << 32) | ((count as u64) << 16) | u64::from(fields & 0xffff)
}

/// The part of a [`fingerprint`] that hashes the entry's `time` alone: the API server stamps
/// that time only when an apply of the entry's manager changed the object, not when the
/// apply changed nothing but the manager's field set (another writer took a field since), nor
/// on a status write (apiserver `managedfields/internal/managedfieldsupdater.go`, `Apply`:
/// the time is set only when the merge returned a changed object). Its precision is the
/// entry's: one second.
pub fn applied_at(fingerprint: u64) -> u32 {
    (fingerprint >> 32) as u32
}

/// The part of a [`fingerprint`] that counts the keys of the entry's field set (at most
/// 65,535): another writer taking a field of the manager's makes it smaller, the manager's
/// apply taking it back makes it larger again.
pub fn owned_count(fingerprint: u64) -> u16 {
    (fingerprint >> 16) as u16
}

/// The keys of a FieldsV1 tree, at every depth.
fn keys(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Object(map) => map.len() + map.values().map(keys).sum::<usize>(),
        _ => 0,
    }
}

/// 32 bits of a SipHash with fixed keys: the same value gives the same half in every process.
fn half(value: &impl std::hash::Hash) -> u32 {
    use std::hash::Hasher;
    let mut hasher = std::hash::DefaultHasher::new();
    value.hash(&mut hasher);
    let h = hasher.finish();
    (h ^ (h >> 32)) as u32
}

/// A server-side apply entry of field manager `manager` whose field set is only `fingerprint`
/// (the [`fingerprint`] of the entry it stands for): how a shared watch gives back an object
/// no subscriber held (`feed::kept`). [`own_apply`] of it is that of the entry it stands for;
/// it has no field set, so nothing else may read it.
pub fn compact_apply_entry(manager: &str, fingerprint: u64) -> ManagedFieldsEntry {
    let fields = serde_json::json!({ FINGERPRINT: fingerprint });
    ManagedFieldsEntry {
        manager: Some(manager.to_owned()),
        operation: Some("Apply".to_owned()),
        fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(fields)),
        ..ManagedFieldsEntry::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(entries: serde_json::Value) -> kube::core::ObjectMeta {
        serde_json::from_value(json!({"name": "web", "managedFields": entries})).unwrap()
    }

    fn entry(manager: &str, operation: &str, time: &str, fields: serde_json::Value) -> serde_json::Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "apps/v1", "time": time,
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    #[test]
    fn the_own_apply_entry_moves_with_gitwards_changes_and_not_with_status_writes() {
        let ours = entry("gitward", "Apply", "2026-11-25T10:00:00Z", json!({"f:spec": {"f:replicas": {}}}));
        let status = |t: &str| {
            let mut e = entry("controller", "Update", t, json!({"f:status": {"f:replicas": {}}}));
            e["subresource"] = json!("status");
            e
        };
        let before = own_apply(&meta(json!([ours, status("2026-11-25T10:00:01Z")])), "gitward");
        assert!(before.is_some());
        let after_status = own_apply(&meta(json!([ours, status("2026-11-25T10:00:09Z")])), "gitward");
        assert_eq!(before, after_status, "a status write leaves gitward's entry as it was");
        let reapplied = entry("gitward", "Apply", "2026-11-25T10:00:05Z", json!({"f:spec": {"f:replicas": {}}}));
        assert_ne!(before, own_apply(&meta(json!([reapplied])), "gitward"), "gitward's apply changed it");
        let after_apply = own_apply(&meta(json!([reapplied])), "gitward").unwrap();
        assert_ne!(applied_at(before.unwrap()), applied_at(after_apply), "the change moved its time");
        let taken = entry("gitward", "Apply", "2026-11-25T10:00:00Z", json!({"f:spec": {}}));
        let after_taken = own_apply(&meta(json!([taken])), "gitward").unwrap();
        assert_ne!(before, Some(after_taken), "another writer took a field");
        assert_eq!(applied_at(before.unwrap()), applied_at(after_taken), "but gitward changed nothing");
        assert_eq!((owned_count(before.unwrap()), owned_count(after_taken)), (2, 1), "f:spec, f:replicas; f:spec");
        assert_eq!(own_apply(&meta(json!([ours])), "other-manager"), None);
        let update = entry("gitward", "Update", "2026-11-25T10:00:00Z", json!({}));
        assert_eq!(own_apply(&meta(json!([update])), "gitward"), None, "update mode's entry is not an apply");
    }
}
