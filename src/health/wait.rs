//! The bounded, event-driven health wait after an apply (DESIGN.md, Data flow: health).
//!
//! Only the objects the sync created, configured or drift-corrected are waited for. Those of
//! kinds without health ([`super::bears_health`]) are `Current` at once and cost nothing; each
//! other one gets its own watch of the full object (`fieldSelector=metadata.name=<name>` in its
//! namespace: one list, then a watch), for the duration of the wait only — the metadata-only
//! cache is not touched. More than [`GROUP_WATCH_MIN`] of one resource in one namespace share
//! one watch of the unit's members there instead, and a resource whose targets would need more
//! than [`MAX_WATCHES_PER_RESOURCE`] watches (a unit spread over many namespaces) gets one
//! watch of the unit's members in all namespaces. Only events of targets are judged, by
//! [`super::status`]; the other members a grouped watch sees are dropped by name first.
//!
//! The wait ends when every object is `Current` ([`WaitEnd::Healthy`]), at the first `Failed`
//! one ([`WaitEnd::Degraded`], fail fast: a `ProgressDeadlineExceeded` Deployment or a failed
//! Job will not recover by waiting), or at the deadline ([`WaitEnd::TimedOut`]). Cancelling is
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
pub enum WaitEnd {
    /// Every object is `Current`.
    Healthy,
    /// An object is `Failed`; the wait stopped at once.
    Degraded,
    /// The deadline passed with objects not yet `Current`.
    TimedOut,
}

impl WaitEnd {
    /// The lowercase name for logs: `healthy`, `degraded`, `timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitEnd::Healthy => "healthy",
            WaitEnd::Degraded => "degraded",
            WaitEnd::TimedOut => "timeout",
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

/// At most this many watches per resource in one wait: past it, one label-selected watch of
/// the unit's members in every namespace replaces them (one list of the unit's members of that
/// resource, then one watch), instead of hundreds of watches for a unit spread over hundreds
/// of namespaces.
pub const MAX_WATCHES_PER_RESOURCE: usize = 16;

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
    pub async fn run(&mut self, timeout: Duration, mut on_change: impl FnMut(&ObjectRef, &Status)) -> WaitEnd {
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
                _ = tokio::time::sleep_until(deadline) => return WaitEnd::TimedOut,
                next = streams.next() => next,
            };
            let Some(batch) = next else {
                // Watch streams do not end; if they all did, only the deadline is left.
                tokio::time::sleep_until(deadline).await;
                return WaitEnd::TimedOut;
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

    /// The health-bearing targets, grouped by resource and namespace ([`groups`]).
    fn groups(&self) -> Vec<Vec<usize>> {
        let keys: Vec<(String, Option<String>)> = self
            .targets
            .iter()
            .map(|t| {
                let resource = format!("{}/{}", t.resource.api_version, t.resource.plural);
                (resource, t.object.namespace.as_ref().map(|n| n.to_string()))
            })
            .collect();
        groups(&keys, !self.selector.is_empty())
    }

    /// `Degraded` when any object failed, `Healthy` when all are current, else `None`.
    fn verdict(&self) -> Option<WaitEnd> {
        let mut all_current = true;
        for h in self.waited() {
            match h {
                Health::Failed => return Some(WaitEnd::Degraded),
                Health::Current => {}
                _ => all_current = false,
            }
        }
        all_current.then_some(WaitEnd::Healthy)
    }

    /// One watch for a group of targets of one resource: in one namespace, by name
    /// (`fieldSelector=metadata.name=`) for one object, and for more than [`GROUP_WATCH_MIN`]
    /// one watch of the unit's members there (`labelSelector=applyset.kubernetes.io/part-of=<id>`)
    /// whose other objects are dropped at once — so a first sync that creates hundreds of
    /// Deployments opens one watch per namespace, not hundreds; a group over several
    /// namespaces ([`groups`]) is one watch of the unit's members in all of them.
    fn watch(&self, group: Vec<usize>) -> Signals {
        let first = &self.targets[group[0]];
        let across = group.iter().any(|&i| self.targets[i].object.namespace != first.object.namespace);
        let api: Api<DynamicObject> = match &first.object.namespace {
            Some(ns) if !across => Api::namespaced_with(self.client.clone(), ns, first.resource.as_ref()),
            _ => Api::all_with(self.client.clone(), first.resource.as_ref()),
        };
        let config = match group.as_slice() {
            [only] => watcher::Config::default().fields(&format!("metadata.name={}", self.targets[*only].object.name)),
            _ if across => watcher::Config::default().labels(&self.selector),
            _ if group.len() <= GROUP_WATCH_MIN || self.selector.is_empty() => {
                let streams: Vec<Signals> = group.into_iter().map(|i| self.watch(vec![i])).collect();
                return futures::stream::select_all(streams).boxed();
            }
            _ => watcher::Config::default().labels(&self.selector),
        };
        let by_name: HashMap<(Option<String>, String), usize> = group
            .iter()
            .map(|&i| {
                let o = &self.targets[i].object;
                ((o.namespace.as_ref().map(|n| n.to_string()), o.name.to_string()), i)
            })
            .collect();
        let resource = first.resource.clone();
        watcher::watcher(api, config)
            .default_backoff()
            .map(move |event| {
                let all = |signal: &dyn Fn() -> Signal| group.iter().map(|&i| (i, signal())).collect::<Vec<_>>();
                // The target an event is about, if any: looked up before anything is judged.
                let target = |obj: &DynamicObject| {
                    let key = (obj.metadata.namespace.clone(), obj.metadata.name.clone().unwrap_or_default());
                    by_name.get(&key).copied()
                };
                match event {
                    Ok(Event::Init) => all(&|| Signal::Relist),
                    Ok(Event::InitDone) => all(&|| Signal::Listed),
                    Ok(Event::InitApply(obj) | Event::Apply(obj)) => {
                        target(&obj).map(|i| vec![(i, Signal::Seen(judge(&resource, &obj)))]).unwrap_or_default()
                    }
                    Ok(Event::Delete(obj)) => target(&obj).map(|i| vec![(i, Signal::Deleted)]).unwrap_or_default(),
                    Err(e) => {
                        let message = crate::telemetry::error_chain(&e);
                        all(&|| Signal::Failed(message.clone()))
                    }
                }
            })
            .boxed()
    }
}

/// Target indexes grouped for watching, from each target's (resource, namespace) `keys`: one
/// group per resource and namespace, except that a resource whose groups would open more than
/// [`MAX_WATCHES_PER_RESOURCE`] watches is one group over all its namespaces — when `grouped`
/// (a label selector of the unit's members exists; without one every target is watched by
/// name). A group of one namespace opens one watch for one target or for more than
/// [`GROUP_WATCH_MIN`], one per target otherwise. Pure.
fn groups(keys: &[(String, Option<String>)], grouped: bool) -> Vec<Vec<usize>> {
    let mut by_namespace: BTreeMap<(&str, Option<&str>), Vec<usize>> = BTreeMap::new();
    for (i, (resource, namespace)) in keys.iter().enumerate() {
        by_namespace.entry((resource.as_str(), namespace.as_deref())).or_default().push(i);
    }
    let watches = |n: usize| if n == 1 || (grouped && n > GROUP_WATCH_MIN) { 1 } else { n };
    let mut by_resource: BTreeMap<&str, Vec<Vec<usize>>> = BTreeMap::new();
    for ((resource, _), group) in by_namespace {
        by_resource.entry(resource).or_default().push(group);
    }
    let mut out = Vec::new();
    for (_, groups) in by_resource {
        let total: usize = groups.iter().map(|g| watches(g.len())).sum();
        if grouped && total > MAX_WATCHES_PER_RESOURCE {
            out.push(groups.into_iter().flatten().collect());
        } else {
            out.extend(groups);
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(spec: &[(&str, usize)]) -> Vec<(String, Option<String>)> {
        spec.iter()
            .flat_map(|(ns, n)| std::iter::repeat_n(("apps/v1/deployments".to_owned(), Some((*ns).to_owned())), *n))
            .collect()
    }

    #[test]
    fn targets_are_grouped_by_namespace_until_a_resource_needs_too_many_watches() {
        // 3 namespaces of 2: six watches by name, under the cap: one group per namespace.
        assert_eq!(groups(&keys(&[("a", 2), ("b", 2), ("c", 2)]), true), [vec![0, 1], vec![2, 3], vec![4, 5]]);
        // 100 namespaces of one each: one watch of the unit's members in all of them.
        let spread: Vec<(String, usize)> = (0..100).map(|i| (format!("ns{i:03}"), 1)).collect();
        let spread: Vec<(&str, usize)> = spread.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        let grouped = groups(&keys(&spread), true);
        assert_eq!(grouped.len(), 1);
        assert_eq!(grouped[0].len(), 100);
        // Without a selector every target keeps its own watch.
        assert_eq!(groups(&keys(&spread), false).len(), 100);
        // Two namespaces of 9 grouped targets each: one watch each, under the cap.
        assert_eq!(groups(&keys(&[("a", 9), ("b", 9)]), true).len(), 2);
    }

    #[test]
    fn resources_are_grouped_apart() {
        let mut k = keys(&[("a", 1)]);
        k.push(("v1/pods".to_owned(), Some("a".to_owned())));
        assert_eq!(groups(&k, true), [vec![0], vec![1]]);
    }
}
