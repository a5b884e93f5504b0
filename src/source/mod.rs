//! The git side of a sync unit: a bare mirror of the remote, a ref resolved to a revision, and
//! the manifest files under the unit's path, read straight from the object database.
//!
//! One [`Source`] per sync unit reads a bare mirror under `<state_dir>/mirrors/` (no work
//! tree, ever), shared by the units that follow the same repository with the same credentials
//! (`shared`: one directory, a few libgit2 handles and one fetch at a time per repository).
//! [`Source::fetch`] updates the mirror's branches and tags from the remote with
//! git2 (libgit2) and resolves the unit's reference to a [`Revision`]; [`Source::list_files`]
//! walks the tree at that revision; [`Source::read_blob`] returns one file's bytes;
//! [`Source::tree`] is a [`Tree`], a view of the whole revision for the render step. No other
//! module uses git2.
//!
//! Everything here is blocking I/O: async callers run it in `tokio::task::spawn_blocking`
//! (DESIGN.md, Libraries: git2). Credentials are read from files at fetch time and never kept,
//! printed or logged (DESIGN.md, decision 10).
//!
//! `artifact` is the OCI artifact side (`repo = "oci://…"`): its layer unpacked into the mirror
//! as a commit, so it reads as a git revision.
//!
//! Files: `error` ([`Error`]), `credentials` ([`Credentials`] and the libgit2 credential and
//! host-key callbacks), `known_hosts` (the host-key check), `remote` (URL normalisation and
//! redaction), `mirror` (open, fetch, clone again), `shared` (the mirror of a repository and
//! credentials, its handles and coalesced fetches), `memory` (bounds on the pack files libgit2
//! keeps mapped across every open mirror), `resolve` (reference → commit), `verify` (signed
//! revisions only: the commit's or tag's signature against trusted SSH and OpenPGP keys),
//! `tree` (listing and reading blobs), `trust` (the CA bundle of HTTPS fetches, read on the
//! first one), `view` ([`Tree`]), `dirs` (the directories a
//! `[[sync_set]]`'s glob matches), `door` (the one way repository bytes
//! become files: every entry name, kind and link checked in memory before anything is written).

pub mod artifact;
pub mod chart;
mod credentials;
mod dirs;
pub mod door;
mod error;
mod known_hosts;
mod memory;
mod mirror;
mod moves;
mod probe;
mod remote;
mod resolve;
mod shadows;
mod shared;
mod tree;
mod trust;
mod verify;
mod view;

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub use credentials::{Credentials, MAX_AUTH_ATTEMPTS};
pub use dirs::matching_dirs;
pub use error::{Error, Result};
pub use memory::{MAPPED_PACK_FILES, MAPPED_PACK_LIMIT, limit_mapped_packs};
pub use mirror::{configure_network_timeouts, network_timeouts};
pub use probe::{PushProbe, Touch};
pub use shared::{Handle, MAX_IDLE_HANDLES, fetches_total};
pub use tree::MAX_DEPTH as MAX_TREE_DEPTH;
pub use verify::{Signer, SignerKind, VerifyFailure, VerifySpec};
pub use view::{Entry, EntryKind, ObjectId, Tree};

/// Starts libgit2 for a `gitward` process: without reading the CA bundle, which the first HTTPS
/// fetch reads (`trust`), with `connect` and `io` as its network timeouts
/// ([`configure_network_timeouts`]) and its pack mappings bounded ([`limit_mapped_packs`]).
///
/// # Safety
///
/// This writes the process environment and libgit2 globals without synchronisation: call it
/// once from `main`, before any thread (and so before the tokio runtime) is started and before
/// any other git2 call.
pub unsafe fn start_libgit2(connect: std::time::Duration, io: std::time::Duration) {
    // SAFETY: the caller's guarantee, passed on; libgit2 is started first.
    unsafe {
        trust::start_libgit2();
        configure_network_timeouts(connect, io);
        limit_mapped_packs();
    }
}

/// What one sync unit wants from git: which repository, which reference, which subdirectory.
///
/// Built by the config module from a `[[sync]]` table; [`Source::open`] takes it by value and
/// keeps it for the life of the mirror.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// The sync unit's name: the subject of every error; for an OCI artifact unit also its
    /// mirror's directory name under `<state_dir>/mirrors/`, so it must then be a single path
    /// component (no `/`, not `.`/`..`).
    pub unit: String,
    /// The remote: `https://…`, `ssh://…`, scp-like `git@host:path`, `file:///…`, or a local
    /// path (absolute, or relative to the working directory at [`Source::open`]). A token
    /// embedded in the URL works but is redacted from every error; prefer
    /// [`Credentials::token_file`].
    pub repo: String,
    /// What to sync: a branch name, a tag name, a full ref (`refs/heads/…`, `refs/tags/…`), or a
    /// commit SHA (full, or an unambiguous prefix of at least 4 hex digits), resolved in `git
    /// rev-parse`'s order: a full SHA first, then `refs/<ref>`, tags, branches, then a SHA
    /// prefix (see [`Source::resolve`]).
    pub reference: String,
    /// The subdirectory of the repository that holds this unit's manifests, `/`-separated;
    /// `""` (or `.`, or `/`) is the repository root. Leading and trailing `/` are ignored.
    pub path: crate::config::UnitPath,
    /// How to authenticate to the remote and verify its host key; all unset by default, which
    /// suits public https repositories and local paths.
    pub credentials: Credentials,
    /// The largest manifest file, in bytes, that [`Source::list_files`] accepts; a larger one
    /// fails the listing with [`Error::FileTooLarge`] rather than being read into memory.
    pub max_file_bytes: u64,
    /// The keys a revision must be signed by (`[sync.verify]`); `None` (the default) checks
    /// no signature. See [`Source::resolve`].
    pub verify: Option<VerifySpec>,
}

/// A resolved commit: the full 40-hex-digit SHA-1 of the commit a reference pointed to; for a
/// chart unit, `<chart>@<version>@sha256:<hex>` ([`chart`]).
///
/// `Display` prints it whole; [`Revision::short`] gives the 12-digit form (or `<chart>@<version>`)
/// for logs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Revision(pub String);

impl Revision {
    /// The first 12 hex digits of the SHA (all of it if shorter), for log lines and spans; a
    /// chart revision without its digest (`demo@0.2.0`).
    pub fn short(&self) -> &str {
        if let Some((chart, _)) = self.0.rsplit_once("@sha256:") {
            return chart;
        }
        self.0.get(..12).unwrap_or(&self.0)
    }
}

/// The network host `repo` is fetched from, with its port when its URL names one
/// (`git.example.com`, `127.0.0.1:8080`, an `oci://` registry, the host of an scp-like
/// `git@host:path`); `None` for a local path or a `file://` URL. What fetches are bounded by
/// (`[daemon] max_fetches_per_host`).
pub fn remote_host(repo: &str) -> Option<String> {
    remote::host(repo)
}

/// A revision as the one-line summaries print it (`gitward sync`, `validate`, `status`): a
/// commit's first 7 hex digits, as git prints them; a chart's `<chart>@<version>` (its digest
/// left out, as [`Revision::short`]); an OCI artifact's `sha256:` and 7 hex digits of its
/// digest, after `<tag>@` when it was resolved from a tag. Cutting a chart's
/// `webapp@1.2.0@sha256:…` at 7 characters printed `webapp@`.
pub fn short_revision(revision: &str) -> String {
    const DIGITS: usize = 7;
    let cut = |hex: &str| hex.get(..DIGITS).unwrap_or(hex).to_owned();
    match revision.rsplit_once("@sha256:") {
        Some((chart, _)) if chart.contains('@') => chart.to_owned(),
        Some((tag, hex)) => format!("{tag}@sha256:{}", cut(hex)),
        None => match revision.strip_prefix("sha256:") {
            Some(hex) => format!("sha256:{}", cut(hex)),
            None => cut(revision),
        },
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One file of a tree, as the source lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Path relative to the repository root, `/`-separated; names the file in every message.
    pub path: String,
    /// Git blob id (hex); the parse cache key, since equal ids mean equal content.
    pub oid: String,
    /// Blob size in bytes, as the tree records it; lets callers bound what they read.
    pub size: u64,
}

/// Whether a path names a manifest file: it ends in `.yaml`, `.yml` or `.json` (case-sensitive,
/// as kubectl's `-f DIR` filter).
pub fn is_manifest_path(path: &str) -> bool {
    [".yaml", ".yml", ".json"].iter().any(|ext| path.ends_with(ext))
}

/// Whether a path names a kustomization file (`kustomization.yaml`, `kustomization.yml` or
/// `Kustomization`), which kustomize reads and gitward skips: the manifest reader reports it
/// as skipped. A tree listing that should report a bare `Kustomization` file too lists paths
/// passing this or [`is_manifest_path`].
pub fn is_kustomization_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, "kustomization.yaml" | "kustomization.yml" | "Kustomization")
}

/// The result of [`Source::list_files`]: the manifest files under the unit's path, and what was
/// deliberately not followed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Manifest blobs (see [`Source::list_files`] for which), sorted by path (byte order).
    pub files: Vec<TreeFile>,
    /// Entries that were not followed, as (path relative to the repository root, reason):
    /// symbolic links, submodules (gitlinks), names that are not UTF-8. Sorted by path. The
    /// caller logs each as a warning: the user may expect them to be synced.
    pub skipped: Vec<(String, String)>,
    /// The paths among `skipped` that may hold manifests (a link or name-mangled file ending
    /// in a manifest extension, a submodule, a directory whose name is not UTF-8): the listing
    /// is partial, so the sync must not prune what they may define. Sorted.
    pub partial: Vec<String>,
}

/// The git side of one sync unit: its spec and the bare mirror it reads (shared with the
/// units of the same repository and credentials).
///
/// Not `Sync` but `Send`: move it into `spawn_blocking` and back. Each call borrows a libgit2
/// handle of the mirror for its duration (a [`Tree`] for its life).
pub struct Source {
    spec: Arc<SourceSpec>,
    mirror: Arc<shared::Shared>,
    /// The revision last verified and its signer, so the signer is logged once per revision,
    /// not at every poll.
    verified: std::cell::RefCell<Option<(Revision, Signer)>>,
}

impl Source {
    /// Opens the bare mirror of `spec`'s repository and credentials under
    /// `<state_dir>/mirrors/` (`<name>.<key>`; an OCI artifact unit's own `<unit>`; module
    /// `shared`), creating it (and its parent directories) if it does not exist yet; a unit
    /// of this process that has it open already shares its handles. Nothing is fetched. The
    /// unit's mirror of the per-unit layout, `mirrors/<unit>`, is removed.
    ///
    /// A local path in `spec.repo` is made absolute here. A mirror directory libgit2 cannot
    /// open (`HEAD` or config lost) is removed and created again, empty: the next fetch fills
    /// it. Errors: [`Error::OpenMirror`] when an artifact unit's name is not a single path
    /// component, or the directory cannot be created or removed (a read-only state directory).
    pub fn open(state_dir: &Path, spec: SourceSpec) -> Result<Self> {
        let url = remote::normalise(&spec.repo);
        let mirror = shared::open(state_dir, &spec, &url)?;
        Ok(Self { spec: Arc::new(spec), mirror, verified: Default::default() })
    }

    /// Whether the mirror [`Source::open`] would open for `spec` is on disk under `state_dir`
    /// already (then opening it creates nothing).
    pub fn mirror_exists(state_dir: &Path, spec: &SourceSpec) -> bool {
        shared::mirror_dir(state_dir, spec, &remote::normalise(&spec.repo)).is_ok_and(|dir| dir.is_dir())
    }

    /// Fetches the remote's branches and tags into the mirror, pruning deleted ones, then
    /// resolves the reference (see [`Source::resolve`]): [`Source::fetch_since`] now.
    pub fn fetch(&mut self) -> Result<Revision> {
        self.fetch_since(Instant::now())
    }

    /// Fetches the remote's branches and tags into the mirror, pruning deleted ones, unless a
    /// fetch of the shared mirror that started at or after `not_before` ended or is running
    /// (for another unit of the repository): its outcome is taken, as fresh as asked. Then
    /// resolves the reference (see [`Source::resolve`]). A caller passes the instant the
    /// event that asks for the fetch was seen (a webhook, a ref change), so one push seen by
    /// many units is fetched once.
    ///
    /// Refspecs: `+refs/heads/*:refs/heads/*` and `+refs/tags/*:refs/tags/*`, full history (no
    /// shallow fetch: libgit2 cannot do it over `file://`). When the reference is a full SHA
    /// that no branch or tag reaches, that commit is then asked for by id: git servers need
    /// `uploadpack.allowReachableSHA1InWant` or `allowAnySHA1InWant`; libgit2's local
    /// transport (a path or `file://`) never sends such a commit. Blocking.
    ///
    /// Errors: [`Error::FetchFailed`] (unreachable remote, network), [`Error::Credentials`],
    /// [`Error::HostKeyCheck`], then those of [`Source::resolve`]. A failed fetch leaves the
    /// mirror as it was, so [`Source::resolve`] still returns the last fetched revision.
    ///
    /// A damaged mirror repairs itself: when the fetch or the resolve fails and a branch or tag
    /// of the mirror no longer leads to a readable commit and tree (a truncated pack file, a
    /// lost object), or the resolved revision cannot be read, the mirror is cloned again from
    /// the remote into a fresh directory that then replaces it (a `mirror cloned again`
    /// warning is logged). A missing ref needs no repair: the fetch writes it again. An
    /// unreachable remote leaves a sound mirror untouched, and its error is returned.
    pub fn fetch_since(&mut self, not_before: Instant) -> Result<Revision> {
        let generation = self.mirror.generation();
        let outcome = self.fetch_and_resolve(not_before);
        let damaged = match &outcome {
            Ok(revision) => !mirror::reads(&*self.handle()?, &revision.0),
            // A ref whose object cannot be read resolves to no commit: the mirror is checked.
            Err(
                Error::FetchFailed { .. } | Error::Git { .. } | Error::RefNotFound { .. } | Error::NotACommit { .. },
            ) => !mirror::is_sound(&*self.handle()?),
            Err(_) => false,
        };
        if !damaged {
            return outcome;
        }
        let reason = match &outcome {
            Ok(revision) => format!("revision {revision} cannot be read"),
            Err(error) => error.to_string(),
        };
        self.mirror.reclone(&self.spec, generation)?;
        tracing::warn!(unit = %self.spec.unit, mirror = %self.mirror.path().display(), reason, "mirror damaged; cloned again");
        self.fetch_and_resolve(not_before)
    }

    /// After reading `revision` failed: when an object of it cannot be read from the mirror
    /// (a truncated pack, a lost object), clones the mirror again (see [`Source::fetch`]) and
    /// returns true, so the caller reads again; false when the mirror reads the whole revision
    /// (the failure was the content's, not the mirror's). Blocking; reads every tree and
    /// every blob header of the revision.
    ///
    /// Errors: those of a fetch ([`Error::FetchFailed`], …) when the mirror is damaged and the
    /// remote cannot be reached; [`Error::OpenMirror`] when the fresh mirror cannot be put in
    /// place.
    pub fn repair(&mut self, revision: &Revision) -> Result<bool> {
        let generation = self.mirror.generation();
        if mirror::reads_all(&*self.handle()?, &revision.0) {
            return Ok(false);
        }
        self.mirror.reclone(&self.spec, generation)?;
        let reason = format!("objects of revision {revision} cannot be read");
        tracing::warn!(unit = %self.spec.unit, mirror = %self.mirror.path().display(), reason, "mirror damaged; cloned again");
        Ok(true)
    }

    /// One fetch of refs, then the resolve (with the by-id second chance for a full SHA).
    fn fetch_and_resolve(&mut self, not_before: Instant) -> Result<Revision> {
        self.mirror.fetch_refs(&self.spec, not_before)?;
        match self.resolve() {
            Err(Error::RefNotFound { .. }) if resolve::is_full_sha(&self.spec.reference) => self.fetch_commit_by_id(),
            resolved => resolved,
        }
    }

    /// The heads of the remote's pull requests: fetches `+<namespace>/*/head:<namespace>/*/head`
    /// into the mirror (`refs/pull` on GitHub, Gitea and Forgejo; `refs/merge-requests` on
    /// GitLab), pruning those the remote dropped, and lists them as (number, commit SHA),
    /// ascending. The commits are then in the mirror, so a revision naming one resolves.
    /// A forge keeps the ref of a closed pull request: whether one is open is the forge API's
    /// answer. Blocking.
    ///
    /// Errors: [`Error::FetchFailed`], [`Error::Credentials`], [`Error::HostKeyCheck`] as
    /// [`Source::fetch`]; [`Error::OpenMirror`] when the mirror's refs cannot be listed.
    pub fn fetch_pull_heads(&self, namespace: &str) -> Result<Vec<(u64, String)>> {
        self.mirror.fetch_pull_heads(&self.spec, namespace)
    }

    /// The shared mirror and this unit's spec, for [`PushProbe::touched`] off the
    /// blocking pool.
    pub fn push_probe(&self) -> PushProbe {
        PushProbe::new(self.mirror.clone(), self.spec.clone())
    }

    /// Resolves the reference in the mirror as last fetched, without touching the network, in
    /// the order of `git rev-parse` (refs.c `ref_rev_parse_rules`): a full 40-digit SHA is that
    /// commit (or annotated tag); a full ref (`refs/…`) is taken as given; a short name is the
    /// first of `refs/<ref>`, `refs/tags/<ref>`, `refs/heads/<ref>` (and git's
    /// `refs/remotes/…` rules, which a mirror never holds) that exists, annotated tags peeled to
    /// their commit; then a commit SHA prefix. A tag and a branch of one name: the tag.
    ///
    /// With [`SourceSpec::verify`] set, a short name matching more than one ref (or a ref and
    /// a commit prefix) is refused as ambiguous, so that a branch pushed under a signed tag's
    /// name cannot choose what is synced; and the revision is returned only when it is signed
    /// by a trusted key: the annotated tag's signature when the reference names an annotated
    /// tag, else the commit's (module `verify`). The key files are read at each call. The first
    /// verification of a revision logs its signer (`revision verified`, field `signer`).
    ///
    /// Errors: [`Error::RefNotFound`] (also before the first fetch), [`Error::AmbiguousRef`],
    /// [`Error::AmbiguousName`], [`Error::NotACommit`], [`Error::Unverified`] (not signed,
    /// signed by an unknown key, a signature that does not verify, an unreadable key file).
    pub fn resolve(&self) -> Result<Revision> {
        let (repo, unit) = (self.handle()?, self.spec.unit.as_str());
        let resolved =
            resolve::resolve(&repo, unit, &self.spec.reference, self.spec.verify.is_some()).map_err(|e| match e {
                Error::RefNotFound { unit, reference, closest, .. } => Error::RefNotFound {
                    unit,
                    reference,
                    repository: Some(crate::telemetry::url::redact(&self.spec.repo)),
                    closest,
                },
                other => other,
            })?;
        let Some(spec) = &self.spec.verify else { return Ok(resolved.revision) };
        let subject = match resolved.tag {
            Some(tag) => verify::Subject::Tag(&self.spec.reference, tag),
            None => verify::Subject::Commit(resolve::oid(&resolved.revision)),
        };
        let signer = verify::verify(&repo, unit, spec, &resolved.revision, subject)?;
        let mut verified = self.verified.borrow_mut();
        if verified.as_ref().is_none_or(|(revision, known)| *revision != resolved.revision || *known != signer) {
            tracing::info!(unit, revision = %resolved.revision, signer = %signer, "revision verified");
            *verified = Some((resolved.revision.clone(), signer));
        }
        Ok(resolved.revision)
    }

    /// Who signed `revision`, as its last verification found them ([`Source::resolve`] under
    /// `[sync.verify]`); `None` when the unit verifies nothing or `revision` is not the one
    /// last resolved.
    pub fn signer(&self, revision: &Revision) -> Option<Signer> {
        let verified = self.verified.borrow();
        verified.as_ref().filter(|(known, _)| known == revision).map(|(_, signer)| signer.clone())
    }

    /// Lists the manifest files under the unit's path at `revision`, recursively.
    ///
    /// A file is listed when it is a regular blob (mode 100644 or 100755) whose path passes
    /// [`is_manifest_path`] (`*.yaml`, `*.yml`, `*.json`). Symbolic links and
    /// submodules are never followed; they go to [`Listing::skipped`]. Paths are relative to the
    /// repository root.
    ///
    /// Errors: [`Error::PathNotFound`] when the path does not exist at `revision`,
    /// [`Error::PathIsFile`] when it is a file; [`Error::FileTooLarge`] for the first manifest over `max_file_bytes`;
    /// [`Error::Git`] when the revision or a tree is missing from the mirror.
    pub fn list_files(&self, revision: &Revision) -> Result<Listing> {
        tree::list_files(&*self.handle()?, &self.spec, revision)
    }

    /// The manifest files under the unit's path that `to` adds or modifies relative to `from`
    /// (a tree-to-tree diff, libgit2's `git_diff_tree_to_tree`), sorted by path; deleted files
    /// are left out. `None` when the diff is not a plain edit of at most `max_files` manifest
    /// files that [`Source::list_files`] would list alike: the path missing at either revision,
    /// a kustomization file touched, a link, submodule or mode change, a file over the size
    /// limit. Only the trees on the changed paths are read, so the cost follows the change,
    /// not the size of the tree.
    ///
    /// Errors: [`Error::Git`] when a revision or an object is missing from the mirror.
    pub fn changed_files(&self, from: &Revision, to: &Revision, max_files: usize) -> Result<Option<Vec<TreeFile>>> {
        tree::changed_files(&*self.handle()?, &self.spec, from, to, max_files)
    }

    /// True when the unit's path is the same tree (same object id) at `from` and `to`: a
    /// commit that changed only other paths of the repository (another unit's). Two tree
    /// lookups, no diff. False when the path is missing at either revision.
    ///
    /// Errors: [`Error::Git`] when a revision is missing from the mirror.
    pub fn path_unchanged(&self, from: &Revision, to: &Revision) -> Result<bool> {
        tree::path_unchanged(&*self.handle()?, &self.spec, from, to)
    }

    /// The id (40 hex digits) of the tree at `path` at `revision`: equal ids mean the same
    /// files, so a unit whose objects come from the plain files of that path alone brings the
    /// same objects at both revisions. `None` when nothing, or a file, is at `path`. One tree
    /// lookup per path segment, no diff.
    ///
    /// Errors: [`Error::Git`] when the revision is missing from the mirror.
    pub fn path_tree(&self, revision: &Revision, path: &str) -> Result<Option<String>> {
        tree::path_tree(&*self.handle()?, &self.spec, revision, path)
    }

    /// Returns the bytes of the blob `oid` (40 hex digits, as in [`TreeFile::oid`]) straight
    /// from the mirror's object database; no work tree is involved.
    ///
    /// Errors: [`Error::ReadBlob`] when `oid` is not a valid id or names no blob in the mirror.
    pub fn read_blob(&self, oid: &str) -> Result<Vec<u8>> {
        tree::read_blob(&*self.handle()?, &self.spec.unit, oid)
    }

    /// The whole tree of `revision`, for readers of more than the unit's manifest files (the
    /// render step). Blocking.
    ///
    /// Errors: [`Error::Git`] when the revision is not in the mirror.
    pub fn tree(&self, revision: &Revision) -> Result<Tree<'_>> {
        Tree::new(self.handle()?, &self.spec, revision)
    }

    /// The spec this source was opened with.
    pub fn spec(&self) -> &SourceSpec {
        &self.spec
    }

    /// Where the bare mirror lives: `<state_dir>/mirrors/<name>.<key>` (shared by repository
    /// and credentials), or `<state_dir>/mirrors/<unit>` for an OCI artifact unit.
    pub fn mirror_path(&self) -> &Path {
        self.mirror.path()
    }

    /// The remote URL as fetched, with any userinfo (user, token) replaced by `***`: safe to
    /// log.
    pub fn redacted_url(&self) -> String {
        remote::redact(self.mirror.url())
    }

    /// A libgit2 handle of the mirror, lent for as long as it is held.
    ///
    /// Errors: [`Error::OpenMirror`] when the directory cannot be opened.
    pub(crate) fn handle(&self) -> Result<Handle<'_>> {
        self.mirror.handle(&self.spec.unit)
    }

    /// Second chance for a full SHA reference: fetch that commit by id, then resolve again.
    /// A server that refuses unadvertised ids yields the original [`Error::RefNotFound`].
    fn fetch_commit_by_id(&mut self) -> Result<Revision> {
        let sha = self.spec.reference.to_ascii_lowercase();
        let fetched = self.mirror.fetch_commit(&self.spec, &sha);
        if let Err(error) = fetched {
            tracing::debug!(unit = %self.spec.unit, %error, "fetch by commit id failed");
        }
        self.resolve()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_paths_are_yaml_yml_and_json() {
        assert!(is_manifest_path("a/b.yaml") && is_manifest_path("b.yml") && is_manifest_path("c.json"));
        assert!(!is_manifest_path("README.md") && !is_manifest_path("a.YAML") && !is_manifest_path("Kustomization"));
        assert!(is_kustomization_path("x/Kustomization") && !is_kustomization_path("x/my-kustomization.yaml"));
    }
}
