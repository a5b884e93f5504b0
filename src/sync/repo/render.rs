//! The render side of a unit's source: the remote dependencies of a Helm chart fetched into
//! their download cache before a render, and the cluster's capabilities the renderer hands
//! Helm.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::load::mode_at;
use super::{Origin, Repo, artifact_commit, blocking};
use crate::config::RenderMode;
use crate::render::Capabilities;
use crate::source::chart::deps;
use crate::source::{self, Revision, Source};
use crate::sync::{Error, Result};

impl Repo {
    /// The remote dependencies of the unit's chart in git at `revision` (`Chart.yaml`
    /// `dependencies` with an https/http/oci `repository`, versions pinned by `Chart.lock`),
    /// fetched into the shared download cache ([`crate::source::chart::deps`]); empty for a
    /// unit that does not render with Helm or whose dependencies are all vendored or local.
    ///
    /// Every dependency's repository must be listed in `[render] chart_repositories`; one that
    /// is not refuses the revision, naming the `Chart.yaml` and the URL, before any request.
    ///
    /// Errors: [`Error::Source`] (`Chart.yaml` or `Chart.lock` does not parse; a dependency's
    /// repository is not allowed, cannot be reached, has no matching version, or serves a
    /// wrong digest; a remote dependency of a unit with `[sync.verify]`, whose bytes no
    /// signature covers).
    pub(super) async fn chart_dependencies(
        &self,
        source: &Arc<Mutex<Source>>,
        revision: &Revision,
    ) -> Result<Vec<PathBuf>> {
        let (source, unit, rev) = (source.clone(), self.unit.clone(), revision.clone());
        let wanted = blocking(move || {
            let source = source.lock().expect("source lock");
            if mode_at(&source, &rev, &unit)? != RenderMode::Helm {
                return Ok(Vec::new());
            }
            let tree = source.tree(&rev)?;
            let at = |file: &str| unit.path.join(file);
            let Some(chart) = tree.blob(&at("Chart.yaml")) else { return Ok(Vec::new()) };
            let chart = tree.read(&at("Chart.yaml"), chart)?;
            let lock = tree.blob(&at("Chart.lock")).map(|id| tree.read(&at("Chart.lock"), id)).transpose()?;
            let vendored: Vec<String> = match tree.dir(&at("charts")) {
                Some(id) => tree
                    .entries(&at("charts"), id)?
                    .into_iter()
                    .map(|e| String::from_utf8_lossy(&e.name).into_owned())
                    .collect(),
                None => Vec::new(),
            };
            let is_vendored = |name: &str| {
                vendored.iter().any(|n| n == name || (n.starts_with(&format!("{name}-")) && n.ends_with(".tgz")))
            };
            let refused = |message| {
                Error::Source(source::Error::Chart { unit: unit.name.clone(), url: at("Chart.yaml"), message })
            };
            let wanted = deps::remote(&chart, lock.as_deref(), is_vendored).map_err(refused)?;
            deps::allowed(&wanted, &unit.render_tools.chart_repositories).map_err(refused)?;
            match (&unit.verify, wanted.first()) {
                (Some(_), Some(dep)) => Err(refused(unverifiable(dep))),
                _ => Ok(wanted),
            }
        })
        .await?;
        let unit = &self.unit;
        let fetcher = deps::Fetcher {
            unit: unit.name.clone(),
            domain: deps::trust_domain(
                &unit.cluster,
                unit.service_account.as_ref().map(|sa| format!("{}/{sa}", unit.namespace)).as_deref(),
            ),
            max_bytes: unit.render_tools.max_tree_bytes,
            timeout: unit.render_tools.timeout,
            chart_repositories: unit.render_tools.chart_repositories.clone(),
            max_index_age: unit.render_tools.max_index_age,
        };
        let mut archives = Vec::with_capacity(wanted.len());
        for dep in &wanted {
            archives.push(deps::fetch(&self.state_dir, &fetcher, dep).await?);
        }
        Ok(archives)
    }

    /// Whether the unit renders with Helm at `revision` and the renderer lacks fresh capabilities
    /// of the cluster (see [`Repo::set_capabilities`],
    /// [`render::CAPABILITIES_TTL`](crate::render::CAPABILITIES_TTL)).
    ///
    /// Errors: [`Error::Source`] when the revision is not in the mirror.
    pub async fn needs_capabilities(&self, revision: &Revision) -> Result<bool> {
        let (source, revision) = match &self.origin {
            Origin::Git(source) => (source.clone(), revision.clone()),
            Origin::Artifact(_, source) => (source.clone(), artifact_commit(&self.unit.name, source, revision)?),
            Origin::Chart(..) => return Ok(!self.renderer.lock().expect("renderer lock").has_capabilities()),
        };
        let (source, renderer, unit) = (source, self.renderer.clone(), self.unit.clone());
        blocking(move || {
            if renderer.lock().expect("renderer lock").has_capabilities() {
                return Ok(false);
            }
            Ok(mode_at(&source.lock().expect("source lock"), &revision, &unit)? == RenderMode::Helm)
        })
        .await
    }

    /// Sets the cluster's capabilities for Helm (`--kube-version`, `--api-versions`).
    pub fn set_capabilities(&self, capabilities: Capabilities) {
        self.renderer.lock().expect("renderer lock").set_capabilities(capabilities);
    }

    /// Takes a new read of the cluster's capabilities, keeping the last good set when the read
    /// failed ([`Renderer::refresh_capabilities`](crate::render::Renderer::refresh_capabilities)).
    ///
    /// Errors: the read's error, when there is no set to keep.
    pub fn refresh_capabilities<E: std::fmt::Display>(
        &self,
        read: std::result::Result<Capabilities, E>,
    ) -> std::result::Result<(), E> {
        self.renderer.lock().expect("renderer lock").refresh_capabilities(&self.unit.name, read)
    }

    /// How many renders (kustomize or Helm runs) this unit has done; a load served from the
    /// render cache does not count.
    pub fn renders(&self) -> usize {
        self.renderer.lock().expect("renderer lock").renders()
    }
}

/// Why a unit with `[sync.verify]` refuses a chart dependency fetched from a repository: its
/// bytes are not part of the signed revision (`Chart.lock` pins a version, not the archive).
fn unverifiable(dep: &crate::source::chart::deps::Dependency) -> String {
    format!(
        "dependency {} {} comes from {}, outside the signed revision, and [sync.verify] takes only what the \
         signature covers: vendor it under charts/ (helm dependency build) and commit it",
        dep.name, dep.version, dep.repository
    )
}
