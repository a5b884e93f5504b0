//! The parent's requests: one GET that reads it (its annotations, its members record inline or
//! the pieces it lists) and checks it is gitward's ApplySet of this id, and the server-side
//! apply that writes it under the resourceVersion read as a precondition.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{
    ADDITIONAL_NAMESPACES, CHUNKS_KEY, CONTAINS_GROUP_KINDS, Chunk, Contents, GENERATION, GITWARD_PREFIX, ID,
    Inventory, MEMBERS_KEY, TOOLING, control, parse_member_line, record,
};
use crate::cluster::{Error, Result, api_message, is_status};
use crate::object::GroupKind;

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

impl Inventory {
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
    pub(super) fn body(
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
                    TOOLING: crate::cluster::agent::TOOLING,
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
    pub(super) async fn apply(
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
