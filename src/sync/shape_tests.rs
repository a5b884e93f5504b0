//! The engine's shape, read from the source of `src/sync`: `impl Engine` only in the engine's
//! own module files (`engine/`), and the parts it orchestrates with private fields, reached
//! through their verbs.

use std::path::Path;

/// The parts of the engine: the file that defines each, and its struct.
const PARTS: [(&str, &str); 6] = [
    ("loader.rs", "Loader"),
    ("state.rs", "ClusterView"),
    ("parent/mod.rs", "ApplySetParent"),
    ("health.rs", "Judgement"),
    ("hooks/mod.rs", "Hooks"),
    ("provenance/attestor.rs", "Attestor"),
];

/// The `.rs` files under `src/sync`, relative to it, with their text.
fn files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sync");
    crate::layering::rust_files(&root)
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(&root).expect("under src/sync").to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(&path).expect("a source file"))
        })
        .collect()
}

/// The fields of `name`'s struct in `text` that are not private: their lines.
fn open_fields(text: &str, name: &str) -> Vec<String> {
    let Some(start) = text.lines().position(|l| l.contains(&format!("struct {name} {{"))) else {
        return vec![format!("no struct {name}")];
    };
    text.lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with('}'))
        .filter(|l| l.starts_with("    pub") && !l.contains(" fn "))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn impl_engine_is_only_in_the_engines_own_files() {
    let outside: Vec<String> = files()
        .into_iter()
        .filter(|(rel, text)| text.contains("\nimpl Engine {") && !rel.starts_with("engine/"))
        .map(|(rel, _)| rel)
        .collect();
    assert!(outside.is_empty(), "impl Engine outside src/sync/engine: {outside:?}");
    let inside =
        files().into_iter().filter(|(rel, text)| rel.starts_with("engine/") && text.contains("\nimpl Engine {"));
    assert!(inside.count() >= 2, "the engine's own files hold its verbs");
}

#[test]
fn the_parts_keep_their_fields_private() {
    let files = files();
    for (file, part) in PARTS {
        let text = &files.iter().find(|(rel, _)| rel == file).unwrap_or_else(|| panic!("{file}")).1;
        let open = open_fields(text, part);
        assert!(open.is_empty(), "{part} ({file}) has fields open beyond its module: {open:?}");
    }
}

#[test]
fn the_field_check_sees_an_open_field() {
    let text = "pub(super) struct Part {\n    /// Doc.\n    pub(super) open: bool,\n    closed: bool,\n}\n";
    assert_eq!(open_fields(text, "Part"), ["pub(super) open: bool,"]);
    assert!(open_fields("struct Part {\n    closed: bool,\n}\n", "Part").is_empty());
}
