//! A repository of large CRDs followed by their custom resources syncs first time.
//!
//! Right after a new CRD is Established the apiserver answers the first LIST of its kind with
//! `429 storage is (re)initializing` and `Retry-After: 1` while its watch cache fills. gitward
//! must honour that (as client-go does) instead of failing the sync. Each round uses a new CRD
//! (so its storage is new) and a fresh namespace, and runs the real `gitward sync` binary, whose
//! client is the one users get.

use crate::common;

use std::path::Path;
use std::process::Command;

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

/// A CRD of kind `Monitor` in `group` whose schema has `fields` documented properties, as
/// generated CRDs (prometheus-operator, crossplane) are: hundreds of KB of descriptions.
fn large_crd(group: &str, fields: usize) -> String {
    let description = "Generated documentation of this field, as controller-gen copies it from the Go doc \
                       comment of the API type; real CRDs carry paragraphs of it for every property.";
    let mut properties = String::new();
    for i in 0..fields {
        properties.push_str(&format!(
            "                    field{i:05}:\n                      type: string\n                      description: \"{description} ({i})\"\n"
        ));
    }
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: monitors.{group}\nspec:\n  group: {group}\n  scope: Namespaced\n  names:\n    plural: monitors\n    singular: monitor\n    kind: Monitor\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            spec:\n              type: object\n              properties:\n                size:\n                  type: integer\n                settings:\n                  type: object\n                  properties:\n{properties}"
    )
}

fn custom_resources(group: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "apiVersion: {group}/v1\nkind: Monitor\nmetadata:\n  name: m{i:03}\nspec:\n  size: {i}\n  settings:\n    field00001: x\n"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

fn sync(config: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["--log-format", "json", "sync", "--config"])
        .arg(config)
        .env("RUST_LOG", "info,gitward=debug")
        .output()
        .expect("gitward runs")
}

#[tokio::test]
async fn a_large_crd_and_its_custom_resources_sync_cold_ten_times() {
    for round in 0..10 {
        let env = common::setup("large-crd").await;
        let group = format!("{}.gitward.dev", env.namespace);
        let crd = large_crd(&group, 2500);
        assert!(crd.len() > 500_000, "the CRD is over 500 KB ({} bytes)", crd.len());
        let repo = common::GitRepo::new();
        repo.write("crds/monitors.yaml", &crd);
        repo.push(&[("monitors.yaml", &custom_resources(&group, 100))], "a large CRD and 100 custom resources of it");
        let state = tempfile::tempdir().unwrap();
        let config = common::config_file(state.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, ""));

        let out = sync(&config);
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "round {round}: gitward sync failed:\n{log}");
        let complete = log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["message"] == "sync complete")
            .unwrap_or_else(|| panic!("round {round}: no `sync complete` event:\n{log}"));
        assert_eq!(complete["created"], 101, "round {round}: {complete}");
        assert_eq!(complete["failed"], 0, "round {round}: {complete}");

        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Monitor"), "monitors");
        let monitors: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &env.namespace, &ar);
        let live = monitors.list(&ListParams::default()).await.expect("list monitors");
        assert_eq!(live.items.len(), 100, "round {round}: every custom resource is in the cluster");
    }
}
