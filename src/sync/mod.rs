//! The engine: one sync of one sync unit, from git fetch to prune (DESIGN.md, Data flow).
//!
//! [`Engine`] owns what lives across syncs of a unit — the git mirror, the parse cache, the
//! discovery cache and the metadata-only cache — so a daemon keeps them warm and the CLI's
//! one-shot `sync` builds them once. [`Engine::sync`] returns a [`Report`] and logs nothing.
//!
//! Nothing is lost on bad input (DESIGN.md decision 8): a revision that fails to read, parse
//! or resolve is not applied at all and nothing is pruned; the error names the file and
//! document or the object.
//!
//! Files, one per step of a sync: `repo` (the mirror, render and parse cache off the runtime),
//! `loader` (a revision fetched, loaded and its variables substituted), `writes` (the one seam
//! every write of a sync goes through: to the API server, or recorded), `order` (the order of a
//! sync's steps once planned, tested over the recorded writes),
//! `early` (a push's changed objects sent first), `desired` (resolve, default namespace,
//! label), `pending` (custom resources whose CRD the revision brings), `inventory` (the
//! ApplySet parent widened and narrowed), `ownership` (objects another ApplySet owns: refused or
//! adopted), `prune_step` (the guards, the deletes), `namespaces` (`create_namespace`, the
//! parent's namespace), `health` (what a wait covers, what its outcome gives), `record` (the
//! result and attempt on the parent), `outcome` (a sync's end: applied or failed), `hooks` (Helm hooks as phases), `diff` (`gitward diff`),
//! `heal` (the drifted objects re-applied), `set` (a `[[sync_set]]`'s directories listed at
//! the tip, and its units), `substitute` (`[sync.substitute]`'s variables read
//! and substituted into each load). This file holds the engine and
//! the order of the steps.

#[cfg(test)]
pub(crate) mod build;
pub mod desired;
pub(crate) mod diff;
pub(crate) mod early;
pub mod follow;
mod heal;
mod health;
pub mod hooks;
mod inventory;
mod loader;
pub(crate) mod namespaces;
mod order;
pub mod outcome;
mod ownership;
mod pending;
mod prune_step;
mod record;
pub(crate) mod repo;
mod run;
pub mod set;
mod state;
pub mod substitute;
pub mod writes;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::discovery::ApiResource;

use crate::apply::ApplyOptions;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::cache::MetadataCache;

use crate::cluster::fence::Fence;
use crate::cluster::inventory::{Contents, Inventory};
use crate::config::{ClusterConfig, SyncUnit};

use crate::health::record::SyncResult;
use crate::health::wait::Target;
use crate::manifest::Skipped;
use crate::object::GroupKind;
use crate::plan::{self, Desired, Stage, Step};
use crate::prune::PruneOptions;
use crate::source::Revision;
pub use early::EarlyApply;
pub use outcome::{Cause, Ended, HealthStep, Outcome, Timings};

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
    #[error("{object}: defined twice, in {first} and in {second}{hint}")]
    Duplicate {
        /// `Kind/ns/name`.
        object: String,
        /// Where it was first defined.
        first: String,
        /// Where it was defined again.
        second: String,
        /// Empty, or `; ` and the likely cause: a kustomization read as plain manifests ([`desired::hinted`]).
        hint: String,
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
    /// The key that hashes objects holding a Secret's value (`[sync.substitute]`,
    /// [`substitute::KEY_FILE`] under `state_dir`) can be neither read nor made.
    #[error("{path}: {message}")]
    SubstituteKey {
        /// The key file.
        path: String,
        /// What the file system said.
        message: String,
    },
    /// A blocking task (git, parsing) panicked or was cancelled.
    #[error("background task failed: {0}")]
    Task(String),
    /// A `[[sync_set]]`'s directories made units that cannot be: more than its `max_units`,
    /// a name that is not a unit name, a name or inventory of another unit ([`set`]). Bad
    /// input: not worth retrying before the repository or the config changes.
    #[error(transparent)]
    Set(#[from] crate::config::Error),
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
    /// How long the sync took, in all and rendering (its `wait` zero: the health wait runs
    /// after the report).
    pub took: Timings,
    /// What was sent: when, how much of it early, what the health wait watches.
    pub sent: Sent,
    /// True for [`Engine::heal`]'s report: a few drifted objects re-applied, not a sync of the
    /// revision, so it leaves the recorded attempt (and its error) as it is.
    pub heal: bool,
    /// The sync stopped sending when [`Engine::yield_signal`] was raised: `changes` holds what
    /// was sent, nothing was pruned, and the revision is not applied whole.
    pub yielded: bool,
    /// The objects came from the plain files of the unit's path alone
    /// ([`crate::manifest::Loaded::path_only`]): a later revision whose tree at that path is the
    /// same object brings the same objects. False for a self-heal.
    pub path_only: bool,
    /// With `path_only`: the id of the git tree at the unit's path at `revision`
    /// ([`crate::source::Source::path_tree`]), recorded on the parent so that a unit depending
    /// on this one takes a later revision with the same tree there as applied
    /// ([`crate::health::record::LAST_PATH_TREE`]). `None` otherwise, and for a self-heal.
    pub path_tree: Option<String>,
}

/// What a sync sent, for the health wait and the push-to-applied figure.
#[derive(Debug, Clone)]
pub struct Sent {
    /// When the last object that git changed was applied (else when the apply ended), for
    /// `trigger_to_applied_ms`.
    pub applied_at: Instant,
    /// The objects this sync created, configured or drift-corrected: what the health wait
    /// watches ([`crate::health::wait`]).
    pub health_targets: Vec<Target>,
    /// How many of the objects git changed were applied early, before the revision was loaded
    /// whole ([`early`]); included in the report's `changes`.
    pub applied_early: usize,
}

/// The state kept for one unit across syncs, in parts with one job each.
pub struct Engine {
    /// Shared with the repo and the daemon's running-unit map: one copy per unit.
    unit: Arc<SyncUnit>,
    /// Source, render and parse: the mirror, the parse and render caches, the variables.
    loader: loader::Loader,
    /// The cluster as the engine reads and writes it.
    view: state::ClusterView,
    /// The ApplySet parent and the namespaces made for it.
    parent: state::ParentState,
    /// What the parent records of syncs and attempts.
    record: state::Recorder,
    /// Helm hooks: the revision's, and the phase last run.
    hooks: hooks::Hooks,
    /// How objects are applied and pruned.
    options: state::Options,
    /// What the last sync leaves for the next one and for self-heal.
    last: state::LastSync,
}

impl Engine {
    /// Opens (or creates) the unit's mirror under `state_dir` and prepares empty caches. The
    /// client impersonating the unit's ServiceAccount, if any, sends the User-Agent of this
    /// process's identity ([`crate::cluster::agent::process_identity`]).
    ///
    /// Errors: [`Error::Source`] when the mirror cannot be opened; [`Error::Cluster`] when the
    /// client impersonating the unit's ServiceAccount cannot be built.
    pub async fn new(
        client: kube::Client,
        cluster: &ClusterConfig,
        state_dir: &std::path::Path,
        unit: &SyncUnit,
    ) -> Result<Self> {
        let user_agent = crate::cluster::agent::user_agent(&crate::cluster::agent::process_identity());
        Self::fenced(client, cluster, state_dir, &Arc::new(unit.clone()), &Fence::unfenced(), &user_agent).await
    }

    /// [`Engine::new`] for a unit that runs under a Lease: `client` is already checked by
    /// `fence` ([`crate::cluster::registry::Registry::fenced_client`]), and so is the client
    /// impersonating the unit's ServiceAccount, built here; the prune checks it again before
    /// each delete.
    ///
    /// `unit` is shared, not copied (the daemon keeps the same copy in its map of running units).
    /// `user_agent` is the replica's ([`crate::cluster::agent::user_agent`]), sent by the
    /// impersonating client as by `client`.
    ///
    /// Errors: as [`Engine::new`].
    pub async fn fenced(
        client: kube::Client,
        cluster: &ClusterConfig,
        state_dir: &std::path::Path,
        unit: &Arc<SyncUnit>,
        fence: &Fence,
        user_agent: &str,
    ) -> Result<Self> {
        let repo = repo::Repo::open(state_dir, unit).await?;
        let substitute_key = substitute::key(state_dir, unit.substitute.from.iter().any(|s| s.secret))?;
        let writer = match &unit.service_account {
            Some(sa) => crate::cluster::connect_impersonating(cluster, &unit.namespace, sa, fence, user_agent).await?,
            None => client.clone(),
        };
        let inventory = Inventory::new(&unit.inventory);
        let mut cache = MetadataCache::new(client.clone(), &inventory.id);
        cache.set_field_manager(&unit.field_manager);
        cache.follow_kinds(crate::health::bears_health);
        let apply = ApplyOptions {
            field_manager: unit.field_manager.clone(),
            force: unit.force_conflicts,
            max_in_flight: cluster.max_in_flight,
            takeover_managers: unit.takeover_managers.clone(),
            ..Default::default()
        };
        let prune = PruneOptions { max_fraction: unit.max_prune_fraction, allow_all: unit.allow_prune_all };
        Ok(Self {
            unit: unit.clone(),
            loader: loader::Loader::new(unit.clone(), repo, substitute_key),
            view: state::ClusterView::new(client, writer, cache, fence.clone()),
            parent: state::ParentState::new(inventory),
            record: state::Recorder::default(),
            hooks: hooks::Hooks::default(),
            options: state::Options { apply, prune, allow_prune_once: false },
            last: state::LastSync::default(),
        })
    }

    /// The unit's name.
    pub fn unit_name(&self) -> &str {
        &self.unit.name
    }

    /// Whether the unit's config suspends it ([`crate::config::SyncUnit::suspend`]).
    pub fn suspended_by_config(&self) -> bool {
        self.unit.suspend
    }

    /// The unit's inventory (ApplySet parent and id).
    pub fn inventory(&self) -> &Inventory {
        &self.parent.inventory
    }

    /// gitward's own client of the unit's cluster (checked by the unit's fence under a Lease),
    /// not the one impersonating the unit's ServiceAccount: what writes the unit's Kubernetes
    /// Events.
    pub fn client(&self) -> &kube::Client {
        self.view.client()
    }

    /// The seam every write of this unit's syncs goes through ([`writes::Writes`]), shared:
    /// the writer of its Kubernetes Events too.
    pub fn writes(&self) -> std::sync::Arc<dyn writes::Writes> {
        self.view.writes_shared()
    }

    /// Watches the unit's members and ApplySet parent through `watches`, the daemon's watches
    /// of the unit's cluster shared by all its units ([`crate::cluster::feed`]), instead of
    /// watches of its own. Call before the first sync.
    pub fn share_watches(&mut self, watches: &crate::cluster::feed::Watches) {
        self.view.cache_mut().share(watches);
        self.parent.watch = None;
    }

    /// Takes discovery's answers from `answers`, the daemon's for the unit's cluster shared by
    /// all its units ([`crate::cluster::discovery::Answers`]), before asking the API server.
    pub fn share_discovery(&mut self, answers: &crate::cluster::discovery::Answers) {
        self.view.discovery_mut().share(answers);
    }

    /// For a one-shot command (`gitward sync`, `gitward diff`): reads the unit's members and
    /// ApplySet parent by one list each and keeps no watch, so the API server streams no
    /// event per applied object to a process that exits after the sync. Call before the
    /// first sync; a daemon's unit keeps its watches (they see drift).
    pub fn one_shot(&mut self) {
        self.view.cache_mut().list_only();
        self.parent.watch = None;
    }

    /// The metadata cache (the daemon subscribes to its drift events).
    pub fn cache(&self) -> &MetadataCache {
        self.view.cache()
    }

    /// The unit's repository (mirror and parse cache).
    pub fn repo(&self) -> &repo::Repo {
        self.loader.repo()
    }

    /// Lets the next syncs of this engine prune past `max_prune_fraction` and the empty-revision
    /// guard (`gitward sync --allow-prune`: a deliberate one-off prune, as `allow_prune_all`
    /// would permit every time). The other prune rules (membership, re-check, cascades) stay.
    pub fn allow_prune_once(&mut self) {
        self.options.allow_prune_once = true;
    }

    /// Makes every later sync of this engine desire nothing: the unit's directory left its
    /// `[[sync_set]]`, whose `prune_removed` asks for its objects to go, and a sync then
    /// prunes every member its ApplySet lists — when the prune guards let it: an empty
    /// revision and `max_prune_fraction` refuse it unless the unit says `allow_prune_all` or
    /// the caller also calls [`Engine::allow_prune_once`] (`prune_removed_unguarded`). The
    /// other prune rules (membership, re-check, cascades, `prune = false`) stay.
    pub fn retire(&mut self) {
        self.loader.retire();
    }

    /// One sync: fetch, then [`Engine::sync_revision`].
    pub async fn sync(&mut self) -> Result<Report> {
        let started = Instant::now();
        self.record.attempting = None;
        let revision = self.loader.fetch().await?;
        let mut report = self.sync_revision(revision).await?;
        report.took.apply = started.elapsed();
        Ok(report)
    }

    /// One sync of an already fetched revision: [`Engine::early`] (a push's changed objects
    /// sent first), then [`Engine::sync_rest`] (load, resolve, widen the inventory, plan,
    /// apply stage by stage, prune, narrow the inventory).
    pub async fn sync_revision(&mut self, revision: Revision) -> Result<Report> {
        let early = self.early(&revision).await;
        self.sync_rest(early).await
    }

    /// The post phase of `report`'s revision, once its sync is judged `result`
    /// ([`hooks::Hooks::post`]): `None` when no hook was due; else their entries, and the result
    /// (`failed` when one failed).
    pub async fn post_hooks(&mut self, report: &Report, result: SyncResult) -> Option<(ChangeSet, SyncResult)> {
        let unit =
            hooks::Unit::new(&mut self.view, &self.parent.inventory.id, &self.options.apply.field_manager, &self.unit);
        self.hooks.post(unit, &self.parent.inventory.parent, report, result).await
    }

    /// Whether the API server answers now: one `GET /version`, at most 5 s. The daemon asks
    /// after a sync with failed objects, to tell failures the API server answered (a 403, a
    /// webhook's denial: the unit stays ready) from an outage (not ready).
    pub async fn cluster_answers(&self) -> bool {
        matches!(tokio::time::timeout(Duration::from_secs(5), self.view.client().apiserver_version()).await, Ok(Ok(_)))
    }

    /// The unit's `health_timeout` (zero: no health wait).
    pub fn health_timeout(&self) -> Duration {
        self.unit.health_timeout
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
            if let Some(r) = self.view.resolve_group_kind(gk).await? {
                resources.insert(gk.clone(), (r.resource, r.namespaced));
            }
        }
        self.view.cache_mut().retain_kinds(|gk| resources.contains_key(gk));
        let mut unwatchable = BTreeMap::new();
        let kinds: Vec<(Arc<ApiResource>, bool)> = resources.values().cloned().collect();
        let keys: Vec<GroupKind> = resources.keys().cloned().collect();
        // All first lists at once: ten new kinds cost one round trip, not ten in a row.
        for (gk, (_, ready)) in keys.into_iter().zip(self.view.ensure_all(&kinds).await) {
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
        let live = self.view.cache().snapshot();
        let foreign = self.foreign_members(&desired[start..], &live, changes).await;
        self.options.apply.adoptable.extend(foreign.adoptable_ids);
        self.last.adoptions.extend(foreign.adopted);
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
}

#[cfg(test)]
#[path = "shape_tests.rs"]
mod shape_tests;
