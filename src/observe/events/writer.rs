//! The writer of one unit's Kubernetes Events: a leaf of its own, as kube-runtime's events
//! `Recorder` is. It owns its client (gitward's own, not the unit's ServiceAccount) and its
//! queue; the observer ([`super::Events`]) only hands it Events ([`Writer::publish`]).
//!
//! A full queue drops the Event, logged at debug. A task writes the unit's queue in order,
//! started when the queue fills and ending when it is empty — a unit at rest holds no task and
//! no channel, memory every unit of a fleet would otherwise hold (ARCHITECTURE.md, "Figures"). The
//! task aggregates as client-go's events recorder does: an Event with the same reason and note
//! as one written within [`WINDOW`] updates that Event's `series` (count, lastObservedTime)
//! instead of creating another; and it rate-limits per unit with a token bucket like
//! client-go's spam filter ([`BURST`] writes, one more every [`REFILL`]): an occurrence without
//! a token is counted and carried by the next write of its series, a new Event without one is
//! dropped. A write the API server refuses (RBAC denied, say) is logged at warn once per
//! failure streak.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::Api;

use crate::sync::writes::Writes;
use serde_json::json;
use tracing::{debug, warn};

use super::Notice;
use crate::object::ObjectRef;

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

/// The writer of one unit's Events regarding its ApplySet parent: the queue, and the client
/// that writes it while no task holds it. The writing task is spawned when an Event is queued
/// (a tokio runtime must be running then).
pub struct Writer {
    queue: Arc<Mutex<Queue>>,
    unit: Arc<str>,
}

/// A unit's Events not yet written, and what sends them while no task holds it.
struct Queue {
    notices: VecDeque<Notice>,
    /// `None` while a task writes the queue with it.
    sender: Option<Sender>,
}

impl Writer {
    /// The writer of `unit`'s Events regarding `parent`, its ApplySet parent, sent through
    /// `client` with `reportingInstance` `instance` (the process's identity,
    /// [`crate::cluster::agent::process_identity`]); each create and patch goes through
    /// `writes`, the unit's seam of writes ([`crate::sync::writes::Writes`]).
    pub fn new(client: kube::Client, writes: Arc<dyn Writes>, parent: &ObjectRef, instance: &str, unit: &str) -> Self {
        let sender = Sender::new(client, writes, parent, instance);
        let queue = Arc::new(Mutex::new(Queue { notices: VecDeque::new(), sender: Some(sender) }));
        Self { queue, unit: Arc::from(unit) }
    }

    /// Queues `notices` (a full queue drops the rest, logged at debug) and starts the task that
    /// writes them when none runs.
    pub fn publish(&self, notices: Vec<Notice>) {
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
        if let Some(sender) = queue.sender.take() {
            tokio::spawn(drain(self.queue.clone(), sender, self.unit.clone()));
        }
    }

    /// The handle that waits for the queued Events to be written ([`Flush::within`]).
    pub fn flush(&self) -> Flush {
        Flush(self.queue.clone())
    }
}

/// Writes the queue's Events in order with `sender`, until the queue is empty; then gives the
/// sender back to the queue and ends.
async fn drain(queue: Arc<Mutex<Queue>>, mut sender: Sender, unit: Arc<str>) {
    loop {
        let next = {
            let mut q = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match q.notices.pop_front() {
                Some(notice) => notice,
                None => {
                    q.sender = Some(sender);
                    return;
                }
            }
        };
        sender.write_logged(next, &unit).await;
    }
}

/// Waits for a unit's queued Events to be written ([`Flush::within`]).
pub struct Flush(Arc<Mutex<Queue>>);

impl Flush {
    /// Waits until the queued Events are written, at most `bound` (then leaves the rest).
    pub async fn within(self, bound: Duration) {
        let until = tokio::time::Instant::now() + bound;
        loop {
            let idle = self.0.lock().map(|q| q.sender.is_some() && q.notices.is_empty()).unwrap_or(true);
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

/// An Event written and the occurrences it counts.
struct Series {
    name: String,
    /// Occurrences so far, written or not (a write without a token is carried by the next).
    count: i32,
    last: Instant,
}

/// Sends one unit's Events, aggregated and rate-limited: what the task holds while it writes.
struct Sender {
    api: Api<Event>,
    /// Every Event write goes through the unit's seam of writes.
    writes: Arc<dyn Writes>,
    regarding: ObjectReference,
    instance: String,
    series: HashMap<(&'static str, String), Series>,
    bucket: Bucket,
    /// A write failed last: the next failure is not logged again.
    failing: bool,
}

impl Sender {
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
}
