//! `depends_on` of a `[[sync]]` unit: the units it syncs after, as Flux's Kustomization
//! `spec.dependsOn`. Each entry is a unit's name, or `{ unit = "…", ready_expr = "…" }` with a
//! CEL expression over the dependency's recorded status (the health module's `ready` evaluates
//! it and documents its variables). Resolving checks every name against the file's units,
//! compiles each expression, and refuses a cycle, naming it (`depends_on cycle: a -> b -> a`).
//!
//! A name no `[[sync]]` unit has, but a `[[sync_set]]`'s `name` template could make
//! (`apps-shop` of `apps-{dir}`), is kept as a [`GeneratedDependency`] and resolved when the
//! sets expand ([`super::Config::with_sets`]): a set that made units but not that one is an
//! error naming the entry; until some set makes it, the dependent waits for it
//! ([`super::SyncUnit::depends_on_unmade`]). Generated units have no `depends_on` of their
//! own (a template may not say it), so they close no cycle.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use toml::Spanned;

use super::raw::RawDependency;
use super::resolve::Resolver;
use super::{InventoryConfig, Result, SyncSet, SyncUnit};

/// A unit another unit depends on, resolved: where its record is read and how it is judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The dependency's unit name (a unit of the same file).
    pub unit: String,
    /// A CEL expression over the dependency's recorded status that must evaluate to `true`
    /// (the health module's `ready::ExprInput` lists its variables); `None`: the recorded result must be
    /// `healthy`. Compiled when the file is loaded, so a syntax error is a config error.
    pub ready_expr: Option<String>,
    /// The dependency's ApplySet parent, whose record is read (copied from its unit, so a
    /// reader needs only this unit's settings).
    pub inventory: InventoryConfig,
    /// The dependency's cluster (`[[cluster]]` name).
    pub cluster: String,
    /// Both units follow the same git repository and ref: the dependency must have recorded
    /// the very revision this unit is about to sync (Flux's check that a dependency on the same
    /// source is up to date), not merely its own last attempt — or one with the same tree at
    /// the dependency's `path` (the health module's `ready::Wanted`).
    pub same_source: bool,
    /// The dependency's directory in its repository (copied from its unit).
    pub path: super::UnitPath,
}

impl Dependency {
    /// The entry of unit `of` naming unit `to`, with its `ready_expr`.
    pub(super) fn between(of: &SyncUnit, to: &SyncUnit, ready_expr: Option<String>) -> Self {
        let same_source = of.is_git() && to.is_git() && of.repo == to.repo && of.reference == to.reference;
        Dependency {
            unit: to.name.clone(),
            ready_expr,
            inventory: to.inventory.clone(),
            cluster: to.cluster.clone(),
            same_source,
            path: to.path.clone(),
        }
    }
}

/// A `depends_on` entry of a `[[sync]]` unit naming a unit that only a `[[sync_set]]` can make:
/// resolved once the sets expand ([`super::Config::with_sets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedDependency {
    /// The dependent `[[sync]]` unit's name.
    pub of: String,
    /// The name of the unit it depends on.
    pub unit: String,
    /// The entry's `ready_expr`, compiled at load.
    pub ready_expr: Option<String>,
    /// Where the entry is, for an error: `sync[<index>].depends_on`.
    pub(super) key: String,
    /// The entry's 1-based line.
    pub(super) line: Option<usize>,
}

/// Whether some set of `sets` could make a unit named `name`.
pub(super) fn made_by_a_set(sets: &[SyncSet], name: &str) -> bool {
    sets.iter().any(|s| s.could_make(name))
}

/// `no unit named `x` (units: …)`, with the sets' name templates when there are sets.
fn unknown_unit(name: &str, units: &[SyncUnit], sets: &[SyncSet]) -> String {
    let known: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
    let mut message = format!("no unit named `{name}` (units: {}", known.join(", "));
    if !sets.is_empty() {
        let made: Vec<&str> = sets.iter().map(|s| s.name.as_str()).collect();
        message.push_str(&format!("; sync sets make: {}", made.join(", ")));
    }
    message.push(')');
    message
}

impl Resolver<'_> {
    /// The raw `depends_on` of each unit (by index, with its span) resolved against `units`:
    /// every name must be another unit of the file or one a set of `sets` could make (returned,
    /// resolved when the sets expand), every `ready_expr` must compile, and no chain may lead
    /// back to its start.
    ///
    /// Errors: [`super::Error::Invalid`] at `sync[i].depends_on`, naming an unknown unit, the
    /// unit itself, a CEL syntax error, or the cycle (`depends_on cycle: a -> b -> a`).
    pub(super) fn depends_on(
        &self,
        raw: Vec<(usize, Spanned<Vec<Spanned<RawDependency>>>)>,
        units: &mut [SyncUnit],
        sets: &[SyncSet],
    ) -> Result<Vec<GeneratedDependency>> {
        let mut generated: Vec<GeneratedDependency> = Vec::new();
        let index_of: HashMap<String, usize> = units.iter().enumerate().map(|(i, u)| (u.name.clone(), i)).collect();
        let mut spans: BTreeMap<usize, Range<usize>> = BTreeMap::new();
        for (index, list) in raw {
            let key = format!("sync[{index}].depends_on");
            spans.insert(index, list.span());
            for entry in list.into_inner() {
                let span = entry.span();
                let (name, ready_expr) = match entry.into_inner() {
                    RawDependency::Name(name) => (name, None),
                    RawDependency::Table(t) => (t.unit, t.ready_expr),
                };
                if let Some(expr) = &ready_expr
                    && let Err(e) = cel::Program::compile(expr)
                {
                    let message = format!("ready_expr of `{name}` is not a CEL expression: {e}");
                    return Err(self.invalid(Some(span), &key, message));
                }
                let Some(&dep) = index_of.get(&name) else {
                    if !made_by_a_set(sets, &name) {
                        return Err(self.invalid(Some(span), &key, unknown_unit(&name, units, sets)));
                    }
                    let of = units[index].name.clone();
                    if !generated.iter().any(|g| g.of == of && g.unit == name) {
                        let line = Some(super::resolve::line_of(self.text, span.start));
                        generated.push(GeneratedDependency { of, unit: name, ready_expr, key: key.clone(), line });
                    }
                    continue;
                };
                if dep == index {
                    return Err(self.invalid(Some(span), &key, format!("unit `{name}` cannot depend on itself")));
                }
                let resolved = Dependency::between(&units[index], &units[dep], ready_expr);
                if !units[index].depends_on.iter().any(|d| d.unit == resolved.unit) {
                    units[index].depends_on.push(resolved);
                }
            }
        }
        if let Some(cycle) = find_cycle(units) {
            let start = index_of[&cycle[0]];
            let message = format!("depends_on cycle: {}", cycle.join(" -> "));
            return Err(self.invalid(spans.get(&start).cloned(), &format!("sync[{start}].depends_on"), message));
        }
        Ok(generated)
    }
}

impl super::Config {
    /// Resolves [`super::Config::generated_dependencies`] against the units now in the config
    /// (the sets' units added; `listed`: how many sets, from the first, are among them): each
    /// entry whose unit exists is added to its dependent's `depends_on`; one that no unit
    /// answers is an error when every set that could make it is listed and made units, else
    /// the dependent waits for it ([`SyncUnit::depends_on_unmade`]). `[[notify]] units` are
    /// checked the same way.
    ///
    /// Errors: [`super::Error::Invalid`] at the entry (`sync[i].depends_on`, `notify[i].units`),
    /// naming the unit and the units the sets made.
    pub(super) fn resolve_generated(&mut self, listed: usize) -> Result<()> {
        for entry in self.generated_dependencies.clone() {
            let Some(of) = self.units.iter().position(|u| u.name == entry.of) else { continue };
            match self.units.iter().find(|u| u.name == entry.unit) {
                Some(to) => {
                    let dependency = Dependency::between(&self.units[of], to, entry.ready_expr.clone());
                    if !self.units[of].depends_on.iter().any(|d| d.unit == dependency.unit) {
                        self.units[of].depends_on.push(dependency);
                    }
                }
                None => {
                    self.made_none(&entry.unit, listed, &entry.key, entry.line)?;
                    if !self.units[of].depends_on_unmade.contains(&entry.unit) {
                        self.units[of].depends_on_unmade.push(entry.unit);
                    }
                }
            }
        }
        let named: Vec<(usize, String)> =
            self.notify.iter().enumerate().flat_map(|(i, n)| n.units.iter().map(move |u| (i, u.clone()))).collect();
        for (index, name) in named {
            if !self.units.iter().any(|u| u.name == name) {
                self.made_none(&name, listed, &format!("notify[{index}].units"), None)?;
            }
        }
        Ok(())
    }

    /// Checks that `name`, which no unit has, may yet be made: some set that could make it is
    /// not among the first `listed`, or made no units (not listed yet).
    ///
    /// Errors: [`super::Error::Invalid`] at `key` and `line`, naming the sets and their units.
    fn made_none(&self, name: &str, listed: usize, key: &str, line: Option<usize>) -> Result<()> {
        let makers: Vec<(usize, &SyncSet)> = self.sets.iter().enumerate().filter(|(_, s)| s.could_make(name)).collect();
        let made = |index: usize| self.units.iter().filter(|u| self.sets[index].could_make(&u.name)).count();
        if makers.iter().any(|&(index, _)| index >= listed || made(index) == 0) {
            return Ok(());
        }
        let sets: Vec<String> = makers.iter().map(|(i, s)| format!("sync_set[{i}] (`{}`)", s.name)).collect();
        let mut units: Vec<&str> = self
            .units
            .iter()
            .filter(|u| makers.iter().any(|(_, s)| s.could_make(&u.name)))
            .map(|u| u.name.as_str())
            .collect();
        let more = units.len().saturating_sub(10);
        units.truncate(10);
        let mut message = format!("no unit named `{name}`: {} made {}", sets.join(" and "), units.join(", "));
        if more > 0 {
            message.push_str(&format!(" and {more} more"));
        }
        let origin = makers[0].1.origin().to_owned();
        Err(super::Error::Invalid { origin, line, key: key.to_owned(), message })
    }
}

/// The first cycle of `depends_on` among `units`, as unit names from its first unit (in file
/// order) back to it: `["a", "b", "a"]`; `None` when the graph has none. A depth-first search
/// (white/grey/black), each unit visited once.
pub(super) fn find_cycle(units: &[SyncUnit]) -> Option<Vec<String>> {
    let index_of: HashMap<&str, usize> = units.iter().enumerate().map(|(i, u)| (u.name.as_str(), i)).collect();
    let mut colour = vec![0u8; units.len()];
    let mut path = Vec::new();
    for start in 0..units.len() {
        if colour[start] == 0
            && let Some(cycle) = visit(units, &index_of, start, &mut colour, &mut path)
        {
            return Some(cycle);
        }
    }
    None
}

/// One step of [`find_cycle`]'s search from `at`, `path` the units on the way there.
fn visit(
    units: &[SyncUnit],
    index_of: &HashMap<&str, usize>,
    at: usize,
    colour: &mut [u8],
    path: &mut Vec<usize>,
) -> Option<Vec<String>> {
    colour[at] = 1;
    path.push(at);
    for dep in &units[at].depends_on {
        let Some(&next) = index_of.get(dep.unit.as_str()) else { continue };
        if colour[next] == 1 {
            let from = path.iter().position(|&i| i == next).unwrap_or(0);
            let mut cycle: Vec<String> = path[from..].iter().map(|&i| units[i].name.clone()).collect();
            cycle.push(units[next].name.clone());
            return Some(cycle);
        }
        if colour[next] == 0
            && let Some(cycle) = visit(units, index_of, next, colour, path)
        {
            return Some(cycle);
        }
    }
    path.pop();
    colour[at] = 2;
    None
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn load(units: &str) -> Result<Config, String> {
        Config::from_toml(units, std::path::Path::new("/etc/gitward"), "config.toml").map_err(|e| e.to_string())
    }

    fn unit(name: &str, depends: &str) -> String {
        format!("[[sync]]\nname = \"{name}\"\nrepo = \"/srv/git/r\"\npath = \"{name}\"\ndepends_on = {depends}\n")
    }

    #[test]
    fn a_cycle_is_refused_naming_it() {
        let text = [unit("a", "[\"b\"]"), unit("b", "[\"c\"]"), unit("c", "[\"a\"]")].concat();
        let error = load(&text).unwrap_err();
        assert!(error.contains("depends_on cycle: a -> b -> c -> a"), "{error}");
        assert!(error.contains("sync[0].depends_on"), "{error}");
    }

    #[test]
    fn a_cycle_not_through_the_first_unit_is_named_from_where_it_closes() {
        let text = [unit("a", "[\"b\"]"), unit("b", "[\"c\"]"), unit("c", "[\"b\"]")].concat();
        let error = load(&text).unwrap_err();
        assert!(error.contains("depends_on cycle: b -> c -> b"), "{error}");
    }

    #[test]
    fn an_unknown_unit_and_the_unit_itself_are_refused() {
        let error = load(&[unit("a", "[\"nope\"]"), unit("b", "[]")].concat()).unwrap_err();
        assert!(error.contains("no unit named `nope`") && error.contains("sync[0].depends_on"), "{error}");
        let error = load(&unit("a", "[\"a\"]")).unwrap_err();
        assert!(error.contains("cannot depend on itself"), "{error}");
    }

    #[test]
    fn an_entry_with_an_unknown_key_is_refused() {
        let text = [unit("a", "[{ unit = \"b\", readyexpr = \"true\" }]"), unit("b", "[]")].concat();
        assert!(load(&text).is_err(), "a misspelt key must not be ignored");
    }

    #[test]
    fn a_ready_expr_that_does_not_compile_is_refused() {
        let text = [unit("a", "[{ unit = \"b\", ready_expr = \"status.health ==\" }]"), unit("b", "[]")].concat();
        let error = load(&text).unwrap_err();
        assert!(error.contains("ready_expr of `b` is not a CEL expression"), "{error}");
    }

    #[test]
    fn entries_resolve_with_the_dependency_parent_and_source() {
        let text = [
            unit("app", "[\"crds\", { unit = \"base\", ready_expr = \"status.health == 'healthy'\" }]"),
            unit("crds", "[]"),
            "[[sync]]\nname = \"base\"\nrepo = \"/srv/git/other\"\n".to_owned(),
        ]
        .concat();
        let config = load(&text).unwrap();
        let deps = &config.units[0].depends_on;
        assert_eq!(deps.len(), 2);
        assert_eq!((deps[0].unit.as_str(), deps[0].ready_expr.as_deref(), deps[0].same_source), ("crds", None, true));
        assert_eq!(deps[0].inventory.name, "gitward-crds");
        assert_eq!(deps[1].ready_expr.as_deref(), Some("status.health == 'healthy'"));
        assert!(!deps[1].same_source, "another repository is another source");
    }
}
