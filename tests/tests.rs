//! The integration tests: one test binary, so the crate is linked once for all of them, with a
//! folder per area (each `mod.rs` says what goes there), a module per feature in it, and the
//! shared fixture in `common` (the layout of ripgrep's `tests/`;
//! `autotests = false` in Cargo.toml keeps cargo from building each file as a binary of its own).
//!
//! Every test that needs a cluster talks to the real kube-apiserver that `tests/cluster/run`
//! starts, and fails (never skips) without one. `scripts/test` runs them all; one module, or one
//! test, by a name filter: `scripts/test --test integration daemon::` or
//! `tests/cluster/run cargo test --test integration -- daemon::run::push_to_local --nocapture`.

mod common;

mod apply;
mod cli;
mod daemon;
mod faults;
mod forge;
mod isolation;
mod preview;
mod provenance;
mod sources;
mod untrusted;

/// Every `.rs` file in `tests/` is built and run: one directly in `tests/` is `tests.rs` itself,
/// `common`'s, or a test target of its own in Cargo.toml; each folder is a module of this binary
/// whose `mod.rs` opens with a one-line `//!` saying what goes there and declares every file in
/// it. With `autotests = false`, a file that is none of these would never be built or run.
#[test]
fn every_file_in_tests_is_built_and_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tests = root.join("tests");
    let modules = std::fs::read_to_string(tests.join("tests.rs")).expect("read tests/tests.rs");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&tests).expect("read tests/").filter_map(Result::ok) {
        let name = entry.file_name().into_string().expect("a UTF-8 name");
        let path = entry.path();
        if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "tests" && !manifest.lines().any(|l| l == format!("path = \"tests/{name}\"")) {
                problems.push(format!("tests/{name}: neither tests.rs nor a [[test]] target of Cargo.toml"));
            }
            continue;
        }
        let Ok(own) = std::fs::read_to_string(path.join("mod.rs")) else { continue };
        if !modules.lines().any(|l| l == format!("mod {name};")) {
            problems.push(format!("tests/{name}/: not declared in tests/tests.rs"));
        }
        if name != "common" && !own.lines().next().is_some_and(|l| l.starts_with("//! ")) {
            problems.push(format!("tests/{name}/mod.rs: does not open with a `//!` line saying what goes there"));
        }
        for file in std::fs::read_dir(&path).expect("read a test folder").filter_map(Result::ok) {
            let file = file.file_name().into_string().expect("a UTF-8 name");
            let Some(stem) = file.strip_suffix(".rs").filter(|s| *s != "mod") else { continue };
            if !own.lines().any(|l| l.ends_with(&format!("mod {stem};"))) {
                problems.push(format!("tests/{name}/{file}: not declared in tests/{name}/mod.rs"));
            }
        }
    }
    problems.sort();
    assert!(problems.is_empty(), "test files never built: {problems:#?}");
}
