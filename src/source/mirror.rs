//! What is done to one bare mirror directory through a libgit2 handle: opening (or creating)
//! it, checking it can be read, fetching into it, and cloning it again when damaged. Who
//! shares the directory and when a fetch runs is [`super::shared`]'s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{AutotagOption, FetchOptions, FetchPrune, Oid, Repository};

use super::credentials::{Auth, Failure};
use super::{Error, Result, SourceSpec, remote, trust};

/// What every fetch of refs asks for: all branches and all tags, force-updated (a force-push on the
/// remote wins) and pruned (a branch deleted on the remote disappears from the mirror).
const REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// Opens the bare repository at `path`, or creates it (and its parents) empty; one libgit2
/// cannot open (`HEAD` or config lost) is removed and created again, empty.
///
/// Errors: [`Error::OpenMirror`] for `unit` when the directory cannot be created or removed.
pub(super) fn open_or_init(path: &Path, unit: &str) -> Result<Repository> {
    let repo = if path.exists() { Repository::open_bare(path).or_else(|_| start_again(path)) } else { init(path) };
    repo.map_err(|e| open_error(unit, path, e.message().to_string()))
}

/// Opens the existing bare repository at `path` (another handle on a mirror already opened).
///
/// Errors: [`Error::OpenMirror`] for `unit`.
pub(super) fn open(path: &Path, unit: &str) -> Result<Repository> {
    Repository::open_bare(path).map_err(|e| open_error(unit, path, e.message().to_string()))
}

/// Whether the revision's commit and its root tree can be read from the object database:
/// false when a pack file is truncated or an object is missing.
pub(super) fn reads(repo: &Repository, revision: &str) -> bool {
    Oid::from_str(revision).and_then(|oid| repo.find_commit(oid)).and_then(|commit| commit.tree()).is_ok()
}

/// Whether every object of the revision can be found: its commit, every tree under its
/// root, and the header of every blob (read from its pack: a truncated pack fails here).
/// Walks the trees with an explicit stack, so a deep tree cannot exhaust the thread's stack.
pub(super) fn reads_all(repo: &Repository, revision: &str) -> bool {
    let walk = || -> std::result::Result<(), git2::Error> {
        let odb = repo.odb()?;
        let mut trees = vec![repo.find_commit(Oid::from_str(revision)?)?.tree_id()];
        while let Some(id) = trees.pop() {
            for entry in repo.find_tree(id)?.iter() {
                match entry.kind() {
                    Some(git2::ObjectType::Tree) => trees.push(entry.id()),
                    Some(git2::ObjectType::Blob) => {
                        odb.read_header(entry.id())?;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    };
    walk().is_ok()
}

/// Whether every branch and tag leads to a commit whose root tree can be read. A mirror
/// with no refs at all is sound (a fetch fills it). Reads a few objects per ref.
pub(super) fn is_sound(repo: &Repository) -> bool {
    let Ok(references) = repo.references() else { return false };
    references.into_iter().all(|reference| {
        let Ok(reference) = reference else { return false };
        let wanted = reference.name().is_ok_and(|n| n.starts_with("refs/heads/") || n.starts_with("refs/tags/"));
        !wanted || reference.peel_to_commit().and_then(|c| c.tree()).is_ok()
    })
}

/// Fills a fresh mirror for the damaged one at `path`: fetches all refs into
/// `<parent>/.<name>.fresh` (an empty bare repository; the leading dot keeps it apart from
/// mirror names), and only when that fetch succeeds removes the old mirror and renames the
/// fresh one into its place. The mirror holds nothing but what the remote has, so nothing is
/// lost; when the remote cannot be reached the old mirror is left as it was. Handles open on
/// the old directory must be dropped by the caller.
///
/// Errors: those of [`fetch_refs`] (the old mirror kept); [`Error::OpenMirror`] when the
/// directories cannot be created, removed or renamed.
pub(super) fn reclone(path: &Path, spec: &SourceSpec, url: &str) -> Result<()> {
    let unit = spec.unit.as_str();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let fresh_path = path.with_file_name(format!(".{name}.fresh"));
    let _ = std::fs::remove_dir_all(&fresh_path);
    let fresh = init(&fresh_path).map_err(|e| open_error(unit, &fresh_path, e.message().to_string()))?;
    if let Err(e) = fetch_refs(&fresh, spec, url) {
        drop(fresh);
        let _ = std::fs::remove_dir_all(&fresh_path);
        return Err(e);
    }
    drop(fresh);
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(open_error(unit, path, e.to_string())),
        _ => {}
    }
    std::fs::rename(&fresh_path, path).map_err(|e| open_error(unit, path, e.to_string()))
}

/// The target of every branch and tag, sorted: what a fetch may move.
pub(super) fn tips(repo: &Repository) -> Vec<(String, Option<Oid>)> {
    let Ok(references) = repo.references() else { return Vec::new() };
    let mut tips: Vec<(String, Option<Oid>)> = references
        .flatten()
        .filter_map(|r| {
            let name = r.name().ok()?.to_owned();
            (name.starts_with("refs/heads/") || name.starts_with("refs/tags/")).then(|| (name, r.target()))
        })
        .collect();
    tips.sort();
    tips
}

/// Fetches all branches and tags ([`REFSPECS`]), pruning refs deleted on the remote.
pub(super) fn fetch_refs(repo: &Repository, spec: &SourceSpec, url: &str) -> Result<()> {
    fetch(repo, spec, url, &REFSPECS, FetchPrune::On)
}

/// Fetches one commit by its full SHA (no ref is written; the objects stay in the object
/// database). Servers must allow unadvertised ids; libgit2's local transport (paths,
/// `file://`) sends only objects reachable from refs, so there it adds nothing.
pub(super) fn fetch_commit(repo: &Repository, spec: &SourceSpec, url: &str, sha: &str) -> Result<()> {
    fetch(repo, spec, url, &[sha], FetchPrune::Off)
}

/// Fetches the pull-request heads under `namespace` (`refs/pull`: GitHub, Gitea, Forgejo;
/// `refs/merge-requests`: GitLab), `+<namespace>/*/head:<namespace>/*/head`, pruning those the
/// remote no longer advertises, then lists them: (number, commit SHA), ascending by number.
/// A ref whose middle part is not a number is left out.
pub(super) fn fetch_pull_heads(
    repo: &Repository,
    spec: &SourceSpec,
    url: &str,
    namespace: &str,
) -> Result<Vec<(u64, String)>> {
    let refspec = format!("+{namespace}/*/head:{namespace}/*/head");
    fetch(repo, spec, url, &[refspec.as_str()], FetchPrune::On)?;
    let glob = format!("{namespace}/*/head");
    let refs = repo.references_glob(&glob).map_err(|e| open_error(&spec.unit, repo.path(), e.message().to_string()))?;
    let mut heads: Vec<(u64, String)> = refs
        .filter_map(|r| r.ok())
        .filter_map(|r| {
            let number =
                r.name().ok()?.strip_prefix(namespace)?.strip_prefix('/')?.strip_suffix("/head")?.parse().ok()?;
            Some((number, r.target()?.to_string()))
        })
        .collect();
    heads.sort();
    Ok(heads)
}

/// Fetches `refspecs` from `url` (an anonymous remote: the URL, which may carry a token,
/// is never written to the mirror's config). Refs move only when the whole fetch succeeds.
fn fetch(repo: &Repository, spec: &SourceSpec, url: &str, refspecs: &[&str], prune: FetchPrune) -> Result<()> {
    let auth = Auth::new(&spec.credentials, remote::ssh_port(url).unwrap_or(22));
    trust::trust_bundle_for(url);
    let mut options = FetchOptions::new();
    options.remote_callbacks(auth.callbacks());
    options.prune(prune).download_tags(AutotagOption::None);
    let fetched = repo.remote_anonymous(url).and_then(|mut remote| remote.fetch(refspecs, Some(&mut options), None));
    fetched.map_err(|error| fetch_error(spec, url, auth.failure(), &error))
}

fn open_error(unit: &str, path: &Path, message: String) -> Error {
    Error::OpenMirror { unit: unit.to_string(), path: PathBuf::from(path), message }
}

/// Sets libgit2's process-wide network timeouts, so that an unreachable or stalled remote fails
/// a fetch with [`Error::FetchFailed`] instead of blocking a worker thread for minutes.
///
/// `connect` bounds establishing a connection (libgit2's default: none, the OS's ~2 minutes);
/// `io` bounds each read or write on an open connection (libgit2's default: none): a remote
/// that stops sending fails the fetch after it. The daemon passes `[daemon]
/// fetch_connect_timeout` and `fetch_idle_timeout` (5 s and 30 s by default). A value over
/// `i32::MAX` ms is capped. The chart and OCI clients built afterwards take the same two
/// ([`network_timeouts`]).
///
/// # Safety
///
/// This writes libgit2 globals without synchronisation (`git_libgit2_opts`): call it once from
/// `main`, before any thread (and so before the tokio runtime) is started.
pub unsafe fn configure_network_timeouts(connect: Duration, io: Duration) {
    let _ = NETWORK_TIMEOUTS.set((connect, io));
    let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the caller guarantees no other thread runs libgit2 yet. Both calls cannot fail.
    unsafe {
        let _ = git2::opts::set_server_connect_timeout_in_milliseconds(millis(connect));
        let _ = git2::opts::set_server_timeout_in_milliseconds(millis(io));
    }
}

/// The timeouts [`configure_network_timeouts`] set, once set.
static NETWORK_TIMEOUTS: std::sync::OnceLock<(Duration, Duration)> = std::sync::OnceLock::new();

/// The connect and idle (per-read) timeouts of fetches, as [`configure_network_timeouts`] set
/// them; the defaults of `[daemon]` (5 s, 30 s) when it was not called.
pub fn network_timeouts() -> (Duration, Duration) {
    NETWORK_TIMEOUTS.get().copied().unwrap_or((Duration::from_secs(5), Duration::from_secs(30)))
}

/// Creates the parent directories and an empty bare repository.
fn init(path: &Path) -> std::result::Result<Repository, git2::Error> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| git2::Error::from_str(&e.to_string()))?;
    }
    Repository::init_bare(path)
}

/// A mirror directory that libgit2 cannot open (its `HEAD` or config lost or damaged) is removed
/// and created again, empty: it is only a copy of the remote, which the next fetch fills.
fn start_again(path: &Path) -> std::result::Result<Repository, git2::Error> {
    std::fs::remove_dir_all(path)
        .map_err(|e| git2::Error::from_str(&format!("not a git repository, and cannot be removed: {e}")))?;
    init(path)
}

/// The error for a failed fetch: a callback's own failure if there was one, else the transport
/// error; URL userinfo redacted from both.
fn fetch_error(spec: &SourceSpec, url: &str, failure: Option<Failure>, error: &git2::Error) -> Error {
    let (unit, repo) = (spec.unit.clone(), remote::redact(url));
    match failure {
        Some(Failure::Credentials(message)) => Error::Credentials { unit, repo, message },
        Some(Failure::HostKey(message)) => Error::HostKeyCheck { unit, repo, message },
        None => {
            let message = match remote::local_path(url) {
                Some(path) if !path.exists() => format!(
                    "no such directory on this host: create the repository there (`git init --bare {}`) or correct \
                     `repo` in this unit's [[sync]] table",
                    path.display()
                ),
                _ => remote::redact_message(url, error.message()),
            };
            Error::FetchFailed { unit, repo, message }
        }
    }
}
