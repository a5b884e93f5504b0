//! The apply engine: executes a [`Plan`](crate::plan::Plan)'s stages and returns a
//! [`ChangeSet`]; it never logs (the caller does). Each object is written in its own apply
//! mode ([`Desired::mode`]).
//!
//! - [`server_side`] — one object, one request (`application/apply-patch+yaml`, field manager
//!   `gitward`, force configurable), with delete-and-recreate on an immutable-field rejection.
//! - [`takeover`] — after a server-side apply, merges the field sets of managers gitward
//!   replaces (`kubectl apply` client-side, its own `update` mode) into its own (JSON patch).
//! - [`update`] — `update` mode: `POST`, or `GET` + `PUT` with the resourceVersion, or one
//!   metadata patch for unchanged objects; 409 Conflict reported, not retried in place.
//! - [`wait`] — event-driven, bounded waits for CRDs Established and Namespaces Active.
//!
//! Within a stage, requests run with bounded concurrency ([`ApplyOptions::max_in_flight`]);
//! one failing object does not stop its stage (DESIGN.md decisions 3, 4, 5, 7).

pub mod hook;
pub mod namespace;
pub mod server_side;
pub mod takeover;
pub mod update;
pub mod wait;

use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

use futures::StreamExt;

use crate::changeset::{Action, ChangeSet, Request};
use crate::cluster::LiveMeta;
use crate::cluster::cache::MetadataCache;
use crate::config::ApplyMode;
use crate::object::{GroupKind, ObjectRef};
use crate::plan::{Desired, Stage, Step};

/// How to apply.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Field manager for server-side apply. Default `gitward`.
    pub field_manager: String,
    /// Send `force=true`: take over fields another manager owns, as a GitOps tool must for git
    /// to win. Default true.
    pub force: bool,
    /// Concurrent requests within a stage. Default 32.
    pub max_in_flight: usize,
    /// Longest wait for a CRD to be Established or a Namespace Active. Default 60 s.
    pub wait_timeout: Duration,
    /// Field managers whose fields a server-side apply takes over ([`takeover`]). Default
    /// `kubectl-client-side-apply` and `before-first-apply` (see
    /// [`SyncUnit::takeover_managers`](crate::config::SyncUnit::takeover_managers)).
    pub takeover_managers: Vec<String>,
    /// ApplySet ids whose objects may be taken over (the unit's `adopt_from`, resolved by the
    /// ownership check): `update` mode's `POST` that finds such an object existing adopts it
    /// instead of refusing it. Default empty.
    pub adoptable: std::collections::BTreeSet<String>,
    /// Raised by the daemon when a newer revision is waiting: a stage sends no new request
    /// once it is up ([`apply_stage`]). Default: a fresh signal, never raised.
    pub yield_to: Yield,
}

/// A flag that makes [`apply_stage`] stop sending: once raised, a stage starts no new request,
/// waits for those in flight, and returns their outcomes; the steps it did not send have no
/// entry. The daemon raises it when a push brings a newer revision during a full re-send of
/// the unit, so the push's sync runs at once (ARCHITECTURE.md, "The daemon"). Clones share the
/// flag.
#[derive(Debug, Clone, Default)]
pub struct Yield(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Yield {
    /// Raises the flag: stages stop sending.
    pub fn raise(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Lowers the flag (a new sync begins).
    pub fn clear(&self) {
        self.0.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// True once raised and not cleared since.
    pub fn is_raised(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            field_manager: "gitward".into(),
            force: true,
            max_in_flight: 32,
            wait_timeout: Duration::from_secs(60),
            takeover_managers: vec!["kubectl-client-side-apply".into(), "before-first-apply".into()],
            adoptable: std::collections::BTreeSet::new(),
            yield_to: Yield::default(),
        }
    }
}

/// The result of writing one object, in either apply mode.
#[derive(Debug)]
pub struct Written {
    /// The object.
    pub object: ObjectRef,
    /// What happened.
    pub action: Action,
    /// Why, for failures and conflicts; notes such as `re-created` or fields taken over.
    pub message: Option<String>,
    /// Live metadata for the cache: what the last write returned, or, for a
    /// [`Action::Conflict`], what a read after it found (stored without counting as gitward's
    /// own write, see [`MetadataCache::observe`]).
    pub live: Option<LiveMeta>,
    /// The requests sent, in order.
    pub sent: Vec<Request>,
}

/// Writes one object as planned, in its apply mode: [`server_side::apply_one`] or
/// [`update::apply_one`]. `cached` is what the metadata cache holds of the object when the
/// request is sent (not when the sync was planned): the precondition of `update` mode's
/// metadata patch and what a server-side apply's response is compared with. `None` when the
/// cache holds nothing of it; then the plan's resourceVersion is used.
pub async fn apply_one(w: Write<'_>) -> Written {
    match w.d.mode {
        ApplyMode::ServerSideApply => server_side::apply_one(w).await,
        ApplyMode::Update => update::apply_one(w).await,
    }
}

/// One object's write: through `client` (the unit's writer), `d` as `step` planned it, with
/// what the cache holds of it when the request is sent (`cached`), under `opts`.
pub struct Write<'a> {
    /// The unit's writer.
    pub client: &'a kube::Client,
    /// The object.
    pub d: &'a Desired,
    /// What the plan decided for it.
    pub step: &'a Step,
    /// The cache's entry of it when the request is sent.
    pub cached: Option<LiveMeta>,
    /// Field manager, force, takeover managers.
    pub opts: &'a ApplyOptions,
}

/// What earlier stages left broken, so later objects that depend on it are `skipped`.
#[derive(Debug, Clone, Default)]
pub struct Blocked {
    /// Namespaces whose Namespace object failed.
    pub namespaces: BTreeSet<crate::object::Atom>,
    /// Group-kinds whose CRD failed or never became Established.
    pub kinds: BTreeSet<GroupKind>,
}

impl Blocked {
    /// Why `object` cannot be applied, if something it depends on failed.
    pub fn reason(&self, object: &ObjectRef) -> Option<String> {
        if let Some(ns) = object.namespace.as_ref().filter(|ns| self.namespaces.contains(*ns)) {
            return Some(format!("Namespace/{ns} failed"));
        }
        self.kinds.contains(&object.gk).then(|| format!("the CustomResourceDefinition of {} failed", object.gk))
    }
}

/// [`apply_one`], stamped with when it finished, as a boxed future of the borrows' lifetime.
fn timed_apply<'a>(
    client: &'a kube::Client,
    d: &'a Desired,
    step: &'a Step,
    cached: Option<LiveMeta>,
    opts: &'a ApplyOptions,
) -> futures::future::BoxFuture<'a, (Written, Instant)> {
    Box::pin(async move { (apply_one(Write { client, d, step, cached, opts }).await, Instant::now()) })
}

/// Applies one stage's steps and, for the Foundations stage, waits for what it created to be
/// usable. Records each returned resourceVersion in `cache`. Updates `blocked` with what failed.
/// Once [`ApplyOptions::yield_to`] is raised, no new request starts: the stage waits for those
/// in flight and returns, its other steps without an entry.
pub async fn apply_stage(
    client: &kube::Client,
    stage: Stage,
    steps: &[Step],
    desired: &[Desired],
    cache: &MetadataCache,
    blocked: &mut Blocked,
    opts: &ApplyOptions,
) -> ChangeSet {
    let mut changes = ChangeSet::default();
    let mut runnable = Vec::new();
    for step in steps {
        let d = &desired[step.index];
        match blocked.reason(&d.object) {
            Some(reason) => changes.push(d.object.clone(), Action::Skipped, Some(reason)),
            None => runnable.push(step),
        }
    }
    // Each request's future is made only when a slot frees up, so a stage holds
    // `max_in_flight` of them, not one per object (at 10,000 objects the futures made up
    // front were the one-shot sync's peak: ~120 MB). A plain loop over `FuturesUnordered`
    // rather than `stream::iter(..).map(closure).buffer_unordered(..)`: a closure that returns
    // a borrowing future trips rustc's higher-ranked `Send` inference (rust#102211).
    let mut queue = runnable.into_iter();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    let mut outcomes = Vec::new();
    loop {
        while in_flight.len() < opts.max_in_flight.max(1) && !opts.yield_to.is_raised() {
            let Some(step) = queue.next() else { break };
            // Read when the request is made, not when the sync was planned: a status write
            // the watch delivered meanwhile is then no conflict (`update` mode) or drift.
            let d = &desired[step.index];
            in_flight.push(timed_apply(client, d, step, cache.get(&d.object), opts));
        }
        match in_flight.next().await {
            Some(outcome) => outcomes.push(outcome),
            None => break,
        }
    }
    for (o, finished) in outcomes {
        if o.action.applied_change() {
            changes.note_change_applied(finished);
        }
        match (o.live, o.action) {
            (Some(meta), Action::Conflict) => cache.observe(o.object.clone(), meta),
            (Some(meta), _) => cache.record(o.object.clone(), meta),
            (None, _) => {}
        }
        changes.push_sent(o.object, o.action, o.message, o.sent);
    }
    if stage == Stage::Foundations {
        wait::foundations(client, &mut changes, opts.wait_timeout).await;
    }
    for e in changes.entries.iter().filter(|e| matches!(e.action, Action::Failed | Action::Conflict)) {
        if e.object.gk == GroupKind::from_api_version("v1", "Namespace") {
            blocked.namespaces.insert(e.object.name.clone());
        }
        if let Some(gk) = wait::crd_group_kind(desired, &e.object) {
            blocked.kinds.insert(gk);
        }
    }
    changes
}
