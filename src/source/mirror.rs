//! The bare mirror of one sync unit: opening (or creating) it, and fetching into it.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use git2::{AutotagOption, FetchOptions, FetchPrune, Repository};

use super::credentials::{Auth, Failure};
use super::{Error, Result, SourceSpec, remote};

/// What every fetch of refs asks for: all branches and all tags, force-updated (a force-push on the
/// remote wins) and pruned (a branch deleted on the remote disappears from the mirror).
const REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// A bare repository under the state directory, holding what was last fetched.
pub(super) struct Mirror {
    repo: Repository,
    path: PathBuf,
}

impl Mirror {
    /// Opens `<state_dir>/mirrors/<unit>`, or creates it as an empty bare repository.
    pub(super) fn open(state_dir: &Path, unit: &str) -> Result<Self> {
        let path = state_dir.join("mirrors").join(unit);
        let error = |message: String| Error::OpenMirror { unit: unit.to_string(), path: path.clone(), message };
        if !is_single_component(unit) {
            return Err(error("the unit name must be one path component".into()));
        }
        let repo = if path.exists() { Repository::open_bare(&path) } else { init(&path) };
        let repo = repo.map_err(|e| error(e.message().to_string()))?;
        Ok(Self { repo, path })
    }

    /// The libgit2 handle.
    pub(super) fn repo(&self) -> &Repository {
        &self.repo
    }

    /// The mirror directory.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Fetches all branches and tags ([`REFSPECS`]), pruning refs deleted on the remote.
    pub(super) fn fetch_refs(&self, spec: &SourceSpec, url: &str) -> Result<()> {
        self.fetch(spec, url, &REFSPECS, FetchPrune::On)
    }

    /// Fetches one commit by its full SHA (no ref is written; the objects stay in the object
    /// database). Servers must allow unadvertised ids; libgit2's local transport (paths,
    /// `file://`) sends only objects reachable from refs, so there it adds nothing.
    pub(super) fn fetch_commit(&self, spec: &SourceSpec, url: &str, sha: &str) -> Result<()> {
        self.fetch(spec, url, &[sha], FetchPrune::Off)
    }

    /// Fetches `refspecs` from `url` (an anonymous remote: the URL, which may carry a token,
    /// is never written to the mirror's config). Refs move only when the whole fetch succeeds.
    fn fetch(&self, spec: &SourceSpec, url: &str, refspecs: &[&str], prune: FetchPrune) -> Result<()> {
        let auth = Auth::new(&spec.credentials, remote::ssh_port(url).unwrap_or(22));
        let mut options = FetchOptions::new();
        options.remote_callbacks(auth.callbacks());
        options.prune(prune).download_tags(AutotagOption::None);
        let fetched =
            self.repo.remote_anonymous(url).and_then(|mut remote| remote.fetch(refspecs, Some(&mut options), None));
        fetched.map_err(|error| fetch_error(spec, url, auth.failure(), &error))
    }
}

/// Sets libgit2's process-wide network timeouts, so that an unreachable or stalled remote fails
/// a fetch with [`Error::FetchFailed`] instead of blocking a worker thread for minutes.
///
/// `connect` bounds establishing a connection (libgit2's default: none, the OS's ~2 minutes);
/// `io` bounds each read or write on an open connection (libgit2's default: none). 10 s and
/// 60 s are reasonable for a daemon. A value over `i32::MAX` ms is capped.
///
/// # Safety
///
/// This writes libgit2 globals without synchronisation (`git_libgit2_opts`): call it once from
/// `main`, before any thread (and so before the tokio runtime) is started.
pub unsafe fn configure_network_timeouts(connect: Duration, io: Duration) {
    let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the caller guarantees no other thread runs libgit2 yet. Both calls cannot fail.
    unsafe {
        let _ = git2::opts::set_server_connect_timeout_in_milliseconds(millis(connect));
        let _ = git2::opts::set_server_timeout_in_milliseconds(millis(io));
    }
}

/// Creates the parent directories and an empty bare repository.
fn init(path: &Path) -> std::result::Result<Repository, git2::Error> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| git2::Error::from_str(&e.to_string()))?;
    }
    Repository::init_bare(path)
}

/// Whether `unit` names exactly one normal directory (no `/`, not `.` or `..`, not empty).
fn is_single_component(unit: &str) -> bool {
    let mut components = Path::new(unit).components();
    matches!((components.next(), components.next()), (Some(Component::Normal(_)), None)) && !unit.contains(['/', '\\'])
}

/// The error for a failed fetch: a callback's own failure if there was one, else the transport
/// error; URL userinfo redacted from both.
fn fetch_error(spec: &SourceSpec, url: &str, failure: Option<Failure>, error: &git2::Error) -> Error {
    let (unit, repo) = (spec.unit.clone(), remote::redact(url));
    match failure {
        Some(Failure::Credentials(message)) => Error::Credentials { unit, repo, message },
        Some(Failure::HostKey(message)) => Error::HostKeyCheck { unit, repo, message },
        None => {
            let message = remote::redact_message(url, error.message());
            Error::FetchFailed { unit, repo, message }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names_that_escape_the_mirrors_directory_are_refused() {
        let state = tempfile::tempdir().unwrap();
        for bad in ["", ".", "..", "a/b", "../x", "/abs"] {
            let result = Mirror::open(state.path(), bad);
            assert!(matches!(result, Err(Error::OpenMirror { .. })), "{bad:?} was accepted");
        }
    }

    #[test]
    fn opening_twice_reuses_the_bare_mirror() {
        let state = tempfile::tempdir().unwrap();
        let first = Mirror::open(state.path(), "shop").unwrap();
        assert!(first.repo().is_bare());
        assert_eq!(first.path(), state.path().join("mirrors/shop"));
        drop(first);
        assert!(Mirror::open(state.path(), "shop").unwrap().repo().is_bare());
    }
}
