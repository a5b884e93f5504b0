//! A push gets ahead of other work in `gitward run`: a full re-send of the same unit yields to
//! it, and it does not wait for a sync slot that another unit's long sync holds. Order is read
//! from the API server's audit log; nothing here is timed.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);
const SECRET: &str = "push-lane-secret";

/// `files` files of `per_file` ConfigMaps each, written to `repo` as `<path>-<file>.yaml` and
/// named `<prefix>-<file>-<n>` (`prefix`: the last component of `path`; `long/long` gives
/// `long/long-000.yaml` holding `long-000-000`…), `data.value` set to `value`. Returns the
/// names, in path order.
fn write_config_maps(repo: &common::GitRepo, path: &str, files: usize, per_file: usize, value: &str) -> Vec<String> {
    let prefix = path.rsplit('/').next().unwrap_or(path);
    let mut names = Vec::new();
    for f in 0..files {
        let mut text = String::new();
        for n in 0..per_file {
            let name = format!("{prefix}-{f:03}-{n:03}");
            text.push_str(&common::cm(&name, value));
            text.push_str("---\n");
            names.push(name);
        }
        repo.write(&format!("{path}-{f:03}.yaml"), &text);
    }
    names
}

/// The audit events of the daemon's writes (patch, create, update) of ConfigMaps in `namespace`,
/// in the order the API server logged them (its User-Agent: `gitward/<version> (<identity>)`).
fn config_map_writes(namespace: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    let agent = format!("{} (", gitward::TOOLING);
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with(&agent)))
        .filter(|e| {
            matches!(e["verb"].as_str(), Some("patch" | "create" | "update"))
                && e["objectRef"]["resource"] == "configmaps"
                && e["objectRef"]["namespace"] == namespace
                && e["objectRef"]["subresource"].is_null()
        })
        .collect()
}

fn name(e: &Value) -> &str {
    e["objectRef"]["name"].as_str().unwrap_or_default()
}

/// Waits until the daemon has logged `sync triggered` for `unit` with `field` equal to `value`
/// (the sync has fetched and is about to send). Read from the daemon's own log, not the audit
/// log: in the whole suite the shared API server's audit log is hundreds of megabytes, and
/// reading it to see a sync's first writes took longer than the sync (CI, 2026-11-26).
async fn triggered(daemon: &common::Daemon, unit: &str, field: &str, value: &str) {
    let seen = common::eventually(WAIT, || async {
        daemon.logged("sync triggered").iter().any(|e| e["unit"] == unit && e[field] == value)
    })
    .await;
    assert!(seen, "no `sync triggered` of {unit} with {field} {value}: {}", daemon.log_text());
}

/// A daemon of `units` with one sync slot (`max_concurrent_syncs = 1`), 4 requests in flight
/// and no self-heal, its state under `dir`; returned once ready.
async fn one_slot_daemon(dir: &std::path::Path, units: &str) -> common::Daemon {
    let (config, port) = common::daemon_config(
        dir,
        "[cluster]\nmax_in_flight = 4\n",
        "max_concurrent_syncs = 1\nself_heal = false",
        units,
    );
    common::Daemon::ready(&config, port, WAIT).await
}

/// POSTs a signed webhook for `main`; 202 expected.
fn webhook(port: u16) {
    let body = br#"{"ref": "refs/heads/main"}"#;
    let (status, reply) = common::signed_webhook(port, SECRET, body);
    assert_eq!(status, 202, "{reply}");
}

/// A ready daemon in `dir` of unit `app` of the repository at `repo` in `namespace`: webhooks
/// signed with [`SECRET`], four requests in flight, no self-heal.
async fn webhook_daemon(dir: &Path, repo: &Path, namespace: &str) -> common::Daemon {
    std::fs::write(dir.join("webhook-secret"), SECRET).unwrap();
    let (config, port) = common::daemon_config(
        dir,
        "[cluster]\nmax_in_flight = 4\n",
        "webhook_secret_file = \"webhook-secret\"\nself_heal = false",
        &common::unit_toml("app", repo, "", namespace, ""),
    );
    common::Daemon::ready(&config, port, WAIT).await
}

#[tokio::test]
async fn a_push_during_a_forced_resync_is_written_before_the_resync_ends_and_the_rest_still_converges() {
    let (env, _, repo) = common::setup_repo("yield").await;
    // 2,000 ConfigMaps, sent in path order by a resync; the pushed one is in the last file.
    let mut names = write_config_maps(&repo, "cm", 40, 50, "1");
    repo.write("zz.yaml", &common::cm("zz-pushed", "1"));
    names.push("zz-pushed".into());
    repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    let daemon = webhook_daemon(dir.path(), &repo.bare(), &env.namespace).await;
    let port = daemon.port;
    // A hand edit (no self-heal) that only a sync sending every object puts right: the resync's
    // next-to-last object.
    let edited = names[names.len() - 2].clone();
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let patch = serde_json::json!({"data": {"value": "edited"}});
    api.patch(&edited, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();

    let before = config_map_writes(&env.namespace).len();
    webhook(port);
    triggered(&daemon, "app", "trigger", "webhook").await;
    let pushed = repo.push(&[("zz.yaml", &common::cm("zz-pushed", "pushed"))], "push during the resync");

    let ns = env.namespace.clone();
    let converged = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &ns, "zz-pushed").await.as_deref() == Some("pushed")
            && common::cm_value_or_none(&env.client, &ns, &edited).await.as_deref() == Some("1")
            && daemon.logged("sync complete").iter().any(|e| e["revision"] == pushed.as_str())
    })
    .await;
    assert!(converged, "the push and the rest of the resync not applied: {}", daemon.log_text());
    let yielded = daemon.logged("sync yielded to a newer revision");
    assert!(
        yielded.iter().any(|e| e["to"] == pushed.as_str() && e["trigger"] == "push"),
        "the resync did not yield to the push: {}",
        daemon.log_text()
    );

    let writes: Vec<Value> = config_map_writes(&env.namespace).split_off(before);
    let first_push = writes.iter().position(|e| name(e) == "zz-pushed").expect("zz-pushed written");
    let written_before: BTreeSet<&str> = writes[..first_push].iter().map(name).collect();
    // The resync sends zz-pushed last: had the push waited for it, every other object would
    // have been written first.
    assert!(
        written_before.len() < names.len() - 1,
        "the pushed object was written after all {} others of the resync",
        written_before.len()
    );
    // The resync's remaining objects were sent after all (by the push's sync): every object.
    let written: BTreeSet<&str> = writes.iter().map(name).collect();
    let missing: Vec<&String> = names.iter().filter(|n| !written.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "not re-sent after the resync yielded: {missing:?}");
}

#[tokio::test]
async fn a_push_to_one_unit_is_written_while_another_units_long_sync_holds_the_only_slot() {
    let env = common::setup("lane").await;
    let long = common::GitRepo::new();
    let names = write_config_maps(&long, "long", 40, 50, "1");
    long.commit_and_push("first");
    let small = common::GitRepo::new();
    small.push(&[("b.yaml", &common::cm("b", "1"))], "first");
    let dir = tempfile::tempdir().unwrap();
    let units = format!(
        "{}{}",
        common::unit_toml("long", &long.bare(), "", &env.namespace, ""),
        common::unit_toml("small", &small.bare(), "", &env.namespace, "")
    );
    let daemon = one_slot_daemon(dir.path(), &units).await;

    // Every file of the long unit changes: more than the early apply takes, so its whole sync
    // sends 2,000 objects holding the one slot.
    let before = config_map_writes(&env.namespace).len();
    write_config_maps(&long, "long", 40, 50, "2");
    let long_revision = long.commit_and_push("every object");
    triggered(&daemon, "long", "revision", &long_revision).await;
    let small_revision = small.push(&[("b.yaml", &common::cm("b", "pushed"))], "push");

    let ns = env.namespace.clone();
    let done = common::eventually(WAIT, || async {
        let complete = daemon.logged("sync complete");
        complete.iter().any(|e| e["revision"] == long_revision.as_str())
            && complete.iter().any(|e| e["revision"] == small_revision.as_str())
    })
    .await;
    assert!(done, "both pushes not synced: {}", daemon.log_text());
    assert_eq!(common::cm_value_or_none(&env.client, &ns, "b").await.as_deref(), Some("pushed"));
    for n in [&names[0], &names[names.len() - 1]] {
        assert_eq!(common::cm_value_or_none(&env.client, &ns, n).await.as_deref(), Some("2"), "{n}");
    }

    let writes: Vec<Value> = config_map_writes(&env.namespace).split_off(before);
    let small_write = writes.iter().position(|e| name(e) == "b").expect("b written");
    let last_long = writes.iter().rposition(|e| name(e).starts_with("long-")).expect("long unit written");
    assert!(
        small_write < last_long,
        "the push to `small` was written at {small_write}, after the long sync's last write at {last_long}"
    );
    // It went early, in the lane: the rest of its sync waited for the slot.
    let small_sync = daemon
        .logged("sync complete")
        .into_iter()
        .find(|e| e["revision"] == small_revision.as_str())
        .expect("sync complete of the push");
    assert_eq!(small_sync["applied_early"], 1, "{small_sync}");
}

/// Three units of one repository and one sync slot: `long` follows branch `long`, `b` and
/// `c` follow `main`; `c` is a kustomize unit. A push to `long` changes its 2,000 objects, and
/// its sync holds the slot. A push to `main` that changes no unit's path: `b`, a plain unit,
/// takes it without a sync; `c`, which may read outside its path, waits for the slot outside
/// the push lane. A push to `b`'s path: `b` takes the lane and its object is written while
/// `long`'s sync still holds the slot; `c`, still left alone, keeps waiting and syncs the
/// newest revision outside the lane (`push_lane = false`).
#[tokio::test]
async fn a_push_to_a_unit_that_waits_for_a_slot_after_another_push_still_takes_the_lane() {
    let (env, _, repo) = common::setup_repo("lane-shared").await;
    let work = repo.work();
    write_config_maps(&repo, "long/long", 40, 50, "1");
    repo.write("b/b.yaml", &common::cm("b", "1"));
    repo.push(&[("c/c.yaml", &common::cm("c", "1")), ("c/kustomization.yaml", "resources:\n- c.yaml\n")], "first");
    repo.git(&["push", "-q", "origin", "HEAD:refs/heads/long"], &work);
    let dir = tempfile::tempdir().unwrap();
    let long =
        common::unit_toml("long", &repo.bare(), "long", &env.namespace, "").replace("ref = \"main\"", "ref = \"long\"");
    let units = format!(
        "{long}{}{}",
        common::unit_toml("b", &repo.bare(), "b", &env.namespace, ""),
        common::unit_toml("c", &repo.bare(), "c", &env.namespace, "")
    );
    let kustomize = crate::sources::render::tools_bin().join("kustomize");
    let tables = format!("[cluster]\nmax_in_flight = 4\n\n[render]\nkustomize = \"{}\"\n", kustomize.display());
    let (config, port) =
        common::daemon_config(dir.path(), &tables, "max_concurrent_syncs = 1\nself_heal = false", &units);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let completed = |unit: &str, revision: &str| {
        daemon.logged("sync complete").iter().any(|e| e["unit"] == unit && e["revision"] == revision)
    };

    let before = config_map_writes(&env.namespace).len();
    let names = write_config_maps(&repo, "long/long", 40, 50, "2");
    repo.git(&["add", "-A"], &work);
    repo.git(&["commit", "-q", "-m", "every object of long"], &work);
    repo.git(&["push", "-q", "origin", "HEAD:refs/heads/long"], &work);
    let long_revision = repo.git(&["rev-parse", "HEAD"], &work);
    triggered(&daemon, "long", "revision", &long_revision).await;
    let readme_revision = repo.push(&[("README.md", "no unit's path\n")], "readme");
    let b_revision = repo.push(&[("b/b.yaml", &common::cm("b", "pushed"))], "b");

    let ns = env.namespace.clone();
    let done = common::eventually(WAIT, || async {
        completed("long", &long_revision) && completed("b", &b_revision) && completed("c", &b_revision)
    })
    .await;
    assert!(done, "the pushes were not all synced: {}", daemon.log_text());
    assert_eq!(common::cm_value_or_none(&env.client, &ns, "b").await.as_deref(), Some("pushed"));
    assert_eq!(common::cm_value_or_none(&env.client, &ns, &names[names.len() - 1]).await.as_deref(), Some("2"));

    // `b` was written before `long`'s sync had sent its 2,000 objects: it did not wait for the
    // slot that sync held.
    let writes: Vec<Value> = config_map_writes(&env.namespace).split_off(before);
    let b_pushed = writes.iter().position(|e| name(e) == "b").expect("b written");
    let long_before_b = writes[..b_pushed].iter().filter(|e| name(e).starts_with("long-")).count();
    assert!(long_before_b < names.len(), "b was written after {long_before_b} writes of long's objects");
    let lane = |unit: &str, revision: &str| -> Vec<Value> {
        daemon
            .logged("sync triggered")
            .into_iter()
            .filter(|e| e["unit"] == unit && e["revision"] == revision)
            .map(|e| e["push_lane"].clone())
            .collect()
    };
    assert_eq!(lane("b", &b_revision), [Value::Bool(true)], "{}", daemon.log_text());
    assert_eq!(lane("c", &b_revision), [Value::Bool(false)], "{}", daemon.log_text());
    assert!(
        lane("b", &readme_revision).is_empty() && lane("c", &readme_revision).is_empty(),
        "b took the push that left it alone without a sync, c took the newer push in its place: {}",
        daemon.log_text()
    );
    let unchanged = daemon.logged("path unchanged, nothing to sync");
    let took = |unit: &str| unchanged.iter().any(|e| e["unit"] == unit && e["revision"] == readme_revision.as_str());
    assert!(took("b") && !took("c"), "only the plain unit takes the push without a sync: {}", daemon.log_text());
}

/// A webhook read during a sync is fetched at once, to see whether the sync should yield. Here
/// that fetch is held open (a proxy in front of `git daemon` keeps its connection waiting) until
/// the sync has ended: the webhook must still bring its commit in, with no poll to fall back on
/// (the daemon polls hourly). The sync runs long enough to read the webhook in its middle: 2,000
/// ConfigMaps, changed all at once (more files than the early apply takes), at 4 requests in
/// flight.
#[tokio::test]
async fn a_webhook_whose_fetch_outlasts_the_running_sync_is_applied_after_it() {
    let (env, _, repo) = common::setup_repo("held-fetch").await;
    write_config_maps(&repo, "cm", 40, 50, "1");
    repo.commit_and_push("first");
    let git_daemon = common::git_remote::GitDaemon::serve(repo.bare().parent().unwrap());
    let proxy = common::git_remote::GatedProxy::start(git_daemon.port);
    let url = format!("git://127.0.0.1:{}/remote.git", proxy.port);
    let dir = tempfile::tempdir().unwrap();
    let daemon = webhook_daemon(dir.path(), Path::new(&url), &env.namespace).await;
    let port = daemon.port;
    let webhook = || {
        let body = format!(r#"{{"ref": "refs/heads/main", "repository": {{"clone_url": "{url}"}}}}"#);
        let (status, reply) = common::signed_webhook(port, SECRET, body.as_bytes());
        assert_eq!((status, reply.as_str()), (202, r#"{"units":["app"]}"#));
    };
    let ended = |revision: &str| daemon.logged("trigger applied").iter().any(|e| e["revision"] == revision);

    write_config_maps(&repo, "cm", 40, 50, "2");
    let long = repo.commit_and_push("every object");
    webhook();
    triggered(&daemon, "app", "revision", &long).await;
    proxy.close();
    // The first object is written: the sync has read its revision and is sending.
    let ns = env.namespace.clone();
    let sending = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &ns, "cm-000-000").await.as_deref() == Some("2")
    });
    assert!(sending.await, "the long sync sent nothing: {}", daemon.log_text());
    let pushed = repo.push(&[("zz.yaml", &common::cm("zz-pushed", "pushed"))], "push during the sync");
    webhook();
    let held = common::eventually(WAIT, || async { proxy.held() > 0 }).await;
    assert!(held, "the webhook's fetch never reached the remote: {}", daemon.log_text());
    assert!(!ended(&long), "the sync ended before the webhook's fetch began: nothing was held across its end");
    let sync_ended = common::eventually(WAIT, || async { ended(&long) }).await;
    assert!(sync_ended, "the long sync did not end: {}", daemon.log_text());
    assert!(proxy.held() > 0, "the webhook's fetch was not in flight when the sync ended");

    proxy.open();
    let applied = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &ns, "zz-pushed").await.as_deref() == Some("pushed")
            && daemon
                .logged("trigger applied")
                .iter()
                .any(|e| e["revision"] == pushed.as_str() && e["trigger"] == "webhook")
    })
    .await;
    assert!(applied, "the webhook's commit {pushed} was dropped with its fetch: {}", daemon.log_text());
}
