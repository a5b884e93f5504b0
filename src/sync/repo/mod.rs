//! The source side of a unit as the engine uses it: the mirror (or, for a chart unit, the
//! chart repository and its download cache), the render step and the parse cache, driven off
//! the async runtime (git and the render tools are blocking). Needs no cluster, so `gitward
//! validate` uses it alone.
//!
//! This file holds the handle, [`Repo`]: where a unit's revisions come from and how it is
//! opened. Its verbs are in files by role: `fetch` (the mirror side: fetching the ref, and what
//! the mirror tells of a push or a tree without a load), `load` (reading a revision's manifests
//! through the render step and the parse cache; the early read of a push's changes) and
//! `render` (a Helm chart's remote dependencies and the cluster's capabilities, the renderer's
//! inputs).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Error, Result};
use crate::config::SyncUnit;
use crate::manifest::ParseCache;
use crate::render::Renderer;
use crate::source::artifact::{Artifact, ArtifactSpec};
use crate::source::chart::{ChartRepo, ChartSpec};
use crate::source::{Credentials, Revision, Source, SourceSpec, VerifySpec};

mod fetch;
mod load;
mod render;
mod signed;

/// A unit's mirror (or chart repository), renderer and parse cache.
#[derive(Clone)]
pub struct Repo {
    origin: Origin,
    /// Where the download cache of chart dependencies lives
    /// (`<state_dir>/charts/dependencies/<trust domain>`).
    state_dir: Arc<std::path::PathBuf>,
    parse_cache: Arc<Mutex<ParseCache>>,
    renderer: Arc<Mutex<Renderer>>,
    unit: Arc<SyncUnit>,
    /// Who signed the revisions its fetches verified.
    signed: Arc<Mutex<signed::Signed>>,
}

impl Repo {
    /// Opens (or creates) the bare mirror of the unit's repository and credentials under
    /// `state_dir`, shared with the other units of this process that follow them
    /// ([`Source::open`]).
    ///
    /// Errors: [`Error::Source`].
    /// `unit` is the engine's own copy, shared rather than copied again (a copy is ~1 KiB).
    pub async fn open(state_dir: &Path, unit: &Arc<SyncUnit>) -> Result<Self> {
        // A token written into a URL is masked in every line gitward writes from now on.
        crate::telemetry::url::register(&unit.repo);
        if let Some(spec) = chart_spec(unit) {
            crate::telemetry::url::register(&spec.source.repo_url);
            let chart = ChartRepo::open(state_dir, spec, unit.render_tools.max_index_age)?;
            let values = match unit.repo.is_empty() {
                true => None,
                false => Some(Arc::new(Mutex::new(open_git(state_dir, unit).await?))),
            };
            return Ok(Self {
                state_dir: Arc::new(state_dir.to_path_buf()),
                origin: Origin::Chart(Arc::new(tokio::sync::Mutex::new(chart)), values),
                parse_cache: Arc::new(Mutex::new(ParseCache::new())),
                renderer: Arc::new(Mutex::new(Renderer::new())),
                unit: unit.clone(),
                signed: Arc::default(),
            });
        }
        let source = Arc::new(Mutex::new(open_git(state_dir, unit).await?));
        let origin = match unit.repo.starts_with("oci://") {
            true => Origin::Artifact(Arc::new(Artifact::new(artifact_spec(unit))?), source),
            false => Origin::Git(source),
        };
        Ok(Self {
            state_dir: Arc::new(state_dir.to_path_buf()),
            origin,
            parse_cache: Arc::new(Mutex::new(ParseCache::new())),
            renderer: Arc::new(Mutex::new(Renderer::new())),
            unit: unit.clone(),
            signed: Arc::default(),
        })
    }
}

impl Repo {
    /// Who signed `revision`, as a fetch of this unit (or a clone of its handle) verified it
    /// under `[sync.verify]`: a chart's or artifact's cosign key, the commit's or tag's SSH or
    /// OpenPGP key, both for a chart whose values come from git. Empty when it verifies
    /// nothing, or `revision` was not fetched lately.
    pub fn signers(&self, revision: &Revision) -> Vec<crate::source::Signer> {
        self.signed.lock().expect("signed lock").of(revision)
    }
}

/// Whether `state_dir` holds the unit's mirror already — its git mirror (an OCI artifact
/// unit's too), and for a chart unit its chart cache — so that [`Repo::open`] on it creates
/// nothing. `gitward validate` opens a unit without one in a scratch directory instead.
pub fn mirror_exists(state_dir: &Path, unit: &SyncUnit) -> bool {
    let git = || Source::mirror_exists(state_dir, &source_spec(unit));
    match &unit.helm.chart {
        Some(_) => state_dir.join("charts/units").join(&unit.name).is_dir() && (unit.repo.is_empty() || git()),
        None => git(),
    }
}

/// Opens (or creates) the unit's bare mirror under `state_dir`.
async fn open_git(state_dir: &Path, unit: &SyncUnit) -> Result<Source> {
    let spec = source_spec(unit);
    let state_dir = state_dir.to_path_buf();
    blocking(move || Source::open(&state_dir, spec).map_err(Error::from)).await
}

/// What [`Source::open`] takes of the unit.
pub(crate) fn source_spec(unit: &SyncUnit) -> SourceSpec {
    SourceSpec {
        unit: unit.name.clone(),
        repo: unit.repo.clone(),
        reference: unit.reference.clone(),
        path: unit.path.clone(),
        credentials: Credentials {
            ssh_key_file: unit.git.ssh_key_file.clone(),
            known_hosts_file: unit.git.known_hosts_file.clone(),
            token_file: unit.git.token_file.clone(),
            username: unit.git.username.clone(),
        },
        max_file_bytes: unit.max_file_bytes,
        verify: unit.verify.as_ref().filter(|v| v.checks_git()).map(|v| VerifySpec {
            allowed_signers_file: v.allowed_signers_file.clone(),
            openpgp_keys_file: v.openpgp_keys_file.clone(),
        }),
    }
}

/// The unit's OCI artifact: its URL, `[sync.git] username` + `token_file`, the render limits.
pub(in crate::sync) fn artifact_spec(unit: &SyncUnit) -> ArtifactSpec {
    ArtifactSpec {
        unit: unit.name.clone(),
        url: unit.repo.clone(),
        username: unit.git.username.clone(),
        password_file: unit.git.token_file.clone(),
        max_bytes: unit.render_tools.max_tree_bytes,
        timeout: unit.render_tools.timeout,
        cosign_public_key_file: cosign_key(unit),
        chart_repositories: unit.render_tools.chart_repositories.clone(),
    }
}

/// The unit's chart (`[sync.helm] repo_url`, `chart`, `version` and its credential files),
/// with the render limits and `[render] chart_repositories`; `None` for a unit without one.
pub(in crate::sync) fn chart_spec(unit: &SyncUnit) -> Option<ChartSpec> {
    unit.helm.chart.as_ref().map(|source| ChartSpec {
        unit: unit.name.clone(),
        source: source.clone(),
        max_bytes: unit.render_tools.max_tree_bytes,
        timeout: unit.render_tools.timeout,
        cosign_public_key_file: cosign_key(unit),
        chart_repositories: unit.render_tools.chart_repositories.clone(),
    })
}

/// `[sync.verify] cosign_public_key_file`, which an OCI artifact's or OCI chart's manifest
/// must be signed by.
fn cosign_key(unit: &SyncUnit) -> Option<PathBuf> {
    unit.verify.as_ref().and_then(|v| v.cosign_public_key_file.clone())
}

/// The mirror commit an artifact revision (`<tag>@sha256:<hex>`) was unpacked to.
///
/// Errors: [`Error::Source`] when it was not (the mirror was removed since the fetch).
fn artifact_commit(unit: &str, source: &Mutex<Source>, revision: &Revision) -> Result<Revision> {
    Artifact::commit(&source.lock().expect("source lock"), revision).ok_or_else(|| {
        let (unit, path) = (unit.to_owned(), revision.0.clone());
        Error::Source(crate::source::Error::ReadObject { unit, path, message: "the artifact is not unpacked".into() })
    })
}

/// Where a unit's revisions come from.
#[derive(Clone)]
enum Origin {
    /// A git repository's bare mirror.
    Git(Arc<Mutex<Source>>),
    /// A chart repository or registry (`[sync.helm] repo_url`) and the download cache; with
    /// `repo` too, the git repository its `values_files` are read from (the revision is then
    /// `<chart revision>+git:<commit>`).
    Chart(Arc<tokio::sync::Mutex<ChartRepo>>, Option<Arc<Mutex<Source>>>),
    /// An OCI artifact (`repo = "oci://…"`), each revision unpacked into the mirror as a
    /// commit ([`Artifact::import`]).
    Artifact(Arc<Artifact>, Arc<Mutex<Source>>),
}

/// Why a plain unit passed over the kustomization file `file`, and the config that builds it:
/// the unit's own `render = "kustomize"` when the file is at its path (the unit says
/// `render = "plain"`), else a unit with the file's directory as its `path`. A plain read
/// applies the files beside it as they are, so a patch becomes an object of its own: usually
/// a duplicate of what it patches, or a partial object.
pub fn plain_kustomization(unit: &SyncUnit, file: &str) -> String {
    let dir = file.rsplit_once('/').map_or("", |(dir, _)| dir);
    let set = match unit.path == dir {
        true => "set render = \"kustomize\" in the unit's [[sync]] table".to_owned(),
        false => format!("set path = \"{dir}\" and render = \"kustomize\" in a [[sync]] table"),
    };
    format!("a plain unit does not build it, so its patches are applied as objects; {set} to build it")
}

/// Runs blocking work (git2, parsing) off the async runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::Task(e.to_string()))?
}
