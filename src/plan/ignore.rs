//! Ignore rules applied to one object (`[[sync.ignore]]`, [`crate::config::IgnoreRule`]): which
//! JSON pointers select its fields ([`select`]), their removal from what gitward sends
//! ([`remove`]), and `update` mode's keeping of the live value there ([`keep_live`]). Pure.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use json_patch::jsonptr::{Pointer, Token};
use serde_json::Value;

use crate::config::IgnoreRule;
use crate::object::ObjectRef;

/// The pointers of every rule among `rules` that selects `object`, whose manifest (namespace
/// defaulted) is `body`: in file order, each once. `None` when no rule selects it or the rules
/// that do name only field managers.
pub fn select(rules: &[IgnoreRule], object: &ObjectRef, body: &Value) -> Option<Arc<[String]>> {
    if rules.is_empty() {
        return None;
    }
    let labels: BTreeMap<String, String> = body["metadata"]["labels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let (group, kind, namespace) = (object.gk.group.as_str(), object.gk.kind.as_str(), object.namespace.as_deref());
    let mut paths: Vec<String> = Vec::new();
    for rule in rules.iter().filter(|r| r.selects(group, kind, namespace, &object.name, &labels)) {
        for path in &rule.paths {
            if !paths.contains(path) {
                paths.push(path.clone());
            }
        }
    }
    (!paths.is_empty()).then(|| paths.into())
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
    use serde_json::json;

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
        assert_eq!(&*selected, ["/spec/replicas", "/metadata/annotations/x"]);
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
