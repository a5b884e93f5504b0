//! Resolving a unit's reference (branch, tag, full ref or commit SHA) to a [`Revision`].

use git2::{ErrorCode, Oid, Repository};

use super::{Error, Result, Revision};

/// The shortest SHA prefix accepted, as in git (`core.abbrev` minimum).
const MIN_SHA_PREFIX: usize = 4;

/// Resolves `reference` in `repo`: a full ref name (`refs/…`) as given; otherwise
/// `refs/heads/<reference>`, then `refs/tags/<reference>` (peeled through annotated tags),
/// then a commit SHA or unambiguous prefix.
pub(super) fn resolve(repo: &Repository, unit: &str, reference: &str) -> Result<Revision> {
    let not_found = || Error::RefNotFound { unit: unit.to_string(), reference: reference.to_string() };
    let candidates: Vec<String> = if reference.starts_with("refs/") {
        vec![reference.to_string()]
    } else {
        vec![format!("refs/heads/{reference}"), format!("refs/tags/{reference}")]
    };
    if let Some(oid) = candidates.iter().find_map(|name| peel_ref(repo, name)) {
        return Ok(revision(oid));
    }
    if !is_sha_prefix(reference) {
        return Err(not_found());
    }
    match repo.find_commit_by_prefix(reference) {
        Ok(commit) => Ok(revision(commit.id())),
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

/// The commit a ref points to, through any tags; `None` when the ref is missing, invalid, or
/// does not lead to a commit.
fn peel_ref(repo: &Repository, name: &str) -> Option<Oid> {
    let reference = repo.find_reference(name).ok()?;
    reference.peel_to_commit().ok().map(|commit| commit.id())
}

/// 4 to 40 hex digits.
fn is_sha_prefix(reference: &str) -> bool {
    (MIN_SHA_PREFIX..=40).contains(&reference.len()) && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

fn revision(oid: Oid) -> Revision {
    Revision(oid.to_string())
}
