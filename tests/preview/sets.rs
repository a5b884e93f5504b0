//! A revision that adds and removes `[[sync_set]]` directories: the unit it adds is named and
//! previewed whole (its objects created), the unit it removes is named with what becomes of its
//! objects and not previewed, and nothing is written.

use std::path::Path;

use crate::common;
use crate::preview::merge::gitward;
use crate::sources::render::config_text;

#[tokio::test]
async fn a_directory_added_and_one_removed_are_a_unit_added_and_one_removed() {
    let (env, ns) = common::setup_ns("preview-sets").await;
    let repo = common::GitRepo::new();
    repo.write("apps/a/cm.yaml", &common::cm("a", "1"));
    repo.write("apps/b/cm.yaml", &common::cm("b", "1"));
    repo.commit_and_push("two directories");
    let dir = tempfile::tempdir().unwrap();
    let set = format!(
        "[[sync_set]]\nname = \"apps-{{dir}}\"\nrepo = \"{}\"\npath_glob = \"apps/*\"\nnamespace = \"{ns}\"\n",
        repo.bare().display()
    );
    let config = dir.path().join("gitward.toml");
    std::fs::write(&config, config_text(&dir.path().join("state"), "", &set)).unwrap();
    let config = config.to_str().unwrap().to_owned();
    let (code, out, err) = gitward(&["sync", "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");

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
