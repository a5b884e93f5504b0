//! `depends_on` against the real apiserver and real bare repositories: unit `app` depends on
//! unit `base`, whose Deployment stays progressing until the deployment controller rolls it
//! out (its Pod is ready 25 s after it is made: `gitward.test/ready-after`,
//! tests/cluster/stages.yaml). `app` must not be applied
//! while `base` is progressing — asserted after the daemon logged that `app` judged `base`'s
//! record of the wait and is still waiting — and is applied once `base` records `healthy`;
//! also under sharding with `base` and `app` on two replicas, with a `ready_expr`, and the
//! one-shot `gitward sync`'s refusal (exit 3) and a cycle's config error (exit 2); and a push
//! that changes only the dependent unit's path, applied without waiting for the dependency;
//! and a dependency on a unit a `[[sync_set]]` makes.

use crate::common;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);
const CLI: Duration = Duration::from_secs(180);

/// A repository with `base/web.yaml` (a Deployment the deployment controller rolls out 25 s
/// after it is made: its Pod's `gitward.test/ready-after`) and `app/a.yaml` (ConfigMap `a`).
fn repo() -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.write("base/web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "25s"));
    repo.push(&[("app/a.yaml", &common::cm("a", "one"))], "base and app");
    repo
}

/// The `[[sync]]` tables of `base` and of `app` with `depends_on` (a TOML array).
fn units(repo: &common::GitRepo, ns: &str, depends_on: &str) -> String {
    let base = common::unit_toml("base", &repo.bare(), "base", ns, "health_timeout = \"10m\"");
    let app = common::unit_toml("app", &repo.bare(), "app", ns, &format!("depends_on = {depends_on}"));
    base + &app
}

async fn applied(client: &kube::Client, ns: &str) -> bool {
    Api::<ConfigMap>::namespaced(client.clone(), ns).get_opt("a").await.unwrap().is_some()
}

/// The `waiting for dependencies` events of `app` in `events`.
fn waits(events: &[Value]) -> Vec<Value> {
    events.iter().filter(|e| e["message"] == "waiting for dependencies" && e["unit"] == "app").cloned().collect()
}

/// Waits until `daemon` logged that `app` waits for `base` because `base` records its health
/// wait: `app` judged `base`'s record after `base` applied, and was not applied.
async fn waits_for_base_health(daemon: &common::Daemon) {
    let seen = common::eventually(WAIT, || async {
        waits(&daemon.events()).iter().any(|e| {
            e["dependencies"] == "base"
                && e["waiting_for"]
                    .as_str()
                    .is_some_and(|w| w.starts_with("base: not healthy (waiting for Deployment/"))
        })
    })
    .await;
    assert!(seen, "app did not log its wait for base's health: {}", daemon.log_text());
}

#[tokio::test]
async fn a_unit_waits_for_its_dependency_to_be_healthy_and_syncs_once_it_is() {
    let (env, ns) = common::setup_ns("depends").await;
    let repo = repo();
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::daemon_config(dir.path(), "", "", &units(&repo, &ns, "[\"base\"]"));
    let daemon = common::Daemon::start(&config, port, &[]);
    waits_for_base_health(&daemon).await;
    assert!(!applied(&env.client, &ns).await, "app applied while base progresses: {}", daemon.log_text());
    assert!(daemon.wait_ready(WAIT).await, "a unit waiting for its dependencies leaves the daemon ready");
    assert_eq!(daemon.metric_sum("gitward_unit_waiting_for_dependencies", &["unit=\"app\""]), 1.0);

    let status = common::gitward(&["status", "--sync", "app"], &config, CLI);
    assert!(
        status.stdout.contains("; waiting for dependencies: base: not healthy (waiting for Deployment/"),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("  depends    base: not healthy"), "{}", status.stdout);
    let status = common::gitward(&["status", "--sync", "app", "-o", "json"], &config, CLI);
    let json: Value = serde_json::from_str(&status.stdout).expect("status JSON");
    assert_eq!(json["units"][0]["dependencies"][0]["unit"], "base", "{json}");
    assert_eq!(json["units"][0]["dependencies"][0]["ready"], false, "{json}");

    let sync = common::gitward(&["sync", "--sync", "app"], &config, CLI);
    assert_eq!(sync.code, Some(3), "{}\n{}", sync.stdout, sync.stderr);
    assert!(sync.stdout.starts_with("app: not synced: waiting for dependencies: base: not healthy"), "{}", sync.stdout);
    assert!(!applied(&env.client, &ns).await, "gitward sync applied app: {}", sync.stderr);

    common::rolled_out(&env.client, &ns).await;
    let synced = common::eventually(WAIT, || applied(&env.client, &ns)).await;
    assert!(synced, "app not applied after base became healthy: {}", daemon.log_text());
    let ready = daemon.events().iter().any(|e| e["message"] == "dependencies ready" && e["unit"] == "app");
    assert!(ready, "{}", daemon.log_text());
    assert_eq!(daemon.metric_sum("gitward_unit_waiting_for_dependencies", &["unit=\"app\""]), 0.0);
    let status = common::gitward(&["status", "--sync", "app", "-o", "json"], &config, CLI);
    let json: Value = serde_json::from_str(&status.stdout).expect("status JSON");
    assert_eq!(json["units"][0]["dependencies"][0]["ready"], true, "{json}");
}

#[tokio::test]
async fn ignore_dependencies_syncs_anyway_and_a_ready_expr_decides_instead_of_health() {
    let (env, ns) = common::setup_ns("depends-expr").await;
    let repo = repo();
    repo.push(&[("late/b.yaml", &common::cm("b", "one"))], "late");
    let dir = tempfile::tempdir().unwrap();
    // app is ready once base's wait is recorded for web; late wants a failure that never comes.
    let expr = "[{ unit = \"base\", ready_expr = \"status.waiting && status.waiting_for.contains('web')\" }]";
    let late = common::unit_toml(
        "late",
        &repo.bare(),
        "late",
        &ns,
        "depends_on = [{ unit = \"base\", ready_expr = \"status.failed > 0\" }]",
    );
    let (config, port) = common::daemon_config(dir.path(), "", "", &(units(&repo, &ns, expr) + &late));

    // Before anything synced base: the one-shot sync refuses, unless told to ignore it.
    let sync = common::gitward(&["sync", "--sync", "app"], &config, CLI);
    assert_eq!(sync.code, Some(3), "{}\n{}", sync.stdout, sync.stderr);
    assert!(sync.stdout.contains("base: not yet synced"), "{}", sync.stdout);
    let sync = common::gitward(&["sync", "--sync", "late", "--ignore-dependencies"], &config, CLI);
    assert_eq!(sync.code, Some(0), "{}\n{}", sync.stdout, sync.stderr);
    let late_cm = Api::<ConfigMap>::namespaced(env.client.clone(), &ns);
    assert!(late_cm.get_opt("b").await.unwrap().is_some(), "--ignore-dependencies applied nothing");
    late_cm.delete("b", &Default::default()).await.unwrap();

    let daemon = common::Daemon::start(&config, port, &[]);
    let synced = common::eventually(WAIT, || applied(&env.client, &ns)).await;
    assert!(synced, "app not applied though its ready_expr holds: {}", daemon.log_text());
    let late_waits = common::eventually(WAIT, || async {
        daemon.events().iter().any(|e| {
            e["message"] == "waiting for dependencies"
                && e["unit"] == "late"
                && e["waiting_for"] == "base: ready_expr false"
        })
    })
    .await;
    assert!(late_waits, "late did not log its ready_expr false: {}", daemon.log_text());
    assert!(late_cm.get_opt("b").await.unwrap().is_none(), "late applied though its ready_expr is false");
}

/// `gitward status --sync <unit> -o json`'s entry of `unit`.
fn status_of(config: &Path, unit: &str) -> Value {
    let status = common::gitward(&["status", "--sync", unit, "-o", "json"], config, CLI);
    let json: Value = serde_json::from_str(&status.stdout).expect("status JSON");
    json["units"][0].clone()
}

/// `base` and `app` follow one repository and ref, `app` depends on `base`. A push that
/// changes only `app`'s path leaves `base` resting (its path is the same tree, so it is not
/// synced again and records the revision before the push): `app`'s objects of the push are
/// applied within seconds, not at `base`'s next resync (an hour here), while `base`'s record
/// still names the revision it applied.
#[tokio::test]
async fn a_push_to_the_dependent_path_alone_is_applied_at_once() {
    let (env, ns, repo) = common::setup_repo("depends-path").await;
    repo.write("base/base.yaml", &common::cm("base", "one"));
    let first = repo.push(&[("app/a.yaml", &common::cm("a", "one"))], "base and app");
    let units = common::unit_toml("base", &repo.bare(), "base", &ns, "")
        + &common::unit_toml("app", &repo.bare(), "app", &ns, "depends_on = [\"base\"]");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::daemon_config(dir.path(), "", "", &units);
    let daemon = common::Daemon::start(&config, port, &[]);
    let synced = common::eventually(WAIT, || async {
        common::cm_value(&env.client, &ns, "a").await.as_deref() == Some("one")
            && daemon.logged("sync complete").iter().filter(|e| e["revision"] == first.as_str()).count() == 2
    })
    .await;
    assert!(synced, "the first revision was not synced: {}", daemon.log_text());
    assert_eq!(status_of(&config, "base")["last"]["result"], "healthy");

    let second = repo.push(&[("app/a.yaml", &common::cm("a", "two"))], "app alone");
    let applied = common::eventually(Duration::from_secs(15), || async {
        common::cm_value(&env.client, &ns, "a").await.as_deref() == Some("two")
    })
    .await;
    assert!(applied, "app's push waited for base: {}", daemon.log_text());
    let waited = daemon.logged("waiting for dependencies").iter().any(|e| e["revision"] == second.as_str());
    assert!(!waited, "app waited for base at the push: {}", daemon.log_text());
    let base = status_of(&config, "base");
    assert_eq!(base["last"]["revision"], first.as_str(), "base applied nothing of the push: {base}");
    let app =
        common::eventually(WAIT, || async { status_of(&config, "app")["last"]["revision"] == second.as_str() }).await;
    assert!(app, "{}", status_of(&config, "app"));
    assert_eq!(status_of(&config, "app")["dependencies"][0]["ready"], true);
}

/// `app`, a `[[sync]]` unit, depends on `apps-base`, a unit the set over `apps/*` makes of
/// `apps/base` (Deployment `web`): the config loads, `app` waits while `web` progresses, and
/// is applied once it rolled out.
#[tokio::test]
async fn a_unit_waits_for_a_unit_a_sync_set_makes() {
    let (env, ns, repo) = common::setup_repo("depends-set").await;
    // Rolled out by the deployment controller 10 s after it is made.
    repo.write("apps/base/web.yaml", &common::deployment_with("web", "nginx:1.27", 1, 600, "10s"));
    repo.push(&[("app/a.yaml", &common::cm("a", "one"))], "a set's directory and a unit");
    let set = format!(
        "[[sync_set]]\nname = \"apps-{{dir}}\"\nrepo = \"{}\"\npath_glob = \"apps/*\"\nnamespace = \"{ns}\"\n\
         health_timeout = \"10m\"\n",
        repo.bare().display()
    );
    let app = common::unit_toml("app", &repo.bare(), "app", &ns, "depends_on = [\"apps-base\"]");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) = common::daemon_config(dir.path(), "", "", &(app + &set));
    let daemon = common::Daemon::start(&config, port, &[]);
    let waited = common::eventually(WAIT, || async {
        waits(&daemon.events()).iter().any(|e| {
            e["dependencies"] == "apps-base"
                && e["waiting_for"].as_str().is_some_and(|w| w.starts_with("apps-base: not healthy"))
        })
    })
    .await;
    assert!(waited, "app did not wait for apps-base's health: {}", daemon.log_text());
    assert!(!applied(&env.client, &ns).await, "app applied while apps-base progresses: {}", daemon.log_text());
    assert_eq!(status_of(&config, "app")["dependencies"][0]["unit"], "apps-base");

    common::rolled_out(&env.client, &ns).await;
    let synced = common::eventually(WAIT, || applied(&env.client, &ns)).await;
    assert!(synced, "app not applied after apps-base became healthy: {}", daemon.log_text());
}

#[test]
fn a_depends_on_cycle_is_a_config_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new("/nonexistent/repo.git");
    let units = [
        common::unit_toml("a", repo, "a", "default", "depends_on = [\"b\"]"),
        common::unit_toml("b", repo, "b", "default", "depends_on = [\"a\"]"),
    ]
    .concat();
    let (config, _) = common::daemon_config(dir.path(), "", "", &units);
    for args in [&["validate"][..], &["sync"], &["run"]] {
        let run = common::gitward(args, &config, CLI);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("depends_on cycle: a -> b -> a"), "{args:?}: {}", run.stderr);
    }
}

/// A sharded replica's config: `units`, sharded as `identity` in `ns`; returns path and port.
fn replica(dir: &Path, identity: &str, ns: &str, units: &str) -> (std::path::PathBuf, u16) {
    let port = common::free_port();
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG (run under tests/cluster/run)");
    let text = format!(
        "[cluster]\nkubeconfig = \"{kubeconfig}\"\n\n[daemon]\nstate_dir = \"state-{identity}\"\n\
         listen = \"127.0.0.1:{port}\"\ninterval = \"1h\"\nresync_interval = \"1h\"\n\n\
         [daemon.sharding]\nnamespace = \"{ns}\"\nlease_duration = \"20s\"\nidentity = \"{identity}\"\n\n{units}"
    );
    let path = dir.join(format!("{identity}.toml"));
    std::fs::write(&path, text).unwrap();
    (path, port)
}

#[tokio::test]
async fn under_sharding_a_unit_waits_for_its_dependency_on_another_replica() {
    use gitward::lease::assignment::unit_owner;
    let (env, ns) = common::setup_ns("depends-shard").await;
    let repo = repo();
    let dir = tempfile::tempdir().unwrap();
    // Two identities that the rendezvous gives one unit each: app reads base's record as
    // another replica wrote it.
    let (one, two) = (0..100)
        .map(|i| (format!("dep-{i}-a"), format!("dep-{i}-b")))
        .find(|(a, b)| {
            let owner = |unit| unit_owner(unit, [a.as_str(), b.as_str()]).map(str::to_owned);
            owner("app").is_some() && owner("app") != owner("base")
        })
        .expect("a pair of identities splitting the two units");
    let units = units(&repo, &ns, "[\"base\"]");
    let (config_one, port_one) = replica(dir.path(), &one, &ns, &units);
    let (config_two, port_two) = replica(dir.path(), &two, &ns, &units);
    let daemons =
        [common::Daemon::start(&config_one, port_one, &[]), common::Daemon::start(&config_two, port_two, &[])];
    let app_owner = if unit_owner("app", [one.as_str(), two.as_str()]) == Some(one.as_str()) { 0 } else { 1 };
    let logs = || daemons.iter().map(|d| d.log_text()).collect::<Vec<_>>().join("\n---\n");
    waits_for_base_health(&daemons[app_owner]).await;
    let base_synced =
        daemons[1 - app_owner].events().iter().any(|e| e["message"] == "sync triggered" && e["unit"] == "base");
    assert!(base_synced, "base ran on the replica that does not run app: {}", logs());
    assert!(!applied(&env.client, &ns).await, "app applied while base progresses: {}", logs());

    common::rolled_out(&env.client, &ns).await;
    let synced = common::eventually(WAIT, || applied(&env.client, &ns)).await;
    assert!(synced, "app not applied after base became healthy: {}", logs());
    assert!(waits(&daemons[1 - app_owner].events()).is_empty(), "app ran on both replicas: {}", logs());
}
