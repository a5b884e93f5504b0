//! Which syncs are told of (pure): a unit's transitions, each (revision, state) once, and the
//! [`Notice`] that tells of one.

use crate::changeset::Action;
use crate::config::NotifyEvent;
use crate::health::record::SyncResult;
use crate::notify::{Notice, NoticeCounts, State};
use crate::sync::Report;
use crate::sync::outcome::{Cause, Ended, Outcome, Wait};
use crate::telemetry::Masked;

/// Errors and unhealthy objects a notice names; the rest are counted.
const NAMED: usize = 3;

/// How a sync ended, for transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Failed,
    Degraded,
    /// The health wait ran out of `health_timeout`: not healthy in time, a failure.
    TimedOut,
    Good,
    /// The wait was cancelled: not judged, so not a transition (`bad` stays as it was).
    Cancelled,
}

/// A unit's transitions: the revision last told of, what was told of it, and whether the unit
/// was last failed or degraded.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    /// The revision of the notices below.
    revision: Option<String>,
    /// `pending` was told of `revision`.
    pending: bool,
    /// How `revision`'s last told sync ended.
    end: Option<End>,
    /// The unit's last judged sync failed or was degraded.
    bad: bool,
}

impl Tracker {
    /// The `pending` notice of a sync whose objects were just sent: once per revision, none for
    /// a self-heal or a sync that yielded to a newer revision.
    pub(super) fn applied(&mut self, cause: &Cause, report: &Report) -> Option<Notice> {
        if report.heal || report.yielded {
            return None;
        }
        self.at(&report.revision.0);
        if std::mem::replace(&mut self.pending, true) {
            return None;
        }
        let mut notice = notice(&report.revision.0, NotifyEvent::Applied, State::Pending, "pending", cause);
        notice.counts = counts(report);
        Some(notice)
    }

    /// The notice of a sync's `outcome`, when it is a transition: failed, degraded (a wait that
    /// timed out included), recovered, or (a first good end of a revision) applied; or the end
    /// of a `pending` status whose wait was cancelled ([`State::Cancelled`]), so every status
    /// told ends. None for a self-heal, a sync that yielded, or an end already told of this
    /// revision.
    pub(super) fn finished(&mut self, outcome: &Outcome) -> Option<Notice> {
        let end = classify(outcome)?;
        let revision = outcome.revision()?.0.clone();
        self.at(&revision);
        if self.end == Some(end) || (end == End::Cancelled && !self.pending) {
            return None;
        }
        let (event, state, result) = match end {
            End::Failed => (NotifyEvent::Failed, State::Failure, outcome.health.result.as_str()),
            End::Degraded => (NotifyEvent::Degraded, State::Failure, outcome.health.result.as_str()),
            End::TimedOut => (NotifyEvent::Degraded, State::Failure, "timeout"),
            End::Good if self.bad => (NotifyEvent::Recovered, State::Success, outcome.health.result.as_str()),
            End::Good => (NotifyEvent::Applied, State::Success, outcome.health.result.as_str()),
            End::Cancelled => (NotifyEvent::Applied, State::Cancelled, "cancelled"),
        };
        if end == End::Cancelled {
            // Not judged: a later end of this revision is still told, and the streak is kept.
            self.end = None;
        } else {
            self.end = Some(end);
            self.bad = end != End::Good;
        }
        let mut notice = notice(&revision, event, state, result, &outcome.cause);
        match &outcome.ended {
            Ended::Failed(failure) => notice.errors.push(failure.message.clone()),
            Ended::Applied(report) => {
                notice.counts = counts(report);
                notice.errors.extend(errors(report));
            }
        }
        notice.unhealthy = unhealthy(outcome);
        Some(notice)
    }

    /// Moves to `revision`: what was told of another is forgotten.
    fn at(&mut self, revision: &str) {
        if self.revision.as_deref() != Some(revision) {
            self.revision = Some(revision.to_owned());
            self.pending = false;
            self.end = None;
        }
    }
}

/// How `outcome` ended; `None` when it says nothing of the revision's health (a self-heal, a
/// sync that yielded).
fn classify(outcome: &Outcome) -> Option<End> {
    let Ended::Applied(report) = &outcome.ended else { return Some(End::Failed) };
    if report.heal || report.yielded {
        return None;
    }
    if report.changes.has_failures() {
        return Some(End::Failed);
    }
    match (outcome.health.result, outcome.health.wait) {
        (SyncResult::Failed, _) => Some(End::Failed),
        (SyncResult::Degraded, _) => Some(End::Degraded),
        (SyncResult::Healthy | SyncResult::Applied, _) => Some(End::Good),
        (SyncResult::Progressing, Wait::Timeout) => Some(End::TimedOut),
        (SyncResult::Progressing, Wait::Cancelled) => Some(End::Cancelled),
        (SyncResult::Progressing, _) => None,
    }
}

fn notice(revision: &str, event: NotifyEvent, state: State, result: &'static str, cause: &Cause) -> Notice {
    Notice {
        unit: String::new(),
        cluster: String::new(),
        repo: String::new(),
        revision: revision.to_owned(),
        event,
        state,
        result,
        trigger: cause.trigger(),
        counts: NoticeCounts::default(),
        errors: Vec::new(),
        unhealthy: Vec::new(),
        time: jiff::Timestamp::now(),
    }
}

fn counts(report: &Report) -> NoticeCounts {
    let c = report.changes.counts();
    NoticeCounts {
        created: c.created + c.adopted,
        configured: c.configured + c.drift_corrected,
        pruned: c.pruned,
        unchanged: c.unchanged,
        failed: c.failed + c.skipped + c.conflict,
    }
}

/// The first objects `report` did not apply, as `Kind/ns/name failed: why` (masked).
fn errors(report: &Report) -> Vec<Masked> {
    report
        .changes
        .entries
        .iter()
        .filter(|e| matches!(e.action, Action::Failed | Action::Skipped | Action::Conflict))
        .take(NAMED)
        .map(|e| {
            let why = e.message.as_deref().unwrap_or_default();
            Masked::new(format!("{} {}: {why}", e.object, e.action.as_str()))
        })
        .collect()
}

/// The first objects the wait left not healthy, as `Kind/ns/name (Reason: message)` (masked).
fn unhealthy(outcome: &Outcome) -> Vec<Masked> {
    outcome
        .not_ready
        .iter()
        .take(NAMED)
        .map(|(object, status)| match status {
            Some(s) if !s.reason.is_empty() => Masked::new(format!("{object} ({}: {})", s.reason, s.message)),
            _ => Masked::new(object.to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::outcome::HealthSummary;

    fn report(revision: &str, failed: bool) -> Report {
        let object = if failed { ("a", Action::Failed, Some("denied")) } else { ("a", Action::Created, None) };
        crate::sync::build::report_of("app", revision, &[object])
    }

    fn outcome(revision: &str, result: SyncResult) -> Outcome {
        let failed = result == SyncResult::Failed;
        let wait = if failed { Wait::Skipped } else { Wait::Healthy };
        Outcome::applied(report(revision, failed), wait, result)
    }

    fn events(tracker: &mut Tracker, revision: &str, result: SyncResult) -> Option<(NotifyEvent, State)> {
        tracker.finished(&outcome(revision, result)).map(|n| (n.event, n.state))
    }

    #[test]
    fn a_failing_revision_is_told_once_and_its_fix_as_recovered() {
        let mut t = Tracker::default();
        assert_eq!(events(&mut t, "a", SyncResult::Failed), Some((NotifyEvent::Failed, State::Failure)));
        assert_eq!(events(&mut t, "a", SyncResult::Failed), None, "a retry of the same revision");
        assert_eq!(events(&mut t, "b", SyncResult::Healthy), Some((NotifyEvent::Recovered, State::Success)));
        assert_eq!(events(&mut t, "b", SyncResult::Healthy), None, "a resync");
        assert_eq!(events(&mut t, "c", SyncResult::Healthy), Some((NotifyEvent::Applied, State::Success)));
        assert_eq!(events(&mut t, "c", SyncResult::Degraded), Some((NotifyEvent::Degraded, State::Failure)));
        assert_eq!(events(&mut t, "c", SyncResult::Healthy), Some((NotifyEvent::Recovered, State::Success)));
        assert_eq!(events(&mut t, "d", SyncResult::Progressing), None, "health not judged");
    }

    #[test]
    fn a_pending_status_always_ends_timed_out_as_failure_cancelled_as_cancelled() {
        let mut t = Tracker::default();
        let cause = Cause::cli();
        let waited = |revision: &str, wait: Wait| Outcome {
            health: HealthSummary { counts: Default::default(), wait, result: SyncResult::Progressing },
            ..outcome(revision, SyncResult::Healthy)
        };
        assert_eq!(t.applied(&cause, &report("a", false)).map(|n| n.state), Some(State::Pending));
        let timed_out = t.finished(&waited("a", Wait::Timeout)).unwrap();
        assert_eq!((timed_out.state, timed_out.result), (State::Failure, "timeout"));
        assert_eq!(t.applied(&cause, &report("b", false)).map(|n| n.state), Some(State::Pending));
        let cancelled = t.finished(&waited("b", Wait::Cancelled)).unwrap();
        assert_eq!((cancelled.state, cancelled.event), (State::Cancelled, NotifyEvent::Applied));
        // Judged later (the wait started again): told, as a recovery from the timed-out `a`.
        assert_eq!(events(&mut t, "b", SyncResult::Healthy), Some((NotifyEvent::Recovered, State::Success)));
        // A cancel with no pending told of its revision ends nothing.
        assert!(t.finished(&waited("c", Wait::Cancelled)).is_none());
    }

    #[test]
    fn pending_is_told_once_per_revision_and_never_for_a_heal() {
        let mut t = Tracker::default();
        let cause = Cause::cli();
        assert_eq!(t.applied(&cause, &report("a", false)).map(|n| n.state), Some(State::Pending));
        assert!(t.applied(&cause, &report("a", false)).is_none());
        let mut heal = report("b", false);
        heal.heal = true;
        assert!(t.applied(&cause, &heal).is_none());
        assert!(t.applied(&cause, &report("b", false)).is_some());
    }

    #[test]
    fn a_failed_notice_names_the_first_errors_masked() {
        crate::telemetry::mask::register(["hunter2-notify-canary"]);
        let mut o = outcome("a", SyncResult::Failed);
        let entry = &mut o.report_mut().changes.entries[0];
        entry.message = Some("bad value hunter2-notify-canary".into());
        let notice = Tracker::default().finished(&o).unwrap();
        assert_eq!(notice.counts.failed, 1);
        assert_eq!(notice.result, "failed");
        assert!(notice.errors[0].starts_with("ConfigMap/shop/a failed: bad value"), "{:?}", notice.errors);
        assert!(!notice.errors[0].contains("hunter2-notify-canary"));
    }
}
