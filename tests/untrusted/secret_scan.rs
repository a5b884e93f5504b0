//! `scripts/secret-scan`, the last step of `scripts/test`, finds a canary Secret value in a run's
//! saved output — plain or base64, in the test log or in a kept gitward log — and passes a clean
//! one. No cluster needed: it runs the script on planted output.

use crate::common;

use std::path::Path;
use std::process::Command;

fn scan(dir: &Path) -> (Option<i32>, String) {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/secret-scan"))
        .arg(dir)
        .output()
        .expect("scripts/secret-scan runs");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A run directory with `test.log` holding `log`, the canary list `canaries`, and one kept
/// gitward log (gzip) holding `kept`.
fn run_dir(log: &str, canaries: &str, kept: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("test.log"), log).unwrap();
    std::fs::write(dir.path().join("canaries.txt"), canaries).unwrap();
    std::fs::create_dir(dir.path().join("logs")).unwrap();
    let plain = dir.path().join("kept.log");
    std::fs::write(&plain, kept).unwrap();
    let status = Command::new("gzip").arg(&plain).status().unwrap();
    assert!(status.success());
    std::fs::rename(dir.path().join("kept.log.gz"), dir.path().join("logs/kept.log.gz")).unwrap();
    dir
}

fn b64(value: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(value)
}

const CLEAN: &str = "running 3 tests\ntest a ... ok\n{\"message\":\"sync complete\"}\ntest result: ok. 3 passed\n";

#[test]
fn clean_output_passes() {
    let dir = run_dir(CLEAN, "hunter2-original\n", "{\"message\":\"object\",\"object\":\"Secret/ns/s\"}\n");
    let (code, stderr) = scan(dir.path());
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("clean"), "{stderr}");
}

#[test]
fn a_prefixed_value_plain_or_base64_fails_the_run_without_printing_it() {
    let value = format!("{}planted", common::CANARY_PREFIX);
    for leaked in [value.clone(), format!("data: {}", b64(&value))] {
        let dir = run_dir(&format!("{CLEAN}{leaked}\n"), "", "");
        let (code, stderr) = scan(dir.path());
        assert_eq!(code, Some(1), "{leaked}: {stderr}");
        assert!(stderr.contains("test.log line 5"), "the hit is located: {stderr}");
        assert!(!stderr.contains(&leaked), "the scan does not print what it found: {stderr}");
    }
}

#[test]
fn a_registered_value_in_a_kept_gitward_log_fails_the_run() {
    for form in ["hunter2-original".to_string(), b64("hunter2-original")] {
        let dir = run_dir(CLEAN, "hunter2-original\n", &format!("{{\"error\":\"{form}\"}}\n"));
        let (code, stderr) = scan(dir.path());
        assert_eq!(code, Some(1), "{form}: {stderr}");
        assert!(stderr.contains("kept.log.gz line 1"), "{stderr}");
    }
}
