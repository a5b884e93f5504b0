//! `[[sync.ignore]]` against the real apiserver and a real git repository: a field another
//! field manager sets (a scaler's `spec.replicas`, env added to a container) is left to it by
//! sync, by `update` mode and by `gitward diff`; without the rule gitward takes it back. An
//! ignored field is never dropped: a create sends git's value, and a rule added for a field
//! gitward set keeps its value.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// The rule of these tests: a Deployment's replicas and its first container's env belong to
/// whoever sets them.
const RULE: &str = "[[sync.ignore]]\nkind = \"Deployment\"\ngroup = \"apps\"\n\
                    paths = [\"/spec/replicas\", \"/spec/template/spec/containers/0/env\"]\n";

/// The field manager of the other writer.
const SCALER: &str = "test-scaler";

/// A repository holding Deployment `web` with `replicas: 1` and image `image`.
fn repo_with(image: &str) -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.push(&[("web.yaml", &common::deployment("web", image, 1))], "web");
    repo
}

/// Another writer sets `web`'s replicas to 3 and an env var on its container, by server-side
/// apply under its own field manager, forcing ownership away from gitward where it had it.
async fn scale_to_three(client: &kube::Client, ns: &str) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let patch = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "SCALED", "value": "yes"}]}]}}}});
    api.patch("web", &PatchParams::apply(SCALER).force(), &Patch::Apply(&patch)).await.expect("scaler's apply");
}

async fn web(client: &kube::Client, ns: &str) -> Value {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    serde_json::to_value(api.get("web").await.expect("read web")).unwrap()
}

/// The `fieldsV1` of `manager`'s entries in `object`'s managedFields, merged.
fn owned_by(object: &Value, manager: &str) -> Vec<Value> {
    let entries = object["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    entries.into_iter().filter(|e| e["manager"] == manager).map(|e| e["fieldsV1"].clone()).collect()
}

fn owns_replicas(object: &Value, manager: &str) -> bool {
    owned_by(object, manager).iter().any(|f| f["f:spec"].get("f:replicas").is_some())
}

fn env(object: &Value) -> Value {
    object["spec"]["template"]["spec"]["containers"][0]["env"].clone()
}

/// Syncs `web` with or without [`RULE`], lets [`scale_to_three`] write, syncs again; returns
/// the second sync's action for `web` and the live object after it.
async fn scaled_between_syncs(prefix: &str, rule: bool) -> (String, Value, common::TestEnv) {
    let env = common::setup(prefix).await;
    let repo = repo_with("nginx:1");
    let state = tempfile::tempdir().unwrap();
    let extra = if rule { RULE } else { "" };
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, &format!("health_timeout = \"0s\"\n{extra}"));
    let config = common::config(state.path(), &unit);
    let mut engine = common::engine(&env.client, &config, "app").await;
    let first = engine.sync().await.expect("first sync");
    assert!(!first.changes.has_failures(), "{:?}", common::actions(&first));
    scale_to_three(&env.client, &env.namespace).await;
    let second = engine.sync().await.expect("second sync");
    let name = format!("Deployment/{}/web", env.namespace);
    let action = common::actions(&second).get(&name).cloned().unwrap_or_default();
    (action, web(&env.client, &env.namespace).await, env)
}

#[tokio::test]
async fn an_ignored_field_another_manager_sets_is_left_to_it_by_the_next_sync() {
    let (action, live, _env) = scaled_between_syncs("ignore-sync", true).await;
    assert_eq!(action, "unchanged", "neither drift-corrected nor conflict");
    assert_eq!(live["spec"]["replicas"], 3);
    assert_eq!(env(&live), json!([{"name": "SCALED", "value": "yes"}]));
    assert!(owns_replicas(&live, SCALER), "{}", live["metadata"]["managedFields"]);
    assert!(!owns_replicas(&live, "gitward"), "gitward gave it up: {}", live["metadata"]["managedFields"]);
}

#[tokio::test]
async fn without_the_rule_the_next_sync_takes_the_field_back() {
    let (action, live, _env) = scaled_between_syncs("ignore-none", false).await;
    assert_ne!(action, "failed");
    assert_eq!(live["spec"]["replicas"], 1);
    assert!(owns_replicas(&live, "gitward"), "{}", live["metadata"]["managedFields"]);
}

/// `update` mode: a change git makes to `web` is written by GET and PUT; the ignored fields
/// keep their live values (the env inside the container list that the PUT replaces whole
/// too), the rest is git's.
async fn update_mode_after_scale(prefix: &str, rule: bool) -> Value {
    let env = common::setup(prefix).await;
    let repo = repo_with("nginx:1");
    let state = tempfile::tempdir().unwrap();
    let extra = format!("apply_mode = \"update\"\nhealth_timeout = \"0s\"\n{}", if rule { RULE } else { "" });
    let config = common::config(state.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, &extra));
    let mut engine = common::engine(&env.client, &config, "app").await;
    let first = engine.sync().await.expect("first sync");
    assert!(!first.changes.has_failures(), "{:?}", common::actions(&first));
    scale_to_three(&env.client, &env.namespace).await;
    repo.push(&[("web.yaml", &common::deployment("web", "nginx:2", 1))], "new image");
    let second = engine.sync().await.expect("second sync");
    let name = format!("Deployment/{}/web", env.namespace);
    assert_eq!(common::actions(&second).get(&name).map(String::as_str), Some("configured"));
    let live = web(&env.client, &env.namespace).await;
    assert_eq!(live["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:2", "git's change is written");
    live
}

#[tokio::test]
async fn update_mode_keeps_the_live_value_at_ignored_paths() {
    let live = update_mode_after_scale("ignore-update", true).await;
    assert_eq!(live["spec"]["replicas"], 3);
    assert_eq!(env(&live), json!([{"name": "SCALED", "value": "yes"}]), "kept inside the replaced list");
    let live = update_mode_after_scale("ignore-update-none", false).await;
    assert_eq!(live["spec"]["replicas"], 1, "without the rule git's value is written");
    assert_eq!(env(&live), Value::Null);
}

#[tokio::test]
async fn gitward_diff_does_not_show_an_ignored_field() {
    let (_, _, env) = scaled_between_syncs("ignore-diff", true).await;
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with("nginx:1");
    let with_rule = common::unit_toml("app", &repo.bare(), "", &env.namespace, RULE);
    let run = common::gitward(&["diff"], &common::config_file(dir.path(), &with_rule), Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "no changes: {}\n{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains("replicas"), "{}", run.stdout);
    // The same object without the rule: git's replicas and env differ from the live ones.
    let without = common::unit_toml("app", &repo.bare(), "", &env.namespace, "");
    let run = common::gitward(&["diff"], &common::config_file(dir.path(), &without), Duration::from_secs(120));
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("replicas: 3") && run.stdout.contains("replicas: 1"), "{}", run.stdout);
}

/// Syncs `web` (`replicas: 1`) with `rule`, scales it to 3 through the `scale` subresource as
/// an HPA does (field manager `test-hpa`, operation Update), syncs again; returns the second
/// sync's action and the live object.
async fn scaled_through_subresource(prefix: &str, rule: &str) -> (String, Value) {
    let env = common::setup(prefix).await;
    let repo = repo_with("nginx:1");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, &format!("health_timeout = \"0s\"\n{rule}"));
    let mut engine = common::engine(&env.client, &common::config(state.path(), &unit), "app").await;
    let first = engine.sync().await.expect("first sync");
    assert!(!first.changes.has_failures(), "{:?}", common::actions(&first));
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    let params = PatchParams { field_manager: Some("test-hpa".into()), ..Default::default() };
    let scaled =
        api.patch_scale("web", &params, &Patch::Merge(&json!({"spec": {"replicas": 3}}))).await.expect("scale");
    // The engine's watch sees the scale before the second sync, as a daemon's would between
    // syncs: otherwise the cache still holds gitward's entry as owning replicas, and the
    // apply that finds the entry without them reads as a drift correction.
    let scaled: u64 = scaled.metadata.resource_version.expect("a resourceVersion").parse().expect("numeric");
    let object = gitward::object::ObjectRef::new(
        gitward::object::GroupKind::new("apps", "Deployment"),
        Some(env.namespace.as_str()),
        "web",
    );
    let seen = common::eventually(Duration::from_secs(30), || async {
        engine.cache().get(&object).and_then(|m| m.resource_version.parse::<u64>().ok()).is_some_and(|rv| rv >= scaled)
    })
    .await;
    assert!(seen, "the cache never saw the scale");
    let second = engine.sync().await.expect("second sync");
    let action =
        common::actions(&second).get(&format!("Deployment/{}/web", env.namespace)).cloned().unwrap_or_default();
    (action, web(&env.client, &env.namespace).await)
}

#[tokio::test]
async fn a_managers_rule_leaves_what_that_manager_owns_live_even_set_through_scale() {
    let rule = "[[sync.ignore]]\nkind = \"Deployment\"\nmanagers = [\"test-hpa\"]\n";
    let (action, live) = scaled_through_subresource("ignore-managers", rule).await;
    assert_eq!(action, "unchanged", "neither drift-corrected nor conflict");
    assert_eq!(live["spec"]["replicas"], 3);
    assert!(
        owns_replicas(&live, "test-hpa") && !owns_replicas(&live, "gitward"),
        "{}",
        live["metadata"]["managedFields"]
    );
    assert_eq!(live["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1", "gitward's fields stay");
    // A rule naming another manager leaves nothing to this one.
    let rule = "[[sync.ignore]]\nkind = \"Deployment\"\nmanagers = [\"kube-controller-manager\"]\n";
    let (_, live) = scaled_through_subresource("ignore-managers-other", rule).await;
    assert_eq!(live["spec"]["replicas"], 1, "taken back");
}

/// `web` with `replicas: 3` and an env var on its container: git's values at both paths of
/// [`RULE`].
fn web_with_three() -> String {
    format!(
        "{}        env:\n        - name: FROM_GIT\n          value: \"yes\"\n",
        common::deployment("web", "nginx:1", 3)
    )
}

#[tokio::test]
async fn an_ignored_field_is_created_with_gits_value() {
    let t = common::setup("ignore-create").await;
    let repo = common::GitRepo::new();
    repo.push(&[("web.yaml", &web_with_three())], "web");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &t.namespace, &format!("health_timeout = \"0s\"\n{RULE}"));
    let mut engine = common::engine(&t.client, &common::config(state.path(), &unit), "app").await;
    let report = engine.sync().await.expect("sync");
    let name = format!("Deployment/{}/web", t.namespace);
    assert_eq!(common::actions(&report).get(&name).map(String::as_str), Some("created"));
    let live = web(&t.client, &t.namespace).await;
    assert_eq!(live["spec"]["replicas"], 3, "created with git's replicas, not the API server's default");
    assert_eq!(env(&live), json!([{"name": "FROM_GIT", "value": "yes"}]), "created with git's env");
}

#[tokio::test]
async fn a_rule_added_for_a_field_gitward_set_keeps_its_value_and_diff_says_so() {
    let t = common::setup("ignore-added").await;
    let repo = common::GitRepo::new();
    repo.push(&[("web.yaml", &web_with_three())], "web");
    let dir = tempfile::tempdir().unwrap();
    let without = common::unit_toml("app", &repo.bare(), "", &t.namespace, "health_timeout = \"0s\"\n");
    let run = common::gitward(&["sync"], &common::config_file(dir.path(), &without), Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(web(&t.client, &t.namespace).await["spec"]["replicas"], 3);
    // The rule is added: what gitward set stays, and diff, run first, lists no change.
    let with_rule =
        common::unit_toml("app", &repo.bare(), "", &t.namespace, &format!("health_timeout = \"0s\"\n{RULE}"));
    let config = common::config_file(dir.path(), &with_rule);
    let diff = common::gitward(&["diff"], &config, Duration::from_secs(120));
    assert_eq!(diff.code, Some(0), "no change: {}\n{}", diff.stdout, diff.stderr);
    assert!(!diff.stdout.contains("Deployment"), "{}", diff.stdout);
    let run = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.trim_end().ends_with("(1 unchanged)"), "the sync changed nothing: {}", run.stdout);
    let live = web(&t.client, &t.namespace).await;
    assert_eq!(live["spec"]["replicas"], 3, "not reset to the API server's default");
    assert_eq!(env(&live), json!([{"name": "FROM_GIT", "value": "yes"}]));
    // Another writer then takes the field: the next sync leaves it to that writer.
    scale_to_three(&t.client, &t.namespace).await;
    let api: Api<Deployment> = Api::namespaced(t.client.clone(), &t.namespace);
    let patch =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}});
    api.patch("web", &PatchParams::apply(SCALER).force(), &Patch::Apply(&patch)).await.expect("scale to 5");
    let run = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(web(&t.client, &t.namespace).await["spec"]["replicas"], 5, "left to the scaler");
}
