//! The walk over an object's fields: each field read is taken out of its map, and what is
//! left when the walk ends is a warning, so no field is dropped unsaid.

use serde_json::{Map, Value};

use super::Warning;

/// The warnings of an import.
#[derive(Debug, Default)]
pub(super) struct Notes(pub Vec<Warning>);

impl Notes {
    /// Records that `object`'s `field` was not (or only in part) mapped.
    pub fn warn(&mut self, object: &str, field: &str, message: impl Into<String>) {
        self.0.push(Warning { object: object.to_owned(), field: field.to_owned(), message: message.into() });
    }
}

/// The fields of one map of an object not yet read, at `path` (`spec.postBuild`).
#[derive(Debug)]
pub(super) struct Fields {
    object: String,
    path: String,
    map: Map<String, Value>,
}

impl Fields {
    /// The fields of `value` at `path` of `object`; an empty walk when it is not a map.
    pub fn of(object: &str, path: &str, value: Value) -> Fields {
        let map = match value {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Fields { object: object.to_owned(), path: path.to_owned(), map }
    }

    /// The `spec` of `object` as a walk.
    pub fn spec(object: &super::Object) -> Fields {
        Fields::of(&object.id(), "spec", object.body.get("spec").cloned().unwrap_or(Value::Null))
    }

    /// The object's `Kind namespace/name`.
    pub fn object(&self) -> &str {
        &self.object
    }

    /// The path of `key` below this map, `spec.path`.
    pub fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// The value of `key`, taken out (`null` is none).
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    /// The string at `key`; a number or boolean as its text.
    pub fn string(&mut self, key: &str) -> Option<String> {
        match self.take(key)? {
            Value::String(text) => Some(text),
            other @ (Value::Number(_) | Value::Bool(_)) => Some(other.to_string()),
            other => {
                self.map.insert(key.to_owned(), other);
                None
            }
        }
    }

    /// The boolean at `key`.
    pub fn boolean(&mut self, key: &str) -> Option<bool> {
        match self.take(key)? {
            Value::Bool(b) => Some(b),
            other => {
                self.map.insert(key.to_owned(), other);
                None
            }
        }
    }

    /// The map at `key` as a walk of its own; `None` when there is none.
    pub fn child(&mut self, key: &str) -> Option<Fields> {
        let path = self.path(key);
        self.take(key).map(|v| Fields::of(&self.object, &path, v))
    }

    /// The items of the list at `key`, each a walk at `key[i]`.
    pub fn list(&mut self, key: &str) -> Vec<Fields> {
        let path = self.path(key);
        match self.take(key) {
            Some(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| Fields::of(&self.object, &format!("{path}[{i}]"), v))
                .collect(),
            Some(other) => {
                self.map.insert(key.to_owned(), other);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// Takes `key` and warns of it with `message` when it is set.
    pub fn warn_if_set(&mut self, key: &str, message: &str, notes: &mut Notes) {
        if self.take(key).is_some() {
            notes.warn(&self.object, &self.path(key), message);
        }
    }

    /// Ends the walk: each field not read is `no equivalent`.
    pub fn finish(self, notes: &mut Notes) {
        for key in self.map.keys() {
            notes.warn(&self.object, &format!("{}.{key}", self.path), "no equivalent");
        }
    }
}

/// The parts of a Go duration (`1h30m`, `5m0s`, `90s`): number and unit, zero parts left out;
/// `None` when it does not read as one.
fn parts(text: &str) -> Option<Vec<(f64, &str, &str)>> {
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let value: f64 = number.parse().ok()?;
        if !matches!(unit, "h" | "m" | "s" | "ms") {
            return None;
        }
        if value > 0.0 {
            parts.push((value, number, unit));
        }
        rest = tail;
    }
    Some(parts)
}

/// A Flux or Argo CD duration (`1h30m`, `5m0s`) as gitward writes one (`1h 30m`); `None`
/// when it does not read as one.
pub(super) fn duration(text: &str) -> Option<String> {
    let parts = parts(text)?;
    let written: Vec<String> = parts.iter().map(|(_, number, unit)| format!("{number}{unit}")).collect();
    Some(if written.is_empty() { "0s".to_owned() } else { written.join(" ") })
}

/// A duration's length in seconds, for choosing the shortest of several.
pub(super) fn seconds(text: &str) -> Option<f64> {
    let factor = |unit: &str| match unit {
        "h" => 3600.0,
        "m" => 60.0,
        "s" => 1.0,
        _ => 0.001,
    };
    Some(parts(text)?.iter().map(|(value, _, unit)| value * factor(unit)).sum())
}
