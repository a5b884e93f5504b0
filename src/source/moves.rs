//! What a fetch of a shared mirror records of each branch it moved: the paths of the files
//! the move changed ([`Moved`], one tree-to-tree diff: `Shared::fetched_since`,
//! `Shared::moved`), read by every unit's [`super::probe::PushProbe`] without reading the
//! mirror.

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

#[cfg(test)]
mod tests {
    use std::time::Instant;

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
            spec.path = format!("/units/u{n}/").into();
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
