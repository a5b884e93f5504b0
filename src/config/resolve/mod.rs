//! Raw → resolved: defaults applied, values checked, relative paths anchored.
//!
//! Each check that can fail after parsing names the key (`sync[1].path`, 0-based index) and the
//! line its value is on, from the [`Spanned`] fields of the raw structs.
//!
//! The walk over the file and the cross-unit checks are here, with the helpers every table's
//! resolving uses (host paths anchored, durations, a rule run at a value, the error at its
//! line); by role: `tables` (the file-wide `[cluster]`/`[[cluster]]`, `[daemon]` and `[render]`
//! tables), `unit` (one `[[sync]]` table with the tables it holds) and `rules` (the checks of
//! single values: names, refs, versions, paths). The other tables' resolving lives beside their
//! types, in the files of `config`.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

use self::rules::host_path;
use super::raw::{HumanDuration, RawConfig};
use super::{Config, Error, Result, unit::adopted_by};

pub(super) mod rules;
mod tables;
mod unit;

pub(crate) use rules::kube_version;
pub(super) use rules::{dns_label, dns_subdomain};

/// Turns a parsed [`RawConfig`] into a [`Config`]; holds what every error needs.
pub(super) struct Resolver<'a> {
    /// The file's text, to turn byte spans into line numbers.
    pub text: &'a str,
    /// How errors name the file.
    pub origin: &'a str,
    /// Where relative paths are anchored: the config file's directory.
    pub base_dir: &'a Path,
}

/// A unit's inventory parent, for the "two units share one inventory" check.
type InventoryId = (super::InventoryKind, String, String);

impl Resolver<'_> {
    /// Resolves the whole file; the first invalid value found is the error.
    pub fn config(&self, raw: RawConfig) -> Result<Config> {
        let clusters = self.clusters(raw.cluster)?;
        let daemon = self.daemon(raw.daemon, &clusters)?;
        let render = self.render(raw.render)?;
        if raw.sync.is_empty() && raw.sync_set.is_empty() {
            return Err(self.invalid(None, "sync", "at least one [[sync]] unit (or [[sync_set]]) is required"));
        }
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut inventories: HashMap<InventoryId, usize> = HashMap::new();
        let (mut units, mut depends) = (Vec::with_capacity(raw.sync.len()), Vec::new());
        for (index, raw_unit) in raw.sync.into_iter().enumerate() {
            let mut raw_unit = raw_unit.into_inner();
            depends.extend(raw_unit.depends_on.take().map(|d| (index, d)));
            let (unit, name_span, inventory_span) = self.whole_unit(index, raw_unit, &clusters, &daemon, &render)?;
            if let Some(first) = names.insert(unit.name.clone(), index) {
                let message = format!("duplicate unit name `{}` (also sync[{first}])", unit.name);
                return Err(self.invalid(Some(name_span), &format!("sync[{index}].name"), message));
            }
            let inventory = &unit.inventory;
            let id = (inventory.kind, inventory.namespace.clone(), inventory.name.clone());
            if let Some(first) = inventories.insert(id, index) {
                let message = format!(
                    "{}/{}/{} is already the inventory of sync[{first}]; each unit needs its own",
                    inventory.kind, inventory.namespace, inventory.name
                );
                return Err(self.invalid(Some(inventory_span), &format!("sync[{index}].inventory"), message));
            }
            units.push(unit);
        }
        adopted_by(&mut units);
        let provenance = raw.provenance.map(|p| self.provenance(p)).transpose()?;
        for unit in &mut units {
            unit.provenance = provenance.clone();
        }
        let sets = self.sync_sets(raw.sync_set, &clusters, &daemon, &render)?;
        let generated_dependencies = self.depends_on(depends, &mut units, &sets)?;
        let notify = self.notify(raw.notify, &units, &sets)?;
        let preview = self.previews(raw.preview, &units, &sets)?;
        Ok(Config { clusters, daemon, units, render, sets, notify, preview, generated_dependencies, provenance })
    }

    /// A host file path: relative paths are joined to the config file's directory.
    pub(super) fn file(&self, raw: Spanned<String>, key: &str) -> Result<PathBuf> {
        let path = self.check(raw, key, host_path)?;
        Ok(self.base_dir.join(path))
    }

    pub(super) fn duration(
        &self,
        raw: Option<Spanned<HumanDuration>>,
        key: &str,
    ) -> Result<Option<std::time::Duration>> {
        match raw {
            Some(value) if value.get_ref().0.is_zero() => {
                Err(self.invalid(Some(value.span()), key, "must be longer than zero"))
            }
            other => Ok(other.map(|value| value.into_inner().0)),
        }
    }

    /// Runs `rule` on a string value; its message becomes an [`Error::Invalid`] at the value.
    pub(super) fn check(
        &self,
        raw: Spanned<String>,
        key: &str,
        rule: fn(&str) -> std::result::Result<(), String>,
    ) -> Result<String> {
        match rule(raw.get_ref()) {
            Ok(()) => Ok(raw.into_inner()),
            Err(message) => Err(self.invalid(Some(raw.span()), key, message)),
        }
    }

    pub(super) fn invalid(&self, span: Option<Range<usize>>, key: &str, message: impl Into<String>) -> Error {
        Error::Invalid {
            origin: self.origin.to_owned(),
            line: span.map(|span| line_of(self.text, span.start)),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::line_of;

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }
}
