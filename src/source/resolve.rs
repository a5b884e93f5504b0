//! Resolving a unit's reference (branch, tag, full ref or commit SHA) to a [`Revision`].

use git2::{ErrorCode, Oid, Repository};

use super::{Error, Result, Revision};

/// The shortest SHA prefix accepted, as in git (`core.abbrev` minimum).
const MIN_SHA_PREFIX: usize = 4;

/// A reference resolved: the commit, and the annotated tag object the ref points to when it
/// points to one (a tag's signature is on the tag object; a lightweight tag's, on the commit).
pub(super) struct Resolved {
    /// The commit.
    pub revision: Revision,
    /// The annotated tag object the ref names directly, if any.
    pub tag: Option<Oid>,
}

/// Resolves `reference` in `repo`: a full ref name (`refs/…`) as given; otherwise
/// `refs/heads/<reference>`, then `refs/tags/<reference>` (peeled through annotated tags),
/// then a commit SHA or unambiguous prefix.
pub(super) fn resolve(repo: &Repository, unit: &str, reference: &str) -> Result<Resolved> {
    let not_found = || Error::RefNotFound { unit: unit.to_string(), reference: reference.to_string() };
    let candidates: Vec<String> = if reference.starts_with("refs/") {
        vec![reference.to_string()]
    } else {
        vec![format!("refs/heads/{reference}"), format!("refs/tags/{reference}")]
    };
    if let Some((oid, tag)) = candidates.iter().find_map(|name| peel_ref(repo, name)) {
        return Ok(Resolved { revision: revision(oid), tag });
    }
    if !is_sha_prefix(reference) {
        return Err(not_found());
    }
    match repo.find_commit_by_prefix(reference) {
        Ok(commit) => Ok(Resolved { revision: revision(commit.id()), tag: None }),
        Err(error) if error.code() == ErrorCode::Ambiguous => {
            Err(Error::AmbiguousRef { unit: unit.to_string(), reference: reference.to_string() })
        }
        Err(_) => Err(not_found()),
    }
}

/// Whether `reference` is a full 40-digit SHA-1, which can be fetched by id.
pub(super) fn is_full_sha(reference: &str) -> bool {
    reference.len() == 40 && Oid::from_str(reference).is_ok()
}

/// The commit a ref points to, through any tags, and the annotated tag object it points to
/// directly, if any; `None` when the ref is missing, invalid, or does not lead to a commit.
fn peel_ref(repo: &Repository, name: &str) -> Option<(Oid, Option<Oid>)> {
    let reference = repo.find_reference(name).ok()?;
    let commit = reference.peel_to_commit().ok()?.id();
    let tag = reference.target().filter(|target| repo.find_tag(*target).is_ok());
    Some((commit, tag))
}

/// 4 to 40 hex digits.
fn is_sha_prefix(reference: &str) -> bool {
    (MIN_SHA_PREFIX..=40).contains(&reference.len()) && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit id of a revision this module made.
pub(super) fn oid(revision: &Revision) -> Oid {
    Oid::from_str(&revision.0).expect("a resolved revision is a full SHA")
}

fn revision(oid: Oid) -> Revision {
    Revision(oid.to_string())
}
