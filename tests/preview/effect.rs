//! What a change does against what is already so: a prune the fraction guard refuses makes the
//! preview failing; a change to a kustomize base outside a unit's path previews that unit and
//! leaves a unit it does not touch unchanged; a hand edit in the cluster is drift, not the
//! change's effect.

use crate::common;
use crate::preview::merge::{block, gitward};
use crate::sources::render::config_text;

use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

/// A config file in `dir` with these `[[sync]]` tables (state under `dir/state`); its path.
fn write_config(dir: &Path, units: &str) -> String {
    let file = dir.join("gitward.toml");
    std::fs::write(&file, config_text(&dir.join("state"), "", units)).unwrap();
    file.to_str().unwrap().to_owned()
}

/// A repository whose `app/` holds ConfigMaps `m-1` … `m-10`, synced by unit `app` into `ns`
/// with the real binary: (repository, config dir, config path).
fn ten_synced(ns: &str) -> (common::GitRepo, tempfile::TempDir, String) {
    let repo = common::GitRepo::new();
    for i in 1..=10 {
        repo.write(&format!("app/m-{i}.yaml"), &common::cm(&format!("m-{i}"), "1"));
    }
    repo.commit_and_push("ten members");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &common::unit_toml("app", &repo.bare(), "app", ns, ""));
    let (code, out, err) = gitward(&["sync", "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");
    (repo, dir, config)
}

#[tokio::test]
async fn a_prune_the_fraction_guard_refuses_makes_the_preview_failing() {
    let (env, ns) = common::setup_ns("preview-guard").await;
    let (repo, dir, config) = ten_synced(&ns);
    for i in 3..=10 {
        repo.remove(&format!("app/m-{i}.yaml"));
    }
    let revision = repo.commit_and_push("eight of ten removed");

    let (code, md, err) = gitward(&["preview", "--config", &config, "--revision", &revision, "-o", "markdown"]);
    assert_eq!(code, 1, "{md}{err}");
    assert!(md.contains("Status: ❌ **failure**"), "{md}");
    assert!(md.contains("| `app` | 0 | 0 | 0 | 0 | 0 | 8 | refused | 0 |"), "{md}");
    let refused = md.lines().find(|l| l.starts_with("prune refused: ")).expect("the guard's refusal");
    assert!(refused.contains("max_prune_fraction"), "{refused}");
    assert!(!md.lines().any(|l| l.starts_with("prune ConfigMap/")), "nothing is listed as pruned: {md}");

    let loaded = gitward::config::Config::load(Path::new(&config)).expect("config");
    let clusters = connect(&loaded).await;
    let request = gitward::preview::Request { revision: revision.clone(), ..Default::default() };
    let report = gitward::preview::preview(&loaded, &clusters, &request).await.expect("preview");
    assert!(report.failing() && report.has_changes(), "{}", report.text());
    assert_eq!(common::cm_value(&env.client, &ns, "m-10").await.as_deref(), Some("1"), "nothing pruned");
    drop(dir);
}

/// One client per configured cluster, as the binary connects.
async fn connect(config: &gitward::config::Config) -> gitward::cluster::registry::Registry {
    gitward::cluster::registry::Registry::connect(&config.clusters, "gitward-test/preview")
        .await
        .unwrap_or_else(|(name, e)| panic!("cluster {name}: {e}"))
}

#[tokio::test]
async fn a_change_to_a_base_outside_the_units_path_previews_that_unit_alone() {
    let (env, ns) = common::setup_ns("preview-base").await;
    let other = format!("{ns}-b");
    common::create_namespace(&env.client, &other).await;
    let repo = common::GitRepo::new();
    repo.write("base/common.yaml", &common::cm("common", "1"));
    repo.write("base/kustomization.yaml", "resources:\n- common.yaml\n");
    repo.write("overlays/a/kustomization.yaml", "resources:\n- ../../base\n- own.yaml\n");
    repo.write("overlays/a/own.yaml", &common::cm("own", "1"));
    repo.write("b/plain.yaml", &common::cm("plain", "1"));
    repo.commit_and_push("a kustomize unit over a base, and a plain unit");
    let dir = tempfile::tempdir().unwrap();
    let units = format!(
        "{}{}",
        common::unit_toml("a", &repo.bare(), "overlays/a", &ns, "render = \"kustomize\"\n"),
        common::unit_toml("b", &repo.bare(), "b", &other, "")
    );
    let config = write_config(dir.path(), &units);
    let (code, out, err) = gitward(&["sync", "--config", &config]);
    assert_eq!(code, 0, "{out}{err}");

    let revision = repo.push(&[("base/common.yaml", &common::cm("common", "2"))], "the base alone changes");
    let (code, out, err) = gitward(&["preview", "--config", &config, "--revision", &revision]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.starts_with("unit a: revision "), "{out}");
    let configure = block(&out, &format!("  configure ConfigMap/{ns}/common\n"));
    assert!(configure.lines().any(|l| l.starts_with('+') && l.contains("value") && l.contains('2')), "{configure}");
    assert!(out.contains(&format!("  changed ConfigMap/{ns}/common\n")), "{out}");
    assert!(out.contains("\nunchanged: b\n"), "{out}");
    assert!(!out.contains("unit b:"), "{out}");
    let (code, out, err) = gitward(&["preview", "--config", &config, "--revision", &revision, "--sync", "b"]);
    assert_eq!((code, out.as_str()), (0, "unchanged: b\n"), "{err}");
    // Measured from the revision itself (`--base`), the change does nothing to either unit.
    let (code, out, err) = gitward(&["preview", "--config", &config, "--revision", &revision, "--base", &revision]);
    assert_eq!((code, out.as_str()), (0, "unchanged: a, b\n"), "{err}");
}

#[tokio::test]
async fn a_hand_edit_in_the_cluster_is_drift_not_the_changes_effect() {
    let (env, ns) = common::setup_ns("preview-drift").await;
    let (repo, _dir, config) = ten_synced(&ns);
    let patch = serde_json::json!({"data": {"value": "by-hand"}});
    Api::<ConfigMap>::namespaced(env.client.clone(), &ns)
        .patch("m-2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let revision = repo.push(&[("app/m-5.yaml", &common::cm("m-5", "2"))], "m-5 changes");

    let (code, out, err) = gitward(&["preview", "--config", &config, "--revision", &revision]);
    assert_eq!(code, 1, "{out}{err}");
    let (merge, drift) = out.split_once("drift (").expect("a drift section");
    assert!(merge.contains(&format!("  configure ConfigMap/{ns}/m-5\n")), "{out}");
    assert!(!merge.contains(&format!("ConfigMap/{ns}/m-2")), "the hand edit is not the change's: {out}");
    assert!(out.contains(&format!("  changed ConfigMap/{ns}/m-5\n")), "{out}");
    let edit = block(drift, &format!("  configure ConfigMap/{ns}/m-2\n"));
    assert!(edit.lines().any(|l| l.starts_with('-') && l.contains("by-hand")), "{edit}");
    assert!(out.contains("unchanged: 8 objects"), "{out}");
    assert!(!out.contains("status: failure"), "{out}");
}
