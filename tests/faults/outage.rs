//! The apiserver stopped for 20 s in the middle of a large sync of `gitward run`, and started
//! again on the same etcd data (a private cluster, `common::OwnCluster`, so the shared one is
//! not disturbed). The daemon is never restarted: it converges to git, its metadata watches
//! resume, and drift detection still works afterwards — a change behind its back is healed
//! with the poll and the resync an hour away.

use crate::common;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};

/// ConfigMaps in the revision.
const N: usize = 2000;
const OUTAGE: Duration = Duration::from_secs(20);
/// A liveness bound for a sync of N objects on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(240);
const SECRET: &str = "gitward-canary-faults-outage";

fn objects() -> String {
    (0..N)
        .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: o-{i}\ndata:\n  value: git\n"))
        .collect()
}

/// Names of the ConfigMaps in `default` that belong to the unit's ApplySet, and of all of them.
async fn names(client: &kube::Client) -> Option<(usize, usize)> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let all = api.list_metadata(&ListParams::default()).await.ok()?;
    let members = api.list_metadata(&ListParams::default().labels("applyset.kubernetes.io/part-of")).await.ok()?;
    let all = all.items.iter().filter(|m| m.metadata.name.as_deref() != Some("kube-root-ca.crt")).count();
    Some((members.items.len(), all))
}

async fn value(client: &kube::Client, name: &str) -> Option<String> {
    common::cm_value_or_none(client, "default", name).await
}

#[tokio::test]
async fn the_daemon_rides_out_an_apiserver_outage_mid_sync_and_still_heals_drift_after() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = common::OwnCluster::start(&dir.path().join("cluster"), common::free_port());
    let (kubeconfig, client) = (cluster.kubeconfig(), cluster.admin().await);
    let repo = common::GitRepo::new();
    repo.push(&[("objects.yaml", &objects()), ("secret.yaml", &common::secret_yaml("s", SECRET))], "2,000 ConfigMaps");
    // One request in flight, so the first sync of 2,000 objects lasts long enough that the
    // outage always falls inside it, even on a fast machine.
    let (config, port) = common::daemon_config(
        dir.path(),
        &format!("[cluster]\nkubeconfig = \"{}\"\nmax_in_flight = 1\n", kubeconfig.display()),
        "",
        &common::unit_toml("app", &repo.bare(), "", "default", ""),
    );
    let mut daemon = common::Daemon::start(&config, port, &[]);

    // Mid-sync: a quarter of the objects applied.
    let started = Instant::now();
    let mid = common::eventually(LIMIT, || async { names(&client).await.is_some_and(|(m, _)| m >= N / 4) }).await;
    assert!(mid, "the first sync did not get a quarter through: {}", daemon.log_text());
    let applied_before = names(&client).await.unwrap().0;
    // Killed, not stopped: a graceful stop drains requests for up to 20 s under load, and the
    // first sync, and the drift resync after it, could end before the outage began.
    let stopped = cluster.kill();
    let stopped_at = started.elapsed();
    // The daemon notices (its sync fails) and rides the outage out, up and not ready.
    let reported = |e: &serde_json::Value| e["message"] == "sync failed" || e["message"] == "object failed";
    let failed = common::eventually(OUTAGE, || async { daemon.events().iter().any(reported) }).await;
    assert!(failed, "the outage was not reported: {}", daemon.log_text());
    tokio::time::sleep(OUTAGE.saturating_sub(started.elapsed() - stopped_at)).await;
    daemon.assert_up_but_not_ready();
    let _back = stopped.start();
    let restarted = Instant::now();
    eprintln!(
        "apiserver stopped {:.1} s into the sync with {applied_before} of {N} applied, for {OUTAGE:?}",
        stopped_at.as_secs_f64()
    );

    let client = common::OwnCluster::client(&kubeconfig).await;
    let converged = common::eventually(LIMIT, || async { names(&client).await == Some((N, N)) }).await;
    assert!(converged, "did not converge: {:?}: {}", names(&client).await, daemon.log_text());
    assert!(daemon.wait_ready(LIMIT).await, "not ready after the outage: {}", daemon.log_text());
    eprintln!("converged {:.1} s after the apiserver came back", restarted.elapsed().as_secs_f64());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    assert!(secrets.get_opt("s").await.unwrap().is_some());

    // The watches resumed: a change behind gitward's back is seen and healed, with no poll or
    // resync for an hour. A self-heal is started by a watch event alone, so each edit's heal
    // (logged after the edit) shows that the watch saw it, even should a sync (a retry) run
    // meanwhile.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["o-0", &format!("o-{}", N - 1)] {
        let heals_before = daemon.logged("self-heal of drifted objects").len();
        let patch = serde_json::json!({"data": {"value": "hand-edit"}});
        cms.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        let healed = common::eventually(Duration::from_secs(30), || async {
            value(&client, name).await.as_deref() == Some("git")
                && daemon.logged("self-heal of drifted objects").len() > heals_before
        })
        .await;
        assert!(healed, "{name}: drift after the outage not healed by the watch: {}", daemon.log_text());
    }
    assert!(daemon.child.try_wait().unwrap().is_none(), "never restarted");
    assert_eq!(names(&client).await, Some((N, N)), "nothing lost, nothing extra");
    common::assert_no_secret(&daemon.log_text(), SECRET);
}

/// A member deleted and another edited by hand while gitward's watches were down (the apiserver
/// restarted meanwhile, so the watches resume with a 410 Gone and a relist) are healed by the
/// relist's drift, with the poll and the resync an hour away. The edits are made through the
/// apiserver while it listens on another port, which the daemon does not know: its watches
/// cannot see them as events, only in the relist once it is back on the daemon's port.
#[tokio::test]
async fn a_member_deleted_while_the_apiserver_restarts_is_healed_by_the_relist() {
    const LIMIT: Duration = Duration::from_secs(120);
    let mut four = FourMembers::synced(LIMIT).await;
    let syncs_before = four.daemon.logged("sync triggered").len();

    // The hand edits, made while the daemon's apiserver is down.
    let cms = four.down().await;
    cms.delete("b", &Default::default()).await.unwrap();
    let patch = serde_json::json!({"data": {"value": "hand-edit"}});
    cms.patch("c", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let client = four.back().await;
    let daemon = &mut four.daemon;

    let healed = common::eventually(LIMIT, || async {
        names(&client).await == Some((4, 4))
            && value(&client, "b").await.as_deref() == Some("git")
            && value(&client, "c").await.as_deref() == Some("git")
    })
    .await;
    assert!(healed, "not healed after the relist: {:?}: {}", names(&client).await, daemon.log_text());
    let heals = daemon.logged("self-heal of drifted objects");
    assert!(!heals.is_empty(), "healed by a self-heal: {}", daemon.log_text());
    assert_eq!(daemon.logged("sync triggered").len(), syncs_before, "no whole sync ran: {}", daemon.log_text());
    assert!(daemon.child.try_wait().unwrap().is_none(), "never restarted");
}

/// Only the member gitward wrote last is deleted while the apiserver restarts, and nothing
/// else changes: every member the relist lists is older than gitward's write of the deleted
/// one, which is exactly how a member created after the list was taken looks. The relist
/// still finds it deleted (it reads such a member again) and the daemon re-creates it, with
/// the poll and the resync an hour away; no other member is written.
#[tokio::test]
async fn deleting_only_the_newest_written_member_while_the_apiserver_restarts_is_healed() {
    const LIMIT: Duration = Duration::from_secs(60);
    let mut four = FourMembers::synced(LIMIT).await;
    let versions = member_versions(&four.client).await;
    let newest = versions.iter().max_by_key(|(_, rv)| *rv).map(|(name, _)| name.clone()).unwrap();
    let syncs_before = four.daemon.logged("sync triggered").len();

    // The newest member deleted while the daemon's apiserver is down.
    let cms = four.down().await;
    cms.delete(&newest, &Default::default()).await.unwrap();
    let client = four.back().await;
    let daemon = &mut four.daemon;

    let healed = common::eventually(LIMIT, || async {
        names(&client).await == Some((4, 4)) && value(&client, &newest).await.as_deref() == Some("git")
    })
    .await;
    assert!(healed, "{newest} not re-created after the relist: {:?}: {}", names(&client).await, daemon.log_text());
    assert!(!daemon.logged("self-heal of drifted objects").is_empty(), "healed by a self-heal: {}", daemon.log_text());
    assert_eq!(daemon.logged("sync triggered").len(), syncs_before, "no whole sync ran: {}", daemon.log_text());
    let after = member_versions(&client).await;
    for (name, rv) in &versions {
        if *name != newest {
            assert_eq!(after.get(name), Some(rv), "{name} was not written: {}", daemon.log_text());
        }
    }
    assert!(daemon.child.try_wait().unwrap().is_none(), "never restarted");
}

/// A daemon that synced four ConfigMaps `a`–`d` of one unit to an apiserver of the test's own
/// (so the test can restart it), ready for an outage.
struct FourMembers {
    dir: tempfile::TempDir,
    api_port: u16,
    /// The apiserver on the daemon's port; `None` while it is down.
    cluster: Option<common::OwnCluster>,
    /// The apiserver on another port, where the hand edits are made, while [`FourMembers::down`].
    elsewhere: Option<common::OwnCluster>,
    client: kube::Client,
    daemon: common::Daemon,
}

impl FourMembers {
    /// Starts the apiserver and the daemon and waits, up to `limit`, for the first sync.
    async fn synced(limit: Duration) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let api_port = common::free_port();
        let cluster = common::OwnCluster::start(&dir.path().join("cluster"), api_port);
        let kubeconfig = dir.path().join("cluster/kubeconfig");
        let client = common::OwnCluster::client(&kubeconfig).await;
        let repo = common::GitRepo::new();
        for name in ["a", "b", "c", "d"] {
            repo.write(&format!("{name}.yaml"), &common::cm(name, "git"));
        }
        repo.commit_and_push("four ConfigMaps");
        let (config, port) = common::daemon_config(
            dir.path(),
            &format!("[cluster]\nkubeconfig = \"{}\"\n", kubeconfig.display()),
            "",
            &common::unit_toml("app", &repo.bare(), "", "default", ""),
        );
        let daemon = common::Daemon::ready(&config, port, limit).await;
        let synced = common::eventually(limit, || async { names(&client).await == Some((4, 4)) }).await;
        assert!(synced, "first sync: {}", daemon.log_text());
        Self { dir, api_port, cluster: Some(cluster), elsewhere: None, client, daemon }
    }

    /// Stops the daemon's apiserver and starts it on another port, which the daemon does not
    /// know: its watches cannot see what is done there. Returns the ConfigMaps of `default`
    /// there.
    async fn down(&mut self) -> Api<ConfigMap> {
        self.cluster.take().expect("up").kill();
        let cluster_dir = self.dir.path().join("cluster");
        self.elsewhere = Some(common::OwnCluster::start(&cluster_dir, common::free_port()));
        let by_hand = common::OwnCluster::client(&cluster_dir.join("kubeconfig")).await;
        Api::namespaced(by_hand, "default")
    }

    /// Stops the apiserver on the other port and starts it on the daemon's again: the
    /// daemon's watches resume with a 410 Gone and a relist. Returns a client of it.
    async fn back(&mut self) -> kube::Client {
        self.elsewhere.take().expect("down").kill();
        let cluster_dir = self.dir.path().join("cluster");
        self.cluster = Some(common::OwnCluster::start(&cluster_dir, self.api_port));
        common::OwnCluster::client(&cluster_dir.join("kubeconfig")).await
    }
}

/// The resourceVersion of every member ConfigMap in `default`, by name.
async fn member_versions(client: &kube::Client) -> std::collections::BTreeMap<String, u64> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let members = api.list_metadata(&ListParams::default().labels("applyset.kubernetes.io/part-of")).await.unwrap();
    members
        .items
        .iter()
        .map(|m| {
            let rv = m.metadata.resource_version.as_deref().unwrap_or_default().parse().unwrap();
            (m.metadata.name.clone().unwrap_or_default(), rv)
        })
        .collect()
}
