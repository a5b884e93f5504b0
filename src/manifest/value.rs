//! Building the JSON value of one document the way kubectl's conversion produces it.
//!
//! kubectl reads YAML with `sigs.k8s.io/yaml` (go-yaml v2, YAML 1.1) into Go values, prints them
//! as JSON with `encoding/json`, and reads that JSON back into an unstructured object whose
//! numbers are `int64` or `float64` (`k8s.io/apimachinery/pkg/util/json`). Two steps of that
//! round trip change values, and [`KubeValue`] repeats them so a manifest means what kubectl
//! reads it to mean:
//!
//! - **Map keys become strings**: `true`/`false` for booleans (so `on:` and `yes:` read as
//!   `"true"`), decimal for integers (`0x10:` reads as `"16"`), Go's `%g` of the float32 value for
//!   floats (`1.0:` reads as `"1"`). A null, sequence or mapping key has no JSON form; kubectl
//!   rejects it and so do we.
//! - **Numbers are `int64` or `float64`**: a float with an integral value that fits `int64` is an
//!   integer (`1.0` reads as `1`, because Go prints `float64(1)` as `1`); an integer beyond
//!   `int64` is a float.
//!
//! Two keys that convert to the same string (`1:` and `"1":`) are rejected: kubectl keeps one of
//! them at random (Go map order), which no manifest can mean.
//!
//! YAML `<<` merge keys are expanded here too, with go-yaml v2's precedence rather than the
//! merge-key spec's (serde-saphyr's): the merged mapping replaces every entry set before the `<<`
//! key, entries written after it replace merged ones, several `<<` keys apply in turn, and in a
//! sequence of mappings the earlier mapping wins. So `{a: 1, <<: {a: 2}}` reads as `a: 2`, as
//! kubectl reads it.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A document's value, read by the rules in the module doc. `MERGE_KEYS` says whether a `<<` key
/// is a YAML merge key (YAML) or an ordinary key (JSON).
pub(crate) struct KubeValue<const MERGE_KEYS: bool>(pub Value);

/// A YAML document's value (serde-saphyr, with merge keys left to us as ordinary keys).
pub(crate) type YamlValue = KubeValue<true>;

/// A JSON document's value (serde_json).
pub(crate) type JsonValue = KubeValue<false>;

/// The YAML 1.1 merge key.
const MERGE_KEY: &str = "<<";

impl<'de, const MERGE_KEYS: bool> Deserialize<'de> for KubeValue<MERGE_KEYS> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor::<MERGE_KEYS>).map(KubeValue)
    }
}

/// Converts a float as kubectl's JSON round trip does: integral values within `int64` become
/// integers, everything else stays a float. `None` for NaN and infinities (JSON has no form).
fn number_from_f64(value: f64) -> Option<Value> {
    // 2^63 is exactly representable; every integral f64 in [-2^63, 2^63) fits an i64.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if value.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&value) {
        return Some(Value::from(value as i64));
    }
    Number::from_f64(value).map(Value::Number)
}

fn number_from_u64(value: u64) -> Value {
    match i64::try_from(value) {
        Ok(small) => Value::from(small),
        // Beyond int64 kubectl's unstructured JSON holds a float64.
        Err(_) => number_from_f64(value as f64).unwrap_or(Value::Null),
    }
}

struct ValueVisitor<const MERGE_KEYS: bool>;

impl<'de, const MERGE_KEYS: bool> Visitor<'de> for ValueVisitor<MERGE_KEYS> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        KubeValue::<MERGE_KEYS>::deserialize(deserializer).map(|v| v.0)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        KubeValue::<MERGE_KEYS>::deserialize(deserializer).map(|v| v.0)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(number_from_u64(value))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        self.visit_f64(value as f64)
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        self.visit_f64(value as f64)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        number_from_f64(value).ok_or_else(|| E::custom(format!("{value} is not a finite number")))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_bytes<E>(self, value: &[u8]) -> Result<Value, E> {
        // A `!!binary` scalar that is not UTF-8: Go keeps the bytes in a string and its JSON
        // encoder replaces invalid sequences with U+FFFD, as this does.
        Ok(Value::String(String::from_utf8_lossy(value).into_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(KubeValue::<MERGE_KEYS>(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        // Keys brought in by merges, which a key written later may replace.
        let mut merged = HashSet::new();
        while let Some(MapKey(key)) = map.next_key()? {
            let KubeValue::<MERGE_KEYS>(value) = map.next_value()?;
            if MERGE_KEYS && key == MERGE_KEY {
                merge(&mut object, &mut merged, value).map_err(de::Error::custom)?;
            } else if object.contains_key(&key) && !merged.remove(&key) {
                return Err(de::Error::custom(format!(
                    "duplicate mapping key `{key}` (keys are compared after conversion to \
                     strings, as kubectl converts them)"
                )));
            } else {
                object.insert(key, value);
            }
        }
        Ok(Value::Object(object))
    }
}

/// Expands a `<<` merge key's value into `object` as go-yaml v2 does (see the module doc).
fn merge(object: &mut Map<String, Value>, merged: &mut HashSet<String>, value: Value) -> Result<(), &'static str> {
    let sources = match value {
        Value::Object(source) => vec![source],
        // Applied last to first, so the first mapping's entries win.
        Value::Array(items) => items
            .into_iter()
            .rev()
            .map(|item| match item {
                Value::Object(source) => Ok(source),
                _ => Err(MERGE_VALUE_ERROR),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(MERGE_VALUE_ERROR),
    };
    for source in sources {
        for (key, value) in source {
            merged.insert(key.clone());
            object.insert(key, value);
        }
    }
    Ok(())
}

const MERGE_VALUE_ERROR: &str = "a `<<` merge key needs a mapping or a sequence of mappings as its value";

/// A mapping key converted to the string kubectl's `sigs.k8s.io/yaml` gives it.
struct MapKey(String);

impl<'de> Deserialize<'de> for MapKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor).map(MapKey)
    }
}

struct KeyVisitor;

impl KeyVisitor {
    fn unsupported<E: de::Error>(what: &str) -> E {
        E::custom(format!("a {what} cannot be a mapping key: JSON keys are strings (kubectl rejects it too)"))
    }
}

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar mapping key")
    }

    fn visit_bool<E>(self, value: bool) -> Result<String, E> {
        Ok(value.to_string())
    }

    fn visit_i64<E>(self, value: i64) -> Result<String, E> {
        Ok(value.to_string())
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<String, E> {
        // go-yaml v2 holds integers beyond int64 as uint64, a key type kubectl rejects.
        match i64::try_from(value) {
            Ok(small) => Ok(small.to_string()),
            Err(_) => Err(Self::unsupported("number beyond int64")),
        }
    }

    fn visit_i128<E: de::Error>(self, _value: i128) -> Result<String, E> {
        Err(Self::unsupported("number beyond int64"))
    }

    fn visit_u128<E: de::Error>(self, _value: u128) -> Result<String, E> {
        Err(Self::unsupported("number beyond int64"))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<String, E> {
        if value.is_finite() { Ok(go_format_float32_g(value)) } else { Err(Self::unsupported("non-finite number")) }
    }

    fn visit_str<E>(self, value: &str) -> Result<String, E> {
        Ok(value.to_owned())
    }

    fn visit_string<E>(self, value: String) -> Result<String, E> {
        Ok(value)
    }

    fn visit_bytes<E>(self, value: &[u8]) -> Result<String, E> {
        Ok(String::from_utf8_lossy(value).into_owned())
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Err(Self::unsupported("null"))
    }

    fn visit_none<E: de::Error>(self) -> Result<String, E> {
        Err(Self::unsupported("null"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<String, A::Error> {
        Err(Self::unsupported("sequence"))
    }

    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<String, A::Error> {
        Err(Self::unsupported("mapping"))
    }
}

/// Formats a float key as Go's `strconv.FormatFloat(f, 'g', -1, 32)`, which `sigs.k8s.io/yaml`
/// uses for float map keys: the shortest digits that round-trip the float32 value, in `%e` form
/// (`1.2345679e+08`) when the decimal exponent is below -4 or at least 6, else in `%f` form
/// (`2.5`, `1000`).
fn go_format_float32_g(value: f64) -> String {
    let value = value as f32;
    if value == 0.0 {
        return if value.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rust prints the shortest round-tripping digits too: `d.ddddde<exp>`.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if value < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{fraction}e{exp_sign}{:02}", exponent.abs());
    }
    let point = exponent + 1; // digits before the decimal point
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = point as usize;
    if point >= digits.len() {
        let zeros = "0".repeat(point - digits.len());
        format!("{sign}{digits}{zeros}")
    } else {
        let (int, frac) = digits.split_at(point);
        format!("{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_keys_format_like_go_float32_g() {
        let cases = [
            (1.0, "1"),
            (2.5, "2.5"),
            (1000.0, "1000"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (123456789.0, "1.2345679e+08"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-7.25, "-7.25"),
            (0.1, "0.1"),
            (-0.0, "-0"),
            (1e21, "1e+21"),
        ];
        for (value, expected) in cases {
            assert_eq!(go_format_float32_g(value), expected, "{value}");
        }
    }

    #[test]
    fn integral_float_reads_as_integer_within_int64() {
        assert_eq!(number_from_f64(1.0), Some(Value::from(1)));
        assert_eq!(number_from_f64(-0.0), Some(Value::from(0)));
        assert_eq!(number_from_f64(1.5), Some(Value::from(1.5)));
        assert_eq!(number_from_f64(1e20), Some(Value::from(1e20)));
        assert_eq!(number_from_f64(f64::NAN), None);
        assert_eq!(number_from_u64(u64::MAX), Value::from(u64::MAX as f64));
    }
}
