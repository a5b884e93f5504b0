//! Reading a chart repository's `index.yaml` (Helm's `IndexFile`): only the wanted chart's
//! `entries.<chart>[]` are kept (`version`, `digest`, `urls`); every other chart's entries
//! are skipped as they stream past, so memory follows the one chart, not the repository.
//!
//! An index is one YAML document listing every version of every chart, so a public
//! repository's (thousands of entries, tens of MiB) holds millions of YAML nodes, far past
//! serde-saphyr's default budget of 250,000 nodes and 1,000,000 events. The node and event
//! budgets here grow with the bytes read — a node takes at least one byte of input, an
//! event at most two per node — so any index under the size cap
//! ([`super::MAX_INDEX_BYTES`]) that is plain YAML parses, while work stays linear in bytes
//! already bounded by that cap. The budgets that stop alias expansion (aliases, anchors,
//! recorded anchor events and bytes, the alias-to-anchor ratio) keep serde-saphyr's fixed
//! defaults, whatever the size: a small "billion laughs" document still fails.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// One version of the wanted chart as the index lists it (also the shape of a kept answer,
/// [`super::kept`]).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub(super) struct Entry {
    /// The chart version (`version:`).
    pub version: String,
    /// `sha256:<hex>` or `<hex>` of the archive, when the index gives it.
    #[serde(default)]
    pub digest: Option<String>,
    /// Where the archive is, absolute or relative to the repository URL.
    #[serde(default)]
    pub urls: Vec<String>,
}

/// The parse budget for an index of `bytes` bytes: nodes one per byte and events two per
/// byte (never below serde-saphyr's defaults); alias, anchor and depth limits unchanged.
fn budget(bytes: usize) -> serde_saphyr::Budget {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(bytes.saturating_add(16));
    budget.max_events = budget.max_events.max(bytes.saturating_mul(2).saturating_add(16));
    budget
}

/// The entries of `chart` in the index `text`, in the order listed (none when the index
/// does not list the chart, or has no `entries`). Errors: the parser's message (syntax, a
/// field of the wrong type, a breached budget such as too many aliases).
pub(super) fn entries(text: &str, chart: &str) -> std::result::Result<Vec<Entry>, String> {
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget(text.len()));
    // Skipped scalars are typed by their look alone: an unquoted hex digest such as
    // `…0001e460` reads as an overflowing float, which must not fail the whole index.
    options.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::PassThrough;
    serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| IndexOf(chart).deserialize(de))
        .map_err(|e| e.to_string())
}

/// The top-level mapping: `entries` read for one chart, other keys (`apiVersion`,
/// `generated`, ...) skipped.
struct IndexOf<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for IndexOf<'_> {
    type Value = Vec<Entry>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Vec<Entry>, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for IndexOf<'_> {
    type Value = Vec<Entry>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chart repository index (a mapping with `entries`)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Entry>, A::Error> {
        let mut found = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "entries" {
                found.extend(map.next_value_seed(EntriesOf(self.0))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// `entries`: the wanted chart's list read, every other chart's skipped unread.
struct EntriesOf<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for EntriesOf<'_> {
    type Value = Vec<Entry>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Vec<Entry>, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntriesOf<'_> {
    type Value = Vec<Entry>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping of chart names to lists of versions")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<Entry>, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Vec<Entry>, E> {
        Ok(Vec::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Entry>, A::Error> {
        let mut found = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if name == self.0 {
                found.extend(map.next_value::<Vec<Entry>>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index like `helm repo index` writes: `charts` charts of `versions` versions each,
    /// with the fields Helm records (description, maintainers, urls, digest, dates). Digests
    /// are unquoted, and some read as overflowing floats (`…1e460`) when skipped untyped.
    fn generated(charts: usize, versions: usize) -> String {
        let mut text = String::from("apiVersion: v1\nentries:\n");
        for c in 0..charts {
            text.push_str(&format!("  chart-{c}:\n"));
            for v in 0..versions {
                text.push_str(&format!(
                    "  - apiVersion: v2\n    appVersion: 1.{v}.0\n    created: \"2024-01-01T00:00:00Z\"\n    \
                     description: A chart of the generated index, number {c}\n    \
                     digest: {:064x}\n    keywords:\n    - generated\n    - test\n    \
                     maintainers:\n    - email: team@example.com\n      name: team\n    name: chart-{c}\n    \
                     urls:\n    - chart-{c}-0.{v}.0.tgz\n    version: 0.{v}.0\n",
                    c * 1000 + v
                ));
            }
        }
        text.push_str("generated: \"2024-01-01T00:00:00Z\"\n");
        text
    }

    #[test]
    fn a_large_index_parses_and_only_the_wanted_charts_entries_are_kept() {
        let text = generated(200, 100);
        // Past the default budget of 250,000 nodes: what a public repository's index is.
        assert!(text.len() > 4 << 20, "{} bytes", text.len());
        #[derive(Debug, Deserialize)]
        struct Whole {
            #[allow(dead_code)]
            entries: std::collections::HashMap<String, Vec<Entry>>,
        }
        let default = serde_saphyr::from_str::<Whole>(&text).unwrap_err().to_string();
        assert!(default.contains("budget"), "{}", &default[..default.len().min(300)]);
        let found = entries(&text, "chart-7").unwrap();
        assert_eq!(found.len(), 100);
        assert_eq!(found[3].version, "0.3.0");
        assert_eq!(found[3].urls, ["chart-7-0.3.0.tgz"]);
        assert_eq!(found[3].digest.as_deref(), Some(format!("{:064x}", 7003).as_str()));
        assert!(entries(&text, "absent").unwrap().is_empty());
    }

    #[test]
    fn an_alias_bomb_still_fails_however_large_the_budget_for_nodes() {
        // "Billion laughs": each level refers to the one before ten times, 10^9 nodes from a
        // few hundred bytes; padded so that the scaled node budget is large.
        let mut text = String::from("apiVersion: v1\na: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut previous = 'a';
        for level in ['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'] {
            let refs = vec![format!("*{previous}"); 10].join(", ");
            text.push_str(&format!("{level}: &{level} [{refs}]\n"));
            previous = level;
        }
        text.push_str(&format!("entries:\n  other: *{previous}\n  bomb:\n  - version: 1.0.0\n"));
        text.push_str(&format!("padding: \"{}\"\n", "p".repeat(32 << 20)));
        let error = match entries(&text, "bomb") {
            Ok(found) => panic!("the alias bomb parsed: {} entries", found.len()),
            Err(error) => error,
        };
        assert!(error.contains("budget"), "{error}");
    }

    #[test]
    fn an_index_without_entries_or_with_null_entries_lists_nothing() {
        assert!(entries("apiVersion: v1\n", "a").unwrap().is_empty());
        assert!(entries("apiVersion: v1\nentries:\n", "a").unwrap().is_empty());
        let error = entries("entries:\n  a:\n  - digest: x\n", "a").unwrap_err();
        assert!(error.contains("version"), "{error}");
    }
}
