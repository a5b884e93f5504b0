//! Self-heal and `[[sync.ignore]]` under `gitward run`: another field manager scaling a
//! Deployment starts a self-heal (its generation moved), and the heal leaves an ignored
//! `spec.replicas` to that manager; without the rule the heal takes it back.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// The field manager of the other writer.
const SCALER: &str = "test-scaler";

async fn replicas(client: &kube::Client, ns: &str) -> (Option<i32>, Value) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let web = api.get("web").await.expect("read web");
    let fields = serde_json::to_value(&web.metadata.managed_fields).unwrap();
    (web.spec.and_then(|s| s.replicas), fields)
}

/// Starts a daemon over a repository holding Deployment `web` (`replicas: 1`), with `unit_extra`
/// in its unit; once it is ready, the scaler sets replicas to 3 by server-side apply under its
/// own field manager. Returns once the daemon has logged the self-heal that write started and
/// the `object` event of that heal for `web`: its action (and the directory of the daemon's
/// config, state and log, kept while it runs).
async fn scaled_under_daemon(env: &common::TestEnv, unit_extra: &str) -> (common::Daemon, String, tempfile::TempDir) {
    let repo = common::GitRepo::new();
    repo.push(&[("web.yaml", &common::deployment("web", "nginx:1", 1))], "web");
    let dir = tempfile::tempdir().unwrap();
    let extra = format!("health_timeout = \"0s\"\n{unit_extra}");
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", &extra);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let heals = daemon.logged("self-heal of drifted objects").len();
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    let patch =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}});
    api.patch("web", &PatchParams::apply(SCALER).force(), &Patch::Apply(&patch)).await.expect("scaler's apply");
    let object = format!("Deployment/{}/web", env.namespace);
    // The heal's own `object` event, the first for `web` after the self-heal's line.
    let heal_action = || {
        let events = daemon.events();
        let heal =
            events.iter().enumerate().filter(|(_, e)| e["message"] == "self-heal of drifted objects").nth(heals)?;
        let after = &events[heal.0..];
        after.iter().find(|e| e["message"] == "object" && e["object"] == object.as_str())?["action"]
            .as_str()
            .map(String::from)
    };
    let healed = common::eventually(WAIT, || async { heal_action().is_some() }).await;
    assert!(healed, "no self-heal of {object} logged: {}", daemon.log_text());
    let action = heal_action().unwrap();
    (daemon, action, dir)
}

#[tokio::test]
async fn self_heal_leaves_an_ignored_field_to_the_manager_that_set_it() {
    let env = common::setup("ignore-heal").await;
    let rule = "[[sync.ignore]]\nkind = \"Deployment\"\npaths = [\"/spec/replicas\"]\n";
    let (mut daemon, action, _dir) = scaled_under_daemon(&env, rule).await;
    assert_eq!(action, "unchanged", "not drift-corrected: {}", daemon.log_text());
    let (replicas, fields) = replicas(&env.client, &env.namespace).await;
    assert_eq!(replicas, Some(3), "{}", daemon.log_text());
    let owner = |manager: &str| {
        fields
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["manager"] == manager && e["fieldsV1"]["f:spec"].get("f:replicas").is_some())
    };
    assert!(owner(SCALER) && !owner("gitward"), "{fields}");
    assert!(
        daemon
            .logged("field fight: another field manager keeps changing what git declares; self-heal of it backs off")
            .is_empty()
    );
    let fights: Vec<Value> =
        daemon.events().into_iter().filter(|e| e["action"] == "conflict" || e["action"] == "drift-corrected").collect();
    assert!(fights.is_empty(), "{fights:?}");
    daemon.kill();
}

#[tokio::test]
async fn without_the_rule_self_heal_takes_the_field_back() {
    let env = common::setup("ignore-heal-none").await;
    let (mut daemon, action, _dir) = scaled_under_daemon(&env, "").await;
    assert_eq!(action, "drift-corrected", "{}", daemon.log_text());
    assert_eq!(replicas(&env.client, &env.namespace).await.0, Some(1), "{}", daemon.log_text());
    daemon.kill();
}

/// The `DriftCorrected` Events regarding unit `app`'s parent in `ns`, as their notes.
async fn drift_corrected_notes(client: &kube::Client, ns: &str) -> Vec<String> {
    use k8s_openapi::api::events::v1::Event;
    let params = kube::api::ListParams::default().fields("regarding.kind=Secret,regarding.name=gitward-app");
    let events = Api::<Event>::namespaced(client.clone(), ns).list(&params).await.expect("list events").items;
    events.into_iter().filter(|e| e.reason.as_deref() == Some("DriftCorrected")).filter_map(|e| e.note).collect()
}

/// An HPA-like scale under a `managers` rule starts a self-heal that re-applies nothing: no
/// `DriftCorrected` Event says `0 drifted object(s) re-applied`. Without a rule the heal takes
/// the field back, and its Event counts the one object.
#[tokio::test]
async fn a_heal_that_re_applied_nothing_gives_no_drift_corrected_event() {
    let env = common::setup("ignore-heal-events").await;
    let rule = format!("[[sync.ignore]]\nkind = \"Deployment\"\ngroup = \"apps\"\nmanagers = [\"{SCALER}\"]\n");
    let (mut daemon, action, _dir) = scaled_under_daemon(&env, &rule).await;
    assert_eq!(action, "unchanged", "{}", daemon.log_text());
    // The heal's Events are written by a task of their own: give it time to write one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let notes = drift_corrected_notes(&env.client, &env.namespace).await;
    assert!(notes.is_empty(), "{notes:?}");
    daemon.kill();

    let env = common::setup("ignore-heal-events-none").await;
    let (mut daemon, action, _dir) = scaled_under_daemon(&env, "").await;
    assert_eq!(action, "drift-corrected", "{}", daemon.log_text());
    let counted = common::eventually(WAIT, || async {
        let notes = drift_corrected_notes(&env.client, &env.namespace).await;
        notes.iter().any(|n| n.ends_with(": 1 drifted object(s) re-applied"))
    })
    .await;
    assert!(counted, "{:?}", drift_corrected_notes(&env.client, &env.namespace).await);
    daemon.kill();
}
