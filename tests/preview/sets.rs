//! A revision that adds and removes `[[sync_set]]` directories: the unit it adds is named and
//! previewed whole (its objects created), the unit it removes is named with what becomes of its
//! objects and not previewed, and nothing is written.

use std::path::Path;

use crate::common;
use crate::preview::merge::gitward;
use crate::sources::render::config_text;

/// A `[[sync_set]]` of `repo`'s `apps/*` directories into `ns`, its config written in `dir`
/// and synced once by `gitward sync`. Returns the config's path.
fn synced_set(repo: &common::GitRepo, ns: &str, dir: &Path) -> String {
    let set = format!(
        "[[sync_set]]\nname = \"apps-{{dir}}\"\nrepo = \"{}\"\npath_glob = \"apps/*\"\nnamespace = \"{ns}\"\n",
        repo.bare().display()
    );
    let config = dir.join("gitward.toml");
    std::fs::write(&config, config_text(&dir.join("state"), "", &set)).unwrap();
    let config = config.to_str().unwrap().to_owned();
    let (code, out, err) = gitward(&["sync", "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");
    config
}

#[tokio::test]
async fn a_directory_added_and_one_removed_are_a_unit_added_and_one_removed() {
    let (env, ns) = common::setup_ns("preview-sets").await;
    let repo = common::GitRepo::new();
    repo.write("apps/a/cm.yaml", &common::cm("a", "1"));
    repo.write("apps/b/cm.yaml", &common::cm("b", "1"));
    repo.commit_and_push("two directories");
    let dir = tempfile::tempdir().unwrap();
    let config = synced_set(&repo, &ns, dir.path());

    // The pull request, on a branch of its own: c added, b removed.
    let work = repo.work();
    repo.git(&["checkout", "-q", "-b", "pr"], &work);
    repo.write("apps/c/cm.yaml", &common::cm("c", "new"));
    repo.remove("apps/b");
    repo.git(&["add", "-A"], &work);
    repo.git(&["commit", "-q", "-m", "c added, b removed"], &work);
    repo.git(&["push", "-q", "origin", "pr"], &work);
    let revision = repo.git(&["rev-parse", "HEAD"], &work);

    let (code, out, err) = gitward(&["preview", "--config", &config, "--revision", &revision]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("set apps-{dir}: adds unit apps-c\n"), "{out}");
    assert!(out.contains("set apps-{dir}: removes unit apps-b: its objects kept\n"), "{out}");
    assert!(out.contains("unit apps-c: revision"), "the added unit is previewed: {out}");
    assert!(out.contains("ConfigMap") && out.contains("+  value: new"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("unit apps-b:")), "the removed unit is not previewed: {out}");
    assert!(out.contains("unchanged: apps-a"), "{out}");
    assert_eq!(common::cm_value_or_none(&env.client, &ns, "c").await, None, "nothing written");
    assert!(Path::new(&config).exists());
}

/// A Role and a ConfigMap, the unit's objects in `discovery_is_asked_once_per_group_version`.
fn role_and_config(name: &str, value: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get]\n---\n{}",
        common::cm(name, value)
    )
}

/// Three units each previewed at their base and at the revision (six engines): they take
/// discovery's answers from one set, so `gitward preview` asks the API server for a
/// group-version's kinds once, not once per engine.
#[tokio::test]
async fn discovery_is_asked_once_per_group_version() {
    let (_env, ns) = common::setup_ns("preview-discovery").await;
    let repo = common::GitRepo::new();
    for name in ["a", "b", "c"] {
        repo.write(&format!("apps/{name}/objects.yaml"), &role_and_config(name, "1"));
    }
    repo.commit_and_push("three directories");
    let dir = tempfile::tempdir().unwrap();
    let config = synced_set(&repo, &ns, dir.path());

    let work = repo.work();
    repo.git(&["checkout", "-q", "-b", "pr"], &work);
    for name in ["a", "b", "c"] {
        repo.write(&format!("apps/{name}/objects.yaml"), &role_and_config(name, "2"));
    }
    repo.git(&["add", "-A"], &work);
    repo.git(&["commit", "-q", "-m", "every unit changed"], &work);
    repo.git(&["push", "-q", "origin", "pr"], &work);
    let revision = repo.git(&["rev-parse", "HEAD"], &work);

    let identity = format!("{ns}-preview");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["preview", "--config", &config, "--revision", &revision])
        .env("POD_NAME", &identity)
        .output()
        .expect("gitward runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    for name in ["a", "b", "c"] {
        assert!(stdout.contains(&format!("unit apps-{name}: revision")), "apps-{name} previewed: {stdout}");
    }
    // The identity is the process's, `<POD_NAME>-<pid>`.
    let prefix = format!("gitward/{} ({identity}-", env!("CARGO_PKG_VERSION"));
    let discovery = "/apis/rbac.authorization.k8s.io/v1";
    // The API server logs a request as its response completes: wait (10 s at most) for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while asked(&prefix, discovery) == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(asked(&prefix, discovery), 1, "one discovery of rbac's kinds for six engines");
}

/// How many requests for `uri` the audit log holds from User-Agents starting with `prefix`.
fn asked(prefix: &str, uri: &str) -> usize {
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with(prefix)))
        .filter(|e| e["requestURI"] == uri)
        .count()
}
