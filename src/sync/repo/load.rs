//! Reading a revision's manifests: the whole load — rendered (kustomize, Helm, a chart unit's
//! archive with its values files) or listed and parsed through the parse cache, a damaged
//! mirror cloned again and read once more — and the early read of a push's changed plain
//! files.

use std::collections::HashMap;

use super::{Origin, Repo, artifact_commit, blocking, plain_kustomization};
use crate::config::{RenderMode, SyncUnit};
use crate::manifest::{Loaded, Manifest, ParseCache, Skipped};
use crate::render::{self, Renderer};
use crate::source::{Revision, Source};
use crate::sync::{Error, Result};

impl Repo {
    /// Reads the manifests of `revision`: renders the unit's path (kustomize or Helm, see
    /// [`crate::render`]; served from the render cache when nothing it reads changed), or lists
    /// and parses its plain files, SOPS-encrypted ones decrypted first; only blobs whose id
    /// changed since the previous load are parsed again ([`Loaded::path_only`] for those of a
    /// git unit without `[sync.verify]`). Symlinks and submodules of plain units
    /// come back as skipped files. (`create_namespace` adds nothing here: that namespace is
    /// shared, not a member; [`crate::sync::namespaces`].)
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

    /// The manifests of the files that `to` adds or modifies relative to `from`, read and parsed
    /// apart from the parse cache (the whole load that follows parses them again), for the early
    /// apply of a push's changes ([`crate::sync::early`]); none, at once, when the unit's path is
    /// the same tree at both ([`Source::path_unchanged`]). `None` whenever that is not a safe
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
pub(super) fn mode_at(source: &Source, revision: &Revision, unit: &SyncUnit) -> Result<RenderMode> {
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
