//! A revision's objects sealed and digested: the one form in which `gitward preview`,
//! `gitward diff` and each attestation's subject name a unit's render.
//!
//! Sealing ([`seal`]) leaves out volatile metadata and gitward's bookkeeping and replaces every
//! value that must never be shown or be guessable by its keyed hash under the install's key
//! ([`crate::sync::substitute::install_key`]): a Secret's `data` and `stringData` values (every
//! Secret type), and every value of an object built from SOPS-decrypted content or from a `from`
//! Secret's value ([`crate::plan::Desired::decrypted`]) — its label and annotation values too —
//! become `gitward-sealed:<HMAC-SHA256>`. Two sealed values are equal exactly when the values
//! were. An object's digest ([`object_digest`]) is the sha256 of its sealed canonical JSON; a
//! render's ([`render_digest`]) is the sha256 of its objects' sorted lines
//! `<group>/<Kind>/<namespace>/<name> <object digest>\n`, so it depends on every body and on
//! neither the order nor the layout of the files.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::manifest::{HashKey, canonical_json, desired_hash};
use crate::object::ObjectRef;

/// What a sealed value starts with: the keyed hash follows.
pub const SEALED: &str = "gitward-sealed:";

/// `body` without volatile metadata and gitward's bookkeeping, and with every value that must
/// never be shown replaced by its keyed hash under `key` ([module docs](self)): a Secret's
/// `data` and `stringData` values; with `decrypted`, every value but the object's identity
/// (`apiVersion`, `kind`, `metadata` but its labels and annotations).
pub fn seal(body: Value, decrypted: bool, key: &HashKey) -> Value {
    let mut v = crate::sync::diff::strip(body);
    let is_secret = v.get("kind").and_then(Value::as_str) == Some("Secret")
        && v.get("apiVersion").and_then(Value::as_str) == Some("v1");
    let Value::Object(map) = &mut v else { return v };
    for (field, val) in map.iter_mut() {
        match field.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" if decrypted => {
                for part in ["labels", "annotations"] {
                    if let Some(values) = val.get_mut(part) {
                        seal_leaves(values, key);
                    }
                }
            }
            "data" | "stringData" if is_secret => seal_leaves(val, key),
            _ if decrypted => seal_leaves(val, key),
            _ => {}
        }
    }
    v
}

/// Every leaf under `v` (but nulls) replaced by its keyed hash.
fn seal_leaves(v: &mut Value, key: &HashKey) {
    match v {
        Value::Object(map) => map.values_mut().for_each(|val| seal_leaves(val, key)),
        Value::Array(items) => items.iter_mut().for_each(|val| seal_leaves(val, key)),
        Value::Null => {}
        leaf => *leaf = Value::String(format!("{SEALED}{}", key.hash(canonical_json(leaf).as_bytes()))),
    }
}

/// The digest of one sealed object: lowercase hex sha256 of its canonical JSON.
pub fn object_digest(sealed: &Value) -> String {
    desired_hash(sealed)
}

/// The line of `object` with digest `digest` as [`render_digest`] hashes it:
/// `<group>/<Kind>/<namespace>/<name> <digest>` (the namespace empty when cluster-scoped).
pub fn line(object: &ObjectRef, digest: &str) -> String {
    let namespace = object.namespace.as_deref().unwrap_or("");
    format!("{}/{}/{namespace}/{} {digest}", object.gk.group, object.gk.kind, object.name)
}

/// The digest of a render: lowercase hex sha256 of its objects' [`line`]s, each ended by
/// `\n`, sorted.
pub fn render_digest<'a>(objects: impl IntoIterator<Item = (&'a ObjectRef, &'a str)>) -> String {
    let mut lines: Vec<String> = objects.into_iter().map(|(object, digest)| line(object, digest)).collect();
    lines.sort_unstable();
    let mut hasher = Sha256::new();
    for line in &lines {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::object::GroupKind;

    fn object(kind: &str, name: &str) -> ObjectRef {
        ObjectRef::new(GroupKind::from_api_version("v1", kind), Some("default"), name)
    }

    #[test]
    fn the_render_digest_is_of_the_sorted_lines_and_moves_with_any_body() {
        let (a, b) = (object("ConfigMap", "a"), object("ConfigMap", "b"));
        let digest = render_digest([(&a, "11"), (&b, "22")]);
        assert_eq!(digest, render_digest([(&b, "22"), (&a, "11")]), "order does not count");
        let lines = "/ConfigMap/default/a 11\n/ConfigMap/default/b 22\n";
        assert_eq!(digest, hex::encode(Sha256::digest(lines.as_bytes())));
        assert_ne!(digest, render_digest([(&a, "11"), (&b, "23")]), "a body changed");
        assert_ne!(digest, render_digest([(&a, "11")]), "an object gone");
    }

    #[test]
    fn a_secret_s_values_are_sealed_and_still_tell_a_change() {
        let key = HashKey::derive(b"test");
        let secret =
            |v: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": v}});
        let one = seal(secret("eA=="), false, &key);
        assert!(one["data"]["k"].as_str().unwrap().starts_with(SEALED), "{one}");
        assert!(!one.to_string().contains("eA=="), "{one}");
        assert_eq!(object_digest(&one), object_digest(&seal(secret("eA=="), false, &key)));
        assert_ne!(object_digest(&one), object_digest(&seal(secret("eQ=="), false, &key)));
    }
}
