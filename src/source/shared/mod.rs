//! One bare mirror per repository and credentials, shared by the units that follow it.
//!
//! A git unit's mirror is `<state_dir>/mirrors/<name>.<key>`: `<name>` is the repository's
//! last path component (for people reading the directory), `<key>` the first 16 hex digits of
//! the SHA-256 of the normalised URL and the credential settings (`ssh_key_file`,
//! `known_hosts_file`, `token_file`, `username`: the files' paths, not their contents). Units
//! with the same URL and the same credential files share it; units of one URL whose
//! credentials differ never do, so no unit reads objects only another unit's key may fetch.
//! The `.` cannot occur in a unit name (an RFC 1123 label), so these names never meet the
//! per-unit mirrors of OCI artifact units (`mirrors/<unit>`) nor those of earlier versions,
//! which [`open`] removes when their unit opens its shared mirror.
//!
//! The process keeps one [`Shared`] per open directory ([`open`]: a registry of weak
//! references, so a directory no unit uses any more is closed). It holds a few idle libgit2
//! handles ([`MAX_IDLE_HANDLES`]; `git2::Repository` is `Send` but not `Sync`, so a handle is
//! lent to one thread at a time and a thread finding none idle opens another), and it runs at
//! most one fetch of refs at a time: a unit asking for a fetch that must have started at or
//! after an instant ([`Shared::fetch_refs`]) takes the outcome of the last one when it started
//! late enough, waits for the one running, or starts one — so one push seen by many units is
//! fetched once. A fetch of one commit by id ([`Shared::fetch_commit`]) waits its turn too.
//!
//! A fetch that moves a branch also records which files the move changed ([`super::moves::Moved`]: one
//! tree diff per branch, computed by the thread that fetched), so that each unit of a push
//! learns whether the push touched its path without reading the mirror itself
//! ([`Shared::fetched_since`], [`Shared::moved`]): at 1,000 units of one repository, the one
//! unit a push changed no longer queues behind 999 units' tree reads.
//!
//! The registry of open mirrors and [`Shared`] are here; by role: `layout` (where a mirror
//! lives: its directory, named and keyed), `handles` (the libgit2 handles a mirror lends),
//! `fetch` (one fetch or reclone at a time, its outcome taken by the units that asked) and
//! `learned` (what a fetch learned for the units: each branch move's changed files, and
//! which short names another ref shadows).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, LazyLock, Mutex, Weak};

use git2::Repository;

use self::fetch::FetchState;
use self::layout::is_single_component;
use super::{Error, Result, SourceSpec, mirror};

mod fetch;
mod handles;
mod layout;
mod learned;

pub use fetch::fetches_total;
pub use handles::{Handle, MAX_IDLE_HANDLES};
pub use layout::mirror_dir;

/// The open mirrors of this process by directory.
static OPEN: LazyLock<Mutex<HashMap<PathBuf, Weak<Shared>>>> = LazyLock::new(Default::default);

/// Opens the mirror of `spec` (see [`mirror_dir`]), creating it if no unit of this process has
/// it open and it is not on disk. A git unit's mirror of the layout before mirrors were shared
/// (`mirrors/<unit>`) is removed then (logged `per-unit mirror removed`): its objects are
/// fetched once more into the shared mirror, and nothing else is lost.
///
/// Errors: [`Error::OpenMirror`] when the directory cannot be created, opened or removed (a
/// read-only state directory), or an artifact unit's name is not one path component.
pub fn open(state_dir: &Path, spec: &SourceSpec, url: &str) -> Result<Arc<Shared>> {
    let dir = mirror_dir(state_dir, spec, url)?;
    let shared = open_dir(dir.clone(), spec, url)?;
    if !spec.repo.starts_with("oci://") && is_single_component(&spec.unit) {
        let old = state_dir.join("mirrors").join(&spec.unit);
        if old.join("HEAD").exists() || old.join("objects").is_dir() {
            std::fs::remove_dir_all(&old).map_err(|e| Error::OpenMirror {
                unit: spec.unit.clone(),
                path: old.clone(),
                message: format!("cannot remove the per-unit mirror: {e}"),
            })?;
            tracing::info!(unit = %spec.unit, removed = %old.display(), mirror = %dir.display(), "per-unit mirror removed: units of one repository and credentials share one mirror");
        }
    }
    Ok(shared)
}

/// The open mirror of `dir`: the one this process has open, or the directory opened (created
/// when missing) and registered.
fn open_dir(dir: PathBuf, spec: &SourceSpec, url: &str) -> Result<Arc<Shared>> {
    let mut open = OPEN.lock().expect("mirror registry lock");
    open.retain(|_, weak| weak.strong_count() > 0);
    if let Some(shared) = open.get(&dir).and_then(Weak::upgrade) {
        return Ok(shared);
    }
    let repo = mirror::open_or_init(&dir, &spec.unit)?;
    let shared = Arc::new(Shared {
        url: url.to_string(),
        idle: Mutex::new(vec![repo]),
        generation: AtomicU64::new(0),
        fetch: Mutex::new(FetchState::default()),
        fetches: AtomicU64::new(0),
        fetched: Condvar::new(),
        ended: tokio::sync::watch::Sender::new(0),
        moved: Mutex::new(HashMap::new()),
        shadows: Mutex::default(),
        path: dir.clone(),
    });
    open.insert(dir, Arc::downgrade(&shared));
    Ok(shared)
}

/// One mirror directory as this process has it open: idle handles and the fetch in progress.
pub struct Shared {
    path: PathBuf,
    /// The URL fetched (normalised, possibly with a token: never logged as is).
    url: String,
    /// Handles not lent out.
    idle: Mutex<Vec<Repository>>,
    /// Moves when the directory is replaced ([`Shared::reclone`]): handles opened before are
    /// closed when returned, not kept.
    generation: AtomicU64,
    fetch: Mutex<FetchState>,
    /// Fetches of refs this mirror ran (not those it served from another's).
    fetches: AtomicU64,
    /// Signalled when a fetch or a reclone ends.
    fetched: Condvar,
    /// The same, for async waiters ([`Shared::fetched_since`]): the count of ends.
    ended: tokio::sync::watch::Sender<u64>,
    /// Branch → its last move by a fetch of this process.
    moved: Mutex<HashMap<String, Arc<super::moves::Moved>>>,
    /// What [`Shared::shadowed`] read of the refs since the last fetch.
    shadows: Mutex<super::shadows::Shadows>,
}

impl Shared {
    /// The mirror directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The URL fetched, as normalised.
    pub(super) fn url(&self) -> &str {
        &self.url
    }
}

/// Holds the registry lock for tests that open the same directory twice.
#[cfg(test)]
fn registry() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Weak<Shared>>> {
    OPEN.lock().expect("mirror registry lock")
}

#[cfg(test)]
pub(super) mod tests;
