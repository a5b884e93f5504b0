//! The field census: how many named fields each struct under `src/` has. Past [`MAX_FIELDS`] a
//! struct holds more than one role, and is split into parts that each have a name; only the
//! [`EXCEPTIONS`] are longer, each for its reason.

use std::path::Path;

use super::scan::{Masked, ident, is_path_start, line_of, relative, rust_files};

/// The most named fields a struct under `src/` may have.
pub(super) const MAX_FIELDS: usize = 12;

/// The structs that may have more than [`MAX_FIELDS`] fields: `(file, struct, why)`.
pub(super) const EXCEPTIONS: &[(&str, &str, &str)] = &[
    ("src/config/raw/sync.rs", "RawSyncUnit", "a `[[sync]]` table as written: one field per TOML key"),
    ("src/config/raw/daemon.rs", "RawDaemon", "the `[daemon]` table as written: one field per TOML key"),
    ("src/config/raw/mod.rs", "RawRender", "the `[render]` table as written: one field per TOML key"),
    ("src/config/unit.rs", "SyncUnit", "a `[[sync]]` table resolved: one field per TOML key, defaults applied"),
    ("src/config/set.rs", "SyncSet", "a `[[sync_set]]` table resolved: one field per TOML key of the set"),
    ("src/config/render.rs", "RenderTools", "the `[render]` table resolved: one field per TOML key"),
];

/// Every struct with named fields in `text`, test code included: `(name, line, fields)`.
/// Tuple and unit structs have no named fields and are left out.
pub(super) fn structs(text: &str) -> Vec<(String, usize, usize)> {
    let code = Masked::new(text, false).code;
    let mut out = Vec::new();
    for (offset, _) in code.match_indices("struct ") {
        if !is_path_start(&code, offset) {
            continue;
        }
        let rest = code[offset + "struct ".len()..].trim_start();
        let name = ident(rest);
        if name.is_empty() {
            continue;
        }
        let start = code.len() - rest.len() + name.len();
        let Some(body) = body(&code[start..]) else { continue };
        out.push((name.to_string(), line_of(&code, offset), fields(body)));
    }
    out
}

/// The inside of the braces of a struct whose name ends just before `after_name`; `None` for a
/// tuple or unit struct. Generic parameters and a `where` clause are stepped over.
fn body(after_name: &str) -> Option<&str> {
    let mut angle = 0usize;
    let mut prev = ' ';
    for (i, c) in after_name.char_indices() {
        match c {
            '<' => angle += 1,
            '>' if prev != '-' => angle = angle.saturating_sub(1),
            // A `(` in a `where` clause is a bound's (`F: Fn(u8)`), not a tuple struct's.
            '(' if angle == 0 && !after_name[..i].contains("where") => return None,
            ';' if angle == 0 => return None,
            '{' if angle == 0 => {
                let inside = &after_name[i + 1..];
                return super::scan::closing_brace(inside).map(|end| &inside[..end]);
            }
            _ => {}
        }
        prev = c;
    }
    None
}

/// How many fields a struct's braces hold: the `name:` at the top level of `body` (attributes,
/// visibility and types nest in brackets; `::` in a path is no field).
fn fields(body: &str) -> usize {
    let bytes = body.as_bytes();
    let mut depth = 0usize;
    let mut count = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let prev = if i > 0 { bytes[i - 1] } else { b' ' };
        match b {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b'>' if prev == b'-' => {}
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && prev != b':' && bytes.get(i + 1) != Some(&b':') => count += 1,
            _ => {}
        }
    }
    count
}

#[test]
fn no_struct_in_src_has_more_fields_than_the_cap_but_the_listed_exceptions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    let mut excepted = Vec::new();
    for file in rust_files(&root.join("src")) {
        let rel = relative(root, &file);
        let text = std::fs::read_to_string(&file).expect("a source file");
        for (name, line, fields) in structs(&text) {
            if fields <= MAX_FIELDS {
                continue;
            }
            if EXCEPTIONS.iter().any(|(f, s, _)| *f == rel && *s == name) {
                excepted.push((rel.clone(), name));
            } else {
                problems.push(format!("{rel}:{line}: struct {name}, {fields} fields"));
            }
        }
    }
    for (file, name, _) in EXCEPTIONS {
        if !excepted.iter().any(|(f, s)| f == file && s == name) {
            problems.push(format!(
                "src/layering/fields.rs lists {file} `{name}`, which is not over {MAX_FIELDS} fields: remove it"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "structs over {MAX_FIELDS} fields (split them by role, or list one in src/layering/fields.rs with its reason):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_field_census_counts_named_fields_only() {
    let text = "struct Unit;\nstruct Pair(u8, String);\n/// struct Doc { a: u8 }\npub(crate) struct Named<'a, F: Fn(u8) -> u8>\nwhere\n    F: Clone,\n{\n    #[serde(rename = \"x:y\")]\n    pub(super) a: std::collections::BTreeMap<String, Vec<(u8, u8)>>,\n    // b: u8,\n    f: Box<dyn Fn(&'a str) -> Result<(), String>>,\n    c: [u8; 4],\n    g: F,\n}\nenum E { V { a: u8, b: u8 } }\n";
    assert_eq!(structs(text), vec![("Named".to_string(), 4, 4)]);
}
