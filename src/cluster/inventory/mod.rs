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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::feed::{Meta, Sink, Subscription, Watches};
use super::{Error, Result, api_message, is_status};
pub use record::{CHUNKS_KEY, Chunk, GENERATION, MEMBERS_OF};

mod chunks;
pub mod control;
pub mod record;
use crate::config::{InventoryConfig, InventoryKind};
use crate::object::{GroupKind, ObjectRef};
pub use control::Control;

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

/// What the parent records: the group-kinds and namespaces that may hold members, and the
/// refs of the objects this unit applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Group-kinds of members.
    pub group_kinds: BTreeSet<GroupKind>,
    /// Namespaces of namespaced members, including the parent's own.
    pub namespaces: BTreeSet<crate::object::Atom>,
    /// Refs of the objects this unit applied (and has not pruned): only these may be pruned.
    pub members: BTreeSet<ObjectRef>,
}

/// The parent as read or last written: its contents and the resourceVersion to send as the
/// precondition of the next write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    /// What it records.
    pub contents: Contents,
    /// Its `metadata.resourceVersion`.
    pub resource_version: String,
    /// Its annotations under [`GITWARD_PREFIX`]: the last sync's record and attempt (not the
    /// controls a command sets, [`control::is_control`]).
    pub annotations: BTreeMap<String, String>,
    /// The pieces of its members record it lists (empty when the record is inline), so a write
    /// creates only the pieces not listed yet.
    pub chunks: Vec<Chunk>,
    /// Its `metadata.uid`, the owner of its pieces; `None` from an answer that had none.
    pub uid: Option<String>,
    /// How many times gitward switched its members record to a new listing of pieces (label
    /// [`GENERATION`], 0 when absent): the pieces of the next write are written for one more,
    /// and a sweep after this write deletes no piece written for a later one.
    pub generation: u64,
}

/// One ref as a line of the members record: `Kind.group/namespace/name` (namespace empty for
/// cluster-scoped objects).
pub fn member_line(o: &ObjectRef) -> String {
    format!("{}/{}/{}", o.gk.to_applyset_string(), o.namespace.as_deref().unwrap_or_default(), o.name)
}

/// Parses a line of the members record; `None` for a malformed line.
pub fn parse_member_line(line: &str) -> Option<ObjectRef> {
    let mut parts = line.splitn(3, '/');
    let (gk, ns, name) = (parts.next()?, parts.next()?, parts.next()?);
    if gk.is_empty() || name.is_empty() {
        return None;
    }
    let ns = (!ns.is_empty()).then(|| ns.to_string());
    Some(ObjectRef::new(GroupKind::parse_applyset_string(gk), ns, name))
}

impl Contents {
    /// The contents that hold `objects`.
    pub fn of<'a>(objects: impl IntoIterator<Item = &'a ObjectRef>) -> Self {
        let mut c = Self::default();
        for o in objects {
            c.members.insert(o.clone());
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
            members: self.members.union(&other.members).cloned().collect(),
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

    /// Reads the parent (one GET: its `data` holds the members record, or lists the pieces
    /// that hold it, read too); `None` when it does not exist yet.
    ///
    /// Errors: [`Error::InventoryForeign`] when the parent is another tool's ApplySet or has
    /// another id; [`Error::InventoryFailed`] on API failure, or when a piece the parent lists
    /// is missing or altered (twice in a row: a piece deleted by a concurrent write is read
    /// again from the parent that replaced it).
    pub async fn read(&self, client: &kube::Client) -> Result<Option<Parent>> {
        match self.read_once(client).await {
            Err(Error::InventoryFailed { .. }) => self.read_once(client).await,
            other => other,
        }
    }

    async fn read_once(&self, client: &kube::Client) -> Result<Option<Parent>> {
        let parent = self.parent.to_string();
        let object = self.api(client).get_opt(&self.parent.name).await.map_err(|e| Error::InventoryFailed {
            parent: parent.clone(),
            message: format!("read: {}", api_message(&e)),
        })?;
        let Some(object) = object else { return Ok(None) };
        let labels = object.metadata.labels.clone().unwrap_or_default();
        let annotations = object.metadata.annotations.clone().unwrap_or_default();
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
        let kind = self.parent.gk.kind.as_str();
        let data = |key: &str| object.data.get("data").and_then(|d| d.get(key)).and_then(|v| v.as_str());
        let mut record = data(MEMBERS_KEY).and_then(|v| record::decode(kind, v)).unwrap_or_default();
        let listing = data(CHUNKS_KEY).map(|v| record::decode(kind, v).as_deref().and_then(record::parse_listing));
        let chunks = match listing {
            None => Vec::new(),
            Some(None) => {
                let message = format!("{CHUNKS_KEY} is not a listing of `<name> <sha256>` lines");
                return Err(Error::InventoryFailed { parent, message });
            }
            Some(Some(chunks)) => chunks,
        };
        for text in self.read_chunks(client, &chunks).await? {
            record.push_str(&text);
        }
        let mut contents = Contents {
            group_kinds: split(CONTAINS_GROUP_KINDS).iter().map(|s| GroupKind::parse_applyset_string(s)).collect(),
            namespaces: split(ADDITIONAL_NAMESPACES).iter().map(|n| crate::object::Atom::new(n)).collect(),
            members: record.lines().filter_map(parse_member_line).collect(),
        };
        contents.namespaces.extend(self.parent.namespace.clone());
        let resource_version = object.metadata.resource_version.unwrap_or_default();
        let annotations =
            annotations.into_iter().filter(|(k, _)| k.starts_with(GITWARD_PREFIX) && !control::is_control(k)).collect();
        let uid = object.metadata.uid;
        let generation = labels.get(GENERATION).and_then(|g| g.parse().ok()).unwrap_or(0);
        Ok(Some(Parent { contents, resource_version, annotations, chunks, uid, generation }))
    }

    /// Writes the parent with these contents by server-side apply, after `previous` (the
    /// parent as read or last written, whose resourceVersion is the precondition; `None`
    /// writes without one, creating it), plus `extra` annotations (the last sync's record: they
    /// must be sent with every write, or server-side apply removes them as no longer declared
    /// by this field manager). A members record longer than the chunk size is written as
    /// pieces first, the parent then switched to them, and the pieces no longer listed deleted
    /// ([`record`]); one request when the record fits the parent. Returns the parent as
    /// written.
    ///
    /// Errors: [`Error::InventoryConflict`] when the precondition fails (409, or 404 because
    /// the parent was deleted): read it again; [`Error::ParentNamespaceMissing`] when creating
    /// it finds no namespace (a 404 without a precondition); [`Error::InventoryFailed`] otherwise
    /// (for example a piece that could not be written).
    pub async fn write(
        &self,
        client: &kube::Client,
        contents: &Contents,
        previous: Option<&Parent>,
        field_manager: &str,
        extra: &BTreeMap<String, String>,
    ) -> Result<Parent> {
        let kind = self.parent.gk.kind.as_str();
        let (data, chunks) = match record::layout(&self.parent.name, &contents.members, self.chunk_bytes) {
            record::Layout::Inline(text) => (json!({ MEMBERS_KEY: record::encode(kind, text) }), Vec::new()),
            record::Layout::Chunked(pieces) => {
                let created;
                let owner = match previous {
                    Some(previous) => previous,
                    None => {
                        created = self.create_bare(client, contents, field_manager, extra).await?;
                        &created
                    }
                };
                self.write_chunks(client, &pieces, owner, field_manager).await?;
                let chunks: Vec<Chunk> = pieces.into_iter().map(|(c, _)| c).collect();
                return self.switch(client, contents, owner, chunks, field_manager, extra).await;
            }
        };
        let precondition = previous.map(|p| p.resource_version.as_str());
        // A new listing (here: none, after pieces) is a new generation; an inline record
        // rewritten stays in its generation, so a write that changes nothing stays a no-op.
        let generation = previous.map_or(0, |p| p.generation + u64::from(!p.chunks.is_empty()));
        let written = self.apply(client, contents, precondition, field_manager, extra, data, generation).await?;
        let parent = Parent { chunks, ..written };
        if previous.is_some_and(|p| !p.chunks.is_empty()) {
            self.sweep(client, &parent).await;
        }
        Ok(parent)
    }

    /// The parent's body for a write of `contents` with `extra` annotations and `data`.
    fn body(
        &self,
        contents: &Contents,
        extra: &BTreeMap<String, String>,
        data: serde_json::Value,
        generation: u64,
    ) -> serde_json::Value {
        let own_ns = self.parent.namespace.clone().unwrap_or_default();
        let mut gks: Vec<String> = contents.group_kinds.iter().map(GroupKind::to_applyset_string).collect();
        gks.sort();
        let namespaces: Vec<&str> = contents.namespaces.iter().filter(|n| **n != own_ns).map(|n| n.as_str()).collect();
        let mut body = json!({
            "apiVersion": "v1",
            "kind": self.parent.gk.kind,
            "metadata": {
                "name": self.parent.name,
                "namespace": own_ns,
                "labels": { ID: self.id, GENERATION: generation.to_string() },
                "annotations": {
                    TOOLING: super::agent::TOOLING,
                    CONTAINS_GROUP_KINDS: gks.join(","),
                    ADDITIONAL_NAMESPACES: namespaces.join(","),
                },
            },
            "data": data,
        });
        for (k, v) in extra {
            body["metadata"]["annotations"][k] = json!(v);
        }
        body
    }

    /// One server-side apply of the parent as record `generation` (see [`Inventory::write`] for
    /// `precondition` and the errors); the returned parent lists no pieces.
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        client: &kube::Client,
        contents: &Contents,
        precondition: Option<&str>,
        field_manager: &str,
        extra: &BTreeMap<String, String>,
        data: serde_json::Value,
        generation: u64,
    ) -> Result<Parent> {
        let mut body = self.body(contents, extra, data, generation);
        if let Some(rv) = precondition {
            body["metadata"]["resourceVersion"] = json!(rv);
        }
        let params = PatchParams::apply(field_manager).force();
        let written = match self.api(client).patch(&self.parent.name, &params, &Patch::Apply(&body)).await {
            Ok(written) => written,
            Err(e) if precondition.is_some() && (is_status(&e, 409) || is_status(&e, 404)) => {
                return Err(Error::InventoryConflict { parent: self.parent.to_string(), message: api_message(&e) });
            }
            Err(e) if precondition.is_none() && is_status(&e, 404) => {
                let namespace = self.parent.namespace.as_deref().unwrap_or_default().to_string();
                return Err(Error::ParentNamespaceMissing { parent: self.parent.to_string(), namespace });
            }
            Err(e) => {
                let message = format!("write: {}", api_message(&e));
                return Err(Error::InventoryFailed { parent: self.parent.to_string(), message });
            }
        };
        Ok(Parent {
            contents: contents.clone(),
            resource_version: written.metadata.resource_version.unwrap_or_default(),
            annotations: extra.clone(),
            chunks: Vec::new(),
            uid: written.metadata.uid,
            generation,
        })
    }
}

/// What the watch of the parent last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Its first list has not completed.
    Unknown,
    /// The parent does not exist (deleted by hand, or not created yet).
    Absent,
    /// The parent exists at this resourceVersion.
    Present(String),
}

/// A metadata watch of the parent: tells the engine, with no request on the sync path, when
/// the parent was deleted or written by someone else, so the parent is re-read (and
/// re-created) instead of trusted from memory. Through the daemon's shared [`Watches`], the
/// parents of one namespace share one watch (selector `applyset.kubernetes.io/id`), fanned
/// out by their id; a parent that loses the label reads as absent, so it is re-read.
pub struct ParentWatch {
    seen: tokio::sync::watch::Receiver<Seen>,
    control: tokio::sync::watch::Receiver<Option<Control>>,
    record: tokio::sync::watch::Receiver<Option<Recorded>>,
    _subscription: Subscription<ParentSink>,
}

/// The parent's `gitward.dev/` annotations (record, attempt and controls), as its watch saw
/// them: what another unit's `depends_on` judges.
pub type Recorded = BTreeMap<String, String>;

impl ParentWatch {
    /// What the watch last saw.
    pub fn seen(&self) -> Seen {
        self.seen.borrow().clone()
    }

    /// The controls on the parent ([`control`]) as the watch last saw them: `None` until its
    /// first list completed; all off for a parent that does not exist, or when the parent
    /// cannot be watched at all (a permanent error, logged).
    pub fn control(&self) -> tokio::sync::watch::Receiver<Option<Control>> {
        self.control.clone()
    }

    /// The parent's `gitward.dev/` annotations as the watch last saw them: `None` until its
    /// first list completed, empty for a parent that does not exist; a new value only when
    /// they changed.
    pub fn record(&self) -> tokio::sync::watch::Receiver<Option<Recorded>> {
        self.record.clone()
    }
}

/// The parent's side of its watch: the objects of its id named as it is.
struct ParentSink {
    name: String,
    seen: tokio::sync::watch::Sender<Seen>,
    control: tokio::sync::watch::Sender<Option<Control>>,
    record: tokio::sync::watch::Sender<Option<Recorded>>,
}

impl ParentSink {
    fn is_parent(&self, object: &Meta) -> bool {
        object.metadata.name.as_deref() == Some(self.name.as_str())
    }

    fn present(object: &Meta) -> Seen {
        Seen::Present(object.metadata.resource_version.clone().unwrap_or_default())
    }

    fn control_of(object: &Meta) -> Control {
        object.metadata.annotations.as_ref().map(Control::of).unwrap_or_default()
    }

    fn record_of(object: &Meta) -> Recorded {
        let annotations = object.metadata.annotations.iter().flatten();
        annotations.filter(|(k, _)| k.starts_with(GITWARD_PREFIX)).map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Sends `record` when it differs from what the receivers hold.
    fn send_record(&self, record: Recorded) {
        self.record.send_if_modified(|held| {
            let changed = held.as_ref() != Some(&record);
            *held = Some(record);
            changed
        });
    }

    /// Sends `control` when it differs from what the receivers hold.
    fn send_control(&self, control: Control) {
        self.control.send_if_modified(|held| {
            let changed = held.as_ref() != Some(&control);
            *held = Some(control);
            changed
        });
    }
}

impl Sink for ParentSink {
    type Listing = Option<(Seen, Control, Recorded)>;

    fn list_item(&self, listing: &mut Self::Listing, object: &Meta) {
        if self.is_parent(object) {
            *listing = Some((Self::present(object), Self::control_of(object), Self::record_of(object)));
        }
    }

    fn listed(&self, listing: Self::Listing) {
        let (seen, control, record) = listing.unwrap_or((Seen::Absent, Control::default(), Recorded::new()));
        self.seen.send_replace(seen);
        self.send_control(control);
        self.send_record(record);
    }

    fn applied(&self, object: &Meta) {
        if self.is_parent(object) {
            self.seen.send_replace(Self::present(object));
            self.send_control(Self::control_of(object));
            self.send_record(Self::record_of(object));
        }
    }

    fn deleted(&self, object: &Meta) {
        if self.is_parent(object) {
            self.seen.send_replace(Seen::Absent);
            self.send_control(Control::default());
            self.send_record(Recorded::new());
        }
    }

    fn failed(&self, message: &str, permanent: bool) {
        if permanent && self.control.borrow().is_none() {
            tracing::warn!(parent = %self.name, message, "the ApplySet parent cannot be watched: suspend and reconcile requests are not seen");
            self.send_control(Control::default());
        }
    }
}

impl Inventory {
    /// Starts watching the parent through `watches` (one LIST and one WATCH kept open, shared
    /// with the other parents of its namespace in the daemon).
    pub fn watch(&self, watches: &Watches) -> ParentWatch {
        let (tx, seen) = tokio::sync::watch::channel(Seen::Unknown);
        let (control_tx, control) = tokio::sync::watch::channel(None);
        let (record_tx, record) = tokio::sync::watch::channel(None);
        let name = self.parent.name.to_string();
        let sink = Arc::new(ParentSink { name, seen: tx, control: control_tx, record: record_tx });
        let namespace = self.parent.namespace.as_deref().unwrap_or_default();
        let subscription = watches.subscribe(&self.resource, Some(namespace), ID, &self.id, sink);
        ParentWatch { seen, control, record, _subscription: subscription }
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
        let a = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("a"), "x");
        let b = ObjectRef::new(GroupKind::from_api_version("apps/v1", "Deployment"), Some("b"), "y");
        let u = Contents::of([&a]).union(&Contents::of([&b]));
        assert_eq!(u.group_kinds.len(), 2);
        assert_eq!(u.namespaces, BTreeSet::from(["a".into(), "b".into()]));
        assert_eq!(u.members, BTreeSet::from([a, b]));
    }

    #[test]
    fn member_lines_round_trip_namespaced_and_cluster_scoped_refs() {
        let a = ObjectRef::new(GroupKind::from_api_version("apps/v1", "Deployment"), Some("shop"), "web");
        let b = ObjectRef::new(GroupKind::from_api_version("v1", "Namespace"), None::<&str>, "shop");
        assert_eq!(member_line(&a), "Deployment.apps/shop/web");
        assert_eq!(member_line(&b), "Namespace//shop");
        assert_eq!(parse_member_line(&member_line(&a)), Some(a));
        assert_eq!(parse_member_line(&member_line(&b)), Some(b));
        assert_eq!(parse_member_line("garbage"), None);
    }
}
