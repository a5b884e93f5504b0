//! The one error type of the source module.

use std::path::PathBuf;

use super::Revision;

/// Why the git side of a sync unit failed. Every message starts with the unit's name.
///
/// Retrying ([`Error::is_retryable`]): [`FetchFailed`](Error::FetchFailed) and
/// [`Credentials`](Error::Credentials) are worth retrying with exponential backoff (a network
/// or server hiccup; a token file rotated in place is re-read on every fetch), as is
/// [`Git`](Error::Git) and [`ReadObject`](Error::ReadObject). [`RefNotFound`](Error::RefNotFound),
/// [`PathNotFound`](Error::PathNotFound), [`PathIsFile`](Error::PathIsFile) and
/// [`FileTooLarge`](Error::FileTooLarge) describe
/// what is in git: nothing changes until a new push, so the next poll or push trigger is soon
/// enough. [`OpenMirror`](Error::OpenMirror), [`HostKeyCheck`](Error::HostKeyCheck),
/// [`AmbiguousRef`](Error::AmbiguousRef), [`AmbiguousName`](Error::AmbiguousName),
/// [`NotACommit`](Error::NotACommit) and [`ReadBlob`](Error::ReadBlob) need a fix by
/// someone (disk, known_hosts, config) and are not retried; nor is
/// [`Unverified`](Error::Unverified): a revision not signed by a trusted key stays so until a
/// new push or a new key.
///
/// Messages carry no secrets: URLs are printed with their userinfo replaced by `***`, and
/// credential errors name files, never their contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The mirror directory could not be created or opened (bad unit name, permissions, not a
    /// git repository).
    #[error("{unit}: cannot open mirror at {}: {message}", path.display())]
    OpenMirror {
        /// The sync unit.
        unit: String,
        /// The mirror directory.
        path: PathBuf,
        /// What libgit2 or the file system said.
        message: String,
    },
    /// The fetch from the remote failed: unreachable, not a repository, network error, server
    /// error. The mirror is left as it was.
    #[error("{unit}: fetch from {repo} failed: {message}")]
    FetchFailed {
        /// The sync unit.
        unit: String,
        /// The remote URL, userinfo redacted.
        repo: String,
        /// What libgit2 said, userinfo redacted.
        message: String,
    },
    /// Authentication failed: no usable credential configured for what the remote asks, an
    /// unreadable or empty credential file, or the remote rejected the credential
    /// [`MAX_AUTH_ATTEMPTS`](super::MAX_AUTH_ATTEMPTS) times.
    #[error("{unit}: authentication to {repo} failed: {message}")]
    Credentials {
        /// The sync unit.
        unit: String,
        /// The remote URL, userinfo redacted.
        repo: String,
        /// What went wrong; names files, never their contents.
        message: String,
    },
    /// The SSH host key of the remote is not in the configured known_hosts file, or differs
    /// from it, or is revoked there.
    #[error("{unit}: host key check for {repo} failed: {message}")]
    HostKeyCheck {
        /// The sync unit.
        unit: String,
        /// The remote URL, userinfo redacted.
        repo: String,
        /// Which host, which file, and what did not match.
        message: String,
    },
    /// The reference is neither a branch, nor a tag, nor a commit (SHA or SHA prefix) in the
    /// mirror (after the last fetch, or before any). The message names the repository and the
    /// branches and tags closest to the reference, so that a typo shows its fix:
    /// `shop: reference "mian" not found in https://git.example.com/shop.git: no branch, tag or
    /// commit of that name; closest: branch main, tag v1.0.0`.
    #[error("{unit}: reference {reference:?} not found{}: no branch, tag or commit of that name{}",
        repository.as_deref().map(|r| format!(" in {r}")).unwrap_or_default(),
        if closest.is_empty() { String::new() } else { format!("; closest: {}", closest.join(", ")) })]
    RefNotFound {
        /// The sync unit.
        unit: String,
        /// The reference as configured.
        reference: String,
        /// The repository's URL, credentials removed ([`crate::telemetry::url::redact`]).
        repository: Option<String>,
        /// Up to three of the mirror's branches and tags nearest the reference by edit distance
        /// (`branch main`, `tag v1.0.0`), nearest first; empty when it has none.
        closest: Vec<String>,
    },
    /// The reference is a SHA prefix that more than one object in the mirror starts with.
    #[error("{unit}: reference {reference:?} is an ambiguous commit prefix: give more digits")]
    AmbiguousRef {
        /// The sync unit.
        unit: String,
        /// The reference as configured.
        reference: String,
    },
    /// `[sync.verify]` is set and the short name `ref` gives matches more than one ref (a
    /// branch and a tag both named `release`), or a ref and a commit's abbreviated id: git
    /// would warn "refname is ambiguous" and pick the first, so a push of the other kind of
    /// ref could choose what is synced. Needs a full name in the config.
    #[error(
        "{unit}: reference {reference:?} is ambiguous: it names {}; [sync.verify] takes only a name \
         that matches one ref: write it in full (e.g. {})",
        matches.join(" and "),
        matches[0]
    )]
    AmbiguousName {
        /// The sync unit.
        unit: String,
        /// The reference as configured.
        reference: String,
        /// What it matches, in git's order: full ref names, then `commit <sha>`.
        matches: Vec<String>,
    },
    /// The ref the reference resolves to leads to a tree or a blob, not a commit (git's
    /// `<ref>^{commit}` fails alike).
    #[error("{unit}: reference {reference:?} resolves to {name}, which names no commit")]
    NotACommit {
        /// The sync unit.
        unit: String,
        /// The reference as configured.
        reference: String,
        /// The full name of the ref it resolved to.
        name: String,
    },
    /// The unit's path does not exist at the revision.
    #[error("{unit}: path {path:?} not found at revision {revision}")]
    PathNotFound {
        /// The sync unit.
        unit: String,
        /// The revision that was listed.
        revision: Revision,
        /// The path as configured (normalised: no leading or trailing `/`).
        path: String,
    },
    /// The unit's path names a file at the revision: a unit applies a directory.
    #[error(
        "{unit}: path {path:?} is a file at revision {revision}, not a directory: set `path` to the directory \
         that holds it (every manifest under it is applied)"
    )]
    PathIsFile {
        /// The sync unit.
        unit: String,
        /// The revision that was listed.
        revision: Revision,
        /// The path as configured (normalised).
        path: String,
    },
    /// A manifest file is larger than the unit's `max_file_bytes`; nothing of the revision is
    /// used.
    #[error("{unit}: file {path} is {size} bytes, over the limit of {limit} bytes")]
    FileTooLarge {
        /// The sync unit.
        unit: String,
        /// The file, relative to the repository root.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// The configured limit in bytes.
        limit: u64,
    },
    /// A blob could not be read: not a valid object id, or no such blob in the mirror.
    #[error("{unit}: cannot read blob {oid}: {message}")]
    ReadBlob {
        /// The sync unit.
        unit: String,
        /// The object id as given.
        oid: String,
        /// What libgit2 said.
        message: String,
    },
    /// An object of a revision's tree, at a path, could not be read from the mirror (a lost or
    /// corrupt object): the mirror, not the content, is at fault.
    #[error("{unit}: {path}: reading from git: {message}")]
    ReadObject {
        /// The sync unit.
        unit: String,
        /// Its path, relative to the repository root.
        path: String,
        /// What libgit2 said.
        message: String,
    },
    /// `[sync.verify]` is set and the revision's commit (or the annotated tag its reference
    /// names) is not signed by a trusted key: nothing of the revision is read.
    #[error("{unit}: revision {revision} refused: {reason}")]
    Unverified {
        /// The sync unit.
        unit: String,
        /// The revision refused.
        revision: Revision,
        /// Why, as a label.
        failure: super::VerifyFailure,
        /// The sentence: which commit or tag, and what is wrong with its signature.
        reason: String,
        /// Who signed it, when known: an SSH key's principals and fingerprint, an OpenPGP
        /// key's fingerprint and user ID, or the fingerprint of an unknown key.
        signer: Option<String>,
    },
    /// A chart repository or registry answered, but not with the chart asked for: its index or
    /// manifest does not parse, no version matches the range, the archive's digest differs from
    /// the one the index or manifest gives. Nothing changes until the repository does, so the
    /// next poll is soon enough.
    #[error("{unit}: {url}: {message}")]
    Chart {
        /// The sync unit.
        unit: String,
        /// The index, chart or archive URL (userinfo redacted), or the `Chart.yaml` whose
        /// dependency was refused.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// An OCI artifact (`repo = "oci://…"`) was pulled but cannot be used: its manifest has no
    /// layer of manifests, the layer is not a tar+gzip, or an entry would leave the tree (a
    /// `..` or absolute path, a symbolic link pointing out, a device file). Names the URL and
    /// the entry; nothing of the artifact is applied.
    #[error("{unit}: {url}: {message}")]
    Artifact {
        /// The sync unit.
        unit: String,
        /// The artifact's URL (`oci://host/path:tag`).
        url: String,
        /// What is wrong, naming the tar entry when one is.
        message: String,
    },
    /// An entry of a revision's tree or of an archive that the door ([`super::door`]) refuses
    /// to write: a name git refuses on checkout (`..`, `.git`, a `/` in a name), a path twice,
    /// a hard link or device, a symbolic link whose resolution leaves the tree, or an archive
    /// that is truncated, corrupt or over its cap. Nothing of the revision is used; it changes
    /// only with a new revision.
    #[error("{}", refused_message(unit, within.as_deref(), path, reason))]
    Refused {
        /// The sync unit.
        unit: String,
        /// The archive (its URL or name) the entry is in; `None` for the revision's git tree.
        within: Option<String>,
        /// The entry's path in the tree or archive, as stored (`""` when the archive itself is
        /// refused).
        path: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// Any other libgit2 failure while reading the mirror (missing commit or tree, corrupt
    /// object, I/O error).
    #[error("{unit}: {step} failed: {message}")]
    Git {
        /// The sync unit.
        unit: String,
        /// What was being done, e.g. `read commit`.
        step: &'static str,
        /// What libgit2 said.
        message: String,
    },
}

impl Error {
    /// Whether retrying the same operation with backoff may succeed without anyone pushing or
    /// changing config (see the enum doc).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::FetchFailed { .. } | Error::Credentials { .. } | Error::Git { .. } | Error::ReadObject { .. }
        )
    }

    /// A stable snake_case name of the variant, for metric labels: `fetch_failed`,
    /// `ref_not_found`, ….
    pub fn label(&self) -> &'static str {
        match self {
            Error::OpenMirror { .. } => "open_mirror",
            Error::FetchFailed { .. } => "fetch_failed",
            Error::Credentials { .. } => "credentials",
            Error::HostKeyCheck { .. } => "host_key_check",
            Error::RefNotFound { .. } => "ref_not_found",
            Error::AmbiguousRef { .. } => "ambiguous_ref",
            Error::AmbiguousName { .. } => "ambiguous_name",
            Error::NotACommit { .. } => "not_a_commit",
            Error::PathNotFound { .. } => "path_not_found",
            Error::PathIsFile { .. } => "path_is_file",
            Error::FileTooLarge { .. } => "file_too_large",
            Error::ReadBlob { .. } => "read_blob",
            Error::ReadObject { .. } => "read_object",
            Error::Unverified { .. } => "unverified",
            Error::Git { .. } => "git",
            Error::Chart { .. } => "chart",
            Error::Artifact { .. } => "artifact",
            Error::Refused { .. } => "refused",
        }
    }

    /// The same error naming `unit`: a fetch of a shared mirror fails for every unit that
    /// took its outcome, and each reports it as its own. Only the errors of a fetch (opening
    /// the mirror, the fetch, credentials, host key) are renamed; others come back as they are.
    pub(crate) fn for_unit(mut self, unit: &str) -> Self {
        if let Error::OpenMirror { unit: named, .. }
        | Error::FetchFailed { unit: named, .. }
        | Error::Credentials { unit: named, .. }
        | Error::HostKeyCheck { unit: named, .. }
        | Error::Git { unit: named, .. } = &mut self
        {
            *named = unit.to_string();
        }
        self
    }

    /// Builds [`Error::Git`] from a libgit2 error.
    pub(crate) fn git(unit: &str, step: &'static str, error: &git2::Error) -> Self {
        Error::Git { unit: unit.to_string(), step, message: error.message().to_string() }
    }
}

/// The sentence of [`Error::Refused`]: `unit: path: refused: reason` for an entry of the git
/// tree, `unit: archive: entry path: refused: reason` for an archive's, `unit: archive:
/// refused: reason` for an archive as a whole.
fn refused_message(unit: &str, within: Option<&str>, path: &str, reason: &str) -> String {
    match (within, path) {
        (None, path) => format!("{unit}: {path}: refused: {reason}"),
        (Some(archive), "") => format!("{unit}: {archive}: refused: {reason}"),
        (Some(archive), path) => format!("{unit}: {archive}: entry {path}: refused: {reason}"),
    }
}

impl Error {
    /// [`Error::Refused`] for an entry of the revision's git tree (`within` `None`) or of an
    /// archive.
    pub fn refused(unit: &str, within: Option<&str>, refusal: super::door::Refusal) -> Self {
        let (path, reason) = (refusal.path, refusal.reason);
        Error::Refused { unit: unit.to_owned(), within: within.map(str::to_owned), path, reason }
    }

    /// [`Error::Refused`] for the archive `within` ([`super::door::archive`]).
    pub fn refused_archive(unit: &str, within: &str, error: super::door::archive::ArchiveError) -> Self {
        use super::door::archive::ArchiveError as A;
        let (path, reason) = match error {
            A::Entry(refusal) => (refusal.path, refusal.reason),
            A::FilesTooLarge { path, limit } => (path, format!("the archive's files total more than {limit} bytes")),
            other => (String::new(), other.to_string()),
        };
        Error::Refused { unit: unit.to_owned(), within: Some(within.to_owned()), path, reason }
    }
}

/// The result type of the source module.
pub type Result<T> = std::result::Result<T, Error>;
