//! The edges test: the modules point one way, down the layer table of ARCHITECTURE.md
//! ("Module map"), and only `source` touches git2.
//!
//! Every `src/**/*.rs` file belongs to the top-level module of its first path component
//! (`src/sync/repo.rs` to `sync`; `lib.rs` and `main.rs` to none: they may name anything). An
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
use std::path::{Path, PathBuf};

/// One `crate::…` reference: where, and to which module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    /// Path relative to the crate root (`src/sync/repo.rs`).
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
    let mut skip: BTreeSet<PathBuf> = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => file.parent().expect("in src").to_path_buf(),
            _ => file.with_extension(""),
        };
        for child in test_children(&text) {
            skip.insert(dir.join(format!("{child}.rs")));
            skip.insert(dir.join(&child).join("mod.rs"));
        }
    }
    let mut out = Vec::new();
    for file in files.iter().filter(|f| !skip.contains(*f)) {
        let rel = relative(root, file);
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

/// The names of the modules `text` declares as `#[cfg(test)] mod name;` (their files are test
/// code).
fn test_children(text: &str) -> Vec<String> {
    let code = Masked::new(text, false);
    test_modules(&code.text).into_iter().filter(|m| m.body.is_none()).map(|m| m.name).collect()
}

/// A `#[cfg(test)] mod` item: its name and, for an inline module, the byte range of its body.
struct TestModule {
    name: String,
    body: Option<(usize, usize)>,
}

/// Every `#[cfg(test)]` module of `code` (strings and comments already blanked).
fn test_modules(code: &str) -> Vec<TestModule> {
    let mut out = Vec::new();
    for (offset, attr) in code.match_indices("#[cfg(test)]") {
        let mut rest = code[offset + attr.len()..].trim_start();
        if let Some(after_pub) = rest.strip_prefix("pub") {
            rest = after_pub.trim_start();
            if rest.starts_with('(') {
                rest = rest[rest.find(')').map_or(0, |i| i + 1)..].trim_start();
            }
        }
        let Some(after_mod) = rest.strip_prefix("mod ") else { continue };
        let name = ident(after_mod.trim_start());
        let after_name = after_mod.trim_start()[name.len()..].trim_start();
        let body = match after_name.chars().next() {
            Some(';') => None,
            Some('{') => {
                let start = code.len() - after_name.len();
                let end = start + 1 + closing_brace(&after_name[1..]).unwrap_or(after_name.len() - 1);
                Some((start, end))
            }
            _ => continue,
        };
        out.push(TestModule { name: name.to_string(), body });
    }
    out
}

/// A file's text with string and char literals blanked (spaces; newlines kept, so offsets and
/// lines stay), and comments blanked too unless `keep_comments`.
struct Masked {
    text: String,
    /// The same text with comments blanked as well, to find test modules and braces.
    code: String,
}

impl Masked {
    fn new(text: &str, keep_comments: bool) -> Self {
        let bytes = text.as_bytes();
        let mut code = bytes.to_vec();
        let mut kept = bytes.to_vec();
        let blank = |buf: &mut Vec<u8>, from: usize, to: usize| {
            for b in &mut buf[from..to] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
        };
        let mut i = 0;
        while i < bytes.len() {
            let starts_token = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            let end = if bytes[i..].starts_with(b"//") {
                let end = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| i + p);
                blank(&mut code, i, end);
                if !keep_comments {
                    blank(&mut kept, i, end);
                }
                i = end;
                continue;
            } else if bytes[i..].starts_with(b"/*") {
                let end = block_comment_end(bytes, i);
                blank(&mut code, i, end);
                if !keep_comments {
                    blank(&mut kept, i, end);
                }
                i = end;
                continue;
            } else if let Some(end) = starts_token.then(|| raw_string_end(bytes, i)).flatten() {
                end
            } else if bytes[i] == b'"' || (starts_token && bytes[i..].starts_with(b"b\"")) {
                let open = if bytes[i] == b'"' { i } else { i + 1 };
                string_end(bytes, open)
            } else if bytes[i] == b'\'' {
                match char_literal_end(bytes, i) {
                    Some(end) => end,
                    None => {
                        i += 1;
                        continue;
                    }
                }
            } else {
                i += 1;
                continue;
            };
            blank(&mut code, i, end);
            blank(&mut kept, i, end);
            i = end;
        }
        let text = String::from_utf8(kept).expect("blanking keeps UTF-8 boundaries");
        let code = String::from_utf8(code).expect("blanking keeps UTF-8 boundaries");
        Self { text, code }
    }

    /// The text with every inline `#[cfg(test)]` module's body blanked.
    fn without_tests(&self) -> String {
        let mut text = self.text.clone().into_bytes();
        for module in test_modules(&self.code) {
            if let Some((start, end)) = module.body {
                for b in &mut text[start..end.min(self.text.len())] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
            }
        }
        String::from_utf8(text).expect("blanking keeps UTF-8 boundaries")
    }
}

impl std::ops::Deref for Masked {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

/// The end (exclusive) of the block comment opening at `start`; block comments nest.
fn block_comment_end(bytes: &[u8], start: usize) -> usize {
    let (mut depth, mut i) = (0usize, start);
    while i + 1 < bytes.len() {
        if bytes[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if bytes[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    bytes.len()
}

/// The end (exclusive) of a raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `start`, if
/// one does.
fn raw_string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    if bytes.get(i) == Some(&b'b') {
        i += 1;
    }
    if bytes.get(i) != Some(&b'r') {
        return None;
    }
    i += 1;
    let hashes = bytes[i..].iter().take_while(|&&b| b == b'#').count();
    i += hashes;
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let closing: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
    let end = bytes[i + 1..].windows(closing.len()).position(|w| w == closing.as_slice());
    Some(end.map_or(bytes.len(), |p| i + 1 + p + closing.len()))
}

/// The end (exclusive) of the string literal whose opening quote is at `open`.
fn string_end(bytes: &[u8], open: usize) -> usize {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The end (exclusive) of the char literal at `start` (`'x'`, `'\n'`, `'\u{1F600}'`), or
/// `None` for a lifetime or label (`'a`, `'static`).
fn char_literal_end(bytes: &[u8], start: usize) -> Option<usize> {
    let rest = &bytes[start + 1..];
    if rest.first() == Some(&b'\\') {
        return rest.iter().skip(1).position(|&b| b == b'\'').map(|p| start + 1 + 1 + p + 1);
    }
    let text = std::str::from_utf8(&rest[..rest.len().min(5)])
        .unwrap_or_else(|e| std::str::from_utf8(&rest[..e.valid_up_to()]).expect("the valid prefix"));
    let first = text.chars().next()?;
    (text[first.len_utf8()..].starts_with('\'')).then(|| start + 1 + first.len_utf8() + 1)
}

/// Whether the path at `offset` starts there (not `$crate::` nor the tail of `foo_crate::`).
fn is_path_start(text: &str, offset: usize) -> bool {
    text[..offset].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '$'))
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The offset of the `}` closing a group whose `{` was just before `text`.
fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The first identifier of each top-level item of a `use` group's inside (`a::b, c, d::{e}`
/// gives `a`, `c`, `d`).
fn top_level_items(group: &str) -> Vec<String> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(ident(group[start..i].trim_start()).to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(ident(group[start..].trim_start()).to_string());
    items
}

/// The 1-based line of `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// The top-level module a file under `src/` belongs to; `""` for `lib.rs` and `main.rs`.
fn module_of(rel: &str) -> String {
    let inside = rel.strip_prefix("src/").unwrap_or(rel);
    match inside.split('/').next().unwrap_or_default() {
        "lib.rs" | "main.rs" => String::new(),
        first => first.trim_end_matches(".rs").to_string(),
    }
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `file` relative to the crate root, `/`-separated.
fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root).expect("under the crate root").to_string_lossy().replace('\\', "/")
}
