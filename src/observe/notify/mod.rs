//! Notifications of a unit's syncs (`[[notify]]`), as an observer: [`Watch`] turns the unit's
//! transitions ([`track`]) into notices and queues them on the process's notifiers
//! ([`crate::notify::Notifications`]), which render and send them.
//!
//! What is told (`track`): a revision that `failed` or is `degraded`, the first good sync after
//! one (`recovered`), and with `on = ["applied", …]` every revision — a forge's `pending` when
//! its objects are sent, `success` at its end. Each (unit, revision, state) is told once: the
//! retries of a failing revision, and resyncs of an applied one, tell nothing.

mod track;

use super::Observer;
use crate::config::SyncUnit;
use crate::notify::{Notice, Notifications};
use crate::sync::{Cause, Outcome, Report};

/// The observer of one unit's syncs ([`Watch::new`]): its transitions, queued on the
/// notifiers.
pub struct Watch {
    unit: String,
    cluster: String,
    repo: String,
    tracker: track::Tracker,
    notifications: Notifications,
}

impl Watch {
    /// The observer of `unit`'s syncs, queueing on `notifications`.
    pub fn new(notifications: &Notifications, unit: &SyncUnit) -> Self {
        Watch {
            unit: unit.name.clone(),
            cluster: unit.cluster.clone(),
            repo: unit.repo.clone(),
            tracker: track::Tracker::default(),
            notifications: notifications.clone(),
        }
    }

    fn complete(&self, notice: Notice) -> Notice {
        Notice { unit: self.unit.clone(), cluster: self.cluster.clone(), repo: self.repo.clone(), ..notice }
    }
}

impl Observer for Watch {
    fn applied(&mut self, cause: &Cause, report: &Report, _tracked: usize) {
        if let Some(notice) = self.tracker.applied(cause, report) {
            self.notifications.send(&self.complete(notice));
        }
    }

    fn finished(&mut self, outcome: &Outcome) {
        if let Some(notice) = self.tracker.finished(outcome) {
            self.notifications.send(&self.complete(notice));
        }
    }
}
