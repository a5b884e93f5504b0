//! Sharding and many clusters with real `gitward run` processes, real bare
//! repositories and the real apiserver. Who applied what is read from the apiserver's audit
//! log (each sharded replica sends `gitward/<version> (<identity>)` as its User-Agent), never
//! from gitward's own logs or metrics; the metrics are used only to know when to look.
//!
//! Run: `scripts/test --test integration sharding::`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use gitward::lease::shard;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use serde_json::Value;

/// The failover bound configured in the test: short, so the test is quick.
const LEASE: Duration = Duration::from_secs(20);
/// Every owner re-applies its units this often, so that a handover happens while the old
/// owner is writing and an overlap would show in the audit log.
const RESYNC: Duration = Duration::from_secs(3);
/// Units in the sharding test.
const UNITS: usize = 30;
/// Liveness bound for anything that must eventually happen.
const WAIT: Duration = Duration::from_secs(120);

/// `n` bare repositories, the `i`-th holding the ConfigMap `cm-<i>` with value `1`.
fn cm_repos(n: usize) -> Vec<common::GitRepo> {
    (0..n)
        .map(|i| {
            let repo = common::GitRepo::new();
            repo.push(&[("cm.yaml", &common::cm(&format!("cm-{i}"), "1"))], "first");
            repo
        })
        .collect()
}

fn unit_name(i: usize) -> String {
    format!("app-{i}")
}

/// The `[cluster]` and `[daemon]` tables of replica `identity` (its Leases in `lease_ns`, in
/// `group` if any), listening on `port`; units follow.
fn replica_header(identity: &str, lease_ns: &str, group: Option<&str>, port: u16) -> String {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG (run under tests/cluster/run)");
    let group = group.map(|g| format!("group = \"{g}\"\n")).unwrap_or_default();
    format!(
        "[cluster]\nkubeconfig = \"{kubeconfig}\"\n\n[daemon]\nstate_dir = \"state-{identity}\"\n\
         listen = \"127.0.0.1:{port}\"\ninterval = \"1h\"\nresync_interval = \"{}s\"\n\n\
         [daemon.sharding]\nnamespace = \"{lease_ns}\"\nlease_duration = \"{}s\"\nidentity = \"{identity}\"\n{group}\n",
        RESYNC.as_secs(),
        LEASE.as_secs()
    )
}

/// A replica's config: every unit (`app-<i>` of `repos[i]`, applied into `objects_ns`),
/// written to `dir/<identity>.toml`; returns its path and port.
fn replica_file(
    dir: &Path,
    identity: &str,
    group: Option<&str>,
    lease_ns: &str,
    objects_ns: &str,
    repos: &[common::GitRepo],
) -> (std::path::PathBuf, u16) {
    let port = common::free_port();
    let mut text = replica_header(identity, lease_ns, group, port);
    for (i, repo) in repos.iter().enumerate() {
        text.push_str(&common::unit_toml(&unit_name(i), &repo.bare(), "", objects_ns, "health_timeout = \"0s\""));
    }
    let path = dir.join(format!("{identity}.toml"));
    std::fs::write(&path, text).unwrap();
    (path, port)
}

/// A replica's config: every unit, sharded in `namespace` as `identity`.
fn replica_config(dir: &Path, identity: &str, namespace: &str, repos: &[common::GitRepo]) -> (std::path::PathBuf, u16) {
    replica_file(dir, identity, None, namespace, namespace, repos)
}

/// The User-Agent replica `identity` sends.
fn agent(identity: &str) -> String {
    shard::user_agent(identity)
}

/// Writes (create, update, patch, delete; no dry runs) by gitward replicas in `namespace`:
/// (user agent, object name, received, completed).
fn writes(namespace: &str) -> Vec<(String, String, Timestamp, Timestamp)> {
    common::audit_writes(namespace)
        .into_iter()
        .filter(|e| !common::is_dry_run(e))
        .filter_map(|e| {
            let agent = e["userAgent"].as_str()?.to_owned();
            if !agent.starts_with("gitward/") {
                return None;
            }
            let name = e["objectRef"]["name"].as_str()?.to_owned();
            let received = e["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            let completed = e["stageTimestamp"].as_str()?.parse().ok()?;
            Some((agent, name, received, completed))
        })
        .collect()
}

/// The unit an object of the test belongs to: ConfigMap `cm-<i>` or inventory `gitward-app-<i>`.
fn unit_of(object: &str) -> Option<usize> {
    object.strip_prefix("cm-").or_else(|| object.strip_prefix("gitward-app-"))?.parse().ok()
}

/// Per unit, every write as (agent, received, completed), in order of receipt.
fn writes_by_unit(namespace: &str) -> BTreeMap<usize, Vec<(String, Timestamp, Timestamp)>> {
    let mut by_unit: BTreeMap<usize, Vec<(String, Timestamp, Timestamp)>> = BTreeMap::new();
    for (agent, object, received, completed) in writes(namespace) {
        if let Some(unit) = unit_of(&object) {
            by_unit.entry(unit).or_default().push((agent, received, completed));
        }
    }
    for list in by_unit.values_mut() {
        list.sort_by_key(|w| w.1);
    }
    by_unit
}

/// Patches of `cm-<i>` (the apply itself), as (agent, received).
fn applies(namespace: &str) -> Vec<(usize, String, Timestamp)> {
    writes(namespace)
        .into_iter()
        .filter(|(_, object, _, _)| object.starts_with("cm-"))
        .filter_map(|(agent, object, received, _)| Some((unit_of(&object)?, agent, received)))
        .collect()
}

/// The owner of every unit by rendezvous over `members`, as the library computes it.
fn expected(members: &[&str]) -> BTreeMap<usize, String> {
    (0..UNITS)
        .map(|i| {
            (i, gitward::lease::assignment::unit_owner(&unit_name(i), members.iter().copied()).unwrap().to_owned())
        })
        .collect()
}

/// Units held by the replicas, summed from their metrics.
fn held(daemons: &[&common::Daemon]) -> f64 {
    daemons.iter().map(|d| d.metric_sum("gitward_shard_units_held", &[])).sum()
}

/// The replica that wrote last to each unit's objects.
fn last_writer(namespace: &str) -> BTreeMap<usize, String> {
    writes_by_unit(namespace).into_iter().filter_map(|(u, w)| Some((u, w.last()?.0.clone()))).collect()
}

/// Waits (bounded) until every unit's ConfigMap was written again after `since`: each owner
/// re-applied its units (every [`RESYNC`]), so a write by any other replica since then would be
/// in the audit log too.
async fn rewritten_since(namespace: &str, since: Timestamp) {
    let all = common::eventually(WAIT, || async {
        let again: BTreeSet<usize> =
            applies(namespace).into_iter().filter(|(_, _, at)| *at > since).map(|(u, _, _)| u).collect();
        again.len() == UNITS
    })
    .await;
    assert!(all, "not every unit was re-applied within {WAIT:?}");
}

/// Seconds between two timestamps.
fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    (to.as_microsecond() - from.as_microsecond()) as f64 / 1e6
}

/// The tests of this file run one at a time: replicas renewing dozens of short Leases beside a
/// second apiserver starting up (the two-cluster test) missed renew deadlines on two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn units_are_spread_over_replicas_handed_over_without_overlap_and_taken_over_on_death() {
    let _serial = SERIAL.lock().await;
    let (env, ns) = common::setup_ns("shard").await;
    let repos = cm_repos(UNITS);
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| format!("replica-{s}")).collect();
    let start = |id: &str| {
        let (config, port) = replica_config(dir.path(), id, &ns, &repos);
        common::Daemon::start(&config, port, &[])
    };

    // 1. Three replicas: every unit applied, by exactly one replica, the rendezvous owner.
    let mut daemons: Vec<common::Daemon> = ids[..3].iter().map(|id| start(id)).collect();
    let all_applied = common::eventually(WAIT, || async {
        let done: BTreeSet<usize> = applies(&ns).into_iter().map(|(u, _, _)| u).collect();
        done.len() == UNITS && held(&daemons.iter().collect::<Vec<_>>()) == UNITS as f64
    })
    .await;
    assert!(all_applied, "not every unit applied: {:?}\n{}", applies(&ns).len(), daemons[0].log_text());
    rewritten_since(&ns, Timestamp::now()).await;
    let three = expected(&[&ids[0], &ids[1], &ids[2]]);
    for (unit, writes) in writes_by_unit(&ns) {
        let agents: BTreeSet<&str> = writes.iter().map(|w| w.0.as_str()).collect();
        assert_eq!(agents, BTreeSet::from([agent(&three[&unit]).as_str()]), "unit {unit} written by {agents:?}");
    }
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert_eq!(
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|c| unit_of(c.metadata.name.as_deref().unwrap_or("")).is_some())
            .count(),
        UNITS
    );

    // 2. A fourth replica joins: it takes its rendezvous share; each moved unit's old owner
    //    wrote nothing after the new owner's first write (by receive and completion times).
    let before = last_writer(&ns);
    daemons.push(start(&ids[3]));
    let four = expected(&[&ids[0], &ids[1], &ids[2], &ids[3]]);
    let moving: BTreeSet<usize> = (0..UNITS).filter(|u| three[u] != four[u]).collect();
    let moved_in_time = common::eventually(WAIT, || async {
        let last = last_writer(&ns);
        moving.iter().all(|u| last.get(u) == Some(&agent(&ids[3])))
    })
    .await;
    assert!(moved_in_time, "units did not move to the new replica: {}", daemons[3].log_text());
    rewritten_since(&ns, Timestamp::now()).await;
    let after = last_writer(&ns);
    let moved: BTreeSet<usize> = (0..UNITS).filter(|u| before.get(u) != after.get(u)).collect();
    eprintln!("join: {} of {UNITS} units moved to the fourth replica", moved.len());
    assert_eq!(moved, moving, "exactly the rendezvous share moves");
    assert!((2..=15).contains(&moved.len()), "about a quarter moves: {}", moved.len());
    assert!(moved.iter().all(|u| after[u] == agent(&ids[3])), "units move only to the new replica");
    let by_unit = writes_by_unit(&ns);
    for unit in &moved {
        let writes = &by_unit[unit];
        let new_first = writes.iter().find(|w| w.0 == agent(&ids[3])).map(|w| w.1).unwrap();
        let old_last = writes.iter().filter(|w| w.0 == before[unit]).map(|w| w.2).max().unwrap();
        assert!(
            old_last < new_first,
            "unit {unit}: old owner's last write completed {old_last}, new owner's first began {new_first}"
        );
        eprintln!("unit {unit}: handed over, gap {:.3} s", seconds(old_last, new_first));
    }

    // 3. SIGKILL a replica that holds units: each of its units is applied again by its new
    //    rendezvous owner within the lease duration of the kill.
    let victim = (0..4).find(|k| four.values().any(|o| *o == ids[*k]) && *k != 3).unwrap();
    let orphans: BTreeSet<usize> = (0..UNITS).filter(|u| four[u] == ids[victim]).collect();
    let alive: Vec<&str> = (0..4).filter(|k| *k != victim).map(|k| ids[k].as_str()).collect();
    let heirs = expected(&alive);
    let killed_at = Timestamp::now();
    let mut dead = daemons.remove(victim);
    dead.child.kill().unwrap();
    let _ = dead.child.wait();
    let taken_over = common::eventually(WAIT, || async {
        let again: BTreeSet<usize> =
            applies(&ns).into_iter().filter(|(_, _, at)| *at > killed_at).map(|(u, _, _)| u).collect();
        orphans.iter().all(|u| again.contains(u))
    })
    .await;
    assert!(taken_over, "units of the killed replica not applied again: {}", daemons[0].log_text());
    let mut worst = 0.0f64;
    for unit in &orphans {
        let (_, by, at) = applies(&ns)
            .into_iter()
            .filter(|(u, _, at)| u == unit && *at > killed_at)
            .min_by_key(|(_, _, at)| *at)
            .unwrap();
        assert_eq!(by, agent(&heirs[unit]), "unit {unit} taken over by its rendezvous heir");
        worst = worst.max(seconds(killed_at, at));
    }
    eprintln!("failover: {} units of the killed replica applied again within {worst:.2} s of SIGKILL", orphans.len());
    assert!(worst < LEASE.as_secs_f64(), "failover took {worst:.2} s, more than the lease duration {LEASE:?}");
    // The replicas' own account agrees (metrics, read only after the audit log decided).
    let live: Vec<&common::Daemon> = daemons.iter().collect();
    let released: f64 = live.iter().map(|d| d.metric_sum("gitward_shard_handovers_total", &["released"])).sum();
    let by_survivors = moved.iter().filter(|u| before[*u] != agent(&ids[victim])).count();
    assert!(released >= by_survivors as f64, "handovers counted: {released}, expected {by_survivors}");
    let counted = common::eventually(WAIT, || async {
        let n: f64 = live.iter().map(|d| d.metric_sum("gitward_shard_failover_seconds_count", &[])).sum();
        n >= orphans.len() as f64
    })
    .await;
    assert!(counted, "failover times not observed: {}", daemons[0].get("/metrics").unwrap().1);
    // Nobody else wrote to a unit it does not own since the kill.
    let late: Vec<_> = writes(&ns)
        .into_iter()
        .filter(|(a, o, r, _)| *r > killed_at && unit_of(o).is_some_and(|u| *a != agent(&heirs[&u])))
        .collect();
    assert!(late.is_empty(), "writes by a replica that does not own the unit: {late:?}");
}

#[tokio::test]
async fn a_cluster_that_is_down_delays_only_its_own_units() {
    let _serial = SERIAL.lock().await;
    let env = common::setup("clusters").await;
    let dir = tempfile::tempdir().unwrap();
    let own_dir = dir.path().join("own");
    std::fs::create_dir_all(&own_dir).unwrap();
    let own = common::OwnCluster::start(&own_dir, common::free_port());
    let own_kubeconfig = own_dir.join("kubeconfig");
    let own_client = common::OwnCluster::client(&own_kubeconfig).await;

    let main_repo = common::GitRepo::new();
    main_repo.push(&[("cm.yaml", &common::cm("main-app", "1"))], "first");
    let own_repo = common::GitRepo::new();
    own_repo.push(&[("cm.yaml", &common::cm("own-app", "1"))], "first");
    let kubeconfig = std::env::var("KUBECONFIG").unwrap();
    let clusters = format!(
        "[[cluster]]\nname = \"main\"\nkubeconfig = \"{kubeconfig}\"\n\n[[cluster]]\nname = \"own\"\nkubeconfig = \"{}\"\n",
        own_kubeconfig.display()
    );
    let units = common::unit_toml(
        "main-app",
        &main_repo.bare(),
        "",
        &env.namespace,
        "cluster = \"main\"\nhealth_timeout = \"0s\"",
    ) + &common::unit_toml(
        "own-app",
        &own_repo.bare(),
        "",
        "default",
        "cluster = \"own\"\nhealth_timeout = \"0s\"",
    );
    let (config, port) = common::daemon_config(dir.path(), &clusters, "", &units);
    let daemon = common::Daemon::start(&config, port, &[]);

    let main = || common::cm_value_or_none(&env.client, &env.namespace, "main-app");
    let both = common::eventually(WAIT, || async {
        main().await.as_deref() == Some("1")
            && common::cm_value_or_none(&own_client, "default", "own-app").await.as_deref() == Some("1")
    })
    .await;
    assert!(both, "both clusters' units applied: {}", daemon.log_text());
    let (_, metrics) = daemon.get("/metrics").unwrap();
    assert!(metrics.contains(r#"gitward_unit_cluster{unit="own-app",cluster="own"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"gitward_unit_cluster{unit="main-app",cluster="main"} 1"#), "{metrics}");

    // The second cluster goes down; both repositories get a push.
    own.stop();
    own_repo.push(&[("cm.yaml", &common::cm("own-app", "2"))], "second");
    let pushed = std::time::Instant::now();
    main_repo.push(&[("cm.yaml", &common::cm("main-app", "2"))], "second");
    let applied = common::eventually(WAIT, || async { main().await.as_deref() == Some("2") }).await;
    assert!(applied, "the main cluster's unit did not sync while the other cluster was down: {}", daemon.log_text());
    eprintln!("push → applied on the live cluster in {:?} while the other is down", pushed.elapsed());
    // The down cluster's unit failed on its own, and its log lines name the cluster.
    let failed = common::eventually(WAIT, || async {
        daemon
            .events()
            .iter()
            .any(|e| e["message"] == "sync failed" && e["span"]["cluster"] == "own" && e["span"]["unit"] == "own-app")
    })
    .await;
    assert!(failed, "no failed sync logged for the down cluster's unit: {}", daemon.log_text());
    // And the live cluster keeps syncing: another push lands after that failure.
    main_repo.push(&[("cm.yaml", &common::cm("main-app", "3"))], "third");
    let again = common::eventually(WAIT, || async { main().await.as_deref() == Some("3") }).await;
    assert!(again, "the main cluster's unit stopped syncing: {}", daemon.log_text());
}

/// An admin client of the shared test cluster impersonating `user`.
async fn impersonating(user: &str) -> kube::Client {
    let path = std::env::var("KUBECONFIG").expect("KUBECONFIG (run under tests/cluster/run)");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("readable kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("kubeconfig");
    config.auth_info.impersonate = Some(user.to_owned());
    kube::Client::try_from(config).expect("impersonating client")
}

#[tokio::test]
async fn the_sharded_deployments_role_is_enough_for_sharding() {
    let _serial = SERIAL.lock().await;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::PostParams;

    let (env, ns) = common::setup_ns("shard-rbac").await;
    // deploy/kubernetes-sharded/rbac.yaml, moved into this namespace, for a ServiceAccount
    // `gitward` that has nothing else.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes-sharded/rbac.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_json::from_value(serde_json::json!({"metadata": {"name": "gitward"}})).unwrap();
    Api::<ServiceAccount>::namespaced(env.client.clone(), &ns).create(&pp, &sa).await.unwrap();
    for mut doc in docs {
        doc["metadata"]["namespace"] = ns.as_str().into();
        if doc["kind"] == "Role" {
            let role: Role = serde_json::from_value(doc).unwrap();
            Api::<Role>::namespaced(env.client.clone(), &ns).create(&pp, &role).await.unwrap();
        } else {
            doc["subjects"][0]["namespace"] = ns.as_str().into();
            let binding: RoleBinding = serde_json::from_value(doc).unwrap();
            Api::<RoleBinding>::namespaced(env.client.clone(), &ns).create(&pp, &binding).await.unwrap();
        }
    }
    let client = impersonating(&format!("system:serviceaccount:{ns}:gitward")).await;
    let other = Api::<ConfigMap>::namespaced(client.clone(), &ns).list(&Default::default()).await;
    assert!(matches!(other, Err(kube::Error::Api(ref s)) if s.code == 403), "the Role is all it has: {other:?}");

    // Join, watch, create and hold the unit Leases, then leave: every verb sharding sends.
    let units = ["app-0".to_owned(), "app-1".to_owned()];
    let cfg =
        shard::ShardConfig { namespace: ns.clone(), identity: "rbac-a".into(), lease_duration: LEASE, group: None };
    let fingerprints = units.iter().map(|u| (u.clone(), "f".to_owned())).collect();
    let (_units_tx, units_rx) = tokio::sync::watch::channel(fingerprints);
    let (_running_tx, running_rx) = tokio::sync::watch::channel(shard::Running::default());
    let metrics = std::sync::Arc::new(gitward::daemon::metrics::Metrics::new());
    let (mut ownership, task) = shard::spawn(client.clone(), cfg.clone(), units_rx, running_rx, metrics);
    let both = tokio::time::timeout(WAIT, ownership.wait_for(|o| o.held.len() == units.len())).await;
    assert!(matches!(both, Ok(Ok(_))), "the ServiceAccount could not take the unit Leases");
    task.abort();
    let _ = task.await;
    shard::leave(client, &cfg, &Default::default()).await;
    let leases = Api::<Lease>::namespaced(env.client.clone(), &ns).list(&Default::default()).await.unwrap();
    assert_eq!(leases.items.len(), 3, "a membership Lease and two unit Leases");
    for lease in leases.items {
        let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
        assert_eq!(holder, "", "{:?} released", lease.metadata.name);
    }
}

/// Deletes by gitward replicas in `namespace` of objects whose name starts with `prefix`.
fn deletes(namespace: &str, prefix: &str) -> Vec<(String, Timestamp)> {
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["objectRef"]["namespace"] == namespace)
        .filter(|e| e["verb"] == "delete" && e["userAgent"].as_str().is_some_and(|a| a.starts_with("gitward/")))
        .filter_map(|e| {
            let name = e["objectRef"]["name"].as_str()?;
            let at = e["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            name.starts_with(prefix).then(|| (name.to_owned(), at))
        })
        .collect()
}

/// A rolling update seen from the Leases: replica `old` runs units 0–5, replica `new` (started
/// later) runs units 0–11, and gives unit 0 another path. Before each member advertised the
/// fingerprints of its units, every member counted for every unit: units the rendezvous gave
/// to `old` were applied by nobody, and unit 0 would flip between its two versions with each
/// change of owner, pruning the other version's objects each time. Now every unit is applied,
/// units 6–11 only by `new`, unit 0 only in `new`'s version, and nothing is pruned back and
/// forth while both run.
#[tokio::test]
async fn replicas_running_different_configs_leave_no_unit_unapplied_and_prune_nothing_back_and_forth() {
    let _serial = SERIAL.lock().await;
    let (env, ns) = common::setup_ns("shard-drift").await;
    const N: usize = 12;
    let repos: Vec<common::GitRepo> = (0..N)
        .map(|i| {
            let repo = common::GitRepo::new();
            repo.write(
                "v1/cm.yaml",
                &format!("{}---\n{}", common::cm(&format!("cm-{i}"), "1"), common::cm(&format!("x-{i}-v1"), "1")),
            );
            repo.write(
                "v2/cm.yaml",
                &format!("{}---\n{}", common::cm(&format!("cm-{i}"), "2"), common::cm(&format!("x-{i}-v2"), "2")),
            );
            repo.commit_and_push("two versions");
            repo
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let config = |identity: &str, units: std::ops::Range<usize>, path0: &str| {
        let port = common::free_port();
        let mut text = replica_header(identity, &ns, None, port);
        for i in units {
            let path = if i == 0 { path0 } else { "v1" };
            text.push_str(&common::unit_toml(&unit_name(i), &repos[i].bare(), path, &ns, "health_timeout = \"0s\""));
        }
        let path = dir.path().join(format!("{identity}.toml"));
        std::fs::write(&path, text).unwrap();
        common::Daemon::start(&path, port, &[])
    };
    let (old_id, new_id) = ("replica-old", "replica-new");
    let old = config(old_id, 0..6, "v1");
    let old_applied = common::eventually(WAIT, || async {
        applies(&ns).into_iter().map(|(u, _, _)| u).collect::<BTreeSet<_>>() == (0..6).collect()
    })
    .await;
    assert!(old_applied, "the old replica alone applies its six units: {}", old.log_text());
    let new = config(new_id, 0..N, "v2");

    // Every unit is applied, and the new version of unit 0 replaces the old one.
    let every = common::eventually(WAIT, || async {
        let done: BTreeSet<usize> = applies(&ns).into_iter().map(|(u, _, _)| u).collect();
        done.len() == N && common::cm_value_or_none(&env.client, &ns, "cm-0").await.as_deref() == Some("2")
    })
    .await;
    let done: BTreeSet<usize> = applies(&ns).into_iter().map(|(u, _, _)| u).collect();
    assert!(
        every,
        "units applied by nobody: {:?}\n{}",
        (0..N).filter(|u| !done.contains(u)).collect::<Vec<_>>(),
        new.log_text()
    );
    let settled = Timestamp::now();
    // Both keep running for several resyncs: who writes each unit from now on, and what is deleted.
    let again = common::eventually(WAIT, || async {
        let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
        for (u, _, at) in applies(&ns) {
            if at > settled {
                *seen.entry(u).or_default() += 1;
            }
        }
        seen.len() == N && seen.values().all(|n| *n >= 3)
    })
    .await;
    assert!(again, "not every unit re-applied three times");
    let by_unit = writes_by_unit(&ns);
    for (unit, writes) in &by_unit {
        let agents: BTreeSet<&str> = writes.iter().filter(|w| w.1 > settled).map(|w| w.0.as_str()).collect();
        assert_eq!(agents.len(), 1, "unit {unit} written by {agents:?} after the configs settled");
        if *unit >= 6 || *unit == 0 {
            assert_eq!(agents, BTreeSet::from([agent(new_id).as_str()]), "unit {unit} runs only in the new config");
        }
    }
    let flips: Vec<_> = deletes(&ns, "x-").into_iter().filter(|(_, at)| *at > settled).collect();
    assert!(flips.is_empty(), "objects pruned back and forth after the configs settled: {flips:?}");
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(api.get_opt("x-0-v1").await.unwrap().is_none(), "the old version of unit 0 was pruned once");
    assert!(api.get_opt("x-0-v2").await.unwrap().is_some());

    // The old replica dies: its membership Lease, expired and needed by nobody, is collected;
    // its bucket Leases are taken over (every unit's bucket Lease renewed again), not collected.
    let mut old = old;
    old.child.kill().unwrap();
    let _ = old.child.wait();
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client.clone(), &ns);
    let collected = common::eventually(WAIT * 2, || async {
        leases.get_opt(&format!("gitward-member-{old_id}")).await.unwrap().is_none()
    })
    .await;
    assert!(collected, "the dead replica's membership Lease is still there: {}", new.log_text());
    let renewed = common::eventually(WAIT, || async {
        new.metric_sum("gitward_shard_units_unrenewed", &[]) == 0.0
            && new.metric_sum("gitward_shard_units_held", &[]) == N as f64
    })
    .await;
    assert!(renewed, "units left unrenewed: {}", new.get("/metrics").unwrap().1);
    for i in 0..N {
        let lease = format!("gitward-bucket-{}", gitward::lease::assignment::bucket(&unit_name(i)));
        assert!(leases.get_opt(&lease).await.unwrap().is_some(), "unit {i}'s bucket Lease {lease}");
    }
}

/// Starts the replica whose config [`replica_file`] wrote, by the command prefix `wrapper`
/// (empty for none).
fn start_replica((path, port): (std::path::PathBuf, u16), wrapper: &[&str]) -> common::Daemon {
    common::Daemon::start_in(wrapper, &path, port, &[])
}

/// Two installations share the Lease namespace, each with units named `app-0` … `app-3` (its
/// own repositories, its own object namespace): with a `group` each, each applies all of its
/// units. Then a second process given the identity of a running one: the one that sees the
/// other's nonce on its membership Lease says so and runs nothing, and the units stay applied.
#[tokio::test]
async fn installations_in_one_namespace_stay_apart_by_group_and_a_reused_identity_is_refused() {
    let _serial = SERIAL.lock().await;
    let (env, ns) = common::setup_ns("shard-group").await;
    let other_ns = format!("{ns}-b");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client.clone());
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": other_ns}})).unwrap();
    namespaces.create(&Default::default(), &namespace).await.unwrap();
    let repos = |tag: &str| -> Vec<common::GitRepo> {
        (0..4)
            .map(|i| {
                let repo = common::GitRepo::new();
                repo.push(&[("cm.yaml", &common::cm(&format!("cm-{i}"), tag))], "first");
                repo
            })
            .collect()
    };
    let (repos_a, repos_b) = (repos("a"), repos("b"));
    let dir = tempfile::tempdir().unwrap();
    let a = start_replica(replica_file(dir.path(), "install-a", Some("alpha"), &ns, &ns, &repos_a), &[]);
    let b = start_replica(replica_file(dir.path(), "install-b", Some("beta"), &ns, &other_ns, &repos_b), &[]);
    let both = common::eventually(WAIT, || async {
        let mut all = true;
        for i in 0..4 {
            all &= common::cm_value_or_none(&env.client, &ns, &format!("cm-{i}")).await.as_deref() == Some("a");
            all &= common::cm_value_or_none(&env.client, &other_ns, &format!("cm-{i}")).await.as_deref() == Some("b");
        }
        all
    })
    .await;
    assert!(both, "each installation applies all of its units:\n{}\n{}", a.log_text(), b.log_text());
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client.clone(), &ns);
    let leases = leases.list(&Default::default()).await.unwrap();
    let names: BTreeSet<String> = leases.items.into_iter().filter_map(|l| l.metadata.name).collect();
    let b = gitward::lease::assignment::bucket("app-0");
    let (alpha, beta) = (format!("gitward-alpha-bucket-{b}"), format!("gitward-beta-bucket-{b}"));
    assert!(names.contains(&alpha) && names.contains(&beta), "{names:?}");
    assert!(names.contains("gitward-alpha-member-install-a"), "{names:?}");

    // A second process with install-a's identity.
    std::fs::create_dir_all(dir.path().join("twin")).unwrap();
    let twin =
        start_replica(replica_file(&dir.path().join("twin"), "install-a", Some("alpha"), &ns, &ns, &repos_a), &[]);
    let refused = common::eventually(WAIT, || async {
        [&a, &twin].iter().any(|d| {
            d.events().iter().any(|e| e["message"] == "sharding: identity in use twice; this replica runs no unit")
        })
    })
    .await;
    assert!(refused, "a reused identity went unnoticed:\n{}\n{}", a.log_text(), twin.log_text());
    let (loser, winner) =
        if a.events().iter().any(|e| e["message"].as_str().is_some_and(|m| m.contains("in use twice"))) {
            (&a, &twin)
        } else {
            (&twin, &a)
        };
    let error =
        loser.events().into_iter().find(|e| e["message"].as_str().is_some_and(|m| m.contains("in use twice"))).unwrap();
    assert!(error["reason"].as_str().is_some_and(|r| r.contains("install-a")), "{error}");
    let stopped = common::eventually(WAIT, || async { loser.metric_sum("gitward_shard_units_held", &[]) == 0.0 }).await;
    assert!(stopped, "the refusing replica still holds units");
    // The units stay applied: each is re-applied (every resync) after the refusal.
    let since = Timestamp::now();
    let again = common::eventually(WAIT, || async {
        applies(&ns).into_iter().filter(|(_, _, at)| *at > since).map(|(u, _, _)| u).collect::<BTreeSet<_>>()
            == (0..4).collect()
    })
    .await;
    assert!(again, "nobody applies install-a's units any more:\n{}", winner.log_text());
}

/// A replica whose state directory cannot hold mirrors (bind-mounted read-only for it alone, as
/// in tests/faults/state.rs) is assigned its share of the units but cannot start them: after
/// three failed starts it leaves them to the other replica, which applies every unit, instead
/// of holding their Leases while applying nothing.
#[tokio::test]
async fn a_replica_that_cannot_start_its_units_leaves_them_to_the_others() {
    let _serial = SERIAL.lock().await;
    let (_, ns) = common::setup_ns("shard-bench").await;
    let repos = cm_repos(6);
    let dir = tempfile::tempdir().unwrap();
    let mirrors = dir.path().join("state-broken-2/mirrors");
    std::fs::create_dir_all(&mirrors).unwrap();
    let script = r#"mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@""#;
    let wrapper = ["unshare", "--mount", "--map-root-user", "sh", "-c", script, mirrors.to_str().unwrap()];
    let broken = start_replica(replica_file(dir.path(), "broken-2", None, &ns, &ns, &repos), &wrapper);
    let healthy = start_replica(replica_file(dir.path(), "healthy-2", None, &ns, &ns, &repos), &[]);
    // The broken replica's share per rendezvous, which it could not run.
    let share: Vec<usize> = (0..6)
        .filter(|i| {
            gitward::lease::assignment::unit_owner(&unit_name(*i), ["broken-2", "healthy-2"]) == Some("broken-2")
        })
        .collect();
    assert!(!share.is_empty(), "the rendezvous gives the broken replica some units");
    let every = common::eventually(WAIT * 2, || async {
        let done: BTreeSet<usize> = applies(&ns).into_iter().map(|(u, _, _)| u).collect();
        done.len() == 6
    })
    .await;
    assert!(every, "units applied by nobody: {}", broken.log_text());
    for (unit, writes) in writes_by_unit(&ns) {
        assert!(writes.iter().all(|w| w.0 == agent("healthy-2")), "unit {unit} written by {:?}", writes);
    }
    let left = broken
        .events()
        .iter()
        .filter(|e| e["message"] == "sharding: unit could not start here; leaving it to the other replicas")
        .count();
    assert_eq!(left, share.len(), "{}", broken.log_text());
    let idle = common::eventually(WAIT, || async { broken.metric_sum("gitward_shard_units_held", &[]) == 0.0 }).await;
    assert!(idle, "the broken replica still holds unit Leases");
    assert_eq!(healthy.metric_sum("gitward_shard_units_held", &[]), 6.0);
}

/// A rolling update from a gitward that leased each unit on its own (`gitward-unit-<unit>`)
/// and advertised no bucket count. An old replica's membership Lease, joined last and running
/// both units, and its unit Lease of `app-0` are written by hand (long durations, so they stay
/// live without renewals). The new replica counts the old member for no bucket (otherwise the
/// old member, newest, would win both buckets and nothing would be applied), applies `app-1`,
/// and leaves `app-0`'s bucket unclaimed while the old unit Lease guards it. Once the old
/// replica leaves (membership deleted, unit Lease released), `app-0` is applied and the old
/// unit Lease is collected.
#[tokio::test]
async fn an_old_replicas_unit_lease_keeps_its_unit_from_the_new_replicas_until_released() {
    let _serial = SERIAL.lock().await;
    let (env, ns) = common::setup_ns("shard-upgrade").await;
    let repos = cm_repos(2);
    let (b0, b1) = (gitward::lease::assignment::bucket("app-0"), gitward::lease::assignment::bucket("app-1"));
    assert_ne!(b0, b1, "the two units share a bucket; rename them");
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client.clone(), &ns);
    let now = Timestamp::now();
    let later = now + k8s_openapi::jiff::SignedDuration::from_hours(1);
    let lease = |name: &str, acquired: Timestamp, annotations: Value| {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        let mut lease: k8s_openapi::api::coordination::v1::Lease =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name, "annotations": annotations}}))
                .unwrap();
        lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            holder_identity: Some("old".into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        });
        lease
    };
    let units = serde_json::json!({"app-0": "old", "app-1": "old"}).to_string();
    let member =
        lease("gitward-member-old", later, serde_json::json!({"gitward.dev/units": units, "gitward.dev/nonce": "0"}));
    leases.create(&Default::default(), &member).await.unwrap();
    leases.create(&Default::default(), &lease("gitward-unit-app-0", now, serde_json::json!({}))).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (config, port) = replica_config(dir.path(), "new", &ns, &repos);
    let new = common::Daemon::start(&config, port, &[]);
    let applied = |unit: usize| applies(&ns).into_iter().filter(move |(u, _, _)| *u == unit);
    let first = common::eventually(WAIT, || async { applied(1).next().is_some() }).await;
    assert!(first, "the new replica did not apply app-1 beside an old member: {}", new.log_text());
    assert!(applied(1).all(|(_, by, _)| by == agent("new")));
    assert_eq!(applied(0).count(), 0, "app-0 applied while the old replica's unit Lease guards it");
    assert!(leases.get_opt(&format!("gitward-bucket-{b0}")).await.unwrap().is_none(), "app-0's bucket claimed");

    // The old replica leaves as it does on shutdown: unit Lease released, membership gone.
    let release = serde_json::json!({"spec": {"holderIdentity": ""}});
    let params = kube::api::PatchParams::default();
    leases.patch("gitward-unit-app-0", &params, &kube::api::Patch::Merge(&release)).await.unwrap();
    leases.delete("gitward-member-old", &Default::default()).await.unwrap();
    let taken = common::eventually(WAIT, || async { applied(0).next().is_some() }).await;
    assert!(taken, "app-0 not applied once the old unit Lease was released: {}", new.log_text());
    assert!(applied(0).all(|(_, by, _)| by == agent("new")));
    let collected =
        common::eventually(WAIT, || async { leases.get_opt("gitward-unit-app-0").await.unwrap().is_none() }).await;
    assert!(collected, "the released old unit Lease was not collected: {}", new.log_text());
}

/// A replica whose advert the API server refuses (its units' keys pass the 256 KiB limit of a
/// Lease's annotations: 20,000 units here, at 13.3 bytes a unit) owns no bucket and runs no
/// unit: it says so once, as a warning naming the refusal, instead of retrying at debug for
/// ever.
#[tokio::test]
async fn a_replica_whose_advert_is_refused_as_too_long_warns_once_and_runs_nothing() {
    let _serial = SERIAL.lock().await;
    let (env, _, repo) = common::setup_repo("shard-advert").await;
    repo.push(&[("cm.yaml", &common::cm("cm", "1"))], "first");
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let mut text = replica_header("replica-big", &env.namespace, None, port);
    for i in 0..20_000 {
        let name = format!("unit-{i:05}");
        text.push_str(&common::unit_toml(&name, &repo.bare(), "", &env.namespace, ""));
    }
    let config = dir.path().join("replica-big.toml");
    std::fs::write(&config, text).unwrap();
    let daemon = common::Daemon::start(&config, port, &[]);
    let message = "sharding: the API server refuses this replica's advert, so it owns no bucket and runs no unit \
                   (an advert of many units passes the 256 KiB limit of an object's annotations)";
    let warned = common::eventually(WAIT, || async { !daemon.logged(message).is_empty() }).await;
    assert!(warned, "no warning of the refused advert: {}", daemon.log_text());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let warnings = daemon.logged(message);
    assert_eq!(warnings.len(), 1, "warned once, not at every try: {warnings:?}");
    assert_eq!(warnings[0]["level"], "WARN");
    assert_eq!(warnings[0]["units"], 20_000);
    assert!(warnings[0]["error"].as_str().is_some_and(|e| e.contains("Too long")), "{}", warnings[0]);
    assert!(daemon.logged("sync complete").is_empty(), "a unit ran without a bucket: {}", daemon.log_text());
}
