//! The `gitward` binary: exit codes, the `sync complete` log event and its fields, `diff`
//! output with Secret data masked, `validate` without a cluster; the one line per unit on
//! stdout, the text log format, `--help`, and errors of the kubeconfig and config file as one
//! sentence that names what to fix (those of the API server, the repository and the render
//! tools are in `error_catalogue`).

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

fn gitward(args: &[&str], config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gitward")).args(args).arg("--config").arg(config).output().expect("gitward runs")
}

fn write_config(dir: &Path, repo: &Path, namespace: &str) -> std::path::PathBuf {
    common::config_file(dir, &common::unit_toml("app", repo, "", namespace, ""))
}

/// Runs `gitward <args>` with text logs (the default) at the default level and `env` set;
/// returns (exit code, stdout, stderr).
fn gitward_text(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gitward"));
    command.args(args).env_remove("RUST_LOG").env_remove("GITWARD_LOG_FORMAT");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("gitward runs");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Text log lines as a person reads them: `TIME LEVEL message key=value…`, with no module
/// targets, no `Some(…)`, none of kube_client's own lines, and no field twice on a line.
fn assert_plain_log(stderr: &str) {
    for line in stderr.lines() {
        let mut words = line.split(' ').filter(|w| !w.is_empty());
        let time = words.next().unwrap_or_default();
        assert!(time.ends_with('Z') && time.contains('T'), "no timestamp: {line}");
        let level = words.next().unwrap_or_default();
        assert!(["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level), "no level: {line}");
        assert!(!line.contains("gitward::") && !line.contains("kube_client"), "a module target: {line}");
        assert!(!line.contains("Some("), "an Option printed as Some(…): {line}");
        let keys: Vec<&str> = line.split(' ').filter_map(|w| w.split_once('=').map(|(k, _)| k)).collect();
        for key in ["unit", "error", "object"] {
            assert!(keys.iter().filter(|k| **k == key).count() <= 1, "{key} twice: {line}");
        }
    }
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
    let revision = repo.push(&[("secret.yaml", SECRET)], "first");
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
    // One line on stdout: the result, the revision, the counts.
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("app: applied {} (2 created)\n", &revision[..7]));

    // status: each unit's block starts with its one-line summary.
    let (code, stdout, stderr) = gitward_text(&["status", "--config", config.to_str().unwrap()], &[]);
    assert!(code.is_some_and(|c| c < 2), "{stderr}");
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with(&format!("app: healthy {}, applied ", &revision[..7])), "{stdout}");
    assert!(first.ends_with("(2 objects: 2 healthy)"), "{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("sandbox: landlock ABI ") && last.ends_with(", seccomp, user, network and PID namespaces"),
        "{stdout}"
    );

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
    repo.push(&[("secret.yaml", &SECRET.replace("hunter2-original", "hunter2-rotated"))], "second");
    let out = gitward(&["diff"], &config);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("-  k: v1") && stdout.contains("+  k: v2"), "{stdout}");
    assert!(stdout.contains("Secret/") && stdout.contains("***"), "{stdout}");
    assert!(!stdout.contains("hunter2") && !stdout.contains("aHVudGVy"), "Secret data in diff: {stdout}");

    // An object the API server rejects → exit 1; the text log warns, stdout names the object.
    let third = repo.push(&[("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n")], "third");
    let (code, stdout, stderr) = gitward_text(&["sync", "--config", config.to_str().unwrap()], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let bad = format!("ConfigMap/{}/Bad_Name", env.namespace);
    assert_eq!(stdout, format!("app: failed {} (2 configured, 1 failed): {bad}\n", &third[..7]));
    assert_plain_log(&stderr);
    let warned = |message: &str| stderr.lines().any(|l| l.contains(&format!(" WARN {message} unit=app ")));
    assert!(warned("object failed") && warned("sync complete"), "failed results at WARN: {stderr}");
    assert!(stderr.lines().any(|l| l.contains(&format!("object={bad}"))), "{stderr}");

    // Malformed YAML → validate and sync exit 2, naming the file.
    repo.push(&[("broken.yaml", "apiVersion: v1\nkind: [\n")], "fourth");
    for cmd in ["validate", "sync"] {
        let out = gitward(&[cmd], &config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {stderr}");
        assert!(stderr.contains("broken.yaml"), "{cmd}: {stderr}");
    }
}

#[tokio::test]
async fn a_wait_that_times_out_names_what_is_not_ready() {
    let (env, _, repo) = common::setup_repo("cli-wait").await;
    // Its Pods crash-loop: the deployment controller never makes it available.
    let revision = repo.push(&[("web.yaml", &common::deployment("web", "nginx:fail", 2))], "web");
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "health_timeout = \"2s\"");
    let config = common::config_file(dir.path(), &unit);
    let (code, stdout, stderr) = gitward_text(&["sync", "--wait", "--config", config.to_str().unwrap()], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let expected = format!(
        "app: progressing {} (1 created); not ready after 2s: Deployment/{}/web ",
        &revision[..7],
        env.namespace
    );
    assert!(stdout.starts_with(&expected), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stderr.lines().any(|l| l.contains(" WARN sync complete unit=app ") && l.contains("wait=timeout")),
        "{stderr}"
    );
    assert_plain_log(&stderr);
}

#[test]
fn config_errors_exit_2_naming_the_key_with_a_suggestion_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let config = path.to_str().unwrap();
    let cases = [
        // An unrelated key: the keys of the table are listed.
        (
            "[[sync]]\nname = \"x\"\nrepo = \"/tmp/x\"\nbogus_key = 1\n",
            vec!["line 4", "unknown key `bogus_key`", "repo"],
        ),
        // A typo: the closest key, with an example value from the documented config.toml.
        (
            "[daemon]\nintervall = \"5m\"\n[[sync]]\nname = \"x\"\nrepo = \"/tmp/x\"\n",
            vec!["line 2", "daemon: unknown key `intervall`: did you mean `interval`, as in `interval = \"60s\"`?"],
        ),
        // `[sync]` for `[[sync]]`.
        ("[sync]\nname = \"x\"\nrepo = \"/tmp/x\"\n", vec!["`[sync]` is a single table", "write `[[sync]]`"]),
    ];
    for (text, expected) in cases {
        std::fs::write(&path, text).unwrap();
        let (code, stdout, stderr) = gitward_text(&["validate", "--config", config], &[]);
        assert_eq!(code, Some(2), "{stderr}");
        // The error is a quoted logfmt value.
        let stderr = stderr.replace("\\\"", "\"");
        for part in expected {
            assert!(stderr.contains(part), "{part:?} missing: {stderr}");
        }
        assert_eq!(stderr.lines().count(), 1, "one line per error: {stderr}");
        assert!(!stderr.contains("expected one of") && !stderr.contains("invalid type"), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert_plain_log(&stderr);
    }
}

#[test]
fn help_of_each_command_gives_its_exit_codes_and_an_example() {
    for command in ["run", "sync", "diff", "preview", "validate", "status", "suspend", "reconcile"] {
        let (code, stdout, _) = gitward_text(&[command, "--help"], &[]);
        assert_eq!(code, Some(0), "{command}: {stdout}");
        assert!(stdout.contains("Exit codes: 0 "), "{command}: {stdout}");
        assert!(stdout.contains(&format!("Example:\n  gitward {command} --config")), "{command}: {stdout}");
    }
    let (_, stdout, _) = gitward_text(&["validate", "--help"], &[]);
    assert!(stdout.contains("--kube-version <VERSION>"), "{stdout}");
}

#[test]
fn a_local_repository_that_does_not_exist_is_named_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("repos/shop.git");
    let config = common::config_file(dir.path(), &common::unit_toml("app", &missing, "", "default", ""));
    let (code, stdout, stderr) = gitward_text(&["validate", "--config", config.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!stderr.contains("unsupported URL protocol"), "{stderr}");
    let expected = format!("fetch from {} failed: no such directory on this host", missing.display());
    assert!(stderr.contains(&expected) && stderr.contains("git init --bare"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line per error: {stderr}");
    assert_eq!(stdout, "app: invalid: its manifests could not be read (the error is logged)\n");
    assert_plain_log(&stderr);
}

#[test]
fn no_kubeconfig_says_where_it_looked_and_how_to_give_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let config =
        common::config_file(dir.path(), &common::unit_toml("app", &dir.path().join("repo"), "", "default", ""));
    let mut command = Command::new(env!("CARGO_BIN_EXE_gitward"));
    command.args(["sync", "--config", config.to_str().unwrap()]).env("HOME", &home);
    for var in ["KUBECONFIG", "KUBERNETES_SERVICE_HOST", "RUST_LOG", "GITWARD_LOG_FORMAT"] {
        command.env_remove(var);
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let tried = format!("$KUBECONFIG is not set, {}/.kube/config does not exist", home.display());
    assert!(stderr.contains(&tried), "{stderr}");
    assert!(stderr.contains("set `kubeconfig` in the config file's [cluster] table, or export KUBECONFIG"), "{stderr}");
    assert!(!stderr.contains("failed to read kubeconfig from"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line per error: {stderr}");
    assert_plain_log(&stderr);
}

fn configmap(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v1\n")
}

/// Runs `gitward <args>` and returns (exit code, stdout, stderr).
fn run(args: &[&str], config: &Path) -> (Option<i32>, String, String) {
    let out = gitward(args, config);
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// `gitward diff` agrees with `gitward sync`: objects of a namespace the revision
/// or `create_namespace` makes are shown as created, without a dry run and without making the
/// namespace; the prune guard applies (`prune refused: …` instead of the prunes); an inventory
/// moved to a namespace that does not exist is the error a sync stops on; a changed ApplySet
/// id is warned about. Exit codes: 0 no changes, 1 changes, 2 what a sync would fail.
#[tokio::test]
async fn diff_agrees_with_sync_on_new_namespaces_the_prune_guard_and_a_moved_inventory() {
    let env = common::setup("diff-sync").await;
    let ns = env.namespace.as_str();
    let (made, joint, gone) = (common::unique("made"), common::unique("joint"), common::unique("gone"));
    let repo = common::GitRepo::new();
    repo.write("made/ns.yaml", &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {made}\n"));
    repo.write("made/cm.yaml", &configmap("conf"));
    repo.write("joint/cm.yaml", &configmap("conf"));
    for name in ["a", "b", "c", "d"] {
        repo.write(&format!("app/{name}.yaml"), &configmap(name));
    }
    repo.commit_and_push("three units");
    let dir = tempfile::tempdir().unwrap();
    let config = |app_extra: &str| {
        let units = common::unit_toml("made", &repo.bare(), "made", &made, "")
            + &common::unit_toml("joint", &repo.bare(), "joint", &joint, "create_namespace = true")
            + &common::unit_toml("app", &repo.bare(), "app", ns, app_extra);
        common::config_file(dir.path(), &units)
    };
    let plain = config("");
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(env.client.clone());

    // 1. A Namespace and a ConfigMap in it: created, shown whole; diff makes nothing.
    let (code, stdout, stderr) = run(&["diff", "--sync", "made"], &plain);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("+++ merged/ConfigMap/{made}/conf")) && stdout.contains("+  k: v1"), "{stdout}");
    assert!(stdout.contains(&format!("+++ merged/Namespace/{made}")), "{stdout}");
    assert!(namespaces.get_opt(&made).await.unwrap().is_none(), "diff changes nothing");
    assert_eq!(run(&["sync", "--sync", "made"], &plain).0, Some(0));
    assert_eq!(run(&["diff", "--sync", "made"], &plain).0, Some(0));

    // 2. create_namespace: the Namespace is announced, the ConfigMap shown whole.
    let (code, stdout, stderr) = run(&["diff", "--sync", "joint"], &plain);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let announced =
        format!("Namespace/{joint}: would be created (create_namespace; kept by no unit, a member of no ApplySet)");
    assert!(stdout.contains(&announced), "{stdout}");
    assert!(stdout.contains(&format!("+++ merged/ConfigMap/{joint}/conf")), "{stdout}");
    assert!(namespaces.get_opt(&joint).await.unwrap().is_none(), "diff changes nothing");
    assert_eq!(run(&["sync", "--sync", "joint"], &plain).0, Some(0));
    assert_eq!(run(&["diff", "--sync", "joint"], &plain).0, Some(0));

    // 3. The prune guard: 3 of 4 members leaving git is refused by diff as by sync.
    assert_eq!(run(&["sync", "--sync", "app"], &plain).0, Some(0));
    for name in ["b", "c", "d"] {
        repo.remove(&format!("app/{name}.yaml"));
    }
    repo.commit_and_push("most of app leaves git");
    let (code, stdout, stderr) = run(&["diff", "--sync", "app"], &plain);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("prune refused: would prune 3 of 4 members (75%), over max_prune_fraction 50%"),
        "{stdout}"
    );
    assert!(!stdout.contains("prune ConfigMap"), "{stdout}");
    assert_eq!(run(&["sync", "--sync", "app"], &plain).0, Some(1), "the sync refuses it too");
    repo.push(&[("app/c.yaml", &configmap("c")), ("app/d.yaml", &configmap("d"))], "only b leaves git");
    let (code, stdout, _) = run(&["diff", "--sync", "app"], &plain);
    let (head, rest) = stdout.split_once('\n').unwrap_or_default();
    assert!(head.starts_with("revision "), "headed by the applied and compared revisions: {stdout}");
    assert_eq!((code, rest.trim()), (Some(1), format!("prune ConfigMap/{ns}/b").as_str()));

    // 4. The inventory moved to a namespace that does not exist: both stop with one sentence.
    let moved = config(&format!("[sync.inventory]\nnamespace = \"{gone}\"\n"));
    let sentence = format!("inventory Secret/{gone}/gitward-app: namespace {gone} does not exist");
    for command in ["diff", "sync"] {
        let (code, stdout, stderr) = run(&[command, "--sync", "app"], &moved);
        assert_eq!(code, Some(2), "{command}: {stdout}{stderr}");
        assert!(stderr.contains(&sentence), "{command}: {stderr}");
        assert_eq!(stderr.matches("does not exist").count(), 1, "{command}: printed once: {stderr}");
    }

    // 5. A changed ApplySet id: the objects belong to the unit's earlier parent; diff warns that
    //    its members would be orphaned and fails what a sync fails.
    let renamed = config("[sync.inventory]\nname = \"gitward-app-v2\"\n");
    let (code, stdout, stderr) = run(&["diff", "--sync", "app"], &renamed);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("earlier ApplySet parent Secret/{ns}/gitward-app ")), "{stderr}");
    assert!(stderr.contains("would be orphaned"), "{stderr}");
    assert!(stderr.contains("belongs to unit `app`") && stderr.contains("add adopt_from = ["), "{stderr}");
    assert_eq!(run(&["sync", "--sync", "app"], &renamed).0, Some(1), "the sync refuses them");
    let adopting = config("adopt_from = [\"app\"]\n[sync.inventory]\nname = \"gitward-app-v2\"\n");
    let (code, stdout, stderr) = run(&["diff", "--sync", "app"], &adopting);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("adopt_from moves them here"), "{stderr}");
    // Only the ApplySet label changes: named, not shown as a diff of gitward's bookkeeping.
    let relabelled = format!("ConfigMap/{ns}/a: only gitward's bookkeeping changes (applyset.kubernetes.io/part-of)\n");
    assert!(stdout.contains(&relabelled), "{stdout}");
}

#[tokio::test]
async fn objects_that_existed_before_gitward_are_logged_adopted_not_created() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let (env, ns) = common::setup_ns("adopt").await;
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

/// A member whose create the API server refused is not in the cluster because it was never
/// made: `status` says `NotCreated` with the failure the parent records for it
/// (`gitward.dev/last-failed`), not `Missing … (deleted by hand?)`.
#[tokio::test]
async fn status_reports_a_refused_create_as_not_created_with_its_failure() {
    let (env, _, repo) = common::setup_repo("cli-notcreated").await;
    repo.write("cm.yaml", &configmap("conf"));
    repo.write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n  namespace: no-such-ns-x\n");
    repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &repo.bare(), &env.namespace);
    let config = config.to_str().unwrap();
    let (code, _, stderr) = gitward_text(&["sync", "--config", config], &[]);
    assert_eq!(code, Some(1), "{stderr}");

    let (_, json, stderr) = gitward_text(&["status", "--config", config, "-o", "json"], &[]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}{stderr}"));
    let failed = &json["units"][0]["failed"][0];
    assert_eq!(failed["object"], "ConfigMap/no-such-ns-x/conf", "{json}");
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.contains("no-such-ns-x"), "{reason}");
    let (code, text, stderr) = gitward_text(&["status", "--config", config], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(text.contains(&format!("  unhealthy  ConfigMap/no-such-ns-x/conf NotCreated: {reason}\n")), "{text}");
    assert!(!text.contains("Missing") && !text.contains("deleted by hand"), "{text}");
    assert_eq!(json["units"][0]["unhealthy"][0]["health"], "NotCreated", "{json}");
}

/// A sync with nothing to wait on (ConfigMaps have no health) logs `wait=none result=healthy`
/// without health counts: `healthy=0 progressing=0 degraded=0` beside `result=healthy` counted
/// nothing and read as a contradiction. A wait that ran counts the objects it waited on.
#[tokio::test]
async fn health_counts_are_logged_only_for_a_wait_that_ran() {
    let (env, _, repo) = common::setup_repo("cli-counts").await;
    repo.push(&[("cm.yaml", &configmap("conf"))], "first");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &repo.bare(), &env.namespace);
    let out = gitward(&["--log-format", "json", "sync", "--wait"], &config);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let events = json_events(&out.stderr);
    let summary = events.iter().find(|e| e["message"] == "sync complete").expect("sync complete event");
    assert_eq!((summary["wait"].as_str(), summary["result"].as_str()), (Some("none"), Some("healthy")), "{summary}");
    for field in ["healthy", "progressing", "degraded"] {
        assert!(summary.get(field).is_none(), "{field} counted with nothing waited on: {summary}");
    }
    assert_eq!(summary["created"], 1, "{summary}");
}

/// `create_namespace` says what it made: a `namespace created` event naming it, and
/// `namespaces_created` in `sync complete` (0 once it exists).
#[tokio::test]
async fn a_namespace_made_for_create_namespace_is_logged_and_counted() {
    let env = common::setup("cli-nsmade").await;
    let namespace = common::unique("cli-made");
    let repo = common::GitRepo::new();
    repo.push(&[("cm.yaml", &configmap("conf"))], "first");
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &namespace, "create_namespace = true");
    let config = common::config_file(dir.path(), &unit);
    let out = gitward(&["--log-format", "json", "sync"], &config);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let events = json_events(&out.stderr);
    let made: Vec<_> = events.iter().filter(|e| e["message"] == "namespace created").collect();
    assert_eq!(made.len(), 1, "{events:?}");
    assert_eq!((made[0]["unit"].as_str(), made[0]["namespace"].as_str()), (Some("app"), Some(namespace.as_str())));
    let summary = events.iter().find(|e| e["message"] == "sync complete").expect("sync complete event");
    assert_eq!(summary["namespaces_created"], 1, "{summary}");

    let out = gitward(&["--log-format", "json", "sync"], &config);
    let events = json_events(&out.stderr);
    assert!(!events.iter().any(|e| e["message"] == "namespace created"), "{events:?}");
    let summary = events.iter().find(|e| e["message"] == "sync complete").expect("sync complete event");
    assert_eq!(summary["namespaces_created"], 0, "{summary}");
    drop(env);
    let _ = common::kubectl(&["delete", "namespace", &namespace, "--wait=false"]);
}
