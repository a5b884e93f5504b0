//! The config's JSON Schema (`schema/config.schema.json`, `gitward schema`) read by a validator
//! that is not gitward: `check-jsonschema`, installed by `scripts/setup` into
//! `target/tools/venv`. It accepts the shipped `config.toml` and every `examples/*.toml`, and
//! rejects a misspelt key, as gitward's own parser does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

/// The repository's root: the schema and the configs are read from there.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs check-jsonschema with the checked-in schema over `files`.
fn check(files: &[PathBuf]) -> Output {
    let validator = root().join("target/tools/venv/bin/check-jsonschema");
    assert!(validator.is_file(), "{} missing: run scripts/setup first", validator.display());
    Command::new(&validator)
        .arg("--schemafile")
        .arg(root().join("schema/config.schema.json"))
        .args(files)
        .output()
        .expect("run check-jsonschema")
}

/// Its output, for a failed assertion.
fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_shipped_configs_pass_the_schema_and_a_misspelt_key_does_not() {
    let mut files = vec![root().join("config.toml")];
    let examples = std::fs::read_dir(root().join("examples")).expect("read examples/");
    files.extend(examples.map(|e| e.expect("an entry").path()).filter(|p| p.extension().is_some_and(|x| x == "toml")));
    assert!(files.len() >= 2, "config.toml and examples/*.toml: {files:?}");
    let out = check(&files);
    assert_eq!(out.status.code(), Some(0), "{files:?}: {}", said(&out));

    let dir = tempfile::tempdir().expect("a temporary directory");
    let misspelt = dir.path().join("misspelt.toml");
    std::fs::write(&misspelt, "[daemon]\nintervall = \"60s\"\n\n[[sync]]\nname = \"a\"\nrepo = \"/srv/a.git\"\n")
        .expect("write the config");
    let out = check(std::slice::from_ref(&misspelt));
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("'intervall' was unexpected"), "{}", said(&out));
}

#[test]
fn gitward_schema_prints_the_checked_in_file() {
    let out = Command::new(common::binary()).arg("schema").output().expect("run gitward schema");
    assert_eq!(out.status.code(), Some(0));
    let shipped = std::fs::read(root().join("schema/config.schema.json")).expect("read the schema");
    assert!(out.stdout == shipped, "run `gitward schema > schema/config.schema.json`");
}
