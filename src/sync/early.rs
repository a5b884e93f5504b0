//! The early apply: a push's changed objects are sent before the revision is loaded whole.
//!
//! A sync of a new revision reads and resolves every manifest, plans every object against the
//! cache and only then sends the first request; at 10,000 objects that is ~130 ms of work that
//! a one-line push waits for (issue 9: push → applied p50 < 100 ms). Between the last synced
//! revision and the new one, the git tree diff names the files that changed; their objects that
//! already exist live, as members, with another desired hash, are sent first, from a read of
//! those files alone. The whole sync follows as usual and does not send them again.
//!
//! Only where the shortcut cannot apply something that the whole sync would refuse
//! ("the last good state stays in force"): a plain unit (a render reads whole trees), every
//! changed file read and parsed, no SOPS-encrypted file, every kind already known to discovery,
//! no object named twice among the changed files or still defined by a file that did not
//! change (the whole sync's duplicate error), no invalid `gitward.dev/apply-mode`, and no new
//! or changed object of the Foundations (CRDs, Namespaces) or Admission stages among the
//! changed files. Otherwise nothing is sent early. The last rule keeps the sync's stage order:
//! a Deployment sent early would reach the API server before its Namespace's new labels (an
//! `istio-injection` or Pod Security label its new pods miss), a custom resource before the
//! CRD field it uses (the server drops the unknown field, and the whole sync, finding the hash
//! sent, would not send it again), and either of them even when the API server then rejects
//! the Namespace or CRD change the whole sync would have skipped them for. Objects that are
//! new wait for the whole sync too: they need its ownership check.

use std::collections::{HashMap, HashSet};

use crate::apply::{self, Blocked};
use crate::changeset::ChangeSet;
use crate::cluster::LiveMeta;
use crate::cluster::discovery::Resolved;
use crate::manifest::Manifest;
use crate::object::ObjectRef;
use crate::plan::{Desired, Op, Stage, Step};
use crate::source::Revision;

use super::Engine;
use super::desired::{self, Defaults};

/// At most this many changed files are read early; a larger diff (a merge, a bulk edit) goes
/// through the whole sync alone, where the parse cache reads each file once.
pub const MAX_FILES: usize = 16;

/// The stages whose objects may be sent early, in order.
pub const STAGES: [Stage; 2] = [Stage::Configuration, Stage::Workloads];

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
///   revision or must apply a new or changed Foundations or Admission object first (see the
///   module doc), else the objects that exist live with another desired hash (possibly none).
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
    let mut selection = Selection::default();
    let mut steps: HashMap<Stage, Vec<Step>> = HashMap::new();
    for (m, (object, r)) in changed.into_iter().zip(resolved) {
        let stage = Stage::of(&object.gk);
        let existing = defined_in.contains_key(&object);
        let d = desired::build(m, object, r.resource, r.namespaced, defaults).ok()?;
        if !STAGES.contains(&stage) && changes_live(&d, &live) {
            // A new or changed CRD, Namespace or admission object: what is sent early would
            // reach the API server before it (a Deployment before its Namespace's new
            // labels, a custom resource before its CRD's new field) or despite its rejection.
            return None;
        }
        let Some(meta) = live(&d.object).filter(|_| existing && STAGES.contains(&stage)) else { continue };
        if meta.deleting || meta.desired_hash.as_ref() == Some(&d.hash) {
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

/// Whether applying `d` would change the cluster: it is not a live member (new, or not yet
/// labelled), is being deleted, or its live desired hash differs from the one `d` carries.
fn changes_live(d: &Desired, live: &impl Fn(&ObjectRef) -> Option<LiveMeta>) -> bool {
    live(&d.object).is_none_or(|meta| meta.deleting || meta.desired_hash.as_ref() != Some(&d.hash))
}

/// What [`Engine::apply_early`] applied.
#[derive(Debug, Default)]
pub(super) struct Early {
    /// The entries of the objects applied, and the requests of all sent.
    pub(super) changes: ChangeSet,
    /// The objects applied, with the desired hash sent.
    pub(super) sent: HashMap<ObjectRef, crate::object::Atom>,
}

impl Engine {
    /// Sends a push's changed objects before the revision is loaded whole (see the module doc): the
    /// objects of the files changed since the last synced revision that exist live, as members,
    /// with another desired hash. What was applied (created, configured or drift-corrected) is
    /// returned with its hash, for the whole sync to leave out; a failed request is not: the
    /// whole sync sends it again and reports it. Nothing is sent before the first sync, for a
    /// revision already synced, or where [`early::select`] says no.
    pub(super) async fn apply_early(&mut self, revision: &Revision, defaults: &Defaults) -> Early {
        let Some((from, previous)) = self.last_desired.as_ref() else { return Early::default() };
        if from == revision {
            return Early::default();
        }
        let Some(changed) = self.repo.changed_manifests(from, revision, MAX_FILES).await else {
            return Early::default();
        };
        let discovery = &self.discovery;
        let known = |m: &crate::manifest::Manifest| discovery.known(&m.api_version, &m.gk.kind);
        let Some(selection) = select(changed, previous, known, |o| self.cache.get(o), defaults) else {
            tracing::debug!(unit = %self.unit.name, %revision, "no early apply: the whole sync decides");
            return Early::default();
        };
        let mut early = Early::default();
        let mut blocked = Blocked::default();
        for (stage, steps) in &selection.stages {
            let applied = apply::apply_stage(
                &self.writer,
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

    /// The last revision's objects: `a.yaml` holds `a`, `b.yaml` holds `b` and a Namespace.
    fn previous() -> Vec<Desired> {
        let mut all = manifests("a.yaml", &config_map("a", "1"));
        all.extend(manifests(
            "b.yaml",
            &(config_map("b", "1") + "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n"),
        ));
        all.into_iter()
            .map(|m| {
                let r = resolved(&m).expect("known");
                let ns = r.namespaced.then(|| "shop".to_string());
                let object = ObjectRef::new(m.gk.clone(), ns, &m.name);
                desired::build(m, object, r.resource, r.namespaced, &defaults()).expect("build")
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

    #[test]
    fn a_new_or_changed_foundation_sends_nothing_early() {
        let previous = previous();
        let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
        // The Namespace as it was: its ConfigMap goes early.
        let same = manifests("b.yaml", &(config_map("b", "2") + namespace));
        let s = select(same, &previous, resolved, live(&previous), &defaults()).expect("allowed");
        assert_eq!(names(&s), ["ConfigMap/shop/b"]);
        // A new label on it: nothing goes early, the whole sync applies it first.
        let labelled = manifests("b.yaml", &(config_map("b", "2") + namespace + "  labels:\n    a: b\n"));
        assert!(select(labelled, &previous, resolved, live(&previous), &defaults()).is_none());
        // A new Namespace in another changed file, or one not live: the same.
        let mut new = manifests("a.yaml", &config_map("a", "2"));
        new.extend(manifests("c.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n"));
        assert!(select(new, &previous, resolved, live(&previous), &defaults()).is_none());
        let same = manifests("b.yaml", &(config_map("b", "2") + namespace));
        assert!(select(same, &previous, resolved, |_| None, &defaults()).is_none());
        // An admission object, changed: the same.
        let policy =
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: p\n";
        let mut admission = manifests("a.yaml", &config_map("a", "2"));
        admission.extend(manifests("p.yaml", policy));
        assert!(select(admission, &previous, resolved, live(&previous), &defaults()).is_none());
    }

    #[test]
    fn objects_not_live_wait_for_the_whole_sync() {
        let previous = previous();
        let changed = manifests("a.yaml", &config_map("a", "2"));
        let s = select(changed, &previous, resolved, |_| None, &defaults()).expect("allowed");
        assert!(s.desired.is_empty());
    }
}
