//! A push that leaves an idle unit's path alone, answered without waking the unit.
//!
//! The unit's task publishes, while it rests idle, the revision a push would be probed from
//! when the path-unchanged rule holds for it (its last sync applied every object from the
//! plain files of its path alone, no retry due: `machine::job::quiet`). The task that hands a
//! repository's push to its units (the shared ref watch, [`super::shared_watch`], or a task the
//! webhook handler spawns, [`super::http`]) probes those units itself
//! ([`Repo::push_touches`], answered from the one fetch of the push) and wakes only the ones
//! whose path the push changed, or whose probe cannot tell. For the others it logs
//! `path unchanged, nothing to sync` and leaves the new revision with the unit, which takes it
//! as the one last applied when it next wakes (`Event::Taken`), exactly as its own probe would
//! have. Otherwise each push would wake every unit's task of the repository, CPU that grows
//! with the units and is spent ahead of the one unit it changed (ARCHITECTURE.md, "Figures").
//!
//! The unit withdraws the revision under the same lock it is taken under, as soon as it wakes
//! for anything: a push probed after that is offered to it as a trigger, as before.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::debug;

use super::trigger::{Trigger, TriggerSender};
use crate::source::{Revision, Touch};
use crate::sync::repo::Repo;

/// One unit's side of the rule: what it published and what a push left it. Shared by the unit's
/// task and the repository's watch.
pub struct Quiet {
    unit: String,
    repo: Repo,
    state: Mutex<Resting>,
}

/// What the unit published, and what pushes left it since.
#[derive(Debug, Default)]
struct Resting {
    /// The revision a push is probed from while the unit rests idle and the rule holds; `None`
    /// while it is awake or the rule does not hold.
    from: Option<Revision>,
    /// The newest revision a push brought that left the path alone, for the unit to take.
    taken: Option<Revision>,
}

impl Resting {
    fn rest(&mut self, from: Option<&Revision>) {
        if self.from.as_ref() != from {
            self.from = from.cloned();
        }
    }

    fn wake(&mut self) -> Option<Revision> {
        self.from = None;
        self.taken.take()
    }

    /// Leaves `to` with the unit when it still rests from `from`: true when it did (the unit
    /// needs no trigger), false when the unit woke meanwhile.
    fn leave(&mut self, from: &Revision, to: &Revision) -> bool {
        if self.from.as_ref() != Some(from) {
            return false;
        }
        if from != to {
            self.from = Some(to.clone());
            self.taken = Some(to.clone());
        }
        true
    }
}

impl std::fmt::Debug for Quiet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quiet").field("unit", &self.unit).field("state", &*self.state()).finish_non_exhaustive()
    }
}

impl Quiet {
    /// The rule's state for unit `unit` reading `repo`; nothing published yet.
    pub(crate) fn new(unit: &str, repo: Repo) -> Arc<Self> {
        Arc::new(Self { unit: unit.to_owned(), repo, state: Mutex::new(Resting::default()) })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Resting> {
        self.state.lock().expect("quiet lock")
    }

    /// The unit rests: a push is probed from `from` for it (`None`: every push wakes it). A
    /// revision left by a push and not yet taken stays.
    pub(crate) fn rest(&self, from: Option<&Revision>) {
        self.state().rest(from);
    }

    /// The unit woke: no push is answered for it until it rests again. Returns the revision a
    /// push left it, if any, for it to take first.
    pub(crate) fn wake(&self) -> Option<Revision> {
        self.state().wake()
    }

    /// The revision published, if the unit rests.
    fn resting_from(&self) -> Option<Revision> {
        self.state().from.clone()
    }

    /// The unit rests under the rule now.
    pub(crate) fn rests(&self) -> bool {
        self.state().from.is_some()
    }

    /// Answers the push `trigger` for this resting unit: true when it left the path alone and
    /// the unit stays asleep, false when the unit must be offered the trigger (the path
    /// changed, the probe cannot tell, the unit woke meanwhile, or a webhook naming no commit
    /// found the revision last applied: it asks for a sync of it all the same). A webhook naming
    /// its commit ([`Trigger::pushed`]) that finds the revision the unit already took leaves
    /// it asleep, as a second ref event of one push does.
    async fn answer(&self, trigger: &Trigger) -> bool {
        let Some(from) = self.resting_from() else { return false };
        let Some(Touch { touched: false, to }) = self.repo.push_touches(Some(&from), trigger.at).await else {
            return false;
        };
        if from == to && !trigger.needs_new_revision() {
            return false;
        }
        if !self.state().leave(&from, &to) {
            return false;
        }
        if from == to {
            debug!(unit = self.unit.as_str(), trigger = %trigger.kind, revision = %to, "no new revision");
        } else {
            debug!(unit = self.unit.as_str(), trigger = %trigger.kind, from = %from, revision = %to, "path unchanged, nothing to sync");
        }
        true
    }
}

/// Hands `trigger` (a push or webhook) to `units`: at once to each unit that does not rest under the rule,
/// then, after the push's one fetch, to each resting unit whose path it changed or whose probe
/// cannot tell ([`Quiet`]). A unit whose task has ended is skipped.
pub(crate) async fn hand_out(units: Vec<(TriggerSender, Option<Arc<Quiet>>)>, trigger: Trigger) {
    let started = Instant::now();
    let mut resting = Vec::new();
    for (sender, quiet) in units {
        match quiet {
            Some(quiet) if quiet.rests() => resting.push((sender, quiet)),
            _ => {
                let _ = sender.offer(trigger.clone());
            }
        }
    }
    let (mut woken, asleep) = (0usize, resting.len());
    for (sender, quiet) in resting {
        if !quiet.answer(&trigger).await {
            woken += 1;
            let _ = sender.offer(trigger.clone());
        }
    }
    if asleep > 0 {
        let ms = started.elapsed().as_millis() as u64;
        debug!(resting = asleep, woken, ms, "push handed to the units resting under the path-unchanged rule");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(s: &str) -> Revision {
        Revision(s.to_owned())
    }

    #[test]
    fn a_revision_is_left_only_while_the_unit_rests_from_where_the_push_started() {
        let mut unit = Resting::default();
        assert!(!unit.leave(&rev("a"), &rev("b")), "nothing published: the unit is awake");
        unit.rest(Some(&rev("a")));
        assert!(!unit.leave(&rev("x"), &rev("b")), "the push started elsewhere");
        assert!(unit.leave(&rev("a"), &rev("b")));
        assert_eq!(unit.from, Some(rev("b")), "the next push is probed from the revision left");
        assert!(unit.leave(&rev("b"), &rev("c")));
        unit.rest(Some(&rev("c")));
        assert_eq!(unit.wake(), Some(rev("c")), "the unit takes the newest revision left");
        assert_eq!(unit.from, None, "a woken unit is offered every push");
        assert!(!unit.leave(&rev("c"), &rev("d")), "woken meanwhile: the push goes to it as a trigger");
        assert_eq!(unit.wake(), None, "taken once");
    }

    #[test]
    fn the_same_revision_leaves_nothing_to_take() {
        let mut unit = Resting::default();
        unit.rest(Some(&rev("a")));
        assert!(unit.leave(&rev("a"), &rev("a")), "no new revision: the unit stays asleep");
        assert_eq!(unit.wake(), None);
    }
}
