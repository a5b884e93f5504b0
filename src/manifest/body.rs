//! [`Body`]: a JSON object kept as its compact text, shared, instead of a `serde_json::Value`
//! tree.
//!
//! A parsed `Value` of a small Deployment is a few kilobytes of maps and strings; its compact
//! text is a few hundred bytes. The parse cache and the last sync's desired objects are held for
//! the daemon's whole life, one per object, so they hold bodies as text and parse one only when
//! something must read or change it (building the desired object, an `update`-mode merge).
//! Cloning a `Body` copies a pointer, so the parse cache, the render cache and the desired
//! objects built from them share one copy, and [`Body::same`] tells a body that came unchanged
//! out of a cache from one that was parsed again.

use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// One JSON value as compact text (no insignificant whitespace), reference-counted.
///
/// Serializes as that text unchanged (serde_json's `RawValue`), so a server-side apply sends
/// exactly these bytes. Equality compares the text.
#[derive(Clone)]
pub struct Body(Arc<RawValue>);

impl Body {
    /// The compact text of `value`.
    pub fn from_value(value: &Value) -> Self {
        let raw = serde_json::value::to_raw_value(value).expect("a Value always serializes");
        Self(Arc::from(raw))
    }

    /// The body of JSON `text` as it is (whitespace kept); `None` when it is not JSON (serde_json
    /// checks it, without building a tree).
    pub fn from_text(text: String) -> Option<Self> {
        RawValue::from_string(text).ok().map(|raw| Self(Arc::from(raw)))
    }

    /// The value parsed again from the text: a fresh tree the caller may change.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).expect("a Body holds JSON it serialized itself")
    }

    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The value at `pointer` (RFC 6901, as `Value::pointer`), parsed from the text.
    pub fn pointer(&self, pointer: &str) -> Option<Value> {
        self.to_value().pointer(pointer).cloned()
    }

    /// The address of the shared copy: equal for two `Body`s exactly when [`Body::same`] holds
    /// (while either is alive). A map key for "built from this very body".
    pub fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as *const u8 as usize
    }

    /// Whether both are the same shared copy (not merely equal text): a body that came out of a
    /// cache unchanged.
    pub fn same(a: &Body, b: &Body) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl From<Value> for Body {
    fn from(value: Value) -> Self {
        Self::from_value(&value)
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

/// The length only: a body may be a Secret's.
impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Body({} bytes)", self.as_str().len())
    }
}

impl Serialize for Body {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_serializes_as_its_text() {
        let value = json!({"kind": "ConfigMap", "data": {"a": "1", "n": 420}});
        let body = Body::from_value(&value);
        assert_eq!(body.to_value(), value);
        assert_eq!(serde_json::to_string(&body).unwrap(), body.as_str());
        assert_eq!(body.pointer("/data/n"), Some(json!(420)));
        assert!(Body::same(&body, &body.clone()));
        assert!(!Body::same(&body, &Body::from_value(&value)));
        assert_eq!(body, Body::from_value(&value));
    }
}
