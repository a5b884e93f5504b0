//! `gitward status`: what each unit applied, when, with what result, what it last attempted
//! and why that failed, and the health of what it manages — read from the cluster alone, so it
//! needs no running daemon.
//!
//! Per unit: one metadata GET of the ApplySet parent (its `gitward.dev/last-*` record and
//! attempt, [`crate::health::record`], its group-kinds and its record of members), then one
//! list per group-kind selected by `applyset.kubernetes.io/part-of=<id>`: metadata only for
//! kinds without health, full objects in pages for health-bearing kinds
//! ([`crate::health::bears_health`]), judged by [`crate::health::status`]
//! ([`crate::health::survey`]). A recorded member that no list returns is `NotCreated` when the
//! last attempt recorded a failure for it (`gitward.dev/last-failed`: its create was refused),
//! else `Missing`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;
use serde::Serialize;

use crate::cluster::discovery::Discovery;
use crate::cluster::inventory::{Inventory, PART_OF};
use crate::cluster::registry::Registry;
use crate::config::SyncUnit;
#[cfg(test)]
use crate::health::record::Waiting;
use crate::health::record::{Attempt, NotApplied, Record, SyncResult};
use crate::health::{self, Counts, Health, survey};
use crate::object::{GroupKind, ObjectRef};

/// Errors reading a unit's state. Worth retrying: they come from the API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The parent could not be read, or discovery of a member kind failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::Error),
    /// Listing the members of one group-kind failed (RBAC, API server down).
    #[error("{group_kind}: listing members failed")]
    ListFailed {
        /// `Kind.group` being listed.
        group_kind: String,
        /// What the API server said.
        source: kube::Error,
    },
}

impl From<survey::Error> for Error {
    fn from(e: survey::Error) -> Self {
        Error::ListFailed { group_kind: e.group_kind, source: e.source }
    }
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// The state of a member that is not `Current`: its kstatus health, `NotCreated` — recorded in
/// the parent, not in the cluster, and the last attempt failed or skipped it — or `Missing` —
/// recorded in the parent, not in the cluster, with no failure recorded (deleted by hand, or
/// its kind no longer served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberHealth {
    /// The member exists; its health by the kstatus rules.
    Is(Health),
    /// The member does not exist, and the last attempt recorded why it could not make it.
    NotCreated,
    /// The member does not exist.
    Missing,
}

impl MemberHealth {
    /// The name printed: a [`Health`] name, `NotCreated` or `Missing`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberHealth::Is(h) => h.as_str(),
            MemberHealth::NotCreated => "NotCreated",
            MemberHealth::Missing => "Missing",
        }
    }
}

impl fmt::Display for MemberHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for MemberHealth {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One member that is not `Current`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unhealthy {
    /// `Kind/ns/name`.
    pub object: String,
    /// Its health, or `Missing`.
    pub health: MemberHealth,
    /// The rule's reason (`ProgressDeadlineExceeded`, `JobFailed`, a condition's reason;
    /// `NotFound` for a missing member; empty for one not created).
    pub reason: String,
    /// The rule's or the controller's message; for a member not created, the failure the
    /// last attempt recorded for it.
    pub message: String,
}

/// What `gitward status` reports of one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitState {
    /// The unit's name.
    pub unit: String,
    /// The ApplySet parent, `Kind/ns/name`.
    pub parent: String,
    /// The ApplySet id (KEP-3659): the value of every member's `applyset.kubernetes.io/part-of`.
    pub applyset_id: String,
    /// A `kubectl get` command that lists the unit's members of every kind it holds
    /// (`kubectl get configmaps,deployments.apps -A -l applyset.kubernetes.io/part-of=<id>`);
    /// `None` while the parent records no kind.
    pub selector: Option<String>,
    /// The last recorded sync; `None` when the parent does not exist or records none.
    pub last: Option<Record>,
    /// The last attempt as the parent records it; flattened into the JSON.
    #[serde(flatten)]
    pub attempt: LastAttempt,
    /// The members as the cluster holds them now; flattened into the JSON.
    #[serde(flatten)]
    pub members: LiveMembers,
    /// Set while the unit is suspended (`gitward suspend`, `suspend = true`): the daemon
    /// applies, prunes and heals nothing of it.
    pub suspended: Option<Suspended>,
    /// Each unit of its `depends_on`, judged from that unit's record ([`dependencies`]);
    /// empty until filled in by the caller, or without `depends_on`.
    pub dependencies: Vec<DependencyState>,
}

/// A unit's last attempt, as its parent records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LastAttempt {
    /// The revision last attempted, applied or not (`gitward.dev/last-attempted-revision`).
    pub last_attempted_revision: Option<String>,
    /// The ref last attempted when it resolved to no revision — not found, or the fetch failed
    /// (`gitward.dev/last-attempted-ref`); `last_attempted_revision` is then `None`.
    pub last_attempted_ref: Option<String>,
    /// Why the last attempt did not apply cleanly (`gitward.dev/last-error`): a revision that
    /// does not parse, a refused prune, objects that failed.
    pub last_error: Option<String>,
    /// The objects the last attempt failed or skipped, with the reasons.
    pub failed: Vec<NotApplied>,
    /// When the daemon, backing off after the failed attempt, tries again
    /// (`gitward.dev/retry-at`, RFC 3339 UTC); `None` when no retry is scheduled.
    pub retry_at: Option<String>,
}

/// A unit's recorded members, as the cluster holds them now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveMembers {
    /// Members by kind (`Deployment` → 2).
    pub objects: BTreeMap<String, usize>,
    /// Members by health bucket (members of kinds without health count as healthy).
    pub health: Counts,
    /// Recorded members not in the cluster.
    pub missing: usize,
    /// Members that are not `Current` (or missing), with their reason.
    pub unhealthy: Vec<Unhealthy>,
}

/// One dependency of a unit, as `gitward status` and `gitward sync` judge it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DependencyState {
    /// The dependency's unit name.
    pub unit: String,
    /// It is ready ([`crate::health::ready::judge`]): a new revision of the unit may sync.
    pub ready: bool,
    /// Why not (`not yet synced`, `revision not applied (…)`, `not healthy (progressing)`,
    /// `ready_expr false`); `None` when ready.
    pub reason: Option<String>,
}

/// Judges each `depends_on` entry of `unit` from its dependency's ApplySet parent (one
/// metadata GET each, on the dependency's cluster in `clusters`), in file order. The revision
/// `unit` would sync is not known here, so a dependency on the same source is judged by its
/// own record alone (synced, its last attempt applied, healthy or its `ready_expr` true).
///
/// Errors: [`Error::Cluster`] when a parent cannot be read.
pub async fn dependencies(clusters: &Registry, unit: &SyncUnit) -> Result<Vec<DependencyState>> {
    let mut out = Vec::new();
    for dep in &unit.depends_on {
        let client = clusters.client(&dep.cluster).expect("every dependency names a configured cluster");
        let recorded = Inventory::new(&dep.inventory).recorded(client).await?.unwrap_or_default();
        let why = crate::health::ready::judge(Some(&recorded), dep.ready_expr.as_deref(), None);
        out.push(DependencyState { unit: dep.unit.clone(), ready: why.is_none(), reason: why.map(|w| w.to_string()) });
    }
    let unmade = crate::health::ready::Unmet::NotSynced.to_string();
    out.extend(unit.depends_on_unmade.iter().map(|name| DependencyState {
        unit: name.clone(),
        ready: false,
        reason: Some(unmade.clone()),
    }));
    Ok(out)
}

/// The `dependencies` that are not ready, as one text: `base: not healthy (progressing);
/// crds: not yet synced`; `None` when all are.
pub fn unmet(dependencies: &[DependencyState]) -> Option<String> {
    let unmet: Vec<String> = dependencies
        .iter()
        .filter(|d| !d.ready)
        .map(|d| format!("{}: {}", d.unit, d.reason.as_deref().unwrap_or_default()))
        .collect();
    (!unmet.is_empty()).then(|| unmet.join("; "))
}

/// Who suspended a unit, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suspended {
    /// `user@host` of `gitward suspend` (`gitward.dev/suspended-by`), or `config` for
    /// `suspend = true`.
    pub by: String,
    /// When (RFC 3339, `gitward.dev/suspended-at`); `None` for `suspend = true`.
    pub at: Option<String>,
}

impl UnitState {
    /// True when a revision was applied without failed objects, the last attempt left no
    /// error, no health wait runs, and every member is present and `Current` now (exit 0 of
    /// `gitward status`): [`UnitState::now`] is `healthy`.
    pub fn healthy(&self) -> bool {
        self.now() == "healthy"
    }

    /// The unit's state now, the first word of its [`line()`], in this order: `never applied`;
    /// `failed` (the last attempt did not apply cleanly, or objects failed); `degraded` (a
    /// member is `Failed` now); `waiting` (the parent records a health wait in progress);
    /// `progressing` (a member is not `Current`, or missing); else `healthy`. Live health
    /// wins over the recorded result, which `gitward status` prints below it.
    pub fn now(&self) -> &'static str {
        let Some(last) = &self.last else { return "never applied" };
        if last.result == SyncResult::Failed || self.attempt.last_error.is_some() {
            "failed"
        } else if self.members.health.degraded > 0 {
            "degraded"
        } else if last.waiting.is_some() {
            "waiting"
        } else if !self.members.unhealthy.is_empty() {
            "progressing"
        } else {
            "healthy"
        }
    }

    /// What was last attempted, as printed: the revision, or `ref <name> (not resolved)`.
    fn attempted(&self) -> Option<String> {
        let attempt = Attempt {
            revision: self.attempt.last_attempted_revision.clone(),
            reference: self.attempt.last_attempted_ref.clone(),
            ..Attempt::default()
        };
        attempt.attempted()
    }
}

/// Reads the state of `unit` from the cluster.
///
/// Errors: [`Error::Cluster`] when the parent or discovery fails, [`Error::ListFailed`] when
/// a member kind cannot be listed.
pub async fn unit_state(client: &kube::Client, unit: &SyncUnit) -> Result<UnitState> {
    let inventory = Inventory::new(&unit.inventory);
    let mut state = UnitState {
        unit: unit.name.clone(),
        parent: inventory.parent.to_string(),
        applyset_id: inventory.id.clone(),
        selector: None,
        last: None,
        attempt: LastAttempt::default(),
        members: LiveMembers::default(),
        suspended: unit.suspend.then(|| Suspended { by: "config".into(), at: None }),
        dependencies: Vec::new(),
    };
    if let Some(control) = inventory.control(client).await?.filter(|c| c.suspended) {
        let by = control.suspended_by.unwrap_or_default();
        state.suspended = Some(Suspended { by, at: control.suspended_at });
    }
    let Some(parent) = inventory.read(client).await? else { return Ok(state) };
    state.last = Record::from_annotations(&parent.annotations);
    let attempt = Attempt::from_annotations(&parent.annotations);
    state.attempt = LastAttempt {
        last_attempted_revision: attempt.revision,
        last_attempted_ref: attempt.reference,
        last_error: attempt.error,
        failed: attempt.failed,
        retry_at: attempt.retry_at,
    };
    let contents = parent.contents;
    let selector = format!("{PART_OF}={}", inventory.id);
    let mut discovery = Discovery::new();
    let mut healths = Vec::new();
    let mut present: BTreeSet<ObjectRef> = BTreeSet::new();
    let mut resources = Vec::new();
    let mut unserved = BTreeSet::new();
    for gk in &contents.group_kinds {
        let Some(resolved) = discovery.resolve_group_kind(client, gk).await? else {
            resources.push(format!("{}{}", gk.kind.to_lowercase(), dotted(&gk.group)));
            unserved.insert(gk.clone());
            continue;
        };
        resources.push(format!("{}{}", resolved.resource.plural, dotted(&gk.group)));
        let kind = survey::Kind { gk: gk.clone(), resource: resolved.resource, namespaced: resolved.namespaced };
        let n = if health::bears_health(gk) {
            survey::each_judged(client, &kind, &selector, |object, s| {
                healths.push(s.health);
                if s.health != Health::Current {
                    state.members.unhealthy.push(Unhealthy {
                        object: object.to_string(),
                        health: MemberHealth::Is(s.health),
                        reason: s.reason,
                        message: s.message,
                    });
                }
                present.insert(object);
            })
            .await?
        } else {
            let listed = list_metadata(client, &kind, &selector).await?;
            healths.extend(std::iter::repeat_n(Health::Current, listed.len()));
            let n = listed.len();
            present.extend(listed);
            n
        };
        add(&mut state.members.objects, gk, n);
    }
    note_missing(&mut state, contents.members.iter().filter(|m| !present.contains(*m)), &unserved);
    resources.sort();
    if !resources.is_empty() {
        state.selector = Some(format!("kubectl get {} -A -l {selector}", resources.join(",")));
    }
    state.members.health = Counts::of(&healths);
    state.members.unhealthy.sort_by(|a, b| a.object.cmp(&b.object));
    Ok(state)
}

/// Adds to `state` the recorded members that are `missing` live: not created (their last
/// failure, from the recorded attempt), of a kind no longer served, or deleted by hand.
fn note_missing<'a>(
    state: &mut UnitState,
    missing: impl Iterator<Item = &'a ObjectRef>,
    unserved: &BTreeSet<GroupKind>,
) {
    for member in missing {
        let object = member.to_string();
        if let Some(failure) = state.attempt.failed.iter().find(|f| f.object == object) {
            state.members.unhealthy.push(Unhealthy {
                object,
                health: MemberHealth::NotCreated,
                reason: String::new(),
                message: failure.reason.clone(),
            });
            state.members.missing += 1;
            continue;
        }
        let message = if unserved.contains(&member.gk) {
            "recorded as a member of the ApplySet, but the API server no longer serves its kind"
        } else {
            "recorded as a member of the ApplySet but not in the cluster (not created, or deleted since); the next sync creates it"
        };
        state.members.unhealthy.push(Unhealthy {
            object,
            health: MemberHealth::Missing,
            reason: "NotFound".into(),
            message: message.into(),
        });
        state.members.missing += 1;
    }
}

/// `.group` for a named API group, nothing for the core group (`kubectl get` resource names).
fn dotted(group: &str) -> String {
    if group.is_empty() { String::new() } else { format!(".{group}") }
}

/// The refs of every object of `kind` that `selector` selects (metadata only, all namespaces).
async fn list_metadata(client: &kube::Client, kind: &survey::Kind, selector: &str) -> Result<Vec<ObjectRef>> {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), kind.resource.as_ref());
    let mut params = ListParams::default().labels(selector).limit(survey::PAGE);
    let mut refs = Vec::new();
    loop {
        let page = api
            .list_metadata(&params)
            .await
            .map_err(|source| Error::ListFailed { group_kind: kind.gk.to_string(), source })?;
        for item in page.items {
            let namespace = if kind.namespaced { item.metadata.namespace } else { None };
            refs.push(ObjectRef::new(kind.gk.clone(), namespace, item.metadata.name.unwrap_or_default()));
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(refs),
        }
    }
}

fn add(objects: &mut BTreeMap<String, usize>, gk: &GroupKind, n: usize) {
    if n > 0 {
        *objects.entry(gk.kind.to_string()).or_default() += n;
    }
}

/// The line of `gitward status` for a unit, in the form of the stdout lines of `sync` and
/// `validate`: the unit's state now ([`UnitState::now`]), the recorded revision, when it was
/// applied, its members by health, and what the last attempt tried when it failed
/// (`; 9c1e0b7 failed`, `; ref v9.9.9 (not resolved) failed`), then when the daemon tries
/// again (`; backing off until 2026-11-22T22:43:07Z`, [`backoff`]).
pub fn line(state: &UnitState) -> String {
    // The members live and those recorded but missing: each counted once, in one health.
    let total: usize = state.members.objects.values().sum::<usize>() + state.members.missing;
    let h = state.members.health;
    let mut health = vec![format!("{} healthy", h.healthy)];
    if h.progressing > 0 {
        health.push(format!("{} progressing", h.progressing));
    }
    if h.degraded > 0 {
        health.push(format!("{} degraded", h.degraded));
    }
    if state.members.missing > 0 {
        health.push(format!("{} missing", state.members.missing));
    }
    let noun = if total == 1 { "object" } else { "objects" };
    let members = format!("{total} {noun}: {}", health.join(", "));
    let line = match &state.last {
        Some(r) => {
            format!("{}: {} {}, applied {} ({members})", state.unit, state.now(), short(&r.revision), r.applied_at)
        }
        None => format!("{}: never applied ({members})", state.unit),
    };
    let attempted = match (&state.attempt.last_attempted_revision, state.attempted()) {
        (Some(revision), _) => Some(short(revision).to_string()),
        (None, other) => other,
    };
    let line = match attempted {
        Some(attempted) if state.attempt.last_error.is_some() => format!("{line}; {attempted} failed"),
        _ if state.attempt.last_error.is_some() => format!("{line}; the last attempt failed"),
        _ => line,
    };
    let line = match backoff(state) {
        Some(backoff) => format!("{line}; {backoff}"),
        None => line,
    };
    let line = if state.suspended.is_some() { format!("{line}; suspended") } else { line };
    match unmet(&state.dependencies) {
        Some(waiting) => format!("{line}; waiting for dependencies: {waiting}"),
        None => line,
    }
}

/// What the line says of the daemon's retry after a failed attempt: `backing off until <T>`
/// while `T` (`gitward.dev/retry-at`) is ahead, `retry due since <T>` once it passed (the
/// retry runs, or no daemon runs the unit); `None` without an error or a retry time.
fn backoff(state: &UnitState) -> Option<String> {
    let at = state.attempt.retry_at.as_deref().filter(|_| state.attempt.last_error.is_some())?;
    let ahead = at.parse::<jiff::Timestamp>().is_ok_and(|t| t > jiff::Timestamp::now());
    Some(if ahead { format!("backing off until {at}") } else { format!("retry due since {at}") })
}

/// A revision's short form, as the other stdout lines print it
/// ([`crate::source::short_revision`]).
fn short(revision: &str) -> String {
    crate::source::short_revision(revision)
}

/// The human-readable report of `units`, one block per unit, headed by its line of
/// [`line()`] (`attempted`, `error` and the `failed`/`skipped`/`conflict` lines
/// only when the parent records them; `result` is `waiting (since <time>, for <objects>)`
/// while the parent records a health wait in progress, and `attempted` may be
/// `ref v9.9.9 (not resolved)`):
///
/// ```text
/// app: degraded 3f2a9c1, applied 2026-11-22T22:41:07Z (2 objects: 1 healthy, 1 degraded)
///   parent     Secret/shop/gitward-app
///   applyset   applyset-JqJ9Yc2DkxWZbyFhHhnG0nTqB0yF5bF0Z6jUeBBt7Yk-v1
///   select     kubectl get configmaps,deployments.apps -A -l applyset.kubernetes.io/part-of=applyset-JqJ9Yc2DkxWZbyFhHhnG0nTqB0yF5bF0Z6jUeBBt7Yk-v1
///   revision   3f2a9c1e0b7d5a6c8e9f0a1b2c3d4e5f60718293
///   applied    2026-11-22T22:41:07Z
///   result     degraded
///   attempted  9c1e0b7d5a6c8e9f0a1b2c3d4e5f607182933f2a
///   error      web.yaml: document 1: …
///   objects    ConfigMap 1, Deployment 1
///   health     1 healthy, 0 progressing, 1 degraded
///   unhealthy  Deployment/shop/web Failed ProgressDeadlineExceeded: ReplicaSet "web-5d9c" has timed out progressing.
/// ```
pub fn render_text(units: &[UnitState]) -> String {
    let mut out = String::new();
    for u in units {
        let _ = writeln!(out, "{}", line(u));
        let _ = writeln!(out, "  parent     {}", u.parent);
        let _ = writeln!(out, "  applyset   {}", u.applyset_id);
        if let Some(s) = &u.suspended {
            let at = s.at.as_deref().map(|at| format!(" at {at}")).unwrap_or_default();
            let _ = writeln!(out, "  suspended  by {}{at}", s.by);
        }
        if let Some(selector) = &u.selector {
            let _ = writeln!(out, "  select     {selector}");
        }
        for d in &u.dependencies {
            let _ = writeln!(out, "  depends    {}: {}", d.unit, d.reason.as_deref().unwrap_or("ready"));
        }
        match &u.last {
            Some(r) => {
                let _ = writeln!(out, "  revision   {}", r.revision);
                let _ = writeln!(out, "  applied    {}", r.applied_at);
                match &r.waiting {
                    Some(waiting) => {
                        let _ = writeln!(out, "  result     {waiting}");
                    }
                    None => {
                        let _ = writeln!(out, "  result     {}", r.result);
                    }
                }
            }
            None => {
                let _ = writeln!(out, "  revision   - (never applied)");
            }
        }
        // The revision last tried, when it is not the one applied (or it failed).
        let (applied, failed) = (u.last.as_ref().map(|r| r.revision.as_str()), u.attempt.last_error.is_some());
        if let Some(attempted) = u.attempted().filter(|a| Some(a.as_str()) != applied || failed) {
            let _ = writeln!(out, "  attempted  {attempted}");
        }
        if let Some(error) = &u.attempt.last_error {
            let _ = writeln!(out, "  error      {error}");
            if let Some(at) = &u.attempt.retry_at {
                let _ = writeln!(out, "  retry at   {at}");
            }
        }
        // A refused prune skips each member it would have deleted with the same sentence; the
        // error line says it once, so those members are listed without it.
        let prune_told = u.attempt.last_error.as_deref().is_some_and(|e| e.starts_with("prune refused"));
        for f in &u.attempt.failed {
            let reason = match prune_told && f.reason.starts_with("prune refused") {
                true => "not pruned (the prune was refused)",
                false => f.reason.as_str(),
            };
            let _ = writeln!(out, "  {:<9}  {}: {reason}", f.action, f.object);
        }
        let objects: Vec<String> = u.members.objects.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let objects = if objects.is_empty() { "-".to_string() } else { objects.join(", ") };
        let _ = writeln!(out, "  objects    {objects}");
        let h = u.members.health;
        let missing = if u.members.missing > 0 { format!(", {} missing", u.members.missing) } else { String::new() };
        let _ = writeln!(
            out,
            "  health     {} healthy, {} progressing, {} degraded{missing}",
            h.healthy, h.progressing, h.degraded
        );
        for x in &u.members.unhealthy {
            if x.health == MemberHealth::NotCreated {
                let _ = writeln!(out, "  unhealthy  {} NotCreated: {}", x.object, x.message);
                continue;
            }
            let detail = match (x.reason.is_empty(), x.message.is_empty()) {
                (false, false) => format!("{}: {}", x.reason, x.message),
                (false, true) => x.reason.clone(),
                _ => x.message.clone(),
            };
            let _ = writeln!(out, "  unhealthy  {} {} {detail}", x.object, x.health);
        }
    }
    out
}

/// The JSON report of `units`: `{"units": [{"unit", "now", "parent", "applyset_id",
/// "selector", "last": {"revision", "applied_at", "result", "waiting": {"since", "for"} |
/// null} | null, "last_attempted_revision", "last_attempted_ref", "last_error", "failed":
/// [{"object", "action", "reason"}], "retry_at" (RFC 3339, or null), "objects": {Kind: n},
/// "health": {"healthy", "progressing", "degraded"}, "missing", "unhealthy": [{"object",
/// "health", "reason", "message"}], "dependencies": [{"unit", "ready", "reason"}]}]}`; `now` is [`UnitState::now`]; `health` of an unhealthy member is a kstatus
/// name, `NotCreated` (its `message` the recorded failure) or `Missing`.
pub fn render_json(units: &[UnitState]) -> String {
    let units: Vec<serde_json::Value> = units
        .iter()
        .map(|u| {
            let mut v = serde_json::to_value(u).unwrap_or_default();
            v["now"] = serde_json::Value::String(u.now().to_string());
            v
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "units": units })).unwrap_or_default()
}

/// The render sandbox this process would run tools in with `mode`, as `/readyz` shows it:
/// `landlock ABI 7, user, network and PID namespaces`, `off (…)` or `unavailable: <what the
/// kernel lacks>`
/// ([`crate::render::sandbox::state`]). `gitward status` prints it after the units (text:
/// a last line `sandbox: …`; JSON: the top-level `sandbox` field).
pub fn sandbox(mode: crate::config::SandboxMode) -> String {
    crate::render::sandbox::state(mode)
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
