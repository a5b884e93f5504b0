//! Files and directories read into [`Object`]s with the manifest reader.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Error, Warning};

/// One object read: its identity and its whole body.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// `apiVersion`, `kustomize.toolkit.fluxcd.io/v1`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`; empty when the object names none.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The whole object.
    pub body: Value,
    /// Where it was read: a file (`dir/file.yaml (document 2)`) or `cluster`.
    pub origin: String,
}

impl Object {
    /// The object of a document: `None` for a document with no `kind` or `metadata.name`.
    pub fn from_value(body: Value, origin: String) -> Option<Object> {
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let kind = text(body.get("kind")?)?;
        let name = text(body.get("metadata")?.get("name")?)?;
        let namespace = body["metadata"].get("namespace").and_then(text).unwrap_or_default();
        let api_version = body.get("apiVersion").and_then(text).unwrap_or_default();
        Some(Object { api_version, kind, namespace, name, body, origin })
    }

    /// The API group, `kustomize.toolkit.fluxcd.io` (`apiVersion` before the `/`).
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(group, _)| group)
    }

    /// How warnings name it: `Kind namespace/name`, or `Kind name` with no namespace.
    pub fn id(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }

    /// Whether it is `kind` of a group that starts with `group`.
    pub(super) fn is(&self, group: &str, kind: &str) -> bool {
        self.kind == kind && self.group().starts_with(group)
    }
}

/// The objects of `paths`, in order: a file's documents in order (a `List`'s items
/// expanded), a directory's `.yaml`, `.yml` and `.json` files below it in path order (hidden
/// entries passed over). An object defined twice is read once, the first time, with a
/// warning; a file found in a directory that does not parse is passed over with a warning
/// (a chart's templates are not YAML), one named does not.
///
/// Errors: a path that cannot be read; a file named that does not parse.
pub fn read_paths(paths: &[PathBuf]) -> Result<(Vec<Object>, Vec<Warning>), Error> {
    let mut objects = Vec::new();
    let mut warnings = Vec::new();
    for path in paths {
        let io = |source| Error::Io { path: path.display().to_string(), source };
        if std::fs::metadata(path).map_err(io)?.is_dir() {
            for file in files_below(path)? {
                let name = file.display().to_string();
                match read_file(&file) {
                    Ok(found) => objects.extend(found),
                    Err(e) => {
                        warnings.push(Warning { object: name, field: String::new(), message: format!("not read: {e}") })
                    }
                }
            }
        } else {
            objects.extend(read_file(path)?);
        }
    }
    Ok((first_of_each(objects, &mut warnings), warnings))
}

/// The objects of one file.
fn read_file(path: &Path) -> Result<Vec<Object>, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let file = path.display().to_string();
    let mut objects = Vec::new();
    for (index, value) in crate::manifest::documents(&file, &bytes)? {
        let origin = format!("{file} (document {})", index + 1);
        match value.get("items").and_then(Value::as_array) {
            Some(items) if value["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                objects.extend(items.iter().filter_map(|item| Object::from_value(item.clone(), origin.clone())));
            }
            _ => objects.extend(Object::from_value(value, origin)),
        }
    }
    Ok(objects)
}

/// The manifest files below `dir`, in path order.
fn files_below(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let io = |source| Error::Io { path: dir.display().to_string(), source };
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if entry.file_type().map_err(io)?.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json") {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `objects` with each (group, kind, namespace, name) once: the first, the others warned of.
fn first_of_each(objects: Vec<Object>, warnings: &mut Vec<Warning>) -> Vec<Object> {
    let mut seen = BTreeSet::new();
    let mut kept = Vec::new();
    for object in objects {
        let key = (object.group().to_owned(), object.kind.clone(), object.namespace.clone(), object.name.clone());
        if seen.insert(key) {
            kept.push(object);
        } else if is_imported(&object) {
            let message = format!("defined again in {}: only the first definition is read", object.origin);
            warnings.push(Warning { object: object.id(), field: String::new(), message });
        }
    }
    kept
}

/// Whether `object` is of a kind `gitward import` reads.
fn is_imported(object: &Object) -> bool {
    let group = object.group();
    group.ends_with(".fluxcd.io") || group == "argoproj.io"
}
