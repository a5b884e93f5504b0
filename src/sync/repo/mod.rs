//! The source side of a unit as the engine uses it: the mirror (or, for a chart unit, the
//! chart repository and its download cache), the render step and the parse cache, driven off
//! the async runtime (git and the render tools are blocking). Needs no cluster, so `gitward
//! validate` uses it alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{Error, Result};
use crate::config::{RenderMode, SyncUnit};
use crate::manifest::{Loaded, Manifest, ParseCache, Skipped};
use crate::render::{self, Capabilities, Renderer};
use crate::source;
use crate::source::artifact::{Artifact, ArtifactSpec, Pulled};
use crate::source::chart::{ChartRepo, ChartSpec, deps};
use crate::source::{Credentials, Revision, Source, SourceSpec, VerifySpec};

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
        if let Some(source) = &unit.helm.chart {
            crate::telemetry::url::register(&source.repo_url);
            let spec = ChartSpec {
                unit: unit.name.clone(),
                source: source.clone(),
                max_bytes: unit.render_tools.max_tree_bytes,
                timeout: unit.render_tools.timeout,
                cosign_public_key_file: cosign_key(unit),
                chart_repositories: unit.render_tools.chart_repositories.clone(),
            };
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
        })
    }

    /// Fetches the remote and resolves the unit's ref to a revision; for a chart unit, finds
    /// the newest version its range allows and downloads it unless cached (the revision
    /// `<chart>@<version>@sha256:<hex>`, [`ChartRepo::fetch`]).
    ///
    /// Errors: [`Error::Source`] (unreachable repository, unknown ref; no matching chart
    /// version, an index that does not parse, a digest mismatch); the mirror and the download
    /// cache keep their previous state.
    pub async fn fetch(&self) -> Result<Revision> {
        self.fetch_since(Instant::now()).await
    }

    /// [`Repo::fetch`], satisfied for a git repository by a fetch of its shared mirror that
    /// started at or after `not_before` ([`Source::fetch_since`]): pass the instant the event
    /// asking for it was seen (a webhook, a ref change), and the units of one repository that
    /// saw one push fetch it once. A chart repository or OCI artifact is asked every time.
    ///
    /// Errors: those of [`Repo::fetch`].
    pub async fn fetch_since(&self, not_before: Instant) -> Result<Revision> {
        let source = match &self.origin {
            Origin::Git(source) => source.clone(),
            Origin::Artifact(artifact, source) => {
                let mirror = source.clone();
                let known = move |r: &Revision| Artifact::commit(&mirror.lock().expect("source lock"), r).is_some();
                let (revision, layer) = match artifact.pull(known).await? {
                    Pulled::Known(revision) => return Ok(revision),
                    Pulled::New(revision, layer) => (revision, layer),
                };
                let (artifact, source, rev) = (artifact.clone(), source.clone(), revision.clone());
                blocking(move || Ok(artifact.import(&source.lock().expect("source lock"), &rev, &layer)?)).await?;
                return Ok(revision);
            }
            Origin::Chart(chart, values) => {
                let chart = chart.lock().await.fetch().await?.revision;
                let Some(values) = values.clone() else { return Ok(chart) };
                let fetch = move || values.lock().expect("source lock").fetch_since(not_before).map_err(Error::from);
                let commit = blocking(fetch).await?;
                return Ok(Revision(format!("{chart}+git:{commit}")));
            }
        };
        blocking(move || source.lock().expect("source lock").fetch_since(not_before).map_err(Error::from)).await
    }

    /// Whether the push seen at `not_before` touched the unit's path since `from`, and the
    /// commit it brought, told without reading the mirror (one fetch and one tree diff per push
    /// for every unit of a repository, [`crate::source::PushProbe::touched`]); `None` when it
    /// cannot be told so, for a chart or artifact unit, or before the unit's first sync
    /// (`from` unset).
    pub async fn push_touches(&self, from: Option<&Revision>, not_before: Instant) -> Option<crate::source::Touch> {
        let Origin::Git(source) = &self.origin else { return None };
        let from = from?;
        let probe = source.lock().expect("source lock").push_probe();
        probe.touched(from, not_before).await
    }

    /// The id of the git tree at `path` at `revision` ([`crate::source::Source::path_tree`]),
    /// read off the runtime; `None` for a chart or artifact unit, when nothing or a file is at
    /// `path`, or when the revision cannot be read (the caller then knows nothing of it).
    pub async fn path_tree(&self, revision: &Revision, path: &str) -> Option<String> {
        let Origin::Git(source) = &self.origin else { return None };
        let (source, revision, path) = (source.clone(), revision.clone(), path.to_owned());
        blocking(move || Ok(source.lock().expect("source lock").path_tree(&revision, &path)?)).await.ok().flatten()
    }

    /// The directories of `revision`'s tree that `glob` matches ([`source::matching_dirs`]),
    /// sorted: what a `[[sync_set]]` makes units of. Blocking work off the runtime.
    ///
    /// Errors: [`Error::Source`] when a directory on the way cannot be read, or the unit does
    /// not follow a git repository.
    pub async fn directories(&self, revision: &Revision, glob: &str) -> Result<Vec<String>> {
        let Origin::Git(source) = &self.origin else {
            let message = "a set lists the directories of a git repository".to_owned();
            return Err(
                source::Error::ReadObject { unit: self.unit.name.clone(), path: glob.to_owned(), message }.into()
            );
        };
        let (source, revision, glob) = (source.clone(), revision.clone(), glob.to_owned());
        blocking(move || {
            let source = source.lock().expect("source lock");
            Ok(source::matching_dirs(&source.tree(&revision)?, &glob)?)
        })
        .await
    }

    /// Reads the manifests of `revision`: renders the unit's path (kustomize or Helm, see
    /// [`crate::render`]; served from the render cache when nothing it reads changed), or lists
    /// and parses its plain files, SOPS-encrypted ones decrypted first; only blobs whose id
    /// changed since the previous load are parsed again ([`Loaded::path_only`] for those of a
    /// git unit without `[sync.verify]`). Symlinks and submodules of plain units
    /// come back as skipped files. (`create_namespace` adds nothing here: that namespace is
    /// shared, not a member; [`super::namespaces`].)
    ///
    /// When an object of the revision cannot be read, the mirror is cloned again
    /// ([`Source::repair`]) and the revision read once more.
    ///
    /// Errors: [`Error::Source`] (path missing, file too large; a damaged mirror whose remote
    /// cannot be reached), [`Error::Manifest`], [`Error::Render`].
    pub async fn load(&self, revision: &Revision) -> Result<Loaded> {
        let (source, revision) = match &self.origin {
            Origin::Git(source) => (source.clone(), revision.clone()),
            Origin::Artifact(_, source) => (source.clone(), artifact_commit(&self.unit.name, source, revision)?),
            Origin::Chart(chart, values) => {
                let archive = chart.lock().await.archive(revision)?;
                let (renderer, unit, revision) = (self.renderer.clone(), self.unit.clone(), revision.clone());
                let values = values.clone();
                return blocking(move || {
                    let files = match (&values, revision.0.rsplit_once("+git:")) {
                        (Some(source), Some((_, commit))) => {
                            values_files(&source.lock().expect("source lock"), &Revision(commit.to_owned()), &unit)?
                        }
                        _ => Vec::new(),
                    };
                    Ok(renderer.lock().expect("renderer lock").render_chart(&unit, &archive, &revision, &files)?)
                })
                .await;
            }
        };
        let dependencies = self.chart_dependencies(&source, &revision).await?;
        self.renderer.lock().expect("renderer lock").set_dependencies(dependencies);
        let (source, cache, renderer, unit, revision) =
            (source, self.parse_cache.clone(), self.renderer.clone(), self.unit.clone(), revision);
        // An artifact's tree is not the repository's, and a signature check judges the commit.
        let path_only = matches!(self.origin, Origin::Git(_)) && self.unit.verify.is_none();
        let loaded = blocking(move || {
            let mut source = source.lock().expect("source lock");
            let mut renderer = renderer.lock().expect("renderer lock");
            let mut cache = cache.lock().expect("parse cache lock");
            let loaded =
                match load_once(At { source: &source, revision: &revision, unit: &unit }, &mut cache, &mut renderer) {
                    // A damaged mirror (truncated pack, lost object) is cloned again, and read once more.
                    Err(e) if may_be_the_mirror(&e) && source.repair(&revision)? => {
                        let at = At { source: &source, revision: &revision, unit: &unit };
                        load_once(at, &mut cache, &mut renderer)?
                    }
                    loaded => loaded?,
                };
            Ok(loaded)
        })
        .await;
        loaded.map(|loaded| Loaded { path_only: loaded.path_only && path_only, ..loaded })
    }

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
    async fn chart_dependencies(&self, source: &Arc<Mutex<Source>>, revision: &Revision) -> Result<Vec<PathBuf>> {
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

    /// The manifests of the files that `to` adds or modifies relative to `from`, read and parsed
    /// apart from the parse cache (the whole load that follows parses them again), for the
    /// early apply of a push's changes ([`super::early`]); none, at once, when the unit's path
    /// is the same tree at both ([`Source::path_unchanged`]). `None` whenever that is not a safe
    /// shortcut, never an error: the unit renders (kustomize or Helm) at `to`, the diff is not a
    /// plain edit of at most `max_files` manifest files ([`Source::changed_files`]), a file is
    /// SOPS-encrypted, or one does not parse (the whole load reports it).
    pub async fn changed_manifests(&self, from: &Revision, to: &Revision, max_files: usize) -> Option<Vec<Manifest>> {
        let Origin::Git(source) = &self.origin else { return None };
        let (source, unit, from, to) = (source.clone(), self.unit.clone(), from.clone(), to.clone());
        let read = blocking(move || {
            let source = source.lock().expect("source lock");
            // A push to another unit's path of a shared repository: nothing to send early, and
            // no render mode to read (the whole sync that follows reads what it needs).
            if source.path_unchanged(&from, &to)? {
                return Ok(Some(Vec::new()));
            }
            if mode_at(&source, &to, &unit)? != RenderMode::Plain {
                return Ok(None);
            }
            let Some(files) = source.changed_files(&from, &to, max_files)? else { return Ok(None) };
            let mut manifests = Vec::new();
            for file in files {
                let bytes = source.read_blob(&file.oid)?;
                if render::sops::is_encrypted(&bytes) {
                    return Ok(None);
                }
                match crate::manifest::parse_file(&file.path, &bytes) {
                    Ok(parsed) => manifests.extend(parsed.manifests),
                    Err(_) => return Ok(None),
                }
            }
            Ok(Some(manifests))
        });
        read.await.unwrap_or_else(|e: Error| {
            tracing::debug!(unit = %self.unit.name, error = %e, "no early apply: the diff could not be read");
            None
        })
    }

    /// Whether the unit renders with Helm at `revision` and the renderer lacks fresh
    /// capabilities of the cluster (see [`Repo::set_capabilities`], [`render::CAPABILITIES_TTL`]).
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
    /// failed ([`Renderer::refresh_capabilities`]).
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
fn source_spec(unit: &SyncUnit) -> SourceSpec {
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
fn artifact_spec(unit: &SyncUnit) -> ArtifactSpec {
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

/// The unit's `values_files` read from git at `commit`, as (repository path, bytes).
///
/// Errors: [`Error::Render`] ([`render::Error::ValuesFileMissing`]), [`Error::Source`].
fn values_files(source: &Source, commit: &Revision, unit: &SyncUnit) -> Result<Vec<(String, Vec<u8>)>> {
    let tree = source.tree(commit)?;
    let mut files = Vec::new();
    for file in &unit.helm.values_files {
        let Some(id) = tree.blob(file) else {
            let (unit, path, revision) = (unit.name.clone(), file.clone(), commit.clone());
            return Err(Error::Render(render::Error::ValuesFileMissing { unit, path, revision }));
        };
        files.push((file.clone(), tree.read(file, id)?));
    }
    Ok(files)
}

/// One read of `revision`: rendered, or listed and parsed.
fn load_once(at: At<'_>, cache: &mut ParseCache, renderer: &mut Renderer) -> Result<Loaded> {
    let At { source, revision, unit } = at;
    match mode_at(source, revision, unit)? {
        mode @ (RenderMode::Kustomize | RenderMode::Helm) => {
            Ok(renderer.render(&source.tree(revision)?, unit, mode)?)
        }
        _ => load_plain(at, cache, renderer),
    }
}

/// A unit's source at one revision: what a load reads.
#[derive(Clone, Copy)]
struct At<'a> {
    source: &'a Source,
    revision: &'a Revision,
    unit: &'a SyncUnit,
}

/// Whether a failed load may come from the mirror rather than from the content: an object
/// that could not be read, or a render (which reads whole trees).
fn may_be_the_mirror(error: &Error) -> bool {
    use crate::source::Error as Source;
    matches!(
        error,
        Error::Source(Source::Git { .. } | Source::ReadBlob { .. } | Source::ReadObject { .. })
            | Error::Manifest(crate::manifest::Error::ReadBlob { .. })
            | Error::Render(_)
    )
}

/// The unit's render mode at `revision`, `auto` resolved.
fn mode_at(source: &Source, revision: &Revision, unit: &SyncUnit) -> Result<RenderMode> {
    Ok(render::resolve_mode(&source.tree(revision)?, unit))
}

/// A plain unit: list, decrypt SOPS files, parse (cached by blob id).
fn load_plain(at: At<'_>, cache: &mut ParseCache, renderer: &mut Renderer) -> Result<Loaded> {
    let At { source, revision, unit } = at;
    let listing = source.list_files(revision)?;
    let mut refused: Option<render::Error> = None;
    let result = cache.load(&listing.files, |f| {
        let bytes = source.read_blob(&f.oid).map_err(|e| e.to_string())?;
        renderer.decrypt_plain(unit, &f.path, &f.oid, bytes).map_err(|e| {
            let message = e.to_string();
            refused.get_or_insert(e);
            message
        })
    });
    let mut loaded = match (result, refused) {
        (Ok(loaded), _) => loaded,
        (Err(_), Some(refused)) => return Err(refused.into()),
        (Err(e), None) => return Err(e.into()),
    };
    let oids: HashMap<String, String> = listing.files.iter().map(|f| (f.path.clone(), f.oid.clone())).collect();
    renderer.key_decrypted(&mut loaded, &oids);
    for (file, reason) in listing.skipped {
        loaded.skipped.push(Skipped { file, index: None, reason });
    }
    for skipped in loaded.skipped.iter_mut().filter(|s| s.is_kustomization()) {
        skipped.reason = plain_kustomization(unit, &skipped.file);
    }
    loaded.partial = listing.partial;
    loaded.path_only = true;
    Ok(loaded)
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
