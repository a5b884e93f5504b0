//! Push trigger for a local repository (a path or `file://` URL): `notify` watches its refs, so
//! a `git push` into it starts a sync within a second instead of at the next poll.
//!
//! A push shows as a create/rename of `refs/heads/<branch>` (through a `.lock` file), and a
//! `git gc` as a rewrite of `packed-refs` (DESIGN.md, Libraries): both are watched; other
//! files (objects, logs) are ignored. Events are debounced for [`DEBOUNCE`] so the ref update
//! is complete before the sync fetches; the unit's queue coalesces the rest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::trigger::{Trigger, TriggerKind};

/// Quiet time after the last ref event before the push trigger is sent.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

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
/// `unit` after each burst of ref changes.
///
/// Errors: the watch could not be set up (the directory does not exist, inotify limits).
pub fn watch(repo: &Path, unit: mpsc::Sender<Trigger>) -> notify::Result<RepoWatch> {
    let dir = git_dir(repo);
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reads count as events too (inotify IN_OPEN/IN_CLOSE_NOWRITE): gitward's own fetch
        // reads these refs, so only writes may trigger, or every fetch would start a sync.
        if let Ok(event) = event
            && !matches!(event.kind, notify::EventKind::Access(_))
            && event.paths.iter().any(|p| is_ref_path(p))
        {
            let _ = tx.send(());
        }
    })?;
    std::fs::create_dir_all(dir.join("refs/heads")).ok();
    watcher.watch(&dir.join("refs"), RecursiveMode::Recursive)?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            let at = std::time::Instant::now();
            loop {
                match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            // A full queue means a sync is already queued: this push is coalesced into it.
            let _ = unit.try_send(Trigger { kind: TriggerKind::Push, at });
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
