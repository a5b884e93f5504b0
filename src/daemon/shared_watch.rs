//! One watch of a local repository's refs per repository, shared by every unit that follows it.
//!
//! A [`repo_watch`] watch is a `notify` watcher: an inotify instance and a thread of its own.
//! One per unit made 1,000 units of one repository hold 1,000 threads, and all but the first
//! 128 failed (`fs.inotify.max_user_instances` defaults to 128 per user) and fell back to
//! polling. Here the units of one git directory (canonical path) share one watch; its push
//! triggers are handed to each unit's channel (merged into a sync queued already, as with a
//! watch of its own), but not to a unit resting under the path-unchanged rule whose path the
//! push left alone ([`super::quiet`]). The watch stops with its last subscriber.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::quiet::{self, Quiet};
use super::repo_watch::{self, RepoWatch};
use super::trigger::{self, TriggerSender};

/// The units' channels, and their side of the path-unchanged rule, by subscription id.
type Subscribers = Arc<Mutex<BTreeMap<u64, (TriggerSender, Option<Arc<Quiet>>)>>>;

/// The shared watches, by git directory. Cheap to share: the daemon holds one.
#[derive(Default)]
pub(crate) struct RepoWatches {
    /// Live watches by canonical git directory, and the next subscription id.
    inner: Mutex<(HashMap<PathBuf, Weak<Shared>>, u64)>,
}

/// One repository's watch and where its triggers go.
struct Shared {
    /// The notify watch; dropping it stops watching.
    _watch: RepoWatch,
    /// Hands each trigger to every subscriber.
    forward: tokio::task::JoinHandle<()>,
    /// The units following this repository.
    subscribers: Subscribers,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.forward.abort();
    }
}

/// A unit's share of a repository watch; dropping it unsubscribes the unit (and stops the
/// watch when it was the last).
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.shared.subscribers.lock().expect("subscribers lock").remove(&self.id);
    }
}

impl RepoWatches {
    /// Subscribes `unit` to push triggers of the local repository at `repo` (a work tree or
    /// bare), starting the repository's watch if no unit watches it yet; with `quiet`, a push
    /// that leaves its path alone while it rests does not wake it ([`super::quiet`]).
    ///
    /// Errors: the watch could not be set up (see [`repo_watch::watch`]).
    pub(crate) fn subscribe(
        &self,
        repo: &Path,
        unit: TriggerSender,
        quiet: Option<Arc<Quiet>>,
    ) -> notify::Result<Subscription> {
        let dir = repo_watch::git_dir(repo);
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let mut inner = self.inner.lock().expect("watches lock");
        let (watches, next) = &mut *inner;
        watches.retain(|_, shared| shared.strong_count() > 0);
        let shared = match watches.get(&dir).and_then(Weak::upgrade) {
            Some(shared) => shared,
            None => {
                let shared = Arc::new(start(&dir)?);
                watches.insert(dir, Arc::downgrade(&shared));
                shared
            }
        };
        *next += 1;
        shared.subscribers.lock().expect("subscribers lock").insert(*next, (unit, quiet));
        Ok(Subscription { shared, id: *next })
    }

    /// How many repositories are watched now.
    #[cfg(test)]
    fn watched(&self) -> usize {
        self.inner.lock().expect("watches lock").0.values().filter(|w| w.strong_count() > 0).count()
    }
}

/// Starts the watch of `dir` and the task handing its triggers to the subscribers.
fn start(dir: &Path) -> notify::Result<Shared> {
    let (tx, mut rx) = trigger::channel();
    let watch = repo_watch::watch(dir, tx)?;
    let subscribers = Subscribers::default();
    let to = subscribers.clone();
    let forward = tokio::spawn(async move {
        while let Some(trigger) = rx.recv().await {
            let units: Vec<_> = to.lock().expect("subscribers lock").values().cloned().collect();
            quiet::hand_out(units, trigger).await;
        }
    });
    Ok(Shared { _watch: watch, forward, subscribers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::trigger::TriggerKind;

    /// A bare repository made by the git CLI, with one commit on `main`.
    fn bare_repo(dir: &Path) -> PathBuf {
        let bare = dir.join("repo.git");
        let work = dir.join("work");
        let git = |args: &[&str], cwd: &Path| {
            let status = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@gitward.dev"])
                .args(args)
                .current_dir(cwd)
                .status()
                .expect("git runs");
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q", "--bare", "--initial-branch=main", bare.to_str().unwrap()], dir);
        git(&["init", "-q", "--initial-branch=main", work.to_str().unwrap()], dir);
        std::fs::write(work.join("a.yaml"), "a: 1\n").unwrap();
        git(&["add", "-A"], &work);
        git(&["commit", "-q", "-m", "one"], &work);
        git(&["push", "-q", bare.to_str().unwrap(), "main"], &work);
        bare
    }

    fn push(dir: &Path, bare: &Path) {
        let work = dir.join("work");
        std::fs::write(work.join("a.yaml"), "a: 2\n").unwrap();
        for args in [&["commit", "-q", "-a", "-m", "two"][..], &["push", "-q", bare.to_str().unwrap(), "main"]] {
            let status = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@gitward.dev"])
                .args(args)
                .current_dir(&work)
                .status()
                .unwrap();
            assert!(status.success());
        }
    }

    #[tokio::test]
    async fn units_of_one_repository_share_one_watch_and_each_gets_the_push() {
        let dir = tempfile::tempdir().unwrap();
        let bare = bare_repo(dir.path());
        let watches = RepoWatches::default();
        let (tx_a, mut rx_a) = trigger::channel();
        let (tx_b, mut rx_b) = trigger::channel();
        let a = watches.subscribe(&bare, tx_a, None).unwrap();
        // The same repository by another spelling of its path.
        let b = watches.subscribe(&dir.path().join("work/../repo.git"), tx_b, None).unwrap();
        assert!(Arc::ptr_eq(&a.shared, &b.shared));
        assert_eq!(watches.watched(), 1);
        push(dir.path(), &bare);
        // Liveness bound only: each unit's trigger arrives.
        let bound = std::time::Duration::from_secs(30);
        assert_eq!(tokio::time::timeout(bound, rx_a.recv()).await.unwrap().unwrap().kind, TriggerKind::Push);
        assert_eq!(tokio::time::timeout(bound, rx_b.recv()).await.unwrap().unwrap().kind, TriggerKind::Push);
        drop(a);
        assert_eq!(watches.watched(), 1, "b still follows the repository");
        drop(b);
        assert_eq!(watches.watched(), 0, "the watch stops with its last unit");
    }
}
