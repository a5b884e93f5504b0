//! Manifests: the YAML and JSON files of a tree read into desired objects, as kubectl reads them.
//!
//! One file goes through three steps:
//!
//! 1. `stream` cuts it into documents (YAML at `---` lines, as kubectl's reader does; JSON as a
//!    stream of values) and parses each with serde-saphyr (YAML 1.1, as kubectl's go-yaml v2)
//!    or serde_json;
//! 2. `value` builds each document's JSON as kubectl's YAML-to-JSON round trip does: keys
//!    become strings (`on:` → `"true"`), numbers become int64 or float64 (`1.0` → `1`), `<<`
//!    merge keys expand with go-yaml v2's precedence;
//! 3. `document` expands lists, skips kustomize inputs and checks each object's identity
//!    fields, giving a [`Manifest`] per object.
//!
//! [`ParseCache`] repeats this only for blobs that changed since the previous revision, and
//! [`desired_hash`] hashes an object's canonical JSON. [`substitute`] replaces `${var}`
//! references in the objects read (`[sync.substitute]`).
//!
//! ## Where gitward's reading differs from kubectl's
//!
//! The parity test (`tests/apply/manifest_parity.rs`) compares this reading with kubectl's
//! (`kubectl create --dry-run=client -o json`) on every fixture. Known differences, checked
//! against kubectl 1.35:
//!
//! - Refused although kubectl accepts them: `metadata.generateName` without a name
//!   ([`Error::GenerateName`]: server-side apply needs a fixed name); a key repeated in one
//!   mapping, including two `<<` keys (kubectl keeps the last); two keys that become the same
//!   string, like `1:` and `"1":` (kubectl keeps one at random); nesting deeper than 256 levels.
//! - Read differently, in spellings no real manifest uses: booleans match case-insensitively
//!   (`yEs` is `true`; go-yaml reads it as a string); a quoted `"<<"` key is a merge key (go-yaml:
//!   a literal key); `1__0` stays a string (go-yaml drops every underscore: `10`); a `<<` whose
//!   value is an alias of a sequence of mappings is merged (go-yaml refuses it).

mod body;
mod cache;
mod document;
mod error;
mod hash;
mod stream;
pub mod substitute;
mod value;

pub use body::Body;
pub use cache::ParseCache;
pub use error::{Error, Result};
pub use hash::{HashKey, canonical_json, desired_hash};

use crate::object::{Atom, GroupKind};
use crate::source::is_kustomization_path;

/// Where a manifest came from: its file and document, printed `dir/file.yaml (document 2)` in
/// messages. Sixteen bytes and a shared path, where the formatted text was a string per object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Path of the file, relative to the repository root.
    pub file: Atom,
    /// 0-based document index (printed 1-based).
    pub index: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (document {})", self.file, self.index + 1)
    }
}

/// One desired object as read from git, before any cluster knowledge (scope, default namespace).
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Path of the file that holds it, relative to the repository root; for messages.
    pub file: Atom,
    /// 0-based index of its document in the file, counted as [`parse_file`] describes; for an
    /// item of a `List`, the `List` document's index.
    pub index: usize,
    /// `apiVersion`, e.g. `apps/v1`; the version the object is applied with.
    pub api_version: Atom,
    /// API group and kind, the part of the identity that does not depend on the version.
    pub gk: GroupKind,
    /// `metadata.name` (never empty).
    pub name: Atom,
    /// `metadata.namespace` if the manifest names one (an empty string counts as none); the
    /// default namespace is applied later, once discovery knows the kind's scope.
    pub namespace: Option<Atom>,
    /// The whole object as JSON, as kubectl reads it, kept as compact text ([`Body`]).
    pub body: Body,
    /// Set when the object was made from SOPS-decrypted input: its desired hash is then keyed
    /// with this (HMAC), not a plain sha256 of content that includes plaintext secrets.
    /// `None` for everything else (the reader never sets it; the render step does).
    pub hash_key: Option<HashKey>,
}

/// A file or document that is deliberately not a desired object, with the reason; for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Path of the file.
    pub file: String,
    /// 0-based document index; `None` when the whole file is skipped.
    pub index: Option<usize>,
    /// Why it was skipped, e.g. `kustomization file: gitward applies plain manifests`.
    pub reason: String,
}

impl Skipped {
    /// Whether this is a whole kustomization file ([`is_kustomization_path`]) that a plain read
    /// passed over, not a `kustomize.config.k8s.io` document inside another file.
    pub fn is_kustomization(&self) -> bool {
        self.index.is_none() && is_kustomization_path(&self.file)
    }
}

/// What one file, or a whole tree, holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// The desired objects, in file path order then document order (then `List` item order).
    pub manifests: Vec<Manifest>,
    /// Files and documents skipped on purpose (kustomize inputs), in the same order.
    pub skipped: Vec<Skipped>,
    /// Skipped paths that may define objects (symbolic links to manifests, submodules, names
    /// that are not UTF-8): the revision was read only in part, so nothing may be pruned.
    pub partial: Vec<String>,
    /// Helm hooks (objects annotated `helm.sh/hook`, test hooks aside), kept out of
    /// `manifests`: they are no desired objects of the unit but run as phases of its sync
    /// (`render::Hook`). Empty for plain and kustomize units.
    pub hooks: Vec<Manifest>,
    /// The objects came from the plain manifest files under the unit's path in git and from
    /// nothing else (no kustomize, Helm, OCI artifact or signature check): a revision whose tree
    /// at that path is the same object yields the same objects. False unless the load says so.
    pub path_only: bool,
}

/// Reads all documents of one file (`file` is its path, for messages and the format; `bytes` its
/// content) into desired objects.
///
/// - `.json` files are read with serde_json as a stream of JSON values (kubectl reads several
///   too); every other file as a YAML stream. Text must be UTF-8; a byte order mark is ignored.
/// - A YAML stream is cut into documents at lines starting with `---`, as kubectl's reader does;
///   a separator line may carry only a comment after the dashes. Documents are counted from each
///   separator, empty ones included; text before the first separator counts as a document only
///   if it holds more than blank lines and comments. Empty, comment-only and null documents
///   yield nothing.
/// - A document with an `items` field (`kind: List`, `ConfigMapList`, …) yields its items.
/// - Kustomization files and `kustomize.config.k8s.io` objects are returned in
///   [`Loaded::skipped`]; a kustomization file is not parsed at all.
/// - YAML is read as kubectl reads it (YAML 1.1: `0644` is 420, `yes`/`on` are `true`, `<<`
///   merge keys expand, aliases resolve), with limits per document: 256 levels of nesting,
///   100,000 events replayed through aliases, serde-saphyr's default budget for the rest. The
///   YAML is parsed on a short-lived thread with a 16 MiB stack, so a deep document cannot
///   overflow the caller's stack, whatever thread it runs on.
///
/// Errors: the first problem found, naming the file and document ([`Error`]); nothing is
/// returned for the other documents of a file with an error.
pub fn parse_file(file: &str, bytes: &[u8]) -> Result<Loaded> {
    let mut loaded = Loaded::default();
    if is_kustomization_path(file) {
        loaded.skipped.push(Skipped {
            file: file.to_owned(),
            index: None,
            reason: "kustomization file: gitward applies plain manifests and does not run kustomize".into(),
        });
        return Ok(loaded);
    }
    for (index, value) in stream::read_documents(file, bytes)? {
        document::collect(file, index, value, &mut loaded)?;
    }
    Ok(loaded)
}

/// The JSON value of each document of a YAML or JSON file, with its 0-based index, read as
/// [`parse_file`] reads them (kubectl's framing and YAML 1.1, the same limits) but not made
/// into objects: for readers of other tools' objects (`gitward import`). Empty documents are
/// `Value::Null`.
///
/// Errors: the first document that does not parse, named ([`Error`]).
pub fn documents(file: &str, bytes: &[u8]) -> Result<Vec<(usize, serde_json::Value)>> {
    stream::read_documents(file, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const EDGE_CASES: &str =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/yaml-edge-cases/edge-cases.yaml"));

    fn parse(text: &str) -> Result<Loaded> {
        parse_file("test.yaml", text.as_bytes())
    }

    fn edge_cases() -> Loaded {
        match parse_file("yaml-edge-cases/edge-cases.yaml", EDGE_CASES.as_bytes()) {
            Ok(loaded) => loaded,
            Err(err) => panic!("edge cases fixture: {err}"),
        }
    }

    fn by_name(loaded: &Loaded, name: &str) -> serde_json::Value {
        match loaded.manifests.iter().find(|m| m.name == name) {
            Some(m) => m.body.to_value(),
            None => panic!("no object named {name}"),
        }
    }

    #[test]
    fn octal_file_mode_reads_as_integer() {
        let loaded = edge_cases();
        let volumes = &by_name(&loaded, "edge-modes")["spec"]["template"]["spec"]["volumes"];
        assert_eq!(volumes[0]["configMap"]["defaultMode"], json!(420));
        assert_eq!(volumes[1]["secret"]["defaultMode"], json!(256));
    }

    #[test]
    fn yaml_1_1_booleans_read_as_booleans() {
        let loaded = edge_cases();
        let pod = &by_name(&loaded, "edge-modes")["spec"]["template"]["spec"];
        assert_eq!(pod["containers"][0]["stdin"], json!(true));
        assert_eq!(pod["automountServiceAccountToken"], json!(false));
        assert_eq!(pod["volumes"][1]["secret"]["optional"], json!(true));
    }

    #[test]
    fn merge_keys_expand_into_the_pod_template_labels() {
        let loaded = edge_cases();
        let labels = &by_name(&loaded, "edge-modes")["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels, &json!({"app": "edge", "tier": "backend", "role": "worker"}));
    }

    #[test]
    fn list_document_expands_into_its_items() {
        let loaded = edge_cases();
        let accounts: Vec<_> = loaded
            .manifests
            .iter()
            .filter(|m| m.gk.kind == "ServiceAccount")
            .map(|m| (m.name.as_str(), m.index))
            .collect();
        assert_eq!(accounts, vec![("edge-sa-one", 3), ("edge-sa-two", 3)]);
    }

    #[test]
    fn comment_only_and_empty_documents_are_skipped_silently() {
        let loaded = edge_cases();
        let seen: Vec<_> = loaded.manifests.iter().map(|m| (m.gk.kind.as_str(), m.index)).collect();
        assert_eq!(
            seen,
            vec![("ConfigMap", 1), ("Deployment", 2), ("ServiceAccount", 3), ("ServiceAccount", 3), ("Service", 4)]
        );
        assert!(loaded.skipped.is_empty());
    }

    #[test]
    fn quoted_scalars_and_block_scalars_stay_strings() {
        let loaded = edge_cases();
        let data = &by_name(&loaded, "edge-scalars")["data"];
        assert_eq!(data, &json!({"port": "8080", "enabled": "true", "version": "1.10", "sha": "0123456789"}));
        let annotations = &by_name(&loaded, "edge-svc")["metadata"]["annotations"];
        assert_eq!(annotations["note"], json!("folded text over two lines\n"));
        assert_eq!(annotations["script"], json!("#!/bin/sh\necho \"literal block\"\n"));
        let args = &by_name(&loaded, "edge-modes")["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(args, &json!(["--level", "=", "--match", "=~"]));
    }

    #[test]
    fn identity_fields_are_read() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n";
        let loaded = parse(text).ok().unwrap_or_default();
        let m = &loaded.manifests[0];
        assert_eq!((m.file.as_str(), m.index, m.api_version.as_str()), ("test.yaml", 0, "apps/v1"));
        assert_eq!(m.gk, GroupKind::from_api_version("apps/v1", "Deployment"));
        assert_eq!((m.name.as_str(), m.namespace.as_deref()), ("web", Some("shop")));
    }

    #[test]
    fn non_string_keys_become_strings_as_kubectl_makes_them() {
        let text = "apiVersion: v1\nkind: X\nmetadata: {name: x}\nkeys: {on: a, 0x10: b, 010: c, 1.0: d, -7: e, 1e3: f, n: g}\n";
        let loaded = parse(text).ok().unwrap_or_default();
        let keys = &loaded.manifests[0].body.to_value()["keys"];
        let expected = json!({"true": "a", "16": "b", "8": "c", "1": "d", "-7": "e", "1000": "f", "false": "g"});
        assert_eq!(keys, &expected);
    }

    #[test]
    fn numbers_read_as_kubectl_round_trips_them() {
        let text = "apiVersion: v1\nkind: X\nmetadata: {name: x}\n\
                    numbers: [1.0, 1.5, 1e3, -0.0, 0x1F, 0o17, +12, 9223372036854775807, 18446744073709551615, 1e20]\n";
        let loaded = parse(text).ok().unwrap_or_default();
        let n = &loaded.manifests[0].body.to_value()["numbers"];
        let expected =
            json!([1, 1.5, 1000, 0, 31, 15, 12, 9223372036854775807_i64, 18446744073709551615_u64 as f64, 1e20]);
        assert_eq!(n, &expected);
    }

    #[test]
    fn merge_key_replaces_keys_written_before_it_like_kubectl() {
        let text = "apiVersion: v1\nkind: X\nmetadata: {name: x}\n\
                    base: &base {a: base, b: base}\nmore: &more {a: more, c: more}\n\
                    before: {a: own, <<: *base}\nafter: {<<: *base, a: own}\n\
                    list: {a: own, <<: [*base, *more], d: own}\n";
        let loaded = parse(text).ok().unwrap_or_default();
        let body = &loaded.manifests[0].body.to_value();
        assert_eq!(body["before"], json!({"a": "base", "b": "base"}));
        assert_eq!(body["after"], json!({"a": "own", "b": "base"}));
        assert_eq!(body["list"], json!({"a": "base", "b": "base", "c": "more", "d": "own"}));
        let err = parse("a: {<<: ~}\n").err();
        assert!(matches!(err, Some(Error::ParseDocument { .. })), "{err:?}");
    }

    #[test]
    fn merge_key_in_json_is_an_ordinary_key() {
        let text = br#"{"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}, "m": {"<<": {"a": 1}}}"#;
        let loaded = parse_file("x.json", text).ok().unwrap_or_default();
        assert_eq!(loaded.manifests[0].body.to_value()["m"], json!({"<<": {"a": 1}}));
    }

    #[test]
    fn null_and_duplicate_keys_are_errors() {
        for text in ["a: 1\n~: 2\n", "a: 1\na: 2\n", "1: a\n\"1\": b\n"] {
            let err = parse(text).err();
            assert!(matches!(err, Some(Error::ParseDocument { index: 0, .. })), "{text:?}: {err:?}");
        }
    }

    #[test]
    fn malformed_yaml_names_file_and_document() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [oops\n";
        let message = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.starts_with("test.yaml: document 2: "), "{message}");
        assert!(message.contains("line 6"), "{message}");
    }

    #[test]
    fn kustomization_file_is_skipped_unparsed() {
        let loaded = parse_file("app/kustomization.yml", b"not: [yaml").ok().unwrap_or_default();
        assert!(loaded.manifests.is_empty());
        assert_eq!(loaded.skipped.len(), 1);
        assert_eq!(loaded.skipped[0].index, None);
    }
}
