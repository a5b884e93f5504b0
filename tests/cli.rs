//! The `gitward` binary: exit codes, the `sync complete` log event and its fields, `diff`
//! output with Secret data masked, `validate` without a cluster.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn gitward(args: &[&str], config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gitward")).args(args).arg("--config").arg(config).output().expect("gitward runs")
}

fn write_config(dir: &Path, repo: &Path, namespace: &str) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    let text = format!("[daemon]\nstate_dir = \"state\"\n\n{}", common::unit_toml("app", repo, "", namespace, ""));
    std::fs::write(&path, text).unwrap();
    path
}

fn json_events(stderr: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stderr).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

const SECRET: &str =
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: hunter2-original\n";

#[tokio::test]
async fn sync_logs_summary_and_exit_codes_follow_kubectl() {
    let env = common::setup("cli").await;
    // Not prefixed with common::CANARY_PREFIX (the test checks "hunter2" itself), so named to the
    // whole-suite Secret scan.
    common::register_canary("hunter2-original");
    common::register_canary("hunter2-rotated");
    let repo = common::GitRepo::new();
    repo.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  k: v1\n");
    repo.write("secret.yaml", SECRET);
    let revision = repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &repo.bare(), &env.namespace);

    let out = gitward(&["--log-format", "json", "sync"], &config);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let events = json_events(&out.stderr);
    let summary = events.iter().find(|e| e["message"] == "sync complete").expect("sync complete event");
    assert_eq!(summary["unit"], "app");
    assert_eq!(summary["revision"], revision);
    assert_eq!(summary["created"], 2);
    for field in ["configured", "unchanged", "drift_corrected", "pruned", "skipped", "failed"] {
        assert_eq!(summary[field], 0, "{field}");
    }
    assert!(summary["requests"].as_u64().unwrap() >= 2);
    assert!(summary["duration_ms"].is_u64());
    let objects: Vec<_> =
        events.iter().filter(|e| e["message"] == "object").map(|e| e["object"].as_str().unwrap().to_string()).collect();
    assert!(objects.contains(&format!("ConfigMap/{}/conf", env.namespace)), "{objects:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2"), "Secret data in logs");

    // diff: nothing to change → 0.
    let out = gitward(&["diff"], &config);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // A change in git: diff shows it with Secret data masked → 1.
    repo.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  k: v2\n");
    repo.write("secret.yaml", &SECRET.replace("hunter2-original", "hunter2-rotated"));
    repo.commit_and_push("second");
    let out = gitward(&["diff"], &config);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("-  k: v1") && stdout.contains("+  k: v2"), "{stdout}");
    assert!(stdout.contains("Secret/") && stdout.contains("***"), "{stdout}");
    assert!(!stdout.contains("hunter2") && !stdout.contains("aHVudGVy"), "Secret data in diff: {stdout}");

    // An object the API server rejects → exit 1.
    repo.write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n");
    repo.commit_and_push("third");
    let out = gitward(&["sync"], &config);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));

    // Malformed YAML → validate and sync exit 2, naming the file.
    repo.write("broken.yaml", "apiVersion: v1\nkind: [\n");
    repo.commit_and_push("fourth");
    for cmd in ["validate", "sync"] {
        let out = gitward(&[cmd], &config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {stderr}");
        assert!(stderr.contains("broken.yaml"), "{cmd}: {stderr}");
    }
}

#[test]
fn config_error_exits_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "[[sync]]\nname = \"x\"\nrepo = \"/tmp/x\"\nbogus_key = 1\n").unwrap();
    let out = gitward(&["validate"], &path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bogus_key"), "{stderr}");
}

#[tokio::test]
async fn objects_that_existed_before_gitward_are_logged_adopted_not_created() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let env = common::setup("adopt").await;
    let ns = env.namespace.clone();
    // Made by hand before gitward: no ApplySet label. One is applied in each apply mode.
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    for name in ["by-hand", "by-hand-update"] {
        let cm: ConfigMap =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"k": "hand"}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let repo = common::GitRepo::new();
    repo.write("by-hand.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: by-hand\ndata:\n  k: git\n");
    repo.write(
        "by-hand-update.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: by-hand-update\n  annotations:\n    gitward.dev/apply-mode: update\ndata:\n  k: git\n",
    );
    repo.write("new.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\ndata:\n  k: git\n");
    repo.commit_and_push("two that exist, one new");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &repo.bare(), &ns);

    let out = gitward(&["--log-format", "json", "sync"], &config);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = json_events(&out.stderr);
    let action = |name: &str| {
        let object = format!("ConfigMap/{ns}/{name}");
        events.iter().find(|e| e["message"] == "object" && e["object"] == object).map(|e| e["action"].clone())
    };
    assert_eq!(action("by-hand"), Some("adopted".into()), "{stderr}");
    assert_eq!(action("by-hand-update"), Some("adopted".into()), "{stderr}");
    assert_eq!(action("new"), Some("created".into()), "{stderr}");
    let summary = events.iter().find(|e| e["message"] == "sync complete").expect("sync complete");
    assert_eq!((summary["adopted"].as_u64(), summary["created"].as_u64()), (Some(2), Some(1)), "{summary}");
    for name in ["by-hand", "by-hand-update"] {
        let live = api.get(name).await.unwrap();
        assert_eq!(live.data.unwrap()["k"], "git");
        assert!(live.metadata.labels.unwrap().contains_key("applyset.kubernetes.io/part-of"), "{name} not adopted");
    }

    // Adopted objects are members now: the next sync leaves them unchanged.
    let out = gitward(&["--log-format", "json", "sync"], &config);
    let events = json_events(&out.stderr);
    let summary = events.iter().find(|e| e["message"] == "sync complete").expect("sync complete");
    assert_eq!((summary["unchanged"].as_u64(), summary["adopted"].as_u64()), (Some(3), Some(0)), "{summary}");
}
