//! Watches shared by the units of one cluster: one metadata-only watch per resource and label
//! key, fanned out to its subscribers by the label's value.
//!
//! Each unit watched its own members (selector `applyset.kubernetes.io/part-of=<id>`, one
//! watch per kind) and its own ApplySet parent: two long-lived HTTP/1.1 connections per unit,
//! which at 1,000 units held about half a gigabyte (2,048 sockets and their buffers). A
//! [`Watches`] of the daemon instead keeps one watch per resource selected by the label's
//! *existence* (`applyset.kubernetes.io/part-of`; for parents `applyset.kubernetes.io/id` in
//! one namespace) and hands each event to the subscriber whose value the object carries.
//!
//! A shared watch also keeps the objects of label values no subscriber holds (unclaimed),
//! as listed and then watched: a subscriber that arrives after the watch's list has completed
//! gets its objects from there, with no request. Only one whose value the feed no longer
//! knows — its last subscriber left, taking the objects with it, or another subscriber of the
//! value holds them — gets its own objects by one paged LIST with its exact selector (no
//! connection kept); the events the shared watch delivers meanwhile are held and replayed
//! after that list is swapped in (a subscriber skips an event older than what it holds). So a
//! unit's sync costs no list that scans its neighbours' objects on the API server. A relist
//! of the shared watch (410 Gone, restart) reaches every subscriber as a complete list, as
//! kube-runtime's `watcher` documents for `Event::InitDone`. [`Watches::private`] keeps the
//! old shape — the exact selector, a watch per subscriber — for a unit that watches alone;
//! [`Watches::listed`] lists with the exact selector and keeps no watch, for one-shot
//! commands: watch events serve drift and the next sync of a daemon, and a one-shot sync
//! records what each apply returns ([`super::cache::MetadataCache::record`]). Without the
//! watch, the API server sends no event per applied object to a client that would only drop
//! it.
//!
//! Its parts, by role: this file is the [`Watches`] and their feeds — one per resource, label
//! and mode — with their subscribers and the objects kept for values no subscriber holds;
//! [`route`] is the watch's loop that routes each event; `join` is a late subscriber's own
//! list; [`names`] the index of label values by name; [`kept`] what is kept of an unclaimed
//! object; [`permanent`] which errors will not go away by themselves.

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::watcher;

mod join;
mod kept;
mod names;
mod permanent;
mod route;

use join::join;
use names::Names;
use route::run;

/// The object a shared watch delivers: metadata only.
pub(super) type Meta = PartialObjectMeta<DynamicObject>;

/// What a subscriber does with the objects of its label value. Called with the feed's lock
/// held: never call back into the feed.
pub(super) trait Sink: Send + Sync + 'static {
    /// A list being built (the objects of one complete list, reduced).
    type Listing: Default + Send + 'static;
    /// Adds one listed object to `listing`.
    fn list_item(&self, listing: &mut Self::Listing, object: &Meta);
    /// A complete list: replaces what the subscriber held of this resource.
    fn listed(&self, listing: Self::Listing);
    /// An object added or changed after the list.
    fn applied(&self, object: &Meta);
    /// An object deleted (or no longer matching the selector) after the list.
    fn deleted(&self, object: &Meta);
    /// A watch or list error: `permanent` when it will not go away by itself (see
    /// [`is_permanent`](permanent::is_permanent)).
    fn failed(&self, message: &str, permanent: bool);
}

/// Which watches a [`Watches`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// One watch per resource and label key, selected by the key's existence, shared.
    Shared,
    /// One watch per subscriber, selected by its exact value.
    Private,
    /// One list per subscriber, selected by its exact value; no watch kept.
    Listed,
}

/// The watches of one cluster's client; cheap to clone. The daemon keeps one
/// [shared](Watches::shared) per `[[cluster]]`; a one-shot command uses a
/// [private](Watches::private) one per unit.
#[derive(Clone)]
pub struct Watches {
    client: kube::Client,
    mode: Mode,
    feeds: Arc<Mutex<HashMap<FeedKey, Weak<dyn Any + Send + Sync>>>>,
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches").field("mode", &self.mode).finish()
    }
}

/// A feed's identity: sink type, resource (group, version, kind), label key, namespace (a
/// parent's feed watches one namespace) and, in private mode, the label value.
#[derive(Clone, PartialEq, Eq, Hash)]
struct FeedKey {
    sink: TypeId,
    api_version: String,
    kind: String,
    label: &'static str,
    namespace: Option<String>,
    value: Option<String>,
}

impl FeedKey {
    fn of<S: Sink>(resource: &ApiResource, label: &'static str, namespace: Option<&str>, value: Option<&str>) -> Self {
        Self {
            sink: TypeId::of::<S>(),
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            label,
            namespace: namespace.map(str::to_owned),
            value: value.map(str::to_owned),
        }
    }
}

impl Watches {
    /// Watches shared by every subscriber of `client`'s cluster.
    pub fn shared(client: kube::Client) -> Self {
        Self { client, mode: Mode::Shared, feeds: Arc::default() }
    }

    /// A watch per subscriber, selected by its exact label value (what a one-shot command of
    /// one unit needs: it lists that unit's objects only).
    pub fn private(client: kube::Client) -> Self {
        Self { client, mode: Mode::Private, feeds: Arc::default() }
    }

    /// A list per subscriber, selected by its exact label value, and no watch after it: what a
    /// one-shot command needs (it reads the unit's objects once; nothing is left to see
    /// drift). A subscriber's state after its list never changes but by what it records.
    pub fn listed(client: kube::Client) -> Self {
        Self { client, mode: Mode::Listed, feeds: Arc::default() }
    }

    /// The client the watches use.
    pub(super) fn client(&self) -> &kube::Client {
        &self.client
    }

    /// A [`Watches::listed`] over the same client.
    pub fn to_listed(&self) -> Self {
        Self::listed(self.client.clone())
    }

    /// The value of the label `label` that each of `names` (`(namespace, name)`) carries, read
    /// from the shared watch of `resource` (in `namespace`, or all) that subscribers of type
    /// `S` keep, with no request; `None` for one that carries no such label or does not exist.
    /// The whole answer is `None` when there is no such watch, when it has not completed a
    /// list (or is listing again), and for [`Watches::private`] and [`Watches::listed`]: ask
    /// the API server then. As fresh as the watch ([`names`]).
    pub(super) fn labels_of<S: Sink>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        label: &'static str,
        names: &[(Option<&str>, &str)],
    ) -> Option<Vec<Option<String>>> {
        if self.mode != Mode::Shared {
            return None;
        }
        let key = FeedKey::of::<S>(resource, label, namespace, None);
        let held = self.feeds.lock().expect("feeds lock").get(&key).and_then(Weak::upgrade);
        let feed = held?.downcast::<Feed<S>>().ok()?;
        let state = feed.state.lock().expect("feed lock");
        match (&state.phase, &state.names) {
            (Phase::Watching, Some(index)) => Some(index.values(names)),
            _ => None,
        }
    }

    /// Subscribes `sink` to the objects of `resource` (in `namespace`, or all) whose label
    /// `label` is `value`. The subscription ends when the returned handle is dropped; the
    /// watch ends with its last subscription.
    pub(super) fn subscribe<S: Sink>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        label: &'static str,
        value: &str,
        sink: Arc<S>,
    ) -> Subscription<S> {
        let key = FeedKey::of::<S>(resource, label, namespace, (self.mode != Mode::Shared).then_some(value));
        let feed = {
            let mut feeds = self.feeds.lock().expect("feeds lock");
            let held = feeds.get(&key).and_then(Weak::upgrade).and_then(|f| f.downcast::<Feed<S>>().ok());
            match held {
                Some(feed) => feed,
                None => {
                    let selector = match &key.value {
                        Some(value) => format!("{label}={value}"),
                        None => label.to_owned(),
                    };
                    let (api, watched) = match namespace {
                        Some(ns) => (
                            Api::namespaced_with(self.client.clone(), ns, resource),
                            Api::namespaced_with(self.client.clone(), ns, resource),
                        ),
                        None => {
                            (Api::all_with(self.client.clone(), resource), Api::all_with(self.client.clone(), resource))
                        }
                    };
                    let what =
                        format!("{} ({selector})", crate::object::GroupKind::new(&resource.group, &resource.kind));
                    let keep_watching = self.mode != Mode::Listed;
                    let modes = (keep_watching, self.mode == Mode::Shared);
                    let feed = Feed::start(api, watched, label, selector, what, modes);
                    let erased: Arc<dyn Any + Send + Sync> = feed.clone();
                    feeds.retain(|_, f| f.strong_count() > 0);
                    feeds.insert(key, Arc::downgrade(&erased));
                    feed
                }
            }
        };
        let id = feed.add(value, sink);
        Subscription { feed, id }
    }
}

/// One subscriber's place in a feed; dropping it removes the subscriber.
pub(super) struct Subscription<S: Sink> {
    feed: Arc<Feed<S>>,
    id: u64,
}

impl<S: Sink> Drop for Subscription<S> {
    fn drop(&mut self) {
        self.feed.remove(self.id);
    }
}

/// One shared watch and its subscribers.
struct Feed<S: Sink> {
    state: Mutex<State<S>>,
    api: Api<DynamicObject>,
    label: &'static str,
    /// `Kind.group` and selector, for the log.
    what: String,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl<S: Sink> Drop for Feed<S> {
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().expect("task lock").take() {
            task.abort();
        }
    }
}

/// Where the shared watch is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its first list has not begun.
    Starting,
    /// A list is in progress (`Init` … `InitDone`).
    Listing,
    /// Watching after a complete list.
    Watching,
}

struct State<S: Sink> {
    phase: Phase,
    /// Counts lists begun (`Init` events): a subscriber's own list is valid only if none began
    /// while it ran.
    lists: u64,
    next_id: u64,
    subs: HashMap<u64, Sub<S>>,
    by_value: HashMap<String, Vec<u64>>,
    /// Shared mode: the objects no subscriber holds; `None` in the other modes.
    unclaimed: Option<Unclaimed>,
    /// Shared mode: every object's label value by name ([`Watches::labels_of`]); `None` in
    /// the other modes.
    names: Option<Names>,
}

/// Objects by (namespace, name), as kept ([`kept::kept`]).
type ByName = HashMap<kept::Key, kept::Kept>;

/// A shared feed's objects of label values no subscriber holds, by value.
#[derive(Default)]
struct Unclaimed {
    /// As of the last complete list and the watch events since.
    kept: HashMap<String, ByName>,
    /// Being built by the list in progress (made [`Unclaimed::kept`] at `InitDone`).
    listing: HashMap<String, ByName>,
    /// Values whose last subscriber left since the last list: their objects went with it, so
    /// the feed does not know them, and one that subscribes again lists its own.
    lost: HashSet<String>,
}

/// Notes `object` (of label `value`) in `map`: added or changed, or `deleted`.
fn note(map: &mut HashMap<String, ByName>, value: String, object: Meta, label: &str, deleted: bool) {
    let name = kept::key_of(&object);
    if !deleted {
        map.entry(value).or_default().insert(name, kept::kept(object, label));
    } else if let Some(objects) = map.get_mut(&value) {
        objects.remove(&name);
        if objects.is_empty() {
            map.remove(&value);
        }
    }
}

/// Hands `sub` its objects, `objects` being all there are (a complete list and the events
/// since): its listing, then the events held for it. No request.
fn serve<S: Sink>(sub: &mut Sub<S>, objects: Option<&ByName>) {
    let mut listing = S::Listing::default();
    for (key, object) in objects.into_iter().flatten() {
        sub.sink.list_item(&mut listing, &object.meta(key, &sub.value));
    }
    sub.sink.listed(listing);
    for event in sub.joining.take().unwrap_or_default() {
        event.deliver(&*sub.sink);
    }
}

/// An event held for a subscriber whose own list is in flight.
enum Held {
    Applied(Meta),
    Deleted(Meta),
}

impl Held {
    fn deliver<S: Sink>(&self, sink: &S) {
        match self {
            Held::Applied(o) => sink.applied(o),
            Held::Deleted(o) => sink.deleted(o),
        }
    }
}

struct Sub<S: Sink> {
    sink: Arc<S>,
    value: String,
    /// Set at `Init` for every subscriber then present: the shared list being built for it.
    listing: Option<S::Listing>,
    /// Set until the subscriber has had a complete list: the events held meanwhile.
    joining: Option<Vec<Held>>,
}

impl<S: Sink> Feed<S> {
    /// Starts the watch (`watched`: `Api<PartialObjectMeta<_>>`, which kube serves with
    /// metadata-only requests); `api` lists for subscribers that join later.
    fn start(
        api: Api<DynamicObject>,
        watched: Api<Meta>,
        label: &'static str,
        selector: String,
        what: String,
        (keep_watching, shared): (bool, bool),
    ) -> Arc<Self> {
        let feed = Arc::new(Self {
            state: Mutex::new(State {
                phase: Phase::Starting,
                lists: 0,
                next_id: 0,
                subs: HashMap::new(),
                by_value: HashMap::new(),
                unclaimed: shared.then(Unclaimed::default),
                names: shared.then(Names::default),
            }),
            api,
            label,
            what,
            task: Mutex::new(None),
        });
        let config = watcher::Config::default().labels(&selector);
        let task = tokio::spawn(run(Arc::downgrade(&feed), watched, config, keep_watching));
        *feed.task.lock().expect("task lock") = Some(task);
        feed
    }

    /// Adds a subscriber. Before the first list it waits for that list; after it, it gets its
    /// objects from the unclaimed ones at once when the feed knows them, else it lists its own
    /// (after the list in progress, if any, completes).
    fn add(self: &Arc<Self>, value: &str, sink: Arc<S>) -> u64 {
        let mut state = self.state.lock().expect("feed lock");
        let state = &mut *state;
        let id = state.next_id;
        state.next_id += 1;
        let others = state.by_value.entry(value.to_owned()).or_default();
        let alone = others.is_empty();
        others.push(id);
        let mut sub = Sub { sink, value: value.to_owned(), listing: None, joining: Some(Vec::new()) };
        if state.phase == Phase::Watching {
            match state.unclaimed.as_mut().filter(|u| alone && !u.lost.contains(value)) {
                Some(unclaimed) => serve(&mut sub, unclaimed.kept.remove(value).as_ref()),
                None => drop(tokio::spawn(join(self.clone(), id))),
            }
        }
        state.subs.insert(id, sub);
        id
    }

    fn remove(&self, id: u64) {
        let mut state = self.state.lock().expect("feed lock");
        let state = &mut *state;
        if let Some(sub) = state.subs.remove(&id)
            && let Some(ids) = state.by_value.get_mut(&sub.value)
        {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                state.by_value.remove(&sub.value);
                if let Some(unclaimed) = state.unclaimed.as_mut() {
                    unclaimed.lost.insert(sub.value);
                }
            }
        }
    }
}
