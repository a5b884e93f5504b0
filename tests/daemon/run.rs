//! `gitward run` as users run it: the real binary, a real bare repository pushed to with git,
//! the real apiserver. Waits are liveness bounds ("within 30 s"), never speed assertions; the
//! latencies themselves are measured in benches/.

use crate::common;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

const WAIT: Duration = Duration::from_secs(30);

/// Sets `data.value` of ConfigMap `ns/name` by hand; returns the object as the daemon's log
/// names it and the resourceVersion of the edit.
async fn hand_edit(client: &kube::Client, ns: &str, name: &str, v: &str) -> (String, String) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({"data": {"value": v}});
    let edited = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    (format!("ConfigMap/{ns}/{name}"), edited.metadata.resource_version.expect("a resourceVersion"))
}

/// [`hand_edit`] of ConfigMap `name` away from git's `"1"`; waits until the daemon healed it
/// (its value is back, and a self-heal more is logged). The watch delivers a kind's events in
/// order: once this edit is healed, every earlier event of the kind has been handled. Returns
/// what [`hand_edit`] returns.
async fn edit_and_heal(env: &common::TestEnv, daemon: &common::Daemon, name: &str) -> (String, String) {
    let heals = daemon.logged("self-heal of drifted objects").len();
    let edit = hand_edit(&env.client, &env.namespace, name, "edited").await;
    let healed = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &env.namespace, name).await.as_deref() == Some("1")
            && daemon.logged("self-heal of drifted objects").len() > heals
    })
    .await;
    assert!(healed, "hand edit of {name} not reverted: {}", daemon.log_text());
    edit
}

/// A test's environment, and a repository of ConfigMap `a` ([`setup_repo`]).
async fn with_first_commit(prefix: &str) -> (common::TestEnv, common::GitRepo) {
    (common::setup(prefix).await, setup_repo())
}

/// The ready daemon of [`daemon_config`] with no extra lines.
async fn app_daemon(dir: &Path, repo: &common::GitRepo, namespace: &str) -> common::Daemon {
    let (config, port) = daemon_config(dir, repo, namespace, "", "");
    common::Daemon::ready(&config, port, WAIT).await
}

fn setup_repo() -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.push(&[("a.yaml", &common::cm("a", "1"))], "first");
    repo
}

/// The daemon config of these tests: one unit `app` over `repo` in `namespace`.
fn daemon_config(
    dir: &Path,
    repo: &common::GitRepo,
    namespace: &str,
    daemon_extra: &str,
    unit_extra: &str,
) -> (std::path::PathBuf, u16) {
    common::app_daemon_config(dir, &repo.bare(), namespace, daemon_extra, unit_extra)
}

/// Rewrites `repo`'s branch `main` with the revision it already holds, as a second `git push`
/// of it does (lock file, then rename): the daemon's ref watch sees a push.
fn rewrite_ref(repo: &common::GitRepo, revision: &str) {
    let refs = repo.bare().join("refs/heads");
    std::fs::write(refs.join("main.lock"), format!("{revision}\n")).unwrap();
    std::fs::rename(refs.join("main.lock"), refs.join("main")).unwrap();
}

/// The daemon's `no new revision` events for a push of `revision`.
fn pushes_of_the_same_revision(daemon: &common::Daemon, revision: &str) -> usize {
    daemon
        .logged(common::NO_NEW_REVISION)
        .iter()
        .filter(|e| e["trigger"] == "push" && e["revision"] == revision)
        .count()
}

/// A push of the revision already applied, and its `no new revision` event: the unit takes
/// triggers from one queue, in order, so once it says this, every trigger sent before has been
/// handled (a sync it started has been logged). The push is repeated while none is seen: the
/// queue holds one trigger, and a push that finds it full is merged into the one queued.
async fn barrier(daemon: &common::Daemon, repo: &common::GitRepo) {
    let revision = repo.git(&["rev-parse", "main"], &repo.bare());
    let before = pushes_of_the_same_revision(daemon, &revision);
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        rewrite_ref(repo, &revision);
        let seen = || async { pushes_of_the_same_revision(daemon, &revision) > before };
        if common::eventually(Duration::from_secs(2), seen).await {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "no `no new revision` for {revision}: {}", daemon.log_text());
    }
}

/// A push whose object the API server refuses is logged `trigger failed` with the counts, never
/// `trigger applied` (its `trigger_to_applied_ms` would time a change that did not land).
#[tokio::test]
async fn a_push_whose_objects_failed_is_logged_trigger_failed_not_applied() {
    let (env, repo) = with_first_commit("push-failed").await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = app_daemon(dir.path(), &repo, &env.namespace).await;

    repo.write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: no-such-ns-x\n");
    let revision = repo.commit_and_push("an object the API server refuses");
    let failed = || daemon.logged("trigger failed").into_iter().find(|e| e["revision"] == revision.as_str());
    let seen = common::eventually(WAIT, || async { failed().is_some() }).await;
    assert!(seen, "no `trigger failed` for {revision}: {}", daemon.log_text());
    let event = failed().unwrap();
    assert_eq!((event["trigger"].as_str(), event["failed"].as_u64()), (Some("push"), Some(1)), "{event}");
    let applied = daemon.logged("trigger applied");
    assert!(!applied.iter().any(|e| e["revision"] == revision.as_str()), "{}", daemon.log_text());
}

#[tokio::test]
async fn push_to_local_repository_is_applied_without_waiting_for_the_poll() {
    let (env, repo) = with_first_commit("push").await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = app_daemon(dir.path(), &repo, &env.namespace).await;

    let revision = repo.push(&[("b.yaml", &common::cm("b", "pushed"))], "second");
    let ns = env.namespace.clone();
    let applied = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &ns, "b").await.as_deref() == Some("pushed")
    })
    .await;
    assert!(applied, "push not applied (poll interval is 1h): {}", daemon.log_text());
    let found = common::eventually(WAIT, || async {
        daemon.events().iter().any(|e| {
            e["message"] == "trigger applied"
                && e["trigger"] == "push"
                && e["revision"] == revision
                && e["trigger_to_applied_ms"].is_u64()
        })
    })
    .await;
    assert!(found, "no push trigger_to_applied_ms event: {}", daemon.log_text());

    // The ref rewritten with the same revision (as a second `git push` of it does): the ref
    // watch sees it, the unit fetches, says it has no new revision, and re-sends nothing.
    let before = pushes_of_the_same_revision(&daemon, &revision);
    rewrite_ref(&repo, &revision);
    let seen = common::eventually(WAIT, || async { pushes_of_the_same_revision(&daemon, &revision) > before }).await;
    assert!(seen, "the ref event was not seen: {}", daemon.log_text());
    let syncs = daemon
        .events()
        .iter()
        .filter(|e| e["message"] == "sync triggered" && e["trigger"] == "push" && e["revision"] == revision)
        .count();
    assert_eq!(syncs, 1, "the same revision was synced again: {}", daemon.log_text());
}

#[tokio::test]
async fn webhook_with_valid_signature_syncs_and_a_bad_one_gets_401() {
    let (env, repo) = with_first_commit("webhook").await;
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cret-for-tests";
    std::fs::write(dir.path().join("webhook-secret"), secret).unwrap();
    let (config, port) = daemon_config(
        dir.path(),
        &repo,
        &env.namespace,
        "webhook_secret_file = \"webhook-secret\"\nself_heal = false",
        "",
    );
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    hand_edit(&env.client, &env.namespace, "a", "edited").await;

    let body = br#"{"ref": "refs/heads/main", "after": "0000000000000000000000000000000000000000"}"#;
    let (status, _) =
        common::http(port, "POST", "/hooks/git", &[("X-Hub-Signature-256", "sha256=00ff")], body).unwrap();
    assert_eq!(status, 401);
    let (status, _) = common::http(port, "POST", "/hooks/git", &[], body).unwrap();
    assert_eq!(status, 401);
    assert_eq!(daemon.logged("webhook rejected").len(), 2, "{}", daemon.log_text());
    // Every trigger the unit was sent so far has been handled: a rejected webhook started nothing.
    barrier(&daemon, &repo).await;
    assert_eq!(
        common::cm_value_or_none(&env.client, &env.namespace, "a").await.as_deref(),
        Some("edited"),
        "a rejected webhook must not sync"
    );
    assert_eq!(daemon.logged("sync triggered").len(), 1, "only the startup sync: {}", daemon.log_text());
    assert_eq!(daemon.metric_sum("gitward_triggers_total", &["kind=\"webhook\""]), 0.0);

    let (status, reply) = common::signed_webhook(port, secret, body);
    assert_eq!(status, 202, "{reply}");
    let ns = env.namespace.clone();
    let restored = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &ns, "a").await.as_deref() == Some("1")
    })
    .await;
    assert!(restored, "valid webhook did not sync: {}", daemon.log_text());
    assert_eq!(daemon.metric_sum("gitward_triggers_total", &["kind=\"webhook\""]), 1.0);
}

#[tokio::test]
async fn hand_edit_is_reverted_and_own_writes_trigger_no_sync() {
    let (env, repo) = with_first_commit("selfheal").await;
    repo.push(&[("b.yaml", &common::cm("b", "1"))], "and b");
    let dir = tempfile::tempdir().unwrap();
    let daemon = app_daemon(dir.path(), &repo, &env.namespace).await;
    let syncs = || daemon.metric_sum("gitward_triggers_total", &[]);
    let startup = syncs();

    // A hand edit is healed, and it is the only drift the daemon saw: the first sync's own
    // writes, whose watch events came before it, were not taken for drift.
    let a = edit_and_heal(&env, &daemon, "a").await;
    assert_eq!(daemon.drift_seen(), std::slice::from_ref(&a), "{}", daemon.log_text());
    assert_eq!(syncs(), startup + 1.0, "syncs besides the self-heal: {}", daemon.log_text());
    assert_eq!(daemon.metric_sum("gitward_triggers_total", &["kind=\"drift\""]), 1.0, "{}", daemon.log_text());

    // Nor was the self-heal's own write, whose event came before that of another hand edit.
    let b = edit_and_heal(&env, &daemon, "b").await;
    assert_eq!(daemon.drift_seen(), [a, b], "feedback loop: {}", daemon.log_text());
    assert_eq!(syncs(), startup + 2.0, "feedback loop: {}", daemon.log_text());
    assert_eq!(daemon.logged("self-heal of drifted objects").len(), 2, "feedback loop: {}", daemon.log_text());
}

/// A cold sync of more objects than the drift channel used to hold (256 events): the watch
/// events of gitward's own writes, many arriving before the write's response is recorded, are
/// all recognised as its own once the sync ends. The old channel overflowed here and answered
/// with a full re-send of every object (seen in the audit log as a second patch of each).
#[tokio::test]
async fn a_cold_sync_of_a_thousand_objects_is_not_followed_by_a_re_send_and_drift_is_still_healed() {
    const N: usize = 1000;
    let (env, _, repo) = common::setup_repo("selfheal-many").await;
    repo.write(
        "objects.yaml",
        &(0..N).map(|i| format!("---\n{}", common::cm(&format!("o-{i}"), "1"))).collect::<String>(),
    );
    repo.commit_and_push("a thousand ConfigMaps");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = daemon_config(dir.path(), &repo, &env.namespace, "", "health_timeout = \"0s\"");
    let daemon = common::Daemon::ready(&config, port, WAIT).await;

    // Drift is still seen and healed, one object alone; and it is the only drift the daemon
    // saw: the thousand own writes, whose watch events came before it, started nothing.
    let edited = edit_and_heal(&env, &daemon, "o-500").await;
    let heals = daemon.logged("self-heal of drifted objects");
    assert_eq!(heals.len(), 1, "{}", daemon.log_text());
    assert_eq!(heals[0]["objects"], 1);
    assert_eq!(daemon.drift_seen(), [edited], "{}", daemon.log_text());
    assert_eq!(daemon.logged("sync triggered").len(), 1, "only the startup sync: {}", daemon.log_text());
    let patches = || {
        let audit = std::fs::read_to_string(common::audit_log()).expect("read audit log");
        audit
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("gitward/")) && e["verb"] == "patch")
            .filter(|e| e["objectRef"]["namespace"] == env.namespace.as_str())
            .filter(|e| e["objectRef"]["name"].as_str().is_some_and(|n| n.starts_with("o-")))
            // The heal's dry run (what it shows as the drift's diff) writes nothing.
            .filter(|e| !common::is_dry_run(e))
            .count()
    };
    // The heal's response can reach the daemon just before the apiserver logs it.
    common::eventually(WAIT, || async { patches() > N }).await;
    assert_eq!(patches(), N + 1, "one apply per object and the heal's, no re-send: {}", daemon.log_text());
}

#[tokio::test]
async fn sighup_reloads_a_good_config_keeps_the_old_on_a_bad_one_and_sigterm_exits_0() {
    let (env, repo) = with_first_commit("signals").await;
    let dir = tempfile::tempdir().unwrap();
    let good = common::unit_toml("app", &repo.bare(), "", &env.namespace, "");
    let missing = common::unit_toml("missing", &dir.path().join("no-such-repo.git"), "", &env.namespace, "");
    let extra_ns = common::unique("signals-extra");
    common::create_namespace(&env.client, &extra_ns).await;
    let extra = common::unit_toml("extra", &repo.bare(), "", &extra_ns, "");
    let (config, port) = common::daemon_config(dir.path(), "", "", &format!("{good}{missing}{extra}"));
    let mut daemon = common::Daemon::start(&config, port, &[]);
    let tracked_extra = || daemon.metric_sum("gitward_tracked_objects", &["unit=\"extra\""]);
    assert!(common::eventually(WAIT, || async { tracked_extra() > 0.0 }).await, "{}", daemon.log_text());

    // /readyz is 503 while a unit has not synced (its repository does not exist) …
    let unready = common::eventually(WAIT, || async {
        matches!(daemon.get("/readyz"), Some((503, body)) if body.contains("missing"))
    })
    .await;
    assert!(unready, "{}", daemon.log_text());
    assert_eq!(daemon.get("/healthz").map(|(s, _)| s), Some(200));
    // … and turns ready once every unit has synced: SIGHUP with the broken unit removed.
    common::write_daemon_config(&config, port, "", "", &good);
    daemon.signal("HUP");
    assert!(daemon.wait_ready(WAIT).await, "{}", daemon.log_text());
    // The unit that left the config (extra, removed too) stops being exported.
    let gone = common::eventually(WAIT, || async {
        daemon.get("/metrics").is_some_and(|(_, body)| !body.contains("gitward_tracked_objects{unit=\"extra\"}"))
    })
    .await;
    assert!(gone, "gauges of a removed unit are forgotten");

    // A broken config is logged and the old one kept.
    std::fs::write(&config, "[daemon]\nbogus = 1\n").unwrap();
    daemon.signal("HUP");
    let logged = common::eventually(WAIT, || async {
        daemon.events().iter().any(|e| e["message"].as_str().is_some_and(|m| m.starts_with("config reload failed")))
    })
    .await;
    assert!(logged, "{}", daemon.log_text());
    repo.push(&[("b.yaml", &common::cm("b", "after-bad-reload"))], "second");
    let ns = env.namespace.clone();
    let applied =
        common::eventually(WAIT, || async { common::cm_value_or_none(&env.client, &ns, "b").await.is_some() }).await;
    assert!(applied, "the old config stopped working: {}", daemon.log_text());

    daemon.signal("TERM");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = daemon.child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "still running 10 s after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
}

#[tokio::test]
async fn only_the_leader_applies_and_a_killed_leader_hands_over() {
    let (env, repo) = with_first_commit("leader").await;
    let lease = format!(
        "\n[daemon.leader_election]\nnamespace = \"{}\"\nname = \"gitward\"\nlease_duration = \"3s\"\nrenew_every = \"1s\"\n",
        env.namespace
    );
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let (config_a, port_a) = daemon_config(dir_a.path(), &repo, &env.namespace, &lease, "");
    let (config_b, port_b) = daemon_config(dir_b.path(), &repo, &env.namespace, &lease, "");
    let a = common::Daemon::start(&config_a, port_a, &[("POD_NAME", "replica-a")]);
    let b = common::Daemon::start(&config_b, port_b, &[("POD_NAME", "replica-b")]);

    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let holder = || async {
        leases.get_opt("gitward").await.ok().flatten().and_then(|l| l.spec).and_then(|s| s.holder_identity)
    };
    assert!(common::eventually(WAIT, || async { holder().await.is_some() }).await, "no leader");
    let ns = env.namespace.clone();
    assert!(
        common::eventually(WAIT, || async { common::cm_value_or_none(&env.client, &ns, "a").await.is_some() }).await
    );
    let leader = holder().await.unwrap();
    let (mut leading, following) = if leader == "replica-a" { (a, b) } else { (b, a) };
    assert!(leading.metric_sum("gitward_triggers_total", &[]) >= 1.0, "{}", leading.log_text());

    leading.kill(); // SIGKILL: no release, the lease must expire.
    let killed = jiff::Timestamp::now();
    repo.push(&[("b.yaml", &common::cm("b", "after-handover"))], "second");
    let handed = common::eventually(WAIT, || async { holder().await.as_deref() != Some(leader.as_str()) }).await;
    assert!(handed, "lease not taken over: {}", following.log_text());
    let applied =
        common::eventually(WAIT, || async { common::cm_value_or_none(&env.client, &ns, "b").await.is_some() }).await;
    assert!(applied, "the new leader did not apply: {}", following.log_text());
    // The follower applied nothing while the other replica led: it took the Lease after the
    // kill, and its first sync came after that.
    let events = following.events();
    let position = |message: &str| events.iter().position(|e| e["message"] == message);
    let acquired = position("leadership acquired").unwrap_or_else(|| panic!("{}", following.log_text()));
    let at: jiff::Timestamp = events[acquired]["timestamp"].as_str().unwrap().parse().unwrap();
    assert!(at > killed, "the follower took the Lease at {at}, before the leader was killed at {killed}");
    let first_sync = position("sync triggered").unwrap_or_else(|| panic!("{}", following.log_text()));
    assert!(acquired < first_sync, "the follower synced before it led: {}", following.log_text());
}

#[tokio::test]
async fn daemon_survives_an_apiserver_outage_and_converges() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = common::OwnCluster::start(&dir.path().join("cluster"), common::free_port());
    let (kubeconfig, client) = (cluster.kubeconfig(), cluster.admin().await);
    let repo = setup_repo();
    let (config, port) = common::daemon_config(
        dir.path(),
        &format!("[cluster]\nkubeconfig = \"{}\"\n", kubeconfig.display()),
        "",
        &common::unit_toml("app", &repo.bare(), "", "default", ""),
    );
    let mut daemon = common::Daemon::ready(&config, port, WAIT).await;

    let stopped = cluster.stop();
    repo.push(&[("b.yaml", &common::cm("b", "during-outage"))], "pushed while the apiserver is down");
    let reported = |e: &serde_json::Value| e["message"] == "sync failed" || e["message"] == "object failed";
    let failed = common::eventually(WAIT, || async { daemon.events().iter().any(reported) }).await;
    assert!(failed, "the outage was not reported: {}", daemon.log_text());
    daemon.assert_up_but_not_ready();

    let _back = stopped.start();
    // Retries back off (1 s doubling): allow for a few rounds.
    let converged = common::eventually(Duration::from_secs(120), || async {
        common::cm_value_or_none(&client, "default", "b").await.as_deref() == Some("during-outage")
    })
    .await;
    assert!(converged, "did not converge after the apiserver came back: {}", daemon.log_text());
    assert!(daemon.wait_ready(WAIT).await, "{}", daemon.log_text());
}

/// Copies `deploy/kubernetes/` and `deploy/kubernetes-sharded/` into `repo` under `deploy/`,
/// as a user keeps them in git.
fn copy_deploy_files(repo: &common::GitRepo) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["deploy/kubernetes", "deploy/kubernetes-sharded"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let entry = entry.unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            repo.write(&format!("{dir}/{}", entry.file_name().to_str().unwrap()), &text);
        }
    }
}

/// Syncs the kustomization at `path` of `repo` once (rendered by the kustomize scripts/tools
/// builds) and returns the actions by object.
async fn sync_deploy(
    env: &common::TestEnv,
    repo: &common::GitRepo,
    path: &str,
) -> std::collections::BTreeMap<String, String> {
    let state = tempfile::tempdir().unwrap();
    let config = crate::sources::render::config(
        state.path(),
        "",
        &common::unit_toml("gitward", &repo.bare(), path, &env.namespace, "render = \"kustomize\"\n"),
    );
    let mut engine = common::engine(&env.client, &config, "gitward").await;
    let report = engine.sync().await.expect("sync of the install");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    common::actions(&report)
}

/// The two installs the README documents (`kubectl apply -k deploy/kubernetes` and
/// `kubectl apply -k deploy/kubernetes-sharded`), each synced by gitward itself from git.
#[tokio::test]
async fn deploy_kubernetes_manifests_apply_with_gitward_itself() {
    let (env, _, repo) = common::setup_repo("deploy").await;
    copy_deploy_files(&repo);
    repo.commit_and_push("gitward's own in-cluster installs");
    let actions = sync_deploy(&env, &repo, "deploy/kubernetes").await;
    assert!(actions.contains_key("Deployment/gitward-system/gitward"), "{actions:#?}");
    assert!(actions.contains_key("Namespace/gitward-system"), "{actions:#?}");
    assert!(actions.contains_key("ConfigMap/gitward-system/gitward-config"), "{actions:#?}");
    assert!(!actions.contains_key("Role/gitward-system/gitward-sharding"), "{actions:#?}");

    let actions = sync_deploy(&env, &repo, "deploy/kubernetes-sharded").await;
    assert!(actions.contains_key("Deployment/gitward-system/gitward"), "{actions:#?}");
    assert!(actions.contains_key("Role/gitward-system/gitward-sharding"), "{actions:#?}");
    assert!(actions.contains_key("ConfigMap/gitward-system/gitward-config"), "{actions:#?}");
}

/// Runs `kubectl apply ARGS` from the repository root against the empty cluster whose
/// kubeconfig is `kubeconfig`; panics with kubectl's output unless it exits 0.
fn kubectl_apply(kubeconfig: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("kubectl")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("apply")
        .args(args)
        .output()
        .expect("kubectl on PATH (tests/cluster/run puts it there)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "kubectl apply {args:?} failed on an empty cluster:\n{text}");
    text
}

/// The two installs exactly as the README and the kustomizations' headers document them, each
/// one `kubectl apply -k` on a fresh, empty apiserver of its own, with the image set as the
/// README says (`kustomize edit set image`, here by editing a copy's `images:`).
#[tokio::test]
async fn documented_kubectl_installs_succeed_in_one_run_on_an_empty_cluster() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::rbac::v1::Role;
    let copy = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["kubernetes", "kubernetes-sharded"] {
        std::fs::create_dir_all(copy.path().join(dir)).unwrap();
        for entry in std::fs::read_dir(root.join("deploy").join(dir)).unwrap() {
            let entry = entry.unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let text = text.replace(
                "    newName: gitward\n    newTag: 0.1.0\n",
                "    newName: registry.example/gitward\n    newTag: test\n",
            );
            std::fs::write(copy.path().join(dir).join(entry.file_name()), text).unwrap();
        }
    }
    let single = copy.path().join("kubernetes");
    let sharded = copy.path().join("kubernetes-sharded");
    let single: &[&str] = &["-k", single.to_str().unwrap()];
    let sharded: &[&str] = &["-k", sharded.to_str().unwrap()];
    for (install, args) in [("single", single), ("sharded", sharded)] {
        let dir = tempfile::tempdir().unwrap();
        let cluster_dir = dir.path().join("cluster");
        let _cluster = common::OwnCluster::start(&cluster_dir, common::free_port());
        let kubeconfig = cluster_dir.join("kubeconfig");
        let out = kubectl_apply(&kubeconfig, args);
        assert!(out.contains("namespace/gitward-system created"), "{install}: {out}");
        let client = common::OwnCluster::client(&kubeconfig).await;
        let deployment = Api::<Deployment>::namespaced(client.clone(), "gitward-system").get("gitward").await;
        let spec = deployment.unwrap_or_else(|e| panic!("{install}: no Deployment: {e}")).spec.unwrap();
        assert_eq!(spec.replicas, Some(if install == "single" { 2 } else { 3 }), "{install}: {out}");
        let image = spec.template.spec.unwrap().containers[0].image.clone();
        assert_eq!(image.as_deref(), Some("registry.example/gitward:test"), "{install}: {out}");
        let roles = Api::<Role>::namespaced(client, "gitward-system").list(&Default::default()).await.unwrap();
        let sharding_role = roles.items.iter().any(|r| r.metadata.name.as_deref() == Some("gitward-sharding"));
        assert_eq!(sharding_role, install == "sharded", "{install}: {out}");
    }
}

/// Starts the daemon of `config` with `NOTIFY_SOCKET` naming a datagram socket in `dir`, and
/// reads what it sends there until `enough` holds for the messages so far, or no message comes
/// for [`WAIT`]; the daemon and the messages, in order.
async fn notified(
    dir: &Path,
    config: &Path,
    port: u16,
    enough: fn(&[String]) -> bool,
) -> (common::Daemon, Vec<String>) {
    let socket_path = dir.join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(WAIT)).unwrap();
    let daemon = common::Daemon::start(config, port, &[("NOTIFY_SOCKET", socket_path.to_str().unwrap())]);
    let messages = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = socket.recv(&mut buf) {
            seen.push(String::from_utf8_lossy(&buf[..n]).to_string());
            if enough(&seen) {
                break;
            }
        }
        seen
    })
    .await
    .unwrap();
    (daemon, messages)
}

#[tokio::test]
async fn systemd_is_told_ready_after_the_first_sync_with_a_status() {
    let (env, repo) = with_first_commit("notify").await;
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = daemon_config(dir.path(), &repo, &env.namespace, "", "");
    // A unit waiting for its first sync shows as `pending` in an earlier STATUS=.
    let (daemon, messages) = notified(dir.path(), &config, port, |seen| {
        seen.iter().any(|m| m.contains("READY=1")) && seen.iter().any(|m| m.contains("app: synced"))
    })
    .await;
    let ready = messages.iter().position(|m| m.contains("READY=1"));
    assert!(ready.is_some(), "no READY=1 in {messages:?}: {}", daemon.log_text());
    assert!(daemon.events().iter().any(|e| e["message"] == "sync complete"), "READY=1 before the first sync");
    let status = messages.iter().rev().find(|m| m.starts_with("STATUS=")).expect("a STATUS= message");
    assert!(status.contains("app: synced"), "{status}");
    let first = messages.iter().find(|m| m.starts_with("STATUS=")).unwrap();
    assert!(first.contains("app: synced") || first.contains("app: pending"), "{messages:?}");
}

/// gitward's requests in `namespace` on `resource` with `verb`, from the audit log; dry runs
/// (a heal's, for the drift's diff) left out, since they write nothing.
fn gitward_requests(namespace: &str, resource: &str, verb: &str) -> usize {
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| {
            e["userAgent"].as_str().is_some_and(|a| a.starts_with("gitward/"))
                && e["objectRef"]["namespace"] == namespace
                && e["objectRef"]["resource"] == resource
                && e["verb"] == verb
                && !common::is_dry_run(e)
        })
        .count()
}

#[tokio::test]
async fn a_field_fight_with_an_hpa_is_backed_off_heals_only_that_object_and_is_reported_once() {
    use k8s_openapi::api::apps::v1::Deployment;
    let (env, _, repo) = common::setup_repo("fight").await;
    repo.write("a.yaml", &common::cm("a", "1"));
    repo.write("b.yaml", &common::cm("b", "1"));
    repo.write("web.yaml", &common::deployment("web", "registry.k8s.io/pause:3.10", 2));
    repo.commit_and_push("two ConfigMaps and a Deployment with replicas: 2");
    let dir = tempfile::tempdir().unwrap();
    let daemon = app_daemon(dir.path(), &repo, &env.namespace).await;

    // An "HPA": another field manager setting spec.replicas, 100 times over 20 s.
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    let hpa = PatchParams { field_manager: Some("fake-hpa".into()), ..Default::default() };
    let scale = serde_json::json!({"spec": {"replicas": 5}});
    let before = (
        gitward_requests(&env.namespace, "deployments", "patch"),
        gitward_requests(&env.namespace, "configmaps", "patch"),
    );
    for _ in 0..100 {
        deployments.patch("web", &hpa, &Patch::Merge(&scale)).await.expect("hpa writes replicas");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deployment_patches = gitward_requests(&env.namespace, "deployments", "patch") - before.0;
    let configmap_patches = gitward_requests(&env.namespace, "configmaps", "patch") - before.1;
    eprintln!("field fight: {deployment_patches} Deployment patches, {configmap_patches} ConfigMap patches in 20 s");
    // Debounce alone (500 ms) would re-apply ~30 times in 20 s; the per-object backoff
    // (0.5, 1, 2, 4, 8, 16 s) allows at most 6 corrections in that time.
    assert!((1..=8).contains(&deployment_patches), "{deployment_patches} patches of the Deployment in 20 s");
    assert_eq!(configmap_patches, 0, "a drift trigger re-applies only the drifted object");
    let fights: Vec<_> = daemon
        .events()
        .into_iter()
        .filter(|e| e["message"].as_str().is_some_and(|m| m.starts_with("field fight")))
        .collect();
    assert_eq!(fights.len(), 1, "reported once: {fights:#?}");
    assert_eq!(fights[0]["manager"], "fake-hpa");
    assert_eq!(fights[0]["object"], format!("Deployment/{}/web", env.namespace));
}

#[tokio::test]
async fn a_sighup_that_changes_a_unit_syncs_it_once_as_a_reload() {
    let (env, repo) = with_first_commit("reload-once").await;
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = daemon_config(dir.path(), &repo, &env.namespace, "", "");
    let daemon = common::Daemon::start(&config, port, &[]);
    let completed = || daemon.events().iter().filter(|e| e["message"] == "sync complete").count();
    assert!(common::eventually(WAIT, || async { completed() == 1 }).await, "{}", daemon.log_text());

    // The unit's settings change: its task is started again, and that start is the reload's sync.
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "max_prune_fraction = 0.9");
    common::write_daemon_config(&config, port, "", "", &unit);
    daemon.signal("HUP");
    assert!(common::eventually(WAIT, || async { completed() == 2 }).await, "{}", daemon.log_text());
    // A push afterwards: had a second sync been queued by the reload, it would run first.
    repo.push(&[("b.yaml", &common::cm("b", "1"))], "after the reload");
    let pushed = |e: &serde_json::Value| e["message"] == "sync triggered" && e["trigger"] == "push";
    assert!(common::eventually(WAIT, || async { daemon.events().iter().any(pushed) }).await, "{}", daemon.log_text());
    assert!(common::eventually(WAIT, || async { completed() == 3 }).await, "{}", daemon.log_text());
    let triggers: Vec<String> = daemon
        .events()
        .iter()
        .skip_while(|e| e["message"] != "config reloaded")
        .filter(|e| e["message"] == "sync triggered")
        .map(|e| e["trigger"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(triggers, ["reload", "push"], "{}", daemon.log_text());
}

#[tokio::test]
async fn a_daemon_whose_cluster_is_unreachable_does_not_say_it_is_ready() {
    let repo = setup_repo();
    let dir = tempfile::tempdir().unwrap();
    // The test cluster's kubeconfig, pointed at a port nothing listens on.
    let mut kubeconfig = kube::config::Kubeconfig::read_from(std::env::var("KUBECONFIG").expect("KUBECONFIG")).unwrap();
    let dead = common::free_port();
    for c in kubeconfig.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        c.server = Some(format!("https://127.0.0.1:{dead}"));
    }
    let kubeconfig_path = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig_path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
    let (config, port) = common::daemon_config(
        dir.path(),
        &format!("[cluster]\nkubeconfig = \"{}\"\n", kubeconfig_path.display()),
        "",
        &common::unit_toml("app", &repo.bare(), "", "default", ""),
    );
    // STATUS= saying the unit failed comes from the same tick that decides READY=1, after it.
    let (daemon, messages) = notified(dir.path(), &config, port, |seen| {
        seen.iter().any(|m| m.starts_with("STATUS=") && m.contains("app: failed"))
    })
    .await;
    assert!(
        messages.iter().any(|m| m.contains("app: failed")),
        "no failed STATUS= in {messages:?}: {}",
        daemon.log_text()
    );
    assert!(!messages.iter().any(|m| m.contains("READY=1")), "READY=1 with every sync failed: {messages:?}");
    assert!(daemon.events().iter().any(|e| e["message"] == "sync failed"), "{}", daemon.log_text());
    assert!(
        !daemon.events().iter().any(|e| e["message"].as_str().is_some_and(|m| m.starts_with("ready:"))),
        "{}",
        daemon.log_text()
    );
    assert_eq!(daemon.get("/readyz").map(|(s, _)| s), Some(503));
}
