//! `depends_on` of a `[[sync]]` unit: the units it syncs after, as Flux's Kustomization
//! `spec.dependsOn`. Each entry is a unit's name, or `{ unit = "…", ready_expr = "…" }` with a
//! CEL expression over the dependency's recorded status (the health module's `ready` evaluates
//! it and documents its variables). Resolving checks every name against the file's units,
//! compiles each expression, and refuses a cycle, naming it (`depends_on cycle: a -> b -> a`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use toml::Spanned;

use super::raw::RawDependency;
use super::resolve::Resolver;
use super::{InventoryConfig, Result, SyncUnit};

/// A unit another unit depends on, resolved: where its record is read and how it is judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The dependency's unit name (a unit of the same file).
    pub unit: String,
    /// A CEL expression over the dependency's recorded status that must evaluate to `true`
    /// (the health module's `ready::Status` lists its variables); `None`: the recorded result must be
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

impl Resolver<'_> {
    /// The raw `depends_on` of each unit (by index, with its span) resolved against `units`:
    /// every name must be another unit of the file, every `ready_expr` must compile, and no
    /// chain may lead back to its start.
    ///
    /// Errors: [`super::Error::Invalid`] at `sync[i].depends_on`, naming an unknown unit, the
    /// unit itself, a CEL syntax error, or the cycle (`depends_on cycle: a -> b -> a`).
    pub(super) fn depends_on(
        &self,
        raw: Vec<(usize, Spanned<Vec<Spanned<RawDependency>>>)>,
        units: &mut [SyncUnit],
    ) -> Result<()> {
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
                let Some(&dep) = index_of.get(&name) else {
                    let known: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
                    let message = format!("no unit named `{name}` (units: {})", known.join(", "));
                    return Err(self.invalid(Some(span), &key, message));
                };
                if dep == index {
                    return Err(self.invalid(Some(span), &key, format!("unit `{name}` cannot depend on itself")));
                }
                if let Some(expr) = &ready_expr
                    && let Err(e) = cel::Program::compile(expr)
                {
                    let message = format!("ready_expr of `{name}` is not a CEL expression: {e}");
                    return Err(self.invalid(Some(span), &key, message));
                }
                let (of, to) = (&units[index], &units[dep]);
                let same_source = of.is_git() && to.is_git() && of.repo == to.repo && of.reference == to.reference;
                let resolved = Dependency {
                    unit: name,
                    ready_expr,
                    inventory: to.inventory.clone(),
                    cluster: to.cluster.clone(),
                    same_source,
                    path: to.path.clone(),
                };
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
        Ok(())
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
