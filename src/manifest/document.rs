//! Turning one document's value into desired objects: `List` expansion, kustomize inputs
//! skipped, required fields checked.

use crate::object::Atom;
use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::{Body, Loaded, Manifest, Skipped};
use crate::object::GroupKind;

/// The API group of kustomize's own inputs (`Kustomization`, `Component`): read by
/// `kustomize build`, never served by an apiserver.
const KUSTOMIZE_GROUP: &str = "kustomize.config.k8s.io";

/// Where a value sits: file, 0-based document index, and 0-based item index inside a `List`.
#[derive(Clone, Copy)]
struct At<'a> {
    file: &'a str,
    index: usize,
    item: Option<usize>,
}

impl At<'_> {
    fn missing(&self, field: &'static str) -> Error {
        let (file, index, item) = (self.file.to_owned(), self.index, self.item);
        Error::MissingField { file, index, item, field }
    }

    fn invalid(&self, field: &'static str, message: String) -> Error {
        let (file, index, item) = (self.file.to_owned(), self.index, self.item);
        Error::InvalidField { file, index, item, field, message }
    }

    fn not_an_object(&self, value: &Value) -> Error {
        let (file, index, item) = (self.file.to_owned(), self.index, self.item);
        Error::NotAnObject { file, index, item, found: describe(value).to_owned() }
    }
}

/// Adds the objects of document `index` to `loaded`. A null value (an empty or comment-only
/// document, or `~`) adds nothing, as kubectl skips it.
///
/// A document with an `items` field is a list (`v1` `List`, `ConfigMapList`, …) and each item is
/// an object of its own, as kubectl reads it (apimachinery's unstructured JSON scheme keys on
/// `items`, not on the kind; a CRD kind that merely ends in `List` and has no `items` stays an
/// object). Items of nested lists are not expanded further, as in kubectl.
pub(super) fn collect(file: &str, index: usize, value: Value, loaded: &mut Loaded) -> Result<()> {
    let at = At { file, index, item: None };
    let mut object = match value {
        Value::Null => return Ok(()),
        Value::Object(object) => object,
        other => return Err(at.not_an_object(&other)),
    };
    if !object.contains_key("items") {
        return add_object(at, object, loaded);
    }
    required_string(at, &object, "apiVersion")?;
    required_string(at, &object, "kind")?;
    let items = match object.remove("items") {
        Some(Value::Array(items)) => items,
        Some(Value::Null) | None => Vec::new(),
        Some(other) => return Err(at.invalid("items", format!("must be a sequence, found {}", describe(&other)))),
    };
    for (item, value) in items.into_iter().enumerate() {
        let at = At { item: Some(item), ..at };
        match value {
            Value::Object(object) => add_object(at, object, loaded)?,
            other => return Err(at.not_an_object(&other)),
        }
    }
    Ok(())
}

/// Adds one object, or a [`Skipped`] entry if it is a kustomize input.
fn add_object(at: At<'_>, object: Map<String, Value>, loaded: &mut Loaded) -> Result<()> {
    let api_version = required_string(at, &object, "apiVersion")?.to_owned();
    let kind = required_string(at, &object, "kind")?.to_owned();
    let gk = GroupKind::from_api_version(&api_version, &kind);
    if gk.group == KUSTOMIZE_GROUP {
        loaded.skipped.push(Skipped {
            file: at.file.to_owned(),
            index: Some(at.index),
            reason: format!("{api_version} {kind} is an input of kustomize, not a cluster object"),
        });
        return Ok(());
    }
    let metadata = match object.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(metadata)) => Some(metadata),
        Some(other) => return Err(at.invalid("metadata", format!("must be a mapping, found {}", describe(other)))),
    };
    let field = |name: &str| metadata.and_then(|m| m.get(name));
    let name = match optional_string(at, field("name"), "metadata.name")? {
        Some(name) => Atom::new(name),
        None if optional_string(at, field("generateName"), "metadata.generateName")?.is_some() => {
            let (file, index, item) = (at.file.to_owned(), at.index, at.item);
            return Err(Error::GenerateName { file, index, item });
        }
        None => return Err(at.missing("metadata.name")),
    };
    let namespace = optional_string(at, field("namespace"), "metadata.namespace")?.map(Atom::new);
    loaded.manifests.push(Manifest {
        file: Atom::new(at.file),
        index: at.index,
        api_version: api_version.into(),
        gk,
        name,
        namespace,
        body: Body::from(Value::Object(object)),
        hash_key: None,
    });
    Ok(())
}

/// A top-level string field that must be present and non-empty.
fn required_string<'v>(at: At<'_>, object: &'v Map<String, Value>, field: &'static str) -> Result<&'v str> {
    optional_string(at, object.get(field), field)?.ok_or_else(|| at.missing(field))
}

/// A string field: `None` when absent, null or empty (kubectl treats them alike); an error when
/// it holds another type, e.g. `name: 2024`, which YAML reads as a number.
fn optional_string<'v>(at: At<'_>, value: Option<&'v Value>, field: &'static str) -> Result<Option<&'v str>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => {
            let found = describe(other);
            Err(at.invalid(field, format!("must be a string, found {found} (quote the value in YAML)")))
        }
    }
}

/// `a number`, `a sequence`, … for messages.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn collect_one(value: Value) -> Result<Loaded> {
        let mut loaded = Loaded::default();
        collect("f.yaml", 3, value, &mut loaded).map(|()| loaded)
    }

    #[test]
    fn list_items_become_objects_with_the_list_document_index() {
        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}},
        ]});
        let loaded = collect_one(list).ok().unwrap_or_default();
        let names: Vec<_> =
            loaded.manifests.iter().map(|m| (m.name.as_str(), m.namespace.as_deref(), m.index)).collect();
        assert_eq!(names, vec![("a", Some("ns"), 3), ("b", None, 3)]);
    }

    #[test]
    fn kind_ending_in_list_without_items_is_an_object() {
        let object = json!({"apiVersion": "example.com/v1", "kind": "AccessList", "metadata": {"name": "x"}});
        let loaded = collect_one(object).ok().unwrap_or_default();
        assert_eq!(loaded.manifests.len(), 1);
        assert_eq!(loaded.manifests[0].gk, GroupKind::from_api_version("example.com/v1", "AccessList"));
    }

    #[test]
    fn kustomize_object_is_skipped_but_flux_kustomization_is_kept() {
        let kustomize = json!({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"});
        let loaded = collect_one(kustomize).ok().unwrap_or_default();
        assert_eq!((loaded.manifests.len(), loaded.skipped.len()), (0, 1));
        assert_eq!(loaded.skipped[0].index, Some(3));
        let flux = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "apps"}});
        let loaded = collect_one(flux).ok().unwrap_or_default();
        assert_eq!((loaded.manifests.len(), loaded.skipped.len()), (1, 0));
    }

    #[test]
    fn generate_name_without_name_asks_for_a_fixed_name() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "migrate-"}});
        let err = collect_one(job).err();
        assert_eq!(err, Some(Error::GenerateName { file: "f.yaml".into(), index: 3, item: None }));
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.starts_with("f.yaml: document 4: metadata.generateName"), "{message}");
        assert!(message.contains("give the object a metadata.name"), "{message}");
    }

    #[test]
    fn missing_fields_are_named() {
        let cases = [
            (json!({"kind": "ConfigMap", "metadata": {"name": "a"}}), "apiVersion"),
            (json!({"apiVersion": "v1", "kind": "", "metadata": {"name": "a"}}), "kind"),
            (json!({"apiVersion": "v1", "kind": "ConfigMap"}), "metadata.name"),
            (json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": null}}), "metadata.name"),
        ];
        for (value, field) in cases {
            let err = collect_one(value).err();
            assert_eq!(err, Some(Error::MissingField { file: "f.yaml".into(), index: 3, item: None, field }));
        }
    }

    #[test]
    fn number_where_a_name_belongs_is_reported_with_a_hint() {
        let value = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 2024}});
        let message = collect_one(value).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            message,
            "f.yaml: document 4: metadata.name must be a string, found a number (quote the value in YAML)"
        );
    }

    #[test]
    fn non_mapping_documents_and_items_are_rejected() {
        let err = collect_one(json!(["a"])).err();
        assert!(matches!(err, Some(Error::NotAnObject { item: None, .. })), "{err:?}");
        let list = json!({"apiVersion": "v1", "kind": "List", "items": ["a"]});
        let message = collect_one(list).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(message, "f.yaml: document 4, item 1: expected a Kubernetes object (a mapping), found a string");
    }

    #[test]
    fn null_document_adds_nothing() {
        let loaded = collect_one(Value::Null).ok();
        assert_eq!(loaded, Some(Loaded::default()));
    }
}
