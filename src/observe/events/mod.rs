//! Kubernetes Events of a unit's syncs: one [`Observer`] of the sync's [`Outcome`] that turns
//! it into `events.k8s.io/v1` Events regarding the unit's ApplySet parent, so that
//! `kubectl events --for secret/gitward-<unit> -n <ns>` tells what gitward did.
//!
//! Reasons (CamelCase, as Kubernetes conventions ask): `Applied` (Normal: the short revision
//! and the counts), `SyncFailed` (Warning: the first error, masked), `PruneRefused` (Warning:
//! why), `DriftCorrected` (Normal: a self-heal), `HealthDegraded` (Warning) and
//! `HealthRecovered` (Normal) — health on transitions only, the last result remembered per unit.
//!
//! The observer neither waits nor fails: it hands each Event to the unit's [`Writer`], a leaf
//! of its own that owns its client and queue, and writes, aggregates and rate-limits them
//! ([`writer`]).

pub mod writer;

pub use writer::{Flush, Writer};

use super::Observer;
use crate::changeset::Action;
use crate::health::Health;
use crate::health::record::SyncResult;
use crate::sync::{Ended, Engine, Outcome, Report};
use crate::telemetry::Masked;

/// The longest `note` the API server accepts, in bytes.
const NOTE_BYTES: usize = 1024;
/// Objects a health note names before `and N more`.
const NAMED: usize = 3;

/// One Event to write: what the observer queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// `Warning` (else `Normal`).
    pub warning: bool,
    /// The `reason`: `Applied`, `SyncFailed`, `PruneRefused`, `DriftCorrected`,
    /// `HealthDegraded`, `HealthRecovered`.
    pub reason: &'static str,
    /// The `action`: `Sync`, `Prune`, `Heal` or `HealthCheck`.
    pub action: &'static str,
    /// The `note`: masked, at most 1 KiB.
    pub note: Masked,
}

impl Notice {
    fn new(warning: bool, reason: &'static str, action: &'static str, note: Masked) -> Self {
        Self { warning, reason, action, note: note.truncated(NOTE_BYTES) }
    }
}

/// The Events a sync's `outcome` gives. `degraded` is the unit's last health (`None`: not yet
/// judged), updated here: a health Event is given on a change only.
pub fn notices(outcome: &Outcome, degraded: &mut Option<bool>) -> Vec<Notice> {
    let short = outcome.revision().map(|r| r.short().to_owned());
    let revision = short.as_deref().map_or(String::new(), |s| format!("revision {s}: "));
    let mut out = Vec::new();
    let report = match &outcome.ended {
        Ended::Failed(failure) => {
            let note = Masked::new(format!("{revision}{}", failure.message));
            out.push(Notice::new(true, "SyncFailed", "Sync", note));
            return out;
        }
        Ended::Applied(report) => report,
    };
    if let Some(why) = &report.changes.prune_refused {
        let note = Masked::new(format!("{revision}prune refused: {why}"));
        out.push(Notice::new(true, "PruneRefused", "Prune", note));
    }
    if let Some(first) = report.changes.entries.iter().find(|e| is_failure(e.action)) {
        let c = report.changes.counts();
        let failed = c.failed + c.skipped + c.conflict;
        let why = first.message.as_deref().unwrap_or(first.action.as_str());
        let note = format!(
            "{revision}{failed} object(s) not applied; first: {} {}: {why}",
            first.object,
            first.action.as_str()
        );
        out.push(Notice::new(true, "SyncFailed", "Sync", Masked::new(note)));
    } else if report.heal {
        // A heal that found nothing to change (the drift was a field an ignore rule leaves to
        // another manager) re-applied nothing: no Event.
        let n = report.changes.entries.iter().filter(|e| e.action.applied_change()).count();
        if n > 0 {
            let note = Masked::new(format!("{revision}{n} drifted object(s) re-applied"));
            out.push(Notice::new(false, "DriftCorrected", "Heal", note));
        }
    } else if !report.yielded {
        let note = Masked::new(applied_note(short.as_deref().unwrap_or("-"), report));
        out.push(Notice::new(false, "Applied", "Sync", note));
    }
    if outcome.health.wait.judged() && !report.heal {
        let note = || degraded_note(&revision, outcome);
        out.extend(health_notice(degraded, outcome.health.result, note, &revision));
    }
    out
}

/// The health Event of a unit judged `result` whose last judged health was `degraded`
/// (updated here): `HealthDegraded` (with `note`) when it became degraded, `HealthRecovered`
/// when it became healthy again, else none.
fn health_notice(
    degraded: &mut Option<bool>,
    result: SyncResult,
    note: impl FnOnce() -> String,
    revision: &str,
) -> Option<Notice> {
    let now = match result {
        SyncResult::Degraded => Some(true),
        SyncResult::Healthy => Some(false),
        _ => None,
    };
    let notice = match (*degraded, now) {
        (Some(true), Some(true)) | (_, None) | (None | Some(false), Some(false)) => None,
        (_, Some(true)) => Some(Notice::new(true, "HealthDegraded", "HealthCheck", Masked::new(note()))),
        (Some(true), Some(false)) => {
            let note = Masked::new(format!("{revision}all objects healthy"));
            Some(Notice::new(false, "HealthRecovered", "HealthCheck", note))
        }
    };
    if now.is_some() {
        *degraded = now;
    }
    notice
}

/// The health Event of members judged again between syncs ([`health_notice`]): the note
/// names the members read that are not `Current`.
pub fn followed_notice(followed: &crate::sync::follow::Followed, degraded: &mut Option<bool>) -> Option<Notice> {
    let note = || {
        let unhealthy: Vec<String> = followed
            .read
            .iter()
            .filter_map(|(object, status)| status.as_ref().filter(|s| s.health != Health::Current).map(|s| (object, s)))
            .map(|(object, s)| format!("{object} ({}: {})", s.reason, s.message))
            .collect();
        let named = unhealthy.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
        let more = unhealthy.len().saturating_sub(NAMED);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        format!("{} object(s) not healthy: {named}{more}", followed.counts.degraded + followed.counts.progressing)
    };
    health_notice(degraded, followed.result, note, "")
}

/// The note of `Applied`: the short revision and the counts.
fn applied_note(short: &str, report: &Report) -> String {
    let c = report.changes.counts();
    let failed = c.failed + c.skipped + c.conflict;
    format!(
        "revision {short} applied: {} created, {} configured, {} pruned, {} unchanged, {failed} failed",
        c.created + c.adopted,
        c.configured + c.drift_corrected,
        c.pruned,
        c.unchanged
    )
}

/// The note of `HealthDegraded`: the objects the wait left not healthy, the first few named.
fn degraded_note(revision: &str, outcome: &Outcome) -> String {
    let named: Vec<String> = outcome
        .not_ready
        .iter()
        .take(NAMED)
        .map(|(object, status)| match status {
            Some(s) if !s.reason.is_empty() => format!("{object} ({}: {})", s.reason, s.message),
            _ => object.to_string(),
        })
        .collect();
    let more = outcome.not_ready.len().saturating_sub(NAMED);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{revision}{} object(s) not healthy: {}{more}", outcome.not_ready.len(), named.join(", "))
}

fn is_failure(action: Action) -> bool {
    matches!(action, Action::Failed | Action::Skipped | Action::Conflict)
}

/// The observer that turns a unit's syncs into Events and hands them to its [`Writer`]
/// ([`Events::for_engine`]).
pub struct Events {
    writer: Writer,
    /// The unit's last judged health: degraded or not.
    degraded: Option<bool>,
}

impl Events {
    /// The observer that hands the Events of a unit's syncs to `writer`.
    pub fn new(writer: Writer) -> Self {
        Self { writer, degraded: None }
    }

    /// The observer that writes `engine`'s unit's Events regarding its ApplySet parent, through
    /// gitward's own client ([`Engine::client`], not the unit's ServiceAccount), with
    /// `reportingInstance` this process's identity ([`crate::cluster::agent::process_identity`]);
    /// and the handle that waits for them to be written. The writing task is spawned when an
    /// Event is queued (a tokio runtime must be running then).
    pub fn for_engine(engine: &Engine) -> (Self, Flush) {
        let parent = &engine.inventory().parent;
        let instance = crate::cluster::agent::process_identity();
        let writer = Writer::new(engine.client().clone(), engine.writes(), parent, &instance, engine.unit_name());
        let flush = writer.flush();
        (Self::new(writer), flush)
    }
}

impl Observer for Events {
    fn finished(&mut self, outcome: &Outcome) {
        self.writer.publish(notices(outcome, &mut self.degraded));
    }

    fn followed(&mut self, followed: &crate::sync::follow::Followed) {
        self.writer.publish(followed_notice(followed, &mut self.degraded).into_iter().collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectRef;

    fn outcome(actions: &[(&str, Action, Option<&str>)], result: SyncResult) -> Outcome {
        use crate::sync::outcome::Wait;
        let wait = if result == SyncResult::Failed { Wait::Skipped } else { Wait::Healthy };
        Outcome::applied(crate::sync::build::report_of("app", "82edb11c0ffee5", actions), wait, result)
    }

    fn reasons(notices: &[Notice]) -> Vec<&'static str> {
        notices.iter().map(|n| n.reason).collect()
    }

    #[test]
    fn an_applied_revision_names_its_short_revision_and_counts() {
        let mut health = None;
        let ok = outcome(&[("a", Action::Created, None), ("b", Action::Unchanged, None)], SyncResult::Healthy);
        let notices = notices(&ok, &mut health);
        assert_eq!(reasons(&notices), ["Applied"]);
        assert!(!notices[0].warning);
        assert_eq!(
            notices[0].note.as_str(),
            "revision 82edb11c0ffe applied: 1 created, 0 configured, 0 pruned, 1 unchanged, 0 failed"
        );
    }

    #[test]
    fn health_events_are_given_on_changes_only() {
        let mut health = None;
        let healthy = outcome(&[("a", Action::Unchanged, None)], SyncResult::Healthy);
        let degraded = outcome(&[("a", Action::Configured, None)], SyncResult::Degraded);
        assert_eq!(reasons(&notices(&healthy, &mut health)), ["Applied"], "healthy at start is no change");
        assert_eq!(reasons(&notices(&degraded, &mut health)), ["Applied", "HealthDegraded"]);
        assert_eq!(reasons(&notices(&degraded, &mut health)), ["Applied"], "still degraded");
        assert_eq!(reasons(&notices(&healthy, &mut health)), ["Applied", "HealthRecovered"]);
        assert_eq!(reasons(&notices(&healthy, &mut health)), ["Applied"]);
        let mut fresh = None;
        assert_eq!(reasons(&notices(&degraded, &mut fresh)), ["Applied", "HealthDegraded"], "degraded at start");
    }

    #[test]
    fn a_heal_counts_every_object_it_re_applied_and_one_that_changed_nothing_says_nothing() {
        let heal = |actions: &[(&str, Action, Option<&str>)]| {
            let mut o = outcome(actions, SyncResult::Healthy);
            o.report_mut().heal = true;
            o
        };
        let reapplied = heal(&[("a", Action::Configured, None), ("b", Action::DriftCorrected, None)]);
        let notices_of = notices(&reapplied, &mut None);
        assert_eq!(reasons(&notices_of), ["DriftCorrected"]);
        assert_eq!(notices_of[0].note.as_str(), "revision 82edb11c0ffe: 2 drifted object(s) re-applied");
        let nothing = heal(&[("a", Action::Unchanged, None)]);
        assert!(notices(&nothing, &mut None).is_empty(), "nothing re-applied: no DriftCorrected");
    }

    #[test]
    fn members_judged_between_syncs_give_health_events_on_changes_only() {
        use crate::health::{Counts, Status};
        use crate::sync::follow::Followed;
        let web = ObjectRef::new(crate::object::GroupKind::new("apps", "Deployment"), Some("shop"), "web");
        let failed = Status::failed("ProgressDeadlineExceeded", "timed out progressing");
        let followed = |result, before, status: Status| Followed {
            unit: "app".into(),
            result,
            before,
            counts: Counts { healthy: 2, progressing: 0, degraded: usize::from(result == SyncResult::Degraded) },
            read: vec![(web.clone(), Some(status))],
            whole: false,
        };
        let mut health = Some(false);
        let degraded = followed(SyncResult::Degraded, SyncResult::Healthy, failed.clone());
        let notice = followed_notice(&degraded, &mut health).expect("degraded");
        assert_eq!((notice.reason, notice.warning), ("HealthDegraded", true));
        assert_eq!(
            notice.note.as_str(),
            "1 object(s) not healthy: Deployment/shop/web (ProgressDeadlineExceeded: timed out progressing)"
        );
        assert_eq!(followed_notice(&degraded, &mut health), None, "still degraded");
        let recovered = followed(SyncResult::Healthy, SyncResult::Degraded, Status::current("ok"));
        assert_eq!(followed_notice(&recovered, &mut health).map(|n| n.reason), Some("HealthRecovered"));
    }

    #[test]
    fn failed_objects_give_one_masked_warning_with_the_first_error() {
        crate::telemetry::mask::register(["hunter2-events-canary"]);
        let failed = outcome(
            &[
                ("a", Action::Unchanged, None),
                ("bad", Action::Failed, Some("Invalid value: \"hunter2-events-canary\"")),
                ("worse", Action::Failed, Some("second")),
            ],
            SyncResult::Failed,
        );
        let notices = notices(&failed, &mut None);
        assert_eq!(reasons(&notices), ["SyncFailed"]);
        let note = &notices[0].note;
        assert!(notices[0].warning);
        assert!(
            note.starts_with("revision 82edb11c0ffe: 2 object(s) not applied; first: ConfigMap/shop/bad failed"),
            "{note}"
        );
        assert!(!note.contains("hunter2-events-canary") && !note.contains("second"), "{note}");
    }

    #[test]
    fn a_refused_prune_is_a_warning_beside_the_applied_revision() {
        let mut refused = outcome(&[("a", Action::Unchanged, None)], SyncResult::Healthy);
        refused.report_mut().changes.prune_refused = Some("the desired set is empty".into());
        let notices = notices(&refused, &mut None);
        assert_eq!(reasons(&notices), ["PruneRefused", "Applied"]);
        assert!(notices[0].warning && notices[0].note.ends_with("prune refused: the desired set is empty"));
    }

    #[test]
    fn a_long_note_is_cut_at_a_character_boundary() {
        let note = Masked::new("é".repeat(NOTE_BYTES));
        let cut = Notice::new(true, "SyncFailed", "Sync", note).note;
        assert!(cut.len() <= NOTE_BYTES && cut.ends_with("..."));
        assert_eq!(Notice::new(true, "SyncFailed", "Sync", Masked::new("short")).note.as_str(), "short");
    }
}
