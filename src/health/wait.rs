//! The bounded, event-driven health wait after an apply (DESIGN.md, Data flow: health).
//!
//! Only the objects the sync created, configured or drift-corrected are waited for. Those of
//! kinds without health ([`super::bears_health`]) are `Current` at once and cost nothing; each
//! other one gets its own watch of the full object (`fieldSelector=metadata.name=<name>` in its
//! namespace: one list, then a watch), for the duration of the wait only — the metadata-only
//! cache is not touched. Every event is judged by [`super::status`].
//!
//! The wait ends when every object is `Current` ([`Outcome::Healthy`]), at the first `Failed`
//! one ([`Outcome::Degraded`], fail fast: a `ProgressDeadlineExceeded` Deployment or a failed
//! Job will not recover by waiting), or at the deadline ([`Outcome::TimedOut`]). Cancelling is
//! dropping the future of [`HealthWait::run`]: the watches end with it, and
//! [`HealthWait::statuses`] still tells what was known. Nothing here blocks a thread, so a
//! waiting unit holds no worker another unit needs.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::time::Instant;

use super::{Health, Status, bears_health, status};
use crate::object::ObjectRef;

/// One object to wait for.
#[derive(Debug, Clone)]
pub struct Target {
    /// The object.
    pub object: ObjectRef,
    /// Its resource (group, version, plural), to watch it.
    pub resource: ApiResource,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every object is `Current`.
    Healthy,
    /// An object is `Failed`; the wait stopped at once.
    Degraded,
    /// The deadline passed with objects not yet `Current`.
    TimedOut,
}

impl Outcome {
    /// The lowercase name for logs: `healthy`, `degraded`, `timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Healthy => "healthy",
            Outcome::Degraded => "degraded",
            Outcome::TimedOut => "timeout",
        }
    }
}

/// A wait over a set of objects; [`HealthWait::statuses`] stays readable after the future of
/// [`HealthWait::run`] is dropped (cancelled).
pub struct HealthWait {
    client: kube::Client,
    targets: Vec<Target>,
    statuses: BTreeMap<ObjectRef, Status>,
}

type Events = BoxStream<'static, (usize, Result<Event<DynamicObject>, watcher::Error>)>;

impl HealthWait {
    /// A wait for `targets`; objects of kinds without health are `Current` from the start.
    pub fn new(client: kube::Client, targets: Vec<Target>) -> Self {
        let statuses = targets
            .iter()
            .filter(|t| !bears_health(&t.object.gk))
            .map(|t| (t.object.clone(), Status::current("kind has no status")))
            .collect();
        Self { client, targets, statuses }
    }

    /// The objects waited for.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The last known status of each object; objects with no event yet are absent.
    pub fn statuses(&self) -> &BTreeMap<ObjectRef, Status> {
        &self.statuses
    }

    /// The health of every target: its last status, else `InProgress` (not observed yet).
    pub fn healths(&self) -> Vec<Health> {
        self.targets.iter().map(|t| self.statuses.get(&t.object).map_or(Health::InProgress, |s| s.health)).collect()
    }

    /// Watches until every target is `Current`, one is `Failed`, or `timeout` passes.
    /// `on_change` is called with each object whose health or reason changes (the daemon logs
    /// the `health` event from it). Watch errors (RBAC, a kind gone) make that object
    /// `Unknown` and the watch retries with kube's default backoff, bounded by the timeout.
    pub async fn run(&mut self, timeout: Duration, mut on_change: impl FnMut(&ObjectRef, &Status)) -> Outcome {
        let deadline = Instant::now() + timeout;
        let watched: Vec<usize> =
            (0..self.targets.len()).filter(|&i| bears_health(&self.targets[i].object.gk)).collect();
        let mut streams: SelectAll<Events> = SelectAll::new();
        for &i in &watched {
            streams.push(self.watch(i));
        }
        let mut seen = vec![false; self.targets.len()];
        loop {
            if let Some(outcome) = self.verdict() {
                return outcome;
            }
            let next = tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return Outcome::TimedOut,
                next = streams.next() => next,
            };
            let Some((i, event)) = next else {
                // Watch streams do not end; if they all did, only the deadline is left.
                tokio::time::sleep_until(deadline).await;
                return Outcome::TimedOut;
            };
            let new = match event {
                Ok(Event::Init) => {
                    seen[i] = false;
                    continue;
                }
                Ok(Event::InitApply(obj) | Event::Apply(obj)) => {
                    seen[i] = true;
                    self.judge(i, obj)
                }
                Ok(Event::InitDone) if seen[i] => continue,
                Ok(Event::InitDone) => Status::new(Health::Unknown, "NotFound", "the object does not exist"),
                Ok(Event::Delete(_)) => Status::new(Health::Unknown, "Deleted", "the object was deleted"),
                Err(e) => Status::new(Health::Unknown, "WatchFailed", e.to_string()),
            };
            let object = self.targets[i].object.clone();
            let changed =
                self.statuses.get(&object).is_none_or(|old| (old.health, &old.reason) != (new.health, &new.reason));
            if changed {
                on_change(&object, &new);
            }
            self.statuses.insert(object, new);
        }
    }

    /// `Degraded` when any object failed, `Healthy` when all are current, else `None`.
    fn verdict(&self) -> Option<Outcome> {
        let healths = self.healths();
        if healths.contains(&Health::Failed) {
            return Some(Outcome::Degraded);
        }
        healths.iter().all(|h| *h == Health::Current).then_some(Outcome::Healthy)
    }

    fn watch(&self, i: usize) -> Events {
        let t = &self.targets[i];
        let api: Api<DynamicObject> = match &t.object.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &t.resource),
            None => Api::all_with(self.client.clone(), &t.resource),
        };
        let config = watcher::Config::default().fields(&format!("metadata.name={}", t.object.name));
        watcher::watcher(api, config).default_backoff().map(move |e| (i, e)).boxed()
    }

    /// The status of a full object; list items may come without `apiVersion` and `kind`, so
    /// they are taken from the target when missing.
    fn judge(&self, i: usize, obj: DynamicObject) -> Status {
        let mut value = serde_json::to_value(&obj).unwrap_or_default();
        let resource = &self.targets[i].resource;
        if value.get("kind").is_none_or(|k| k.as_str().is_none_or(str::is_empty)) {
            value["kind"] = resource.kind.clone().into();
            value["apiVersion"] = resource.api_version.clone().into();
        }
        status(&value)
    }
}
