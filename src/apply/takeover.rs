//! Field-manager takeover: after a server-side apply, gitward makes the fields that other
//! writers of the same configuration own its own, so that a field later removed from git is
//! really removed.
//!
//! Server-side apply (KEP-555) removes a field only when its last owner stops applying it. An
//! object first written by `kubectl apply` without `--server-side` (manager
//! `kubectl-client-side-apply`, plus its `kubectl.kubernetes.io/last-applied-configuration`
//! annotation), by a server older than field management (`before-first-apply`) or by
//! gitward's own `update` mode (manager `gitward`, operation `Update`) keeps those entries
//! after gitward's first apply: every field they set stays owned by them, so removing it from
//! git would leave it behind, orphaned. kubectl solves the same problem for its own upgrade
//! from client-side to server-side apply (client-go `util/csaupgrade`); gitward does the same:
//!
//! 1. [`plan`] (pure) reads the `managedFields` that the apply response carries anyway, and,
//!    when it finds entries of the configured managers (or gitward's own `Update` entry) at the
//!    same apiVersion on the main resource, or the last-applied annotation, builds a JSON patch
//!    (RFC 6902): `test` the resourceVersion the apply returned, `replace` `managedFields` with
//!    those entries' field sets merged into gitward's `Apply` entry and removed, `remove` the
//!    annotation.
//! 2. [`run`] sends it and applies once more, so that what git no longer declares goes in the
//!    same sync. The apiserver accepts a client's `managedFields` when they are non-empty
//!    (fieldmanager `Update`: "to allow directly updating managed fields").
//!
//! Entries of other managers (controllers, hand edits, other appliers) are left alone unless
//! listed in the unit's `takeover_managers`. Entries at another apiVersion are left alone too:
//! their field paths are versioned. A failed `test` (someone wrote after the apply) is a
//! `conflict`: the takeover is redone on fresh state at the next sync.

use json_patch::Patch as JsonPatch;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ObjectMeta;
use serde_json::{Map, Value, json};

use crate::changeset::{Action, Request};
use crate::cluster::LiveMeta;
use crate::cluster::inventory::LAST_APPLIED;
use crate::cluster::live_meta_of;
use crate::cluster::{api_message, is_status};
use crate::manifest::Body;
use crate::plan::Desired;

/// A planned takeover of one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The JSON patch to send (RFC 6902): `test` on `/metadata/resourceVersion`, then the edits.
    pub patch: JsonPatch,
    /// `manager (Operation)` of each entry taken over, for the change-set note.
    pub managers: Vec<String>,
    /// Whether the last-applied annotation is dropped.
    pub drops_last_applied: bool,
    /// The resourceVersion the patch is tested against (the apply's response).
    pub resource_version: String,
}

impl Plan {
    /// The change-set note: `took over fields of kubectl-client-side-apply (Update); dropped …`.
    pub fn note(&self) -> String {
        let mut parts = Vec::new();
        if !self.managers.is_empty() {
            parts.push(format!("took over fields of {}", self.managers.join(", ")));
        }
        if self.drops_last_applied {
            parts.push(format!("dropped annotation {LAST_APPLIED}"));
        }
        parts.join("; ")
    }
}

fn is_main_resource(e: &ManagedFieldsEntry) -> bool {
    e.subresource.as_deref().unwrap_or_default().is_empty()
}

/// The takeover `meta` (an apply response's metadata) calls for, if any.
///
/// - `field_manager`: gitward's manager name; its `Apply` entry receives the fields, its
///   `Update` entry (from `update` mode) is always taken over.
/// - `managers`: other managers to take over, whatever their operation.
/// - `body`: the desired object; when it declares the last-applied annotation itself, the
///   annotation is kept.
///
/// `None` when there is nothing to take over, or gitward has no `Apply` entry to merge into.
pub fn plan(meta: &ObjectMeta, field_manager: &str, managers: &[String], body: &Body) -> Option<Plan> {
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    let ours = entries.iter().position(|e| {
        e.manager.as_deref() == Some(field_manager) && e.operation.as_deref() == Some("Apply") && is_main_resource(e)
    })?;
    let api_version = entries[ours].api_version.clone();
    let mut merged = entries[ours].fields_v1.as_ref().map(|f| f.0.clone()).unwrap_or_else(|| json!({}));
    let mut kept = Vec::with_capacity(entries.len());
    let mut taken = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let manager = e.manager.as_deref().unwrap_or_default();
        let operation = e.operation.as_deref().unwrap_or_default();
        let wanted = (manager == field_manager && operation == "Update")
            || (manager != field_manager && managers.iter().any(|m| m == manager));
        if i != ours && wanted && is_main_resource(e) && e.api_version == api_version {
            if let Some(fields) = &e.fields_v1 {
                union(&mut merged, &fields.0);
            }
            taken.push(format!("{manager} ({operation})"));
        } else {
            kept.push(i);
        }
    }
    let has_last_applied = meta.annotations.as_ref().is_some_and(|a| a.contains_key(LAST_APPLIED));
    // The body is parsed only for an object that carries the annotation (rare after adoption).
    let declared = || body.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED).cloned()).is_some();
    let drops_last_applied = has_last_applied && !declared();
    if taken.is_empty() && !drops_last_applied {
        return None;
    }
    let resource_version = meta.resource_version.clone().unwrap_or_default();
    let mut ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})];
    if !taken.is_empty() {
        if drops_last_applied {
            remove_path(&mut merged, &["f:metadata", "f:annotations", &format!("f:{LAST_APPLIED}")]);
        }
        let fields: Vec<ManagedFieldsEntry> = kept
            .into_iter()
            .map(|i| {
                let mut e = entries[i].clone();
                if i == ours {
                    e.fields_v1 = Some(FieldsV1(merged.clone()));
                }
                e
            })
            .collect();
        ops.push(json!({"op": "replace", "path": "/metadata/managedFields", "value": fields}));
    }
    if drops_last_applied {
        let path = format!("/metadata/annotations/{}", LAST_APPLIED.replace('~', "~0").replace('/', "~1"));
        ops.push(json!({"op": "remove", "path": path}));
    }
    let patch = serde_json::from_value(Value::Array(ops)).expect("a valid JSON patch");
    Some(Plan { patch, managers: taken, drops_last_applied, resource_version })
}

/// Sends `plan`'s JSON patch and applies `d` again with `params`, as `body` (what the first
/// apply sent); appends each request to `sent`. Returns the live metadata of the final apply.
///
/// Errors, as (action, message): [`Action::Conflict`] when the object changed after the apply
/// (409, or the `test` failed: 422), [`Action::Failed`] for any other rejection.
pub async fn run(
    api: &Api<DynamicObject>,
    d: &Desired,
    body: &crate::manifest::Body,
    params: &PatchParams,
    plan: &Plan,
    sent: &mut Vec<Request>,
) -> Result<LiveMeta, (Action, String)> {
    let patch_params = PatchParams { field_manager: params.field_manager.clone(), ..Default::default() };
    sent.push(Request::JsonPatch);
    if let Err(e) = api.patch_metadata(&d.object.name, &patch_params, &Patch::Json::<()>(plan.patch.clone())).await {
        if is_status(&e, 409) || (is_status(&e, 422) && api_message(&e).contains("test")) {
            let message = format!(
                "{}: conflict: the object changed after gitward's apply returned resourceVersion {}; \
                 field takeover not done, retried on the next sync: {}",
                d.origin,
                plan.resource_version,
                api_message(&e)
            );
            return Err((Action::Conflict, message));
        }
        return Err((Action::Failed, format!("{}: field takeover failed: {}", d.origin, api_message(&e))));
    }
    sent.push(Request::Apply);
    api.patch_metadata(&d.object.name, params, &Patch::Apply(body))
        .await
        .map(|o| live_meta_of(&o.metadata, params.field_manager.as_deref().unwrap_or_default()))
        .map_err(|e| (Action::Failed, format!("{}: apply after field takeover failed: {}", d.origin, api_message(&e))))
}

/// Adds every path of the field set `from` to `into` (FieldsV1 is a trie of JSON objects;
/// a leaf is `{}`).
fn union(into: &mut Value, from: &Value) {
    let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) else { return };
    for (key, child) in from {
        union(into.entry(key.clone()).or_insert_with(|| Value::Object(Map::new())), child);
    }
}

/// Removes one path from a field set, and parents it leaves empty (an empty object would
/// otherwise mean ownership of the parent itself).
fn remove_path(set: &mut Value, path: &[&str]) -> bool {
    let Some(map) = set.as_object_mut() else { return false };
    match path {
        [] => false,
        [last] => map.remove(*last).is_some() && map.is_empty(),
        [first, rest @ ..] => {
            let emptied = map.get_mut(*first).is_some_and(|child| remove_path(child, rest));
            if emptied {
                map.remove(*first);
            }
            map.is_empty()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(manager: &str, operation: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            api_version: Some("v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>, last_applied: bool) -> ObjectMeta {
        let annotations = last_applied.then(|| [(LAST_APPLIED.to_string(), "{}".to_string())].into());
        ObjectMeta {
            resource_version: Some("42".into()),
            managed_fields: Some(entries),
            annotations,
            ..Default::default()
        }
    }

    fn managers() -> Vec<String> {
        vec!["kubectl-client-side-apply".into(), "before-first-apply".into()]
    }

    fn ops(plan: &Plan) -> Value {
        serde_json::to_value(&plan.patch).unwrap()
    }

    #[test]
    fn client_side_apply_fields_are_merged_into_gitwards_apply_entry() {
        let csa = json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:annotations": {".": {}, format!("f:{LAST_APPLIED}"): {}}}});
        let ours = json!({"f:data": {"f:a": {}}, "f:metadata": {"f:annotations": {"f:gitward.dev/desired-hash": {}}}});
        let status = entry("kubelet", "Update", json!({"f:status": {}}));
        let m = meta(
            vec![entry("kubectl-client-side-apply", "Update", csa), entry("gitward", "Apply", ours), status],
            true,
        );
        let plan = plan(&m, "gitward", &managers(), &json!({}).into()).expect("a takeover");
        assert_eq!(plan.managers, ["kubectl-client-side-apply (Update)"]);
        let ops = ops(&plan);
        assert_eq!(ops[0], json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"}));
        let fields = &ops[1]["value"];
        assert_eq!(fields.as_array().unwrap().len(), 2, "{fields}");
        assert_eq!(fields[0]["manager"], "gitward");
        assert_eq!(
            fields[0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:annotations": {".": {}, "f:gitward.dev/desired-hash": {}}}})
        );
        assert_eq!(fields[1]["manager"], "kubelet", "other managers are kept");
        assert_eq!(
            ops[2],
            json!({"op": "remove", "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"})
        );
    }

    #[test]
    fn gitwards_own_update_entry_is_taken_over_even_with_an_empty_list() {
        let m = meta(
            vec![
                entry("gitward", "Apply", json!({"f:data": {"f:a": {}}})),
                entry("gitward", "Update", json!({"f:data": {"f:c": {}}})),
            ],
            false,
        );
        let plan = plan(&m, "gitward", &[], &json!({}).into()).expect("a takeover");
        assert_eq!(plan.managers, ["gitward (Update)"]);
        assert!(!plan.drops_last_applied);
        assert_eq!(ops(&plan)[1]["value"][0]["fieldsV1"], json!({"f:data": {"f:a": {}, "f:c": {}}}));
    }

    #[test]
    fn nothing_to_take_over_plans_nothing() {
        let m = meta(
            vec![entry("gitward", "Apply", json!({})), entry("kubectl-edit", "Update", json!({"f:data": {}}))],
            false,
        );
        assert_eq!(plan(&m, "gitward", &managers(), &json!({}).into()), None);
        let without_ours = meta(vec![entry("kubectl-client-side-apply", "Update", json!({}))], true);
        assert_eq!(plan(&without_ours, "gitward", &managers(), &json!({}).into()), None);
    }

    #[test]
    fn entries_of_another_api_version_or_a_subresource_are_left_alone() {
        let mut other_version = entry("kubectl-client-side-apply", "Update", json!({"f:spec": {}}));
        other_version.api_version = Some("v2".into());
        let mut status = entry("kubectl-client-side-apply", "Update", json!({"f:status": {}}));
        status.subresource = Some("status".into());
        let m = meta(vec![entry("gitward", "Apply", json!({})), other_version, status], false);
        assert_eq!(plan(&m, "gitward", &managers(), &json!({}).into()), None);
    }

    #[test]
    fn a_last_applied_annotation_that_git_declares_is_kept() {
        let m = meta(vec![entry("gitward", "Apply", json!({}))], true);
        let body = json!({"metadata": {"annotations": {LAST_APPLIED: "{}"}}});
        assert_eq!(plan(&m, "gitward", &managers(), &body.into()), None);
        let plan = plan(&m, "gitward", &managers(), &json!({}).into()).expect("drops the annotation");
        assert_eq!(ops(&plan).as_array().unwrap().len(), 2, "test + remove, managedFields untouched");
    }
}
