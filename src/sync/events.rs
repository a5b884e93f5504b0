//! Kubernetes Events of a unit's syncs: one [`Observer`] of the sync's [`Outcome`] that turns
//! it into `events.k8s.io/v1` Events regarding the unit's ApplySet parent, so that
//! `kubectl events --for secret/gitward-<unit> -n <ns>` tells what gitward did.
//!
//! Reasons (CamelCase, as Kubernetes conventions ask): `Applied` (Normal: the short revision
//! and the counts), `SyncFailed` (Warning: the first error, masked), `PruneRefused` (Warning:
//! why), `DriftCorrected` (Normal: a self-heal), `HealthDegraded` (Warning) and
//! `HealthRecovered` (Normal) — health on transitions only, the last result remembered per unit.
//!
//! The observer neither waits nor fails: it queues each Event (a full queue drops the Event,
//! logged at debug), and a task writes the unit's queue in order, started when the queue
//! fills and ending when it is empty — a unit at rest holds no task and no channel (each
//! held one, about 6.7 KiB per unit at 1,000 units, 2026-11-29, 9e4f2da). The task
//! aggregates as client-go's events recorder does: an Event with the same reason and note as
//! one written within [`WINDOW`] updates that Event's `series` (count, lastObservedTime)
//! instead of creating another; and it rate-limits per unit with a token bucket like client-go's
//! spam filter ([`BURST`] writes, one more every [`REFILL`]): an occurrence without a token is
//! counted and carried by the next write of its series, a new Event without one is dropped. A
//! write the API server refuses (RBAC denied, say) is logged at warn once per failure streak.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::Api;
use serde_json::json;
use tracing::{debug, warn};

use super::outcome::{Observer, Outcome};
use super::writes::Writes;
use super::{Engine, Report};
use crate::changeset::Action;
use crate::health::Health;
use crate::health::record::SyncResult;
use crate::object::ObjectRef;
use crate::telemetry::Masked;

/// The Events' `reportingController`.
pub const CONTROLLER: &str = "gitward.dev/gitward";
/// An occurrence within this long of its series' last one updates the series (client-go's
/// events recorder aggregates over 6 minutes; a failing unit's retries back off up to a few
/// minutes, so they stay within one series).
pub const WINDOW: Duration = Duration::from_secs(10 * 60);
/// Writes a unit may burst before the rate limit holds (client-go's spam filter: 25).
pub const BURST: u32 = 25;
/// One more write per this long once the burst is spent (client-go's spam filter: 5 minutes).
pub const REFILL: Duration = Duration::from_secs(5 * 60);
/// Events queued for a unit's writer; more are dropped.
const QUEUE: usize = 64;
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
    if let Some(failure) = &outcome.failure {
        let note = Masked::new(format!("{revision}{}", failure.message));
        out.push(Notice::new(true, "SyncFailed", "Sync", note));
        return out;
    }
    let Some(report) = &outcome.report else { return out };
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

/// The observer that queues a unit's Events ([`Engine::events`]).
pub struct Events {
    queue: Arc<Mutex<Queue>>,
    unit: Arc<str>,
    /// The unit's last judged health: degraded or not.
    degraded: Option<bool>,
}

/// A unit's Events not yet written, and its writer while no task holds it.
struct Queue {
    notices: VecDeque<Notice>,
    /// `None` while a task writes the queue with it.
    writer: Option<Writer>,
}

impl Observer for Events {
    fn finished(&mut self, outcome: &Outcome) {
        let notices = notices(outcome, &mut self.degraded);
        self.queue(notices);
    }

    fn followed(&mut self, followed: &crate::sync::follow::Followed) {
        let notices: Vec<Notice> = followed_notice(followed, &mut self.degraded).into_iter().collect();
        self.queue(notices);
    }
}

impl Events {
    /// Queues `notices` and starts the writer when none runs.
    fn queue(&mut self, notices: Vec<Notice>) {
        if notices.is_empty() {
            return;
        }
        let mut queue = self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for notice in notices {
            if queue.notices.len() >= QUEUE {
                debug!(unit = %self.unit, "event queue full: an event was dropped");
                continue;
            }
            queue.notices.push_back(notice);
        }
        if let Some(writer) = queue.writer.take() {
            tokio::spawn(drain(self.queue.clone(), writer, self.unit.clone()));
        }
    }
}

/// Writes the queue's Events in order with `writer`, until the queue is empty; then gives the
/// writer back to the queue and ends.
async fn drain(queue: Arc<Mutex<Queue>>, mut writer: Writer, unit: Arc<str>) {
    loop {
        let next = {
            let mut q = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match q.notices.pop_front() {
                Some(notice) => notice,
                None => {
                    q.writer = Some(writer);
                    return;
                }
            }
        };
        writer.write_logged(next, &unit).await;
    }
}

/// Waits for a unit's queued Events to be written ([`Flush::within`]).
pub struct Flush(Arc<Mutex<Queue>>);

impl Flush {
    /// Waits until the queued Events are written, at most `bound` (then leaves the rest).
    pub async fn within(self, bound: Duration) {
        let until = tokio::time::Instant::now() + bound;
        loop {
            let idle = self.0.lock().map(|q| q.writer.is_some() && q.notices.is_empty()).unwrap_or(true);
            if idle {
                return;
            }
            if tokio::time::Instant::now() >= until {
                debug!("events still queued at exit were not written");
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Engine {
    /// The observer that writes this unit's Events regarding its ApplySet parent, through
    /// gitward's own client (not the unit's ServiceAccount), with `reportingInstance` this
    /// process's identity ([`crate::cluster::agent::process_identity`]); and the handle that
    /// waits for them to be written. The writing task is spawned when an Event is queued (a
    /// tokio runtime must be running then).
    pub fn events(&self) -> (Events, Flush) {
        let parent = &self.parent.inventory.parent;
        let (client, writes) = (self.view.client().clone(), self.view.writes_shared());
        let writer = Writer::new(client, writes, parent, &crate::cluster::agent::process_identity());
        let queue = Arc::new(Mutex::new(Queue { notices: VecDeque::new(), writer: Some(writer) }));
        let unit = Arc::from(self.unit_name());
        (Events { queue: queue.clone(), unit, degraded: None }, Flush(queue))
    }
}

/// An Event written and the occurrences it counts.
struct Series {
    name: String,
    /// Occurrences so far, written or not (a write without a token is carried by the next).
    count: i32,
    last: Instant,
}

/// Writes one unit's Events ([`Events`]), aggregated and rate-limited.
struct Writer {
    api: Api<Event>,
    /// Every Event write goes through the sync's seam ([`super::writes`]).
    writes: Arc<dyn Writes>,
    regarding: ObjectReference,
    instance: String,
    series: HashMap<(&'static str, String), Series>,
    bucket: Bucket,
    /// A write failed last: the next failure is not logged again.
    failing: bool,
}

impl Writer {
    fn new(client: kube::Client, writes: Arc<dyn Writes>, parent: &ObjectRef, instance: &str) -> Self {
        let namespace = parent.namespace.as_ref().map_or_else(|| "default".to_owned(), |n| n.to_string());
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some(parent.gk.kind.to_string()),
            name: Some(parent.name.to_string()),
            namespace: Some(namespace.clone()),
            ..Default::default()
        };
        Self {
            api: Api::namespaced(client, &namespace),
            writes,
            regarding,
            instance: instance.to_owned(),
            series: HashMap::new(),
            bucket: Bucket::full(Instant::now()),
            failing: false,
        }
    }

    /// [`Self::write`], its failure logged at warn once per streak of failures.
    async fn write_logged(&mut self, notice: Notice, unit: &str) {
        match self.write(notice).await {
            Ok(()) => self.failing = false,
            Err(e) if !self.failing => {
                self.failing = true;
                let error = crate::telemetry::error_chain(&e);
                warn!(unit, error, "could not write a Kubernetes Event (logged once until one is written)");
            }
            Err(e) => debug!(unit, error = %crate::telemetry::error_chain(&e), "could not write a Kubernetes Event"),
        }
    }

    /// Writes `notice`: the series of an equal Event within [`WINDOW`] updated, else a new
    /// Event; nothing without a token.
    async fn write(&mut self, notice: Notice) -> Result<(), kube::Error> {
        let now = Instant::now();
        self.series.retain(|_, s| now.duration_since(s.last) < WINDOW);
        let key = (notice.reason, notice.note.to_string());
        if let Some(series) = self.series.get_mut(&key) {
            series.count += 1;
            series.last = now;
            if !self.bucket.take(now) {
                return Ok(());
            }
            let patch =
                json!({"series": {"count": series.count, "lastObservedTime": MicroTime(jiff::Timestamp::now())}});
            match self.writes.patch_event(&self.api, &series.name, &patch).await {
                Ok(_) => return Ok(()),
                // Expired (the API server keeps Events an hour) or deleted: a new one.
                Err(e) if crate::cluster::is_status(&e, 404) => {}
                Err(e) => return Err(e),
            }
        } else if !self.bucket.take(now) {
            return Ok(());
        }
        let event = self.event(&notice);
        let name = event.metadata.name.clone().unwrap_or_default();
        self.writes.create_event(&self.api, &event).await?;
        self.series.insert(key, Series { name, count: 1, last: now });
        Ok(())
    }

    fn event(&self, notice: &Notice) -> Event {
        let now = jiff::Timestamp::now();
        let parent = self.regarding.name.as_deref().unwrap_or("gitward");
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{parent}.{:x}", now.as_nanosecond())),
                namespace: self.regarding.namespace.clone(),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(notice.action.into()),
            reason: Some(notice.reason.into()),
            note: Some(notice.note.to_string()),
            type_: Some(if notice.warning { "Warning" } else { "Normal" }.into()),
            regarding: Some(self.regarding.clone()),
            reporting_controller: Some(CONTROLLER.into()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        }
    }
}

/// A token bucket: [`BURST`] tokens, one back every [`REFILL`].
struct Bucket {
    tokens: u32,
    since: Instant,
}

impl Bucket {
    fn full(now: Instant) -> Self {
        Self { tokens: BURST, since: now }
    }

    /// Takes a token at `now`, if one is left after the refill.
    fn take(&mut self, now: Instant) -> bool {
        let refilled = (now.duration_since(self.since).as_secs() / REFILL.as_secs()) as u32;
        if refilled > 0 {
            self.tokens = (self.tokens + refilled).min(BURST);
            self.since += REFILL * refilled;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_spends_its_burst_then_refills_one_per_period() {
        let t0 = Instant::now();
        let mut bucket = Bucket::full(t0);
        assert_eq!((0..BURST + 5).filter(|_| bucket.take(t0)).count(), BURST as usize);
        assert!(!bucket.take(t0 + REFILL / 2));
        assert!(bucket.take(t0 + REFILL));
        assert!(!bucket.take(t0 + REFILL));
        assert_eq!(
            (0..BURST + 5).filter(|_| bucket.take(t0 + REFILL * 100)).count(),
            BURST as usize,
            "never above the burst"
        );
    }

    fn outcome(actions: &[(&str, Action, Option<&str>)], result: SyncResult) -> Outcome {
        use crate::changeset::{ChangeSet, Entry};
        use crate::object::GroupKind;
        use crate::sync::outcome::{Cause, HealthSummary, Live, Timings, Wait};
        let mut changes = ChangeSet::default();
        for (name, action, message) in actions {
            let object = ObjectRef::new(GroupKind::new("", "ConfigMap"), Some("shop"), *name);
            changes.entries.push(Entry {
                object,
                action: *action,
                message: message.map(str::to_owned),
                sent: Vec::new(),
            });
        }
        let report = Report::of("app", "82edb11c0ffee5", changes);
        let wait = if result == SyncResult::Failed { Wait::Skipped } else { Wait::Healthy };
        Outcome {
            cause: Cause::cli(),
            report: Some(report),
            health: HealthSummary { counts: Default::default(), wait, result },
            not_ready: Vec::new(),
            post_hooks: 0,
            failure: None,
            live: Live { answered: true, tracked: 0, health: None, cache_bytes: 0 },
            timings: Timings::default(),
        }
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
            o.report.as_mut().unwrap().heal = true;
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
        refused.report.as_mut().unwrap().changes.prune_refused = Some("the desired set is empty".into());
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
