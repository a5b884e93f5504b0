//! The inventory: an ApplySet parent per sync unit, as kubectl implements KEP-3659.
//!
//! The parent (a Secret by default) carries the label `applyset.kubernetes.io/id` and the
//! annotations `tooling` (`gitward/<version>`), `contains-group-kinds` (sorted `Kind.group`
//! list) and `additional-namespaces` (sorted namespaces other than the parent's); each member
//! carries the label `applyset.kubernetes.io/part-of=<id>`. kubectl can read such a set and,
//! seeing a tooling other than its own, refuses to modify it.
//!
//! The parent's `data` also holds the refs of the objects this unit applied (key
//! [`MEMBERS_KEY`], one `Kind.group/namespace/name` a line, sorted): the record that makes an
//! object a member beyond its label (ARCHITECTURE.md, Prune rules). kubectl reads and writes
//! only the parent's labels and annotations, so the set stays kubectl-compatible. Every write
//! after a read carries the resourceVersion read as a precondition.
//!
//! Crash safety (DESIGN.md decision 6): the parent is widened to old ∪ new group-kinds and
//! namespaces before any member is applied, and narrowed to what remains after a prune, so a
//! crash in between never hides a member from the next prune.
//!
//! Its parts, by role: this file names the labels and annotations and derives the ApplySet id;
//! [`contents`] is what the parent records and the line format of its members record;
//! [`parent`] reads the parent and writes it by server-side apply; [`record`] and `chunks` lay
//! a long members record out in pieces and read, write and sweep them; [`watch`] follows the
//! parent between syncs; [`control`] is the user's controls on it.

use base64::Engine;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use sha2::{Digest, Sha256};

use crate::config::{InventoryConfig, InventoryKind};
use crate::object::{GroupKind, ObjectRef};

mod chunks;
mod contents;
pub mod control;
mod parent;
pub mod record;
mod watch;

pub use contents::{Contents, member_line, parse_member_line};
pub use control::Control;
pub use parent::Parent;
pub use record::{CHUNKS_KEY, Chunk, GENERATION, MEMBERS_OF};
pub use watch::{ParentWatch, Recorded, Seen};

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
/// The value of [`PRUNE`] on a Namespace or CRD that permits pruning it although objects that
/// are not members of the unit would be deleted with it.
pub const PRUNE_CASCADE: &str = "cascade";
/// Annotation on members: `enabled` deletes and re-creates the object when the API server
/// rejects an immutable-field change.
pub const RECREATE: &str = "gitward.dev/recreate";
/// Annotation on members: `update` or `server-side-apply`, the apply mode of this one object
/// (overrides the unit's `apply_mode`).
pub const APPLY_MODE: &str = "gitward.dev/apply-mode";
/// Prefix of gitward's own annotations on the parent (the last sync's record and attempt, which
/// the health module writes).
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

/// Key in the parent's `data` of the record of members (refs applied by this unit).
pub const MEMBERS_KEY: &str = "gitward.dev-members";

/// One unit's ApplySet parent.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The parent's ref (`Secret/default/gitward-shop`).
    pub parent: ObjectRef,
    /// The ApplySet id derived from the parent.
    pub id: String,
    resource: ApiResource,
    /// [`InventoryConfig::record_chunk_bytes`]: the longest record kept in the parent, the
    /// longest piece of a longer one.
    chunk_bytes: usize,
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
            chunk_bytes: cfg.record_chunk_bytes,
        }
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), self.parent.namespace.as_deref().unwrap_or_default(), &self.resource)
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
}
