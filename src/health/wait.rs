//! The bounded, event-driven health wait after an apply (DESIGN.md, Data flow: health).
//!
//! Only the objects the sync created, configured or drift-corrected are waited for. Those of
//! kinds without health ([`super::bears_health`]) are `Current` at once and cost nothing; each
//! other one gets its own watch of the full object (`fieldSelector=metadata.name=<name>` in its
//! namespace: one list, then a watch), for the duration of the wait only — the metadata-only
//! cache is not touched. More than [`GROUP_WATCH_MIN`] of one resource in one namespace share
//! one watch of the unit's members there instead. Every event is judged by [`super::status`].
//!
//! The wait ends when every object is `Current` ([`Outcome::Healthy`]), at the first `Failed`
//! one ([`Outcome::Degraded`], fail fast: a `ProgressDeadlineExceeded` Deployment or a failed
//! Job will not recover by waiting), or at the deadline ([`Outcome::TimedOut`]). Cancelling is
//! dropping the future of [`HealthWait::run`]: the watches end with it, and
//! [`HealthWait::statuses`] still tells what was known. Nothing here blocks a thread, so a
//! waiting unit holds no worker another unit needs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
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
    /// Its resource (group, version, plural), to watch it; shared with discovery and every
    /// other target of the kind.
    pub resource: Arc<ApiResource>,
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
    /// `applyset.kubernetes.io/part-of=<id>`: selects the unit's members for grouped watches.
    selector: String,
    /// The targets whose kinds bear health: only these are watched and held.
    targets: Vec<Target>,
    /// Targets of kinds without health: `Current`, counted and not held (at 10,000 objects
    /// most of a first sync's are ConfigMaps, Secrets and RBAC).
    without_health: usize,
    statuses: BTreeMap<ObjectRef, Status>,
    /// True when the targets include every member of the unit that was not `Current` when
    /// the wait began (read just before it, [`super::survey`]): a `Healthy` outcome then means
    /// every member is `Current`, and the engine need not read them again.
    covers_all: bool,
}

/// Above this many targets of one resource in one namespace, they share one label-selected
/// watch instead of one watch each.
pub const GROUP_WATCH_MIN: usize = 8;

/// What a watch event means for one target.
enum Signal {
    /// The watch (re)starts its list.
    Relist,
    /// The object as it is now, judged.
    Seen(Status),
    /// The list is complete (a target not seen in it does not exist).
    Listed,
    /// The object was deleted.
    Deleted,
    /// The watch failed (it retries).
    Failed(String),
}

type Signals = BoxStream<'static, Vec<(usize, Signal)>>;

impl HealthWait {
    /// A wait for `targets`, members of the ApplySet that `selector`
    /// (`applyset.kubernetes.io/part-of=<id>`; empty: one watch per object) selects; objects
    /// of kinds without health are `Current` from the start and only counted (copies of the
    /// others are kept).
    pub fn new(client: kube::Client, selector: String, targets: &[Target]) -> Self {
        let waited: Vec<Target> = targets.iter().filter(|t| bears_health(&t.object.gk)).cloned().collect();
        let without_health = targets.len() - waited.len();
        Self { client, selector, targets: waited, without_health, statuses: BTreeMap::new(), covers_all: false }
    }

    /// Marks the targets as every member that was not `Current` when the wait began
    /// ([`HealthWait::covers_all`]).
    pub fn covering_all(mut self) -> Self {
        self.covers_all = true;
        self
    }

    /// True when the targets include every member of the unit that was not `Current` when the
    /// wait began, so a `Healthy` outcome means the whole unit is.
    pub fn covers_all(&self) -> bool {
        self.covers_all
    }

    /// The targets waited for whose last status is not `Current` (or not known yet).
    pub fn not_current(&self) -> Vec<Target> {
        self.targets
            .iter()
            .filter(|t| self.statuses.get(&t.object).is_none_or(|s| s.health != Health::Current))
            .cloned()
            .collect()
    }

    /// The objects waited for: the targets whose kinds bear health.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The last known status of each object; objects with no event yet are absent.
    pub fn statuses(&self) -> &BTreeMap<ObjectRef, Status> {
        &self.statuses
    }

    /// The health of every target given to [`HealthWait::new`]: of those waited for, the
    /// last status, else `InProgress` (not observed yet); then `Current` for each of a kind
    /// without health.
    pub fn healths(&self) -> Vec<Health> {
        self.waited().chain(std::iter::repeat_n(Health::Current, self.without_health)).collect()
    }

    /// The health of each target waited for: its last status, else `InProgress`.
    fn waited(&self) -> impl Iterator<Item = Health> + '_ {
        self.targets.iter().map(|t| self.statuses.get(&t.object).map_or(Health::InProgress, |s| s.health))
    }

    /// Watches until every target is `Current`, one is `Failed`, or `timeout` passes.
    /// `on_change` is called with each object whose health or reason changes (the daemon logs
    /// the `health` event from it). Watch errors (RBAC, a kind gone) make that object
    /// `Unknown` and the watch retries with kube's default backoff, bounded by the timeout.
    pub async fn run(&mut self, timeout: Duration, mut on_change: impl FnMut(&ObjectRef, &Status)) -> Outcome {
        let deadline = Instant::now() + timeout;
        let mut streams: SelectAll<Signals> = SelectAll::new();
        for group in self.groups() {
            streams.push(self.watch(group));
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
            let Some(batch) = next else {
                // Watch streams do not end; if they all did, only the deadline is left.
                tokio::time::sleep_until(deadline).await;
                return Outcome::TimedOut;
            };
            for (i, signal) in batch {
                let new = match signal {
                    Signal::Relist => {
                        seen[i] = false;
                        continue;
                    }
                    Signal::Seen(status) => {
                        seen[i] = true;
                        status
                    }
                    Signal::Listed if seen[i] => continue,
                    Signal::Listed => Status::new(Health::Unknown, "NotFound", "the object does not exist"),
                    Signal::Deleted => Status::new(Health::Unknown, "Deleted", "the object was deleted"),
                    Signal::Failed(message) => Status::new(Health::Unknown, "WatchFailed", message),
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
    }

    /// The health-bearing targets, grouped by resource and namespace.
    fn groups(&self) -> Vec<Vec<usize>> {
        let mut groups: BTreeMap<(String, Option<crate::object::Atom>), Vec<usize>> = BTreeMap::new();
        for (i, t) in self.targets.iter().enumerate() {
            let key = (format!("{}/{}", t.resource.api_version, t.resource.plural), t.object.namespace.clone());
            groups.entry(key).or_default().push(i);
        }
        groups.into_values().collect()
    }

    /// `Degraded` when any object failed, `Healthy` when all are current, else `None`.
    fn verdict(&self) -> Option<Outcome> {
        let mut all_current = true;
        for h in self.waited() {
            match h {
                Health::Failed => return Some(Outcome::Degraded),
                Health::Current => {}
                _ => all_current = false,
            }
        }
        all_current.then_some(Outcome::Healthy)
    }

    /// One watch for a group of targets of one resource in one namespace: by name
    /// (`fieldSelector=metadata.name=`) for one object; for more than [`GROUP_WATCH_MIN`], one
    /// watch of the unit's members there (`labelSelector=applyset.kubernetes.io/part-of=<id>`)
    /// whose other objects are dropped at once — so a first sync that creates hundreds of
    /// Deployments opens one watch per namespace, not hundreds.
    fn watch(&self, group: Vec<usize>) -> Signals {
        let first = &self.targets[group[0]];
        let api: Api<DynamicObject> = match &first.object.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, first.resource.as_ref()),
            None => Api::all_with(self.client.clone(), first.resource.as_ref()),
        };
        let config = match group.as_slice() {
            [only] => watcher::Config::default().fields(&format!("metadata.name={}", self.targets[*only].object.name)),
            _ if group.len() <= GROUP_WATCH_MIN || self.selector.is_empty() => {
                let streams: Vec<Signals> = group.into_iter().map(|i| self.watch(vec![i])).collect();
                return futures::stream::select_all(streams).boxed();
            }
            _ => watcher::Config::default().labels(&self.selector),
        };
        let by_name: HashMap<String, usize> =
            group.iter().map(|&i| (self.targets[i].object.name.to_string(), i)).collect();
        let resource = first.resource.clone();
        watcher::watcher(api, config)
            .default_backoff()
            .map(move |event| {
                let all = |signal: &dyn Fn() -> Signal| group.iter().map(|&i| (i, signal())).collect::<Vec<_>>();
                let one = |obj: &DynamicObject, signal: Signal| {
                    let name = obj.metadata.name.as_deref().unwrap_or_default();
                    by_name.get(name).map(|&i| vec![(i, signal)]).unwrap_or_default()
                };
                match event {
                    Ok(Event::Init) => all(&|| Signal::Relist),
                    Ok(Event::InitDone) => all(&|| Signal::Listed),
                    Ok(Event::InitApply(obj) | Event::Apply(obj)) => {
                        let status = judge(&resource, &obj);
                        one(&obj, Signal::Seen(status))
                    }
                    Ok(Event::Delete(obj)) => one(&obj, Signal::Deleted),
                    Err(e) => {
                        let message = e.to_string();
                        all(&|| Signal::Failed(message.clone()))
                    }
                }
            })
            .boxed()
    }
}

/// The status of a full object; list items may come without `apiVersion` and `kind`, so they
/// are taken from the resource when missing.
fn judge(resource: &ApiResource, obj: &DynamicObject) -> Status {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    if value.get("kind").is_none_or(|k| k.as_str().is_none_or(str::is_empty)) {
        value["kind"] = resource.kind.clone().into();
        value["apiVersion"] = resource.api_version.clone().into();
    }
    status(&value)
}
