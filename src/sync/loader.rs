//! The loader of a unit's revisions: fetch, render and parse through the unit's repository
//! ([`Repo`]), then `[sync.substitute]`'s variables substituted ([`super::substitute`]).

use std::sync::Arc;
use std::time::Instant;

use super::Result;
use super::repo::Repo;
use crate::config::SyncUnit;
use crate::manifest::{HashKey, Loaded, Manifest};
use crate::source::Revision;

/// What a unit's syncs read from its source.
pub(super) struct Loader {
    /// The unit whose revisions are read.
    unit: Arc<SyncUnit>,
    /// The mirror, the parse and render caches.
    repo: Repo,
    /// The key desired hashes of objects that took a Secret's value are keyed with
    /// ([`super::substitute::key`]).
    substitute_key: HashKey,
}

impl Loader {
    /// The loader of `unit` through `repo`, hashes of Secret values keyed with `substitute_key`.
    pub(super) fn new(unit: Arc<SyncUnit>, repo: Repo, substitute_key: HashKey) -> Self {
        Self { unit, repo, substitute_key }
    }

    /// The unit's repository (mirror and parse cache).
    pub(super) fn repo(&self) -> &Repo {
        &self.repo
    }

    /// Fetches and resolves the unit's ref ([`Repo::fetch`]).
    ///
    /// Errors: those of [`Repo::fetch`].
    pub(super) async fn fetch(&self) -> Result<Revision> {
        self.repo.fetch().await
    }

    /// Fetches unless a fetch began after `not_before` ([`Repo::fetch_since`]).
    ///
    /// Errors: those of [`Repo::fetch_since`].
    pub(super) async fn fetch_since(&self, not_before: Instant) -> Result<Revision> {
        self.repo.fetch_since(not_before).await
    }

    /// Who signed `revision` as its fetch verified it ([`Repo::signers`]).
    pub(super) fn signers(&self, revision: &Revision) -> Vec<crate::source::Signer> {
        self.repo.signers(revision)
    }

    /// The id of the git tree at the unit's path at `revision` ([`Repo::path_tree`]).
    pub(super) async fn path_tree(&self, revision: &Revision) -> Option<String> {
        self.repo.path_tree(revision, self.unit.path.as_str()).await
    }

    /// The manifests of the files changed from `from` to `to`, at most `max_files`, variables
    /// substituted ([`Repo::changed_manifests`]); `None` when they cannot all be read or a
    /// variable cannot be: the whole sync reads and reports them.
    pub(super) async fn changed(
        &self,
        client: &kube::Client,
        from: &Revision,
        to: &Revision,
        max_files: usize,
    ) -> Option<Vec<Manifest>> {
        let mut changed = self.repo.changed_manifests(from, to, max_files).await?;
        self.substitute(client, &mut [&mut changed]).await.ok()?;
        Some(changed)
    }

    /// Loads `revision`'s manifests, variables substituted (`[sync.substitute]`, `from` objects
    /// read through `client`); a unit that renders with Helm first learns the cluster's
    /// capabilities through `client` (again after [`crate::render::CAPABILITIES_TTL`]; a failed
    /// refresh keeps the last good set).
    ///
    /// Errors: the source's, the render's, the parse's and the variables' ([`super::Error`]).
    pub(super) async fn load(&self, client: &kube::Client, revision: &Revision) -> Result<Loaded> {
        if self.repo.needs_capabilities(revision).await? {
            self.repo.refresh_capabilities(crate::cluster::discovery::helm_capabilities(client).await)?;
        }
        let mut loaded = self.repo.load(revision).await?;
        self.substitute(client, &mut [&mut loaded.manifests, &mut loaded.hooks]).await?;
        Ok(loaded)
    }

    /// `manifests` with the unit's variables substituted (unchanged without `[sync.substitute]`).
    ///
    /// Errors: those of [`super::substitute::variables`]; [`super::Error::Manifest`] for a
    /// reference to an undefined variable without default, naming the file, document and variable.
    async fn substitute(&self, client: &kube::Client, manifests: &mut [&mut [Manifest]]) -> Result<()> {
        if !self.unit.substitute.is_set() {
            return Ok(());
        }
        let vars = super::substitute::variables(&self.unit, Some(client)).await?;
        for part in manifests.iter_mut() {
            crate::manifest::substitute::substitute(part, &vars, &self.substitute_key)?;
        }
        Ok(())
    }
}
