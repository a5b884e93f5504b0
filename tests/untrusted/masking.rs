//! Decrypted values stay masked in everything gitward writes, end to end: the real `sops`
//! (and `kustomize`), real git repositories and the real apiserver, whose validation messages
//! quote the value they refuse (`Invalid value: "…"`, Go's `%q`).
//!
//! Each value carries a token made for the test, so "not in the output" is checked for the
//! token in any form.

use crate::common;
use crate::sources::render::{age_key, config_text, decrypting_config, gitward, tool, tools_bin};

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

/// A token no other text of a run holds: lowercase hex of the clock's nanoseconds.
fn token() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{:x}{}", nanos, common::unique("t").replace('-', ""))
}

/// `plain` (YAML) encrypted by the real sops for `recipient`, the values under keys matching
/// `regex` encrypted.
fn seal(dir: &Path, recipient: &str, plain: &str, regex: &str) -> String {
    let file = dir.join("plain.yaml");
    std::fs::write(&file, plain).unwrap();
    let text = tool("sops", &["encrypt", "--age", recipient, "--encrypted-regex", regex, file.to_str().unwrap()], dir);
    std::fs::remove_file(file).unwrap();
    assert!(text.contains("ENC[AES256_GCM"), "sops encrypted nothing");
    text
}

/// The `gitward.dev/` annotations of the unit's ApplySet parent.
async fn recorded(client: &kube::Client, ns: &str, parent: &str) -> std::collections::BTreeMap<String, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let annotations = api.get(parent).await.unwrap().metadata.annotations.unwrap_or_default();
    annotations.into_iter().filter(|(k, _)| k.starts_with("gitward.dev/")).collect()
}

/// A ConfigMap `db` whose labels and data were SOPS-encrypted: like every value of an object
/// made from decrypted input, its label values are shown as `***`, keys kept. `gitward diff`
/// of the next revision prints neither the old (applied by an earlier process, so never
/// decrypted by this one) nor the new value, a two-character value included, and still shows
/// the change.
#[tokio::test]
async fn gitward_diff_masks_old_and_new_decrypted_values_even_in_labels_and_two_characters_long() {
    let (env, ns) = common::setup_ns("mask-diff").await;
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let sealed = |tier: &str, code: &str, password: &str| {
        let plain = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  labels:\n    tier: {tier}\n    code: {code}\n\
             data:\n  password: {password}\n"
        );
        seal(keys.path(), &public, &plain, "^(data|labels)$")
    };
    let (old_tier, old_password) = (format!("t{}", token()), format!("pw-{}", token()));
    let repo = common::GitRepo::new();
    repo.push(&[("app/db.enc.yaml", &sealed(&old_tier, "Zq", &old_password))], "an encrypted ConfigMap");
    let state = tempfile::tempdir().unwrap();
    let (_, config_file) = decrypting_config(state.path(), "vault", &repo, &ns, &key);
    let config_arg = config_file.to_str().unwrap();
    let (code, log) = gitward(&["sync", "--config", config_arg]);
    assert_eq!(code, 0, "{log}");
    let live = Api::<ConfigMap>::namespaced(env.client.clone(), &ns).get("db").await.unwrap();
    assert_eq!(live.metadata.labels.unwrap()["tier"], old_tier, "decrypted and applied");

    let (new_tier, new_password) = (format!("t{}", token()), format!("pw-{}", token()));
    repo.push(&[("app/db.enc.yaml", &sealed(&new_tier, "Jx", &new_password))], "new values");
    let (code, diff) = gitward(&["diff", "--config", config_arg]);
    assert_eq!(code, 1, "{}", diff.len());
    let values =
        [("old label", &old_tier), ("new label", &new_tier), ("old data", &old_password), ("new data", &new_password)];
    for (which, value) in values {
        assert!(!diff.contains(value.as_str()), "the {which} value in diff output ({} bytes)", diff.len());
    }
    let bare = |line: &str| line.trim_start_matches(['+', '-', ' ']).trim().to_owned();
    let short: Vec<String> = diff.lines().map(bare).filter(|l| l == "code: Zq" || l == "code: Jx").collect();
    assert!(short.is_empty(), "a two-character decrypted value in diff output: {short:?}");
    let tier = diff.lines().map(bare).filter(|l| l.starts_with("tier: ")).collect::<Vec<_>>();
    assert_eq!(
        tier,
        ["tier: \"***\"", "tier: \"*** (changed)\""],
        "the label is shown, masked, its change too:\n{diff}"
    );
    assert!(diff.contains("ConfigMap/") && diff.contains("*** (changed)"), "the change still shows:\n{diff}");
}

/// The API server refuses a decrypted value placed where it is invalid (a label value with
/// quotes; a two-character one starting with `-`) and quotes it, escaped by Go's `%q`, in its
/// 422 message. That message reaches the log (inside JSON, escaped again), the change set, the
/// error recorded on the ApplySet parent and the daemon's log and `STATUS=`: each masks it.
#[tokio::test]
async fn a_decrypted_value_the_api_server_quotes_in_a_rejection_is_masked_everywhere() {
    let (env, ns) = common::setup_ns("mask-422").await;
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let secret = token();
    let quoted = format!("no \"q{secret}\" here\\");
    let labelled = |name: &str, value: &str| {
        let plain = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    tier: {}\n",
            serde_json::to_string(value).unwrap()
        );
        seal(keys.path(), &public, &plain, "^labels$")
    };
    let repo = common::GitRepo::new();
    repo.write("app/quoted.enc.yaml", &labelled("quoted", &quoted));
    repo.write("app/short.enc.yaml", &labelled("short", "-x"));
    repo.push(&[("app/ok.yaml", &common::cm("ok", "1"))], "labels the API server refuses");
    let state = tempfile::tempdir().unwrap();
    let (unit, config_file) = decrypting_config(state.path(), "app", &repo, &ns, &key);

    // The one-shot sync: its log (JSON) and the error it records on the parent.
    let (code, log) = gitward(&["sync", "--config", config_file.to_str().unwrap()]);
    assert_eq!(code, 1, "two objects fail");
    let failed: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["action"] == "failed")
        .collect();
    assert_eq!(failed.len(), 2, "both refusals are logged: {failed:?}");
    for event in &failed {
        let reason = event["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("Invalid value: \"***\""), "the refusal, masked: {reason}");
    }
    assert!(!log.contains(&secret), "the decrypted value in the log");
    assert!(!log.contains("\"-x\"") && !log.contains("\\\"-x\\\""), "the two-character value in the log");
    // The text log format quotes a field with Rust's `{:?}`: the value escaped differently.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["--log-format", "text", "sync", "--config", config_file.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .output()
        .expect("gitward runs");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "two objects fail");
    assert!(text.contains("Invalid value: \\\"***\\\""), "the refusal, masked, in text logs ({} bytes)", text.len());
    assert!(!text.contains(&secret) && !text.contains("\\\"-x\\\""), "a decrypted value in the text log");
    let record = recorded(&env.client, &ns, "gitward-app").await;
    let error = record.get("gitward.dev/last-error").cloned().unwrap_or_default();
    assert!(error.contains("Invalid value: \"***\""), "the recorded error: {error}");
    let all = format!("{record:?}");
    assert!(!all.contains(&secret) && !all.contains("\\\"-x\\\""), "a decrypted value recorded on the parent");

    // The change set of a sync in this process, which decrypted the values.
    let config = gitward::config::Config::from_toml(
        &config_text(&state.path().join("state"), "", &unit),
        state.path(),
        "test.toml",
    )
    .unwrap();
    let mut engine = common::engine(&env.client, &config, "app").await;
    let report = engine.sync().await.unwrap();
    let messages: Vec<String> = report
        .changes
        .entries
        .iter()
        .filter(|e| e.action == gitward::changeset::Action::Failed)
        .filter_map(|e| e.message.clone())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages.iter().all(|m| m.contains("Invalid value: \"***\"") && !m.contains(&secret)), "{messages:?}");

    // The daemon: its log and the STATUS= line it tells systemd.
    let dir = tempfile::tempdir().unwrap();
    let bin = tools_bin();
    let tables = format!("[render]\nsops = \"{}\"\n", bin.join("sops").display());
    let (daemon_config, port) = common::daemon_config(dir.path(), &tables, "", &unit);
    let socket_path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let daemon = common::Daemon::start(&daemon_config, port, &[("NOTIFY_SOCKET", socket_path.to_str().unwrap())]);
    let status = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]).to_string();
            if message.starts_with("STATUS=") && message.contains("2 failed") {
                return Some(message);
            }
        }
        None
    })
    .await
    .unwrap();
    let status = status.unwrap_or_else(|| panic!("no STATUS= with the failed objects: {}", daemon.log_text().len()));
    assert!(!status.contains(&secret) && !status.contains("-x\""), "{status}");
    let refusals = daemon.events().into_iter().filter(|e| e["action"] == "failed").count();
    assert!(refusals >= 2, "the daemon logged the refusals");
    let text = daemon.log_text();
    assert!(!text.contains(&secret) && !text.contains("\\\"-x\\\""), "a decrypted value in the daemon's log");
    assert!(text.contains("Invalid value: \\\"***\\\""), "the refusal, masked, in the daemon's log");
}

/// A PEM key decrypted whole, one line of which a kustomize replacement copies into a label
/// (`options.delimiter`, `index`): the API server's refusal quotes that line alone, and the
/// line is masked as the whole value would be.
#[tokio::test]
async fn one_line_of_a_decrypted_pem_value_is_masked_where_a_message_quotes_it_alone() {
    let (env, ns) = common::setup_ns("mask-pem").await;
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let line = format!("MIIE{}+/Qx", token());
    let pem =
        format!("-----BEGIN PRIVATE KEY-----\n{line}\nAAAAB3NzaC1yc2EAAAADAQABAAABAQ\n-----END PRIVATE KEY-----\n");
    let plain = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tls\ndata:\n  key: {}\n",
        serde_json::to_string(&pem).unwrap()
    );
    let repo = common::GitRepo::new();
    repo.write("app/tls.enc.yaml", &seal(keys.path(), &public, &plain, "^data$"));
    repo.write("app/other.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  labels:\n    line: x\n");
    repo.write(
        "app/kustomization.yaml",
        "resources: [tls.enc.yaml, other.yaml]\nreplacements:\n- source: {kind: ConfigMap, name: tls, fieldPath: \
         data.key, options: {delimiter: \"\\n\", index: 1}}\n  targets:\n  - select: {kind: ConfigMap, name: \
         other}\n    fieldPaths: [metadata.labels.line]\n",
    );
    repo.commit_and_push("a PEM key, one line of it in a label");
    let state = tempfile::tempdir().unwrap();
    let (_, config_file) = decrypting_config(state.path(), "pem", &repo, &ns, &key);
    let (code, log) = gitward(&["sync", "--config", config_file.to_str().unwrap()]);
    assert_eq!(code, 1, "the label is refused: {log}");
    let live = Api::<ConfigMap>::namespaced(env.client.clone(), &ns).get("tls").await.unwrap();
    assert_eq!(live.data.unwrap()["key"], pem, "the key is decrypted whole and applied");
    let refused = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["action"] == "failed" && e["object"].as_str().is_some_and(|o| o.ends_with("/other")));
    let reason = refused.map(|e| e["reason"].as_str().unwrap_or_default().to_owned());
    assert!(reason.as_deref().is_some_and(|r| r.contains("Invalid value: \"***\"")), "the refusal: {reason:?}");
    assert!(!log.contains(&line[4..]), "a line of the decrypted key in the log");
}

/// `gitward render` of a SOPS-encrypted ConfigMap whose data and one label were encrypted and
/// whose other label and annotation were not (the README's `--encrypted-regex` leaves metadata
/// in clear): every value of the object is made from decrypted input, so its labels and
/// annotations print as `***` with its data, keys kept; gitward's own `part-of` label and
/// desired-hash annotation stay readable. Its stdout holds none of the values, plain or base64.
#[test]
fn gitward_render_masks_every_label_and_annotation_value_of_a_decrypted_object() {
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let canary = |what: &str| format!("{}{what}-{}", common::CANARY_PREFIX, &token()[..12]);
    let (tier, owner, note, password) = (canary("tier"), canary("owner"), canary("note"), canary("pw"));
    let plain = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  labels:\n    tier: {tier}\n    owner: {owner}\n  \
         annotations:\n    note: {note}\ndata:\n  password: {password}\n"
    );
    let repo = common::GitRepo::new();
    repo.write("app/db.enc.yaml", &seal(keys.path(), &public, &plain, "^(data|tier)$"));
    repo.commit_and_push("an encrypted ConfigMap, labels and annotations partly in clear");
    let state = tempfile::tempdir().unwrap();
    let (_, config_file) = decrypting_config(state.path(), "vault", &repo, "render-ns", &key);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["render", "--config", config_file.to_str().unwrap(), "--sync", "vault"])
        .output()
        .expect("gitward runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "render exits 0 ({} bytes of stderr)", out.stderr.len());
    for value in [&tier, &owner, &note, &password] {
        common::assert_no_secret(&stdout, value);
    }
    let printed: serde_json::Value = serde_saphyr::from_str(&stdout).expect("one YAML document");
    assert_eq!(printed["metadata"]["name"], "db", "identity is kept");
    for (field, key) in [("labels", "tier"), ("labels", "owner"), ("annotations", "note")] {
        assert_eq!(printed["metadata"][field][key], "***", "{field} {key}: masked, its key kept");
    }
    assert_eq!(printed["data"]["password"], "***");
    let part_of = printed["metadata"]["labels"]["applyset.kubernetes.io/part-of"].as_str().unwrap_or_default();
    assert!(part_of.starts_with("applyset-"), "gitward's own label is shown: {part_of:?}");
    let hash = printed["metadata"]["annotations"]["gitward.dev/desired-hash"].as_str().unwrap_or_default();
    assert!(!hash.is_empty() && hash != "***", "gitward's own annotation is shown");
}
