//! The engine: one sync of one sync unit, from git fetch to prune (DESIGN.md, Data flow).
//!
//! [`Engine`] owns what lives across syncs of a unit — the git mirror, the parse cache, the
//! discovery cache and the metadata-only cache — so a daemon keeps them warm and the CLI's
//! one-shot `sync` builds them once. [`Engine::sync`] returns a [`Report`] and logs nothing.
//!
//! Nothing is lost on bad input (DESIGN.md decision 8): a revision that fails to read, parse
//! or resolve is not applied at all and nothing is pruned; the error names the file and
//! document or the object.

pub mod desired;
pub mod diff;
pub mod early;
pub mod namespaces;
pub mod repo;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{DynamicObject, ListParams};
use kube::discovery::ApiResource;

use crate::apply::{self, ApplyOptions, Blocked};
use crate::changeset::{Action, ChangeSet};
use crate::cluster::cache::MetadataCache;
use crate::cluster::discovery::Discovery;
use crate::cluster::inventory::{Contents, Inventory, PART_OF, Parent, ParentWatch, Seen};
use crate::cluster::owner::{self, UNIT, Verdict};
use crate::config::{ClusterConfig, SyncUnit};
use crate::health::record::{Attempt, NotApplied, Record, SyncResult};
use crate::health::survey;
use crate::health::wait::{HealthWait, Outcome, Target};
use crate::manifest::Skipped;
use crate::object::{GroupKind, ObjectRef};
use crate::plan::{self, Desired, Stage, Step};
use crate::prune::{self, PruneOptions};
use crate::source::Revision;
use desired::{Defaults, Resolution};

/// Errors of one sync. Source errors are worth retrying with backoff; manifest, duplicate and
/// unknown-kind errors are bad input that only a new revision fixes; cluster errors are worth
/// retrying.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Fetching or reading the repository failed.
    #[error(transparent)]
    Source(#[from] crate::source::Error),
    /// A manifest could not be parsed or is not a valid object.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::Error),
    /// Rendering the unit's path (kustomize, Helm, SOPS) failed: bad input, like a parse
    /// error; the message names the unit, the path and the tool.
    #[error(transparent)]
    Render(#[from] crate::render::Error),
    /// Two documents describe the same object.
    #[error("{object}: defined twice, in {first} and in {second}")]
    Duplicate {
        /// `Kind/ns/name`.
        object: String,
        /// Where it was first defined.
        first: String,
        /// Where it was defined again.
        second: String,
    },
    /// A kind that the API server does not serve and that no CRD of the revision defines.
    #[error("{origin}: unknown kind {kind} in {api_version}: the API server does not serve it")]
    UnknownKind {
        /// File and document.
        origin: String,
        /// The manifest's `apiVersion`.
        api_version: String,
        /// The manifest's `kind`.
        kind: String,
    },
    /// Discovery, the metadata cache or the inventory failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::Error),
    /// A gitward annotation in a manifest has a value gitward does not know (e.g.
    /// `gitward.dev/apply-mode: replace`): bad input, like a parse error.
    #[error("{origin}: annotation {annotation}: {message}")]
    InvalidAnnotation {
        /// File and document.
        origin: String,
        /// The annotation's key.
        annotation: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A blocking task (git, parsing) panicked or was cancelled.
    #[error("background task failed: {0}")]
    Task(String),
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// The outcome of one sync of one unit.
#[derive(Debug, Clone)]
pub struct Report {
    /// The unit's name.
    pub unit: String,
    /// The revision applied.
    pub revision: Revision,
    /// One entry per object.
    pub changes: ChangeSet,
    /// Files and documents that were skipped (kustomization files, symlinks), with the reason.
    pub skipped_files: Vec<Skipped>,
    /// Wall time of the sync.
    pub duration: Duration,
    /// When the last object that git changed was applied (else when the apply ended), for
    /// `trigger_to_applied_ms`.
    pub applied_at: Instant,
    /// The objects this sync created, configured or drift-corrected: what the health wait
    /// watches ([`crate::health::wait`]).
    pub health_targets: Vec<Target>,
    /// How many of the objects git changed were applied early, before the revision was loaded
    /// whole ([`early`]); included in `changes`.
    pub applied_early: usize,
    /// True for [`Engine::heal`]'s report: a few drifted objects re-applied, not a sync of the
    /// revision, so it leaves the recorded attempt (and its error) as it is.
    pub heal: bool,
}

/// What [`Engine::apply_early`] applied.
#[derive(Debug, Default)]
struct Early {
    /// The entries of the objects applied, and the requests of all sent.
    changes: ChangeSet,
    /// The objects applied, with the desired hash sent.
    sent: HashMap<ObjectRef, crate::object::Atom>,
}

/// The state kept for one unit across syncs.
pub struct Engine {
    client: kube::Client,
    unit: SyncUnit,
    repo: repo::Repo,
    discovery: Discovery,
    cache: MetadataCache,
    inventory: Inventory,
    apply: ApplyOptions,
    prune: PruneOptions,
    cache_timeout: Duration,
    /// What the ApplySet parent holds and its resourceVersion, once read or written: later
    /// syncs need not read it; every write carries that resourceVersion as a precondition.
    known_inventory: Option<Parent>,
    /// Watches the parent, so a parent deleted or written by someone else is read again
    /// (and re-created) rather than trusted from memory; started at the first sync.
    parent_watch: Option<ParentWatch>,
    /// The desired objects and revision of the last sync, for [`Engine::heal`].
    last_desired: Option<(Revision, Vec<Desired>)>,
    /// The last sync's record on the parent (revision, time, result), once read or written:
    /// sent with every parent write, and rewritten only when it changes.
    recorded: Option<Record>,
    /// With `create_namespace`: the unit's namespace was found or made by this engine
    /// ([`namespaces`]); cleared after a sync with failures, so it is checked again.
    namespace_checked: bool,
    /// The revision being synced defines the ApplySet parent's namespace (a Namespace
    /// manifest): made bare before the parent's first write ([`namespaces`]).
    parent_namespace_defined: bool,
    /// The Namespace this sync made bare before the parent's first write: its apply finds it
    /// existing, but gitward made it, so its entry says `created` ([`Engine::note_adoptions`]).
    made_bare: Option<ObjectRef>,
    /// Objects of the plan that another ApplySet owns and `adopt_from` lets this unit take
    /// over, with the change-set note; attached to their entries after the apply.
    adoptions: HashMap<ObjectRef, String>,
    /// The last attempt as the parent records it (revision tried, error, objects not applied),
    /// once read or written; like `recorded`, sent with every write and rewritten on change.
    attempt: Attempt,
    /// The revision the sync in progress attempts, once fetched: what a sync that fails as a
    /// whole records as attempted.
    attempting: Option<Revision>,
    /// Members whose health was not `Current` when the last health wait ended: targets of the
    /// next wait too, so a sync that changes nothing still waits for the Deployment an
    /// earlier revision left unhealthy. `None` until a wait of this engine has judged the
    /// unit (a fresh engine reads the unit's members once, [`survey`], before its first wait).
    unhealthy: Option<Vec<Target>>,
    /// A one-off permission to prune past the guards (`gitward sync --allow-prune`).
    allow_prune_once: bool,
}

impl Engine {
    /// Opens (or creates) the unit's mirror under `state_dir` and prepares empty caches.
    ///
    /// Errors: [`Error::Source`] when the mirror cannot be opened.
    pub async fn new(
        client: kube::Client,
        cluster: &ClusterConfig,
        state_dir: &std::path::Path,
        unit: &SyncUnit,
    ) -> Result<Self> {
        let repo = repo::Repo::open(state_dir, unit).await?;
        let inventory = Inventory::new(&unit.inventory);
        let mut cache = MetadataCache::new(client.clone(), &inventory.id);
        cache.set_field_manager(&unit.field_manager);
        Ok(Self {
            cache,
            client,
            unit: unit.clone(),
            repo,
            discovery: Discovery::new(),
            inventory,
            apply: ApplyOptions {
                field_manager: unit.field_manager.clone(),
                force: unit.force_conflicts,
                max_in_flight: cluster.max_in_flight,
                takeover_managers: unit.takeover_managers.clone(),
                ..Default::default()
            },
            prune: PruneOptions { max_fraction: unit.max_prune_fraction, allow_all: unit.allow_prune_all },
            cache_timeout: Duration::from_secs(60),
            known_inventory: None,
            parent_watch: None,
            last_desired: None,
            recorded: None,
            namespace_checked: false,
            parent_namespace_defined: false,
            made_bare: None,
            adoptions: HashMap::new(),
            attempt: Attempt::default(),
            attempting: None,
            unhealthy: None,
            allow_prune_once: false,
        })
    }

    /// The unit's name.
    pub fn unit_name(&self) -> &str {
        &self.unit.name
    }

    /// The unit's inventory (ApplySet parent and id).
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// The metadata cache (the daemon subscribes to its drift events).
    pub fn cache(&self) -> &MetadataCache {
        &self.cache
    }

    /// The unit's repository (mirror and parse cache).
    pub fn repo(&self) -> &repo::Repo {
        &self.repo
    }

    /// Lets the next syncs of this engine prune past `max_prune_fraction` and the empty-revision
    /// guard (`gitward sync --allow-prune`: a deliberate one-off prune, as `allow_prune_all`
    /// would permit every time). The other prune rules (membership, re-check, cascades) stay.
    pub fn allow_prune_once(&mut self) {
        self.allow_prune_once = true;
    }

    /// One sync: fetch, then [`Engine::sync_revision`].
    pub async fn sync(&mut self) -> Result<Report> {
        let started = Instant::now();
        self.attempting = None;
        let revision = self.repo.fetch().await?;
        let mut report = self.sync_revision(revision).await?;
        report.duration = started.elapsed();
        Ok(report)
    }

    /// One sync of an already fetched revision: load, resolve, widen the inventory, plan,
    /// apply stage by stage, prune, narrow the inventory.
    pub async fn sync_revision(&mut self, revision: Revision) -> Result<Report> {
        let started = Instant::now();
        self.attempting = Some(revision.clone());
        let defaults = Defaults {
            namespace: self.unit.namespace.as_str().into(),
            applyset_id: self.inventory.id.as_str().into(),
            recreate: self.unit.recreate_on_immutable,
            apply_mode: self.unit.apply_mode,
        };
        let early = self.apply_early(&revision, &defaults).await;
        let early_at = started.elapsed();
        let loaded = self.load(&revision).await?;
        let loaded_at = started.elapsed();
        let skipped_files = loaded.skipped;
        let partial = loaded.partial;
        let previous = self.last_desired.as_ref().map(|(_, d)| d.as_slice()).unwrap_or_default();
        let Resolution { mut desired, pending } =
            desired::resolve(&self.client, &mut self.discovery, loaded.manifests, &defaults, previous).await?;
        let resolved_at = started.elapsed();

        let wanted = Contents::of(desired.iter().map(|d| &d.object)).union(&pending_contents(&pending, &defaults));
        let widened = self.widen_inventory(&wanted).await?;
        let (resources, unwatchable) = self.watch_kinds(&desired, &widened).await?;
        let members_before = self.cache.len();

        let mut changes = ChangeSet::default();
        // A kind whose live state cannot be read (RBAC forbids its list): its objects fail
        // alone, the others are applied, and nothing is pruned.
        desired.retain(|d| match unwatchable.get(&d.object.gk) {
            Some(reason) => {
                changes.push(d.object.clone(), Action::Failed, Some(format!("{}: {reason}", d.origin)));
                false
            }
            None => true,
        });
        if !unwatchable.is_empty() {
            let kinds: Vec<String> = unwatchable.keys().map(ToString::to_string).collect();
            changes.prune_refused = Some(format!("the live state of {} cannot be read", kinds.join(", ")));
        }
        let mut stages = self.plan_stages(&desired, &mut changes).await?;
        if !early.sent.is_empty() {
            // Sent once per sync: what went early is not sent again (the same revision, so the
            // same desired hash; checked all the same).
            for steps in stages.values_mut() {
                steps.retain(|s| early.sent.get(&desired[s.index].object) != Some(&desired[s.index].hash));
            }
        }
        let applied_early = early.sent.len();
        changes.extend(early.changes);
        let planned_at = started.elapsed();
        let mut blocked = Blocked::default();
        // What git changed is sent first when the stages before it hold only unchanged objects
        // (custom resources still pending their CRD are a change to the Foundations stage).
        if pending.is_empty()
            && let Some((stage, head)) = plan::changes_first(&mut stages)
        {
            let applied =
                apply::apply_stage(&self.client, stage, &head, &desired, &self.cache, &mut blocked, &self.apply).await;
            changes.extend(applied);
        }
        let mut pending = Some(pending);
        for stage in Stage::ALL {
            if stage != Stage::Foundations
                && let Some(pending) = pending.take()
                && !pending.is_empty()
            {
                let start = desired.len();
                self.resolve_pending(pending, &defaults, &blocked, &mut desired, &mut changes).await?;
                let added = self.plan_stages_from(&desired, start, &mut changes).await?;
                for (s, steps) in added {
                    stages.entry(s).or_default().extend(steps);
                }
            }
            let Some(steps) = stages.remove(&stage) else { continue };
            let applied =
                apply::apply_stage(&self.client, stage, &steps, &desired, &self.cache, &mut blocked, &self.apply).await;
            changes.extend(applied);
        }
        self.note_adoptions(&mut changes);
        // A push waits for what it changed; unchanged objects re-sent after that do not count.
        let applied_at = changes.changes_applied_at.unwrap_or_else(Instant::now);
        // Where the time before the first request went (RUST_LOG=gitward=debug), e.g. to see
        // what a push's latency is made of.
        tracing::debug!(
            unit = %self.unit.name,
            early_ms = early_at.as_millis() as u64,
            applied_early,
            load_ms = (loaded_at - early_at).as_millis() as u64,
            resolve_ms = (resolved_at - loaded_at).as_millis() as u64,
            inventory_watch_plan_ms = planned_at.saturating_sub(resolved_at).as_millis() as u64,
            planned_ms = planned_at.as_millis() as u64,
            changes_applied_ms = applied_at.saturating_duration_since(started).as_millis() as u64,
            "sync phases"
        );

        let pruned = if self.unit.prune && !changes.has_failures() && unwatchable.is_empty() {
            let inputs = PruneInputs { desired: &desired, resources: &resources, members_before, partial: &partial };
            self.prune_and_narrow(inputs, &widened, &mut changes).await
        } else {
            Ok(())
        };
        if changes.has_failures() {
            self.namespace_checked = false;
        }
        let health_targets = health_targets(&desired, &changes);
        // Kept even when the prune failed: drift is healed to this revision, and the next sync
        // reuses these objects where their manifests did not change.
        desired.shrink_to_fit();
        self.last_desired = Some((revision.clone(), desired));
        pruned?;
        Ok(Report {
            unit: self.unit.name.clone(),
            revision,
            changes,
            skipped_files,
            duration: started.elapsed(),
            applied_at,
            health_targets,
            applied_early,
            heal: false,
        })
    }

    /// Sends a push's changed objects before the revision is loaded whole ([`early`]): the
    /// objects of the files changed since the last synced revision that exist live, as members,
    /// with another desired hash. What was applied (created, configured or drift-corrected) is
    /// returned with its hash, for the whole sync to leave out; a failed request is not: the
    /// whole sync sends it again and reports it. Nothing is sent before the first sync, for a
    /// revision already synced, or where [`early::select`] says no.
    async fn apply_early(&mut self, revision: &Revision, defaults: &Defaults) -> Early {
        let Some((from, previous)) = self.last_desired.as_ref() else { return Early::default() };
        if from == revision {
            return Early::default();
        }
        let Some(changed) = self.repo.changed_manifests(from, revision, early::MAX_FILES).await else {
            return Early::default();
        };
        let discovery = &self.discovery;
        let known = |m: &crate::manifest::Manifest| discovery.known(&m.api_version, &m.gk.kind);
        let Some(selection) = early::select(changed, previous, known, |o| self.cache.get(o), defaults) else {
            tracing::debug!(unit = %self.unit.name, %revision, "no early apply: the whole sync decides");
            return Early::default();
        };
        let mut early = Early::default();
        let mut blocked = Blocked::default();
        for (stage, steps) in &selection.stages {
            let applied = apply::apply_stage(
                &self.client,
                *stage,
                steps,
                &selection.desired,
                &self.cache,
                &mut blocked,
                &self.apply,
            )
            .await;
            early.changes.requests += applied.requests;
            if let Some(at) = applied.changes_applied_at {
                early.changes.note_change_applied(at);
            }
            for entry in applied.entries {
                if entry.action.applied_change() {
                    let hash = selection.desired.iter().find(|d| d.object == entry.object).map(|d| d.hash.clone());
                    early.sent.insert(entry.object.clone(), hash.unwrap_or_default());
                    early.changes.entries.push(entry);
                }
            }
        }
        early
    }

    /// Re-applies only `objects` of the last synced revision (a drift trigger, DESIGN.md
    /// decision 9): planned from the cache, applied stage by stage; no fetch, no inventory
    /// write, no prune. `None` before the first sync, or when git holds none of `objects`.
    pub async fn heal(&mut self, objects: &std::collections::BTreeSet<ObjectRef>) -> Option<Report> {
        let started = Instant::now();
        let (revision, last) = self.last_desired.as_ref()?;
        let desired: Vec<Desired> = last.iter().filter(|d| objects.contains(&d.object)).cloned().collect();
        let revision = revision.clone();
        if desired.is_empty() {
            return None;
        }
        let mut changes = ChangeSet::default();
        let stages = self.plan_stages(&desired, &mut changes).await.ok()?;
        let mut blocked = Blocked::default();
        for (stage, steps) in stages {
            changes.extend(
                apply::apply_stage(&self.client, stage, &steps, &desired, &self.cache, &mut blocked, &self.apply).await,
            );
        }
        self.note_adoptions(&mut changes);
        let applied_at = changes.changes_applied_at.unwrap_or_else(Instant::now);
        let health_targets = health_targets(&desired, &changes);
        Some(Report {
            unit: self.unit.name.clone(),
            revision,
            changes,
            skipped_files: Vec::new(),
            duration: started.elapsed(),
            applied_at,
            health_targets,
            applied_early: 0,
            heal: true,
        })
    }

    /// Widens the ApplySet parent to what it holds ∪ `wanted` before anything is applied
    /// (DESIGN.md decision 6), writing only when that differs, with the resourceVersion read
    /// as a precondition; on a conflict (someone else wrote it, or it was deleted) reads it
    /// again and retries once. A missing parent is created.
    async fn widen_inventory(&mut self, wanted: &Contents) -> Result<Contents> {
        let watch = self.parent_watch.get_or_insert_with(|| self.inventory.watch(&self.client));
        let stale = match (watch.seen(), &self.known_inventory) {
            (Seen::Absent, Some(_)) => true,
            (Seen::Present(rv), Some(known)) => crate::cluster::cache::newer(&rv, &known.resource_version),
            _ => false,
        };
        if stale {
            self.known_inventory = None;
        }
        self.ensure_unit_namespace().await?;
        let parent_namespace = self.inventory.parent.namespace.clone();
        self.parent_namespace_defined =
            parent_namespace.as_deref().is_some_and(|ns| wanted.members.contains(&namespaces::namespace_ref(ns)));
        self.write_parent(None, |existing| {
            let previous = existing.map(|p| p.contents.clone()).unwrap_or_default();
            let mut widened = previous.union(wanted);
            widened.namespaces.extend(parent_namespace.clone());
            widened
        })
        .await
    }

    /// The one read-modify-write of the ApplySet parent: reads it (unless known and current),
    /// computes the contents with `contents`, and writes them with `annotations` (`None`: the
    /// record as read from the parent, which every write must carry) only when they differ
    /// from what it holds (or the annotations do), with the resourceVersion read as a
    /// precondition; on a conflict (someone else wrote it, or it was deleted) reads it again
    /// and retries once. A missing parent is created, its namespace first when the revision
    /// defines it ([`Engine::ensure_parent_namespace`]). Returns the contents the parent holds
    /// afterwards.
    ///
    /// Errors: [`Error::Cluster`] when the parent cannot be read or written.
    async fn write_parent(
        &mut self,
        annotations: Option<&BTreeMap<String, String>>,
        contents: impl Fn(Option<&Parent>) -> Contents,
    ) -> Result<Contents> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let existing = match self.known_inventory.take() {
                Some(known) => Some(known),
                None => self.read_parent().await?,
            };
            if existing.is_none() {
                self.ensure_parent_namespace(self.parent_namespace_defined).await?;
            }
            let next = contents(existing.as_ref());
            let annotations = annotations.cloned().unwrap_or_else(|| self.record_annotations());
            if let Some(parent) = existing.as_ref().filter(|p| p.contents == next && p.annotations == annotations) {
                self.known_inventory = Some(parent.clone());
                return Ok(next);
            }
            let precondition = existing.as_ref().map(|p| p.resource_version.as_str());
            match self.inventory.write(&self.client, &next, precondition, &self.apply.field_manager, &annotations).await
            {
                Ok(parent) => {
                    self.known_inventory = Some(parent);
                    return Ok(next);
                }
                Err(crate::cluster::Error::InventoryConflict { .. }) if attempts < 2 => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Loads the revision's manifests; a unit that renders with Helm first learns the
    /// cluster's capabilities (once per engine).
    async fn load(&mut self, revision: &Revision) -> Result<crate::manifest::Loaded> {
        if self.repo.needs_capabilities(revision).await? {
            self.repo.set_capabilities(crate::render::capabilities(&self.client).await?);
        }
        self.repo.load(revision).await
    }

    /// Whether the API server answers now: one `GET /version`, at most 5 s. The daemon asks
    /// after a sync with failed objects, to tell failures the API server answered (a 403, a
    /// webhook's denial: the unit stays ready) from an outage (not ready).
    pub async fn cluster_answers(&self) -> bool {
        matches!(tokio::time::timeout(Duration::from_secs(5), self.client.apiserver_version()).await, Ok(Ok(_)))
    }

    /// The unit's `health_timeout` (zero: no health wait).
    pub fn health_timeout(&self) -> Duration {
        self.unit.health_timeout
    }

    /// A health wait ([`crate::health::wait`]) over what `report`'s sync changed and over the
    /// members an earlier wait left not `Current` that git still holds: a sync that changes
    /// nothing still waits for the Deployment an earlier revision never rolled out. Before
    /// this engine's first judgement (a daemon's first sync, every `gitward sync --wait`) the
    /// unit's health-bearing members are read once ([`survey`]) to learn which those are; the
    /// wait then covers every member that was not `Current` ([`HealthWait::covers_all`]). A
    /// failed read is logged and the wait covers what the sync changed.
    pub async fn health_wait(&mut self, report: &Report) -> HealthWait {
        let selector = format!("{PART_OF}={}", self.inventory.id);
        let covers_all = self.unhealthy.is_none() && self.survey().await;
        let desired: HashSet<&ObjectRef> =
            self.last_desired.iter().flat_map(|(_, d)| d.iter().map(|d| &d.object)).collect();
        let mut targets = report.health_targets.clone();
        let changed: HashSet<ObjectRef> = targets.iter().map(|t| t.object.clone()).collect();
        for t in self.unhealthy.iter().flatten() {
            if desired.contains(&t.object) && !changed.contains(&t.object) {
                targets.push(t.clone());
            }
        }
        let wait = HealthWait::new(self.client.clone(), selector, &targets);
        if covers_all { wait.covering_all() } else { wait }
    }

    /// The result a health wait that ended with `outcome` (`None`: cancelled) gives the unit,
    /// and what later waits must wait for. `healthy` only when every member with health is
    /// `Current`: when the wait covered only some of them, the unit's health-bearing members
    /// are read once more ([`survey`]) and any that is not `Current` makes it `progressing`
    /// (`degraded` if one is `Failed`). A failed read makes it `progressing` too (unknown is
    /// not healthy). A wait with no targets (call it with `Healthy` without running it) reads
    /// nothing when the last judgement left nothing unhealthy.
    pub async fn judge_health(&mut self, wait: &HealthWait, outcome: Option<Outcome>) -> SyncResult {
        match outcome {
            Some(Outcome::Healthy) if wait.covers_all() => {
                self.unhealthy = Some(Vec::new());
                SyncResult::Healthy
            }
            // Nothing was waited on, and the last judgement found nothing else unhealthy: a
            // resync that changes nothing reads nothing.
            Some(Outcome::Healthy) if wait.targets().is_empty() && self.unhealthy.is_some() => SyncResult::Healthy,
            Some(Outcome::Healthy) => {
                let before = self.unhealthy.take();
                match self.read_unhealthy().await {
                    Ok(found) if found.is_empty() => {
                        self.unhealthy = Some(Vec::new());
                        SyncResult::Healthy
                    }
                    Ok(found) => {
                        let failed = found.iter().any(|(_, s)| s.health == crate::health::Health::Failed);
                        self.unhealthy = Some(found.into_iter().map(|(t, _)| t).collect());
                        if failed { SyncResult::Degraded } else { SyncResult::Progressing }
                    }
                    Err(e) => {
                        tracing::warn!(unit = %self.unit.name, error = %crate::telemetry::error_chain(&e), "could not read the unit's health; not recorded healthy");
                        self.unhealthy = before;
                        SyncResult::Progressing
                    }
                }
            }
            Some(Outcome::Degraded) => {
                self.unhealthy = Some(wait.not_current());
                SyncResult::Degraded
            }
            Some(Outcome::TimedOut) | None => {
                self.unhealthy = Some(wait.not_current());
                SyncResult::Progressing
            }
        }
    }

    /// Reads the unit's health-bearing members once ([`survey`]) and remembers those not
    /// `Current` as targets of the next waits; false (logged) when the read failed.
    async fn survey(&mut self) -> bool {
        match self.read_unhealthy().await {
            Ok(found) => {
                self.unhealthy = Some(found.into_iter().map(|(t, _)| t).collect());
                true
            }
            Err(e) => {
                tracing::warn!(unit = %self.unit.name, error = %crate::telemetry::error_chain(&e), "could not read the unit's health");
                false
            }
        }
    }

    /// The members of the kinds git holds that bear health and are not `Current`, and that git
    /// still holds (a member left behind by a refused prune is not this revision's).
    async fn read_unhealthy(&self) -> std::result::Result<Vec<(Target, crate::health::Status)>, survey::Error> {
        let Some((_, desired)) = &self.last_desired else { return Ok(Vec::new()) };
        let mut kinds: BTreeMap<&GroupKind, survey::Kind> = BTreeMap::new();
        for d in desired.iter().filter(|d| crate::health::bears_health(&d.object.gk)) {
            kinds.entry(&d.object.gk).or_insert_with(|| survey::Kind {
                gk: d.object.gk.clone(),
                resource: d.resource.clone(),
                namespaced: d.object.namespace.is_some(),
            });
        }
        let kinds: Vec<survey::Kind> = kinds.into_values().collect();
        let selector = format!("{PART_OF}={}", self.inventory.id);
        let held: HashSet<&ObjectRef> = desired.iter().map(|d| &d.object).collect();
        let found = survey::not_current(&self.client, &kinds, &selector).await?;
        Ok(found.into_iter().filter(|(t, _)| held.contains(&t.object)).collect())
    }

    /// Records `result` for `revision` on the ApplySet parent ([`crate::health::record`]),
    /// keeping the recorded attempt: one server-side apply of the parent, carrying its current
    /// contents, and only when the revision or the result differs from what the parent
    /// records — a sync that changes neither sends nothing. Returns whether it wrote.
    ///
    /// Errors: [`Error::Cluster`] when the parent cannot be read or written.
    pub async fn record(&mut self, revision: &Revision, result: SyncResult) -> Result<bool> {
        let attempt = self.attempt.clone();
        self.write_record(Some(Record::now(revision.to_string(), result)), attempt).await
    }

    /// Records a sync's `report` with `result`: the revision and result ([`Engine::record`]),
    /// and the attempt — the revision, and unless every object applied and the prune ran (or
    /// had nothing to do), `gitward.dev/last-error` and the objects not applied; a clean sync
    /// clears them. A sync of the revision already recorded that judged nothing (`judged`
    /// false: no wait ran, or it had nothing to wait for and read nothing) keeps what the
    /// parent says of that revision's result, unless that was `failed`. A self-heal ([`Report::heal`]) keeps the attempt.
    /// Writes only when something recorded changes; returns whether it wrote.
    ///
    /// Errors: as [`Engine::record`].
    pub async fn record_sync(&mut self, report: &Report, result: SyncResult, judged: bool) -> Result<bool> {
        let revision = report.revision.to_string();
        // A judgement of this revision stands until another judges it; a failure never does.
        let same_revision =
            self.recorded.as_ref().is_some_and(|r| r.revision == revision && r.result != SyncResult::Failed);
        let says_nothing = result == SyncResult::Applied || (result == SyncResult::Healthy && !judged);
        let record = if says_nothing && same_revision {
            self.recorded.clone()
        } else {
            Some(Record::now(revision.clone(), result))
        };
        let attempt = if report.heal { self.attempt.clone() } else { attempt_of(&revision, &report.changes) };
        self.write_record(record, attempt).await
    }

    /// Records that the sync in progress failed as a whole with `error` (a parse or render
    /// error, an unknown kind, git or the cluster unreachable): `gitward.dev/last-error` and the
    /// revision attempted (the last one kept when the fetch itself failed), leaving the last
    /// applied revision and its result as they are. Writes only when that changes, so the
    /// retries of one broken revision write once. Returns whether it wrote.
    ///
    /// Errors: as [`Engine::record`] (an unreachable cluster cannot be written to either).
    pub async fn record_failure(&mut self, error: &Error) -> Result<bool> {
        if self.known_inventory.is_none() {
            // The recorded attempt is compared with the parent's, which a fresh engine reads.
            let parent = self.read_parent().await?;
            self.known_inventory = parent;
        }
        let revision = self.attempting.as_ref().map(ToString::to_string).or_else(|| self.attempt.revision.clone());
        let attempt = Attempt::failed(revision, &crate::telemetry::error_chain(error));
        let record = self.recorded.clone();
        self.write_record(record, attempt).await
    }

    /// Writes `record` and `attempt` on the parent unless both say what it records already
    /// (the record's time does not count).
    async fn write_record(&mut self, record: Option<Record>, attempt: Attempt) -> Result<bool> {
        let same_record = match (&self.recorded, &record) {
            (Some(a), Some(b)) => a.same_outcome(b),
            (a, b) => a.is_none() && b.is_none(),
        };
        if same_record && self.attempt == attempt {
            return Ok(false);
        }
        let mut annotations = record.as_ref().map(Record::annotations).unwrap_or_default();
        annotations.extend(attempt.annotations());
        annotations.insert(UNIT.to_string(), self.unit.name.clone());
        self.write_parent(Some(&annotations), |existing| existing.map(|p| p.contents.clone()).unwrap_or_default())
            .await?;
        self.recorded = record;
        self.attempt = attempt;
        Ok(true)
    }

    /// Reads the parent (one GET), remembering its record and attempt.
    async fn read_parent(&mut self) -> Result<Option<Parent>> {
        let parent = self.inventory.read(&self.client).await?;
        if let Some(p) = &parent {
            self.recorded = Record::from_annotations(&p.annotations);
            self.attempt = Attempt::from_annotations(&p.annotations);
        }
        Ok(parent)
    }

    /// The annotations every write of the parent carries: the last sync's record and attempt as
    /// they stand, and the unit's name ([`UNIT`]), by which an ownership conflict names the unit.
    fn record_annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = self.recorded.as_ref().map(Record::annotations).unwrap_or_default();
        annotations.extend(self.attempt.annotations());
        annotations.insert(UNIT.to_string(), self.unit.name.clone());
        annotations
    }

    /// Starts (or keeps) a metadata watch for every group-kind in the desired set and the
    /// inventory; returns the resource of each that the server still serves and can be
    /// watched, and apart from those the kinds whose first list failed (403, or not within
    /// the cache timeout) with the reason.
    ///
    /// Errors: [`Error::Cluster`] when discovery fails.
    async fn watch_kinds(
        &mut self,
        desired: &[Desired],
        contents: &Contents,
    ) -> Result<(HashMap<GroupKind, (Arc<ApiResource>, bool)>, BTreeMap<GroupKind, String>)> {
        let mut resources: HashMap<GroupKind, (Arc<ApiResource>, bool)> = HashMap::new();
        for d in desired {
            resources.entry(d.object.gk.clone()).or_insert_with(|| (d.resource.clone(), d.object.namespace.is_some()));
        }
        for gk in &contents.group_kinds {
            if resources.contains_key(gk) {
                continue;
            }
            if let Some(r) = self.discovery.resolve_group_kind(&self.client, gk).await? {
                resources.insert(gk.clone(), (r.resource, r.namespaced));
            }
        }
        self.cache.retain_kinds(|gk| resources.contains_key(gk));
        let mut unwatchable = BTreeMap::new();
        let kinds: Vec<(Arc<ApiResource>, bool)> = resources.values().cloned().collect();
        let keys: Vec<GroupKind> = resources.keys().cloned().collect();
        // All first lists at once: ten new kinds cost one round trip, not ten in a row.
        for (gk, (_, ready)) in keys.into_iter().zip(self.cache.ensure_all(&kinds, self.cache_timeout).await) {
            match ready {
                Ok(()) => {}
                Err(e @ crate::cluster::Error::CacheFailed { .. }) => {
                    unwatchable.insert(gk, e.to_string());
                }
                Err(e) => return Err(e.into()),
            }
        }
        resources.retain(|gk, _| !unwatchable.contains_key(gk));
        Ok((resources, unwatchable))
    }

    async fn plan_stages(
        &mut self,
        desired: &[Desired],
        changes: &mut ChangeSet,
    ) -> Result<BTreeMap<Stage, Vec<Step>>> {
        self.plan_stages_from(desired, 0, changes).await
    }

    /// Plans `desired[start..]`, refusing objects that carry another ApplySet's label unless
    /// `adopt_from` names their owner ([`Engine::foreign_members`]); those it may take over are
    /// remembered for `update` mode's adoption check and the change-set note.
    async fn plan_stages_from(
        &mut self,
        desired: &[Desired],
        start: usize,
        changes: &mut ChangeSet,
    ) -> Result<BTreeMap<Stage, Vec<Step>>> {
        let live = self.cache.snapshot();
        let foreign = self.foreign_members(&desired[start..], &live, changes).await;
        self.apply.adoptable.extend(foreign.adoptable_ids);
        self.adoptions.extend(foreign.adopted);
        let mut p = plan::plan(&desired[start..], &live, &foreign.refused);
        for (index, reason) in p.refused.drain(..) {
            let d = &desired[start + index];
            changes.push(d.object.clone(), Action::Failed, Some(format!("{}: {reason}", d.origin)));
        }
        Ok(p.stages
            .into_iter()
            .map(|(stage, steps)| {
                let steps = steps.into_iter().map(|s| Step { index: s.index + start, ..s }).collect();
                (stage, steps)
            })
            .collect())
    }

    /// Adds the note `adopted from unit …` to the entries of the objects taken over from
    /// another ApplySet by this apply, and reports the Namespace this sync made bare
    /// ([`Engine::ensure_parent_namespace`]) as `created`.
    fn note_adoptions(&mut self, changes: &mut ChangeSet) {
        if let Some(made) = self.made_bare.take()
            && let Some(entry) = changes.entries.iter_mut().find(|e| e.object == made && e.action == Action::Adopted)
        {
            entry.action = Action::Created;
            entry.message = None;
        }
        if self.adoptions.is_empty() {
            return;
        }
        for entry in &mut changes.entries {
            let applied =
                matches!(entry.action, Action::Created | Action::Adopted | Action::Configured | Action::DriftCorrected);
            if let Some(note) = self.adoptions.remove(&entry.object).filter(|_| applied) {
                // An `adopted` entry's own message only says it existed; the note says from whom.
                entry.message = Some(match entry.message.take().filter(|_| entry.action != Action::Adopted) {
                    Some(message) => format!("{note}; {message}"),
                    None => note,
                });
            }
        }
        self.adoptions.clear();
    }

    /// Objects about to be created that already carry another ApplySet's `part-of` label: one
    /// metadata-only list per group-kind with creates, selecting `part-of` present and not ours,
    /// read a page at a time ([`list_foreign`]). When there are any, their owners are looked up
    /// by id ([`owner::owners`]: two more lists) and judged against `adopt_from`
    /// ([`owner::verdict`]): refused with a message naming the owning unit and its parent, or
    /// adopted.
    async fn foreign_members(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ObjectRef, plan::LiveMeta>,
        changes: &mut ChangeSet,
    ) -> Foreign {
        let mut by_kind: HashMap<&GroupKind, (&Arc<ApiResource>, bool)> = HashMap::new();
        for d in desired.iter().filter(|d| !live.contains_key(&d.object)) {
            by_kind.insert(&d.object.gk, (&d.resource, d.object.namespace.is_some()));
        }
        let selector = format!("{PART_OF},{PART_OF}!={}", self.inventory.id);
        // One list per kind, all at once: a cold sync of ten kinds waited for ten lists in a row.
        let lists = futures::future::join_all(by_kind.into_iter().map(|(gk, (resource, namespaced))| {
            let selector = &selector;
            async move { (gk, namespaced, list_foreign(&self.client, resource, selector).await) }
        }))
        .await;
        let mut foreign = Foreign::default();
        let mut labelled = Vec::new();
        for (gk, namespaced, list) in lists {
            let list = match list {
                Ok((pages, list)) => {
                    changes.requests += pages;
                    list
                }
                Err(e) => {
                    changes.requests += 1;
                    // Unverified ownership is not permission: refuse these creates this time.
                    let reason = format!(
                        "could not check whether another ApplySet owns it: {}",
                        crate::cluster::api_message(&e)
                    );
                    for d in desired.iter().filter(|d| &d.object.gk == gk && !live.contains_key(&d.object)) {
                        foreign.refused.insert(d.object.clone(), reason.clone());
                    }
                    continue;
                }
            };
            for meta in list {
                let namespace = if namespaced { meta.namespace } else { None };
                let object = ObjectRef::new(gk.clone(), namespace, meta.name.unwrap_or_default());
                let id = meta.labels.get(PART_OF).cloned().unwrap_or_default();
                labelled.push((object, id));
            }
        }
        if labelled.is_empty() {
            return foreign;
        }
        let ids: std::collections::BTreeSet<String> = labelled.iter().map(|(_, id)| id.clone()).collect();
        changes.requests += 2;
        let owners = owner::owners(&self.client, &ids).await.map_err(|e| crate::cluster::api_message(&e));
        for (object, id) in labelled {
            let found = owners.as_ref().ok().and_then(|o| o.get(&id));
            match (owner::verdict(&id, found, &self.unit.adopt_from), &owners) {
                (Verdict::Adopt(note), _) => {
                    foreign.adoptable_ids.insert(id);
                    foreign.adopted.insert(object, note);
                }
                (Verdict::Refuse(reason), Ok(_)) => {
                    foreign.refused.insert(object, reason);
                }
                (Verdict::Refuse(_), Err(e)) => {
                    let reason = format!(
                        "belongs to another ApplySet ({id}); not taken over (its owner could not be looked up: {e})"
                    );
                    foreign.refused.insert(object, reason);
                }
            }
        }
        foreign
    }

    /// After the Foundations stage: resolves custom resources whose CRD was just applied.
    async fn resolve_pending(
        &mut self,
        pending: Vec<crate::manifest::Manifest>,
        defaults: &Defaults,
        blocked: &Blocked,
        desired: &mut Vec<Desired>,
        changes: &mut ChangeSet,
    ) -> Result<()> {
        for m in &pending {
            self.discovery.forget(&m.api_version);
        }
        // Kinds still not served after waiting for discovery: their other objects fail at once.
        let mut unserved: HashSet<(crate::object::Atom, crate::object::Atom)> = HashSet::new();
        for m in pending {
            let guess = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
            if let Some(reason) = blocked.reason(&guess) {
                changes.push(guess, Action::Skipped, Some(reason));
                continue;
            }
            let key = (m.api_version.clone(), m.gk.kind.clone());
            let resolved = if unserved.contains(&key) {
                None
            } else {
                self.discovery.resolve_new(&self.client, &m.api_version, &m.gk.kind).await?
            };
            if resolved.is_none() {
                unserved.insert(key);
            }
            match resolved {
                Some(r) => {
                    let ns = r.namespaced.then(|| m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone()));
                    let object = ObjectRef::new(m.gk.clone(), ns, &m.name);
                    if let Some(reason) = blocked.reason(&object) {
                        changes.push(object, Action::Skipped, Some(reason));
                        continue;
                    }
                    self.cache.ensure(&r.resource, r.namespaced, self.cache_timeout).await?;
                    desired.push(desired::build(m, object, r.resource, r.namespaced, defaults)?);
                }
                None => {
                    let message =
                        format!("{}: kind {} is not served after its CRD was applied", desired::origin(&m), m.gk);
                    changes.push(guess, Action::Failed, Some(message));
                }
            }
        }
        Ok(())
    }

    async fn prune_and_narrow(
        &mut self,
        inputs: PruneInputs<'_>,
        widened: &Contents,
        changes: &mut ChangeSet,
    ) -> Result<()> {
        let PruneInputs { desired, resources, members_before, partial } = inputs;
        self.release_legacy_namespace(desired).await;
        let stale = self.cache.relist_stale(self.cache_timeout).await.err();
        let p = plan::prune_plan(desired, &self.cache.snapshot(), &widened.members);
        changes.not_members.extend(p.not_members);
        if let Some(reason) = self.prune_deferred().filter(|_| !p.steps.is_empty()) {
            // Not a failure: the move is what the user asked for; the members stay recorded.
            changes.prune_refused = Some(reason);
            return Ok(());
        }
        let refused = match stale {
            Some(e) => Some(format!("the metadata cache cannot be trusted: {e}")),
            None if !partial.is_empty() && !p.steps.is_empty() => Some(partial_refusal(partial)),
            None => {
                let opts =
                    PruneOptions { allow_all: self.prune.allow_all || self.allow_prune_once, ..self.prune.clone() };
                prune::refusal(desired.len(), members_before, p.steps.len(), &opts)
            }
        };
        if let Some(reason) = refused {
            for step in &p.steps {
                changes.push(step.object.clone(), Action::Skipped, Some(format!("prune refused: {reason}")));
            }
            changes.prune_refused = Some(reason);
            return Ok(());
        }
        let ctx =
            prune::Context { client: &self.client, resources, cache: &self.cache, applyset_id: &self.inventory.id };
        let pruned = prune::prune(&ctx, &p.steps).await;
        let clean = !pruned.has_failures();
        changes.extend(pruned);
        if clean {
            self.narrow_inventory(desired, resources, widened).await?;
        }
        Ok(())
    }

    /// Why this unit prunes nothing now, if so: another unit of the config names it in
    /// `adopt_from` ([`SyncUnit::adopted_by`]), so what left this unit's revision may be moving
    /// there, and must not be deleted before that unit takes it over, whichever syncs first.
    pub fn prune_deferred(&self) -> Option<String> {
        let adopters = &self.unit.adopted_by;
        (!adopters.is_empty()).then(|| {
            let units: Vec<String> = adopters.iter().map(|u| format!("`{u}`")).collect();
            format!(
                "unit {} may take over this unit's objects (its adopt_from names `{}`): nothing is pruned \
                 until the move is done and adopt_from is removed",
                units.join(", "),
                self.unit.name
            )
        })
    }

    /// Narrows the parent after a clean prune to what remains: desired objects, and recorded
    /// members still live (or of a kind that could not be watched, which stay recorded). A
    /// conflict leaves the parent wide (safe) and makes the next sync read it again.
    async fn narrow_inventory(
        &mut self,
        desired: &[Desired],
        resources: &HashMap<GroupKind, (Arc<ApiResource>, bool)>,
        widened: &Contents,
    ) -> Result<()> {
        let remaining = self.cache.snapshot();
        let wanted: std::collections::BTreeSet<&ObjectRef> = desired.iter().map(|d| &d.object).collect();
        // Members of kinds not served now stay recorded unless their API group is confirmed gone
        // (its CRD deleted: the objects went with it).
        let mut unserved_groups: Vec<&str> =
            widened.members.iter().filter(|r| !resources.contains_key(&r.gk)).map(|r| r.gk.group.as_str()).collect();
        unserved_groups.sort_unstable();
        unserved_groups.dedup();
        let mut gone = std::collections::BTreeSet::new();
        for group in unserved_groups {
            if crate::cluster::discovery::group_gone(&self.client, group).await {
                gone.insert(group.to_string());
            }
        }
        let members: Vec<ObjectRef> = widened
            .members
            .iter()
            .filter(|r| {
                wanted.contains(r)
                    || remaining.contains_key(r)
                    || (!resources.contains_key(&r.gk) && !gone.contains(r.gk.group.as_str()))
            })
            .cloned()
            .collect();
        let live = Contents::of(remaining.keys()).union(&Contents::of(members.iter()));
        let narrowed = Contents {
            group_kinds: live.group_kinds,
            namespaces: live.namespaces.into_iter().chain(self.inventory.parent.namespace.clone()).collect(),
            members: members.into_iter().collect(),
        };
        if &narrowed == widened {
            return Ok(());
        }
        let precondition = self.known_inventory.take().map(|p| p.resource_version);
        let record = self.record_annotations();
        match self
            .inventory
            .write(&self.client, &narrowed, precondition.as_deref(), &self.apply.field_manager, &record)
            .await
        {
            Ok(parent) => self.known_inventory = Some(parent),
            Err(crate::cluster::Error::InventoryConflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}

/// What the ownership check found among the objects about to be created
/// ([`Engine::foreign_members`]).
#[derive(Debug, Default)]
struct Foreign {
    /// Objects not to send, with the reason.
    refused: HashMap<ObjectRef, String>,
    /// Objects another ApplySet owns that `adopt_from` lets this unit take over, with the note.
    adopted: HashMap<ObjectRef, String>,
    /// The ApplySet ids of the adopted objects.
    adoptable_ids: std::collections::BTreeSet<String>,
}

/// What the prune of one sync starts from.
struct PruneInputs<'a> {
    desired: &'a [Desired],
    resources: &'a HashMap<GroupKind, (Arc<ApiResource>, bool)>,
    /// Members in the cache before the apply (the fraction guard's denominator).
    members_before: usize,
    /// Paths the listing skipped that may define objects ([`crate::manifest::Loaded::partial`]).
    partial: &'a [String],
}

/// The prune guard's reason when the revision was read only in part (`partial`: the paths not
/// followed).
fn partial_refusal(partial: &[String]) -> String {
    format!(
        "the revision was read only in part ({} not followed: symbolic link, submodule or name not UTF-8): \
         what they define would be pruned",
        partial.join(", ")
    )
}

/// Objects per page of an ownership-check list.
const FOREIGN_PAGE: u32 = 500;

/// The metadata an ownership check reads of a listed object; serde skips the rest of it
/// (`managedFields` above all) without building it.
#[derive(Clone, serde::Deserialize)]
struct LabelledMeta {
    name: Option<String>,
    namespace: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// A list item of [`list_foreign`]: its metadata alone.
#[derive(Clone, serde::Deserialize)]
struct Labelled {
    metadata: LabelledMeta,
}

/// Every object of `resource` in all namespaces that `selector` selects, as metadata-only
/// pages of [`FOREIGN_PAGE`] (`limit` and `continue`, API concepts "Retrieving large results
/// sets in chunks"), each reduced to name, namespace and labels as it is read. With the whole
/// list in one response, a unit's cold sync beside other units' tens of thousands of members
/// held every one of them, `managedFields` and all, at once. Returns the pages read and the
/// objects.
///
/// Errors: the first failed request's.
async fn list_foreign(
    client: &kube::Client,
    resource: &ApiResource,
    selector: &str,
) -> std::result::Result<(usize, Vec<LabelledMeta>), kube::Error> {
    use kube::core::{ObjectList, Resource};
    let request = kube::core::Request::new(DynamicObject::url_path(resource, None));
    let mut params = ListParams::default().labels(selector).limit(FOREIGN_PAGE);
    let (mut pages, mut found) = (0, Vec::new());
    loop {
        let http = request.list_metadata(&params).map_err(kube::Error::BuildRequest)?;
        let page: ObjectList<Labelled> = client.request(http).await?;
        pages += 1;
        found.extend(page.items.into_iter().map(|item| item.metadata));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((pages, found)),
        }
    }
}

/// The attempt a sync of `revision` with `changes` records: clean, or with the refused prune
/// and the objects that failed, were skipped or met a conflict (in ref order, so retries of
/// one failure record the same words and write nothing new).
fn attempt_of(revision: &str, changes: &ChangeSet) -> Attempt {
    let mut objects: Vec<NotApplied> = changes
        .entries
        .iter()
        .filter(|e| matches!(e.action, Action::Failed | Action::Skipped | Action::Conflict))
        .map(|e| NotApplied {
            object: e.object.to_string(),
            action: e.action.to_string(),
            reason: e.message.clone().unwrap_or_default(),
        })
        .collect();
    if objects.is_empty() && changes.prune_refused.is_none() {
        return Attempt::clean(revision);
    }
    objects.sort_by(|a, b| a.object.cmp(&b.object));
    Attempt::partial(revision, objects, changes.prune_refused.as_deref())
}

/// The objects a sync created, adopted, configured or drift-corrected, with their resources.
fn health_targets(desired: &[Desired], changes: &ChangeSet) -> Vec<Target> {
    let resources: HashMap<&ObjectRef, &Arc<ApiResource>> = desired.iter().map(|d| (&d.object, &d.resource)).collect();
    changes
        .entries
        .iter()
        .filter(|e| e.action.applied_change())
        .filter_map(|e| {
            let resource = resources.get(&e.object)?;
            Some(Target { object: e.object.clone(), resource: Arc::clone(resource) })
        })
        .collect()
}

fn pending_contents(pending: &[crate::manifest::Manifest], defaults: &Defaults) -> Contents {
    let refs: Vec<ObjectRef> = pending
        .iter()
        .map(|m| {
            ObjectRef::new(
                m.gk.clone(),
                Some(m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone())),
                &m.name,
            )
        })
        .collect();
    Contents::of(refs.iter())
}
