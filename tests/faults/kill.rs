//! SIGKILL of a one-shot `gitward sync` (the real binary, real git, the real apiserver) at
//! points across a sync that renames 2,000 ConfigMaps, each followed by a normal sync; and of
//! the daemon at the same four points (after the widen, mid-apply, mid-prune, after the last
//! delete and before the narrow), each followed by a restart. The kill
//! points are found by watching the cluster, not by sleeping: just after the ApplySet parent
//! was widened, mid-apply, mid-prune, and after the last delete (around the narrow). After
//! every recovery the cluster equals git: every object git holds exists, none is left over
//! (0 orphans: no member git no longer holds), and no object git held was ever deleted
//! (0 wrong prunes, read from the apiserver's audit log).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};

/// Objects per generation; each round renames all of them.
const N: usize = 2000;
/// A liveness bound for one sync of 2 × N objects on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(300);

/// One file of `N` ConfigMaps named `<generation>-<i>`.
fn generation(generation: &str) -> String {
    (0..N)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {generation}-{i}\ndata:\n  g: {generation}\n"
            )
        })
        .collect()
}

/// `gitward sync`, started and left running; its log goes to `<config dir>/<name>.log`.
fn spawn_sync(config: &Path, name: &str) -> (Child, PathBuf) {
    let log = config.with_file_name(format!("{name}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["--log-format", "json", "sync", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .expect("gitward runs");
    (child, log)
}

/// A kill point: a condition on the cluster, checked about every 20 ms while the sync runs.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// The ApplySet parent's resourceVersion moved (the widen before any apply).
    Widened,
    /// At least this many objects of the new generation exist.
    Created(usize),
    /// At most this many objects of the old generation are left.
    Left(usize),
}

struct Cluster {
    client: kube::Client,
    ns: String,
}

impl Cluster {
    /// Names of the ConfigMaps in the namespace, by generation prefix (metadata only).
    async fn names(&self) -> Vec<String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        let list = api.list_metadata(&ListParams::default()).await.unwrap();
        let mut names: Vec<String> =
            list.items.into_iter().filter_map(|m| m.metadata.name).filter(|n| n != "kube-root-ca.crt").collect();
        names.sort();
        names
    }

    async fn count(&self, generation: &str) -> usize {
        let prefix = format!("{generation}-");
        self.names().await.iter().filter(|n| n.starts_with(&prefix)).count()
    }

    /// The parent's resourceVersion.
    async fn parent_version(&self) -> Option<String> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        api.get_opt("gitward-app").await.unwrap().and_then(|s| s.metadata.resource_version)
    }

    /// Waits until the parent records `revision` as the last applied (`gitward.dev/last-revision`):
    /// the daemon's last write of that sync, so that the parent's next change is the next
    /// sync's widen.
    async fn recorded(&self, revision: &str) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let recorded = common::eventually(LIMIT, || async {
            let parent = api.get_opt("gitward-app").await.unwrap();
            let annotations = parent.and_then(|p| p.metadata.annotations).unwrap_or_default();
            annotations.get("gitward.dev/last-revision").map(String::as_str) == Some(revision)
        })
        .await;
        assert!(recorded, "the parent never recorded {revision}");
    }

    /// Restarts the killed daemon (same config and state directory) and waits until it
    /// converged: ready, nothing of generation `old` left, the cluster equal to git at `new`.
    async fn restart_and_converge(&self, daemon: &mut common::Daemon, old: &str, new: &str) {
        daemon.restart();
        assert!(daemon.wait_ready(LIMIT).await, "the restarted daemon syncs: {}", daemon.log_text());
        let converged = common::eventually(LIMIT, || async { self.count(old).await == 0 }).await;
        assert!(converged, "{}", daemon.log_text());
        self.equals_git(new, &[new]).await;
    }

    /// Whether the parent's member record still lists objects of `generation` (the narrow after
    /// the prune has not been written yet).
    async fn record_lists(&self, generation: &str) -> bool {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let parent = api.get("gitward-app").await.unwrap();
        let record = parent.data.unwrap_or_default().remove("gitward.dev-members").map(|b| b.0).unwrap_or_default();
        String::from_utf8_lossy(&record).contains(&format!("/{generation}-"))
    }

    /// Kills `child` with SIGKILL as soon as the last ConfigMap of generation `old` is deleted,
    /// seen on a watch (milliseconds after the apiserver committed it, so before the daemon can
    /// have written the narrow, which follows that delete's response). Returns whether the kill
    /// came before the narrow, read from the parent's member record afterwards.
    async fn kill_after_last_delete(&self, child: &mut Child, old: &str) -> bool {
        use futures::StreamExt;
        use kube::api::{WatchEvent, WatchParams};
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        let prefix = format!("{old}-");
        let list = api.list_metadata(&ListParams::default()).await.unwrap();
        let mut left: std::collections::HashSet<String> =
            list.items.into_iter().filter_map(|m| m.metadata.name).filter(|n| n.starts_with(&prefix)).collect();
        let version = list.metadata.resource_version.unwrap();
        let stream = api.watch_metadata(&WatchParams::default().timeout(290), &version).await.unwrap();
        let mut stream = std::pin::pin!(stream);
        let deadline = tokio::time::Instant::now() + LIMIT;
        while !left.is_empty() {
            let event = tokio::time::timeout_at(deadline, stream.next()).await;
            match event.expect("the last delete within the limit").expect("the watch stays open").unwrap() {
                WatchEvent::Deleted(m) => {
                    left.remove(m.metadata.name.as_deref().unwrap_or_default());
                }
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
                _ => {}
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        self.record_lists(old).await
    }

    /// Kills `child` with SIGKILL once `point` holds; returns whether it was still running
    /// then (false: the sync ended first).
    async fn kill_at(&self, child: &mut Child, point: Point, old: &str, new: &str) -> bool {
        let before = self.parent_version().await;
        let deadline = Instant::now() + LIMIT;
        loop {
            if child.try_wait().unwrap().is_some() {
                return false;
            }
            let reached = match point {
                Point::Widened => self.parent_version().await != before,
                Point::Created(n) => self.count(new).await >= n,
                Point::Left(n) => self.count(old).await <= n,
            };
            if reached {
                let running = child.try_wait().unwrap().is_none();
                let _ = child.kill();
                let _ = child.wait();
                return running;
            }
            assert!(Instant::now() < deadline, "{point:?} not reached within {LIMIT:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The cluster equals git (`generation` only, every one of the N, all members of the
    /// unit's ApplySet), and no ConfigMap of `protected` generations was ever deleted.
    async fn equals_git(&self, generation: &str, protected: &[&str]) {
        let names = self.names().await;
        let expected: Vec<String> = {
            let mut e: Vec<String> = (0..N).map(|i| format!("{generation}-{i}")).collect();
            e.sort();
            e
        };
        let orphans: Vec<&String> = names.iter().filter(|n| !expected.contains(n)).collect();
        assert!(orphans.is_empty(), "{} orphans, e.g. {:?}", orphans.len(), &orphans[..orphans.len().min(5)]);
        assert_eq!(names.len(), N, "objects git holds are missing");
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns);
        let members = api
            .list_metadata(&ListParams::default().labels("applyset.kubernetes.io/part-of"))
            .await
            .unwrap()
            .items
            .len();
        assert_eq!(members, N, "every object is a member of the ApplySet");
        let wrong = wrong_prunes(&self.ns, protected);
        assert!(wrong.is_empty(), "{} wrong prunes, e.g. {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
    }
}

/// Successful deletes (by anyone) of ConfigMaps in `ns` whose generation is in `protected`, from the
/// apiserver's audit log.
fn wrong_prunes(ns: &str, protected: &[&str]) -> Vec<String> {
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["verb"] == "delete" && e["stage"] == "ResponseComplete")
        .filter(|e| e["responseStatus"]["code"].as_u64().is_some_and(|c| c < 300))
        .filter(|e| e["objectRef"]["resource"] == "configmaps" && e["objectRef"]["namespace"] == ns)
        .filter_map(|e| e["objectRef"]["name"].as_str().map(String::from))
        .filter(|name| protected.iter().any(|g| name.starts_with(&format!("{g}-"))))
        .collect()
}

#[tokio::test]
async fn sigkill_at_points_of_a_rename_of_2000_objects_loses_nothing_and_leaves_no_orphan() {
    let env = common::setup("kill-rename").await;
    let cluster = Cluster { client: env.client.clone(), ns: env.namespace.clone() };
    let repo = common::GitRepo::new();
    repo.push(&[("objects.yaml", &generation("g0"))], "g0");
    let dir = tempfile::tempdir().unwrap();
    // Every round renames every object: the whole previous generation is pruned.
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "max_prune_fraction = 1.0");
    let config = common::config_file(dir.path(), &unit);
    let first = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    cluster.equals_git("g0", &["g0"]).await;

    let rounds =
        [("g1", Point::Widened), ("g2", Point::Created(N / 4)), ("g3", Point::Left(N * 3 / 4)), ("g4", Point::Left(0))];
    let mut old = "g0";
    let mut killed = Vec::new();
    for (new, point) in rounds {
        repo.push(&[("objects.yaml", &generation(new))], new);
        let (mut child, log) = spawn_sync(&config, new);
        let was_running = cluster.kill_at(&mut child, point, old, new).await;
        if was_running {
            killed.push(new);
        }
        eprintln!(
            "{new}: {point:?}, killed while running: {was_running}; then {} of {old} and {} of {new} exist",
            cluster.count(old).await,
            cluster.count(new).await
        );
        // The kill after the last delete may come after the sync ended; every other kill
        // point is mid-sync.
        assert!(
            was_running || matches!(point, Point::Left(0)),
            "the sync ended before {point:?}: {}",
            std::fs::read_to_string(&log).unwrap()
        );

        let recovery = common::gitward(&["sync"], &config, LIMIT);
        assert!(matches!(recovery.code, Some(0)), "recovery sync after {point:?}: {}", recovery.stderr);
        cluster.equals_git(new, &[new]).await;
        old = new;
    }
    eprintln!("killed mid-sync in rounds {killed:?}");
}

/// The daemon (`gitward run`, applying pushes as its repository watch sees them) killed with
/// SIGKILL mid-apply and then mid-prune of a rename of 2,000 ConfigMaps; a new daemon on the
/// same state directory converges each time: cluster equals git, 0 orphans, 0 wrong prunes.
#[tokio::test]
async fn sigkill_of_the_daemon_mid_rename_then_a_restart_converges() {
    let env = common::setup("kill-daemon").await;
    let cluster = Cluster { client: env.client.clone(), ns: env.namespace.clone() };
    let repo = common::GitRepo::new();
    repo.push(&[("objects.yaml", &generation("d0"))], "d0");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) =
        common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", "max_prune_fraction = 1.0");
    let mut daemon = common::Daemon::ready(&config, port, LIMIT).await;
    cluster.equals_git("d0", &["d0"]).await;

    let mut old = "d0";
    for (new, point) in [("d1", Point::Created(N / 4)), ("d2", Point::Left(N * 3 / 4))] {
        repo.push(&[("objects.yaml", &generation(new))], new);
        assert!(cluster.kill_at(&mut daemon.child, point, old, new).await, "the daemon exited by itself");
        eprintln!(
            "{new}: daemon killed at {point:?}; {} of {old} and {} of {new} exist",
            cluster.count(old).await,
            cluster.count(new).await
        );
        cluster.restart_and_converge(&mut daemon, old, new).await;
        old = new;
    }
}

/// The daemon killed with SIGKILL at the two points of a pushed rename of 2,000 ConfigMaps that
/// the test above does not reach: just after the inventory widen (before the applies), and
/// between the last prune delete and the narrow. A new daemon on the same state directory
/// converges each time: cluster equals git, 0 orphans, 0 wrong prunes.
#[tokio::test]
async fn sigkill_of_the_daemon_after_the_widen_and_before_the_narrow_then_a_restart_converges() {
    let env = common::setup("kill-daemon-edges").await;
    let cluster = Cluster { client: env.client.clone(), ns: env.namespace.clone() };
    let repo = common::GitRepo::new();
    let e0 = repo.push(&[("objects.yaml", &generation("e0"))], "e0");
    let dir = tempfile::tempdir().unwrap();
    let (config, port) =
        common::app_daemon_config(dir.path(), &repo.bare(), &env.namespace, "", "max_prune_fraction = 1.0");
    let mut daemon = common::Daemon::ready(&config, port, LIMIT).await;
    cluster.equals_git("e0", &["e0"]).await;

    // After the widen: the parent written, (nearly) nothing of the new generation applied yet.
    cluster.recorded(&e0).await;
    let e1 = repo.push(&[("objects.yaml", &generation("e1"))], "e1");
    let before = cluster.parent_version().await;
    let deadline = Instant::now() + LIMIT;
    while cluster.parent_version().await == before {
        assert!(Instant::now() < deadline, "no widen within {LIMIT:?}: {}", daemon.log_text());
    }
    daemon.kill();
    let (old_left, new_applied) = (cluster.count("e0").await, cluster.count("e1").await);
    eprintln!("e1: daemon killed after the widen: {old_left} of e0 and {new_applied} of e1 exist");
    assert!(new_applied < N && old_left == N, "the kill came mid-sync, before any prune");
    cluster.restart_and_converge(&mut daemon, "e0", "e1").await;

    // After the last delete, before the narrow.
    cluster.recorded(&e1).await;
    repo.push(&[("objects.yaml", &generation("e2"))], "e2");
    let before_narrow = cluster.kill_after_last_delete(&mut daemon.child, "e1").await;
    eprintln!(
        "e2: daemon killed after the last delete of e1; the narrow {} written",
        if before_narrow { "had not been" } else { "had already been" }
    );
    assert_eq!(cluster.count("e2").await, N, "every object applied before the prune");
    cluster.restart_and_converge(&mut daemon, "e1", "e2").await;
    let narrowed = common::eventually(LIMIT, || async { !cluster.record_lists("e1").await }).await;
    assert!(narrowed, "the restarted daemon narrows the inventory: {}", daemon.log_text());
    assert!(before_narrow, "the kill came after the narrow: the point was not reached");
}
