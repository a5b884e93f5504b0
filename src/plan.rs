//! The plan: a pure function of desired objects and live metadata (DESIGN.md, Data flow).
//!
//! For each desired object: `create` (not among the live members), `configure` (its desired
//! hash differs from the live annotation `gitward.dev/desired-hash`) or `unchanged` (equal);
//! for each live member that git no longer holds: `prune`. Applies are grouped in
//! [`Stage`]s (DESIGN.md decision 7); within a stage, objects git changed come first so a
//! one-line push lands before ten thousand unchanged objects are re-sent. Prunes run in
//! reverse stage order. No I/O here: [`plan`] is unit-tested without a cluster.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kube::discovery::ApiResource;
use serde_json::{Map, Value};

use crate::cluster::LiveMeta;
use crate::cluster::inventory::{DESIRED_HASH, PART_OF};
use crate::config::ApplyMode;
use crate::object::{GroupKind, ObjectRef};

pub mod ignore;
pub mod splice;

/// Apply stages, in order (DESIGN.md decision 7). Prune walks them in reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// CustomResourceDefinitions and Namespaces; the apply waits until CRDs are Established
    /// and Namespaces Active before the next stage.
    Foundations,
    /// `*Class` kinds, RBAC, ServiceAccounts, ConfigMaps, Secrets, Services, quotas: what
    /// workloads refer to.
    Configuration,
    /// Everything else.
    Workloads,
    /// Admission webhook and policy configurations, last, so that they cannot reject the
    /// objects of the same sync that their own backends need.
    Admission,
}

impl Stage {
    /// All stages in apply order.
    pub const ALL: [Stage; 4] = [Stage::Foundations, Stage::Configuration, Stage::Workloads, Stage::Admission];

    /// The stage of a group-kind.
    pub fn of(gk: &GroupKind) -> Stage {
        match (gk.group.as_str(), gk.kind.as_str()) {
            ("apiextensions.k8s.io", "CustomResourceDefinition") | ("", "Namespace") => Stage::Foundations,
            ("admissionregistration.k8s.io", _) => Stage::Admission,
            ("rbac.authorization.k8s.io", _) => Stage::Configuration,
            ("", "ServiceAccount" | "ConfigMap" | "Secret" | "Service" | "LimitRange" | "ResourceQuota") => {
                Stage::Configuration
            }
            (_, kind) if kind.ends_with("Class") => Stage::Configuration,
            _ => Stage::Workloads,
        }
    }
}

/// One desired object, ready to send: namespace defaulted, gitward's labels and annotations
/// set, its resource resolved by discovery.
#[derive(Debug, Clone)]
pub struct Desired {
    /// Its identity; the namespace is set for namespaced kinds.
    pub object: ObjectRef,
    /// The resource to send it to (group, version, plural), from discovery; shared by every
    /// object of the kind.
    pub resource: std::sync::Arc<ApiResource>,
    /// The manifest's body as read from git or rendered, shared with the parse or render cache:
    /// the next sync reuses this object instead of building it again when its manifest comes out
    /// of the cache as this very copy ([`crate::manifest::Body::same`]). What is sent is built
    /// from it on demand ([`Desired::body`]).
    pub source: crate::manifest::Body,
    /// The unit's ApplySet id, set as the `applyset.kubernetes.io/part-of` label of the body
    /// sent; one shared copy per unit.
    pub part_of: std::sync::Arc<str>,
    /// The desired hash (sha256 hex of the canonical JSON as read from git), interned: the
    /// metadata cache holds the same copy as the live annotation of an unchanged member.
    pub hash: crate::object::Atom,
    /// Where it came from: `path/to/file.yaml` and document number, for error messages.
    pub origin: crate::manifest::Origin,
    /// Delete and re-create it when the API server rejects an immutable-field change
    /// (unit setting, or annotation `gitward.dev/recreate: enabled`).
    pub recreate: bool,
    /// How to write it: the unit's `apply_mode`, unless the object's annotation
    /// `gitward.dev/apply-mode` (`update` or `server-side-apply`) says otherwise.
    pub mode: ApplyMode,
    /// Built from SOPS-decrypted content (a decrypted file, or any object of a render that
    /// decrypted something): its values are masked wherever they would be shown
    /// (`gitward diff`), whatever its kind.
    pub decrypted: bool,
    /// Where [`Desired::body`] writes gitward's fields into the source's text, found when the
    /// object was built; `None` when the body needs a parse ([`splice::Splice::find`]).
    pub splice: Option<splice::Splice>,
    /// What the unit's `[[sync.ignore]]` rules that select this object leave to other writers
    /// once it exists: JSON pointers (RFC 6901), checked when the config was read, and field
    /// managers; `None` for an object no rule selects (the usual case: nothing held). A create
    /// sends git's values; an apply to an existing object sends [`Desired::body_given`] (the
    /// live value where gitward owns the field, nothing where another writer does), `update`
    /// mode keeps the live value at both, and `gitward diff` dry-runs what a sync would send
    /// ([`ignore`]).
    pub ignored: Option<std::sync::Arc<ignore::Ignored>>,
}

impl Desired {
    /// The body to send with server-side apply (or `update`), as JSON text: the source with
    /// `metadata.namespace` set (removed for cluster-scoped kinds), gitward's `part-of` label
    /// and its desired-hash annotation.
    ///
    /// Built on each call rather than held: at rest the daemon keeps only the source, which the
    /// parse cache holds anyway. With a [`Desired::splice`]
    /// it is the source's text with those fields written in at offsets found once per build (a
    /// copy, then serde_json's check of the text); without, a parse and a serialization.
    pub fn body(&self) -> crate::manifest::Body {
        if let Some(splice) = &self.splice {
            let text = splice.apply(self.source.as_str(), self.object.namespace.as_deref(), &self.part_of, &self.hash);
            if let Some(body) = crate::manifest::Body::from_text(text) {
                return body;
            }
        }
        self.parsed_body()
    }

    /// [`Desired::body`] by a parse of the source and a serialization.
    pub fn parsed_body(&self) -> crate::manifest::Body {
        let mut body = self.source.to_value();
        let meta = metadata_mut(&mut body);
        match self.object.namespace.as_deref() {
            Some(ns) => meta.insert("namespace".into(), Value::String(ns.to_owned())),
            None => meta.remove("namespace"),
        };
        string_map(meta, "labels").insert(PART_OF.into(), Value::String(self.part_of.to_string()));
        string_map(meta, "annotations").insert(DESIRED_HASH.into(), Value::String(self.hash.to_string()));
        crate::manifest::Body::from_value(&body)
    }
}

/// The `metadata` object of a manifest's JSON value, made an empty object when missing or not
/// an object.
pub(crate) fn metadata_mut(body: &mut Value) -> &mut Map<String, Value> {
    string_map(body.as_object_mut().expect("manifest bodies are objects"), "metadata")
}

/// The object at `parent[key]`, made an empty object when missing or not an object.
fn string_map<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = parent.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("just made an object")
}

/// The operation planned for one desired object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Not among the live members.
    Create,
    /// Live, with a different (or no) desired hash.
    Configure,
    /// Live, with the same desired hash: still sent (DESIGN.md decision 3).
    Unchanged,
}

/// One planned apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Index into the desired objects given to [`plan`].
    pub index: usize,
    /// What git asks for.
    pub op: Op,
    /// The cached resourceVersion, for drift detection on `unchanged` objects.
    pub cached_resource_version: Option<String>,
}

/// Takes out the steps to send before every stage, so a push's change lands before thousands
/// of unchanged objects are re-sent: the changed steps (create or configure) of the first stage
/// that has any, when every stage before it holds only unchanged objects. Those objects exist
/// live as git last had them, so the namespaces and kinds the changed ones need are in place,
/// as they would be after their stages ran. `None` when the first change is in the first stage
/// (its order is kept) or there is no change. The steps taken are removed from `stages`.
pub fn changes_first(stages: &mut BTreeMap<Stage, Vec<Step>>) -> Option<(Stage, Vec<Step>)> {
    let (&stage, _) = stages.iter().find(|(_, steps)| steps.iter().any(|s| s.op != Op::Unchanged))?;
    if stage == Stage::ALL[0] {
        return None;
    }
    let steps = stages.get_mut(&stage)?;
    let (head, rest): (Vec<Step>, Vec<Step>) = steps.drain(..).partition(|s| s.op != Op::Unchanged);
    *steps = rest;
    Some((stage, head))
}

/// One planned delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneStep {
    /// The member to delete.
    pub object: ObjectRef,
    /// Its uid, sent as a precondition so a re-created object of the same name is never hit.
    pub uid: String,
    /// Its stage, for ordering.
    pub stage: Stage,
}

/// Why a labelled object is not a member that may be pruned, or `None` when it is one
/// (ARCHITECTURE.md, Prune rules): membership is the `part-of` label (the cache's selection)
/// **and** no controller ownerReference **and** the annotation `gitward.dev/desired-hash`
/// **and** its ref recorded in the inventory as applied by this unit. Pure.
pub fn not_member(object: &ObjectRef, meta: &LiveMeta, recorded: &BTreeSet<ObjectRef>) -> Option<&'static str> {
    if meta.controlled {
        Some("has a controller ownerReference: a controller's child, not a member")
    } else if meta.desired_hash.is_none() {
        Some("has no gitward.dev/desired-hash annotation: not applied by gitward")
    } else if !recorded.contains(object) {
        Some("not recorded in the inventory as applied by this unit (a copy?)")
    } else {
        None
    }
}

/// The plan for one sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Applies by stage, in stage order; within a stage `create`/`configure` before `unchanged`.
    pub stages: Vec<(Stage, Vec<Step>)>,
    /// Desired objects not to send, with the reason (e.g. owned by another ApplySet).
    pub refused: Vec<(usize, String)>,
}

/// What leaves the cluster with this revision ([`prune_plan`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrunePlan {
    /// Members to delete, in reverse stage order.
    pub steps: Vec<PruneStep>,
    /// Members that git no longer holds but that are kept (annotated `gitward.dev/prune: disabled`).
    pub kept: Vec<ObjectRef>,
    /// Objects that carry this unit's `part-of` label but are not members ([`not_member`]),
    /// with the reason: never deleted.
    pub not_members: Vec<(ObjectRef, String)>,
}

impl Plan {
    /// Number of planned applies.
    pub fn apply_count(&self) -> usize {
        self.stages.iter().map(|(_, s)| s.len()).sum()
    }
}

/// Computes the applies (the prune is [`prune_plan`], after the apply).
///
/// - `desired`: the desired objects of the revision (unique refs; the caller checks).
/// - `live`: live metadata of the unit's members (objects labelled with its ApplySet id).
/// - `refuse`: objects not to send, with the reason — those that carry another ApplySet's
///   `part-of` label are never taken over (DESIGN.md decision 6), nor are objects whose
///   ownership could not be checked.
pub fn plan(desired: &[Desired], live: &BTreeMap<ObjectRef, LiveMeta>, refuse: &HashMap<ObjectRef, String>) -> Plan {
    let mut by_stage: BTreeMap<Stage, (Vec<Step>, Vec<Step>)> = BTreeMap::new();
    let mut refused = Vec::new();
    for (index, d) in desired.iter().enumerate() {
        if let Some(reason) = refuse.get(&d.object) {
            refused.push((index, reason.clone()));
            continue;
        }
        let current = live.get(&d.object);
        let op = match current {
            None => Op::Create,
            Some(m) if m.desired_hash.as_ref() == Some(&d.hash) => Op::Unchanged,
            Some(_) => Op::Configure,
        };
        let step = Step { index, op, cached_resource_version: current.map(|m| m.resource_version.clone()) };
        let (changed, unchanged) = by_stage.entry(Stage::of(&d.object.gk)).or_default();
        if op == Op::Unchanged { unchanged.push(step) } else { changed.push(step) }
    }
    let stages = by_stage
        .into_iter()
        .map(|(stage, (mut changed, unchanged))| {
            changed.extend(unchanged);
            (stage, changed)
        })
        .collect();
    Plan { stages, refused }
}

/// The prune: live members that none of `desired` names, in reverse stage order; those
/// annotated `gitward.dev/prune: disabled` are kept, those already being deleted skipped, and
/// labelled objects that are not members ([`not_member`]; `recorded` is the inventory's
/// record of refs applied by this unit) are left alone. Computed after the apply, over every
/// desired object (custom resources resolved late too).
pub fn prune_plan(
    desired: &[Desired],
    live: &BTreeMap<ObjectRef, LiveMeta>,
    recorded: &BTreeSet<ObjectRef>,
) -> PrunePlan {
    let wanted: HashSet<&ObjectRef> = desired.iter().map(|d| &d.object).collect();
    let mut plan = PrunePlan::default();
    for (object, meta) in live {
        if wanted.contains(object) || meta.deleting {
            continue;
        }
        if let Some(reason) = not_member(object, meta, recorded) {
            plan.not_members.push((object.clone(), reason.to_string()));
        } else if meta.prune_disabled {
            plan.kept.push(object.clone());
        } else {
            let stage = Stage::of(&object.gk);
            plan.steps.push(PruneStep { object: object.clone(), uid: meta.uid.clone(), stage });
        }
    }
    plan.steps.sort_by(|a, b| b.stage.cmp(&a.stage).then_with(|| a.object.cmp(&b.object)));
    plan
}

#[cfg(test)]
impl Desired {
    /// A desired object of `source` for tests: server-side apply, no splice, hash `h`.
    pub(crate) fn of_source(api_version: &str, kind: &str, ns: Option<&str>, name: &str, source: Value) -> Desired {
        let gk = GroupKind::from_api_version(api_version, kind);
        let gvk = kube::api::GroupVersionKind::gvk(&gk.group, "v1", &gk.kind);
        Desired {
            object: ObjectRef::new(gk, ns.map(String::from), name),
            resource: std::sync::Arc::new(ApiResource::from_gvk(&gvk)),
            source: source.into(),
            part_of: "applyset-x-v1".into(),
            hash: "h".into(),
            origin: crate::manifest::Origin { file: "test.yaml".into(), index: 0 },
            recreate: false,
            mode: ApplyMode::ServerSideApply,
            decrypted: false,
            splice: None,
            ignored: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gk(api_version: &str, kind: &str) -> GroupKind {
        GroupKind::from_api_version(api_version, kind)
    }

    fn desired(api_version: &str, kind: &str, ns: Option<&str>, name: &str, hash: &str) -> Desired {
        Desired { hash: hash.into(), ..Desired::of_source(api_version, kind, ns, name, json!({})) }
    }

    fn step(index: usize, op: Op) -> Step {
        Step { index, op, cached_resource_version: None }
    }

    #[test]
    fn a_change_after_unchanged_stages_goes_first_and_one_in_the_first_stage_keeps_the_order() {
        let mut stages = BTreeMap::from([
            (Stage::Foundations, vec![step(0, Op::Unchanged)]),
            (Stage::Configuration, vec![step(1, Op::Unchanged), step(2, Op::Configure), step(3, Op::Create)]),
            (Stage::Workloads, vec![step(4, Op::Configure)]),
        ]);
        let (stage, head) = changes_first(&mut stages).expect("a head");
        assert_eq!(stage, Stage::Configuration);
        assert_eq!(head.iter().map(|s| s.index).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(stages[&Stage::Configuration], vec![step(1, Op::Unchanged)]);
        assert_eq!(stages[&Stage::Workloads], vec![step(4, Op::Configure)], "later stages wait their turn");

        let mut first = BTreeMap::from([
            (Stage::Foundations, vec![step(0, Op::Create)]),
            (Stage::Configuration, vec![step(1, Op::Configure)]),
        ]);
        let before = first.clone();
        assert_eq!(changes_first(&mut first), None);
        assert_eq!(first, before);
        let mut none = BTreeMap::from([(Stage::Configuration, vec![step(1, Op::Unchanged)])]);
        assert_eq!(changes_first(&mut none), None);
    }

    fn live(hash: &str, rv: &str) -> LiveMeta {
        LiveMeta {
            uid: format!("uid-{rv}"),
            resource_version: rv.into(),
            desired_hash: Some(hash.into()),
            ..Default::default()
        }
    }

    #[test]
    fn missing_object_is_created_changed_hash_configured_equal_hash_unchanged() {
        let d = vec![
            desired("v1", "ConfigMap", Some("a"), "new", "h1"),
            desired("v1", "ConfigMap", Some("a"), "changed", "h2"),
            desired("v1", "ConfigMap", Some("a"), "same", "h3"),
        ];
        let l = BTreeMap::from([(d[1].object.clone(), live("old", "5")), (d[2].object.clone(), live("h3", "7"))]);
        let p = plan(&d, &l, &HashMap::new());
        let ops: Vec<_> = p.stages[0].1.iter().map(|s| (s.index, s.op)).collect();
        assert_eq!(ops, vec![(0, Op::Create), (1, Op::Configure), (2, Op::Unchanged)]);
        assert_eq!(p.stages[0].1[2].cached_resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn unchanged_object_is_still_applied() {
        let d = vec![desired("v1", "ConfigMap", Some("a"), "same", "h")];
        let l = BTreeMap::from([(d[0].object.clone(), live("h", "1"))]);
        let p = plan(&d, &l, &HashMap::new());
        assert_eq!(p.apply_count(), 1);
        assert_eq!(p.stages[0].1[0].op, Op::Unchanged);
    }

    #[test]
    fn stages_follow_crds_namespaces_then_config_then_workloads_then_webhooks() {
        let d = vec![
            desired("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", None, "w", "h"),
            desired("apps/v1", "Deployment", Some("a"), "d", "h"),
            desired("v1", "Service", Some("a"), "s", "h"),
            desired("networking.k8s.io/v1", "IngressClass", None, "nginx", "h"),
            desired("v1", "Namespace", None, "a", "h"),
            desired("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "x.example.com", "h"),
            desired("rbac.authorization.k8s.io/v1", "ClusterRole", None, "r", "h"),
        ];
        let p = plan(&d, &BTreeMap::new(), &HashMap::new());
        let order: Vec<(Stage, Vec<usize>)> =
            p.stages.iter().map(|(s, steps)| (*s, steps.iter().map(|x| x.index).collect())).collect();
        assert_eq!(
            order,
            vec![
                (Stage::Foundations, vec![4, 5]),
                (Stage::Configuration, vec![2, 3, 6]),
                (Stage::Workloads, vec![1]),
                (Stage::Admission, vec![0]),
            ]
        );
    }

    #[test]
    fn changed_objects_go_before_unchanged_within_a_stage() {
        let d = vec![
            desired("v1", "ConfigMap", Some("a"), "one", "h"),
            desired("v1", "ConfigMap", Some("a"), "two", "h"),
            desired("v1", "ConfigMap", Some("a"), "three", "new"),
        ];
        let l = BTreeMap::from([
            (d[0].object.clone(), live("h", "1")),
            (d[1].object.clone(), live("h", "2")),
            (d[2].object.clone(), live("old", "3")),
        ]);
        let p = plan(&d, &l, &HashMap::new());
        let idx: Vec<usize> = p.stages[0].1.iter().map(|s| s.index).collect();
        assert_eq!(idx, vec![2, 0, 1]);
    }

    #[test]
    fn members_no_longer_desired_are_pruned_in_reverse_stage_order() {
        let d = vec![desired("v1", "ConfigMap", Some("a"), "keep", "h")];
        let ns = ObjectRef::new(gk("v1", "Namespace"), None::<&str>, "gone");
        let deploy = ObjectRef::new(gk("apps/v1", "Deployment"), Some("gone"), "web");
        let cm = ObjectRef::new(gk("v1", "ConfigMap"), Some("gone"), "conf");
        let l = BTreeMap::from([
            (d[0].object.clone(), live("h", "1")),
            (ns.clone(), live("h", "2")),
            (deploy.clone(), live("h", "3")),
            (cm.clone(), live("h", "4")),
        ]);
        let recorded = l.keys().cloned().collect();
        let p = prune_plan(&d, &l, &recorded);
        let order: Vec<_> = p.steps.iter().map(|s| s.object.clone()).collect();
        assert_eq!(order, vec![deploy, cm, ns]);
        assert_eq!(p.steps[0].uid, "uid-3");
    }

    #[test]
    fn prune_disabled_members_are_kept() {
        let keep = ObjectRef::new(gk("v1", "ConfigMap"), Some("a"), "precious");
        let mut meta = live("h", "1");
        meta.prune_disabled = true;
        let p = prune_plan(&[], &BTreeMap::from([(keep.clone(), meta)]), &BTreeSet::from([keep.clone()]));
        assert!(p.steps.is_empty());
        assert_eq!(p.kept, vec![keep]);
    }

    #[test]
    fn labelled_objects_that_are_not_members_are_never_pruned() {
        let r = |name: &str| ObjectRef::new(gk("v1", "ConfigMap"), Some("a"), name);
        let mut child = live("h", "2");
        child.controlled = true;
        let live = BTreeMap::from([
            (r("member"), live("h", "1")),
            (r("child"), child),
            (r("unhashed"), LiveMeta { uid: "u".into(), ..Default::default() }),
            (r("copy"), live("h", "3")),
        ]);
        let recorded = BTreeSet::from([r("member"), r("child"), r("unhashed")]);
        let p = prune_plan(&[], &live, &recorded);
        let pruned: Vec<_> = p.steps.iter().map(|s| s.object.name.as_str()).collect();
        assert_eq!(pruned, vec!["member"]);
        let left: Vec<_> =
            p.not_members.iter().map(|(o, why)| (o.name.as_str(), why.split(':').next().unwrap())).collect();
        assert_eq!(
            left,
            vec![
                ("child", "has a controller ownerReference"),
                ("copy", "not recorded in the inventory as applied by this unit (a copy?)"),
                ("unhashed", "has no gitward.dev/desired-hash annotation")
            ]
        );
    }

    #[test]
    fn objects_of_another_applyset_are_refused() {
        let d = vec![desired("v1", "ConfigMap", Some("a"), "theirs", "h")];
        let foreign = HashMap::from([(d[0].object.clone(), "belongs to applyset-other-v1".to_string())]);
        let p = plan(&d, &BTreeMap::new(), &foreign);
        assert_eq!(p.apply_count(), 0);
        assert_eq!(p.refused.len(), 1);
        assert!(p.refused[0].1.contains("applyset-other-v1"), "{}", p.refused[0].1);
    }
}
