//! Push trigger for a local repository (a path or `file://` URL): `notify` watches its refs, so
//! a `git push` into it starts a sync within a second instead of at the next poll.
//!
//! A push shows as the rename of `refs/heads/<branch>.lock` onto `refs/heads/<branch>`, and a
//! `git gc` as the same rename of `packed-refs.lock` onto `packed-refs` (DESIGN.md, Libraries).
//! Git writes a ref by that rename, which is atomic, so the event on the ref's own path means
//! the update is complete: the trigger is sent at once, with no debounce. Events on `.lock`
//! files, objects and logs are ignored; a burst of ref events (a push of several refs) is
//! coalesced by the unit's queue, which holds at most one waiting sync.

use std::path::{Path, PathBuf};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::trigger::{Trigger, TriggerKind, TriggerSender};

/// The git directory of a local repository: `path/.git` for a work tree, else `path` (bare).
pub fn git_dir(repo: &Path) -> PathBuf {
    let dot_git = repo.join(".git");
    if dot_git.is_dir() { dot_git } else { repo.to_path_buf() }
}

/// True for paths whose change means a ref moved.
fn is_ref_path(path: &Path) -> bool {
    let s = path.to_string_lossy();
    (s.contains("/refs/heads/") || s.contains("/refs/tags/") || s.ends_with("/packed-refs")) && !s.ends_with(".lock")
}

/// A running watch; dropping it stops watching.
pub struct RepoWatch {
    _watcher: RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RepoWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches the refs of the repository at `repo` and sends a [`TriggerKind::Push`] trigger to
/// `unit` for each change of a ref (see the module doc), stamped with the time the event came.
///
/// Errors: the watch could not be set up (the directory does not exist, inotify limits).
pub fn watch(repo: &Path, unit: TriggerSender) -> notify::Result<RepoWatch> {
    let dir = git_dir(repo);
    let (tx, mut rx) = mpsc::unbounded_channel::<std::time::Instant>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reads count as events too (inotify IN_OPEN/IN_CLOSE_NOWRITE): gitward's own fetch
        // reads these refs, so only writes may trigger, or every fetch would start a sync.
        if let Ok(event) = event
            && !matches!(event.kind, notify::EventKind::Access(_))
            && event.paths.iter().any(|p| is_ref_path(p))
        {
            let _ = tx.send(std::time::Instant::now());
        }
    })?;
    std::fs::create_dir_all(dir.join("refs/heads")).ok();
    watcher.watch(&dir.join("refs"), RecursiveMode::Recursive)?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    let task = tokio::spawn(async move {
        while let Some(at) = rx.recv().await {
            // While a sync is queued this push is merged into it (its time kept).
            let _ = unit.offer(Trigger::new(TriggerKind::Push, at));
        }
    });
    Ok(RepoWatch { _watcher: watcher, task })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ref_changes_count() {
        assert!(is_ref_path(Path::new("/r/repo.git/refs/heads/main")));
        assert!(is_ref_path(Path::new("/r/repo.git/packed-refs")));
        assert!(is_ref_path(Path::new("/r/repo.git/refs/tags/v1")));
        assert!(!is_ref_path(Path::new("/r/repo.git/refs/heads/main.lock")));
        assert!(!is_ref_path(Path::new("/r/repo.git/objects/ab/cdef")));
        assert!(!is_ref_path(Path::new("/r/repo.git/logs/HEAD")));
    }
}
