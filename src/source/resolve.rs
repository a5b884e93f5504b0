//! Resolving a unit's reference (branch, tag, full ref or commit SHA) to a [`Revision`], in
//! the order `git rev-parse` uses.
//!
//! git's order (`get_oid_basic` in object-name.c, the `ref_rev_parse_rules` of refs.c): a
//! full 40-digit object name is that object, before any ref; otherwise the name is tried as
//! `<ref>`, `refs/<ref>`, `refs/tags/<ref>`, `refs/heads/<ref>`, `refs/remotes/<ref>`,
//! `refs/remotes/<ref>/HEAD`, the first that exists wins (git warns "refname is ambiguous"
//! when more than one does); a name no ref matches may be an abbreviated object name.
//!
//! The mirror holds the remote's `refs/heads/*` and `refs/tags/*` under the same names
//! (module `mirror`), nothing under `refs/remotes/`, and no root ref of the remote: its
//! `HEAD` and `FETCH_HEAD` are the mirror's own bookkeeping, not the remote's, so a root name
//! (`HEAD`) resolves to nothing here. With every other name the result is what `git rev-parse
//! <ref>^{commit}` gives in a clone whose fetch refspecs are the mirror's.
//!
//! Strict resolution (`[sync.verify]`) refuses a name that git would call ambiguous: more
//! than one rule matching (a branch and a tag both named `release`), or a ref whose name is
//! also a commit's abbreviated id. Without it, a push of a branch named like a signed tag
//! could choose which of the two is synced; a full name (`refs/tags/release`) is never
//! ambiguous.

use git2::{ErrorCode, Oid, Repository};

use super::{Error, Result, Revision};

/// The shortest SHA prefix accepted, as in git (`core.abbrev` minimum).
const MIN_SHA_PREFIX: usize = 4;

/// git's `ref_rev_parse_rules` after `<ref>` itself, `%s` standing for the name.
const RULES: [&str; 5] = ["refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD"];

/// A reference resolved: the commit, and the annotated tag object the ref points to when it
/// points to one (a tag's signature is on the tag object; a lightweight tag's, on the commit).
pub(super) struct Resolved {
    /// The commit.
    pub revision: Revision,
    /// The annotated tag object the ref names directly, if any.
    pub tag: Option<Oid>,
}

/// Resolves `reference` in `repo` as `git rev-parse` does (module doc): a full SHA as that
/// object; a full ref name (`refs/…`) as given; otherwise the first of [`RULES`] that names a
/// ref in the mirror (annotated tags peeled to their commit), then a commit SHA prefix of at
/// least 4 hex digits. With `strict`, a name that more than one rule matches, or that matches
/// a ref and is a commit's prefix too, is refused.
///
/// Errors: [`Error::RefNotFound`]; [`Error::AmbiguousRef`] (a SHA prefix of several
/// objects); [`Error::AmbiguousName`] (strict only, naming every match);
/// [`Error::NotACommit`] (the ref chosen leads to a tree or a blob); [`Error::Git`] (its object
/// cannot be read from the mirror).
pub(super) fn resolve(repo: &Repository, unit: &str, reference: &str, strict: bool) -> Result<Resolved> {
    let not_found = || Error::RefNotFound {
        unit: unit.to_string(),
        reference: reference.to_string(),
        repository: None,
        closest: closest(repo, reference),
    };
    if is_full_sha(reference) {
        let oid = Oid::from_str(reference).map_err(|_| not_found())?;
        return object(repo, oid).ok_or_else(not_found);
    }
    let matches: Vec<String> = if reference.starts_with("refs/") {
        exists(repo, reference).then(|| reference.to_owned()).into_iter().collect()
    } else {
        RULES.iter().map(|rule| rule.replace("%s", reference)).filter(|name| exists(repo, name)).collect()
    };
    let prefix = || match is_sha_prefix(reference) {
        true => repo.find_commit_by_prefix(reference).map(|c| c.id()),
        false => Err(git2::Error::from_str("not a SHA prefix")),
    };
    let Some(chosen) = matches.first() else {
        return match prefix() {
            Ok(commit) => Ok(Resolved { revision: revision(commit), tag: None }),
            Err(error) if error.code() == ErrorCode::Ambiguous => {
                Err(Error::AmbiguousRef { unit: unit.to_string(), reference: reference.to_string() })
            }
            Err(_) => Err(not_found()),
        };
    };
    if strict {
        let mut all = matches.clone();
        if let Ok(commit) = prefix() {
            all.push(format!("commit {commit}"));
        }
        if all.len() > 1 {
            return Err(Error::AmbiguousName {
                unit: unit.to_string(),
                reference: reference.to_string(),
                matches: all,
            });
        }
    }
    if let Some(resolved) = peel_ref(repo, chosen) {
        return Ok(resolved);
    }
    // An object the ref leads to that cannot be read is the mirror's damage (a truncated pack,
    // a lost object), which a fetch repairs; one that can is a tree or a blob.
    let target = repo
        .find_reference(chosen)
        .and_then(|r| r.resolve())
        .and_then(|r| repo.find_object(r.target().unwrap_or(Oid::ZERO_SHA1), None))
        .and_then(|object| object.peel_to_commit());
    match target {
        Err(error) if error.code() == ErrorCode::NotFound => Err(Error::Git {
            unit: unit.to_string(),
            step: "read the ref's object",
            message: error.message().to_owned(),
        }),
        _ => Err(Error::NotACommit { unit: unit.to_string(), reference: reference.to_string(), name: chosen.clone() }),
    }
}

/// Whether `reference` is a full 40-digit SHA-1, which can be fetched by id.
pub(super) fn is_full_sha(reference: &str) -> bool {
    reference.len() == 40 && Oid::from_str(reference).is_ok()
}

/// Whether the ref `name` exists and resolves to an object id, as git counts a match: a
/// symbolic ref whose target is missing (dangling) does not.
/// Up to three branches and tags of `repo` nearest `reference` (Damerau–Levenshtein distance,
/// then name), as `branch <name>` / `tag <name>`; none for a full commit id, which no name is
/// a typo of.
fn closest(repo: &Repository, reference: &str) -> Vec<String> {
    if is_full_sha(reference) {
        return Vec::new();
    }
    let wanted = reference.strip_prefix("refs/").unwrap_or(reference);
    let mut named: Vec<(usize, String)> = repo
        .references()
        .map(|refs| {
            refs.flatten()
                .filter_map(|r| r.name().ok().map(str::to_owned))
                .filter_map(|name| {
                    let (kind, short) = match (name.strip_prefix("refs/heads/"), name.strip_prefix("refs/tags/")) {
                        (Some(short), _) => ("branch", short),
                        (_, Some(short)) => ("tag", short),
                        _ => return None,
                    };
                    let distance = strsim::damerau_levenshtein(wanted, short)
                        .min(strsim::damerau_levenshtein(wanted, name.strip_prefix("refs/").unwrap_or(&name)));
                    Some((distance, format!("{kind} {short}")))
                })
                .collect()
        })
        .unwrap_or_default();
    named.sort();
    named.into_iter().take(3).map(|(_, name)| name).collect()
}

fn exists(repo: &Repository, name: &str) -> bool {
    repo.find_reference(name).and_then(|r| r.resolve()).is_ok_and(|r| r.target().is_some())
}

/// The commit a ref points to, through any tags, and the annotated tag object it points to
/// directly, if any; `None` when the ref is missing, invalid, or does not lead to a commit.
fn peel_ref(repo: &Repository, name: &str) -> Option<Resolved> {
    let reference = repo.find_reference(name).ok()?.resolve().ok()?;
    object(repo, reference.target()?)
}

/// The commit object `oid` is or leads to (through annotated tags), and `oid` itself when it
/// is a tag; `None` when it is missing from the mirror or leads to a tree or blob.
fn object(repo: &Repository, oid: Oid) -> Option<Resolved> {
    let object = repo.find_object(oid, None).ok()?;
    let commit = object.peel_to_commit().ok()?.id();
    let tag = object.as_tag().map(|t| t.id());
    Some(Resolved { revision: revision(commit), tag })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with commits `one` and `two`, a branch `release` at `two`, an annotated tag
    /// `release` at `one`, a lightweight tag `light` and a branch `main` at `two`.
    fn repo() -> (tempfile::TempDir, Repository, Oid, Oid, Oid) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let signature = git2::Signature::now("t", "t@example.com").unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let tree = repo.find_tree(tree).unwrap();
        let one = repo.commit(None, &signature, &signature, "one", &tree, &[]).unwrap();
        let parent = repo.find_commit(one).unwrap();
        let two = repo.commit(None, &signature, &signature, "two", &tree, &[&parent]).unwrap();
        let tag = repo.tag("release", &repo.find_object(one, None).unwrap(), &signature, "r", false).unwrap();
        repo.reference("refs/heads/release", two, false, "").unwrap();
        repo.reference("refs/heads/main", two, false, "").unwrap();
        repo.reference("refs/tags/light", two, false, "").unwrap();
        drop((tree, parent));
        (dir, repo, one, two, tag)
    }

    fn commit(repo: &Repository, reference: &str, strict: bool) -> Result<(String, Option<Oid>)> {
        resolve(repo, "u", reference, strict).map(|r| (r.revision.0, r.tag))
    }

    #[test]
    fn a_tag_wins_over_a_branch_of_the_same_name_as_in_git() {
        let (_dir, repo, one, two, tag) = repo();
        assert_eq!(commit(&repo, "release", false).unwrap(), (one.to_string(), Some(tag)));
        assert_eq!(commit(&repo, "refs/heads/release", true).unwrap(), (two.to_string(), None));
        assert_eq!(commit(&repo, "refs/tags/release", true).unwrap(), (one.to_string(), Some(tag)));
        assert_eq!(commit(&repo, "heads/release", true).unwrap().0, two.to_string(), "refs/<ref>");
        assert_eq!(commit(&repo, "main", true).unwrap().0, two.to_string());
        assert_eq!(commit(&repo, "light", true).unwrap(), (two.to_string(), None));
    }

    #[test]
    fn strict_resolution_refuses_a_name_of_a_branch_and_a_tag_naming_both() {
        let (_dir, repo, ..) = repo();
        let error = commit(&repo, "release", true).unwrap_err();
        let Error::AmbiguousName { matches, .. } = &error else { panic!("{error}") };
        assert_eq!(matches, &["refs/tags/release", "refs/heads/release"]);
        let message = error.to_string();
        assert!(message.contains("refs/tags/release") && message.contains("refs/heads/release"), "{message}");
    }

    #[test]
    fn a_full_sha_is_the_object_before_any_ref_and_a_prefix_comes_after_refs() {
        let (_dir, repo, one, two, tag) = repo();
        repo.reference(&format!("refs/heads/{one}"), two, false, "").unwrap();
        assert_eq!(commit(&repo, &one.to_string(), true).unwrap().0, one.to_string(), "git ignores the branch");
        assert_eq!(commit(&repo, &tag.to_string(), false).unwrap(), (one.to_string(), Some(tag)));
        let short = &two.to_string()[..10];
        assert_eq!(commit(&repo, short, false).unwrap().0, two.to_string());
        repo.reference(&format!("refs/heads/{short}"), one, false, "").unwrap();
        assert_eq!(commit(&repo, short, false).unwrap().0, one.to_string(), "a ref before a prefix");
        let error = commit(&repo, short, true).unwrap_err().to_string();
        assert!(error.contains(&format!("refs/heads/{short}")) && error.contains(&format!("commit {two}")), "{error}");
    }

    #[test]
    fn missing_root_and_non_commit_refs_are_errors() {
        let (_dir, repo, ..) = repo();
        assert!(matches!(commit(&repo, "nothing", false), Err(Error::RefNotFound { .. })));
        assert!(matches!(commit(&repo, "HEAD", false), Err(Error::RefNotFound { .. })), "no root refs");
        assert!(matches!(commit(&repo, &"0".repeat(40), false), Err(Error::RefNotFound { .. })));
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        repo.reference("refs/tags/tree", tree, false, "").unwrap();
        let error = commit(&repo, "tree", false).unwrap_err();
        assert!(matches!(error, Error::NotACommit { ref name, .. } if name == "refs/tags/tree"), "{error}");
    }
}
