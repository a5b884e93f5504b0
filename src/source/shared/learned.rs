//! What a mirror's fetches learned for the units that follow it, so that they need not read
//! the mirror themselves: the files each branch move changed, and which short names another
//! ref shadows, read once per fetch.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Shared;
use crate::source::{moves, shadows};

impl Shared {
    /// Whether the short reference `name` is shadowed by another ref ([`crate::source::probe`]), read by
    /// `read` once per fetch (and reclone) for all the units that follow it: at 10,000 units
    /// a push had every unit open a handle and look two refs up.
    pub(in crate::source) fn shadowed(&self, name: &str, read: impl FnOnce() -> bool) -> bool {
        let at = (self.fetches.load(Ordering::Acquire), self.generation.load(Ordering::Acquire));
        shadows::Shadows::answer(&self.shadows, at, name, read)
    }

    /// The last move of `branch` (`refs/heads/…`) by a fetch of this process, if any.
    pub(in crate::source) fn moved(&self, branch: &str) -> Option<Arc<moves::Moved>> {
        self.moved.lock().expect("mirror moves lock").get(branch).cloned()
    }

    /// Records, for each branch that moved from one commit to another between `before` and
    /// `after` (sorted tips), the paths its move changed: one tree-to-tree diff each, whose
    /// walk skips subtrees with the same id. A failed diff removes that branch's record.
    pub(super) fn record_moves(
        &self,
        repo: &git2::Repository,
        before: &[(String, Option<git2::Oid>)],
        after: &[(String, Option<git2::Oid>)],
    ) {
        let old: HashMap<&str, git2::Oid> =
            before.iter().filter_map(|(name, oid)| Some((name.as_str(), (*oid)?))).collect();
        let mut moves = Vec::new();
        for (name, to) in after {
            let (Some(to), Some(from)) = (*to, old.get(name.as_str()).copied()) else { continue };
            if from != to && name.starts_with("refs/heads/") {
                let paths = moves::changed_paths(repo, from, to).ok();
                moves.push((name, paths.map(|paths| Arc::new(moves::Moved { from, to, paths }))));
            }
        }
        // Taken after the diffs: units read it from async tasks.
        let mut moved = self.moved.lock().expect("mirror moves lock");
        for (name, record) in moves {
            match record {
                Some(record) => moved.insert(name.clone(), record),
                // A move whose diff cannot be read leaves no record, not the previous one.
                None => moved.remove(name),
            };
        }
    }
}
