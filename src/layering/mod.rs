//! The edges test: the modules point one way, down the layer table of ARCHITECTURE.md
//! ("Module map"), and only `source` touches git2.
//!
//! Every `src/**/*.rs` file belongs to the top-level module of its first path component
//! (`src/sync/repo/load.rs` to `sync`; `lib.rs` and `main.rs` to none: they may name anything). An
//! arrow from module A to module B is any `crate::B` that A's files write outside string
//! literals: in `use` lines (grouped `crate::{b, c::d}` too), in paths in code, and in comments
//! and doc comments — an intra-doc link that points up the table is an arrow too, and the text
//! is the easier place to fix it. `crate::NAME` for an item of `lib.rs` counts as the module it
//! re-exports (`pub use sync::Engine` makes `crate::Engine` an arrow to `sync`); a root
//! constant counts as none. Test modules (`#[cfg(test)] mod … { … }` and files declared as
//! `#[cfg(test)] mod …;`) are not read: a unit test may build its input with a type from
//! above (a cluster error to test how telemetry prints it) without the library depending on it.
//!
//! A module may use only modules on a lower level: one level holds modules that use none of
//! each other, so the graph has no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.rs` file under a directory, sorted: what the shape tests of a module read too.
pub(crate) use scan::rust_files;
use scan::{Masked, closing_brace, ident, is_path_start, line_of, module_of, relative, test_children, top_level_items};

mod arrows;
mod census;
mod fields;
mod files;
mod scan;

/// One `crate::…` reference: where, and to which module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    /// Path relative to the crate root (`src/sync/repo/load.rs`).
    file: String,
    /// 1-based line.
    line: usize,
    /// The top-level module named.
    target: String,
}

#[test]
fn every_module_uses_only_modules_below_it_in_the_architecture_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let levels = levels(&architecture).unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let (modules, reexports) = root_items(&lib);
    let mut problems = Vec::new();
    for module in modules.difference(&levels.keys().cloned().collect()) {
        problems.push(format!(
            "src/lib.rs declares module `{module}`, which ARCHITECTURE.md's module map has no level for"
        ));
    }
    for module in levels.keys().filter(|m| !modules.contains(*m)) {
        problems.push(format!("ARCHITECTURE.md's module map lists `{module}`, which src/lib.rs does not declare"));
    }
    for u in uses(root, &reexports) {
        let from = module_of(&u.file);
        let (Some(&own), Some(&other)) = (levels.get(&from), levels.get(&u.target)) else { continue };
        if other < own || from == u.target {
            continue;
        }
        let why = if other == own { "the same level" } else { "a higher level" };
        problems.push(format!(
            "{}:{}: `{from}` (level {own}) uses `{}` (level {other}): an arrow to {why}",
            u.file, u.line, u.target
        ));
    }
    assert!(problems.is_empty(), "module layering (ARCHITECTURE.md, \"Module map\"):\n{}", problems.join("\n"));
}

#[test]
fn every_arrow_between_modules_is_listed_with_its_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let (_, reexports) = root_items(&lib);
    let mut found: BTreeMap<(String, String), Use> = BTreeMap::new();
    for u in uses(root, &reexports) {
        let from = module_of(&u.file);
        if from != u.target {
            found.entry((from, u.target.clone())).or_insert(u);
        }
    }
    let listed: BTreeSet<(String, String)> =
        arrows::ARROWS.iter().map(|(from, to, _)| (from.to_string(), to.to_string())).collect();
    assert_eq!(listed.len(), arrows::ARROWS.len(), "an arrow is listed twice in src/layering/arrows.rs");
    let mut problems = Vec::new();
    for ((from, to), u) in &found {
        if !listed.contains(&(from.clone(), to.clone())) {
            problems.push(format!(
                "{}:{}: `{from}` uses `{to}`, an arrow src/layering/arrows.rs does not list (add it with its reason)",
                u.file, u.line
            ));
        }
    }
    for (from, to) in listed.iter().filter(|arrow| !found.contains_key(*arrow)) {
        problems.push(format!("src/layering/arrows.rs lists `{from}` → `{to}`, which no code uses: remove it"));
    }
    assert!(problems.is_empty(), "module arrows:\n{}", problems.join("\n"));
}

#[test]
fn files_use_each_other_without_circles_and_nothing_of_lib_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let all = files::files(root);
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut first: BTreeMap<(Vec<String>, Vec<String>), usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (own, rel) in &all {
        let text = std::fs::read_to_string(root.join(rel)).expect("a source file");
        for (target, line) in files::arrows_of(&text, own, &all) {
            if target.is_empty() && !own.is_empty() {
                problems
                    .push(format!("{rel}:{line}: uses an item of src/lib.rs; take it from the module that defines it"));
            }
            if files::same_room(own, &target) {
                continue;
            }
            graph.entry(own.clone()).or_default().insert(target.clone());
            first.entry((own.clone(), target)).or_insert(line);
        }
    }
    for circle in files::circles(&graph) {
        let names: Vec<&str> = circle.iter().map(|p| all[p].as_str()).collect();
        let mut arrows = Vec::new();
        for a in &circle {
            for b in graph.get(a).into_iter().flatten().filter(|b| circle.contains(b)) {
                arrows.push(format!("{}:{} → {}", all[a], first[&(a.clone(), b.clone())], all[b]));
            }
        }
        problems.push(format!("files in a circle: {} ({})", names.join(", "), arrows.join("; ")));
    }
    assert!(problems.is_empty(), "file arrows:\n{}", problems.join("\n"));
}

#[test]
fn the_file_graph_resolves_paths_and_finds_circles() {
    let p = |s: &str| s.split('/').filter(|x| !x.is_empty()).map(str::to_string).collect::<Vec<_>>();
    let all: BTreeMap<Vec<String>, String> =
        ["", "a", "a/b", "a/c", "d"].iter().map(|s| (p(s), format!("{s}.rs"))).collect();
    let text = "use super::c::X;\nfn f() { crate::d::g(); self::inner(); }\n/// [`crate::a::b::Y`]\n";
    let arrows = files::arrows_of(text, &p("a/b"), &all);
    assert_eq!(arrows, vec![(p("d"), 2), (p("a/c"), 1)]);
    assert!(files::same_room(&p("a"), &p("a/b")) && !files::same_room(&p("a/b"), &p("a/c")));
    let graph = BTreeMap::from([
        (p("a/b"), BTreeSet::from([p("a/c")])),
        (p("a/c"), BTreeSet::from([p("a/b"), p("d")])),
        (p("d"), BTreeSet::new()),
    ]);
    assert_eq!(files::circles(&graph), vec![vec![p("a/b"), p("a/c")]]);
}

/// The most lines a file under `src/` may have: past it, a file holds more than one thing to
/// read at once and is split by what it does.
const MAX_LINES: usize = 600;

#[test]
fn no_file_in_src_is_over_the_line_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let long: Vec<String> = rust_files(&root.join("src"))
        .into_iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(&file).expect("a source file").lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", relative(root, &file)))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}

#[test]
fn no_function_in_src_is_over_the_census_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tests = files::test_files(root);
    let mut long = Vec::new();
    for file in rust_files(&root.join("src")) {
        let rel = relative(root, &file);
        if tests.contains(&rel) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a source file");
        for (name, line, lines) in census::functions(&text) {
            if lines > census::MAX_FN_LINES {
                long.push(format!("{rel}:{line}: fn {name}, {lines} lines"));
            }
        }
    }
    assert!(long.is_empty(), "functions over {} lines:\n{}", census::MAX_FN_LINES, long.join("\n"));
}

#[test]
fn the_census_counts_a_function_from_its_signature_to_its_closing_brace() {
    let text = "trait T { fn declared(&self); }\nfn one() {\n    let s = \"}\";\n    if true { }\n}\n#[cfg(test)]\nmod tests {\n    fn skipped() {}\n}\n";
    assert_eq!(census::functions(text), vec![("one".to_string(), 2, 4)]);
}

#[test]
fn only_source_uses_git2() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    for file in rust_files(&root.join("src")) {
        let rel = relative(root, &file);
        if module_of(&rel) == "source" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a source file");
        let code = Masked::new(&text, false);
        for (offset, _) in code.text.match_indices("git2::") {
            if !is_path_start(&code.text, offset) {
                continue;
            }
            problems.push(format!("{rel}:{}: git2 outside `source`", line_of(&code.text, offset)));
        }
    }
    assert!(problems.is_empty(), "only `source` may use git2:\n{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_uses_in_code_groups_and_comments_but_not_in_strings_or_tests() {
    let text = r##"//! Links [`crate::alpha::A`].
use crate::{beta::B, gamma};
fn f() -> crate::delta::D { let _ = "crate::epsilon"; let _ = r#"crate::zeta"#; let _ = '"'; crate::eta() }
/* crate::theta */
#[cfg(test)]
mod tests {
    use crate::iota;
}
fn g() { crate::kappa::K }
"##;
    let targets = scan(text, &BTreeMap::new());
    let expected = [(1, "alpha"), (2, "beta"), (2, "gamma"), (3, "delta"), (3, "eta"), (4, "theta"), (9, "kappa")];
    assert_eq!(targets, expected.map(|(l, t)| (l, t.to_string())));
    assert_eq!(test_children(text), Vec::<String>::new());
    assert_eq!(test_children("#[cfg(test)]\nmod tests;\n"), ["tests"]);
}

#[test]
fn lib_rs_modules_and_reexports_are_read_without_test_modules() {
    let lib = "//! Doc: `pub mod nope;`\n#![deny(missing_docs)]\n\npub mod apply;\npub(crate) mod render;\nmod config;\n#[cfg(test)]\nmod layering;\n\
               pub use sync::{Engine, report::Report as SyncReport};\npub use config::Config;\npub const TOOLING: &str = \"x\";\n";
    let (modules, reexports) = root_items(lib);
    assert_eq!(modules, BTreeSet::from(["apply".to_string(), "config".to_string(), "render".to_string()]));
    let expected = [("Engine", "sync"), ("SyncReport", "sync"), ("Config", "config")];
    assert_eq!(reexports, expected.iter().map(|(n, m)| (n.to_string(), m.to_string())).collect());
}

#[test]
fn the_table_gives_each_module_its_level() {
    let md = "# x\n\n## Module map\n\n| level | module | owns |\n|---|---|---|\n| 0 | `object` | refs |\n| 1 | `config` | toml |\n\n## Next\n\n| 9 | `nope` | x |\n";
    let read = levels(md).unwrap();
    assert_eq!(read, BTreeMap::from([("object".to_string(), 0), ("config".to_string(), 1)]));
    assert!(levels("no table here").is_err());
}

/// The level of each module, from the rows `| <level> | `<module>` | … |` of the section
/// "Module map".
fn levels(markdown: &str) -> Result<BTreeMap<String, u32>, String> {
    let section = markdown.split("\n## ").find(|s| s.starts_with("Module map")).ok_or("no section \"Module map\"")?;
    let mut levels = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(level), Some(module)) = (cells.get(1), cells.get(2)) else { continue };
        let Ok(level) = level.parse::<u32>() else { continue };
        let module = module.trim_matches('`');
        if levels.insert(module.to_string(), level).is_some() {
            return Err(format!("module `{module}` listed twice"));
        }
    }
    if levels.is_empty() {
        return Err("the module map has no `| level | module | … |` rows".into());
    }
    Ok(levels)
}

/// The modules `lib.rs` declares (outside tests) and the names it re-exports, each with the
/// module it comes from.
fn root_items(lib: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let code = Masked::new(lib, false).without_tests();
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for statement in code.split(';') {
        let mut item = statement.trim_start();
        let mut test_only = false;
        while item.starts_with('#') {
            let end = item.find(']').map_or(item.len(), |i| i + 1);
            test_only |= item[..end].split_whitespace().collect::<String>() == "#[cfg(test)]";
            item = item[end..].trim_start();
        }
        let item = item.split_whitespace().collect::<Vec<_>>().join(" ");
        let declared = ["pub mod ", "pub(crate) mod ", "mod "].iter().find_map(|p| item.strip_prefix(p));
        if let Some(name) = declared {
            if !test_only {
                modules.insert(name.trim().to_string());
            }
        } else if let Some(path) = item.strip_prefix("pub use ") {
            let (module, rest) = path.split_once("::").unwrap_or((path, ""));
            for name in reexported(rest) {
                reexports.insert(name, module.trim().to_string());
            }
        }
    }
    (modules, reexports)
}

/// The names a `use` path after its first segment brings in: `a::B` gives `B`, `{B, c::D as E,
/// f::{G}}` gives `B`, `E`, `G`.
fn reexported(path: &str) -> Vec<String> {
    let path = path.trim();
    if let Some(group) = path.strip_prefix('{') {
        let inside = &group[..closing_brace(group).unwrap_or(group.len())];
        let (mut names, mut depth, mut start) = (Vec::new(), 0usize, 0);
        for (i, c) in inside.char_indices().chain(std::iter::once((inside.len(), ','))) {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    names.extend(reexported(&inside[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        return names;
    }
    match path.split_once("::") {
        Some((_, rest)) => reexported(rest),
        None if path.is_empty() => Vec::new(),
        None => vec![path.rsplit(" as ").next().unwrap_or(path).trim().to_string()],
    }
}

/// Every `crate::…` reference of the library's files, test modules left out.
fn uses(root: &Path, reexports: &BTreeMap<String, String>) -> Vec<Use> {
    let files = rust_files(&root.join("src"));
    let skip = files::test_files(root);
    let mut out = Vec::new();
    for file in &files {
        let rel = relative(root, file);
        if skip.contains(&rel) {
            continue;
        }
        if module_of(&rel).is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a source file");
        for (line, target) in scan(&text, reexports) {
            out.push(Use { file: rel.clone(), line, target });
        }
    }
    out
}

/// The top-level module `crate::…` references in `text` name, with their lines: string
/// literals and test modules left out, comments kept. A name `lib.rs` re-exports counts as
/// its module; a root item that is not a module (`crate::TOOLING`) as none.
fn scan(text: &str, reexports: &BTreeMap<String, String>) -> Vec<(usize, String)> {
    let masked = Masked::new(text, true).without_tests();
    let mut out = Vec::new();
    for (offset, _) in masked.match_indices("crate::") {
        if !is_path_start(&masked, offset) {
            continue;
        }
        let rest = &masked[offset + "crate::".len()..];
        let names = match rest.strip_prefix('{') {
            Some(group) => {
                let end = closing_brace(group).unwrap_or(group.len());
                top_level_items(&group[..end])
            }
            None => vec![ident(rest).to_string()],
        };
        for name in names.into_iter().filter(|n| !n.is_empty()) {
            let target = match reexports.get(&name) {
                Some(module) => module.clone(),
                None if name.starts_with(|c: char| c.is_ascii_uppercase()) => continue,
                None => name,
            };
            out.push((line_of(&masked, offset), target));
        }
    }
    out
}
