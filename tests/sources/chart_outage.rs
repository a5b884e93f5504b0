//! A chart repository that goes down: a chart in git whose dependencies `Chart.lock` pins and
//! the cache holds renders with no request at all, and a chart unit's repository that cannot
//! be reached is stood in for by its last good index answer (`[render] max_index_age`). Real
//! `helm package` / `helm repo index` charts on a loopback repository, real git, the real
//! apiserver, the gitward binary.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};
use serde_json::Value;

use crate::common;
use crate::common::charts::ChartServer;
use crate::sources::charts::listed;
use crate::sources::render::config_text;

/// The JSON log events of a run's stderr.
fn events(stderr: &str) -> Vec<Value> {
    stderr.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Deletes ConfigMap `name` in `namespace`, so that only a sync that applies brings it back.
async fn delete(client: &kube::Client, namespace: &str, name: &str) {
    Api::<ConfigMap>::namespaced(client.clone(), namespace).delete(name, &DeleteParams::default()).await.unwrap();
}

/// `data.version` of ConfigMap `name`.
async fn version(client: &kube::Client, namespace: &str, name: &str) -> Option<String> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace).get_opt(name).await.unwrap()?;
    cm.data?.get("version").cloned()
}

#[tokio::test]
async fn a_locked_cached_dependency_renders_with_no_request_while_its_repository_is_down() {
    let env = common::setup("chart-offline-lock").await;
    let work = tempfile::tempdir().unwrap();
    let mut server = ChartServer::start(&work.path().join("served"));
    for version in ["0.1.0", "0.2.0"] {
        server.publish(work.path(), "demo", version);
    }
    let repo = common::GitRepo::new();
    let dependency = format!("- name: demo\n  version: \"~0.1\"\n  repository: \"{}/\"\n", server.url);
    repo.write(
        "umbrella/Chart.yaml",
        &format!("apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n{dependency}"),
    );
    let lock = format!("dependencies:\n- name: demo\n  version: 0.1.0\n  repository: \"{}/\"\n", server.url);
    repo.push(&[("umbrella/Chart.lock", &lock)], "umbrella chart with a locked dependency");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let unit =
        common::unit_toml("umbrella", &repo.bare(), "umbrella", &env.namespace, "[sync.helm]\nrelease = \"shop\"\n");
    std::fs::write(&config, config_text(&dir.path().join("state"), &listed(&server.url), &unit)).unwrap();

    let first = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(
        version(&env.client, &env.namespace, "shop-demo").await.as_deref(),
        Some("0.1.0"),
        "the lock pins 0.1.0"
    );
    let asked = server.requests.lock().unwrap().clone();
    assert_eq!(asked, ["/index.yaml", "/demo-0.1.0.tgz"], "the first sync fetches the dependency");

    // The same commit again, the repository up: the cached archive serves, nothing is asked.
    delete(&env.client, &env.namespace, "shop-demo").await;
    let second = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(version(&env.client, &env.namespace, "shop-demo").await.as_deref(), Some("0.1.0"), "applied again");
    assert_eq!(*server.requests.lock().unwrap(), asked, "no request after the first sync");

    // The repository down: the unchanged commit still syncs.
    server.stop();
    delete(&env.client, &env.namespace, "shop-demo").await;
    let third = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(third.code, Some(0), "a down repository does not fail a locked, cached chart: {}", third.stderr);
    assert_eq!(version(&env.client, &env.namespace, "shop-demo").await.as_deref(), Some("0.1.0"), "applied offline");
}

#[tokio::test]
async fn a_chart_unit_uses_its_repositorys_last_good_index_answer_while_it_is_down() {
    let env = common::setup("chart-offline-index").await;
    let work = tempfile::tempdir().unwrap();
    let (mut server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let unit = crate::common::charts::chart_unit("demo", &env.namespace, &server.url, "*");
    std::fs::write(&config, config_text(&dir.path().join("state"), &listed(&server.url), &unit)).unwrap();

    let first = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(version(&env.client, &env.namespace, "shop-demo").await.as_deref(), Some("0.1.0"));
    let revision = |run: &common::Run| {
        let events = events(&run.stderr);
        let synced = events.iter().find(|e| e["message"] == "sync complete").cloned();
        synced.and_then(|e| e["revision"].as_str().map(str::to_owned))
    };
    let installed = revision(&first).unwrap_or_else(|| panic!("a sync complete line: {}", first.stderr));

    server.stop();
    delete(&env.client, &env.namespace, "shop-demo").await;
    let down = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(down.code, Some(0), "the kept answer stands in: {}", down.stderr);
    assert_eq!(revision(&down).as_deref(), Some(installed.as_str()), "the same revision");
    assert_eq!(version(&env.client, &env.namespace, "shop-demo").await.as_deref(), Some("0.1.0"), "applied");
    let warned = events(&down.stderr).into_iter().find(|e| {
        e["message"] == "chart repository unreachable: using its last good index answer"
            && e["level"] == "WARN"
            && e["repository"] == server.url.as_str()
            && e["error"].as_str().is_some_and(|m| m.contains(&format!("{}/index.yaml", server.url)))
            && e["age_secs"].is_u64()
    });
    assert!(warned.is_some(), "a warning names the repository, the error and the age: {}", down.stderr);
}
