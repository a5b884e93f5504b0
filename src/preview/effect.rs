//! A pull request's effect, desired against desired: each revision's objects sealed
//! ([`seal`]: every value that must never be shown replaced by its keyed hash), digested
//! ([`digest`]) to tell whether the change alters the unit's render at all, and compared object
//! by object ([`effect`]) into what the change adds, changes and removes.
//!
//! Sealing comes first, so nothing after it holds a secret: a Secret's `data` and `stringData`
//! values (every Secret type), and every value of an object built from SOPS-decrypted content
//! or from a `from` Secret's value ([`crate::plan::Desired::decrypted`]) — its label and
//! annotation values too — become `gitward-sealed:<HMAC-SHA256>` under the install's key
//! ([`crate::sync::substitute::install_key`]). Two sealed values are equal exactly when the
//! values were; shown, each is `***`, or `*** (changed)` where the other side's hash differs
//! ([`unseal_masked`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use similar::TextDiff;

use crate::object::ObjectRef;
use crate::sync::diff::to_yaml;
pub use crate::sync::sealed::seal;
use crate::sync::sealed::{self, SEALED};
use crate::telemetry::mask::MASK;

/// One object of a revision as the preview compares it: bookkeeping left out, secrets sealed.
pub(crate) type Sealed = BTreeMap<ObjectRef, Value>;

/// `v` (sealed) with each sealed value shown as [`MASK`], or `*** (changed)` where `before`
/// (the other side, sealed) holds another value at the same place; with `None`, all `***`.
pub fn unseal_masked(v: &mut Value, before: Option<&Value>) {
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                unseal_masked(val, before.and_then(|b| b.get(k)));
            }
        }
        Value::Array(items) => {
            for (i, val) in items.iter_mut().enumerate() {
                unseal_masked(val, before.and_then(|b| b.get(i)));
            }
        }
        Value::String(s) if s.starts_with(SEALED) => {
            let changed = before.is_some_and(|b| b.as_str() != Some(s.as_str()));
            *v = Value::String(if changed { format!("{MASK} (changed)") } else { MASK.to_owned() });
        }
        _ => {}
    }
}

/// The digest of a unit's render ([`sealed::render_digest`] of each object's
/// [`sealed::object_digest`]): equal renders have equal digests whatever their order in git or
/// their keys'; a changed secret changes it (its keyed hash changed), but the digest says
/// nothing guessable of one. An attestation's subject names the render it applied by the same
/// digest.
pub fn digest(objects: &Sealed) -> String {
    let digests: Vec<(&ObjectRef, String)> = objects.iter().map(|(r, v)| (r, sealed::object_digest(v))).collect();
    sealed::render_digest(digests.iter().map(|(r, d)| (*r, d.as_str())))
}

/// What a change does to one object, desired against desired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectKind {
    /// The revision adds it.
    Added,
    /// The revision changes it.
    Changed,
    /// The revision removes it.
    Removed,
}

/// One object the change adds, changes or removes.
#[derive(Debug, Clone, Serialize)]
pub struct EffectEntry {
    /// `Kind/ns/name`.
    pub object: String,
    /// Added, changed or removed.
    pub kind: EffectKind,
    /// Unified diff of the YAML, `base/<ref>` against `revision/<ref>`, secrets masked.
    pub diff: String,
}

/// The objects `after` adds, changes and removes against `base`, sorted by ref, each with its
/// masked diff. `base` `None` (nothing applied yet): every object is added.
pub fn effect(base: Option<&Sealed>, after: &Sealed) -> Vec<EffectEntry> {
    let empty = Sealed::new();
    let base = base.unwrap_or(&empty);
    let mut out = Vec::new();
    let refs: std::collections::BTreeSet<&ObjectRef> = base.keys().chain(after.keys()).collect();
    for r in refs {
        let (old, new) = (base.get(r), after.get(r));
        let kind = match (old, new) {
            (None, Some(_)) => EffectKind::Added,
            (Some(_), None) => EffectKind::Removed,
            (Some(o), Some(n)) if o != n => EffectKind::Changed,
            _ => continue,
        };
        let shown_old = old.map(|o| shown(o, None)).unwrap_or_default();
        let shown_new = new.map(|n| shown(n, old)).unwrap_or_default();
        let name = r.to_string();
        let diff = TextDiff::from_lines(&shown_old, &shown_new)
            .unified_diff()
            .header(&format!("base/{name}"), &format!("revision/{name}"))
            .to_string();
        out.push(EffectEntry { object: name, kind, diff: crate::telemetry::mask::mask(&diff).into_owned() });
    }
    out
}

/// `v`'s YAML, sealed values masked against `before`.
fn shown(v: &Value, before: Option<&Value>) -> String {
    let mut v = v.clone();
    unseal_masked(&mut v, before);
    to_yaml(&v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::HashKey;
    use serde_json::json;

    fn secret(value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "pull", "namespace": "a"}, "data": {".dockerconfigjson": value}})
    }

    fn sealed(objects: &[(&str, Value)], decrypted: bool) -> Sealed {
        let key = HashKey::derive(b"test key");
        objects
            .iter()
            .map(|(name, v)| {
                let r = ObjectRef::new(crate::object::GroupKind::new("", "Secret"), Some("a"), *name);
                (r, seal(v.clone(), decrypted, &key))
            })
            .collect()
    }

    #[test]
    fn the_digest_ignores_order_and_bookkeeping_and_sees_a_secret_change() {
        let one = sealed(&[("a", secret("c2VjcmV0LW9uZQ==")), ("b", secret("eA=="))], false);
        let two = sealed(&[("b", secret("eA==")), ("a", secret("c2VjcmV0LW9uZQ=="))], false);
        assert_eq!(digest(&one), digest(&two));
        let mut labelled = secret("eA==");
        labelled["metadata"]["labels"] = json!({"applyset.kubernetes.io/part-of": "applyset-x-v1"});
        assert_eq!(digest(&sealed(&[("b", labelled)], false)), digest(&sealed(&[("b", secret("eA=="))], false)));
        let three = sealed(&[("a", secret("c2VjcmV0LXR3bw==")), ("b", secret("eA=="))], false);
        assert_ne!(digest(&one), digest(&three));
        assert_eq!(digest(&one).len(), 64);
    }

    #[test]
    fn a_sealed_object_holds_no_secret_and_its_change_shows_masked() {
        let (old, new) = (secret("b2xkLWh1bnRlcjI="), secret("bmV3LWNvcnJlY3Rob3JzZQ=="));
        let base = sealed(&[("pull", old)], false);
        let after = sealed(&[("pull", new)], false);
        let text = format!("{base:?}{after:?}");
        assert!(!text.contains("b2xk") && !text.contains("bmV3"), "{text}");
        let entries = effect(Some(&base), &after);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].kind, EffectKind::Changed);
        assert!(entries[0].diff.contains("+  .dockerconfigjson: \"*** (changed)\""), "{}", entries[0].diff);
        assert!(entries[0].diff.contains("-  .dockerconfigjson: \"***\""), "{}", entries[0].diff);
        assert!(!entries[0].diff.contains("gitward-sealed"), "{}", entries[0].diff);
    }

    #[test]
    fn a_decrypted_object_is_sealed_whole_but_its_identity() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "db", "namespace": "a", "labels": {"tier": "hunter2-label"}},
            "data": {"password": "hunter2-value", "ports": [1, 2]}});
        let v = seal(cm, true, &HashKey::derive(b"k"));
        assert_eq!(v["metadata"]["name"], "db");
        assert_eq!(v["kind"], "ConfigMap");
        assert!(!v.to_string().contains("hunter2"), "{v}");
        assert!(v["data"]["ports"][1].as_str().is_some_and(|s| s.starts_with(SEALED)));
    }

    #[test]
    fn added_and_removed_objects_are_named() {
        let base = sealed(&[("gone", secret("eA==")), ("kept", secret("eQ=="))], false);
        let after = sealed(&[("kept", secret("eQ==")), ("new", secret("eg=="))], false);
        let kinds: Vec<(String, EffectKind)> =
            effect(Some(&base), &after).into_iter().map(|e| (e.object, e.kind)).collect();
        assert_eq!(
            kinds,
            [("Secret/a/gone".to_string(), EffectKind::Removed), ("Secret/a/new".to_string(), EffectKind::Added)]
        );
        assert_eq!(effect(None, &after).len(), 2, "with nothing applied, all is added");
    }
}
