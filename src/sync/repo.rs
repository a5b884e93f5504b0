//! The git side of a unit as the engine uses it: the mirror plus the parse cache, driven off
//! the async runtime (git2 is blocking). Needs no cluster, so `gitward validate` uses it alone.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{Error, Result};
use crate::config::SyncUnit;
use crate::manifest::{Loaded, ParseCache, Skipped};
use crate::source::{Credentials, Revision, Source, SourceSpec};

/// A unit's mirror and parse cache.
#[derive(Clone)]
pub struct Repo {
    source: Arc<Mutex<Source>>,
    parse_cache: Arc<Mutex<ParseCache>>,
}

impl Repo {
    /// Opens (or creates) the unit's bare mirror under `state_dir`.
    ///
    /// Errors: [`Error::Source`].
    pub async fn open(state_dir: &Path, unit: &SyncUnit) -> Result<Self> {
        let spec = SourceSpec {
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
        };
        let state_dir = state_dir.to_path_buf();
        let source = blocking(move || Source::open(&state_dir, spec).map_err(Error::from)).await?;
        Ok(Self { source: Arc::new(Mutex::new(source)), parse_cache: Arc::new(Mutex::new(ParseCache::new())) })
    }

    /// Fetches the remote and resolves the unit's ref to a revision.
    ///
    /// Errors: [`Error::Source`] (unreachable repository, unknown ref); the mirror keeps its
    /// previous state.
    pub async fn fetch(&self) -> Result<Revision> {
        let source = self.source.clone();
        blocking(move || source.lock().expect("source lock").fetch().map_err(Error::from)).await
    }

    /// Lists and parses the manifests of `revision`; only blobs whose id changed since the
    /// previous load are parsed again. Symlinks and submodules come back as skipped files.
    ///
    /// Errors: [`Error::Source`] (path missing, file too large), [`Error::Manifest`].
    pub async fn load(&self, revision: &Revision) -> Result<Loaded> {
        let (source, cache, revision) = (self.source.clone(), self.parse_cache.clone(), revision.clone());
        blocking(move || {
            let source = source.lock().expect("source lock");
            let listing = source.list_files(&revision)?;
            let mut loaded = cache
                .lock()
                .expect("parse cache lock")
                .load(&listing.files, |f| source.read_blob(&f.oid).map_err(|e| e.to_string()))?;
            for (file, reason) in listing.skipped {
                loaded.skipped.push(Skipped { file, index: None, reason });
            }
            loaded.partial = listing.partial;
            Ok(loaded)
        })
        .await
    }
}

/// Runs blocking work (git2, parsing) off the async runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::Task(e.to_string()))?
}
