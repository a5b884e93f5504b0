//! The file graph: which files of `src/` use which. A file uses another when it names a path
//! into it — `crate::a::b::…`, `super::…`, `self::…` — resolved to the longest module path that
//! is a file (`src/a/b.rs` or `src/a/b/mod.rs`). A module and its own submodules (a file and its
//! ancestors) are one room and may use each other; between any other files the arrows must not
//! close a circle, and no file may use an item of `lib.rs` (which re-exports for the binary
//! and the tests; a module that needs the item takes it from the module that defines it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::scan::{Masked, ident, is_path_start, line_of, relative, rust_files, test_children};

/// One file's module path (`src/cluster/cache.rs` is `["cluster", "cache"]`, `src/lib.rs` is
/// `[]`).
fn module_path(rel: &str) -> Vec<String> {
    let inside = rel.strip_prefix("src/").unwrap_or(rel).trim_end_matches(".rs");
    let mut parts: Vec<String> = inside.split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The files' module paths, test files ([`test_files`]) and `main.rs` left out.
pub(super) fn files(root: &Path) -> BTreeMap<Vec<String>, String> {
    let tests = test_files(root);
    rust_files(&root.join("src"))
        .iter()
        .map(|f| relative(root, f))
        .filter(|rel| rel != "src/main.rs" && !tests.contains(rel))
        .map(|rel| (module_path(&rel), rel))
        .collect()
}

/// The files under `src/` that only tests compile: those of a `#[cfg(test)] mod x;` (with its
/// submodules; at `#[path = "…"]` when the declaration gives one), relative to `root`.
pub(super) fn test_files(root: &Path) -> BTreeSet<String> {
    let all: Vec<String> = rust_files(&root.join("src")).iter().map(|f| relative(root, f)).collect();
    let mut modules: Vec<Vec<String>> = Vec::new();
    let mut named = BTreeSet::new();
    for rel in &all {
        let text = std::fs::read_to_string(root.join(rel)).expect("a source file");
        for child in test_children(&text) {
            match declared_path(&text, &child) {
                Some(file) => {
                    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
                    named.insert(format!("{dir}/{file}"));
                }
                None => {
                    let mut path = module_path(rel);
                    path.push(child);
                    modules.push(path);
                }
            }
        }
    }
    all.into_iter()
        .filter(|rel| named.contains(rel) || modules.iter().any(|m| module_path(rel).starts_with(m)))
        .collect()
}

/// The file a `#[path = "file"]` attribute gives the module `name`, when its declaration has one.
fn declared_path(text: &str, name: &str) -> Option<String> {
    let declaration = text.find(&format!("mod {name};"))?;
    let before = text[..declaration].trim_end();
    let attribute = before.strip_suffix(']')?.rsplit_once("#[")?.1;
    let value = attribute.strip_prefix("path")?.trim_start().strip_prefix('=')?.trim();
    Some(value.trim_matches('"').to_string())
}

/// Every arrow of `file` (at module path `own`) to another file: `(target, line)`.
pub(super) fn arrows_of(
    text: &str,
    own: &[String],
    files: &BTreeMap<Vec<String>, String>,
) -> Vec<(Vec<String>, usize)> {
    let masked = Masked::new(text, false).without_tests();
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (offset, _) in masked.match_indices(start) {
            if !is_path_start(&masked, offset) {
                continue;
            }
            let mut path: Vec<String> = match start {
                "crate::" => Vec::new(),
                _ => own.to_vec(),
            };
            let mut rest = &masked[offset..];
            loop {
                if let Some(r) = rest.strip_prefix("super::") {
                    path.pop();
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("self::") {
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("crate::") {
                    rest = r;
                } else {
                    break;
                }
            }
            // Only the segments written before the path's other separators: `a::b::{c, d}`
            // resolves `a::b`, the group's first items too when they are modules.
            let mut target = path.clone();
            let mut probe = path;
            for segment in rest.split("::") {
                let name = ident(segment);
                if name.is_empty() {
                    break;
                }
                probe.push(name.to_string());
                if files.contains_key(&probe) {
                    target = probe.clone();
                }
                if name.len() != segment.len() {
                    break;
                }
            }
            if target != own && files.contains_key(&target) {
                out.push((target, line_of(&masked, offset)));
            }
        }
    }
    out
}

/// `a` is `b` or one of its ancestors, or the other way round.
pub(super) fn same_room(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The circles of `graph` (strongly connected components of more than one node), each sorted.
pub(super) fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    // Two nodes are in one circle when each reaches the other; graphs here are a few hundred
    // nodes, so reachability by search from each node is quick enough.
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> = graph.keys().map(|n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for (n, r) in &reached {
        if done.contains(*n) || !r.contains(*n) {
            continue;
        }
        let circle: Vec<Vec<String>> =
            r.iter().filter(|m| reached.get(m).is_some_and(|back| back.contains(*n))).cloned().collect();
        done.extend(circle.iter().cloned());
        out.push(circle);
    }
    out
}
