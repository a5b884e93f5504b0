//! Hostile input, through the real `gitward` binary against the real apiserver: each case is
//! bounded in time (the child is killed and the test fails past a generous liveness bound) and
//! in memory (the child's own peak RSS, `VmHWM` of its `/proc/<pid>/status`, read until it
//! exits: a sanity bound, not a measurement), gives
//! a clear error naming the file, and loses nothing: the last good revision stays applied and
//! nothing is pruned. Alias bombs and over-size files in the engine are in `bad_input.rs`.

use crate::common::{self, Run, gitward};

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

/// A unit whose first revision (two ConfigMaps) was synced by the binary.
struct Unit {
    env: common::TestEnv,
    repo: common::GitRepo,
    _dir: tempfile::TempDir,
    config: PathBuf,
}

async fn synced(prefix: &str, extra: &str) -> Unit {
    let (env, _, repo) = common::setup_repo(prefix).await;
    repo.push(&[("a.yaml", &common::cm("a", "1")), ("b.yaml", &common::cm("b", "1"))], "good");
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, extra));
    let first = gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(first.code, Some(0), "first sync: {}", first.stderr);
    Unit { env, repo, _dir: dir, config }
}

impl Unit {
    /// Commits `files` as they are (plus a change to `a` and the removal of `b`, which must
    /// not happen), then syncs with the binary.
    fn hostile_commit(&self, files: &[(&str, &[u8])], limit: Duration) -> Run {
        self.repo.write("a.yaml", &common::cm("a", "2"));
        self.repo.remove("b.yaml");
        for (path, bytes) in files {
            std::fs::write(self.repo.work().join(path), bytes).unwrap();
        }
        self.repo.commit_and_push("hostile");
        gitward(&["sync"], &self.config, limit)
    }

    async fn value(&self, name: &str) -> Option<String> {
        common::cm_value(&self.env.client, &self.env.namespace, name).await
    }

    /// The first revision is still what the cluster holds: nothing applied, nothing pruned.
    async fn untouched(&self) {
        common::assert_cm_values(&self.env.client, &self.env.namespace, &["a", "b"], "1").await;
    }
}

const MIB: i64 = 1024;

#[tokio::test]
async fn a_document_nested_ten_thousand_deep_is_refused_naming_the_file() {
    let unit = synced("deep", "").await;
    let deep = format!("{}{}{}", "a: ".to_string() + &"[".repeat(10_000), "1", "]".repeat(10_000));
    let run = unit.hostile_commit(&[("deep.yaml", deep.as_bytes())], Duration::from_secs(60));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("deep.yaml"), "the error names the file: {}", run.stderr);
    assert!(run.peak_kib < 512 * MIB, "peak RSS {} KiB", run.peak_kib);
    unit.untouched().await;
}

#[tokio::test]
async fn a_file_of_100_mb_is_refused_before_it_is_parsed() {
    let unit = synced("huge", "").await;
    {
        let mut huge = common::cm("huge", "x").into_bytes();
        huge.extend(format!("  filler: \"{}\"\n", "y".repeat(100 << 20)).into_bytes());
        std::fs::write(unit.repo.work().join("huge.yaml"), huge).unwrap();
    }
    let run = unit.hostile_commit(&[], Duration::from_secs(120));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("huge.yaml") && run.stderr.contains("over the limit"), "{}", run.stderr);
    assert!(
        run.peak_kib < 256 * MIB,
        "peak RSS {} KiB (the fetch indexes the blob; the parser must not read it)",
        run.peak_kib
    );
    unit.untouched().await;
}

#[tokio::test]
async fn invalid_utf8_is_refused_naming_the_file() {
    let unit = synced("utf8", "").await;
    let mut bad = common::cm("bad", "x").into_bytes();
    bad.extend_from_slice(b"  broken: \"\xff\xfe\xc0\"\n");
    let run = unit.hostile_commit(&[("bad.yaml", &bad)], Duration::from_secs(60));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("bad.yaml"), "{}", run.stderr);
    unit.untouched().await;
}

/// 100,000 documents in one file are what a generated bundle can hold; kubectl has no limit,
/// and neither does gitward beyond `max_file_bytes` (raised here): they are read within the
/// bounds and checked like any other file. `validate` reads them without a cluster write.
#[tokio::test]
async fn a_hundred_thousand_tiny_documents_in_one_file_are_read_within_bounds() {
    let unit = synced("many-docs", "max_file_bytes = 16777216").await;
    let docs: String =
        (0..100_000).map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n")).collect();
    unit.repo.write("many.yaml", &docs);
    unit.repo.commit_and_push("a generated bundle");
    let run = gitward(&["validate"], &unit.config, Duration::from_secs(300));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let valid = run.stderr.lines().find(|l| l.contains("\"valid\"")).unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(valid.contains("\"objects\":100002"), "{valid}");
    assert!(run.peak_kib < 1024 * MIB, "peak RSS {} KiB", run.peak_kib);

    // The same file with one duplicate among them is refused, naming both documents.
    unit.repo.write("many.yaml", &format!("{docs}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c7\n"));
    unit.repo.commit_and_push("a duplicate at the end");
    let run = gitward(&["validate"], &unit.config, Duration::from_secs(300));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("many.yaml (document") && run.stderr.contains("c7"), "{}", run.stderr);
}

#[tokio::test]
async fn a_name_of_300_characters_fails_that_object_alone_and_blocks_the_prune() {
    let unit = synced("long-name", "").await;
    let long = "n".repeat(300);
    let files = [("long.yaml", common::cm(&long, "x")), ("c.yaml", common::cm("c", "1"))];
    unit.repo.remove("b.yaml");
    for (path, content) in &files {
        unit.repo.write(path, content);
    }
    unit.repo.commit_and_push("a name over the API's limit");
    let run = gitward(&["sync"], &unit.config, Duration::from_secs(60));
    assert_eq!(run.code, Some(1), "one object failed: {}", run.stderr);
    let failed = run
        .stderr
        .lines()
        .find(|l| l.contains("object failed") && l.contains(&long))
        .unwrap_or_else(|| panic!("no failure for the long name: {}", run.stderr));
    assert!(failed.contains("253"), "the API server's reason is kept: {failed}");
    assert_eq!(unit.value("c").await.as_deref(), Some("1"), "the other objects are applied");
    assert_eq!(unit.value("b").await.as_deref(), Some("1"), "a sync with a failure prunes nothing");
}

#[tokio::test]
async fn a_secret_with_binary_data_is_applied_and_never_printed() {
    let unit = synced("binary-secret", "").await;
    let bytes: Vec<u8> = (0..=255u8).rev().collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let secret = |data: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: blob\ntype: Opaque\ndata:\n  key.bin: {data}\n")
    };
    unit.repo.write("secret.yaml", &secret(&encoded));
    unit.repo.commit_and_push("a Secret with binary data");
    let sync = gitward(&["sync"], &unit.config, Duration::from_secs(60));
    assert_eq!(sync.code, Some(0), "{}", sync.stderr);
    let api: Api<Secret> = Api::namespaced(unit.env.client.clone(), &unit.env.namespace);
    let live = api.get("blob").await.unwrap();
    assert_eq!(live.data.unwrap()["key.bin"].0, bytes, "the bytes arrive as they are");

    // A changed value shown by `gitward diff`: masked, like the applied one in the logs.
    let changed: Vec<u8> = (0..=255u8).collect();
    let changed_encoded = base64::engine::general_purpose::STANDARD.encode(&changed);
    unit.repo.write("secret.yaml", &secret(&changed_encoded));
    unit.repo.commit_and_push("another binary value");
    let diff = gitward(&["diff"], &unit.config, Duration::from_secs(60));
    assert_eq!(diff.code, Some(1), "the diff shows a change: {}{}", diff.stdout, diff.stderr);
    assert!(diff.stdout.contains("Secret"), "{}", diff.stdout);
    for run in [&sync, &diff] {
        for value in [&encoded, &changed_encoded] {
            let head = &value[..24];
            assert!(!run.stdout.contains(head) && !run.stderr.contains(head), "Secret data printed");
        }
    }
}
