//! A pull request previewed over a synced unit that writes as its ServiceAccount: a configure
//! with its field diff, a create, a prune, a SOPS Secret and a `from` Secret substitution
//! changed (shown `*** (changed)`, never their plaintexts), and an object the ServiceAccount
//! may not write shown as would fail with the API server's 403.

use crate::common;
use crate::sources::render::{age_key, config_text, tool};

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

/// Runs the gitward binary with `args`, logging at debug and above: (exit code, stdout, stderr).
pub(crate) fn gitward(args: &[&str]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_gitward")).args(args).env("RUST_LOG", "debug").output().expect("gitward runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The lines of `text` from the one starting with `head` to the next line that starts none of a
/// unified diff's lines (`+`, `-`, `@`, a space and not a two-space action line).
pub(crate) fn block<'t>(text: &'t str, head: &str) -> &'t str {
    let start = text.find(head).unwrap_or_else(|| panic!("no {head:?} in:\n{text}"));
    let rest = &text[start..];
    let mut end = rest.find('\n').map_or(rest.len(), |n| n + 1);
    for line in rest[end..].split_inclusive('\n') {
        let action = ["  create ", "  configure ", "  unchanged: "].iter().any(|a| line.starts_with(a));
        if action || !line.starts_with(['+', '-', '@', ' ']) {
            break;
        }
        end += line.len();
    }
    &rest[..end]
}

/// A ServiceAccount `tenant` of `ns` that may manage ConfigMaps, Secrets and Deployments in
/// `ns` and nothing else.
async fn tenant(client: &kube::Client, ns: &str) {
    let verbs = json!(["get", "list", "watch", "create", "update", "patch", "delete"]);
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "tenant"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": verbs},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": verbs}]}))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), ns).create(&PostParams::default(), &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "tenant"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns).create(&PostParams::default(), &binding).await.unwrap();
}

/// Secret `db` holding `password`, encrypted by the real sops for `recipient`.
fn encrypted_db(dir: &Path, recipient: &str, password: &str) -> String {
    let plain = dir.join("plain.yaml");
    std::fs::write(&plain, common::secret_yaml("db", password)).unwrap();
    let text = tool("sops", &["encrypt", "--age", recipient, "--encrypted-regex", "^stringData$", "plain.yaml"], dir);
    std::fs::remove_file(plain).unwrap();
    assert!(!text.contains(password), "sops encrypted nothing");
    text
}

/// A Secret value for this test: canary-prefixed, registered for the suite's scan.
fn canary(name: &str) -> String {
    let value = format!("{}{}", common::CANARY_PREFIX, common::unique(name));
    common::register_canary(&value);
    value
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  \
    selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    \
    spec:\n      containers:\n      - name: web\n        image: registry.example/web:1\n";

#[tokio::test]
async fn a_pull_request_is_previewed_as_its_merge_would_apply_it_secrets_never_shown() {
    let (env, ns) = common::setup_ns("preview").await;
    let other = format!("{ns}-other");
    common::create_namespace(&env.client, &other).await;
    tenant(&env.client, &ns).await;
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let [old_sops, new_sops, old_var, new_var] = ["sops-old", "sops-new", "var-old", "var-new"].map(canary);
    let vars = Secret {
        metadata: kube::api::ObjectMeta { name: Some("vars".into()), ..Default::default() },
        string_data: Some([("pw_a".to_string(), old_var.clone()), ("pw_b".to_string(), new_var.clone())].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), &ns).create(&PostParams::default(), &vars).await.unwrap();

    let repo = common::GitRepo::new();
    for i in 1..=8 {
        repo.write(&format!("app/cm-{i}.yaml"), &common::cm(&format!("cm-{i}"), "v1"));
    }
    repo.write("app/db.enc.yaml", &encrypted_db(keys.path(), &public, &old_sops));
    let token = |var: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-token\nstringData:\n  token: ${{{var}}}\n")
    };
    repo.push(&[("app/token.yaml", &token("pw_a"))], "ten members");
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "service_account = \"tenant\"\n[sync.decryption]\nage_key_file = \"{}\"\n[sync.substitute]\nfrom = [\"Secret/{ns}/vars\"]\n",
        key.display()
    );
    let file = dir.path().join("gitward.toml");
    let text = config_text(&dir.path().join("state"), "", &common::unit_toml("app", &repo.bare(), "app", &ns, &extra));
    std::fs::write(&file, text).unwrap();
    let config = file.to_str().unwrap();
    let (code, out, err) = gitward(&["sync", "--config", config]);
    assert_eq!(code, 0, "the first sync applies all ten: {out}{err}");

    repo.write("app/cm-1.yaml", &common::cm("cm-1", "v2"));
    repo.write("app/deploy.yaml", DEPLOYMENT);
    repo.remove("app/cm-8.yaml");
    repo.write("app/db.enc.yaml", &encrypted_db(keys.path(), &public, &new_sops));
    repo.write("app/token.yaml", &token("pw_b"));
    let forbidden =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: {other}\ndata:\n  x: y\n");
    repo.write("app/elsewhere.yaml", &forbidden);
    let work = repo.work();
    repo.git(&["add", "-A"], &work);
    repo.git(&["commit", "-q", "-m", "the pull request"], &work);
    repo.git(&["push", "-q", "origin", "HEAD:refs/heads/pr"], &work);

    let (code, out, err) = gitward(&["preview", "--config", config, "--revision", "pr"]);
    assert_eq!(code, 1, "changes: {out}{err}");
    let configure = block(&out, &format!("  configure ConfigMap/{ns}/cm-1\n"));
    assert!(configure.lines().any(|l| l.starts_with('-') && l.contains("value") && l.contains("v1")), "{configure}");
    assert!(configure.lines().any(|l| l.starts_with('+') && l.contains("value") && l.contains("v2")), "{configure}");
    assert!(out.contains(&format!("  create Deployment/{ns}/web\n")), "{out}");
    assert!(out.contains(&format!("\nprune ConfigMap/{ns}/cm-8\n")), "{out}");
    for secret in ["db", "app-token"] {
        let diff = block(&out, &format!("  configure Secret/{ns}/{secret}\n"));
        assert!(diff.lines().any(|l| l.starts_with('+') && l.contains("*** (changed)")), "{secret}: {diff}");
    }
    let failing = out.split("would fail:\n").nth(1).expect("a would-fail section");
    let failing = failing.lines().next().unwrap_or_default();
    assert!(failing.starts_with(&format!("  ConfigMap/{other}/elsewhere: ")) && failing.contains("forbidden"), "{out}");
    assert!(failing.contains(&format!("system:serviceaccount:{ns}:tenant")), "{failing}");
    for effect in [
        format!("added Deployment/{ns}/web"),
        format!("changed ConfigMap/{ns}/cm-1"),
        format!("removed ConfigMap/{ns}/cm-8"),
    ] {
        assert!(out.contains(&format!("  {effect}\n")), "{effect}: {out}");
    }
    assert!(!out.contains("drift"), "nothing drifted: {out}");
    assert!(err.contains("DEBUG"), "debug lines were logged: {err}");
    for value in [&old_sops, &new_sops, &old_var, &new_var] {
        common::assert_no_secret(&out, value);
        common::assert_no_secret(&err, value);
    }

    let (code, md, err) = gitward(&["preview", "--config", config, "--revision", "pr", "-o", "markdown"]);
    assert_eq!(code, 1, "{md}{err}");
    assert!(md.starts_with("<!-- gitward-preview -->\n## gitward preview of `pr`"), "{md}");
    assert!(md.contains("| `app` | 1 | 3 | 1 | 2 | 3 | 1 | 1 | 0 |"), "{md}");
    assert!(md.contains("Status: ❌ **failure**"), "{md}");
    let (code, json, err) = gitward(&["preview", "--config", config, "--revision", "pr", "-o", "json"]);
    assert_eq!(code, 1, "{json}{err}");
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["units"][0]["outcome"], "changed", "{json}");
    for value in [&old_sops, &new_sops, &old_var, &new_var] {
        common::assert_no_secret(&md, value);
        common::assert_no_secret(&json.to_string(), value);
    }
    // Nothing was written.
    assert_eq!(common::cm_value(&env.client, &ns, "cm-1").await.as_deref(), Some("v1"));
    assert!(Api::<Deployment>::namespaced(env.client.clone(), &ns).get_opt("web").await.unwrap().is_none());
    assert!(common::cm_value_or_none(&env.client, &ns, "cm-8").await.is_some());
}
