//! The engine's shape, read from the source of `src/sync`: `impl Engine` only in the engine's
//! own files, and the parts of [`super::state`] with private fields, reached through their
//! verbs.

use std::collections::BTreeSet;
use std::path::Path;

/// The files that hold the engine: its state and its order.
const ENGINE_FILES: [&str; 2] = ["mod.rs", "run.rs"];

/// Files whose `impl Engine` blocks are still to become verbs of the parts.
const STILL_ON_ENGINE: [&str; 11] = [
    "diff.rs",
    "early.rs",
    "follow.rs",
    "heal.rs",
    "health.rs",
    "inventory.rs",
    "namespaces.rs",
    "outcome.rs",
    "ownership.rs",
    "prune_step.rs",
    "record.rs",
];

/// The parts in `state.rs` whose fields are still open to the engine's files.
const STILL_OPEN: [&str; 4] = ["ParentState", "Recorder", "Options", "LastSync"];

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

#[test]
fn impl_engine_is_only_in_the_engines_own_files() {
    let holding: BTreeSet<String> =
        files().into_iter().filter(|(_, text)| text.contains("\nimpl Engine {")).map(|(rel, _)| rel).collect();
    let allowed: BTreeSet<String> = ENGINE_FILES.iter().chain(&STILL_ON_ENGINE).map(|f| f.to_string()).collect();
    let outside: Vec<&String> = holding.difference(&allowed).collect();
    assert!(outside.is_empty(), "impl Engine outside the engine's files: {outside:?}");
    let moved: Vec<&str> = STILL_ON_ENGINE.iter().copied().filter(|f| !holding.contains(*f)).collect();
    assert!(moved.is_empty(), "no impl Engine left in {moved:?}: take them off STILL_ON_ENGINE");
}

#[test]
fn the_parts_keep_their_fields_private() {
    let state = files().into_iter().find(|(rel, _)| rel == "state.rs").expect("state.rs").1;
    let mut open = Vec::new();
    let mut part = String::new();
    for line in state.lines() {
        if let Some(rest) = line.strip_prefix("pub(super) struct ") {
            part = rest.split([' ', '{', '<']).next().unwrap_or_default().to_string();
        }
        let field = line.trim_start().strip_prefix("pub(super) ").is_some_and(|rest| {
            let name = rest.split(':').next().unwrap_or_default();
            rest.contains(':') && !rest.starts_with("fn ") && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        });
        if field && line.starts_with("    ") && !line.starts_with("        ") && !open.contains(&part) {
            open.push(part.clone());
        }
    }
    let allowed: Vec<String> = STILL_OPEN.iter().map(|s| s.to_string()).collect();
    let unlisted: Vec<&String> = open.iter().filter(|p| !allowed.contains(p)).collect();
    assert!(unlisted.is_empty(), "parts with pub(super) fields: {unlisted:?}");
    let closed: Vec<&String> = allowed.iter().filter(|p| !open.contains(p)).collect();
    assert!(closed.is_empty(), "{closed:?} keep their fields private now: take them off STILL_OPEN");
}
