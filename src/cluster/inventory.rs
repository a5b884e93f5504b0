//! The inventory: an ApplySet parent per sync unit, as kubectl implements KEP-3659.
//!
//! The parent (a Secret by default) carries the label `applyset.kubernetes.io/id` and the
//! annotations `tooling` (`gitward/<version>`), `contains-group-kinds` (sorted `Kind.group`
//! list) and `additional-namespaces` (sorted namespaces other than the parent's); each member
//! carries the label `applyset.kubernetes.io/part-of=<id>`. kubectl can read such a set and,
//! seeing a tooling other than its own, refuses to modify it.
//!
//! Crash safety (DESIGN.md decision 6): the parent is widened to old ∪ new group-kinds and
//! namespaces before any member is applied, and narrowed to what remains after a prune, so a
//! crash in between never hides a member from the next prune.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Error, Result};
use crate::config::{InventoryConfig, InventoryKind};
use crate::object::{GroupKind, ObjectRef};

/// Label on every member: the id of the ApplySet it belongs to.
pub const PART_OF: &str = "applyset.kubernetes.io/part-of";
/// Label on the parent: the ApplySet id.
pub const ID: &str = "applyset.kubernetes.io/id";
/// Annotation on the parent: `<tool>/<semver>` of the tool that manages the set.
pub const TOOLING: &str = "applyset.kubernetes.io/tooling";
/// Annotation on the parent: comma-separated sorted `Kind.group` of the members.
pub const CONTAINS_GROUP_KINDS: &str = "applyset.kubernetes.io/contains-group-kinds";
/// Annotation on the parent: comma-separated sorted namespaces of members, other than the parent's.
pub const ADDITIONAL_NAMESPACES: &str = "applyset.kubernetes.io/additional-namespaces";
/// Annotation on members: the desired hash (DESIGN.md, Words).
pub const DESIRED_HASH: &str = "gitward.dev/desired-hash";
/// Annotation on members: `disabled` keeps the object when it leaves git.
pub const PRUNE: &str = "gitward.dev/prune";
/// The value of [`PRUNE`] that keeps an object.
pub const PRUNE_DISABLED: &str = "disabled";
/// Annotation on members: `enabled` deletes and re-creates the object when the API server
/// rejects an immutable-field change.
pub const RECREATE: &str = "gitward.dev/recreate";
/// Annotation on members: `update` or `server-side-apply`, the apply mode of this one object
/// (overrides the unit's `apply_mode`).
pub const APPLY_MODE: &str = "gitward.dev/apply-mode";
/// Prefix of gitward's own annotations; those on the parent are returned by
/// [`Inventory::read_annotated`].
pub const GITWARD_PREFIX: &str = "gitward.dev/";
/// Annotation that `kubectl apply` (client-side) keeps its last applied configuration in;
/// dropped when gitward takes such an object over.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The ApplySet id for a parent, as KEP-3659 and kubectl define it:
/// `applyset-<base64url(sha256("<name>.<namespace>.<kind>.<group>"))>-v1`, unpadded.
pub fn applyset_id(name: &str, namespace: &str, kind: &str, group: &str) -> String {
    let digest = Sha256::digest(format!("{name}.{namespace}.{kind}.{group}").as_bytes());
    format!("applyset-{}-v1", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest))
}

/// What the parent records: the group-kinds and namespaces that may hold members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Group-kinds of members.
    pub group_kinds: BTreeSet<GroupKind>,
    /// Namespaces of namespaced members, including the parent's own.
    pub namespaces: BTreeSet<String>,
}

impl Contents {
    /// The contents that hold `objects`.
    pub fn of<'a>(objects: impl IntoIterator<Item = &'a ObjectRef>) -> Self {
        let mut c = Self::default();
        for o in objects {
            c.group_kinds.insert(o.gk.clone());
            if let Some(ns) = &o.namespace {
                c.namespaces.insert(ns.clone());
            }
        }
        c
    }

    /// Old ∪ new.
    pub fn union(&self, other: &Contents) -> Contents {
        Contents {
            group_kinds: self.group_kinds.union(&other.group_kinds).cloned().collect(),
            namespaces: self.namespaces.union(&other.namespaces).cloned().collect(),
        }
    }
}

/// One unit's ApplySet parent.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The parent's ref (`Secret/default/gitward-shop`).
    pub parent: ObjectRef,
    /// The ApplySet id derived from the parent.
    pub id: String,
    resource: ApiResource,
}

impl Inventory {
    /// The inventory the config names.
    pub fn new(cfg: &InventoryConfig) -> Self {
        let kind = match cfg.kind {
            InventoryKind::Secret => "Secret",
            InventoryKind::ConfigMap => "ConfigMap",
        };
        let gvk = kube::api::GroupVersionKind::gvk("", "v1", kind);
        Self {
            parent: ObjectRef::new(GroupKind::from_api_version("v1", kind), Some(cfg.namespace.clone()), &cfg.name),
            id: applyset_id(&cfg.name, &cfg.namespace, kind, ""),
            resource: ApiResource::from_gvk(&gvk),
        }
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), self.parent.namespace.as_deref().unwrap_or_default(), &self.resource)
    }

    /// Reads the parent's contents (one metadata GET); `None` when it does not exist yet.
    ///
    /// Errors: [`Error::InventoryForeign`] when the parent is another tool's ApplySet or has
    /// another id; [`Error::InventoryFailed`] on API failure.
    pub async fn read(&self, client: &kube::Client) -> Result<Option<Contents>> {
        Ok(self.read_annotated(client).await?.map(|(contents, _)| contents))
    }

    /// [`Inventory::read`], also returning the parent's annotations under `gitward.dev/` (the
    /// last sync's record, [`crate::health::record`]). Same request, same errors.
    pub async fn read_annotated(&self, client: &kube::Client) -> Result<Option<(Contents, BTreeMap<String, String>)>> {
        let parent = self.parent.to_string();
        let meta = self
            .api(client)
            .get_metadata_opt(&self.parent.name)
            .await
            .map_err(|source| Error::InventoryFailed { parent: parent.clone(), source })?;
        let Some(meta) = meta else { return Ok(None) };
        let labels = meta.metadata.labels.unwrap_or_default();
        let annotations = meta.metadata.annotations.unwrap_or_default();
        if let Some(tooling) = annotations.get(TOOLING)
            && !tooling.starts_with("gitward/")
        {
            return Err(Error::InventoryForeign { parent, message: format!("managed by {tooling}, not gitward") });
        }
        if let Some(id) = labels.get(ID)
            && id != &self.id
        {
            return Err(Error::InventoryForeign {
                parent,
                message: format!("has ApplySet id {id}, expected {}", self.id),
            });
        }
        let split = |key: &str| -> Vec<String> {
            annotations
                .get(key)
                .map(|v| v.split(',').filter(|s| !s.is_empty()).map(String::from).collect())
                .unwrap_or_default()
        };
        let mut contents = Contents {
            group_kinds: split(CONTAINS_GROUP_KINDS).iter().map(|s| GroupKind::parse_applyset_string(s)).collect(),
            namespaces: split(ADDITIONAL_NAMESPACES).into_iter().collect(),
        };
        contents.namespaces.extend(self.parent.namespace.clone());
        let ours = annotations.into_iter().filter(|(k, _)| k.starts_with(GITWARD_PREFIX)).collect();
        Ok(Some((contents, ours)))
    }

    /// Writes the parent with these contents by server-side apply (one request), plus `extra`
    /// annotations (the last sync's record; they must be sent with every write, or server-side
    /// apply removes them as no longer declared by this field manager).
    ///
    /// Errors: [`Error::InventoryFailed`] (for example the parent's namespace does not exist).
    pub async fn write(
        &self,
        client: &kube::Client,
        contents: &Contents,
        field_manager: &str,
        extra: &BTreeMap<String, String>,
    ) -> Result<()> {
        let own_ns = self.parent.namespace.clone().unwrap_or_default();
        let gks: Vec<String> = contents.group_kinds.iter().map(GroupKind::to_applyset_string).collect();
        let mut gks = gks;
        gks.sort();
        let namespaces: Vec<&str> = contents.namespaces.iter().filter(|n| **n != own_ns).map(String::as_str).collect();
        let body = json!({
            "apiVersion": "v1",
            "kind": self.parent.gk.kind,
            "metadata": {
                "name": self.parent.name,
                "namespace": own_ns,
                "labels": { ID: self.id },
                "annotations": {
                    TOOLING: crate::TOOLING,
                    CONTAINS_GROUP_KINDS: gks.join(","),
                    ADDITIONAL_NAMESPACES: namespaces.join(","),
                },
            },
        });
        let mut body = body;
        for (k, v) in extra {
            body["metadata"]["annotations"][k] = v.clone().into();
        }
        let params = PatchParams::apply(field_manager).force();
        self.api(client)
            .patch_metadata(&self.parent.name, &params, &Patch::Apply(&body))
            .await
            .map_err(|source| Error::InventoryFailed { parent: self.parent.to_string(), source })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applyset_id_follows_kep_3659_format() {
        let id = applyset_id("gitward-shop", "default", "Secret", "");
        assert!(id.starts_with("applyset-") && id.ends_with("-v1"), "{id}");
        // 32 bytes of sha256 → 43 unpadded base64url characters.
        assert_eq!(id.len(), "applyset-".len() + 43 + "-v1".len());
        assert!(!id.contains('=') && !id.contains('+') && !id.contains('/'));
        assert_ne!(id, applyset_id("gitward-shop", "other", "Secret", ""));
    }

    #[test]
    fn contents_union_widens_kinds_and_namespaces() {
        let a = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("a".into()), "x");
        let b = ObjectRef::new(GroupKind::from_api_version("apps/v1", "Deployment"), Some("b".into()), "y");
        let u = Contents::of([&a]).union(&Contents::of([&b]));
        assert_eq!(u.group_kinds.len(), 2);
        assert_eq!(u.namespaces, BTreeSet::from(["a".to_string(), "b".to_string()]));
    }
}
