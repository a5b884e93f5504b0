//! Signed revisions only: the check that the commit a reference resolves to (or the annotated
//! tag it names) carries a valid signature by a trusted key ([`VerifySpec`]).
//!
//! What git signs (git's `gpg-interface.c`, and `git verify-commit` / `git verify-tag`): a
//! commit's signature is its `gpgsig` header, over the commit object without that header
//! (libgit2's `git_commit_extract_signature`); a tag's signature is appended to its message,
//! over the tag object up to the line that starts it. An `-----BEGIN SSH SIGNATURE-----` block
//! is an sshsig (OpenSSH `PROTOCOL.sshsig`, namespace `git`), checked with the `ssh-key` crate
//! against git's `allowed_signers` file (`ssh`); a `-----BEGIN PGP SIGNATURE-----` block is an
//! OpenPGP detached signature (RFC 9580), checked with the `pgp` crate against armored public
//! keys (`openpgp`). Nothing shells out to `gpg` or `ssh-keygen`.
//!
//! The key files are read at each check, so a key added or removed counts from the next fetch.
//!
//! `cosign` checks the other kind of source: an OCI manifest (an artifact unit's, an OCI
//! chart's) against a cosign public key, the signature read from the registry.

pub(super) mod cosign;
mod openpgp;
mod ssh;

use std::path::{Path, PathBuf};

use git2::{ErrorCode, Oid, Repository};

use super::{Error, Result, Revision};

/// Which keys a unit's revisions must be signed by (`[sync.verify]`). At least one file is set
/// for verification to mean anything; with neither, every revision is refused as signed by no
/// trusted key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifySpec {
    /// SSH signers in git's `allowed_signers` format (ssh-keygen(1), "ALLOWED SIGNERS").
    pub allowed_signers_file: Option<PathBuf>,
    /// ASCII-armored OpenPGP public keys.
    pub openpgp_keys_file: Option<PathBuf>,
}

/// Why a revision was refused, for log fields and metric labels ([`VerifyFailure::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VerifyFailure {
    /// The commit or tag carries no signature.
    Unsigned,
    /// It is signed, by a key in none of the configured files (or in a format whose file is
    /// not configured).
    UnknownKey,
    /// It is signed by a trusted key, but the signature does not verify: the object was
    /// changed after signing, the namespace is not `git`, the key is outside its validity or
    /// revoked, or the signature format is not one gitward verifies.
    BadSignature,
    /// A key file could not be read or parsed; nothing can be verified until it is fixed.
    KeyFile,
}

impl VerifyFailure {
    /// The label: `unsigned`, `unknown-key`, `bad-signature`, `key-file`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyFailure::Unsigned => "unsigned",
            VerifyFailure::UnknownKey => "unknown-key",
            VerifyFailure::BadSignature => "bad-signature",
            VerifyFailure::KeyFile => "key-file",
        }
    }
}

/// Who signed a verified revision, as its check found them: the key that made the signature
/// and the name its trusted-keys file gives it. `Display` is the log line's `signer` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// Which check verified it.
    pub kind: SignerKind,
    /// The name the trusted keys give the signer: an SSH key's allowed_signers principals, an
    /// OpenPGP key's first user ID (`None` when it has none), the cosign key's file.
    pub identity: Option<String>,
    /// The signing key's fingerprint: an SSH key's as `ssh-keygen -l` prints it
    /// (`SHA256:<base64>`), an OpenPGP primary key's (uppercase hex, also when a subkey made
    /// the signature), a cosign key's `sha256:<hex>` of its SubjectPublicKeyInfo DER.
    pub fingerprint: String,
}

/// The check that verified a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignerKind {
    /// An SSH signature of a commit or tag, against `allowed_signers_file`.
    Ssh,
    /// An OpenPGP signature of a commit or tag, against `openpgp_keys_file`.
    OpenPgp,
    /// A cosign signature of an OCI manifest, against `cosign_public_key_file`.
    Cosign,
}

impl SignerKind {
    /// `ssh`, `openpgp`, `cosign`: as `[sync.verify]`'s checks are named.
    pub fn as_str(self) -> &'static str {
        match self {
            SignerKind::Ssh => "ssh",
            SignerKind::OpenPgp => "openpgp",
            SignerKind::Cosign => "cosign",
        }
    }
}

impl std::fmt::Display for Signer {
    /// `<principals> (<fingerprint>)`, `<fingerprint> (<user ID>)`, `cosign key <file> (<fingerprint>)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let identity = self.identity.as_deref();
        match self.kind {
            SignerKind::Ssh => write!(f, "{} ({})", identity.unwrap_or_default(), self.fingerprint),
            SignerKind::OpenPgp => write!(f, "{} ({})", self.fingerprint, identity.unwrap_or("no user ID")),
            SignerKind::Cosign => write!(f, "cosign key {} ({})", identity.unwrap_or_default(), self.fingerprint),
        }
    }
}

/// A refusal before it is tied to a unit and revision: the failure, the sentence that says
/// what is wrong, and the signer when one is known.
pub(super) struct Refusal {
    pub failure: VerifyFailure,
    pub reason: String,
    pub signer: Option<String>,
}

impl Refusal {
    pub(super) fn new(failure: VerifyFailure, reason: impl Into<String>) -> Self {
        Self { failure, reason: reason.into(), signer: None }
    }

    pub(super) fn by(mut self, signer: impl Into<String>) -> Self {
        self.signer = Some(signer.into());
        self
    }
}

/// What is signed: the commit the reference resolved to, or the annotated tag it named.
#[derive(Debug, Clone, Copy)]
pub(super) enum Subject<'a> {
    /// The commit of the revision.
    Commit(Oid),
    /// An annotated tag object: its name (as configured) and id.
    Tag(&'a str, Oid),
}

/// Checks `subject`'s signature against the keys of `spec`; the signer (an SSH key's
/// principals and fingerprint, an OpenPGP key's fingerprint and user ID) when it verifies.
///
/// Errors: [`Error::Unverified`], naming the commit or tag and the reason; [`Error::Git`] when
/// the object cannot be read from the mirror.
pub(super) fn verify(
    repo: &Repository,
    unit: &str,
    spec: &VerifySpec,
    revision: &Revision,
    subject: Subject<'_>,
) -> Result<Signer> {
    let (what, signed) = match subject {
        Subject::Commit(oid) => (format!("commit {oid}"), commit_signature(repo, unit, oid)?),
        Subject::Tag(name, oid) => (format!("annotated tag {name:?} ({oid})"), tag_signature(repo, unit, oid)?),
    };
    let refuse = |refusal: Refusal| Error::Unverified {
        unit: unit.to_owned(),
        revision: revision.clone(),
        failure: refusal.failure,
        reason: format!("{what} {}", refusal.reason),
        signer: refusal.signer,
    };
    let Some(Signed { signature, payload, time }) = signed else {
        return Err(refuse(Refusal::new(VerifyFailure::Unsigned, format!("is not signed ({})", trusted(spec)))));
    };
    let checked = if signature.starts_with(ssh::ARMOR) {
        match &spec.allowed_signers_file {
            Some(file) => ssh::verify(file, &signature, &payload, time),
            None => Err(Refusal::new(
                VerifyFailure::UnknownKey,
                "has an SSH signature, but [sync.verify] names no allowed_signers_file",
            )),
        }
    } else if signature.starts_with(openpgp::ARMOR) {
        match &spec.openpgp_keys_file {
            Some(file) => openpgp::verify(file, &signature, &payload),
            None => Err(Refusal::new(
                VerifyFailure::UnknownKey,
                "has an OpenPGP signature, but [sync.verify] names no openpgp_keys_file",
            )),
        }
    } else {
        let kind = signature.lines().next().unwrap_or_default().to_owned();
        Err(Refusal::new(
            VerifyFailure::BadSignature,
            format!("has a signature gitward cannot verify ({kind}): only SSH and OpenPGP signatures are"),
        ))
    };
    checked.map_err(refuse)
}

/// Which files the revision is checked against, for the "not signed" message.
fn trusted(spec: &VerifySpec) -> String {
    let files: Vec<String> = [&spec.allowed_signers_file, &spec.openpgp_keys_file]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    format!("[sync.verify] requires a signature by a key in {}", files.join(" or "))
}

/// A signature, what it signs, and when the object says it was made (committer or tagger time,
/// Unix seconds), which an allowed_signers entry's validity is checked against (as git does).
struct Signed {
    signature: String,
    payload: Vec<u8>,
    time: i64,
}

fn commit_signature(repo: &Repository, unit: &str, oid: Oid) -> Result<Option<Signed>> {
    let commit = repo.find_commit(oid).map_err(|e| Error::git(unit, "read commit", &e))?;
    let time = commit.committer().when().seconds();
    match repo.extract_signature(&oid, None) {
        Ok((signature, payload)) => Ok(Some(Signed {
            signature: String::from_utf8_lossy(&signature).into_owned(),
            payload: payload.to_vec(),
            time,
        })),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(Error::git(unit, "read commit signature", &e)),
    }
}

/// A tag's signature is the last armored block of its message; what precedes it is signed.
fn tag_signature(repo: &Repository, unit: &str, oid: Oid) -> Result<Option<Signed>> {
    let tag = repo.find_tag(oid).map_err(|e| Error::git(unit, "read tag", &e))?;
    let time = tag.tagger().map_or(0, |t| t.when().seconds());
    let odb = repo.odb().map_err(|e| Error::git(unit, "open object database", &e))?;
    let object = odb.read(oid).map_err(|e| Error::git(unit, "read tag", &e))?;
    let data = object.data();
    let start = [ssh::ARMOR, openpgp::ARMOR].iter().filter_map(|armor| find_last_line(data, armor.as_bytes())).max();
    Ok(start.map(|at| Signed {
        signature: String::from_utf8_lossy(&data[at..]).into_owned(),
        payload: data[..at].to_vec(),
        time,
    }))
}

/// The offset of the last line of `data` that starts with `prefix`.
fn find_last_line(data: &[u8], prefix: &[u8]) -> Option<usize> {
    (0..data.len()).rev().find(|&at| (at == 0 || data[at - 1] == b'\n') && data[at..].starts_with(prefix))
}

/// Reads a key file whole, for its module's parser; the error names the file.
fn read_key_file(path: &Path, key: &str) -> std::result::Result<String, Refusal> {
    std::fs::read_to_string(path).map_err(|e| {
        Refusal::new(VerifyFailure::KeyFile, format!("cannot be checked: {key} {} cannot be read: {e}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::find_last_line;

    #[test]
    fn a_tag_signature_starts_at_the_last_armor_line() {
        let tag = b"object 1\ntype commit\n\nmsg\n-----BEGIN SSH SIGNATURE-----\nx\n-----END SSH SIGNATURE-----\n";
        let at = find_last_line(tag, b"-----BEGIN SSH SIGNATURE-----").unwrap();
        assert_eq!(&tag[..at], b"object 1\ntype commit\n\nmsg\n");
        assert_eq!(find_last_line(b"msg -----BEGIN SSH SIGNATURE-----", b"-----BEGIN SSH SIGNATURE-----"), None);
    }
}
