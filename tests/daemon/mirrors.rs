//! Units that follow one repository share its mirror: one bare mirror under
//! `state_dir/mirrors/` per repository URL and credentials, one fetch per push, each unit
//! applying only its own path. Counted from the daemon's `gitward_git_fetches_total` and the
//! state directory; the cluster state is read back.

use crate::common;

use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The webhook secret of these tests.
const SECRET: &str = "mirrors-webhook-secret";

/// The units of these tests: `a`, `b`, `c` (no credentials) and `d` (a token file) over one
/// repository, each at its own directory holding one ConfigMap named after it.
const UNITS: [&str; 4] = ["a", "b", "c", "d"];

/// Whether every unit's ConfigMap holds `expected`.
async fn all_hold(client: &kube::Client, ns: &str, expected: &str) -> bool {
    for unit in UNITS {
        if common::cm_value_or_none(client, ns, &format!("{unit}-cm")).await.as_deref() != Some(expected) {
            return false;
        }
    }
    true
}

fn write_paths(repo: &common::GitRepo, value: &str) {
    for unit in UNITS {
        repo.write(&format!("{unit}/cm.yaml"), &common::cm(&format!("{unit}-cm"), value));
    }
}

/// Starts a daemon of `units` in `dir` that takes webhooks signed with [`SECRET`], and waits
/// until each unit's ConfigMap holds `1`; returns it and its port.
async fn start_with_webhooks(dir: &std::path::Path, env: &common::TestEnv, units: &str) -> (common::Daemon, u16) {
    std::fs::write(dir.join("webhook-secret"), SECRET).unwrap();
    let (config, port) = common::daemon_config(dir, "", "webhook_secret_file = \"webhook-secret\"", units);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    assert!(all_hold(&env.client, &env.namespace, "1").await, "first sync: {}", daemon.log_text());
    (daemon, port)
}

/// Three units of one URL without credentials and a fourth with a token file: two mirrors on
/// disk; the first fetch of each fills it (two `updated` fetches for four units), and one push
/// that changes every unit's path is fetched once per mirror, not once per unit; so is a
/// webhook to all four. Each unit records only the object of its own path.
#[tokio::test]
async fn units_of_one_repository_share_one_mirror_and_one_fetch_per_push() {
    let (env, _, repo) = common::setup_repo("mirrors-shared").await;
    write_paths(&repo, "1");
    repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "not-asked-by-a-local-remote\n").unwrap();
    let units: String = UNITS
        .iter()
        .map(|unit| {
            let extra = match *unit {
                "d" => format!("[sync.git]\ntoken_file = \"{}\"\n", token.display()),
                _ => String::new(),
            };
            common::unit_toml(unit, &repo.bare(), unit, &env.namespace, &extra)
        })
        .collect();
    let (daemon, port) = start_with_webhooks(dir.path(), &env, &units).await;

    let mirrors: Vec<String> = std::fs::read_dir(dir.path().join("state/mirrors"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(mirrors.len(), 2, "one mirror per URL and credentials: {mirrors:?}");
    for unit in UNITS {
        assert!(!mirrors.contains(&unit.to_string()), "no per-unit mirror: {mirrors:?}");
        let tracked = daemon.metric_sum("gitward_tracked_objects", &[&format!("unit=\"{unit}\"")]);
        assert_eq!(tracked, 1.0, "unit {unit} records only its path's object");
    }
    let updated = || daemon.metric_sum("gitward_git_fetches_total", &["result=\"updated\""]);
    assert_eq!(updated(), 2.0, "each mirror filled once: {}", daemon.get("/metrics").unwrap().1);

    write_paths(&repo, "2");
    repo.commit_and_push("second");
    let applied = common::eventually(WAIT, || all_hold(&env.client, &env.namespace, "2")).await;
    assert!(applied, "push not applied by every unit: {}", daemon.log_text());
    assert_eq!(updated(), 4.0, "one fetch per mirror brought the push: {}", daemon.get("/metrics").unwrap().1);

    // A webhook asks every unit at one instant: each mirror is fetched once for all its units.
    let fetches = || daemon.metric_sum("gitward_git_fetches_total", &[]);
    let (before, completed) = (fetches(), daemon.logged("sync complete").len());
    let body = br#"{"ref": "refs/heads/main"}"#;
    let (status, reply) = common::signed_webhook(port, SECRET, body);
    assert_eq!(status, 202, "{reply}");
    let synced =
        common::eventually(WAIT, || async { daemon.logged("sync complete").len() >= completed + UNITS.len() }).await;
    assert!(synced, "every unit syncs for the webhook: {}", daemon.log_text());
    assert_eq!(fetches() - before, 2.0, "one fetch per mirror for four units: {}", daemon.log_text());
}

/// A push that changes one unit's path of a shared repository: that unit's sync takes the
/// push lane; the others learn from the mirror's one fetch and tree diff that nothing of theirs
/// changed, as at 1,000 units the one changed unit must not queue behind 999 unchanged ones.
/// The plain units `a` and `d`, whose last sync read their path alone, take the new revision
/// without a sync (`path unchanged, nothing to sync`), answered by the repository's watch without
/// waking their tasks, and send no request; `c`, a kustomize
/// unit (which may read outside its path), waits for a slot (`push_lane = false`) and syncs.
#[tokio::test]
async fn a_push_takes_the_lane_only_for_the_units_whose_path_it_changed() {
    let (env, _, repo) = common::setup_repo("mirrors-lane").await;
    write_paths(&repo, "1");
    let first = repo.push(&[("c/kustomization.yaml", "resources:\n- cm.yaml\n")], "first");
    let dir = tempfile::tempdir().unwrap();
    let units: String =
        UNITS.iter().map(|unit| common::unit_toml(unit, &repo.bare(), unit, &env.namespace, "")).collect();
    let kustomize = crate::sources::render::tools_bin().join("kustomize");
    let render = format!("[render]\nkustomize = \"{}\"\n", kustomize.display());
    let (config, port) = common::daemon_config(dir.path(), &render, "", &units);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let completed = |unit: &str| daemon.logged("sync complete").iter().filter(|e| e["unit"] == unit).count();
    let before: Vec<usize> = UNITS.iter().map(|u| completed(u)).collect();

    let revision = repo.push(&[("b/cm.yaml", &common::cm("b-cm", "2"))], "b only");
    let applied = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &env.namespace, "b-cm").await.as_deref() == Some("2")
    })
    .await;
    assert!(applied, "push not applied: {}", daemon.log_text());
    let triggered = || -> Vec<(String, bool)> {
        let mut seen: Vec<(String, bool)> = daemon
            .logged("sync triggered")
            .into_iter()
            .filter(|e| e["trigger"] == "push" && e["revision"] == revision.as_str())
            .map(|e| (e["unit"].as_str().unwrap_or_default().to_owned(), e["push_lane"] == true))
            .collect();
        seen.sort();
        seen
    };
    let unchanged = || -> Vec<String> {
        let mut seen: Vec<String> = daemon
            .logged("path unchanged, nothing to sync")
            .into_iter()
            .filter(|e| e["revision"] == revision.as_str() && e["from"] == first.as_str())
            .map(|e| e["unit"].as_str().unwrap_or_default().to_owned())
            .collect();
        seen.sort();
        seen
    };
    let all = common::eventually(WAIT, || async { triggered().len() == 2 && unchanged().len() == 2 }).await;
    assert!(
        all,
        "b and c sync the new revision, a and d take it: {:?} {:?}\n{}",
        triggered(),
        unchanged(),
        daemon.log_text()
    );
    assert_eq!(triggered(), vec![("b".to_owned(), true), ("c".to_owned(), false)], "{}", daemon.log_text());
    assert_eq!(unchanged(), vec!["a".to_owned(), "d".to_owned()], "{}", daemon.log_text());
    // The watch answered the push for the three plain units resting (a, b, d) and woke b alone.
    let handed = daemon.logged("push handed to the units resting under the path-unchanged rule");
    assert!(handed.iter().any(|e| e["resting"] == 3 && e["woken"] == 1), "{handed:?}\n{}", daemon.log_text());
    let synced = common::eventually(WAIT, || async { completed("c") > before[2] }).await;
    assert!(synced, "the kustomize unit did not sync: {}", daemon.log_text());
    let after: Vec<usize> = UNITS.iter().map(|u| completed(u)).collect();
    assert_eq!((after[0], after[3]), (before[0], before[3]), "a or d synced: {}", daemon.log_text());
    for unit in ["a", "c", "d"] {
        assert_eq!(
            common::cm_value_or_none(&env.client, &env.namespace, &format!("{unit}-cm")).await.as_deref(),
            Some("1")
        );
    }

    // The next push to `a`'s path is told from the revision `a` took: it takes the lane.
    let third = repo.push(&[("a/cm.yaml", &common::cm("a-cm", "3"))], "a only");
    let applied = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &env.namespace, "a-cm").await.as_deref() == Some("3")
    })
    .await;
    assert!(applied, "the push to a's path not applied: {}", daemon.log_text());
    let lane = daemon
        .logged("sync triggered")
        .into_iter()
        .any(|e| e["unit"] == "a" && e["revision"] == third.as_str() && e["push_lane"] == true);
    assert!(lane, "a's push did not take the lane: {}", daemon.log_text());
}

/// A webhook for a push that changed one unit's path, on a network remote (`git daemon`, so no
/// watch of the repository's refs sees the push first): the four plain units rest under the
/// path-unchanged rule, the webhook's one fetch answers for all of them, and only `b`, whose
/// path changed, wakes and syncs; `a`, `c` and `d` take the revision without a sync. The
/// webhook's reply still names all four.
#[tokio::test]
async fn a_webhook_wakes_only_the_resting_units_whose_path_its_push_changed() {
    let (env, _, repo) = common::setup_repo("mirrors-webhook").await;
    write_paths(&repo, "1");
    let first = repo.commit_and_push("first");
    let git_daemon = common::git_remote::GitDaemon::serve(repo.bare().parent().unwrap());
    let url = format!("git://127.0.0.1:{}/remote.git", git_daemon.port);
    let dir = tempfile::tempdir().unwrap();
    let units: String = UNITS
        .iter()
        .map(|unit| common::unit_toml(unit, std::path::Path::new(&url), unit, &env.namespace, ""))
        .collect();
    let (daemon, port) = start_with_webhooks(dir.path(), &env, &units).await;
    let completed = |unit: &str| daemon.logged("sync complete").iter().filter(|e| e["unit"] == unit).count();
    let before: Vec<usize> = UNITS.iter().map(|u| completed(u)).collect();

    let revision = repo.push(&[("b/cm.yaml", &common::cm("b-cm", "2"))], "b only");
    let body = format!(r#"{{"ref": "refs/heads/main", "repository": {{"clone_url": "{url}"}}}}"#);
    let (status, reply) = common::signed_webhook(port, SECRET, body.as_bytes());
    assert_eq!((status, reply.as_str()), (202, r#"{"units":["a","b","c","d"]}"#));
    let applied = common::eventually(WAIT, || async {
        common::cm_value_or_none(&env.client, &env.namespace, "b-cm").await.as_deref() == Some("2")
    })
    .await;
    assert!(applied, "the webhook's push not applied: {}", daemon.log_text());
    let unchanged = || -> Vec<String> {
        let mut seen: Vec<String> = daemon
            .logged("path unchanged, nothing to sync")
            .into_iter()
            .filter(|e| e["trigger"] == "webhook" && e["revision"] == revision.as_str() && e["from"] == first.as_str())
            .map(|e| e["unit"].as_str().unwrap_or_default().to_owned())
            .collect();
        seen.sort();
        seen
    };
    let taken = common::eventually(WAIT, || async { unchanged().len() == 3 }).await;
    assert!(taken, "a, c and d take the revision: {:?}\n{}", unchanged(), daemon.log_text());
    assert_eq!(unchanged(), ["a", "c", "d"]);
    let handed = daemon.logged("push handed to the units resting under the path-unchanged rule");
    assert!(handed.iter().any(|e| e["resting"] == 4 && e["woken"] == 1), "{handed:?}\n{}", daemon.log_text());
    let synced = common::eventually(WAIT, || async { completed("b") > before[1] }).await;
    assert!(synced, "b did not sync: {}", daemon.log_text());
    let after: Vec<usize> = UNITS.iter().map(|u| completed(u)).collect();
    assert_eq!((after[0], after[2], after[3]), (before[0], before[2], before[3]), "{}", daemon.log_text());
}

/// Twenty plain units of one local repository, a push that changes two units' paths, and then
/// that push's signed webhook naming its commit (`after`), as a forge sends it after the push:
/// the ref watch has already handed the push out (the two synced it, the eighteen took it
/// without a sync), so the webhook syncs no unit again. Before, it re-sent all twenty (the 18
/// found the revision taken and synced it all the same; the 2 synced the push a second time).
#[tokio::test]
async fn the_webhook_of_a_push_the_watch_brought_syncs_no_unit_again() {
    let (env, _, repo) = common::setup_repo("mirrors-hooked").await;
    let names: Vec<String> = (0..20).map(|i| format!("u{i:02}")).collect();
    for unit in &names {
        repo.write(&format!("{unit}/cm.yaml"), &common::cm(&format!("{unit}-cm"), "1"));
    }
    repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("webhook-secret"), SECRET).unwrap();
    let units: String = names.iter().map(|u| common::unit_toml(u, &repo.bare(), u, &env.namespace, "")).collect();
    let (config, port) = common::daemon_config(dir.path(), "", "webhook_secret_file = \"webhook-secret\"", &units);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let value = |unit: &str| {
        let (client, ns, name) = (env.client.clone(), env.namespace.clone(), format!("{unit}-cm"));
        async move { common::cm_value_or_none(&client, &ns, &name).await }
    };
    // The events `message` logged for `revision`, per unit, keeping those `keep` accepts.
    let per_unit = |message: &str, revision: &str, keep: &dyn Fn(&serde_json::Value) -> bool| {
        let mut seen = std::collections::BTreeMap::<String, usize>::new();
        for e in daemon.logged(message).iter().filter(|e| e["revision"] == revision && keep(e)) {
            *seen.entry(e["unit"].as_str().unwrap_or_default().to_owned()).or_default() += 1;
        }
        seen
    };
    let changed = ["u03", "u11"];
    let revision = repo.push(
        &[("u03/cm.yaml", &common::cm("u03-cm", "2")), ("u11/cm.yaml", &common::cm("u11-cm", "2"))],
        "u03 and u11",
    );
    let handled = common::eventually(WAIT, || async {
        let synced = per_unit("sync complete", &revision, &|_| true).len() == 2;
        synced && per_unit("path unchanged, nothing to sync", &revision, &|_| true).len() == 18
    })
    .await;
    assert!(handled, "the watch's push not handed out: {}", daemon.log_text());
    for unit in changed {
        assert_eq!(value(unit).await.as_deref(), Some("2"), "{unit}: {}", daemon.log_text());
    }
    // Let the two changed units' health waits end: the webhook then finds every unit resting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let triggered_before = per_unit("sync triggered", &revision, &|_| true);
    let completed = |unit: &str| daemon.logged("sync complete").iter().filter(|e| e["unit"] == unit).count();
    let before: Vec<usize> = names.iter().map(|u| completed(u)).collect();

    let body = format!(r#"{{"ref": "refs/heads/main", "after": "{revision}"}}"#);
    let (status, reply) = common::signed_webhook(port, SECRET, body.as_bytes());
    assert_eq!(status, 202, "{reply}");
    assert!(names.iter().all(|u| reply.contains(u.as_str())), "every unit follows main: {reply}");
    // Each unit answers the webhook: `no new revision` (asleep, or woken and probed), or a sync.
    let webhook = |e: &serde_json::Value| e["trigger"] == "webhook";
    let answered = || {
        let mut units = per_unit("no new revision", &revision, &webhook);
        units.extend(per_unit("sync triggered", &revision, &webhook));
        units
    };
    let all = common::eventually(WAIT, || async { answered().len() == names.len() }).await;
    assert!(all, "not every unit answered the webhook: {:?}\n{}", answered(), daemon.log_text());
    tokio::time::sleep(Duration::from_secs(2)).await;

    let resynced = per_unit("sync triggered", &revision, &webhook);
    assert!(resynced.is_empty(), "the webhook re-synced {resynced:?}: {}", daemon.log_text());
    let triggered = per_unit("sync triggered", &revision, &|_| true);
    assert_eq!(triggered, triggered_before, "{}", daemon.log_text());
    let once: Vec<(String, usize)> = changed.iter().map(|u| (u.to_string(), 1)).collect();
    assert_eq!(triggered.into_iter().collect::<Vec<_>>(), once, "the two changed units synced the push once");
    let after: Vec<usize> = names.iter().map(|u| completed(u)).collect();
    assert_eq!(after, before, "no unit completed a sync for the webhook: {}", daemon.log_text());
    for unit in &names {
        let want = if changed.contains(&unit.as_str()) { "2" } else { "1" };
        assert_eq!(value(unit).await.as_deref(), Some(want), "{unit}");
    }
}
