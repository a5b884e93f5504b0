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

use std::collections::HashMap;
use std::ops::Deref;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, Weak};
use std::time::Instant;

use git2::Repository;
use sha2::{Digest, Sha256};

use super::{Error, Result, SourceSpec, mirror};

/// Idle libgit2 handles kept per mirror. More threads may read at once (each opens its own
/// handle); those beyond this are closed when returned. A handle keeps libgit2's object cache
/// of the trees and commits it read, so this bounds what a mirror holds at rest.
pub const MAX_IDLE_HANDLES: usize = 4;

/// Fetches of refs this process ran, by whether they moved a branch or tag.
static FETCHES: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// How many fetches of refs from git remotes this process has run, as (moved a branch or
/// tag, moved nothing, failed): `gitward_git_fetches_total{result="updated"|"unchanged"|"failed"}`.
/// A unit that takes the outcome of another unit's fetch adds nothing.
pub fn fetches_total() -> (u64, u64, u64) {
    let [updated, unchanged, failed] = &FETCHES;
    (updated.load(Ordering::Relaxed), unchanged.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

/// The open mirrors of this process by directory.
static OPEN: LazyLock<Mutex<HashMap<PathBuf, Weak<Shared>>>> = LazyLock::new(Default::default);

/// The directory of `spec`'s mirror under `state_dir`: shared by repository and credentials
/// for a git unit (`mirrors/<name>.<key>`), the unit's own (`mirrors/<unit>`) for an OCI
/// artifact unit, whose revisions are unpacked into it.
///
/// Errors: [`Error::OpenMirror`] when an artifact unit's name is not one path component.
pub fn mirror_dir(state_dir: &Path, spec: &SourceSpec, url: &str) -> Result<PathBuf> {
    let mirrors = state_dir.join("mirrors");
    if spec.repo.starts_with("oci://") {
        return per_unit_dir(&mirrors, &spec.unit);
    }
    let c = &spec.credentials;
    let mut hash = Sha256::new();
    for part in [
        Some(url),
        c.ssh_key_file.as_deref().and_then(Path::to_str),
        c.known_hosts_file.as_deref().and_then(Path::to_str),
    ]
    .into_iter()
    .chain([c.token_file.as_deref().and_then(Path::to_str), c.username.as_deref()])
    {
        // A tag per part, so an unset setting and an empty one differ, and parts cannot run together.
        match part {
            Some(text) => hash.update([b"s".as_slice(), &(text.len() as u64).to_le_bytes(), text.as_bytes()].concat()),
            None => hash.update(b"n"),
        }
    }
    let key: String = hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    Ok(mirrors.join(format!("{}.{key}", readable_name(url))))
}

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

/// The fetch of refs in progress and the last one's outcome.
#[derive(Default)]
struct FetchState {
    /// A fetch or a reclone is running.
    running: bool,
    /// When the last fetch that ended started, and its outcome.
    last: Option<(Instant, Result<()>)>,
}

/// The fetch or reclone a thread runs: ended when dropped, with `last` as its outcome (none
/// when it panicked), so the units waiting for it never wait for ever.
struct Running<'s> {
    shared: &'s Shared,
    last: Option<(Instant, Result<()>)>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.shared.finish(self.last.take());
    }
}

/// A libgit2 handle lent by a [`Shared`] mirror; returned to it when dropped.
pub struct Handle<'s> {
    shared: &'s Shared,
    repo: Option<Repository>,
    generation: u64,
}

impl Deref for Handle<'_> {
    type Target = Repository;

    fn deref(&self) -> &Repository {
        self.repo.as_ref().expect("a lent handle")
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        let Some(repo) = self.repo.take() else { return };
        if self.generation != self.shared.generation.load(Ordering::Acquire) {
            return;
        }
        let mut idle = self.shared.idle.lock().expect("mirror handles lock");
        if idle.len() < MAX_IDLE_HANDLES {
            idle.push(repo);
        }
    }
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

    /// Lends a handle: an idle one, or a new one when every handle is in use.
    ///
    /// Errors: [`Error::OpenMirror`] for `unit` when the directory cannot be opened.
    pub(super) fn handle(&self, unit: &str) -> Result<Handle<'_>> {
        let generation = self.generation.load(Ordering::Acquire);
        let repo = self.idle.lock().expect("mirror handles lock").pop();
        let repo = match repo {
            Some(repo) => repo,
            None => mirror::open(&self.path, unit)?,
        };
        Ok(Handle { shared: self, repo: Some(repo), generation })
    }

    /// The generation of the directory: compare with a later one to learn whether it was
    /// cloned again meanwhile.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Fetches all branches and tags unless a fetch that started at or after `not_before` has
    /// ended (its outcome is returned) or is running (it is waited for). A failed fetch's
    /// error is returned to every unit that took it, naming that unit. Blocking.
    ///
    /// Errors: those of a fetch ([`Error::FetchFailed`], [`Error::Credentials`],
    /// [`Error::HostKeyCheck`], [`Error::OpenMirror`]).
    pub(super) fn fetch_refs(&self, spec: &SourceSpec, not_before: Instant) -> Result<()> {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        loop {
            if let Some((started, outcome)) = &state.last
                && *started >= not_before
            {
                return outcome.clone().map_err(|e| e.for_unit(&spec.unit));
            }
            if !state.running {
                break;
            }
            state = self.fetched.wait(state).expect("mirror fetch lock");
        }
        state.running = true;
        drop(state);
        let mut running = Running { shared: self, last: None };
        let started = Instant::now();
        let outcome = self.handle(&spec.unit).and_then(|repo| {
            let before = mirror::tips(&repo);
            mirror::fetch_refs(&repo, spec, &self.url)?;
            let after = mirror::tips(&repo);
            if after != before {
                self.record_moves(&repo, &before, &after);
            }
            Ok(after != before)
        });
        let result = match &outcome {
            Ok(true) => "updated",
            Ok(false) => "unchanged",
            Err(_) => "failed",
        };
        FETCHES[match result {
            "updated" => 0,
            "unchanged" => 1,
            _ => 2,
        }]
        .fetch_add(1, Ordering::Relaxed);
        let fetches = self.fetches.fetch_add(1, Ordering::Relaxed) + 1;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        tracing::debug!(unit = %spec.unit, mirror = %self.path.display(), result, fetches, elapsed_ms, "mirror fetched");
        let outcome = outcome.map(|_| ());
        running.last = Some((started, outcome.clone()));
        outcome
    }

    /// Fetches the commit `sha` by id ([`mirror::fetch_commit`]) once no fetch or reclone of
    /// this mirror runs, and holds the mirror's one-fetch-at-a-time turn while it does: two
    /// fetches into one mirror at once would race for its `FETCH_HEAD` and ref locks. Its
    /// outcome is not a fetch of refs: units waiting for one are woken but do not take it.
    /// Blocking.
    ///
    /// Errors: those of [`mirror::fetch_commit`].
    pub(super) fn fetch_commit(&self, spec: &SourceSpec, sha: &str) -> Result<()> {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        while state.running {
            state = self.fetched.wait(state).expect("mirror fetch lock");
        }
        state.running = true;
        drop(state);
        let _running = Running { shared: self, last: None };
        self.handle(&spec.unit).and_then(|repo| mirror::fetch_commit(&repo, spec, &self.url, sha))
    }

    /// Waits, without blocking a thread, until a fetch of refs that started at or after
    /// `not_before` has ended, and returns its outcome; starts one on the blocking pool
    /// ([`Shared::fetch_refs`]) when none has started since. Many units of one push call this
    /// at once: one fetches, the others wait on a channel, not each on a thread of their own.
    ///
    /// Errors: those of [`Shared::fetch_refs`]; [`Error::FetchFailed`] when the fetching task
    /// panicked.
    pub(super) async fn fetched_since(self: &Arc<Self>, spec: &SourceSpec, not_before: Instant) -> Result<()> {
        let mut ended = self.ended.subscribe();
        loop {
            let start = {
                let state = self.fetch.lock().expect("mirror fetch lock");
                if let Some((started, outcome)) = &state.last
                    && *started >= not_before
                {
                    return outcome.clone().map_err(|e| e.for_unit(&spec.unit));
                }
                !state.running
            };
            if start {
                let (shared, owned) = (self.clone(), spec.clone());
                return tokio::task::spawn_blocking(move || shared.fetch_refs(&owned, not_before))
                    .await
                    .unwrap_or_else(|e| Err(self.failed(spec, format!("the fetch stopped: {e}"))));
            }
            if ended.changed().await.is_err() {
                return Err(self.failed(spec, "the mirror was closed".into()));
            }
        }
    }

    /// A fetch failure of `spec`'s unit that libgit2 did not report.
    fn failed(&self, spec: &SourceSpec, message: String) -> Error {
        Error::FetchFailed { unit: spec.unit.clone(), repo: super::remote::redact(&self.url), message }
    }

    /// Fetches of refs this mirror ran.
    #[cfg(test)]
    pub(super) fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Whether the short reference `name` is shadowed by another ref ([`super::probe`]), read by
    /// `read` once per fetch (and reclone) for all the units that follow it: at 10,000 units
    /// a push had every unit open a handle and look two refs up.
    pub(super) fn shadowed(&self, name: &str, read: impl FnOnce() -> bool) -> bool {
        let at = (self.fetches.load(Ordering::Acquire), self.generation.load(Ordering::Acquire));
        super::shadows::Shadows::answer(&self.shadows, at, name, read)
    }

    /// The last move of `branch` (`refs/heads/…`) by a fetch of this process, if any.
    pub(super) fn moved(&self, branch: &str) -> Option<Arc<super::moves::Moved>> {
        self.moved.lock().expect("mirror moves lock").get(branch).cloned()
    }

    /// Records, for each branch that moved from one commit to another between `before` and
    /// `after` (sorted tips), the paths its move changed: one tree-to-tree diff each, whose
    /// walk skips subtrees with the same id. A failed diff removes that branch's record.
    fn record_moves(
        &self,
        repo: &git2::Repository,
        before: &[(String, Option<git2::Oid>)],
        after: &[(String, Option<git2::Oid>)],
    ) {
        let old: HashMap<&str, git2::Oid> =
            before.iter().filter_map(|(name, oid)| Some((name.as_str(), (*oid)?))).collect();
        let mut moves = Vec::new();
        for (name, to) in after {
            let (Some(to), Some(from)) = (*to, old.get(name.as_str()).copied()) else { continue };
            if from != to && name.starts_with("refs/heads/") {
                let paths = super::moves::changed_paths(repo, from, to).ok();
                moves.push((name, paths.map(|paths| Arc::new(super::moves::Moved { from, to, paths }))));
            }
        }
        // Taken after the diffs: units read it from async tasks.
        let mut moved = self.moved.lock().expect("mirror moves lock");
        for (name, record) in moves {
            match record {
                Some(record) => moved.insert(name.clone(), record),
                // A move whose diff cannot be read leaves no record, not the previous one.
                None => moved.remove(name),
            };
        }
    }

    /// Replaces the damaged directory by a fresh clone ([`mirror::reclone`]) unless it was
    /// replaced since `seen` ([`Shared::generation`]); handles opened before are closed as they
    /// come back. Runs alone: no fetch runs meanwhile. Blocking.
    ///
    /// Errors: those of [`mirror::reclone`].
    pub(super) fn reclone(&self, spec: &SourceSpec, seen: u64) -> Result<()> {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        while state.running {
            state = self.fetched.wait(state).expect("mirror fetch lock");
        }
        if self.generation() != seen {
            return Ok(());
        }
        state.running = true;
        drop(state);
        let mut running = Running { shared: self, last: None };
        let started = Instant::now();
        let outcome = mirror::reclone(&self.path, spec, &self.url);
        if outcome.is_ok() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            self.idle.lock().expect("mirror handles lock").clear();
            running.last = Some((started, Ok(())));
        }
        outcome
    }

    /// Ends the running fetch or reclone: records its outcome (when given) and wakes the
    /// units waiting.
    fn finish(&self, last: Option<(Instant, Result<()>)>) {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        state.running = false;
        if last.is_some() {
            state.last = last;
        }
        drop(state);
        self.fetched.notify_all();
        self.ended.send_modify(|n| *n += 1);
    }
}

/// Holds the registry lock for tests that open the same directory twice.
#[cfg(test)]
fn registry() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Weak<Shared>>> {
    OPEN.lock().expect("mirror registry lock")
}

/// `mirrors/<unit>`, refusing a unit name that is not one path component.
fn per_unit_dir(mirrors: &Path, unit: &str) -> Result<PathBuf> {
    if !is_single_component(unit) {
        let (unit, path) = (unit.to_string(), mirrors.join(unit));
        return Err(Error::OpenMirror { unit, path, message: "the unit name must be one path component".into() });
    }
    Ok(mirrors.join(unit))
}

/// Whether `unit` names exactly one normal directory (no `/`, not `.` or `..`, not empty).
fn is_single_component(unit: &str) -> bool {
    let mut components = Path::new(unit).components();
    matches!((components.next(), components.next()), (Some(Component::Normal(_)), None)) && !unit.contains(['/', '\\'])
}

/// The repository's last path component without `.git`, reduced to `[a-z0-9-]` (at most 40
/// characters; `repo` when nothing is left): never the URL's user or token.
fn readable_name(url: &str) -> String {
    let path = url.split_once("://").map_or(url, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let path = path.rsplit_once(':').map_or(path, |(_, p)| p);
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    let last = last.strip_suffix(".git").unwrap_or(last);
    let name: String = last
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() { "repo".to_string() } else { name.to_string() }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::source::Credentials;

    /// A unit's spec for `main` of `repo`, at the root, without credentials.
    pub(in crate::source) fn spec(unit: &str, repo: &str) -> SourceSpec {
        SourceSpec {
            unit: unit.into(),
            repo: repo.into(),
            reference: "main".into(),
            path: Default::default(),
            credentials: Credentials::default(),
            max_file_bytes: 1 << 20,
            verify: None,
        }
    }

    #[test]
    fn one_directory_per_url_and_credentials() {
        let state = Path::new("/state");
        let url = "https://git.example.com/acme/fleet.git";
        let a = mirror_dir(state, &spec("a", url), url).unwrap();
        assert_eq!(a, mirror_dir(state, &spec("b", url), url).unwrap(), "units of one URL share");
        assert!(a.file_name().unwrap().to_str().unwrap().starts_with("fleet."), "{}", a.display());
        let other = "https://git.example.com/acme/other.git";
        assert_ne!(a, mirror_dir(state, &spec("a", other), other).unwrap());
        let mut keyed = spec("c", url);
        keyed.credentials.token_file = Some("/run/secrets/token".into());
        assert_ne!(a, mirror_dir(state, &keyed, url).unwrap(), "other credentials, other mirror");
        let mut named = spec("c", url);
        named.credentials.username = Some(String::new());
        assert_ne!(a, mirror_dir(state, &named, url).unwrap(), "an empty setting is not an unset one");
        let artifact = "oci://registry.example.com/acme/fleet";
        assert_eq!(mirror_dir(state, &spec("a", artifact), artifact).unwrap(), state.join("mirrors/a"));
    }

    #[test]
    fn readable_names_carry_no_userinfo() {
        assert_eq!(readable_name("https://bot:s3cr3t@h/o/Shop.git"), "shop");
        assert_eq!(readable_name("git@github.com:acme/fleet.git"), "fleet");
        assert_eq!(readable_name("/srv/git/fleet.git/"), "fleet");
        assert_eq!(readable_name("https://bot:s3cr3t@h"), "repo");
        assert_eq!(readable_name("file:///srv/a_b.git"), "a-b");
    }

    #[test]
    fn artifact_unit_names_that_escape_the_mirrors_directory_are_refused() {
        let state = tempfile::tempdir().unwrap();
        for bad in ["", ".", "..", "a/b", "../x", "/abs"] {
            let result = open(state.path(), &spec(bad, "oci://r/x"), "oci://r/x");
            assert!(matches!(result, Err(Error::OpenMirror { .. })), "{bad:?} was accepted");
        }
    }

    /// Runs `git args` in `dir` with no user or system config; its standard output, trimmed.
    pub(in crate::source) fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Units asking at once for a fetch no older than one instant wait for the one running:
    /// one fetch serves them all, and each gets its outcome.
    #[test]
    fn concurrent_requests_are_served_by_one_fetch() {
        let temp = tempfile::tempdir().unwrap();
        let remote = temp.path().join("remote.git");
        let work = temp.path().join("work");
        git(temp.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
        git(temp.path(), &["init", "-q", work.to_str().unwrap()]);
        std::fs::write(work.join("a.yaml"), "kind: A\n").unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "first"]);
        git(&work, &["push", "-q", remote.to_str().unwrap(), "main"]);
        let url = remote.to_str().unwrap();
        let shared = open(&temp.path().join("state"), &spec("a", url), url).unwrap();
        let asked = Instant::now();
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|scope| {
            for unit in 0..8 {
                let (shared, barrier) = (&shared, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    shared.fetch_refs(&spec(&format!("u{unit}"), url), asked).unwrap();
                });
            }
        });
        assert_eq!(shared.fetches.load(Ordering::Relaxed), 1, "one fetch for eight requests");
        assert!(mirror::tips(&shared.handle("a").unwrap()).iter().any(|(name, _)| name == "refs/heads/main"));
        shared.fetch_refs(&spec("a", url), Instant::now()).unwrap();
        assert_eq!(shared.fetches.load(Ordering::Relaxed), 2, "a later request fetches again");
    }

    #[test]
    fn units_of_one_url_share_one_open_mirror_and_old_ones_go() {
        let state = tempfile::tempdir().unwrap();
        let old = |unit: &str| state.path().join("mirrors").join(unit);
        Repository::init_bare(old("shop")).unwrap();
        Repository::init_bare(old("cart")).unwrap();
        let url = "/srv/git/fleet.git";
        let first = open(state.path(), &spec("shop", url), url).unwrap();
        assert!(!old("shop").exists(), "the per-unit mirror of the old layout is removed");
        assert!(old("cart").exists(), "only the opening unit's");
        let second = open(state.path(), &spec("cart", url), url).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert!(!old("cart").exists(), "removed too when the shared mirror was open already");
        assert!(first.handle("shop").unwrap().is_bare());
        let path = first.path().to_path_buf();
        drop((first, second));
        assert!(registry().get(&path).is_none_or(|w| w.upgrade().is_none()), "closed with its last unit");
        assert!(open(state.path(), &spec("shop", url), url).unwrap().handle("shop").unwrap().is_bare());
    }
}
