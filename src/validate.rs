//! `gitward validate`: fetch, render and parse each unit's manifests and check them without a
//! cluster.
//!
//! The render runs as in a sync (kustomize, Helm and SOPS), Helm with the config's
//! `[render] kube_version` and `api_versions`, since there is no cluster to ask. Every document
//! must parse; then each object is checked for what the API server would refuse and can be
//! known without it ([`Problem`]): an object defined twice, a Secret whose `data` is not base64,
//! a ConfigMap or Secret holding more than the API server's 1 MiB of data, any object over
//! etcd's default request limit of 1.5 MiB. Kinds and scopes are not checked (that needs
//! discovery); an object that names no namespace is taken to be in the unit's namespace for the
//! duplicate check.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use crate::config::SyncUnit;
use crate::manifest::{Manifest, Origin};
use crate::object::ObjectRef;
use crate::source::Revision;
use crate::sync::Result;
use crate::sync::desired::origin;

/// The most bytes of data a ConfigMap or Secret may hold: the API server's `MaxSecretSize`
/// (1 MiB), which its validation applies to a ConfigMap's `data` and `binaryData` (keys and
/// values) and a Secret's decoded `data` and `stringData` values.
pub const MAX_DATA_BYTES: usize = 1 << 20;

/// The most bytes one object's JSON may take: etcd's default `--max-request-bytes` (1.5 MiB),
/// which a larger object cannot be written under.
pub const MAX_OBJECT_BYTES: usize = 3 << 19;

/// What was checked in one unit.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The revision checked.
    pub revision: Revision,
    /// Objects found.
    pub objects: usize,
    /// What the API server would refuse, in file order; empty when the unit is valid.
    pub problems: Vec<Problem>,
}

/// One object the API server would refuse, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file and document (`apps/secret.yaml (document 2)`).
    pub origin: String,
    /// The object, `Kind/namespace/name`.
    pub object: String,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl std::fmt::Display for Problem {
    /// `apps/secret.yaml (document 2): Secret/shop/creds: data.password is not base64 …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.origin, self.object, self.message)
    }
}

/// Fetches the unit's repository into `state_dir`, reads its manifests and checks them.
///
/// Errors: what stops the revision before any object can be checked — [`crate::sync::Error::Source`]
/// (the repository, ref or path), [`crate::sync::Error::Render`] or
/// [`crate::sync::Error::Manifest`], naming the file and document (or the unit, path and
/// tool). Objects that do not pass are [`Summary::problems`], all of them.
pub async fn validate_unit(state_dir: &Path, unit: &SyncUnit) -> Result<Summary> {
    let repo = crate::sync::repo::Repo::open(state_dir, &Arc::new(unit.clone())).await?;
    let revision = repo.fetch().await?;
    let loaded = repo.load(&revision).await?;
    let mut problems = Vec::new();
    let mut seen: HashMap<ObjectRef, Origin> = HashMap::new();
    // Helm hooks are checked like the unit's own objects: they are applied too.
    for m in loaded.manifests.iter().chain(&loaded.hooks) {
        let ns = m.namespace.clone().unwrap_or_else(|| unit.namespace.as_str().into());
        let object = ObjectRef::new(m.gk.clone(), Some(ns), &m.name);
        let mut problem = |message: String| {
            problems.push(Problem { origin: origin(m).to_string(), object: object.to_string(), message })
        };
        if let Some(first) = seen.insert(object.clone(), origin(m)) {
            problem(format!("defined twice, first in {first}: keep one of them"));
        }
        for message in check(m) {
            problem(message);
        }
    }
    Ok(Summary { revision, objects: loaded.manifests.len() + loaded.hooks.len(), problems })
}

/// What the API server would refuse in `m`, each as a sentence: Secret data that is not base64,
/// data over [`MAX_DATA_BYTES`], an object over [`MAX_OBJECT_BYTES`].
pub fn check(m: &Manifest) -> Vec<String> {
    let mut problems = Vec::new();
    let size = m.body.as_str().len();
    if size > MAX_OBJECT_BYTES {
        problems.push(format!(
            "{size} bytes, over the {MAX_OBJECT_BYTES} bytes (1.5 MiB) etcd takes in one request: split it into \
             several objects"
        ));
    }
    let data_bytes = match (m.gk.group.as_str(), m.gk.kind.as_str()) {
        ("", "Secret") => secret_data(m, &mut problems),
        ("", "ConfigMap") => configmap_data(m),
        _ => 0,
    };
    if data_bytes > MAX_DATA_BYTES {
        problems.push(format!(
            "{data_bytes} bytes of data, over the {MAX_DATA_BYTES} bytes (1 MiB) a {} may hold: split it into \
             several, or mount the data from a volume",
            m.gk.kind
        ));
    }
    problems
}

/// The decoded bytes of a Secret's `data` and `stringData` values; a `data` value that is not
/// standard base64 (RFC 4648 §4, padded, as the API server decodes it) is a problem.
fn secret_data(m: &Manifest, problems: &mut Vec<String>) -> usize {
    let body = m.body.to_value();
    let mut bytes = 0;
    for (key, value) in entries(&body, "data") {
        match value.as_str().map(|text| base64::engine::general_purpose::STANDARD.decode(text)) {
            Some(Ok(decoded)) => bytes += decoded.len(),
            // The decoder's message names the offending character: not for a Secret's log line.
            Some(Err(_)) => problems.push(format!(
                "data.{key} is not base64: encode the value (`base64 -w0`), or move it to stringData as plain text"
            )),
            None => problems.push(format!("data.{key} is not a string: give a base64 string")),
        }
    }
    bytes + entries(&body, "stringData").map(|(_, v)| v.as_str().map_or(0, str::len)).sum::<usize>()
}

/// The bytes of a ConfigMap's `data` and decoded `binaryData`, keys included, as the API server
/// counts them.
fn configmap_data(m: &Manifest) -> usize {
    let body = m.body.to_value();
    let text: usize = entries(&body, "data").map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    let binary: usize = entries(&body, "binaryData")
        .map(|(k, v)| {
            let decoded = v.as_str().and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
            k.len() + decoded.map_or(0, |d| d.len())
        })
        .sum();
    text + binary
}

/// The entries of the map at top-level `field`, none when it is absent or not a map.
fn entries<'a>(body: &'a Value, field: &str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    body.get(field).and_then(Value::as_object).into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_file;

    fn problems(yaml: &str) -> Vec<String> {
        parse_file("app/x.yaml", yaml.as_bytes()).unwrap().manifests.iter().flat_map(check).collect()
    }

    #[test]
    fn secret_data_must_be_base64() {
        let ok = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: aHVudGVyMg==}\nstringData: {b: plain}\n";
        assert!(problems(ok).is_empty());
        let bad = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: hunter2!}\n";
        let found = problems(bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("data.password is not base64"), "{found:?}");
        assert!(!found[0].contains("hunter2"), "the value must not be quoted: {found:?}");
    }

    #[test]
    fn data_over_one_mebibyte_is_refused_and_at_it_accepted() {
        let cm = |n: usize| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  k: \"{}\"\n", "x".repeat(n))
        };
        assert!(problems(&cm(MAX_DATA_BYTES - 1)).is_empty());
        let found = problems(&cm(MAX_DATA_BYTES));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("over the 1048576 bytes (1 MiB) a ConfigMap may hold"), "{found:?}");
    }

    #[test]
    fn any_object_over_the_etcd_request_limit_is_refused() {
        let crd = format!(
            "apiVersion: example.com/v1\nkind: Big\nmetadata: {{name: b}}\nspec:\n  blob: \"{}\"\n",
            "x".repeat(MAX_OBJECT_BYTES)
        );
        let found = problems(&crd);
        assert!(found.len() == 1 && found[0].contains("1.5 MiB"), "{found:?}");
        let under = crd.replace(&"x".repeat(MAX_OBJECT_BYTES), &"x".repeat(MAX_DATA_BYTES + 10));
        assert!(problems(&under).is_empty(), "a 1 MiB custom resource is fine");
    }
}
