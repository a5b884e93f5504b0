//! The desired hash: sha256 of an object's canonical JSON, or, for objects made from
//! SOPS-decrypted input, an HMAC of it keyed with [`HashKey`].

use hmac::{KeyInit, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The desired hash of a desired object (DESIGN.md, Words): the lowercase hex sha256 (64
/// characters) of the object's canonical JSON — object keys sorted by their UTF-8 bytes at every
/// level, no whitespace, strings escaped as serde_json escapes them, numbers as serde_json prints
/// them (`1`, `1.5`, `1e20`).
///
/// Keys are sorted here, not left to `serde_json::Map`, whose order depends on whether some crate
/// in the build enables serde_json's `preserve_order` feature. Equal values therefore always hash
/// equal, whatever the key order in git. The caller decides which value to hash (e.g. after
/// adding the default namespace). Stored on live objects as annotation `gitward.dev/desired-hash`.
pub fn desired_hash(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical_json(value).as_bytes()))
}

/// The canonical JSON text that [`desired_hash`] hashes (keys sorted at every level, no
/// whitespace); also what a keyed hash of a decrypted object is taken over.
pub fn canonical_json(value: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    canonical
}

/// The key that makes desired hashes of decrypted objects unguessable: 32 bytes derived from
/// the age identity file. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct HashKey([u8; 32]);

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HashKey(***)")
    }
}

impl HashKey {
    /// Derives the key from the age identity file's bytes: sha256 of a fixed label and them.
    pub fn derive(identity: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"gitward desired-hash key v1\n");
        hasher.update(identity);
        Self(hasher.finalize().into())
    }

    /// The keyed desired hash: lowercase hex HMAC-SHA256 (RFC 2104) of `canonical` (the
    /// object's canonical JSON, see [`desired_hash`]).
    pub fn hash(&self, canonical: &[u8]) -> String {
        let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(canonical);
        hex::encode(mac.finalize().into_bytes())
    }

    /// A public id of the key (sha256 of it), for the render cache key.
    pub fn id(&self) -> String {
        hex::encode(Sha256::digest(self.0))
    }
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // A string Value displays as its JSON literal, escaped.
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&object[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        // Scalars display as compact JSON.
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_recursively_without_whitespace() {
        let mut out = String::new();
        write_canonical(&json!({"b": {"y": 1, "x": [true, null, "q\""]}, "a": 1.5}), &mut out);
        assert_eq!(out, r#"{"a":1.5,"b":{"x":[true,null,"q\""],"y":1}}"#);
    }

    #[test]
    fn key_order_does_not_change_the_hash() {
        let one: Value = serde_json::from_str(r#"{"a": 1, "b": {"c": 2, "d": 3}}"#).unwrap_or_default();
        let two: Value = serde_json::from_str(r#"{"b": {"d": 3, "c": 2}, "a": 1}"#).unwrap_or_default();
        assert_eq!(desired_hash(&one), desired_hash(&two));
        assert_ne!(desired_hash(&one), desired_hash(&json!({"a": 2})));
    }

    #[test]
    fn hash_is_hex_sha256_of_the_canonical_text() {
        // sha256("{}") computed independently (sha256sum).
        assert_eq!(desired_hash(&json!({})), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
    }

    #[test]
    fn keyed_hash_depends_on_the_key_and_is_not_the_plain_hash() {
        let a = HashKey::derive(b"AGE-SECRET-KEY-1AAA");
        let b = HashKey::derive(b"AGE-SECRET-KEY-1BBB");
        assert_ne!(a.hash(b"{}"), b.hash(b"{}"));
        assert_eq!(a.hash(b"{}"), a.hash(b"{}"));
        assert_ne!(a.hash(b"{}"), desired_hash(&serde_json::json!({})));
        assert_eq!(format!("{a:?}"), "HashKey(***)");
    }
}
