//! `update` mode: hash-gated Get-Modify-Update with optimistic locking (DESIGN.md decision 5).
//!
//! - `create` — `POST`. If the object exists already, it is read and adopted with a
//!   `configure` unless it carries another ApplySet's label or a controller ownerReference.
//! - `configure` (the desired hash differs) — `GET` the object, merge the top-level fields the
//!   manifest declares (everything but `apiVersion`, `kind`, `metadata`, `status`) by JSON merge
//!   patch (RFC 7396: maps merge, lists replace), merge labels and annotations (the manifest's
//!   win, others' stay), keep status and every field the manifest does not declare, and `PUT`
//!   with the resourceVersion just read. An immutable-field rejection re-creates the object
//!   (when enabled) with a uid precondition on the delete; a PersistentVolumeClaim never.
//! - `unchanged` — still exactly one request (DESIGN.md decision 3): a patch of gitward's
//!   `part-of` label and desired-hash annotation carrying `metadata.resourceVersion` = the one
//!   the cache holds when the request is sent (the plan's, should the cache's entry no longer
//!   carry the desired hash), so admission webhooks see every sync and a change the cache has
//!   not seen yet is detected. Built-in kinds get a strategic merge patch, their native patch
//!   type; custom resources a JSON merge patch (RFC 7396), since CRDs do not support strategic
//!   merge patch (415). On these two maps both patch types mean the same.
//!
//! A 409 Conflict (compared by code, not `reason`: DESIGN.md, Libraries), or a 404 for an
//! object the cache still held, means gitward acted on stale data. One metadata-only read then
//! tells a status write from a change: when the object's `metadata.generation` is the one
//! gitward expected (the cache's for a patch, its own read's for a `PUT`) and gitward's
//! `part-of` label and desired-hash annotation are as they were, only status (or metadata
//! gitward does not own) moved — a controller's routine write — and the request is sent again
//! with the fresh resourceVersion, at most [`STATUS_RESENDS`] times, each after such a read.
//! Otherwise (the spec changed, gitward's metadata was edited, the kind has no `generation` so
//! a change cannot be told from a status write, or the last request meets 409 too) the object becomes `conflict` (both resourceVersions in the
//! message) and the sync goes on with the others; it does not prune, and the daemon retries the
//! unit with exponential backoff. Never a loop: retrying a real change at once would blindly
//! overwrite what another actor just decided; the next attempt plans again on fresh state
//! (Kubernetes API conventions, concurrency control; reference 003, "don't retry on
//! conflict").
//!
//! Drift in this mode: a change the cache had already seen is not reverted by an `unchanged`
//! object's patch (it touches only gitward's metadata); a change it had not seen yet is a
//! `conflict`. A map key or field removed from git stays (a merge cannot tell it from one
//! another actor set); server-side apply mode removes any field git stops declaring.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Map, Value, json};

use super::server_side::{api_for, delete_and_wait, immutable_message, is_immutable_rejection, may_recreate};
use super::{ApplyOptions, Written};
use crate::changeset::{Action, Request};
use crate::cluster::LiveMeta;
use crate::cluster::inventory::{DESIRED_HASH, PART_OF};
use crate::cluster::live_meta;
use crate::cluster::{api_message, is_status};
use crate::plan::{Desired, Op};

/// API groups of the kinds the apiserver itself serves (Kubernetes 1.35), which accept
/// strategic merge patch. Custom resources (and Gateway API's `gateway.networking.k8s.io`,
/// which are CRDs) are not among them.
const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// Writes `d` as planned by `step`, in `update` mode. `cached`: the cache's entry of the object
/// when the request is sent ([`super::apply_one`]).
pub async fn apply_one(w: super::Write<'_>) -> Written {
    let super::Write { client, d, step, cached, opts } = w;
    let api = api_for(client, d);
    let w = Writer { api: &api, d, opts, sent: Vec::new() };
    match step.op {
        Op::Create => w.create().await,
        Op::Configure => w.configure(Action::Configured, None).await,
        Op::Unchanged => {
            // The cache's entry, unless it no longer carries the hash the plan saw: then the
            // plan's resourceVersion, so that the change behind it is a conflict.
            let fresh = cached.filter(|m| m.desired_hash.as_ref() == Some(&d.hash));
            let (rv, generation) = match fresh {
                Some(m) => (Some(m.resource_version), m.generation),
                None => (step.cached_resource_version.clone(), None),
            };
            w.touch(rv, generation).await
        }
    }
}

/// gitward's own metadata on a live object: its `part-of` label, its desired-hash annotation and
/// `metadata.generation`. Equal before and after a write by someone else, that write changed
/// neither the spec nor what gitward set: a status write (or others' labels).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mark {
    generation: Option<i64>,
    part_of: Option<String>,
    hash: Option<String>,
}

impl Mark {
    fn of(meta: &kube::core::ObjectMeta) -> Self {
        let label = meta.labels.as_ref().and_then(|l| l.get(PART_OF)).cloned();
        let hash = meta.annotations.as_ref().and_then(|a| a.get(DESIRED_HASH)).cloned();
        Self { generation: meta.generation, part_of: label, hash }
    }

    /// True when a write that moved the resourceVersion from this mark to `now` was a status
    /// write: the kind has a generation and neither it nor gitward's label and hash moved.
    /// Kinds without `generation` (ConfigMap, Secret) never: any write may be a change.
    fn only_status_moved(&self, now: &Mark) -> bool {
        self.generation.is_some() && self == now
    }
}

/// The metadata patch type for `d`: strategic merge patch for built-in kinds, JSON merge patch
/// for everything else.
pub fn metadata_patch_type(d: &Desired) -> Request {
    if BUILT_IN_GROUPS.contains(&d.object.gk.group.as_str()) {
        Request::StrategicMergePatch
    } else {
        Request::MergePatch
    }
}

/// The live object with the manifest's declared fields put in: each top-level field other than
/// `apiVersion`, `kind`, `metadata` and `status` merged by JSON merge patch (RFC 7396, the
/// json-patch crate's `merge`): maps merge key by key, so fields others set inside them (a bound
/// PVC's `spec.volumeName`, a Job's generated selector) stay; lists and scalars are replaced;
/// labels and annotations merged (the manifest's win); `finalizers` and `ownerReferences`
/// replaced when declared; everything else, including the resourceVersion read, kept. Pure.
pub fn modify(mut live: Value, desired: &Value) -> Value {
    let (Some(target), Some(source)) = (live.as_object_mut(), desired.as_object()) else { return live };
    for (key, value) in source {
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => merge_metadata(object_at(target, "metadata"), value),
            _ => match target.get_mut(key) {
                Some(current) if current.is_object() && value.is_object() => json_patch::merge(current, value),
                _ => {
                    target.insert(key.clone(), value.clone());
                }
            },
        }
    }
    live
}

/// [`modify`] with the `[[sync.ignore]]` rules that select `d` in force: the fields the
/// ignored managers own in `live` (its `managedFields`; `own` is gitward's field manager) taken
/// out of the manifest too, then the live value put back at each ignored path and each such
/// field ([`crate::plan::ignore::keep_live`]), so a list the manifest replaces whole keeps the
/// field another writer owns in its elements. Pure.
fn modify_keeping(live: Value, entries: &[ManagedFieldsEntry], d: &Desired, own: &str) -> Value {
    let Some(ignored) = &d.ignored else { return modify(live, &d.body().to_value()) };
    let desired = d.body_given(entries, own, None).to_value();
    let mut kept = ignored.paths.clone();
    kept.extend(ignored.owned(entries, own, &live));
    let mut merged = modify(live.clone(), &desired);
    crate::plan::ignore::keep_live(&mut merged, &live, &kept);
    merged
}

/// How many times a write that met a 409 for a status write is sent again, each time after a
/// read that shows only status moved (see the module doc). One was not enough: a controller
/// that keeps writing status (20 Deployments, each written every ~100–300 ms) met both the
/// first `PUT` and the second on a loaded 2-core machine (2 of 20 objects in one of 15 syncs).
const STATUS_RESENDS: usize = 3;

/// The note of a `create` that found the object existing; also tells [`Writer::configure`] to
/// check ownership before adopting it.
const ADOPTED: &str = "existed already: adopted";

/// Why an object that a `POST` found existing must not be adopted, if so: it carries another
/// ApplySet's `part-of` label (taken since the plan's check) that is not `adoptable` (ids the
/// unit's `adopt_from` names), or a controller ownerReference (a controller's child). Pure.
fn not_adoptable(
    meta: &kube::core::ObjectMeta,
    d: &Desired,
    adoptable: &std::collections::BTreeSet<String>,
) -> Option<String> {
    let theirs = meta.labels.as_ref().and_then(|l| l.get(PART_OF)).map(String::as_str);
    if let Some(theirs) = theirs
        && theirs != &*d.part_of
        && !adoptable.contains(theirs)
    {
        return Some(format!("belongs to another ApplySet ({theirs})"));
    }
    if meta.owner_references.iter().flatten().any(|o| o.controller == Some(true)) {
        return Some("has a controller ownerReference".into());
    }
    None
}

fn merge_metadata(target: &mut Map<String, Value>, desired: &Value) {
    for key in ["labels", "annotations"] {
        if let Some(map) = desired.get(key).and_then(Value::as_object) {
            let into = object_at(target, key);
            into.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    for key in ["finalizers", "ownerReferences"] {
        if let Some(value) = desired.get(key) {
            target.insert(key.into(), value.clone());
        }
    }
}

fn object_at<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = parent.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("just made an object")
}

/// One object's requests: the API, the desired object, and the requests sent so far.
struct Writer<'a> {
    api: &'a Api<DynamicObject>,
    d: &'a Desired,
    opts: &'a ApplyOptions,
    sent: Vec<Request>,
}

impl Writer<'_> {
    fn done(self, action: Action, message: Option<String>, live: Option<LiveMeta>) -> Written {
        Written { object: self.d.object.clone(), action, message, live, sent: self.sent }
    }

    fn failed(self, step: &str, err: &kube::Error) -> Written {
        let message = format!("{}: {step}: {}", self.d.origin, api_message(err));
        self.done(Action::Failed, Some(message), None)
    }

    fn invalid(self, err: &serde_json::Error) -> Written {
        let message = format!("{}: not a valid object: {err}", self.d.origin);
        self.done(Action::Failed, Some(message), None)
    }

    fn post_params(&self) -> PostParams {
        PostParams { field_manager: Some(self.opts.field_manager.clone()), ..Default::default() }
    }

    fn body(&self) -> Result<DynamicObject, serde_json::Error> {
        serde_json::from_str(self.d.body().as_str())
    }

    /// `POST`; a 409 here is AlreadyExists: an unlabelled object of that name, adopted.
    async fn create(mut self) -> Written {
        let body = match self.body() {
            Ok(b) => b,
            Err(e) => return self.invalid(&e),
        };
        self.sent.push(Request::Create);
        match self.api.create(&self.post_params(), &body).await {
            Ok(created) => self.done(Action::Created, None, Some(live_meta(&created.metadata))),
            Err(e) if is_status(&e, 409) => self.configure(Action::Adopted, Some(ADOPTED.into())).await,
            Err(e) => self.failed("create", &e),
        }
    }

    /// `GET`, [`modify`], `PUT` with the resourceVersion read; on a 409 for a status write
    /// (see the module doc), again from a fresh `GET`.
    async fn configure(mut self, action: Action, note: Option<String>) -> Written {
        let name = self.d.object.name.clone();
        // The last read's mark and resourceVersion, once its `PUT` met a 409.
        let mut previous: Option<(Mark, Option<String>)> = None;
        loop {
            self.sent.push(Request::Get);
            let live = match self.api.get(&name).await {
                Ok(live) => live,
                Err(e) if is_status(&e, 404) => {
                    return self.stale(None, "the object was deleted since the cache saw it").await;
                }
                Err(e) => return self.failed("read", &e),
            };
            if note.as_deref() == Some(ADOPTED)
                && let Some(reason) = not_adoptable(&live.metadata, self.d, &self.opts.adoptable)
            {
                let message = format!("{}: exists already and {reason}: not adopted", self.d.origin);
                return self.done(Action::Failed, Some(message), None);
            }
            let mark = Mark::of(&live.metadata);
            let read_version = live.metadata.resource_version.clone();
            if let Some((before, version)) = previous.take()
                && !before.only_status_moved(&mark)
            {
                let why = "the object changed between gitward's read and its write";
                return self.conflict(version, Some(live_meta(&live.metadata)), why);
            }
            let read_uid = live.metadata.uid.clone();
            let entries = live.metadata.managed_fields.as_deref().unwrap_or_default();
            let modified = serde_json::to_value(&live)
                .map(|v| modify_keeping(v, entries, self.d, &self.opts.field_manager))
                .and_then(serde_json::from_value);
            let modified: DynamicObject = match modified {
                Ok(m) => m,
                Err(e) => return self.invalid(&e),
            };
            self.sent.push(Request::Update);
            match self.api.replace(&name, &self.post_params(), &modified).await {
                Ok(replaced) => return self.done(action, note, Some(live_meta(&replaced.metadata))),
                Err(e) if is_status(&e, 409) && mark.generation.is_some() && !self.retried() => {
                    previous = Some((mark, read_version));
                }
                Err(e) if is_status(&e, 409) => {
                    let why = "the object changed between gitward's read and its write";
                    return self.stale(read_version, why).await;
                }
                Err(e) if is_immutable_rejection(&e) && may_recreate(self.d) => return self.recreate(read_uid).await,
                Err(e) if is_immutable_rejection(&e) => {
                    let message = immutable_message(self.d, &e);
                    return self.done(Action::Failed, Some(message), None);
                }
                Err(e) => return self.failed("update", &e),
            }
        }
    }

    /// True once the write was sent again [`STATUS_RESENDS`] times after a 409.
    fn retried(&self) -> bool {
        let writes = self
            .sent
            .iter()
            .filter(|r| matches!(r, Request::Update | Request::StrategicMergePatch | Request::MergePatch))
            .count();
        writes > STATUS_RESENDS
    }

    /// One metadata patch with `precondition` (the cache's resourceVersion when sent) as
    /// precondition; on a 409 for a status write (the generation is still `generation`, see
    /// the module doc), again with the fresh resourceVersion.
    async fn touch(mut self, precondition: Option<String>, generation: Option<i64>) -> Written {
        let expected =
            Mark { generation, part_of: Some(self.d.part_of.to_string()), hash: Some(self.d.hash.to_string()) };
        let mut precondition = precondition;
        loop {
            let mut metadata = json!({
                "labels": {PART_OF: &*self.d.part_of},
                "annotations": {DESIRED_HASH: self.d.hash},
            });
            if let Some(rv) = &precondition {
                metadata["resourceVersion"] = json!(rv);
            }
            let body = json!({ "metadata": metadata });
            let kind = metadata_patch_type(self.d);
            let patch = match kind {
                Request::StrategicMergePatch => Patch::Strategic(&body),
                _ => Patch::Merge(&body),
            };
            let params = PatchParams { field_manager: Some(self.opts.field_manager.clone()), ..Default::default() };
            self.sent.push(kind);
            match self.api.patch_metadata(&self.d.object.name, &params, &patch).await {
                Ok(returned) => {
                    let live = live_meta(&returned.metadata);
                    let action = if precondition.as_deref() == Some(live.resource_version.as_str()) {
                        Action::Unchanged
                    } else {
                        Action::DriftCorrected
                    };
                    return self.done(action, None, Some(live));
                }
                Err(e) if is_status(&e, 409) && expected.generation.is_some() && !self.retried() => {
                    self.sent.push(Request::GetMetadata);
                    let read = self.api.get_metadata_opt(&self.d.object.name).await;
                    match read {
                        Ok(Some(live)) if expected.only_status_moved(&Mark::of(&live.metadata)) => {
                            precondition = live.metadata.resource_version.clone();
                        }
                        Ok(live) => {
                            let live = live.map(|o| live_meta(&o.metadata));
                            return self.conflict(precondition, live, "the object changed after the cache last saw it");
                        }
                        Err(e) => return self.failed("read after a conflict", &e),
                    }
                }
                Err(e) if is_status(&e, 409) => {
                    return self.stale(precondition, "the object changed after the cache last saw it").await;
                }
                Err(e) if is_status(&e, 404) => {
                    return self.stale(None, "the object was deleted since the cache saw it").await;
                }
                Err(e) => return self.failed("patch", &e),
            }
        }
    }

    /// The object is `conflict`: one metadata-only read learns the live resourceVersion for
    /// the message and the cache.
    async fn stale(mut self, ours: Option<String>, why: &str) -> Written {
        self.sent.push(Request::GetMetadata);
        let live = self.api.get_metadata_opt(&self.d.object.name).await.ok().flatten().map(|o| live_meta(&o.metadata));
        self.conflict(ours, live, why)
    }

    /// The object is `conflict`, `live` being what a read after the 409 found. Not retried
    /// now (see the module doc).
    fn conflict(self, ours: Option<String>, live: Option<LiveMeta>, why: &str) -> Written {
        let theirs = live.as_ref().map_or("unknown", |l| l.resource_version.as_str());
        let message = format!(
            "{}: conflict: {why} (sent resourceVersion {}, live resourceVersion {theirs}); \
             not retried now: the unit is retried with backoff",
            self.d.origin,
            ours.as_deref().unwrap_or("none"),
        );
        self.done(Action::Conflict, Some(message), live)
    }

    /// Delete (with the uid just read as precondition), wait until gone, `POST` again.
    async fn recreate(mut self, uid: Option<String>) -> Written {
        self.sent.push(Request::Delete);
        if let Err(message) = delete_and_wait(self.api, self.d, uid).await {
            return self.done(Action::Failed, Some(message), None);
        }
        let body = match self.body() {
            Ok(b) => b,
            Err(e) => return self.invalid(&e),
        };
        self.sent.push(Request::Create);
        match self.api.create(&self.post_params(), &body).await {
            Ok(created) => self.done(
                Action::Configured,
                Some("re-created: immutable field changed".into()),
                Some(live_meta(&created.metadata)),
            ),
            Err(e) => self.failed("recreate: create", &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_fields_are_replaced_and_the_rest_is_kept() {
        let live = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "resourceVersion": "7", "labels": {"team": "a", "app": "old"},
                         "annotations": {"theirs": "x"}, "uid": "u"},
            "data": {"old": "1", "kept": "no"},
            "binaryData": {"b": "AA=="},
        });
        let desired = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"app": "new"}, "annotations": {DESIRED_HASH: "h"}},
            "data": {"new": "2"},
        });
        let out = modify(live, &desired);
        assert_eq!(out["data"], json!({"old": "1", "kept": "no", "new": "2"}), "a declared map is merged");
        assert_eq!(out["binaryData"], json!({"b": "AA=="}), "an undeclared field is kept");
        assert_eq!(out["metadata"]["labels"], json!({"team": "a", "app": "new"}));
        assert_eq!(out["metadata"]["annotations"], json!({"theirs": "x", DESIRED_HASH: "h"}));
        assert_eq!(out["metadata"]["resourceVersion"], "7", "the read resourceVersion is the precondition");
        assert_eq!(out["metadata"]["uid"], "u");
    }

    #[test]
    fn fields_others_set_inside_a_declared_map_stay_and_lists_are_replaced() {
        let live = json!({"metadata": {}, "spec": {"volumeName": "pv-1", "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "resources": {"requests": {"storage": "1Gi"}}}});
        let desired =
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}});
        let out = modify(live, &desired);
        assert_eq!(out["spec"]["volumeName"], "pv-1");
        assert_eq!(out["spec"]["accessModes"], json!(["ReadWriteOnce"]));
        assert_eq!(out["spec"]["resources"]["requests"]["storage"], "2Gi");
    }

    #[test]
    fn status_is_never_taken_from_the_manifest() {
        let live = json!({"metadata": {}, "spec": {"a": 1}, "status": {"ready": true}});
        let out = modify(live, &json!({"spec": {"a": 2}, "status": {"ready": false}}));
        assert_eq!(out["status"], json!({"ready": true}));
        assert_eq!(out["spec"], json!({"a": 2}));
    }

    #[test]
    fn only_a_write_that_kept_generation_label_and_hash_is_a_status_write() {
        let mark = |generation: Option<i64>, part_of: &str, hash: &str| Mark {
            generation,
            part_of: Some(part_of.into()),
            hash: Some(hash.into()),
        };
        let before = mark(Some(3), "applyset-x-v1", "h");
        assert!(before.only_status_moved(&mark(Some(3), "applyset-x-v1", "h")));
        assert!(!before.only_status_moved(&mark(Some(4), "applyset-x-v1", "h")), "the spec changed");
        assert!(!before.only_status_moved(&mark(Some(3), "applyset-y-v1", "h")), "the label changed");
        assert!(!before.only_status_moved(&mark(Some(3), "applyset-x-v1", "other")), "the hash changed");
        let no_generation = mark(None, "applyset-x-v1", "h");
        assert!(!no_generation.only_status_moved(&no_generation.clone()), "a ConfigMap's write may be a change");
    }

    #[test]
    fn built_in_kinds_get_strategic_merge_patch_and_custom_resources_merge_patch() {
        let desired = |api_version: &str, kind: &str| {
            let gk = crate::object::GroupKind::from_api_version(api_version, kind);
            Desired {
                object: crate::object::ObjectRef::new(gk, Some("a"), "x"),
                resource: std::sync::Arc::new(kube::discovery::ApiResource::from_gvk(
                    &kube::api::GroupVersionKind::gvk("", "v1", kind),
                )),
                source: json!({}).into(),
                part_of: "applyset-x-v1".into(),
                hash: "".into(),
                origin: crate::manifest::Origin { file: "test.yaml".into(), index: 0 },
                recreate: false,
                mode: crate::config::ApplyMode::Update,
                decrypted: false,
                splice: None,
                ignored: None,
            }
        };
        assert_eq!(metadata_patch_type(&desired("apps/v1", "Deployment")), Request::StrategicMergePatch);
        assert_eq!(metadata_patch_type(&desired("v1", "ConfigMap")), Request::StrategicMergePatch);
        assert_eq!(metadata_patch_type(&desired("example.com/v1", "Widget")), Request::MergePatch);
        assert_eq!(metadata_patch_type(&desired("gateway.networking.k8s.io/v1", "Gateway")), Request::MergePatch);
    }
}
