//! A mirror's fetches: at most one fetch of refs, of one commit, or reclone runs at a time;
//! a unit asking for refs no older than an instant takes the last fetch's outcome, waits for
//! the one running, or starts one — from a thread, or from async code without holding one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::Shared;
use crate::source::{Error, Result, SourceSpec, mirror};

/// Fetches of refs this process ran, by whether they moved a branch or tag.
static FETCHES: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// How many fetches of refs from git remotes this process has run, as (moved a branch or
/// tag, moved nothing, failed): `gitward_git_fetches_total{result="updated"|"unchanged"|"failed"}`.
/// A unit that takes the outcome of another unit's fetch adds nothing.
pub fn fetches_total() -> (u64, u64, u64) {
    let [updated, unchanged, failed] = &FETCHES;
    (updated.load(Ordering::Relaxed), unchanged.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

/// The fetch of refs in progress and the last one's outcome.
#[derive(Default)]
pub(super) struct FetchState {
    /// A fetch or a reclone is running.
    running: bool,
    /// When the last fetch that ended started, and its outcome.
    last: Option<(Instant, Result<()>)>,
}

/// The fetch or reclone a thread runs: ended when dropped, with `last` as its outcome (none
/// when it panicked), so the units waiting for it never wait for ever.
struct Running<'s> {
    shared: &'s Shared,
    last: Option<(Instant, Result<()>)>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.shared.finish(self.last.take());
    }
}

impl Shared {
    /// Fetches all branches and tags unless a fetch that started at or after `not_before` has
    /// ended (its outcome is returned) or is running (it is waited for). A failed fetch's
    /// error is returned to every unit that took it, naming that unit. Blocking.
    ///
    /// Errors: those of a fetch ([`Error::FetchFailed`], [`Error::Credentials`],
    /// [`Error::HostKeyCheck`], [`Error::OpenMirror`]).
    pub(in crate::source) fn fetch_refs(&self, spec: &SourceSpec, not_before: Instant) -> Result<()> {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        loop {
            if let Some((started, outcome)) = &state.last
                && *started >= not_before
            {
                return outcome.clone().map_err(|e| e.for_unit(&spec.unit));
            }
            if !state.running {
                break;
            }
            state = self.fetched.wait(state).expect("mirror fetch lock");
        }
        state.running = true;
        drop(state);
        let mut running = Running { shared: self, last: None };
        let started = Instant::now();
        let outcome = self.handle(&spec.unit).and_then(|repo| {
            let before = mirror::tips(&repo);
            mirror::fetch_refs(&repo, spec, &self.url)?;
            let after = mirror::tips(&repo);
            if after != before {
                self.record_moves(&repo, &before, &after);
            }
            Ok(after != before)
        });
        let result = match &outcome {
            Ok(true) => "updated",
            Ok(false) => "unchanged",
            Err(_) => "failed",
        };
        FETCHES[match result {
            "updated" => 0,
            "unchanged" => 1,
            _ => 2,
        }]
        .fetch_add(1, Ordering::Relaxed);
        let fetches = self.fetches.fetch_add(1, Ordering::Relaxed) + 1;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        tracing::debug!(unit = %spec.unit, mirror = %self.path.display(), result, fetches, elapsed_ms, "mirror fetched");
        let outcome = outcome.map(|_| ());
        running.last = Some((started, outcome.clone()));
        outcome
    }

    /// Fetches the commit `sha` by id ([`mirror::fetch_commit`]) once no fetch or reclone of
    /// this mirror runs, and holds the mirror's one-fetch-at-a-time turn while it does: two
    /// fetches into one mirror at once would race for its `FETCH_HEAD` and ref locks. Its
    /// outcome is not a fetch of refs: units waiting for one are woken but do not take it.
    /// Blocking.
    ///
    /// Errors: those of [`mirror::fetch_commit`].
    pub(in crate::source) fn fetch_commit(&self, spec: &SourceSpec, sha: &str) -> Result<()> {
        self.in_turn(spec, |repo| mirror::fetch_commit(repo, spec, &self.url, sha))
    }

    /// Fetches and lists the pull-request heads under `namespace`
    /// ([`mirror::fetch_pull_heads`]), in the mirror's one-fetch-at-a-time turn as
    /// [`Shared::fetch_commit`] does. Blocking.
    ///
    /// Errors: those of [`mirror::fetch_pull_heads`].
    pub(in crate::source) fn fetch_pull_heads(&self, spec: &SourceSpec, namespace: &str) -> Result<Vec<(u64, String)>> {
        self.in_turn(spec, |repo| mirror::fetch_pull_heads(repo, spec, &self.url, namespace))
    }

    /// Runs `fetch` on a handle of the mirror once no fetch or reclone of it runs, holding the
    /// one-fetch-at-a-time turn meanwhile; its outcome is no fetch of refs (waiters are woken
    /// but do not take it). Blocking.
    fn in_turn<T>(&self, spec: &SourceSpec, fetch: impl FnOnce(&git2::Repository) -> Result<T>) -> Result<T> {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        while state.running {
            state = self.fetched.wait(state).expect("mirror fetch lock");
        }
        state.running = true;
        drop(state);
        let _running = Running { shared: self, last: None };
        self.handle(&spec.unit).and_then(|repo| fetch(&repo))
    }

    /// Waits, without blocking a thread, until a fetch of refs that started at or after
    /// `not_before` has ended, and returns its outcome; starts one on the blocking pool
    /// ([`Shared::fetch_refs`]) when none has started since. Many units of one push call this
    /// at once: one fetches, the others wait on a channel, not each on a thread of their own.
    ///
    /// Errors: those of [`Shared::fetch_refs`]; [`Error::FetchFailed`] when the fetching task
    /// panicked.
    pub(in crate::source) async fn fetched_since(
        self: &Arc<Self>,
        spec: &SourceSpec,
        not_before: Instant,
    ) -> Result<()> {
        let mut ended = self.ended.subscribe();
        loop {
            let start = {
                let state = self.fetch.lock().expect("mirror fetch lock");
                if let Some((started, outcome)) = &state.last
                    && *started >= not_before
                {
                    return outcome.clone().map_err(|e| e.for_unit(&spec.unit));
                }
                !state.running
            };
            if start {
                let (shared, owned) = (self.clone(), spec.clone());
                return tokio::task::spawn_blocking(move || shared.fetch_refs(&owned, not_before))
                    .await
                    .unwrap_or_else(|e| Err(self.failed(spec, format!("the fetch stopped: {e}"))));
            }
            if ended.changed().await.is_err() {
                return Err(self.failed(spec, "the mirror was closed".into()));
            }
        }
    }

    /// A fetch failure of `spec`'s unit that libgit2 did not report.
    fn failed(&self, spec: &SourceSpec, message: String) -> Error {
        Error::FetchFailed { unit: spec.unit.clone(), repo: crate::source::remote::redact(&self.url), message }
    }

    /// Fetches of refs this mirror ran.
    #[cfg(test)]
    pub(in crate::source) fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Replaces the damaged directory by a fresh clone ([`mirror::reclone`]) unless it was
    /// replaced since `seen` ([`Shared::generation`]); handles opened before are closed as they
    /// come back. Runs alone: no fetch runs meanwhile. Blocking.
    ///
    /// Errors: those of [`mirror::reclone`].
    pub(in crate::source) fn reclone(&self, spec: &SourceSpec, seen: u64) -> Result<()> {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        while state.running {
            state = self.fetched.wait(state).expect("mirror fetch lock");
        }
        if self.generation() != seen {
            return Ok(());
        }
        state.running = true;
        drop(state);
        let mut running = Running { shared: self, last: None };
        let started = Instant::now();
        let outcome = mirror::reclone(&self.path, spec, &self.url);
        if outcome.is_ok() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            self.idle.lock().expect("mirror handles lock").clear();
            running.last = Some((started, Ok(())));
        }
        outcome
    }

    /// Ends the running fetch or reclone: records its outcome (when given) and wakes the
    /// units waiting.
    fn finish(&self, last: Option<(Instant, Result<()>)>) {
        let mut state = self.fetch.lock().expect("mirror fetch lock");
        state.running = false;
        if last.is_some() {
            state.last = last;
        }
        drop(state);
        self.fetched.notify_all();
        self.ended.send_modify(|n| *n += 1);
    }
}
