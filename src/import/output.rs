//! The config an import writes: `[daemon]`, `[[sync]]` and `[[sync_set]]` tables made with
//! `toml_edit`, each table after a comment naming the object it came from.

use std::collections::BTreeSet;

use serde_json::Value;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table};

use super::Tool;
use super::fields::{Notes, seconds};

/// One table written and the object it came from.
#[derive(Debug)]
pub(super) struct Written {
    /// `Kustomization flux-system/apps`, written as the table's comment.
    pub origin: String,
    /// The table.
    pub table: Table,
}

/// The config being made.
#[derive(Debug, Default)]
pub(super) struct Output {
    /// `[[sync]]` tables, in the order made.
    pub units: Vec<Written>,
    /// `[[sync_set]]` tables.
    pub sets: Vec<Written>,
    /// `[daemon] interval` and `resync_interval`: the shortest asked, and who asked it.
    pub intervals: [Option<(String, String)>; 2],
    /// `[daemon] self_heal`, when an object asked for it.
    pub self_heal: Option<bool>,
    names: BTreeSet<String>,
}

/// Which `[daemon]` interval: the poll of sources, or the resync of units.
#[derive(Debug, Clone, Copy)]
pub(super) enum Interval {
    /// `[daemon] interval`: how often repositories are fetched.
    Poll,
    /// `[daemon] resync_interval`: how often every unit is synced again with no change.
    Resync,
}

impl Output {
    /// A unit name for `name` (of `namespace`) not yet used: `name` made a valid unit name
    /// (lowercase letters, digits and `-`, at most 63), else `namespace-name`, else a number
    /// added.
    pub fn claim(&mut self, namespace: &str, name: &str) -> String {
        let mut candidates = vec![unit_name(name)];
        if !namespace.is_empty() {
            candidates.push(unit_name(&format!("{namespace}-{name}")));
        }
        let base = candidates.last().cloned().unwrap_or_default();
        candidates.extend((2..).map(|n| unit_name(&format!("{base}-{n}"))).take(1000));
        let chosen = candidates.into_iter().find(|c| !self.names.contains(c)).unwrap_or(base);
        self.names.insert(chosen.clone());
        chosen
    }

    /// Notes an interval an object asks for; the shortest is kept.
    pub fn interval(&mut self, which: Interval, value: &str, origin: &str) {
        let slot = &mut self.intervals[which as usize];
        let shorter = match slot {
            Some((kept, _)) => seconds(value).unwrap_or(f64::MAX) < seconds(kept).unwrap_or(f64::MAX),
            None => true,
        };
        if shorter {
            let written = super::fields::duration(value).unwrap_or_else(|| value.to_owned());
            *slot = Some((written, origin.to_owned()));
        }
    }

    /// The config file's text.
    pub fn render(&self, tool: Tool) -> String {
        let mut doc = DocumentMut::new();
        let from = match tool {
            Tool::Flux => "Flux",
            Tool::Argocd => "Argo CD",
        };
        doc.decor_mut().set_prefix(format!(
            "# Made by `gitward import` from {from}'s objects. Check it with `gitward validate`;\n\
             # the fields with no equivalent were printed as warnings.\n"
        ));
        let mut daemon = Table::new();
        let keys = ["interval", "resync_interval"];
        for (key, slot) in keys.iter().zip(&self.intervals) {
            if let Some((value, origin)) = slot {
                daemon.insert(key, toml_edit::value(value.as_str()));
                if let Some(mut k) = daemon.key_mut(key) {
                    k.leaf_decor_mut().set_prefix(format!("# the shortest asked, by {origin}\n"));
                }
            }
        }
        if let Some(heal) = self.self_heal {
            daemon.insert("self_heal", toml_edit::value(heal));
        }
        if !daemon.is_empty() {
            doc.insert("daemon", Item::Table(daemon));
        }
        for (key, written) in [("sync", &self.units), ("sync_set", &self.sets)] {
            if !written.is_empty() {
                doc.insert(key, Item::ArrayOfTables(array_of(written)));
            }
        }
        let mut text = doc.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }
}

/// The tables, each after its origin's comment.
fn array_of(written: &[Written]) -> ArrayOfTables {
    let mut array = ArrayOfTables::new();
    for w in written {
        let mut table = w.table.clone();
        table.decor_mut().set_prefix(format!("\n# {}\n", w.origin));
        array.push(table);
    }
    array
}

/// `name` as a unit name: lowercase, each other character `-`, no `-` at either end, at most
/// 63 characters.
pub(super) fn unit_name(name: &str) -> String {
    let mapped: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let trimmed: String = mapped.trim_matches('-').chars().take(63).collect();
    let trimmed = trimmed.trim_end_matches('-').to_owned();
    if trimmed.is_empty() { "unit".to_owned() } else { trimmed }
}

/// `value` (JSON) as a TOML value; a `null` anywhere is left out with a warning, since TOML
/// has none.
pub(super) fn toml_value(value: &Value, object: &str, path: &str, notes: &mut Notes) -> Option<toml_edit::Value> {
    Some(match value {
        Value::Null => {
            notes.warn(object, path, "null has no TOML equivalent: left out");
            return None;
        }
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => {
            let mut array = Array::new();
            for (i, item) in items.iter().enumerate() {
                array.extend(toml_value(item, object, &format!("{path}[{i}]"), notes));
            }
            array.into()
        }
        Value::Object(map) => {
            let mut table = InlineTable::new();
            for (key, item) in map {
                if let Some(v) = toml_value(item, object, &format!("{path}.{key}"), notes) {
                    table.insert(key, v);
                }
            }
            table.into()
        }
    })
}

/// A table whose keys are `map`'s, each value inline: `[sync.helm.values]`.
pub(super) fn toml_table(map: &serde_json::Map<String, Value>, object: &str, path: &str, notes: &mut Notes) -> Table {
    let mut table = Table::new();
    for (key, item) in map {
        if let Some(v) = toml_value(item, object, &format!("{path}.{key}"), notes) {
            table.insert(key, Item::Value(v));
        }
    }
    table
}

/// A string array.
pub(super) fn strings<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Item {
    let mut array = Array::new();
    for item in items {
        array.push(item.into());
    }
    Item::Value(array.into())
}

/// A label selector written as text (`app=web,tier=front`) as `label_selector.match_labels`
/// of an ignore rule; any other form of requirement is warned of.
pub(super) fn label_selector(selector: &str, rule: &mut Table, object: &str, path: &str, notes: &mut Notes) {
    let mut labels = InlineTable::new();
    for requirement in selector.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        match requirement.split_once('=') {
            Some((key, value)) if !key.ends_with('!') => {
                labels.insert(key.trim(), value.trim_start_matches('=').trim().into());
            }
            _ => notes.warn(object, path, format!("`{requirement}`: only key=value requirements are mapped")),
        }
    }
    let mut selector = InlineTable::new();
    selector.insert("match_labels", labels.into());
    rule.insert("label_selector", Item::Value(selector.into()));
}
