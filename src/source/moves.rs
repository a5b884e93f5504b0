//! What a push changed, told to every unit of a shared mirror without reading the mirror.
//!
//! The thread that fetches a mirror records, for each branch the fetch moved, the paths of the
//! files the move changed ([`Moved`], one tree-to-tree diff: `Shared::fetched_since`,
//! `Shared::moved`). A unit's [`PushProbe`] waits for that fetch on a channel, then answers
//! from memory whether a changed file lies under the unit's path ([`Touch`]): at 1,000 units of
//! one repository, the one unit a push changed then takes the push lane alone
//! (ARCHITECTURE.md, "push lane").

use std::sync::Arc;
use std::time::Instant;

use super::shared::Shared;
use super::{Revision, SourceSpec};

/// The last move of one branch by a fetch: from which commit to which, and the paths of the
/// files the move added, deleted or modified (both paths of a rename).
#[derive(Debug)]
pub struct Moved {
    /// The commit the branch pointed to before the fetch.
    pub from: git2::Oid,
    /// The commit it points to after.
    pub to: git2::Oid,
    /// The changed files' paths, sorted; `None` when more than [`MAX_MOVED_PATHS`] changed
    /// (taken as "every path touched").
    pub paths: Option<Vec<String>>,
}

/// The most changed paths one [`Moved`] keeps.
pub const MAX_MOVED_PATHS: usize = 4096;

impl Moved {
    /// Whether a changed file lies at or under `path` (`/`-separated, normalised; `""` is the
    /// root, touched by any change).
    pub fn touches(&self, path: &str) -> bool {
        let Some(paths) = &self.paths else { return true };
        if path.is_empty() {
            return !paths.is_empty();
        }
        // Sorted: the paths that start with `path` follow one another from the first not
        // before it (`a/b`, `a/b-c`, `a/b/x`).
        let start = paths.partition_point(|p| p.as_str() < path);
        paths[start..]
            .iter()
            .take_while(|p| p.starts_with(path))
            .any(|p| p.len() == path.len() || p[path.len()..].starts_with('/'))
    }
}

/// The paths of the files changed between commits `from` and `to` (both paths of a rename,
/// no rename detection), sorted; `None` past [`MAX_MOVED_PATHS`].
pub(super) fn changed_paths(
    repo: &git2::Repository,
    from: git2::Oid,
    to: git2::Oid,
) -> std::result::Result<Option<Vec<String>>, git2::Error> {
    let (old, new) = (repo.find_commit(from)?.tree()?, repo.find_commit(to)?.tree()?);
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    if diff.deltas().len() > MAX_MOVED_PATHS {
        return Ok(None);
    }
    let mut paths: Vec<String> = diff
        .deltas()
        .flat_map(|d| [d.old_file().path(), d.new_file().path()])
        .flatten()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    paths.sort();
    paths.dedup();
    Ok(Some(paths))
}

/// What a unit needs to learn, without reading the mirror, whether a push touched its path
/// ([`PushProbe::touched`]).
#[derive(Clone)]
pub struct PushProbe {
    mirror: Arc<Shared>,
    spec: SourceSpec,
}

impl PushProbe {
    /// The probe of `spec`'s unit on `mirror`.
    pub(super) fn new(mirror: Arc<Shared>, spec: SourceSpec) -> Self {
        Self { mirror, spec }
    }

    /// Waits for a fetch that started at or after `not_before` (the push seen; one fetch for
    /// all the units of the mirror, see [`super::shared`]), then answers from what that fetch recorded:
    /// `touched: false` when the unit's branch moved from `from` (or already points at
    /// `from`) and no file under the unit's path changed, `touched: true` when one did, with
    /// the commit it points to now; `None` when it cannot be told so (the
    /// reference is a tag or a commit — a short name is a tag first, as in `git rev-parse` —,
    /// the branch did not move from `from`, the fetch failed:
    /// the caller fetches and reads the diff itself, and meets the error there).
    ///
    /// Only a hint for ordering work: the sync that follows resolves and verifies the
    /// revision as always. A rendered unit that reads files outside its path (a kustomize
    /// `../base`) is told `Some(false)` for a change there, which is right for what it is
    /// used for: such a change has no early apply ([`super::tree::path_unchanged`]).
    pub async fn touched(&self, from: &Revision, not_before: Instant) -> Option<Touch> {
        let branch = match self.spec.reference.strip_prefix("refs/heads/") {
            Some(_) => self.spec.reference.clone(),
            None if self.spec.reference.starts_with("refs/") => return None,
            None => format!("refs/heads/{}", self.spec.reference),
        };
        let from = git2::Oid::from_str(&from.0).ok()?;
        self.mirror.fetched_since(&self.spec, not_before).await.ok()?;
        if !self.spec.reference.starts_with("refs/") && self.shadowed() {
            return None;
        }
        let moved = self.mirror.moved(&branch)?;
        let to = Revision(moved.to.to_string());
        if moved.to == from {
            return Some(Touch { touched: false, to });
        }
        (moved.from == from)
            .then(|| Touch { touched: moved.touches(&super::tree::normalise_path(&self.spec.path)), to })
    }
}

impl PushProbe {
    /// Whether the short reference names a ref that `git rev-parse` takes before the branch
    /// (`refs/<name>`, `refs/tags/<name>`; module `resolve`), or the mirror cannot be read:
    /// then the branch's move says nothing of the unit's revision.
    fn shadowed(&self) -> bool {
        let Ok(repo) = self.mirror.handle(&self.spec.unit) else { return true };
        let name = &self.spec.reference;
        [format!("refs/{name}"), format!("refs/tags/{name}")].iter().any(|r| repo.find_reference(r).is_ok())
    }
}

/// What [`PushProbe::touched`] tells of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    /// A file under the unit's path changed.
    pub touched: bool,
    /// The commit the branch points to after the push (not verified: [`super::Source::fetch_since`]
    /// does that).
    pub to: Revision,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::shared::tests::{git, spec};

    #[test]
    fn a_move_touches_the_paths_at_and_under_its_changed_files_only() {
        let moved = |paths: &[&str]| Moved {
            from: git2::Oid::ZERO_SHA1,
            to: git2::Oid::ZERO_SHA1,
            paths: Some(paths.iter().map(|p| p.to_string()).collect()),
        };
        let m = moved(&["units/a-b/cm.yaml", "units/a/cm.yaml", "z.yaml"]);
        assert!(m.touches("units/a") && m.touches("units/a-b") && m.touches("units") && m.touches(""));
        assert!(m.touches("z.yaml"), "a file path itself");
        assert!(!m.touches("units/a-") && !m.touches("units/b") && !m.touches("unit") && !m.touches("z"));
        assert!(!moved(&[]).touches(""), "nothing changed");
        assert!(Moved { paths: None, ..moved(&[]) }.touches("any"), "too many changes: every path");
    }

    /// Eight units of one mirror ask at once whether a push touched their path: one fetch and
    /// one diff serve them, and only the unit whose directory changed is told so.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_fetch_tells_every_unit_whether_a_push_touched_its_path() {
        let temp = tempfile::tempdir().unwrap();
        let remote = temp.path().join("remote.git");
        let work = temp.path().join("work");
        git(temp.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
        git(temp.path(), &["init", "-q", work.to_str().unwrap()]);
        for unit in 0..8 {
            std::fs::create_dir_all(work.join(format!("units/u{unit}"))).unwrap();
            std::fs::write(work.join(format!("units/u{unit}/cm.yaml")), "kind: A\n").unwrap();
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "first"]);
        git(&work, &["push", "-q", remote.to_str().unwrap(), "main"]);
        let first = super::super::Revision(git(&work, &["rev-parse", "HEAD"]));
        let url = remote.to_str().unwrap();
        let state = temp.path().join("state");
        let unit = |n: usize| {
            let mut spec = spec(&format!("u{n}"), url);
            spec.path = format!("/units/u{n}/");
            super::super::Source::open(&state, spec).unwrap().push_probe()
        };
        let shared = crate::source::shared::open(&state, &spec("u0", url), url).unwrap();
        shared.fetch_refs(&spec("u0", url), Instant::now()).unwrap();

        std::fs::write(work.join("units/u3/cm.yaml"), "kind: B\n").unwrap();
        git(&work, &["commit", "-q", "-a", "-m", "u3 only"]);
        git(&work, &["push", "-q", remote.to_str().unwrap(), "main"]);
        let pushed = Instant::now();
        let asked = (0..8).map(|n| {
            let (probe, first) = (unit(n), first.clone());
            tokio::spawn(async move { probe.touched(&first, pushed).await })
        });
        let answers: Vec<Option<bool>> =
            futures::future::join_all(asked).await.into_iter().map(|r| r.unwrap().map(|t| t.touched)).collect();
        let expected: Vec<Option<bool>> = (0..8).map(|n| Some(n == 3)).collect();
        assert_eq!(answers, expected);
        assert_eq!(shared.fetches(), 2, "one fetch for the push, whoever asked");
        let head = super::super::Revision(git(&work, &["rev-parse", "HEAD"]));
        let at_head = unit(3).touched(&head, pushed).await;
        assert_eq!(
            at_head,
            Some(super::super::Touch { touched: false, to: head.clone() }),
            "a unit already at the new commit"
        );
        assert_eq!(unit(5).touched(&first, pushed).await.map(|t| t.to), Some(head), "the commit pushed");
        let mut tag = spec("u3", url);
        tag.reference = "refs/tags/v1".into();
        let tagged = super::super::Source::open(&state, tag).unwrap().push_probe();
        assert_eq!(tagged.touched(&first, pushed).await, None, "a tag is not told apart");
        // A tag named like the branch is what `main` resolves to: the branch's move tells nothing.
        git(&work, &["tag", "main", first.0.as_str()]);
        git(&work, &["push", "-q", remote.to_str().unwrap(), "refs/tags/main"]);
        let tagged_too = Instant::now();
        assert_eq!(unit(3).touched(&first, tagged_too).await, None, "refs/tags/main comes first");
    }
}
