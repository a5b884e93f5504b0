//! The config file's JSON Schema, generated from the raw types with `schemars`, so that it
//! cannot drift from what the parser accepts: `gitward schema` prints it, and
//! `schema/config.schema.json` is it, checked in for editors (taplo's `#:schema` directive in
//! `config.toml`) and checked against this output by a test.
//!
//! Derived schemas come from the raw types and their doc comments; here are the ones the
//! derive cannot see: durations, byte sizes, `[cluster]`-or-`[[cluster]]`, and `[[sync_set]]`
//! (a table the parser keeps whole: the set's own keys beside every `[[sync]]` key).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

use super::{ByteSize, HumanDuration, RawCluster, RawClusters, RawConfig, RawSyncUnit};

/// The schema as pretty JSON with a final newline: what `gitward schema` prints.
pub fn json_schema() -> String {
    let schema =
        schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<RawConfig>();
    let mut value = schema.to_value();
    if let Value::Object(root) = &mut value {
        root.insert("title".into(), "gitward config.toml".into());
    }
    without_null(&mut value);
    let mut text = serde_json::to_string_pretty(&value).expect("a JSON value always serializes");
    text.push('\n');
    text
}

/// Takes out the `null` that `Option` fields allow: TOML has no null, a key is absent instead.
fn without_null(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Array(types)) = object.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    object.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = object.get_mut("anyOf") {
                any.retain(|s| s.get("type").is_none_or(|t| t != "null"));
                if any.len() == 1 {
                    let Some(Value::Object(only)) = any.pop() else { unreachable!("schemas are objects") };
                    object.remove("anyOf");
                    object.extend(only);
                }
            }
            object.values_mut().for_each(without_null);
        }
        Value::Array(items) => items.iter_mut().for_each(without_null),
        _ => {}
    }
}

/// What `humantime` reads: whole numbers with units, as `"30s"`, `"5m"`, `"1h 30m"`.
const DURATION_PATTERN: &str = r"^\s*([0-9]+\s*[a-zA-Zµ]+\s*)+$";

/// A size: a whole number and an optional unit ([`super::parse_byte_size`]).
const BYTE_SIZE_PATTERN: &str = r"^\s*[0-9]+\s*(B|KiB|MiB|GiB|kB|KB|MB|GB)?\s*$";

impl JsonSchema for HumanDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A duration: whole numbers with units (s, m, h, d, ms, ...), as \"30s\", \"5m\", \"1h 30m\".",
            "type": "string",
            "pattern": DURATION_PATTERN,
        })
    }
}

impl JsonSchema for ByteSize {
    fn schema_name() -> Cow<'static, str> {
        "ByteSize".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A size in bytes, at least 1: an integer, or a string with a unit (B, KiB, MiB, GiB, kB, MB, GB), as \"4MiB\".",
            "oneOf": [
                { "type": "integer", "minimum": 1 },
                { "type": "string", "pattern": BYTE_SIZE_PATTERN },
            ],
        })
    }
}

impl JsonSchema for RawClusters {
    fn schema_name() -> Cow<'static, str> {
        "Clusters".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let cluster = generator.subschema_for::<RawCluster>();
        json_schema!({
            "oneOf": [cluster, { "type": "array", "items": cluster }],
        })
    }
}

/// The schema of one `[[sync_set]]` table (the type of `RawConfig::sync_set` is a plain
/// table): every `[[sync]]` key but `depends_on` (refused in a set), as a template, and the
/// set's own keys ([`SetKeys`]).
pub(super) struct SyncSetSchema;

impl JsonSchema for SyncSetSchema {
    fn schema_name() -> Cow<'static, str> {
        "SyncSet".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = RawSyncUnit::json_schema(generator);
        let own = SetKeys::json_schema(generator);
        if let (Some(Value::Object(properties)), Some(Value::Object(own))) =
            (schema.get_mut("properties"), own.get("properties"))
        {
            properties.remove("depends_on");
            properties.extend(own.clone());
        }
        schema.insert("required".into(), serde_json::json!(["name", "path_glob"]));
        schema.insert(
            "description".into(),
            "Units generated from the directories of a repository: one per directory that path_glob matches. \
             Every [[sync]] key (but depends_on) is a template of its units' keys: a string may hold {dir}, \
             {path} and {cluster}; path defaults to \"{path}\"."
                .into(),
        );
        schema
    }
}

/// The keys of `[[sync_set]]` that are the set's own (module `set` reads them from the table);
/// only their schema is used.
#[derive(JsonSchema)]
#[allow(dead_code, reason = "never built: the set's own keys are read from the table")]
struct SetKeys {
    /// Required. The directories to make units of: `/`-separated, `*` and `?` within one
    /// component (not matching a leading `.`), no `**`.
    path_glob: String,
    /// One unit per directory per cluster ([[cluster]] names), named with {cluster}. Default:
    /// the unit's `cluster`.
    clusters: Option<Vec<String>>,
    /// Prune the objects of a unit whose directory is gone (true), or stop it and keep them.
    /// Default: false.
    prune_removed: Option<bool>,
    /// Let that prune pass max_prune_fraction and the empty-revision guard. Default: false.
    prune_removed_unguarded: Option<bool>,
    /// More units than this is an error for that revision. Default: 1000.
    #[schemars(range(min = 1))]
    max_units: Option<usize>,
    /// Glob patterns every generated unit's namespace must match. Default: any (then a
    /// namespace from {dir} or {path} needs a service_account).
    namespaces: Option<Namespaces>,
}

/// `namespaces` of `[[sync_set]]`: one pattern or a list.
#[derive(JsonSchema)]
#[schemars(untagged)]
#[allow(dead_code, reason = "never built: only its schema is used")]
enum Namespaces {
    /// One pattern, as "team-*".
    One(String),
    /// Several patterns.
    Many(Vec<String>),
}

#[cfg(test)]
mod tests {
    use super::json_schema;

    #[test]
    fn the_checked_in_schema_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/config.schema.json");
        let shipped = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            shipped == json_schema(),
            "schema/config.schema.json differs from the schema the config types make: run \
             `gitward schema > schema/config.schema.json` (or `cargo run -- schema > schema/config.schema.json`)"
        );
    }

    #[test]
    fn every_property_has_a_description() {
        let schema: serde_json::Value = serde_json::from_str(&json_schema()).expect("the schema is JSON");
        let mut missing = Vec::new();
        let root = "(root)".to_owned();
        let tables = schema["$defs"].as_object().into_iter().flatten().chain([(&root, &schema)]);
        for (table, def) in tables {
            for (key, property) in def["properties"].as_object().into_iter().flatten() {
                if property.get("description").is_none() {
                    missing.push(format!("{table}.{key}"));
                }
            }
        }
        assert!(missing.is_empty(), "properties without a description: {missing:?}");
    }

    #[test]
    fn a_misspelt_key_is_an_unknown_property() {
        let schema: serde_json::Value = serde_json::from_str(&json_schema()).expect("the schema is JSON");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["$defs"]["RawDaemon"]["additionalProperties"], false);
        assert_eq!(schema["$defs"]["SyncSet"]["additionalProperties"], false);
        assert!(schema["$defs"]["SyncSet"]["properties"].get("path_glob").is_some());
        assert!(schema["$defs"]["SyncSet"]["properties"].get("repo").is_some());
    }
}
