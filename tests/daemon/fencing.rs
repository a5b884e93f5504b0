//! Fencing at send time with real `gitward run` processes, a real
//! bare repository and the real apiserver: a replica stopped (SIGSTOP) past its Lease sends
//! no write once it wakes, a unit client refuses writes past its fence, and two processes
//! given one identity never both lead. Who wrote what is read from the apiserver's audit
//! log (each sharded replica sends `gitward/<version> (<identity>)`).
//!
//! Run: `scripts/test --test integration fencing::`.

use crate::common;

use std::path::Path;
use std::time::Duration;

use gitward::cluster::fence::{Fence, boottime};
use gitward::lease::shard;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Liveness bound for anything that must eventually happen.
const WAIT: Duration = Duration::from_secs(120);
/// The sharding failover bound `D` of the SIGSTOP test (unit Leases last `⌈D/2⌉` s).
const LEASE: Duration = Duration::from_secs(4);
/// ConfigMaps the unit keeps, rewritten by the second revision: a sync long enough to stop
/// the replica in the middle of it.
const KEPT: usize = 600;
/// ConfigMaps the second revision removes: the prune the stopped replica must never send.
const REMOVED: usize = 20;
/// Writes a replica keeps in flight in the SIGSTOP test: many admitted writes on their way to
/// the socket when the process stops.
const IN_FLIGHT: usize = 32;
/// How many times the SIGSTOP scenario runs (`GITWARD_FENCE_STOP_RUNS`, default 3).
fn stop_runs() -> usize {
    std::env::var("GITWARD_FENCE_STOP_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

/// A write (create, update, patch, delete) of a ConfigMap or Secret in a namespace, from
/// the audit log.
#[derive(Debug, Clone)]
struct Write {
    agent: String,
    verb: String,
    name: String,
    received: Timestamp,
    /// The request URI: a write the fence layer let through carries its `timeout=`.
    uri: String,
}

/// Every write in `namespace` of ConfigMaps and Secrets (the unit's objects and its ApplySet
/// parent), in log order; dry runs (a self-heal's diff: the fence lets them through and the
/// API server persists nothing) are left out.
fn writes(namespace: &str) -> Vec<Write> {
    audited(namespace, false)
}

/// The dry-run writes [`writes`] leaves out.
fn dry_runs(namespace: &str) -> Vec<Write> {
    audited(namespace, true)
}

/// The writes in `namespace` that are dry runs (`dry_run`) or are not.
fn audited(namespace: &str, dry_run: bool) -> Vec<Write> {
    common::audit_writes(namespace)
        .into_iter()
        .filter(|e| common::is_dry_run(e) == dry_run)
        .filter_map(|e| {
            Some(Write {
                agent: e["userAgent"].as_str()?.to_owned(),
                verb: e["verb"].as_str()?.to_owned(),
                name: e["objectRef"]["name"].as_str()?.to_owned(),
                received: e["requestReceivedTimestamp"].as_str()?.parse().ok()?,
                uri: e["requestURI"].as_str()?.to_owned(),
            })
        })
        .collect()
}

/// The manifests of one revision: `kept-<i>` with `value`, and `gone-<i>` when `with_removed`.
fn manifests(value: &str, with_removed: bool) -> String {
    let mut docs: Vec<String> = (0..KEPT).map(|i| common::cm(&format!("kept-{i}"), value)).collect();
    if with_removed {
        docs.extend((0..REMOVED).map(|i| common::cm(&format!("gone-{i}"), "old")));
    }
    docs.join("---\n")
}

/// A sharded replica's config: one unit `app` of `repo` into `namespace`, Leases there too,
/// [`IN_FLIGHT`] writes at a time, no resync during the test.
fn replica(dir: &Path, identity: &str, namespace: &str, repo: &Path) -> (std::path::PathBuf, u16) {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG (run under tests/cluster/run)");
    replica_via(dir, identity, namespace, repo, &kubeconfig)
}

/// [`replica`] reaching the API server through `kubeconfig`.
fn replica_via(
    dir: &Path,
    identity: &str,
    namespace: &str,
    repo: &Path,
    kubeconfig: &str,
) -> (std::path::PathBuf, u16) {
    let port = common::free_port();
    let text = format!(
        "[cluster]\nkubeconfig = \"{kubeconfig}\"\nmax_in_flight = {IN_FLIGHT}\n\n[daemon]\nstate_dir = \"{}\"\n\
         listen = \"127.0.0.1:{port}\"\ninterval = \"1h\"\nresync_interval = \"1h\"\n\n\
         [daemon.sharding]\nnamespace = \"{namespace}\"\nlease_duration = \"{}s\"\nidentity = \"{identity}\"\n\n{}",
        dir.join(format!("state-{identity}")).display(),
        LEASE.as_secs(),
        common::unit_toml("app", repo, "", namespace, "health_timeout = \"0s\"")
    );
    let path = dir.join(format!("{identity}.toml"));
    std::fs::write(&path, text).unwrap();
    (path, port)
}

/// Makes a write of the test's own and waits until the audit log shows it: every request the
/// apiserver completed before it is in the log by then.
async fn audit_barrier(client: &kube::Client, namespace: &str, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &cm).await.expect("barrier write");
    let seen = common::eventually(WAIT, || async { writes(namespace).iter().any(|w| w.name == name) }).await;
    assert!(seen, "the barrier write never reached the audit log");
}

/// Once A is gone: the time of B's first write in `ns`, and every write of A received at or
/// after it (a barrier write named `barrier` first, so the audit log holds all that came before).
async fn writes_after_takeover(
    client: &kube::Client,
    ns: &str,
    barrier: &str,
    agent_a: &str,
    agent_b: &str,
) -> (Timestamp, Vec<Write>) {
    audit_barrier(client, ns, barrier).await;
    let all = writes(ns);
    let b_first = all.iter().filter(|w| w.agent == agent_b).map(|w| w.received).min().expect("B wrote");
    let late = all.into_iter().filter(|w| w.agent == agent_a && w.received >= b_first).collect();
    (b_first, late)
}

/// The done-when test of fencing: replica A, owner of a unit of 620 objects written 32 at a
/// time, is stopped (SIGSTOP) in the middle of a sync that would then prune, for twice the
/// failover bound; B takes the unit over and syncs it. Once A runs again (SIGCONT) it sends no
/// write after B's first — its apply loop does not refill, its prune never starts, and what
/// it had let through the fence but not yet onto the socket is stopped on the wire — and it
/// stops the unit. Runs [`stop_runs`] times (`GITWARD_FENCE_STOP_RUNS=20` for the full count)
/// and counts late writes over all runs from the audit log. With the fence checked only when
/// a write joined the queue to the socket, writes queued at the stop reached the API server
/// when A woke.
#[tokio::test]
async fn a_replica_stopped_past_its_lease_sends_no_write_after_the_new_owners_first() {
    let runs = stop_runs();
    let mut late_total = 0;
    for run in 0..runs {
        let late = stop_once(run).await;
        late_total += late;
        eprintln!("SIGSTOP run {}/{runs}: {late} late writes", run + 1);
    }
    eprintln!("SIGSTOP runs: {runs}, late writes in all: {late_total}");
    assert_eq!(late_total, 0, "the stopped replica wrote after the new owner's first write");
}

/// One SIGSTOP scenario in a namespace of its own; returns how many writes A sent after B's
/// first (asserting the rest of the outcome).
async fn stop_once(run: usize) -> usize {
    let (env, ns, repo) = common::setup_repo("fence-stop").await;
    repo.push(&[("cms.yaml", &manifests("1", true))], "first");
    // A is the rendezvous owner of `app` while both replicas live.
    let ids = [format!("fence-a{run}"), format!("fence-b{run}")];
    let owner = gitward::lease::assignment::unit_owner("app", ids.iter().map(String::as_str)).unwrap().to_owned();
    let other = ids.iter().find(|i| **i != owner).unwrap().to_string();
    let (agent_a, agent_b) = (shard::user_agent(&owner), shard::user_agent(&other));
    let dir = tempfile::tempdir().unwrap();
    let (config_a, port_a) = replica(dir.path(), &owner, &ns, &repo.bare());
    let (config_b, port_b) = replica(dir.path(), &other, &ns, &repo.bare());
    let mut a = common::Daemon::start(&config_a, port_a, &[]);
    let b = common::Daemon::start(&config_b, port_b, &[]);

    // 1. A applies the first revision whole.
    let first = common::eventually(WAIT, || async { !a.logged("sync complete").is_empty() }).await;
    assert!(first, "A did not sync the first revision:\n{}", a.log_text());
    assert!(writes(&ns).iter().all(|w| w.agent != agent_b), "B wrote while A owned the unit");

    // 2. The second revision rewrites every kept ConfigMap and removes the others: A stops
    //    (SIGSTOP) once it has applied a few of them.
    repo.push(&[("cms.yaml", &manifests("2", false))], "second: rewrite kept-*, remove gone-*");
    // The trigger reads the cluster, not the audit log: the log of a whole test run takes
    // longer to read than A takes to finish its sync.
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let rewritten = || async {
        let live = api.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
        live.iter().filter(|c| c.data.as_ref().and_then(|d| d.get("value")).is_some_and(|v| v == "2")).count()
    };
    let started = common::eventually(WAIT, || async { rewritten().await >= 20 }).await;
    assert!(started, "A did not start the second sync:\n{}", a.log_text());
    a.signal("STOP");
    let stopped_at = std::time::Instant::now();
    let done_before_stop = rewritten().await;
    assert!(done_before_stop < KEPT, "A finished its sync before it was stopped ({done_before_stop} writes)");

    // 3. B takes the unit over and syncs it, prune included, while A stays stopped for at
    //    least twice the failover bound.
    let b_synced = common::eventually(WAIT, || async {
        let all = writes(&ns);
        let pruned = all.iter().filter(|w| w.agent == agent_b && w.verb == "delete").count();
        pruned == REMOVED && !b.logged("sync complete").is_empty()
    })
    .await;
    assert!(b_synced, "B did not take the unit over:\n{}", b.log_text());
    if let Some(rest) = (LEASE * 2).checked_sub(stopped_at.elapsed()) {
        tokio::time::sleep(rest).await; // the pause is the scenario, not an assertion
    }

    // 4. A runs again: it must notice that it lost the unit (its positive signal), then it
    //    is killed before it could legitimately win the unit back.
    a.signal("CONT");
    let noticed = common::eventually(WAIT, || async {
        a.events().iter().any(|e| e["message"] == "sharding: unit lease lost; unit stopped")
    })
    .await;
    assert!(noticed, "A did not notice it lost the unit:\n{}", a.log_text());
    a.kill();
    let (b_first, late) = writes_after_takeover(&env.client, &ns, "fence-barrier", &agent_a, &agent_b).await;
    eprintln!(
        "A wrote {done_before_stop}+ objects before SIGSTOP; after B's first write ({b_first}) it wrote {}: {:?}",
        late.len(),
        late.iter().take(10).map(|w| format!("{} {} {} {}", w.received, w.verb, w.name, w.uri)).collect::<Vec<_>>()
    );
    if !late.is_empty() {
        for e in common::audit_events(&agent_a).iter().chain(&common::audit_events(&agent_b)) {
            if e["stage"] == "ResponseComplete" && e["objectRef"]["resource"] == "leases" && e["verb"] != "get" {
                let (verb, name) = (&e["verb"], &e["objectRef"]["name"]);
                let (at, code) = (&e["requestReceivedTimestamp"], &e["responseStatus"]["code"]);
                eprintln!("lease write: {at} {} {verb} {name} -> {code}", e["userAgent"]);
            }
        }
        let log = a.log_text();
        let tail: Vec<&str> = log.lines().rev().take(80).collect();
        eprintln!("A's log, last lines:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    let a_deletes = writes(&ns).iter().filter(|w| w.agent == agent_a && w.verb == "delete").count();
    assert_eq!(a_deletes, late.iter().filter(|w| w.verb == "delete").count(), "A pruned before B took over");
    // The cluster holds B's sync unless A wrote late: every kept ConfigMap rewritten, every
    // removed one gone.
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let live = api.list(&Default::default()).await.unwrap().items;
    let value = |c: &ConfigMap| c.data.as_ref().and_then(|d| d.get("value")).cloned().unwrap_or_default();
    let kept = live.iter().filter(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with("kept-")));
    assert!(kept.clone().count() == KEPT && kept.clone().all(|c| value(c) == "2"), "kept-* not all at revision 2");
    assert!(!live.iter().any(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with("gone-"))));
    late.len()
}

/// A TCP relay on loopback in front of the API server: it can cut every connection through
/// it and hold the new ones (accepted, nothing forwarded) until released — a connection
/// set-up that hangs, as on a lossy network or an overloaded server.
struct Relay {
    port: u16,
    held: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    relays: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Relay {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = std::sync::Arc::new(tokio::sync::watch::channel(false).0);
        let relays = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (hold, list) = (held.clone(), relays.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut released = hold.subscribe();
                let relay = tokio::spawn(async move {
                    if released.wait_for(|held| !held).await.is_err() {
                        return;
                    }
                    let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                list.lock().unwrap().push(relay);
            }
        });
        Self { port, held, relays }
    }

    /// Closes every connection through the relay and holds the new ones.
    fn cut_and_hold(&self) {
        self.held.send_replace(true);
        for relay in self.relays.lock().unwrap().drain(..) {
            relay.abort();
        }
    }

    /// Lets the held connections (and new ones) through.
    fn release(&self) {
        self.held.send_replace(false);
    }
}

/// The writes a replica admitted while its fence was open but could not put on the wire (its
/// connections to the API server cut, the new ones hanging in their set-up) are never sent
/// once the fence has closed: A loses its Lease behind the hanging relay, B takes the unit
/// over and syncs it, and when the relay lets A's connections through, no write of A reaches
/// the API server after B's first. Before the fence was checked on the wire, the writes
/// admitted before the Lease ran out went out when their connections came up.
#[tokio::test]
async fn writes_held_in_a_hanging_connection_set_up_are_not_sent_once_the_fence_closed() {
    let (env, ns, repo) = common::setup_repo("fence-hang").await;
    repo.push(&[("cms.yaml", &manifests("1", true))], "first");
    let ids = ["hang-a", "hang-b"];
    let owner = gitward::lease::assignment::unit_owner("app", ids.iter().copied()).unwrap().to_owned();
    let other = ids.iter().find(|i| **i != owner).unwrap().to_string();
    let (agent_a, agent_b) = (shard::user_agent(&owner), shard::user_agent(&other));
    let dir = tempfile::tempdir().unwrap();
    // A reaches the API server through the relay.
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG (run under tests/cluster/run)");
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let server = text.lines().find_map(|l| l.trim().strip_prefix("server: https://")).expect("a server line");
    let relay = Relay::start(server.parse().expect("host:port")).await;
    let relayed = dir.path().join("relayed.kubeconfig");
    std::fs::write(&relayed, text.replace(server, &format!("127.0.0.1:{}", relay.port))).unwrap();
    let (config_a, port_a) = replica_via(dir.path(), &owner, &ns, &repo.bare(), relayed.to_str().unwrap());
    let (config_b, port_b) = replica(dir.path(), &other, &ns, &repo.bare());
    let mut a = common::Daemon::start(&config_a, port_a, &[]);
    let b = common::Daemon::start(&config_b, port_b, &[]);
    let first = common::eventually(WAIT, || async { !a.logged("sync complete").is_empty() }).await;
    assert!(first, "A did not sync the first revision:\n{}", a.log_text());

    // A is writing the second revision when its connections are cut and new ones hang.
    let pushed = Timestamp::now();
    repo.push(&[("cms.yaml", &manifests("2", false))], "second: rewrite kept-*, remove gone-*");
    let a_applies = || writes(&ns).into_iter().filter(|w| w.agent == agent_a && w.received > pushed).count();
    let started = common::eventually(WAIT, || async { a_applies() >= 20 }).await;
    assert!(started, "A did not start the second sync:\n{}", a.log_text());
    relay.cut_and_hold();

    // A cannot renew: its Lease runs out, B takes the unit over and syncs it.
    let b_synced = common::eventually(WAIT, || async {
        let pruned = writes(&ns).iter().filter(|w| w.agent == agent_b && w.verb == "delete").count();
        pruned == REMOVED && !b.logged("sync complete").is_empty()
    })
    .await;
    assert!(b_synced, "B did not take the unit over:\n{}", b.log_text());
    assert!(
        a.events().iter().any(|e| e["message"] == "sharding: unit lease lost; unit stopped"),
        "A did not notice it lost the unit:\n{}",
        a.log_text()
    );

    // The held connections go through: A's next requests (its Lease reads) reach the API
    // server, and so would anything queued behind the hanging set-ups. A is killed before it
    // could legitimately win the unit back.
    let released = Timestamp::now();
    relay.release();
    let through = common::eventually(WAIT, || async {
        let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
        text.lines()
            .filter(|l| l.contains(agent_a.as_str()))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|e| e["requestReceivedTimestamp"].as_str()?.parse::<Timestamp>().ok())
            .filter(|at| *at > released)
            .count()
            >= 2
    })
    .await;
    assert!(through, "A sent nothing once the relay let it through:\n{}", a.log_text());
    a.kill();
    let (b_first, late) = writes_after_takeover(&env.client, &ns, "fence-hang-barrier", &agent_a, &agent_b).await;
    eprintln!("after B's first write ({b_first}) A wrote {}: {:?}", late.len(), &late[..late.len().min(10)]);
    assert!(late.is_empty(), "A wrote after the new owner's first write");
}

/// A unit's client (built as the daemon builds it, from the cluster config) sends writes
/// while its fence is open and refuses them once the published deadline less the margin has
/// passed: the ConfigMap keeps its value and the apiserver never saw the refused request;
/// reads and dry runs still pass.
#[tokio::test]
async fn a_unit_client_refuses_writes_past_its_fence_and_still_reads() {
    let (env, ns) = common::setup_ns("fence-client").await;
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG (run under tests/cluster/run)");
    let dir = tempfile::tempdir().unwrap();
    let config = gitward::config::Config::from_toml(
        &format!(
            "[cluster]\nkubeconfig = \"{kubeconfig}\"\n[daemon]\nstate_dir = \"{}\"\n\n{}",
            dir.path().display(),
            common::unit_toml("app", dir.path(), "", &ns, "")
        ),
        dir.path(),
        "test.toml",
    )
    .unwrap();
    let agent = format!("gitward-test-fence-{ns}");
    let registry = gitward::cluster::registry::Registry::connect(&config.clusters, &agent).await.unwrap();
    let fence = Fence::new("Lease/test/unit");
    let client = registry.fenced_client("default", &fence).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "f"}, "data": {"value": "1"}})).unwrap();

    let closed = api.create(&PostParams::default(), &cm).await;
    assert!(closed.as_ref().err().is_some_and(|e| e.to_string().contains("not sent")), "{closed:?}");
    fence.publish(boottime() + Duration::from_secs(60), Duration::from_secs(20));
    api.create(&PostParams::default(), &cm).await.expect("the fence is open");

    fence.publish(boottime() + Duration::from_secs(5), Duration::from_secs(20));
    let patch = json!({"data": {"value": "2"}});
    let refused = api.patch("f", &PatchParams::default(), &Patch::Merge(&patch)).await;
    let error = refused.expect_err("a write past the deadline less the margin");
    assert!(error.to_string().contains("Lease/test/unit"), "{error}");
    let deleted = api.delete("f", &Default::default()).await;
    assert!(deleted.is_err(), "a delete past the deadline is refused too");
    let read = api.get("f").await.expect("reads pass the fence");
    assert_eq!(read.data.unwrap()["value"], "1");
    let dry = api.patch("f", &PatchParams::default().dry_run(), &Patch::Merge(&patch)).await;
    assert_eq!(dry.expect("dry runs pass the fence").data.unwrap()["value"], "2");

    audit_barrier(&env.client, &ns, "fence-client-barrier").await;
    let of_agent = |all: Vec<Write>| all.into_iter().filter(|w| w.agent == agent).map(|w| w.verb).collect::<Vec<_>>();
    // The open create, nothing refused; and the dry run.
    assert_eq!(of_agent(writes(&ns)), ["create"], "the apiserver saw a refused write");
    assert_eq!(of_agent(dry_runs(&ns)), ["patch"], "the dry run did not reach the apiserver");
}

/// Two leader-mode replicas given one identity (`$POD_NAME` reused): the second finds the
/// Lease held under its identity by another process (the nonce on it is not its own) and
/// does not take it while the first renews; it leads only after the first dies and the
/// Lease expires. Before the nonce, both re-took the Lease as their own and both applied.
#[tokio::test]
async fn two_leader_replicas_with_one_identity_never_both_lead() {
    let (env, _, repo) = common::setup_repo("fence-twin").await;
    repo.push(&[("a.yaml", &common::cm("a", "1"))], "first");
    let lease = format!(
        "[daemon.leader_election]\nnamespace = \"{}\"\nname = \"gitward\"\nlease_duration = \"3s\"\nrenew_every = \"1s\"\n",
        env.namespace
    );
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "");
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (config_a, port_a) = common::daemon_config(dir_a.path(), "", &lease, &unit);
    let (config_b, port_b) = common::daemon_config(dir_b.path(), "", &lease, &unit);
    let mut a = common::Daemon::start(&config_a, port_a, &[("POD_NAME", "twin")]);
    let led = common::eventually(WAIT, || async { !a.logged("leadership acquired").is_empty() }).await;
    assert!(led, "A did not lead:\n{}", a.log_text());
    let b = common::Daemon::start(&config_b, port_b, &[("POD_NAME", "twin")]);
    let twin_seen = "another process holds this Lease under this replica's identity; not taking it while it renews (give each replica its own identity)";
    let noticed = common::eventually(WAIT, || async { !b.logged(twin_seen).is_empty() }).await;
    assert!(noticed, "B did not notice the Lease held under its identity:\n{}", b.log_text());
    assert!(b.logged("leadership acquired").is_empty(), "B took the Lease A holds:\n{}", b.log_text());

    // A dies without releasing: B leads once the Lease has expired, not before.
    a.kill();
    let killed = Timestamp::now();
    let took = common::eventually(WAIT, || async { !b.logged("leadership acquired").is_empty() }).await;
    assert!(took, "B never took the expired Lease:\n{}", b.log_text());
    let at: Timestamp = b.logged("leadership acquired")[0]["timestamp"].as_str().unwrap().parse().unwrap();
    assert!(at > killed, "B led at {at}, before A died at {killed}");
}

/// Shutdown releases every Lease the replica holds, the ones it won during its grace too: A
/// is told to stop (SIGTERM) in the middle of a long sync, and B is killed at the same moment;
/// while A finishes its sync (the grace) it takes B's unit Leases as they expire, and when it
/// exits no unit Lease names it. Before, the Leases to release were read before the grace,
/// so those won during it stayed held until they expired.
#[tokio::test]
async fn shutdown_releases_the_leases_won_during_its_grace() {
    const SMALL: usize = 6;
    const GRACE_OBJECTS: usize = 1500;
    let (env, ns) = common::setup_ns("fence-grace").await;
    let big = common::GitRepo::new();
    big.write(
        "cms.yaml",
        &(0..GRACE_OBJECTS).map(|i| common::cm(&format!("kept-{i}"), "1")).collect::<Vec<_>>().join("---\n"),
    );
    big.commit_and_push("first");
    let small: Vec<common::GitRepo> = (0..SMALL)
        .map(|i| {
            let repo = common::GitRepo::new();
            repo.push(&[("cm.yaml", &common::cm(&format!("small-{i}"), "1"))], "first");
            repo
        })
        .collect();
    let ids = ["grace-a", "grace-b"];
    let a_id = gitward::lease::assignment::unit_owner("big", ids.iter().copied()).unwrap().to_owned();
    let b_id = ids.iter().find(|i| **i != a_id).unwrap().to_string();
    let b_units: Vec<String> = (0..SMALL)
        .map(|i| format!("small-{i}"))
        .filter(|u| gitward::lease::assignment::unit_owner(u, ids.iter().copied()) == Some(b_id.as_str()))
        .collect();
    assert!(!b_units.is_empty(), "the names give B no unit; rename them");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG (run under tests/cluster/run)");
    let config = |identity: &str| {
        let port = common::free_port();
        let mut text = format!(
            "[cluster]\nkubeconfig = \"{kubeconfig}\"\nmax_in_flight = 1\n\n[daemon]\nstate_dir = \"{}\"\n\
             listen = \"127.0.0.1:{port}\"\ninterval = \"1h\"\nresync_interval = \"1h\"\n\n\
             [daemon.sharding]\nnamespace = \"{ns}\"\nlease_duration = \"4s\"\nidentity = \"{identity}\"\n\n{}",
            dir.path().join(format!("state-{identity}")).display(),
            common::unit_toml("big", &big.bare(), "", &ns, "health_timeout = \"0s\"")
        );
        for (i, repo) in small.iter().enumerate() {
            text.push_str(&common::unit_toml(&format!("small-{i}"), &repo.bare(), "", &ns, "health_timeout = \"0s\""));
        }
        let path = dir.path().join(format!("{identity}.toml"));
        std::fs::write(&path, text).unwrap();
        common::Daemon::start(&path, port, &[])
    };
    let mut a = config(&a_id);
    let mut b = config(&b_id);
    let (agent_a, agent_b) = (shard::user_agent(&a_id), shard::user_agent(&b_id));
    let synced = common::eventually(WAIT, || async {
        let all = writes(&ns);
        let b_small = all.iter().filter(|w| w.agent == agent_b && w.name.starts_with("small-")).count();
        b_small >= b_units.len() && a.events().iter().any(|e| e["message"] == "sync complete" && e["unit"] == "big")
    })
    .await;
    assert!(synced, "the units were not applied:\n{}\n{}", a.log_text(), b.log_text());

    // A second revision of the big unit: once A is writing it, A is told to stop and B dies.
    let pushed = Timestamp::now();
    big.write(
        "cms.yaml",
        &(0..GRACE_OBJECTS).map(|i| common::cm(&format!("kept-{i}"), "2")).collect::<Vec<_>>().join("---\n"),
    );
    big.commit_and_push("second");
    let writing = common::eventually(WAIT, || async {
        writes(&ns).iter().filter(|w| w.agent == agent_a && w.received > pushed).count() >= 20
    })
    .await;
    assert!(writing, "A did not start the second sync:\n{}", a.log_text());
    a.signal("TERM");
    b.kill();
    let deadline = std::time::Instant::now() + WAIT;
    while a.child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "A did not exit:\n{}", a.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let events = a.events();
    let shutting = events.iter().position(|e| e["message"] == "shutting down").expect("A logged its shutdown");
    let won: Vec<String> = events[shutting..]
        .iter()
        .filter(|e| e["message"] == "leadership acquired")
        .filter_map(|e| e["lease"].as_str()?.rsplit('/').next().map(str::to_owned))
        .collect();
    assert!(!won.is_empty(), "A won no Lease during its grace (the sync ended too soon):\n{}", a.log_text());
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client.clone(), &ns);
    let held: Vec<String> = leases
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|l| l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(a_id.as_str()))
        .filter_map(|l| l.metadata.name)
        .collect();
    eprintln!("A won {won:?} during its grace; still naming A after it exited: {held:?}");
    assert!(held.is_empty(), "A exited still holding {held:?} (won during the grace: {won:?})");
}

/// A Lease lost during the shutdown's grace stops the writes at once: a leader-mode replica
/// told to stop (SIGTERM) in the middle of a long sync goes on with that sync (the grace),
/// and when its Lease is taken meanwhile it sends at most the one write already in flight
/// (`max_in_flight = 1`) after it learns of the loss; the revision stays unfinished. Before,
/// the sync ran on to its end under a Lease someone else held.
#[tokio::test]
async fn a_lease_lost_during_the_shutdown_grace_stops_the_writes_at_once() {
    const OBJECTS: usize = 2000;
    let (env, ns, repo) = common::setup_repo("fence-lost").await;
    let revision =
        |value: &str| (0..OBJECTS).map(|i| common::cm(&format!("kept-{i}"), value)).collect::<Vec<_>>().join("---\n");
    repo.push(&[("cms.yaml", &revision("1"))], "first");
    let lease = format!(
        "[daemon.leader_election]\nnamespace = \"{ns}\"\nname = \"gitward\"\nlease_duration = \"3s\"\nrenew_every = \"1s\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &ns, "health_timeout = \"0s\"");
    let (config, port) = common::daemon_config(dir.path(), "[cluster]\nmax_in_flight = 1\n", &lease, &unit);
    let mut a = common::Daemon::start(&config, port, &[("POD_NAME", "lost-a")]);
    let first = common::eventually(WAIT, || async { !a.logged("sync complete").is_empty() }).await;
    assert!(first, "the first revision was not synced:\n{}", a.log_text());

    let pushed = Timestamp::now();
    repo.push(&[("cms.yaml", &revision("2"))], "second");
    let gitward_writes = || {
        writes(&ns).into_iter().filter(|w| w.agent.starts_with("gitward/") && w.received > pushed).collect::<Vec<_>>()
    };
    let writing = common::eventually(WAIT, || async { gitward_writes().len() >= 20 }).await;
    assert!(writing, "the second sync did not start:\n{}", a.log_text());
    a.signal("TERM");
    // Someone else takes the Lease (as a replica would once it expired).
    let leases = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client.clone(), &ns);
    // A renewal of A's between the read and the write makes the write a 409: read again.
    for attempt in 1.. {
        let mut held = leases.get("gitward").await.unwrap();
        let spec = held.spec.as_mut().unwrap();
        spec.holder_identity = Some("thief".into());
        spec.lease_duration_seconds = Some(3600);
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now()));
        match leases.replace("gitward", &PostParams::default(), &held).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < 10 => continue,
            Err(e) => panic!("take the Lease: {e}"),
        }
    }
    let deadline = std::time::Instant::now() + WAIT;
    while a.child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "A did not exit:\n{}", a.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    audit_barrier(&env.client, &ns, "fence-lost-barrier").await;

    let events = a.events();
    let shutting = events.iter().position(|e| e["message"] == "shutting down").expect("A logged its shutdown");
    let lost = events[shutting..]
        .iter()
        .find(|e| e["message"] == "leadership lost")
        .unwrap_or_else(|| panic!("A did not notice the Lease taken during its grace:\n{}", a.log_text()));
    let lost_at: Timestamp = lost["timestamp"].as_str().unwrap().parse().unwrap();
    let all = gitward_writes();
    let after: Vec<&Write> = all.iter().filter(|w| w.received > lost_at).collect();
    eprintln!(
        "A wrote {} objects of the second revision, {} after it lost the Lease at {lost_at}",
        all.len(),
        after.len()
    );
    assert!(after.len() <= 1, "A wrote after it lost the Lease: {:?}", &after[..after.len().min(10)]);
    assert!(all.len() < OBJECTS, "the sync ran to its end under a Lease another held");
    let _ = a.child.wait();
}
