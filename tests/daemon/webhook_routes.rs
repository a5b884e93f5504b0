//! Which units a webhook reaches in `gitward run`: only those of the repository and ref it
//! names. A git unit of another repository is not synced (its hand-edited object stays as it
//! is), and a chart unit, whose ref defaults to `main`, does not download its index for a
//! `main` push; it is reached by a webhook naming its chart repository, and then syncs in a
//! slot, not the push lane.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

use crate::common;
use crate::common::charts::ChartServer;

const WAIT: Duration = Duration::from_secs(120);
const SECRET: &str = "webhook-routes-secret";

async fn hand_edit(client: &kube::Client, ns: &str, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({"data": {"value": "edited"}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// A repository holding ConfigMap `name` with value `1`.
fn repo_with(name: &str) -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    repo.commit_and_push("first");
    repo
}

/// A daemon of `units` (after `tables`) taking webhooks signed with [`SECRET`], without
/// self-heal (a hand edit stays until a sync); returned once ready.
async fn daemon(dir: &std::path::Path, tables: &str, units: &str) -> common::Daemon {
    std::fs::write(dir.join("webhook-secret"), SECRET).unwrap();
    let extra = "webhook_secret_file = \"webhook-secret\"\nself_heal = false";
    let (config, port) = common::daemon_config(dir, tables, extra, units);
    common::Daemon::ready(&config, port, WAIT).await
}

/// POSTs a signed push of `main` with `repository` as the payload's `repository` object
/// (`None`: no repository, as `examples/post-receive` sends); asserts 202 and that the reply
/// lists `units`.
fn push_main(daemon: &common::Daemon, repository: Option<serde_json::Value>, units: &[&str]) {
    let mut body = serde_json::json!({"ref": "refs/heads/main"});
    if let Some(repository) = repository {
        body["repository"] = repository;
    }
    let (status, reply) = common::signed_webhook(daemon.port, SECRET, body.to_string().as_bytes());
    assert_eq!(status, 202, "{reply}");
    let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply, serde_json::json!({ "units": units }), "{body}");
}

/// The `sync triggered` events of `unit` for a webhook.
fn webhook_syncs(daemon: &common::Daemon, unit: &str) -> Vec<serde_json::Value> {
    daemon.logged("sync triggered").into_iter().filter(|e| e["unit"] == unit && e["trigger"] == "webhook").collect()
}

#[tokio::test]
async fn a_webhook_for_one_repository_syncs_its_unit_and_not_the_unit_of_another() {
    let env = common::setup("route-repo").await;
    let (a, b) = (repo_with("a"), repo_with("b"));
    let dir = tempfile::tempdir().unwrap();
    let units = format!(
        "{}{}",
        common::unit_toml("a", &a.bare(), "", &env.namespace, ""),
        common::unit_toml("b", &b.bare(), "", &env.namespace, "")
    );
    let daemon = daemon(dir.path(), "", &units).await;
    hand_edit(&env.client, &env.namespace, "a").await;
    hand_edit(&env.client, &env.namespace, "b").await;

    // Named as a host would name it: another spelling of the unit's path (URL, trailing `/`).
    push_main(&daemon, Some(serde_json::json!({"clone_url": format!("file://{}/", a.bare().display())})), &["a"]);
    let ns = env.namespace.clone();
    let restored = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &ns, "a").await.as_deref() == Some("1")
    });
    assert!(restored.await, "the webhook did not sync unit a: {}", daemon.log_text());
    assert_eq!(
        common::cm_value_or_none(&env.client, &ns, "b").await.as_deref(),
        Some("edited"),
        "{}",
        daemon.log_text()
    );

    // The webhook of b's own repository syncs it: after that sync, every trigger b was sent has
    // been handled, and there was one.
    push_main(&daemon, Some(serde_json::json!({"ssh_url": b.bare().display().to_string()})), &["b"]);
    let restored = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &ns, "b").await.as_deref() == Some("1")
    });
    assert!(restored.await, "the webhook did not sync unit b: {}", daemon.log_text());
    assert_eq!(webhook_syncs(&daemon, "b").len(), 1, "{}", daemon.log_text());
    assert_eq!(webhook_syncs(&daemon, "a").len(), 1, "{}", daemon.log_text());
}

#[tokio::test]
async fn a_main_webhook_does_not_make_a_chart_unit_download_its_index() {
    let env = common::setup("route-chart").await;
    let work = tempfile::tempdir().unwrap();
    let (server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let app = repo_with("app");
    let render = format!(
        "[render]\nhelm = \"{}\"\nchart_repositories = [\"{}\"]\n",
        common::charts::tools_bin().join("helm").display(),
        server.url
    );
    let units = format!(
        "[[sync]]\nname = \"demo\"\nnamespace = \"{}\"\n[sync.helm]\nrepo_url = \"{}\"\nchart = \"demo\"\nrelease = \"shop\"\n\n{}",
        env.namespace,
        server.url,
        common::unit_toml("app", &app.bare(), "", &env.namespace, "")
    );
    let daemon = daemon(work.path(), &render, &units).await;
    let before = server.requested().len();

    // A push of `main` naming no repository reaches the git unit of `main` alone.
    push_main(&daemon, None, &["app"]);
    let applied = common::eventually(WAIT, || async {
        daemon.logged("trigger applied").iter().any(|e| e["unit"] == "app" && e["trigger"] == "webhook")
    });
    assert!(applied.await, "the webhook did not sync unit app: {}", daemon.log_text());
    assert_eq!(server.requested()[before..], [] as [String; 0], "the chart repository was asked");

    // A webhook naming the chart repository reaches the chart unit, which syncs in a slot.
    push_main(&daemon, Some(serde_json::json!({"url": format!("{}/", server.url)})), &["demo"]);
    let synced = common::eventually(WAIT, || async { !webhook_syncs(&daemon, "demo").is_empty() });
    assert!(synced.await, "the webhook did not sync unit demo: {}", daemon.log_text());
    let syncs = webhook_syncs(&daemon, "demo");
    assert_eq!(syncs.len(), 1, "{}", daemon.log_text());
    assert_eq!(syncs[0]["push_lane"], false, "{}", daemon.log_text());
    assert!(server.requested()[before..].contains(&"/index.yaml".to_owned()), "{:?}", server.requested());
}
