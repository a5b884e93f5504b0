//! The early apply: a push's changed objects are sent before the revision is loaded whole.
//!
//! A sync of a new revision reads and resolves every manifest, plans every object against the
//! cache and only then sends the first request; at 10,000 objects that is ~130 ms of work that
//! a one-line push waits for (the target: push → applied p50 < 100 ms). Between the last synced
//! revision and the new one, the git tree diff names the files that changed; their objects that
//! already exist live, as members, with another desired hash, are sent first, from a read of
//! those files alone. The whole sync follows as usual and does not send them again.
//!
//! Only where the shortcut cannot apply something that the whole sync would refuse
//! ("the last good state stays in force"): a plain unit (a render reads whole trees), every
//! changed file read and parsed, no SOPS-encrypted file, every kind already known to discovery,
//! no object named twice among the changed files or still defined by a file that did not
//! change (the whole sync's duplicate error), no invalid `gitward.dev/apply-mode`. Otherwise
//! nothing is sent early.
//!
//! And only in the sync's stage order. Changed CRDs and Namespaces go first, in the Foundations
//! stage with its waits (Established, Active); one that fails keeps its dependents back (the
//! objects in the Namespace, the custom resources of the CRD), as in the whole sync, which
//! then sends it again and reports it. Objects the whole sync sends and the early apply does
//! not — new ones (they need its ownership check), ones not live as members or being deleted,
//! and admission configurations (last in a sync: nothing of the revision may follow them) —
//! hold back every changed object of a later stage: a Deployment is not sent before the new
//! ConfigMap it mounts, nor before a new Namespace. So a Deployment never reaches the API
//! server before its Namespace's new labels (an `istio-injection` or Pod Security label its
//! new pods would miss), nor a custom resource before the CRD field it uses (dropped as
//! unknown by the old schema), nor either of them despite a Namespace or CRD change the API
//! server rejects.

use std::collections::{HashMap, HashSet};

use crate::changeset::ChangeSet;
use crate::cluster::LiveMeta;
use crate::cluster::discovery::Resolved;
use crate::manifest::Manifest;
use crate::object::ObjectRef;
use crate::plan::{Desired, Op, Stage, Step};
use crate::source::Revision;

use super::desired::{self, Defaults};

/// At most this many changed files are read early; a larger diff (a merge, a bulk edit) goes
/// through the whole sync alone, where the parse cache reads each file once.
pub const MAX_FILES: usize = 16;

/// The stages whose objects may be sent early, in order (admission configurations go last in
/// a sync, after everything else of the revision: never early).
pub const STAGES: [Stage; 3] = [Stage::Foundations, Stage::Configuration, Stage::Workloads];

/// The objects to send early, each with its planned step (a `configure`), in stage order; the
/// step's index points into the returned desired objects.
#[derive(Debug, Default)]
pub struct Selection {
    /// Built as the whole sync would build them (same [`Defaults`]).
    pub desired: Vec<Desired>,
    /// Per stage of [`STAGES`], the steps to send.
    pub stages: Vec<(Stage, Vec<Step>)>,
}

/// Chooses what to send early from `changed`, the manifests of the files a push added or
/// modified (in path, then document order). Pure: `known` resolves a kind from discovery's
/// cache, `live` reads a member's cached metadata.
///
/// - `previous`: the desired objects of the last synced revision;
/// - returns `None` when nothing may be sent early because the whole sync could refuse the
///   revision (see the module doc), else the objects that exist live with another desired
///   hash (possibly none), less those of a stage after the first stage of an object that the
///   whole sync sends and this selection does not (new, not a live member, being deleted, or
///   an admission configuration).
pub fn select(
    changed: Vec<Manifest>,
    previous: &[Desired],
    known: impl Fn(&Manifest) -> Option<Resolved>,
    live: impl Fn(&ObjectRef) -> Option<LiveMeta>,
    defaults: &Defaults,
) -> Option<Selection> {
    let files: HashSet<&str> = changed.iter().map(|m| m.file.as_str()).collect();
    let mut resolved = Vec::with_capacity(changed.len());
    let mut refs = HashSet::new();
    for m in &changed {
        let r = known(m)?;
        let namespace = r.namespaced.then(|| m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone()));
        let object = ObjectRef::new(m.gk.clone(), namespace, &m.name);
        if !refs.insert(object.clone()) {
            return None;
        }
        resolved.push((object, r));
    }
    // One pass over the last revision's objects: where each changed object was defined.
    let mut defined_in: HashMap<&ObjectRef, &str> = HashMap::new();
    for d in previous.iter().filter(|d| refs.contains(&d.object)) {
        defined_in.insert(&d.object, d.origin.file.as_str());
    }
    if defined_in.values().any(|file| !files.contains(file)) {
        return None;
    }
    // The changed live members, and the first stage of what the whole sync sends that the early
    // apply does not: nothing of a later stage may go before it.
    let mut candidates = Vec::new();
    let mut held_from: Option<Stage> = None;
    for (m, (object, r)) in changed.into_iter().zip(resolved) {
        let stage = Stage::of(&object.gk);
        let existing = defined_in.contains_key(&object);
        let d = desired::build(m, object, r, defaults).ok()?;
        match live(&d.object).filter(|meta| existing && !meta.deleting) {
            Some(meta) if meta.desired_hash.as_ref() == Some(&d.hash) => {}
            Some(meta) if STAGES.contains(&stage) => candidates.push((stage, d, meta)),
            _ => held_from = Some(held_from.map_or(stage, |held| held.min(stage))),
        }
    }
    let mut selection = Selection::default();
    let mut steps: HashMap<Stage, Vec<Step>> = HashMap::new();
    for (stage, d, meta) in candidates {
        if held_from.is_some_and(|held| stage > held) {
            continue;
        }
        let index = selection.desired.len();
        steps.entry(stage).or_default().push(Step {
            index,
            op: Op::Configure,
            cached_resource_version: Some(meta.resource_version),
        });
        selection.desired.push(d);
    }
    selection.stages = STAGES.iter().filter_map(|s| steps.remove(s).map(|steps| (*s, steps))).collect();
    Some(selection)
}

/// What [`Engine::apply_early`](crate::sync::Engine::apply_early) applied.
#[derive(Debug, Default)]
pub(super) struct Early {
    /// The entries of the objects applied, and the requests of all sent.
    pub(super) changes: ChangeSet,
    /// The objects applied, with the desired hash sent.
    pub(super) sent: HashMap<ObjectRef, crate::object::Atom>,
}

/// A sync begun by [`Engine::early`](crate::sync::Engine::early): its revision and what went early, for
/// [`Engine::sync_rest`](crate::sync::Engine::sync_rest) to finish.
#[derive(Debug)]
pub struct EarlyApply {
    pub(super) early: Early,
    pub(super) revision: Revision,
    /// When the sync began.
    pub(super) started: std::time::Instant,
    /// How long the early apply took.
    pub(super) early_at: std::time::Duration,
}

impl EarlyApply {
    /// The entries of the objects that went early (for the log of a sync that never got to
    /// [`Engine::sync_rest`](crate::sync::Engine::sync_rest)).
    pub fn changes(&self) -> &ChangeSet {
        &self.early.changes
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::discovery::ApiResource;

    use super::*;
    use crate::manifest::parse_file;
    use crate::sync::desired::tests::defaults;

    fn resolved(m: &Manifest) -> Option<Resolved> {
        let (group, version) = m.api_version.rsplit_once('/').unwrap_or(("", &m.api_version));
        let plural = format!("{}s", m.gk.kind.to_lowercase());
        let resource = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: m.api_version.to_string(),
            kind: m.gk.kind.to_string(),
            plural,
        };
        (m.gk.kind != "Widget").then(|| Resolved {
            resource: Arc::new(resource),
            namespaced: !matches!(m.gk.kind.as_str(), "Namespace" | "ValidatingAdmissionPolicy"),
        })
    }

    fn manifests(file: &str, yaml: &str) -> Vec<Manifest> {
        parse_file(file, yaml.as_bytes()).expect("parse").manifests
    }

    fn config_map(name: &str, value: &str) -> String {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: {value}\n---\n")
    }

    fn deployment(image: &str) -> String {
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  image: {image}\n---\n")
    }

    /// The last revision's objects: `a.yaml` holds `a`, `b.yaml` holds `b` and a Namespace,
    /// `web.yaml` a Deployment.
    fn previous() -> Vec<Desired> {
        let mut all = manifests("a.yaml", &config_map("a", "1"));
        all.extend(manifests(
            "b.yaml",
            &(config_map("b", "1") + "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n"),
        ));
        all.extend(manifests("web.yaml", &deployment("v1")));
        all.into_iter()
            .map(|m| {
                let r = resolved(&m).expect("known");
                let ns = r.namespaced.then(|| "shop".to_string());
                let object = ObjectRef::new(m.gk.clone(), ns, &m.name);
                desired::build(m, object, r, &defaults()).expect("build")
            })
            .collect()
    }

    /// Every previous object is live with its previous hash.
    fn live(previous: &[Desired]) -> impl Fn(&ObjectRef) -> Option<LiveMeta> + '_ {
        |object| {
            previous.iter().find(|d| &d.object == object).map(|d| LiveMeta {
                resource_version: "7".into(),
                desired_hash: Some(d.hash.clone()),
                ..LiveMeta::default()
            })
        }
    }

    fn names(selection: &Selection) -> Vec<String> {
        selection.desired.iter().map(|d| d.object.to_string()).collect()
    }

    #[test]
    fn a_changed_live_member_is_sent_early_and_an_unchanged_one_is_not() {
        let previous = previous();
        let changed = manifests("a.yaml", &(config_map("a", "2") + &config_map("new", "1")));
        let s = select(changed, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        assert_eq!(names(&s), ["ConfigMap/shop/a"]);
        assert_eq!(s.stages.len(), 1);
        assert_eq!(s.stages[0].0, Stage::Configuration);
        assert_eq!(s.stages[0].1[0].op, Op::Configure);
        assert_eq!(s.stages[0].1[0].cached_resource_version.as_deref(), Some("7"));

        let same = manifests("a.yaml", &config_map("a", "1"));
        let s = select(same, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        assert!(s.desired.is_empty());
    }

    #[test]
    fn what_the_whole_sync_could_refuse_sends_nothing_early() {
        let previous = previous();
        // `b` is still defined by b.yaml, which did not change: a duplicate.
        let dup = manifests("a.yaml", &(config_map("a", "2") + &config_map("b", "2")));
        assert!(select(dup, &previous, resolved, live(&previous), &defaults()).is_none());
        // Named twice among the changed files.
        let mut twice = manifests("a.yaml", &config_map("a", "2"));
        twice.extend(manifests("c.yaml", &config_map("a", "3")));
        assert!(select(twice, &previous, resolved, live(&previous), &defaults()).is_none());
        // A kind discovery does not know (yet).
        let unknown = manifests(
            "a.yaml",
            &(config_map("a", "2") + "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"),
        );
        assert!(select(unknown, &previous, resolved, live(&previous), &defaults()).is_none());
        // An invalid apply-mode annotation.
        let invalid = manifests(
            "a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    gitward.dev/apply-mode: merge\ndata:\n  k: '2'\n",
        );
        assert!(select(invalid, &previous, resolved, live(&previous), &defaults()).is_none());
    }

    /// The stage of each selected object, by name.
    fn staged(selection: &Selection) -> Vec<(Stage, String)> {
        let mut staged = Vec::new();
        for (stage, steps) in &selection.stages {
            staged.extend(steps.iter().map(|s| (*stage, selection.desired[s.index].object.to_string())));
        }
        staged
    }

    #[test]
    fn a_changed_namespace_goes_first_and_its_contents_after_it() {
        let previous = previous();
        let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
        // The Namespace as it was: only its ConfigMap goes early.
        let same = manifests("b.yaml", &(config_map("b", "2") + namespace));
        let s = select(same, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        assert_eq!(staged(&s), [(Stage::Configuration, "ConfigMap/shop/b".to_string())]);
        // A new label on it: the Namespace goes first, in the Foundations stage.
        let mut labelled = manifests("b.yaml", &(config_map("b", "2") + namespace + "  labels:\n    a: b\n"));
        labelled.extend(manifests("web.yaml", &deployment("v2")));
        let s = select(labelled, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        let expected = [
            (Stage::Foundations, "Namespace/shop"),
            (Stage::Configuration, "ConfigMap/shop/b"),
            (Stage::Workloads, "Deployment/shop/web"),
        ];
        assert_eq!(staged(&s), expected.map(|(stage, name)| (stage, name.to_string())));
    }

    #[test]
    fn what_the_whole_sync_sends_first_holds_back_every_later_stage() {
        let previous = previous();
        let new_namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n";
        // A new Namespace (created by the whole sync, after its ownership check): nothing of a
        // later stage goes before it.
        let mut changed = manifests("a.yaml", &config_map("a", "2"));
        changed.extend(manifests("c.yaml", new_namespace));
        changed.extend(manifests("web.yaml", &deployment("v2")));
        let s = select(changed, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        assert!(s.desired.is_empty(), "{:?}", staged(&s));
        // A Namespace not live as a member (deleted by hand): the same.
        let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
        let same = manifests("b.yaml", &(config_map("b", "2") + namespace));
        let without_namespace = |o: &ObjectRef| (o.gk.kind != "Namespace").then(|| live(&previous)(o)).flatten();
        let s = select(same, &previous, resolved, without_namespace, &defaults()).expect("allowed");
        assert!(s.desired.is_empty(), "{:?}", staged(&s));
        // A new ConfigMap: the changed ConfigMap beside it goes, the Deployment (which may
        // mount it) waits.
        let mut changed = manifests("a.yaml", &(config_map("a", "2") + &config_map("new", "1")));
        changed.extend(manifests("web.yaml", &deployment("v2")));
        let s = select(changed, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        assert_eq!(staged(&s), [(Stage::Configuration, "ConfigMap/shop/a".to_string())]);
        // An admission configuration goes last, in the whole sync; what precedes it goes early.
        let policy =
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: p\n";
        let mut changed = manifests("web.yaml", &deployment("v2"));
        changed.extend(manifests("p.yaml", policy));
        let s = select(changed, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        assert_eq!(staged(&s), [(Stage::Workloads, "Deployment/shop/web".to_string())]);
    }

    #[test]
    fn objects_not_live_wait_for_the_whole_sync() {
        let previous = previous();
        let changed = manifests("a.yaml", &config_map("a", "2"));
        let s = select(changed, &previous, resolved, |_| None, &defaults()).expect("allowed");
        assert!(s.desired.is_empty());
    }
}
