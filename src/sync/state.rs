//! The parts of an [`Engine`](super::Engine), each with one job: the cluster as the engine
//! reads and writes it, the ApplySet parent, the records on it, Helm hooks, the options of
//! apply and prune, and what one sync leaves for the next.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::discovery::ApiResource;

use super::desired::{Defaults, Resolution};
use super::writes::{Cluster, Writes};
use crate::apply::{ApplyOptions, Blocked};
use crate::changeset::ChangeSet;
use crate::cluster::cache::MetadataCache;
use crate::cluster::discovery::{Discovery, Resolved};
use crate::cluster::fence::Fence;
use crate::manifest::Manifest;
use crate::object::GroupKind;
use crate::plan::{Desired, PruneStep, Stage, Step};

/// The cluster as the engine reads and writes it: its clients, the kinds discovery resolved,
/// the metadata of the unit's members, and the seam every write goes through. Its verbs read
/// (discovery, the cache's lists) and write (applies and deletes of members, through
/// [`Writes`]); the other parts of a sync write through [`ClusterView::writes`].
pub(super) struct ClusterView {
    /// gitward's own identity: bookkeeping (metadata cache, ApplySet parent, discovery,
    /// ownership check, namespaces a sync makes for its parent).
    client: kube::Client,
    /// The unit's writes (applies, deletes, the health wait's reads): `client`, or one
    /// impersonating the unit's ServiceAccount ([`crate::config::SyncUnit::service_account`]).
    writer: kube::Client,
    /// The fence of the Lease the unit runs under ([`Fence::unfenced`] without one).
    fence: Fence,
    /// The kinds the unit's objects resolve to.
    discovery: Discovery,
    /// Metadata of the unit's members, kept by watches.
    cache: MetadataCache,
    /// How long a kind's first list may take before the sync fails.
    cache_timeout: Duration,
    /// Every write of a sync ([`super::writes`]): to the API server through `client` and
    /// `writer`, or recorded.
    writes: Arc<dyn Writes>,
}

impl ClusterView {
    /// The cluster through `client` (reads) and `writer` (the unit's writes), under `fence`.
    pub(super) fn new(client: kube::Client, writer: kube::Client, cache: MetadataCache, fence: Fence) -> Self {
        let writes = Arc::new(Cluster::new(client.clone(), writer.clone()));
        Self {
            client,
            writer,
            fence,
            discovery: Discovery::new(),
            cache,
            cache_timeout: Duration::from_secs(60),
            writes,
        }
    }

    /// gitward's own client (bookkeeping reads and the parent).
    pub(super) fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The unit's client (its objects, the health wait's reads).
    pub(super) fn writer(&self) -> &kube::Client {
        &self.writer
    }

    /// Whether the unit's Lease fence admits writes now.
    pub(super) fn admits(&self) -> bool {
        self.fence.admits()
    }

    /// The seam of every write ([`Writes`]).
    pub(super) fn writes(&self) -> &dyn Writes {
        self.writes.as_ref()
    }

    /// The seam of every write, for a task that outlives a borrow (the Events writer).
    pub(super) fn writes_shared(&self) -> Arc<dyn Writes> {
        Arc::clone(&self.writes)
    }

    /// The metadata of the unit's members.
    pub(super) fn cache(&self) -> &MetadataCache {
        &self.cache
    }

    /// The metadata cache, to change how it watches (shared watches, list only, the kinds kept).
    pub(super) fn cache_mut(&mut self) -> &mut MetadataCache {
        &mut self.cache
    }

    /// Discovery, to share its answers or forget a group-version.
    pub(super) fn discovery_mut(&mut self) -> &mut Discovery {
        &mut self.discovery
    }

    /// The kind `kind` of `api_version` from discovery's cache, without a request.
    pub(super) fn known(&self, api_version: &str, kind: &str) -> Option<Resolved> {
        self.discovery.known(api_version, kind)
    }

    /// Resolves `kind` of `api_version` ([`Discovery::resolve`]).
    ///
    /// Errors: [`crate::cluster::Error`] when discovery fails.
    pub(super) async fn resolve(&mut self, api_version: &str, kind: &str) -> crate::cluster::Result<Option<Resolved>> {
        self.discovery.resolve(&self.client, api_version, kind).await
    }

    /// Resolves `kind` of `api_version` again, waiting for a CRD just applied
    /// ([`Discovery::resolve_new`]).
    ///
    /// Errors: as [`ClusterView::resolve`].
    pub(super) async fn resolve_new(
        &mut self,
        api_version: &str,
        kind: &str,
    ) -> crate::cluster::Result<Option<Resolved>> {
        self.discovery.resolve_new(&self.client, api_version, kind).await
    }

    /// Resolves `gk` at its preferred version ([`Discovery::resolve_group_kind`]).
    ///
    /// Errors: as [`ClusterView::resolve`].
    pub(super) async fn resolve_group_kind(&mut self, gk: &GroupKind) -> crate::cluster::Result<Option<Resolved>> {
        self.discovery.resolve_group_kind(&self.client, gk).await
    }

    /// `manifests` resolved into desired objects ([`super::desired::resolve`]).
    ///
    /// Errors: those of [`super::desired::resolve`].
    pub(super) async fn resolve_desired(
        &mut self,
        manifests: Vec<Manifest>,
        defaults: &Defaults,
        previous: &[Desired],
    ) -> super::Result<Resolution> {
        super::desired::resolve(&self.client, &mut self.discovery, manifests, defaults, previous).await
    }

    /// Watches (or lists) the members of `resource`, at most the cache timeout for its first list.
    ///
    /// Errors: [`crate::cluster::Error::CacheFailed`] when the first list fails or is late.
    pub(super) async fn ensure(&mut self, resource: &Arc<ApiResource>, namespaced: bool) -> crate::cluster::Result<()> {
        self.cache.ensure(resource, namespaced, self.cache_timeout).await
    }

    /// [`ClusterView::ensure`] for every kind of `kinds` at once: each kind's result.
    pub(super) async fn ensure_all(
        &mut self,
        kinds: &[(Arc<ApiResource>, bool)],
    ) -> Vec<(GroupKind, crate::cluster::Result<()>)> {
        self.cache.ensure_all(kinds, self.cache_timeout).await
    }

    /// Lists again the kinds whose watch failed since their last full list.
    ///
    /// Errors: the first kind that cannot be listed.
    pub(super) async fn relist_stale(&mut self) -> crate::cluster::Result<()> {
        self.cache.relist_stale(self.cache_timeout).await
    }

    /// Applies `steps` of `stage` through the seam ([`Writes::apply`]), the cache this view keeps.
    pub(super) async fn apply(
        &self,
        stage: Stage,
        steps: &[Step],
        desired: &[Desired],
        blocked: &mut Blocked,
        options: &ApplyOptions,
    ) -> ChangeSet {
        self.writes.apply(stage, steps, desired, &self.cache, blocked, options).await
    }

    /// Deletes `steps` of the ApplySet `applyset_id` through the seam ([`Writes::prune`]): each
    /// re-checked through the unit's client, the fence checked again before each delete.
    pub(super) async fn prune(
        &self,
        resources: &HashMap<GroupKind, (Arc<ApiResource>, bool)>,
        applyset_id: &str,
        steps: &[PruneStep],
    ) -> ChangeSet {
        let ctx = crate::prune::Context {
            client: &self.writer,
            resources,
            cache: &self.cache,
            applyset_id,
            fence: &self.fence,
        };
        self.writes.prune(&ctx, steps).await
    }
}
