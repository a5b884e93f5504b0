//! The integration tests: one test binary, so the crate is linked once for all of them, with a
//! module per feature and the shared fixture in `common` (the layout of ripgrep's `tests/`;
//! `autotests = false` in Cargo.toml keeps cargo from building each file as a binary of its own).
//!
//! Every test that needs a cluster talks to the real kube-apiserver that `tests/cluster/run`
//! starts, and fails (never skips) without one. `scripts/test` runs them all; one module, or one
//! test, by a name filter: `scripts/test --test integration daemon::` or
//! `tests/cluster/run cargo test --test integration -- daemon::push_to_local --nocapture`.

mod common;

mod artifacts;
mod bad_input;
mod cert_manager;
mod chart_hooks;
mod chart_outage;
mod charts;
mod cli;
mod cluster;
mod cosign;
mod daemon;
mod door;
mod early_order;
mod error_catalogue;
mod faults;
mod faults_conflict;
mod faults_git;
mod faults_kill;
mod faults_outage;
mod faults_readiness;
mod faults_state;
mod fencing;
mod fetch_guard;
mod health;
mod hooks;
mod hostile_input;
mod http;
mod image;
mod large_crds;
mod large_index;
mod leader;
mod load;
mod manifest_parity;
mod masking;
mod mirrors;
mod namespace_sharing;
mod plain_kustomization;
mod prune_safety;
mod push;
mod record;
mod render;
mod render_inputs;
mod sandbox;
mod secret_scan;
mod sharding;
mod signatures;
mod source;
mod status_live;
mod status_writes;
mod sync_e2e;
mod sync_stages;
mod tenancy;
mod update_mode;
mod validate;
mod watches;
mod webhook_routes;

/// Every `.rs` file directly in `tests/` is a module of this binary or a test target of its own
/// in Cargo.toml: with `autotests = false`, a file that is neither would never be built or run.
#[test]
fn every_file_in_tests_is_built_and_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let modules = std::fs::read_to_string(root.join("tests/tests.rs")).expect("read tests/tests.rs");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let mut missing: Vec<String> = std::fs::read_dir(root.join("tests"))
        .expect("read tests/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|name| Some(name.strip_suffix(".rs")?.to_string()))
        .filter(|name| {
            !modules.lines().any(|l| l == format!("mod {name};"))
                && !manifest.lines().any(|l| l == format!("path = \"tests/{name}.rs\""))
        })
        .collect();
    missing.sort();
    assert!(missing.is_empty(), "in neither tests/tests.rs nor Cargo.toml's [[test]] targets: {missing:?}");
}
