//! Bad input gets a clear error and loses nothing: each case against the real apiserver and a
//! real git repository. A revision that fails to read is not applied at all and nothing is
//! pruned; the error names the file and document (or the object, or the repository).

use crate::common;

use futures::StreamExt;
use gitward::changeset::Action;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

/// A unit over a fresh repository whose first commit (two ConfigMaps) synced cleanly.
struct Synced {
    env: common::TestEnv,
    repo: common::GitRepo,
    _state: tempfile::TempDir,
    engine: gitward::sync::Engine,
}

async fn synced(prefix: &str, extra: &str) -> Synced {
    let (env, _, repo) = common::setup_repo(prefix).await;
    repo.push(&[("app/a.yaml", &common::cm("a", "1")), ("app/b.yaml", &common::cm("b", "1"))], "good");
    let (state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, extra).await;
    let report = engine.sync().await.expect("first sync");
    assert_eq!(report.changes.counts().created, 2);
    Synced { env, repo, _state: state, engine }
}

impl Synced {
    async fn value(&self, name: &str) -> Option<String> {
        common::cm_value(&self.env.client, &self.env.namespace, name).await
    }

    /// Both ConfigMaps of the first commit are still there, unchanged.
    async fn untouched(&self) {
        common::assert_cm_values(&self.env.client, &self.env.namespace, &["a", "b"], "1").await;
    }

    /// Commits `files` (path, content), removing b.yaml, changing a, syncs, and returns the error text.
    async fn bad_commit(&mut self, files: &[(&str, &str)]) -> String {
        self.repo.write("app/a.yaml", &common::cm("a", "2"));
        self.repo.remove("app/b.yaml");
        for (path, content) in files {
            self.repo.write(path, content);
        }
        self.repo.commit_and_push("bad");
        let err = self.engine.sync().await.expect_err("a bad revision must not sync");
        chain(&err)
    }
}

/// [`Synced::bad_commit`] of `app/c.yaml` holding `content`, to a unit synced as `prefix`: the
/// error names each of `named`, and nothing changed ([`Synced::untouched`]).
async fn refused_naming(prefix: &str, content: &str, named: &[&str]) -> Synced {
    let mut s = synced(prefix, "").await;
    let err = s.bad_commit(&[("app/c.yaml", content)]).await;
    assert!(named.iter().all(|n| err.contains(n)), "{named:?} not all named: {err}");
    s.untouched().await;
    s
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s = format!("{s}: {x}");
        src = x.source();
    }
    s
}

#[tokio::test]
async fn malformed_yaml_names_file_and_document_and_applies_nothing() {
    let s = refused_naming(
        "bad-yaml",
        &format!("{}---\nkind: [unclosed\n", common::cm("c", "1")),
        &["app/c.yaml", "document 2"],
    )
    .await;
    assert_eq!(s.value("c").await, None);
}

#[tokio::test]
async fn object_without_a_name_is_an_error() {
    refused_naming("no-name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", &["app/c.yaml", "metadata.name"])
        .await;
}

#[tokio::test]
async fn generate_name_is_rejected_with_a_clear_error() {
    refused_naming(
        "gen-name",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: c-\n",
        &["app/c.yaml", "generateName"],
    )
    .await;
}

#[tokio::test]
async fn unknown_kind_is_an_error_naming_file_and_kind() {
    refused_naming(
        "unknown-kind",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n",
        &["app/c.yaml", "Gadget"],
    )
    .await;
}

#[tokio::test]
async fn duplicate_objects_name_both_files() {
    refused_naming("duplicate", &common::cm("a", "3"), &["app/a.yaml", "app/c.yaml", "ConfigMap/"]).await;
}

#[tokio::test]
async fn yaml_alias_bomb_is_refused() {
    let mut s = synced("alias-bomb", "").await;
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nx0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let prev = i - 1;
        bomb.push_str(&format!(
            "x{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let err = s.bad_commit(&[("app/bomb.yaml", &bomb)]).await;
    assert!(err.contains("app/bomb.yaml"), "{err}");
    s.untouched().await;
}

#[tokio::test]
async fn very_large_file_is_refused_naming_it() {
    let mut s = synced("large", "max_file_bytes = 4096").await;
    let big = format!("{}  big: \"{}\"\n", common::cm("big", "x"), "y".repeat(8192));
    let err = s.bad_commit(&[("app/big.yaml", &big)]).await;
    assert!(err.contains("app/big.yaml"), "{err}");
    s.untouched().await;
}

#[tokio::test]
async fn object_rejected_by_the_api_server_fails_alone_and_blocks_prune() {
    let mut s = synced("rejected", "").await;
    s.repo.write("app/a.yaml", &common::cm("a", "2"));
    s.repo.remove("app/b.yaml");
    s.repo.write("app/c.yaml", &common::cm("Not_A_Valid_Name", "1"));
    s.repo.commit_and_push("one invalid object");
    let report = s.engine.sync().await.expect("sync runs");
    let actions = common::actions(&report);
    let ns = &s.env.namespace;
    assert_eq!(actions[&format!("ConfigMap/{ns}/a")], "configured", "{actions:?}");
    let bad = report.changes.entries.iter().find(|e| e.object.name == "Not_A_Valid_Name").unwrap();
    assert_eq!(bad.action, Action::Failed);
    let msg = bad.message.as_deref().unwrap();
    assert!(msg.contains("app/c.yaml") && msg.contains("Invalid"), "{msg}");
    assert_eq!(s.value("a").await.as_deref(), Some("2"), "the valid object is still applied");
    assert_eq!(s.value("b").await.as_deref(), Some("1"), "no prune after a failure");
}

#[tokio::test]
async fn emptied_path_refuses_to_prune() {
    let mut s = synced("emptied", "").await;
    s.repo.remove("app");
    s.repo.write("README.md", "nothing here any more\n");
    s.repo.commit_and_push("empty the path");
    let report = s.engine.sync().await.expect("sync runs");
    let refused = report.changes.prune_refused.as_deref().expect("prune refused");
    assert!(refused.contains("no objects"), "{refused}");
    assert_eq!(report.changes.counts().pruned, 0);
    s.untouched().await;
}

#[tokio::test]
async fn prune_over_the_fraction_is_refused_unless_allowed() {
    let mut s = synced("fraction", "max_prune_fraction = 0.4").await;
    s.repo.remove("app/b.yaml");
    s.repo.commit_and_push("remove half");
    let report = s.engine.sync().await.expect("sync runs");
    assert!(
        report.changes.prune_refused.as_deref().unwrap_or_default().contains("1 of 2"),
        "{:?}",
        report.changes.prune_refused
    );
    s.untouched().await;
}

#[tokio::test]
async fn unreachable_repository_is_a_clear_error_and_touches_nothing() {
    let mut s = synced("unreachable", "").await;
    std::fs::rename(s.repo.bare(), s.repo.bare().with_extension("moved")).unwrap();
    let err = s.engine.sync().await.expect_err("fetch must fail");
    let text = chain(&err);
    assert!(text.contains("app") && text.contains("remote.git"), "{text}");
    s.untouched().await;
}

#[tokio::test]
async fn object_of_another_applyset_is_failed_not_taken_over() {
    let env = common::setup("foreign").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let theirs = |name: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"applyset.kubernetes.io/part-of": "applyset-someone-else-v1"}},
            "data": {"value": "theirs"}})
    };
    // 600 of the other ApplySet's members sorting before "contested": the ownership check reads
    // its list in pages of 500, and "contested" is on the second.
    futures::stream::iter(0..600)
        .for_each_concurrent(16, |i| {
            let (api, name) = (api.clone(), format!("a-{i:03}"));
            async move {
                api.patch(&name, &PatchParams::apply("other-tool"), &Patch::Apply(theirs(&name))).await.unwrap();
            }
        })
        .await;
    api.patch("contested", &PatchParams::apply("other-tool"), &Patch::Apply(theirs("contested"))).await.unwrap();
    let repo = common::GitRepo::new();
    repo.write("contested.yaml", &common::cm("contested", "ours"));
    repo.push(&[("mine.yaml", &common::cm("mine", "ours"))], "take over?");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, "").await;
    let report = engine.sync().await.expect("sync runs");
    let entry = report.changes.entries.iter().find(|e| e.object.name == "contested").unwrap();
    assert_eq!(entry.action, Action::Failed);
    assert!(entry.message.as_deref().unwrap().contains("applyset-someone-else-v1"), "{:?}", entry.message);
    let live = api.get("contested").await.unwrap();
    assert_eq!(live.data.unwrap()["value"], "theirs");
    assert_eq!(live.metadata.labels.unwrap()["applyset.kubernetes.io/part-of"], "applyset-someone-else-v1");
    assert_eq!(common::actions(&report)[&format!("ConfigMap/{}/mine", env.namespace)], "created");
}

/// Runs `gitward validate` on `config` with text logs; returns (exit code, stdout, stderr).
fn validate(config: &std::path::Path) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["validate", "--config"])
        .arg(config)
        .env_remove("RUST_LOG")
        .env_remove("GITWARD_LOG_FORMAT")
        .output()
        .expect("gitward runs");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test]
async fn validate_refuses_what_the_api_server_would_naming_file_and_document() {
    let (env, _, repo) = common::setup_repo("validate-refuses").await;
    repo.write("app/a.yaml", &common::cm("a", "1"));
    let not_base64 = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\ndata:\n  password: not base64!\n";
    repo.write("app/secrets.yaml", &format!("{}---\n{not_base64}", common::cm("b", "1")));
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: \"{}\"\n",
        "x".repeat(1 << 20)
    );
    let revision = repo.push(&[("app/big.yaml", &big)], "bad");
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "app", &env.namespace, ""));
    let (code, stdout, stderr) = validate(&config);
    assert_eq!(code, Some(2), "{stderr}");
    // The test's namespace is made by the test, not by a unit: a warning, no failure.
    assert_eq!(stdout, format!("app: invalid {} (4 objects, 2 refused, 1 warning)\n", &revision[..7]));
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(" ERROR invalid object ")).collect();
    assert_eq!(lines.len(), 2, "one line per problem: {stderr}");
    let secret = format!("object=Secret/{}/creds", env.namespace);
    assert!(
        lines.iter().any(|l| l.contains("file=\"app/secrets.yaml (document 2)\"")
            && l.contains(&secret)
            && l.contains("data.password is not base64")),
        "{stderr}"
    );
    assert!(!stderr.contains("not base64!"), "the Secret's value must not be quoted: {stderr}");
    assert!(
        lines.iter().any(|l| l.contains("file=\"app/big.yaml (document 1)\"")
            && l.contains("1048580 bytes of data, over the 1048576 bytes (1 MiB) a ConfigMap may hold")),
        "{stderr}"
    );

    // Fixed: valid, and what was checked is on stdout.
    repo.write("app/secrets.yaml", &common::cm("b", "1"));
    repo.remove("app/big.yaml");
    let fixed = repo.commit_and_push("fixed");
    let (code, stdout, stderr) = validate(&config);
    assert_eq!((code, stdout), (Some(0), format!("app: valid {} (2 objects, 1 warning)\n", &fixed[..7])), "{stderr}");
}

#[tokio::test]
async fn a_path_naming_a_file_says_so_in_validate_and_sync() {
    let mut s = synced("path-is-file", "").await;
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &s.repo.bare(), "app/a.yaml", &s.env.namespace, "");
    let config = common::config_file(dir.path(), &unit);
    let (code, stdout, stderr) = validate(&config);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("path \\\"app/a.yaml\\\" is a file at revision"), "{stderr}");
    assert!(stderr.contains("not a directory: set `path` to the directory that holds it"), "{stderr}");
    assert!(!stderr.contains("not found"), "{stderr}");
    assert_eq!(stdout, "app: invalid: its manifests could not be read (the error is logged)\n");

    let config = common::config(dir.path(), &unit);
    let mut engine = common::engine(&s.env.client, &config, "app").await;
    let err = chain(&engine.sync().await.expect_err("a file is not a unit's path"));
    assert!(err.starts_with("app: path \"app/a.yaml\" is a file at revision "), "{err}");
    let _ = &mut s.engine;
    s.untouched().await;
}
