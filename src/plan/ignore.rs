//! Ignore rules applied to one object (`[[sync.ignore]]`, [`crate::config::IgnoreRule`]): what
//! the rules that select it leave to other writers ([`select`], an [`Ignored`]), the body sent
//! for it given its live object ([`crate::plan::Desired::body_given`]), the fields a field
//! manager owns in a live object as JSON pointers ([`owned_by`], from `managedFields`'
//! FieldsV1), and `update` mode's keeping of the live value there ([`keep_live`]). Pure.
//!
//! An ignored field is one git does not decide once the object exists, as Argo CD's
//! `RespectIgnoreDifferences=true` and Flux's `driftDetection.ignore` treat it — never a field
//! dropped from what is sent:
//! - a create sends git's value (a Deployment is created with git's `replicas` and env);
//! - an update sends the live value where gitward's own field manager owns the field live (a
//!   rule added for a field gitward set keeps the value it has, instead of giving it up to the
//!   API server's default), and leaves it out where another writer owns it (server-side apply
//!   then leaves it to that writer, with no conflict and no change to gitward's entry);
//! - the desired hash covers git's value, so adding or removing a rule is not a change.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use json_patch::jsonptr::{Pointer, Token};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::{Map, Value};

use crate::config::IgnoreRule;
use crate::object::ObjectRef;

/// What the rules that select one object leave out of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ignored {
    /// JSON pointers (RFC 6901) from the rules' `paths`, in file order, each once: git's value
    /// is sent when the object is created; once it exists, the live value or nothing
    /// ([`crate::plan::Desired::body_given`]).
    pub paths: Vec<String>,
    /// Field managers from the rules' `managers`: the fields they own in the live object are
    /// taken out of each request body, read from its `managedFields` when it is sent.
    pub managers: Vec<String>,
}

impl Ignored {
    /// The fields the [`Ignored::managers`] own in a live object whose `managedFields` are
    /// `entries`, as JSON pointers into `doc` (the live object itself, or a body to send, whose
    /// list elements sit at other indexes): each field an entry names that `doc` holds. An
    /// entry of `own` (gitward's field manager) is never read, whatever the rules say. Keys of
    /// list elements (`name` of a container) are not taken; an element another manager
    /// co-owns keeps the fields gitward owns in it.
    pub fn owned(&self, entries: &[ManagedFieldsEntry], own: &str, doc: &Value) -> Vec<String> {
        let mut out = Vec::new();
        // Entries of subresources count: an HPA's and `kubectl scale`'s writes of
        // `spec.replicas` go through `/scale` and are recorded as the main resource's fields.
        let theirs = entries
            .iter()
            .filter(|e| e.manager.as_deref().is_some_and(|m| m != own && self.managers.iter().any(|n| n == m)));
        for entry in theirs {
            if let Some(Value::Object(fields)) = entry.fields_v1.as_ref().map(|f| &f.0) {
                walk(fields, doc, &mut String::new(), &[], &mut out);
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

impl crate::plan::Desired {
    /// Whether a request for it reads the live object first: a rule selects it (its `paths`
    /// need the live values and gitward's `managedFields` entry, its `managers` the others').
    pub fn reads_live(&self) -> bool {
        self.ignored.is_some()
    }

    /// Whether that read must be of the whole object, not its metadata: a rule names `paths`,
    /// whose live values may be sent.
    pub fn reads_live_values(&self) -> bool {
        self.ignored.as_ref().is_some_and(|i| !i.paths.is_empty())
    }

    /// The body to send for an object that exists: [`crate::plan::Desired::body`] with the
    /// `[[sync.ignore]]` rules that select it in force against the live object, whose
    /// `managedFields` are `entries` (`own`: gitward's field manager) and whose whole value is
    /// `live` (`None`: only its metadata was read, and no rule names `paths`):
    /// - each field an ignored manager owns live is left out ([`Ignored::owned`]);
    /// - at each ignored path, the live value is sent when `own` owns a field there live, so
    ///   the object keeps it; otherwise the path is left out, so its owner keeps it.
    ///
    /// The plain body when no rule selects it. A create sends [`crate::plan::Desired::body`]:
    /// git's values, ignored paths included.
    pub fn body_given(&self, entries: &[ManagedFieldsEntry], own: &str, live: Option<&Value>) -> crate::manifest::Body {
        let body = self.body();
        let Some(ignored) = self.ignored.as_ref() else { return body };
        let mut value = body.to_value();
        let mut out = ignored.owned(entries, own, &value);
        let ours = live.map(|live| owned_by(entries, own, live)).unwrap_or_default();
        for path in &ignored.paths {
            let kept = live.filter(|_| ours.iter().any(|o| under(o, path))).and_then(|l| lookup(l, path));
            match kept {
                Some(live_value) => {
                    if let Ok(pointer) = Pointer::parse(path) {
                        let _ = pointer.assign(&mut value, live_value.clone());
                    }
                }
                None => out.push(path.clone()),
            }
        }
        if out.is_empty() && ignored.paths.is_empty() {
            return body;
        }
        remove(&mut value, &out);
        crate::manifest::Body::from_value(&value)
    }
}

/// The fields `manager`'s entries in `entries` (a live object's `managedFields`) own, as JSON
/// pointers into `doc` (the live object itself): each field such an entry names that `doc`
/// holds, sorted, each once.
pub fn owned_by(entries: &[ManagedFieldsEntry], manager: &str, doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for entry in entries.iter().filter(|e| e.manager.as_deref() == Some(manager)) {
        if let Some(Value::Object(fields)) = entry.fields_v1.as_ref().map(|f| &f.0) {
            walk(fields, doc, &mut String::new(), &[], &mut out);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether pointer `owned` names `path` or a field below it.
fn under(owned: &str, path: &str) -> bool {
    owned.strip_prefix(path).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The value at JSON pointer `path` in `doc`, if any.
fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    Pointer::parse(path).ok()?.resolve(doc).ok()
}

/// What the rules among `rules` that select `object` (its manifest, namespace defaulted, is
/// `body`) leave out: their paths and managers in file order, each once. `None` when no rule
/// selects it.
pub fn select(rules: &[IgnoreRule], object: &ObjectRef, body: &Value) -> Option<Arc<Ignored>> {
    if rules.is_empty() {
        return None;
    }
    let labels: BTreeMap<String, String> = body["metadata"]["labels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let (group, kind, namespace) = (object.gk.group.as_str(), object.gk.kind.as_str(), object.namespace.as_deref());
    let mut ignored = Ignored::default();
    for rule in rules.iter().filter(|r| r.selects(group, kind, namespace, &object.name, &labels)) {
        for (from, into) in [(&rule.paths, &mut ignored.paths), (&rule.managers, &mut ignored.managers)] {
            for item in from {
                if !into.contains(item) {
                    into.push(item.clone());
                }
            }
        }
    }
    (ignored != Ignored::default()).then(|| Arc::new(ignored))
}

/// One level of a FieldsV1 set (apimachinery `structured-merge-diff` `fieldpath`: `f:<field>`,
/// `k:<key json>` a list element by its keys, `v:<value json>` a set element, `i:<index>`, `.`
/// the node itself) against `doc` at pointer `at`: a node with no children of its own is a
/// field owned whole, pushed to `out`; `keys` are the key fields of the list element `doc` is.
fn walk(fields: &Map<String, Value>, doc: &Value, at: &mut String, keys: &[String], out: &mut Vec<String>) {
    for (name, sub) in fields {
        let empty = Map::new();
        let sub = sub.as_object().unwrap_or(&empty);
        let whole = sub.keys().all(|k| k == ".");
        let (child, token, keys): (Option<&Value>, String, Vec<String>) = if let Some(field) = name.strip_prefix("f:") {
            if keys.iter().any(|k| k == field) {
                continue;
            }
            (doc.get(field), Token::new(field).encoded().to_owned(), Vec::new())
        } else if let Some(key) = name.strip_prefix("k:") {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(key) else { continue };
            let found =
                doc.as_array().and_then(|l| l.iter().position(|e| key.iter().all(|(k, v)| e.get(k) == Some(v))));
            let Some(index) = found else { continue };
            // An element owned whole is only its existence: the fields gitward sends in it stay.
            if whole {
                continue;
            }
            (doc.get(index), index.to_string(), key.keys().cloned().collect())
        } else if let Some(value) = name.strip_prefix("v:") {
            let Ok(value) = serde_json::from_str::<Value>(value) else { continue };
            let found = doc.as_array().and_then(|l| l.iter().position(|e| *e == value));
            let Some(index) = found else { continue };
            (doc.get(index), index.to_string(), Vec::new())
        } else if let Some(index) = name.strip_prefix("i:").and_then(|i| i.parse::<usize>().ok()) {
            (doc.get(index), index.to_string(), Vec::new())
        } else {
            continue;
        };
        let Some(child) = child else { continue };
        let len = at.len();
        at.push('/');
        at.push_str(&token);
        if whole {
            out.push(at.clone());
        } else {
            walk(sub, child, at, &keys, out);
        }
        at.truncate(len);
    }
}

/// Takes the fields at `paths` out of `value`; a path that names nothing there is skipped.
/// Later list elements go first, so `/a/0` and `/a/1` remove the two elements they name.
pub fn remove(value: &mut Value, paths: &[String]) {
    let mut pointers: Vec<&Pointer> = paths.iter().filter_map(|p| Pointer::parse(p).ok()).collect();
    pointers.sort_by(|a, b| later_first(a, b));
    for pointer in pointers {
        pointer.delete(value);
    }
}

/// `update` mode: puts the value `live` has at each of `paths` into `merged` (the live object
/// with the manifest's fields merged in), so a list the manifest replaces whole keeps the
/// ignored field of its elements; a path `live` has no value at is taken out of `merged`.
pub fn keep_live(merged: &mut Value, live: &Value, paths: &[String]) {
    for pointer in paths.iter().filter_map(|p| Pointer::parse(p).ok()) {
        match pointer.resolve(live) {
            Ok(value) => {
                // A parent that `merged` lacks is made; one of another type cannot take it.
                let _ = pointer.assign(merged, value.clone());
            }
            Err(_) => {
                pointer.delete(merged);
            }
        }
    }
}

/// The order [`remove`] takes pointers in: token by token, array indexes compared as numbers,
/// the greater first.
fn later_first(a: &Pointer, b: &Pointer) -> Ordering {
    let index = |t: &Token| t.decoded().parse::<usize>().ok();
    for (x, y) in a.tokens().zip(b.tokens()) {
        let order = match (index(&x), index(&y)) {
            (Some(i), Some(j)) => j.cmp(&i),
            _ => y.decoded().cmp(&x.decoded()),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    b.count().cmp(&a.count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    fn entry(manager: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    #[test]
    fn the_fields_a_named_manager_owns_are_pointers_into_the_document_given() {
        let fields = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"app\"}": {".": {}, "f:name": {}, "f:env": {".": {}, "k:{\"name\":\"X\"}": {".": {}, "f:name": {}, "f:value": {}}}},
            "k:{\"name\":\"side\"}": {".": {}}}}}}, "f:metadata": {"f:finalizers": {"v:\"a/b\"": {}}}});
        let entries = [entry("hpa", fields.clone()), entry("gitward", json!({"f:spec": {"f:paused": {}}}))];
        let ignored = Ignored { paths: Vec::new(), managers: vec!["hpa".into(), "gitward".into()] };
        // A body whose containers come in another order than the live object's.
        let body = json!({"metadata": {"finalizers": ["c", "a/b"]}, "spec": {"replicas": 1, "paused": true,
            "template": {"spec": {"containers": [{"name": "side"}, {"name": "app", "image": "i", "env": [{"name": "X", "value": "1"}]}]}}}});
        assert_eq!(
            ignored.owned(&entries, "gitward", &body),
            ["/metadata/finalizers/1", "/spec/replicas", "/spec/template/spec/containers/1/env/0/value",],
            "the element `side` co-owned and the keys `name` stay; gitward's own entry is never read"
        );
        let owned = ignored.owned(&entries, "gitward", &body);
        let mut body = body;
        remove(&mut body, &owned);
        assert_eq!(
            body["spec"]["template"]["spec"]["containers"][1],
            json!({"name": "app", "image": "i", "env": [{"name": "X"}]})
        );
        assert_eq!(body["metadata"]["finalizers"], json!(["c"]));
    }

    fn rule(kind: &str, paths: &[&str]) -> IgnoreRule {
        IgnoreRule {
            kind: kind.into(),
            group: None,
            name: None,
            namespace: None,
            label_selector: None,
            paths: paths.iter().map(|p| p.to_string()).collect(),
            managers: Vec::new(),
        }
    }

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn the_paths_of_every_selecting_rule_are_taken_once_in_file_order() {
        let deployment =
            ObjectRef::new(crate::object::GroupKind::from_api_version("apps/v1", "Deployment"), Some("shop"), "web");
        let body = json!({"metadata": {"name": "web", "labels": {"app": "web"}}});
        let rules = [
            rule("Deployment", &["/spec/replicas"]),
            rule("Service", &["/spec/ports"]),
            rule("Deployment", &["/metadata/annotations/x", "/spec/replicas"]),
        ];
        let selected = select(&rules, &deployment, &body).unwrap();
        assert_eq!(selected.paths, ["/spec/replicas", "/metadata/annotations/x"]);
        assert_eq!(select(&rules[1..2], &deployment, &body), None);
        assert_eq!(select(&[], &deployment, &body), None);
    }

    #[test]
    fn removal_takes_fields_and_list_elements_and_skips_what_is_absent() {
        let mut body = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b"}, {"name": "c"}]}}}, "metadata": {"labels": {"x/y": "1"}}});
        remove(
            &mut body,
            &paths(&[
                "/spec/replicas",
                "/spec/template/spec/containers/0/image",
                "/spec/template/spec/containers/1",
                "/spec/template/spec/containers/2",
                "/metadata/labels/x~1y",
                "/spec/missing/field",
            ]),
        );
        assert_eq!(
            body,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}, "metadata": {"labels": {}}})
        );
    }

    #[test]
    fn update_mode_keeps_the_live_value_even_inside_a_replaced_list() {
        let live = json!({"spec": {"replicas": 3, "containers": [{"name": "a", "image": "a:live"}]}});
        let mut merged = json!({"spec": {"containers": [{"name": "a"}], "other": 1}});
        keep_live(&mut merged, &live, &paths(&["/spec/replicas", "/spec/containers/0/image", "/spec/other"]));
        assert_eq!(merged, json!({"spec": {"replicas": 3, "containers": [{"name": "a", "image": "a:live"}]}}));
    }
}
