//! The engine: one sync of one sync unit, from git fetch to prune (DESIGN.md, Data flow), as an
//! orchestrator of parts that each own their state and the requests they send: the loader
//! ([`super::loader`]: fetch, render, parse), the cluster view ([`super::state::ClusterView`]:
//! discovery, the metadata cache, and the seam every write goes through), the ApplySet parent
//! and its record ([`super::parent`]), the unit's health as last judged
//! ([`super::health::Judgement`]) and the Helm hooks ([`super::hooks`]). Only this module's
//! files hold `impl Engine`; the parts' fields are private to their modules, so the engine
//! reaches them through their verbs alone.
//!
//! Files, one per way in: `run` (a sync after its early apply, its steps in
//! [`super::order`]'s order), `early` (a push's changed objects sent first), `plan` (the kinds
//! watched and the stages planned), `prune` (the guards and the deletes), `conclude` (the health
//! step and the outcome), `health` (the wait, its judgement, health followed between syncs),
//! `record` (what the parent records, as the daemon and the CLI ask for it), `heal` (the
//! drifted objects re-applied), `diff` (`gitward diff`: a sync that writes nothing).

mod conclude;
mod diff;
mod early;
mod heal;
mod health;
mod plan;
mod prune;
mod record;
mod run;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::health::Judgement;
use super::parent::ApplySetParent;
use super::{Report, Result, hooks, loader, repo, state, substitute, writes};
use crate::apply::ApplyOptions;
use crate::changeset::ChangeSet;
use crate::cluster::cache::MetadataCache;
use crate::cluster::fence::Fence;
use crate::cluster::inventory::Inventory;
use crate::config::{ClusterConfig, SyncUnit};
use crate::health::record::SyncResult;
use crate::object::ObjectRef;
use crate::plan::Desired;
use crate::prune::PruneOptions;
use crate::source::Revision;

/// How the engine applies and prunes.
struct Options {
    /// Field manager, force, in-flight bound, takeover managers, the yield signal.
    apply: ApplyOptions,
    /// The prune guards.
    prune: PruneOptions,
    /// A one-off permission to prune past the guards (`gitward sync --allow-prune`).
    allow_prune_once: bool,
}

/// What one sync leaves for the next and for self-heal.
#[derive(Default)]
struct LastSync {
    /// The desired objects and revision of the last sync, for [`Engine::heal`].
    desired: Option<(Revision, Vec<Desired>)>,
    /// Objects of the plan that another ApplySet owns and `adopt_from` lets this unit take
    /// over, with the change-set note; attached to their entries after the apply.
    adoptions: HashMap<ObjectRef, String>,
}

/// The state kept for one unit across syncs, in parts with one job each.
pub struct Engine {
    /// Shared with the repo and the daemon's running-unit map: one copy per unit.
    unit: Arc<SyncUnit>,
    /// Source, render and parse: the mirror, the parse and render caches, the variables.
    loader: loader::Loader,
    /// The cluster as the engine reads and writes it.
    view: state::ClusterView,
    /// The ApplySet parent, its record and the namespaces made for it.
    parent: ApplySetParent,
    /// The unit's health as last judged.
    health: Judgement,
    /// Helm hooks: the revision's, and the phase last run.
    hooks: hooks::Hooks,
    /// How objects are applied and pruned.
    options: Options,
    /// What the last sync leaves for the next one and for self-heal.
    last: LastSync,
    /// With `[provenance]`: signs and keeps each sync's attestation.
    attestor: Option<super::provenance::Attestor>,
    /// The state directory, where [`Engine::diff`] reads the install's key.
    state_dir: Arc<std::path::Path>,
}

impl Engine {
    /// Opens (or creates) the unit's mirror under `state_dir` and prepares empty caches. The
    /// client impersonating the unit's ServiceAccount, if any, sends the User-Agent of this
    /// process's identity ([`crate::cluster::agent::process_identity`]).
    ///
    /// Errors: [`crate::sync::Error::Source`] when the mirror cannot be opened; [`crate::sync::Error::Cluster`] when the
    /// client impersonating the unit's ServiceAccount cannot be built; [`crate::sync::Error::Provenance`] when
    /// `[provenance] key_file` or `key_secret` cannot be read as a key.
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
        let attestor = super::provenance::Attestor::new(unit, cluster, state_dir, &client).await?;
        let parent = ApplySetParent::new(unit.clone());
        let mut cache = MetadataCache::new(client.clone(), &parent.inventory().id);
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
            parent,
            health: Judgement::default(),
            hooks: hooks::Hooks::default(),
            options: Options { apply, prune, allow_prune_once: false },
            last: LastSync::default(),
            attestor,
            state_dir: Arc::from(state_dir),
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
        self.parent.inventory()
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
        self.parent.forget(true);
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
        self.parent.forget(true);
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

    /// One sync: fetch, then [`Engine::sync_revision`].
    pub async fn sync(&mut self) -> Result<Report> {
        let started = Instant::now();
        self.parent.begin_attempt(None);
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
        let inventory = self.parent.inventory();
        let unit = hooks::Unit::new(&mut self.view, &inventory.id, &self.options.apply.field_manager, &self.unit);
        self.hooks.post(unit, &inventory.parent, report, result).await
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

    /// The desired objects of the last sync, if any.
    fn last_desired(&self) -> Option<&[Desired]> {
        self.last.desired.as_ref().map(|(_, d)| d.as_slice())
    }
}
