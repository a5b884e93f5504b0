//! Whatever tells of syncs, in one room: the observers of a unit's syncs behind one trait,
//! [`Observer`], told in order by [`Observers`]. The engine tells no one: whoever drives it
//! (`gitward sync`, a daemon unit task) hands each sync's [`Outcome`] to the unit's observers.
//!
//! - [`log`] — the log events of a sync (`object`, `trigger applied`, `health`, `sync
//!   complete`, `sync failed`): [`log::Log`], shared by `gitward sync` and the daemon.
//! - [`stdout`] — the one line per unit `gitward sync` prints ([`stdout::Stdout`], in the form of
//!   [`crate::summary`]).
//! - [`events`] — Kubernetes Events regarding the unit's ApplySet parent: the observer
//!   ([`events::Events`]) turns an outcome into Events, and hands them to the unit's Event
//!   writer ([`events::writer`]), a leaf task that owns its client and queue.
//! - [`notify`] — notifications (`[[notify]]`): [`notify::Watch`] turns transitions into
//!   notices and queues them on the notifiers of [`crate::notify`].
//! - [`unit`] — the daemon's status and metrics of a unit ([`unit::Readiness`],
//!   [`unit::Metered`]), written through small interfaces the daemon implements.
//! - [`board`] — what the dashboard shows of each unit ([`board::Board`]), fed by
//!   [`board::Recorder`].
//!
//! Observers neither wait nor fail: one that must write elsewhere queues the write.

pub mod board;
pub mod events;
pub mod log;
pub mod notify;
pub mod stdout;
pub mod unit;

use crate::sync::follow::Followed;
use crate::sync::{Cause, Outcome, Report};

/// What tells of syncs: the log, the stdout line, metrics, readiness, Events, notifiers and the
/// dashboard. Observers neither wait nor fail: one that must write elsewhere queues the write.
pub trait Observer: Send {
    /// A sync's (or self-heal's) objects were sent, before its health wait: its report so far,
    /// and the members the unit's cache tracks.
    fn applied(&mut self, _cause: &Cause, _report: &Report, _tracked: usize) {}

    /// A sync ended ([`Outcome`]).
    fn finished(&mut self, outcome: &Outcome);

    /// Between syncs, members were judged again as their status moved ([`Followed`]).
    fn followed(&mut self, _followed: &Followed) {}
}

/// The observers of a unit's syncs, told in order.
#[derive(Default)]
pub struct Observers(Vec<Box<dyn Observer>>);

impl Observers {
    /// Adds `observer` after those already there.
    pub fn with(mut self, observer: impl Observer + 'static) -> Self {
        self.0.push(Box::new(observer));
        self
    }
}

impl Observer for Observers {
    fn applied(&mut self, cause: &Cause, report: &Report, tracked: usize) {
        for o in &mut self.0 {
            o.applied(cause, report, tracked);
        }
    }

    fn finished(&mut self, outcome: &Outcome) {
        for o in &mut self.0 {
            o.finished(outcome);
        }
    }

    fn followed(&mut self, followed: &Followed) {
        for o in &mut self.0 {
            o.followed(followed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observers are told in the order they were added, every one of them.
    #[test]
    fn observers_are_told_in_order() {
        use std::sync::{Arc, Mutex};
        struct Named(&'static str, Arc<Mutex<Vec<String>>>);
        impl Observer for Named {
            fn finished(&mut self, outcome: &Outcome) {
                self.1.lock().unwrap().push(format!("{} {}", self.0, outcome.unit()));
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut observers = Observers::default().with(Named("log", seen.clone())).with(Named("metrics", seen.clone()));
        let outcome = Outcome::failed("shop", crate::sync::Error::Task("the task panicked".into()));
        observers.finished(&outcome);
        assert_eq!(*seen.lock().unwrap(), ["log shop", "metrics shop"]);
    }
}
