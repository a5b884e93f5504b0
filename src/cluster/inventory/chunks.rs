//! The requests behind a members record split into pieces ([`super::record`]): reading the
//! pieces a parent lists, writing new ones before the parent is switched to them, and sweeping
//! the ones no parent lists any more.

use std::collections::{BTreeMap, HashSet};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use super::record::{self, Chunk, GENERATION, MEMBERS_OF};
use super::{Contents, Inventory, MEMBERS_KEY, Parent};
use crate::cluster::owner::UNIT;
use crate::cluster::{Error, Result, api_message, is_status};

/// Requests in flight when reading pieces.
const IN_FLIGHT: usize = 4;

impl Inventory {
    fn failed(&self, message: String) -> Error {
        Error::InventoryFailed { parent: self.parent.to_string(), message }
    }

    /// The texts of `chunks`, in order, each checked against its listed sha256.
    pub(super) async fn read_chunks(&self, client: &kube::Client, chunks: &[Chunk]) -> Result<Vec<String>> {
        let api = self.api(client);
        let kind = self.parent.gk.kind.as_str();
        let reads: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let api = api.clone();
                async move {
                    let piece = format!("members record piece {kind}/{}", chunk.name);
                    let object = api
                        .get_opt(&chunk.name)
                        .await
                        .map_err(|e| self.failed(format!("read {piece}: {}", api_message(&e))))?;
                    let Some(object) = object else {
                        return Err(self.failed(format!("{piece} is listed but missing")));
                    };
                    let value = object.data.get("data").and_then(|d| d.get(MEMBERS_KEY)).and_then(|v| v.as_str());
                    let text = value.and_then(|v| record::decode(kind, v)).unwrap_or_default();
                    if record::sha256_hex(&text) != chunk.sha256 {
                        return Err(self.failed(format!("{piece} does not hold what the parent lists (altered)")));
                    }
                    Ok(text)
                }
            })
            .collect();
        futures::stream::iter(reads).buffered(IN_FLIGHT).try_collect().await
    }

    /// Creates the parent with no members record (a POST, which fails if it exists: an
    /// existing record is never replaced by an empty one), so that pieces can name it as their
    /// owner before it lists them.
    pub(super) async fn create_bare(
        &self,
        client: &kube::Client,
        contents: &Contents,
        field_manager: &str,
        extra: &BTreeMap<String, String>,
    ) -> Result<Parent> {
        let bare = Contents { members: Default::default(), ..contents.clone() };
        let object: DynamicObject =
            serde_json::from_value(self.body(&bare, extra, json!({}), 0)).map_err(|e| self.failed(e.to_string()))?;
        let params = PostParams { field_manager: Some(field_manager.to_string()), ..Default::default() };
        let created = match self.api(client).create(&params, &object).await {
            Ok(created) => created,
            Err(e) if is_status(&e, 409) => {
                return Err(Error::InventoryConflict { parent: self.parent.to_string(), message: api_message(&e) });
            }
            Err(e) if is_status(&e, 404) => {
                let namespace = self.parent.namespace.as_deref().unwrap_or_default().to_string();
                return Err(Error::ParentNamespaceMissing { parent: self.parent.to_string(), namespace });
            }
            Err(e) => return Err(self.failed(format!("create: {}", api_message(&e)))),
        };
        Ok(Parent {
            contents: bare,
            resource_version: created.metadata.resource_version.unwrap_or_default(),
            annotations: extra.clone(),
            chunks: Vec::new(),
            uid: created.metadata.uid,
            generation: 0,
        })
    }

    /// Writes the `pieces` that `owner` does not list yet, one at a time in record order
    /// (server-side apply; a piece is named by its content, so one that exists from a write
    /// that did not finish is the same), each labelled for the generation after `owner`'s
    /// ([`GENERATION`]): the one the switch to them makes.
    pub(super) async fn write_chunks(
        &self,
        client: &kube::Client,
        pieces: &[(Chunk, String)],
        owner: &Parent,
        field_manager: &str,
    ) -> Result<()> {
        let listed: HashSet<&Chunk> = owner.chunks.iter().collect();
        let api = self.api(client);
        let params = PatchParams::apply(field_manager).force();
        let kind = self.parent.gk.kind.as_str();
        let owners = owner
            .uid
            .as_ref()
            .map(|uid| json!([{ "apiVersion": "v1", "kind": kind, "name": self.parent.name, "uid": uid }]));
        for (chunk, text) in pieces.iter().filter(|(c, _)| !listed.contains(c)) {
            let mut body = json!({
                "apiVersion": "v1",
                "kind": kind,
                "metadata": {
                    "name": chunk.name,
                    "namespace": self.parent.namespace.as_deref().unwrap_or_default(),
                    "labels": { MEMBERS_OF: self.id, GENERATION: (owner.generation + 1).to_string() },
                    "annotations": { UNIT: owner.annotations.get(UNIT).cloned().unwrap_or_default() },
                },
                "data": { MEMBERS_KEY: record::encode(kind, text.clone()) },
            });
            if let Some(owners) = &owners {
                body["metadata"]["ownerReferences"] = owners.clone();
            }
            api.patch(&chunk.name, &params, &Patch::Apply(&body)).await.map_err(|e| {
                self.failed(format!("write members record piece {kind}/{}: {}", chunk.name, api_message(&e)))
            })?;
        }
        Ok(())
    }

    /// Switches the parent (read or written as `owner`) to list `chunks`, under its
    /// resourceVersion, as the generation after `owner`'s when the listing changes, then sweeps
    /// the pieces it no longer lists ([`Inventory::sweep`]).
    pub(super) async fn switch(
        &self,
        client: &kube::Client,
        contents: &Contents,
        owner: &Parent,
        chunks: Vec<Chunk>,
        field_manager: &str,
        extra: &BTreeMap<String, String>,
    ) -> Result<Parent> {
        let listing = record::encode(&self.parent.gk.kind, record::listing(&chunks));
        let data = json!({ super::CHUNKS_KEY: listing });
        let precondition = Some(owner.resource_version.as_str());
        let generation = owner.generation + u64::from(chunks != owner.chunks);
        let written = self.apply(client, contents, precondition, field_manager, extra, data, generation).await?;
        let parent = Parent { chunks, ..written };
        if parent.chunks != owner.chunks {
            self.sweep(client, &parent).await;
        }
        Ok(parent)
    }

    /// After `written` (the parent as a write just left it), deletes the pieces labelled with
    /// this ApplySet's id that it does not list and that were written for its generation or an
    /// earlier one ([`GENERATION`]; a piece without the label counts as 0): those it listed
    /// before, and those of writes that lost the race to it or stopped before their switch.
    /// A piece written for a later generation is kept: its write read the parent after
    /// `written` and may still switch the parent to it (another process's, such as `gitward
    /// sync --allow-prune` beside the daemon), and the sweep after that switch, or after
    /// the one that beats it, collects it. Each delete is conditional on the piece's
    /// resourceVersion as listed, so a piece written again since is not deleted. Best effort:
    /// one that cannot be listed or deleted now is swept by a later write.
    pub async fn sweep(&self, client: &kube::Client, written: &Parent) {
        let api: Api<DynamicObject> = self.api(client);
        let selector = format!("{MEMBERS_OF}={}", self.id);
        let Ok(list) = api.list_metadata(&ListParams::default().labels(&selector)).await else { return };
        let keep: HashSet<&str> = written.chunks.iter().map(|c| c.name.as_str()).collect();
        for object in list.items {
            let meta = object.metadata;
            let Some(name) = meta.name else { continue };
            let labels = meta.labels.unwrap_or_default();
            let generation: u64 = labels.get(GENERATION).and_then(|g| g.parse().ok()).unwrap_or(0);
            if keep.contains(name.as_str()) || generation > written.generation {
                continue;
            }
            let preconditions = Preconditions { resource_version: meta.resource_version, uid: None };
            let _ = api.delete(&name, &DeleteParams { preconditions: Some(preconditions), ..Default::default() }).await;
        }
    }
}
