//! The libgit2 handles a mirror lends: one thread at a time each, a few kept idle, those of a
//! directory since replaced closed when they come back.

use std::ops::Deref;
use std::sync::atomic::Ordering;

use git2::Repository;

use super::Shared;
use crate::source::{Result, mirror};

/// Idle libgit2 handles kept per mirror. More threads may read at once (each opens its own
/// handle); those beyond this are closed when returned. A handle keeps libgit2's object cache
/// of the trees and commits it read, so this bounds what a mirror holds at rest.
pub const MAX_IDLE_HANDLES: usize = 4;

/// A libgit2 handle lent by a [`Shared`] mirror; returned to it when dropped.
pub struct Handle<'s> {
    shared: &'s Shared,
    repo: Option<Repository>,
    generation: u64,
}

impl Deref for Handle<'_> {
    type Target = Repository;

    fn deref(&self) -> &Repository {
        self.repo.as_ref().expect("a lent handle")
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        let Some(repo) = self.repo.take() else { return };
        if self.generation != self.shared.generation.load(Ordering::Acquire) {
            return;
        }
        let mut idle = self.shared.idle.lock().expect("mirror handles lock");
        if idle.len() < MAX_IDLE_HANDLES {
            idle.push(repo);
        }
    }
}

impl Shared {
    /// Lends a handle: an idle one, or a new one when every handle is in use.
    ///
    /// Errors: [`Error::OpenMirror`](crate::source::Error::OpenMirror) for `unit` when the directory cannot be opened.
    pub(in crate::source) fn handle(&self, unit: &str) -> Result<Handle<'_>> {
        let generation = self.generation.load(Ordering::Acquire);
        let repo = self.idle.lock().expect("mirror handles lock").pop();
        let repo = match repo {
            Some(repo) => repo,
            None => mirror::open(&self.path, unit)?,
        };
        Ok(Handle { shared: self, repo: Some(repo), generation })
    }

    /// The generation of the directory: compare with a later one to learn whether it was
    /// cloned again meanwhile.
    pub(in crate::source) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}
