//! The order of a whole sync's writes, run through the recording writes: no API server.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::*;
use crate::apply::hook::HookApi;
use crate::apply::{ApplyOptions, Blocked};
use crate::changeset::ChangeSet;
use crate::cluster::LiveMeta;
use crate::cluster::cache::MetadataCache;
use crate::cluster::discovery::Resolved;
use crate::cluster::fence::Fence;
use crate::cluster::inventory::{Contents, Inventory};
use crate::manifest::parse_file;
use crate::object::{GroupKind, ObjectRef};
use crate::plan::{Desired, Op};
use crate::sync::desired::{self, tests::defaults};
use crate::sync::writes::{Recording, Write, WriteKind, Writes};

/// A sync rehearsed: its steps send through [`Recording`], its reads are prepared.
struct Rehearsal {
    writes: Recording,
    desired: Vec<Desired>,
    /// Custom resources that wait for their CRD, resolved after the Foundations stage.
    waiting: Option<Vec<Desired>>,
    /// The pre hooks due, and whether the last of them fails.
    hooks: Option<(Vec<Desired>, bool)>,
    /// The members live before the sync, all recorded on the parent.
    live: BTreeMap<ObjectRef, LiveMeta>,
    client: kube::Client,
    cache: MetadataCache,
    inventory: Inventory,
    blocked: Blocked,
    options: ApplyOptions,
    changes: ChangeSet,
}

impl Steps for Rehearsal {
    fn yielded(&self) -> bool {
        self.options.yield_to.is_raised()
    }

    fn failed(&self) -> bool {
        self.changes.has_failures()
    }

    async fn apply(&mut self, stage: Stage, steps: &[Step]) {
        let applied =
            self.writes.apply(stage, steps, &self.desired, &self.cache, &mut self.blocked, &self.options).await;
        self.changes.extend(applied);
    }

    async fn pre_hooks(&mut self) -> Result<Option<String>> {
        let Some((hooks, fails)) = self.hooks.take() else { return Ok(None) };
        for hook in &hooks {
            let api = HookApi::new(&self.client, Some("shop"), &hook.resource);
            let body = hook.body().to_value();
            self.writes.apply_hook(&api, &hook.object, &body, "gitward").await.expect("applied");
        }
        Ok(fails.then(|| "pre-upgrade hook failed".to_string()))
    }

    fn refuse(&mut self, steps: Vec<Step>, reason: &str) {
        for step in steps {
            let object = self.desired[step.index].object.clone();
            self.changes.push(object, crate::changeset::Action::Skipped, Some(reason.to_string()));
        }
    }

    async fn resolve_waiting(&mut self) -> Result<BTreeMap<Stage, Vec<Step>>> {
        let Some(waiting) = self.waiting.take() else { return Ok(BTreeMap::new()) };
        let start = self.desired.len();
        self.desired.extend(waiting);
        let mut added: BTreeMap<Stage, Vec<Step>> = BTreeMap::new();
        for (index, d) in self.desired.iter().enumerate().skip(start) {
            let step = Step { index, op: Op::Create, cached_resource_version: None };
            added.entry(Stage::of(&d.object.gk)).or_default().push(step);
        }
        Ok(added)
    }

    fn applied(&mut self) {}

    async fn prune(&mut self) -> Result<()> {
        let recorded: BTreeSet<ObjectRef> = self.live.keys().cloned().collect();
        let p = crate::plan::prune_plan(&self.desired, &self.live, &recorded);
        let resources = self.live.keys().map(|o| (o.gk.clone(), (resource(&o.gk), true))).collect::<HashMap<_, _>>();
        let fence = Fence::unfenced();
        let ctx = crate::prune::Context {
            client: &self.client,
            resources: &resources,
            cache: &self.cache,
            applyset_id: &self.inventory.id,
            fence: &fence,
        };
        if p.steps.is_empty() {
            return Ok(());
        }
        self.changes.extend(self.writes.prune(&ctx, &p.steps).await);
        let narrowed = Contents::of(self.desired.iter().map(|d| &d.object));
        self.writes.parent(&self.inventory, &narrowed, None, "gitward", &BTreeMap::new()).await?;
        Ok(())
    }
}

fn resource(gk: &GroupKind) -> Arc<ApiResource> {
    let (group, version) = match gk.group.as_str() {
        "" => ("", "v1"),
        "apps" => ("apps", "v1"),
        "batch" => ("batch", "v1"),
        "apiextensions.k8s.io" => ("apiextensions.k8s.io", "v1"),
        _ => ("example.com", "v1"),
    };
    let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    let plural = format!("{}s", gk.kind.to_lowercase());
    Arc::new(ApiResource {
        group: group.into(),
        version: version.into(),
        api_version,
        kind: gk.kind.to_string(),
        plural,
    })
}

/// The desired objects of `yaml`, namespaced ones in `shop`.
fn objects(yaml: &str) -> Vec<Desired> {
    let manifests = parse_file("app.yaml", yaml.as_bytes()).expect("parse").manifests;
    manifests
        .into_iter()
        .map(|m| {
            let namespaced = !matches!(m.gk.kind.as_str(), "Namespace" | "CustomResourceDefinition");
            let object = ObjectRef::new(m.gk.clone(), namespaced.then_some("shop"), &m.name);
            let kind = Resolved { resource: resource(&m.gk), namespaced };
            desired::build(m, object, kind, &defaults()).expect("build")
        })
        .collect()
}

fn object(api_version: &str, kind: &str, name: &str) -> String {
    format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n---\n")
}

/// Members live as `desired` has them (unchanged), `changed` with another hash, and `gone`
/// (live members git no longer holds).
fn live(desired: &[Desired], changed: &[&str], gone: &[Desired]) -> BTreeMap<ObjectRef, LiveMeta> {
    let mut live = BTreeMap::new();
    for (i, d) in desired.iter().chain(gone).enumerate() {
        let hash = if changed.contains(&d.object.name.as_str()) { "old".into() } else { d.hash.clone() };
        let meta = LiveMeta {
            uid: format!("uid-{i}"),
            resource_version: "7".into(),
            desired_hash: Some(hash),
            ..Default::default()
        };
        live.insert(d.object.clone(), meta);
    }
    live
}

impl Rehearsal {
    /// A sync of `desired` over the members `live`, its applies answered by `writes`.
    fn new(desired: Vec<Desired>, live: BTreeMap<ObjectRef, LiveMeta>, writes: Recording) -> Self {
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let inventory = Inventory::new(&crate::config::InventoryConfig {
            kind: crate::config::InventoryKind::Secret,
            namespace: "shop".into(),
            name: "gitward-shop".into(),
            record_chunk_bytes: crate::config::InventoryConfig::RECORD_CHUNK_BYTES,
        });
        let cache = MetadataCache::new(client.clone(), &inventory.id);
        Self {
            writes,
            desired,
            waiting: None,
            hooks: None,
            live,
            client,
            cache,
            inventory,
            blocked: Blocked::default(),
            options: ApplyOptions::default(),
            changes: ChangeSet::default(),
        }
    }

    /// The plan of the desired objects against the live members, as the engine's.
    fn plan(&self) -> Plan {
        let p = crate::plan::plan(&self.desired, &self.live, &HashMap::new());
        let waits = self.waiting.is_some() || self.hooks.is_some();
        Plan { todo: p.stages.into_iter().collect(), waits_for_foundations: waits, may_prune: true }
    }

    /// Runs the order, and the writes it made as `kind name`.
    async fn run(mut self) -> (Vec<String>, Ended) {
        let plan = self.plan();
        let ended = super::run(&mut self, plan).await.expect("ran");
        let named = self.writes.writes().iter().map(named).collect();
        (named, ended)
    }
}

fn named(w: &Write) -> String {
    let kind = match w.kind {
        WriteKind::Apply => "apply",
        WriteKind::Prune => "prune",
        WriteKind::Parent => "parent",
        WriteKind::Namespace => "namespace",
        WriteKind::Hook => "hook",
        WriteKind::HookDelete => "hook-delete",
        WriteKind::Event => "event",
        WriteKind::Attestations => "attestations",
    };
    format!("{kind} {}", w.object.name)
}

/// A revision: a Namespace, a CRD and a custom resource of it, a ConfigMap, a Deployment.
fn revision() -> Vec<Desired> {
    objects(
        &[
            object("v1", "Namespace", "shop"),
            object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com"),
            object("apps/v1", "Deployment", "web"),
            object("v1", "ConfigMap", "config"),
        ]
        .concat(),
    )
}

/// Members of an earlier revision that git no longer holds.
fn gone() -> Vec<Desired> {
    objects(&[object("apps/v1", "Deployment", "old-web"), object("v1", "ConfigMap", "old-config")].concat())
}

#[tokio::test]
async fn stages_go_in_order_pre_hooks_before_the_members_and_the_prune_last_in_reverse_stage_order() {
    let desired = revision();
    let live = live(&desired[..1], &[], &gone());
    let mut sync = Rehearsal::new(desired, live, Recording::default());
    sync.waiting = Some(objects(&object("example.com/v1", "Widget", "gadget")));
    sync.hooks = Some((objects(&object("batch/v1", "Job", "migrate")), false));
    let (writes, ended) = sync.run().await;
    let expected = [
        "apply widgets.example.com",
        "apply shop",
        "hook migrate",
        "apply config",
        "apply web",
        "apply gadget",
        "prune old-web",
        "prune old-config",
        "parent gitward-shop",
    ];
    assert_eq!(writes, expected);
    assert!(!ended.yielded && ended.pruned.is_ok());
}

#[tokio::test]
async fn what_git_changed_goes_before_the_unchanged_stages_when_nothing_waits_for_the_foundations() {
    let desired = revision();
    let members = live(&desired, &["config"], &[]);
    let (writes, _) = Rehearsal::new(desired, members, Recording::default()).run().await;
    let expected = ["apply config", "apply shop", "apply widgets.example.com", "apply web"];
    assert_eq!(writes, expected, "the changed ConfigMap first, then the stages, nothing pruned");
    let members = live(&revision(), &["shop"], &[]);
    let (writes, _) = Rehearsal::new(revision(), members, Recording::default()).run().await;
    let expected = ["apply shop", "apply widgets.example.com", "apply config", "apply web"];
    assert_eq!(writes, expected, "a change in the Foundations keeps the stage order");
}

#[tokio::test]
async fn a_failed_object_or_a_failed_pre_hook_prunes_nothing() {
    let desired = revision();
    let live = live(&desired, &[], &gone());
    let config = desired[3].object.clone();
    let (writes, _) = Rehearsal::new(desired.clone(), live.clone(), Recording::failing([config])).run().await;
    assert!(writes.iter().all(|w| !w.starts_with("prune") && !w.starts_with("parent")), "{writes:?}");
    assert_eq!(writes.len(), 4, "every object is still sent: {writes:?}");

    let mut sync = Rehearsal::new(desired, live, Recording::default());
    sync.hooks = Some((objects(&object("batch/v1", "Job", "migrate")), true));
    let (writes, _) = sync.run().await;
    assert_eq!(writes, ["apply shop", "apply widgets.example.com", "hook migrate"], "later stages refused");
}

#[tokio::test]
async fn a_failed_namespace_skips_its_objects_in_later_stages() {
    let desired = revision();
    let shop = desired[0].object.clone();
    let (writes, _) = Rehearsal::new(desired, BTreeMap::new(), Recording::failing([shop])).run().await;
    assert_eq!(writes, ["apply shop", "apply widgets.example.com"]);
}
