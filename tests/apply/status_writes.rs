//! Controllers' status writes are neither conflicts nor drift: 20 Deployments whose status a
//! loop keeps writing (as a Deployment controller, an HPA or a busy operator does) while the
//! real `gitward sync` binary syncs them again and again, with real git and the real apiserver.
//!
//! - `update` mode: every sync exits 0 with no `conflict` — the precondition of the metadata
//!   patch is the resourceVersion the cache holds when the request is sent, and a 409 whose
//!   object kept its generation and gitward's label and hash is sent once more — including
//!   syncs that change the image (`GET` + `PUT`).
//! - server-side apply mode: the objects are `unchanged`, never `drift-corrected`, however the
//!   resourceVersion moved; a real change by someone else still is `drift-corrected`.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};

/// Deployments in the revision.
const N: usize = 20;
/// Syncs under status writes.
const SYNCS: usize = 5;
const WAIT: Duration = Duration::from_secs(120);

fn deployments(image: &str) -> String {
    (0..N).map(|i| format!("---\n{}", common::deployment(&format!("web-{i}"), image, 1))).collect()
}

/// The status writer: merge patches of `status` (a new `collisionCount` each time, a field the
/// Deployment controller writes) on every Deployment in turn, as fast as the apiserver answers,
/// until `stop`. Counts its successful writes in `writes`. Written by hand, beside the
/// deployment controller: a storm of status writes is a load no controller here makes (the
/// controller writes a status when the rollout moves).
async fn status_writer(api: Api<Deployment>, stop: Arc<AtomicBool>, writes: Arc<AtomicUsize>) {
    let params = PatchParams { field_manager: Some("status-writer".into()), ..Default::default() };
    let mut n = 0i64;
    while !stop.load(Ordering::SeqCst) {
        for i in 0..N {
            n += 1;
            let status = serde_json::json!({"status": {"collisionCount": n % 1000}});
            if api.patch_status(&format!("web-{i}"), &params, &Patch::Merge(&status)).await.is_ok() {
                writes.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// A unit of 20 Deployments in `extra`'s apply mode, synced once by `gitward sync`, then a
/// status writer started on them. Returns the config, repo, env and the writer's handles.
struct Fixture {
    env: common::TestEnv,
    repo: common::GitRepo,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicUsize>,
    writer: tokio::task::JoinHandle<()>,
}

impl Fixture {
    async fn start(prefix: &str, extra: &str) -> Self {
        let (env, _, repo) = common::setup_repo(prefix).await;
        repo.push(&[("web.yaml", &deployments("nginx:1.0"))], "20 Deployments");
        let dir = tempfile::tempdir().unwrap();
        let config =
            common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, extra));
        let first = sync(&config).await;
        assert_eq!(first.code, Some(0), "{}{}", first.stdout, first.stderr);
        assert!(first.stdout.contains(&format!("({N} created)")), "{}", first.stdout);
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicUsize::new(0));
        let api: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
        let writer = tokio::spawn(status_writer(api, stop.clone(), writes.clone()));
        Self { env, repo, config, _dir: dir, stop, writes, writer }
    }

    /// Waits until the writer has written every Deployment's status once more.
    async fn writer_running(&self) {
        let from = self.writes.load(Ordering::SeqCst);
        let running = common::eventually(WAIT, || async { self.writes.load(Ordering::SeqCst) >= from + N }).await;
        assert!(running, "the status writer writes");
    }

    /// One `gitward sync` while the writer writes; asserts it wrote during the sync.
    async fn sync_under_writes(&self) -> common::Run {
        self.writer_running().await;
        let before = self.writes.load(Ordering::SeqCst);
        let run = sync(&self.config).await;
        let during = self.writes.load(Ordering::SeqCst) - before;
        assert!(during > 0, "status written during the sync");
        eprintln!("{} status writes during the sync: {}", during, run.stdout.trim());
        run
    }

    async fn stop(self) -> (common::TestEnv, common::GitRepo) {
        self.stop.store(true, Ordering::SeqCst);
        self.writer.await.unwrap();
        (self.env, self.repo)
    }
}

/// `gitward sync` on a blocking thread, so the status writer keeps running meanwhile.
async fn sync(config: &std::path::Path) -> common::Run {
    let config = config.to_path_buf();
    tokio::task::spawn_blocking(move || common::gitward(&["sync"], &config, WAIT)).await.unwrap()
}

async fn images(client: &kube::Client, ns: &str) -> Vec<String> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for i in 0..N {
        let d = api.get(&format!("web-{i}")).await.unwrap();
        let spec = d.spec.unwrap().template.spec.unwrap();
        out.push(spec.containers[0].image.clone().unwrap_or_default());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_mode_syncs_cleanly_while_status_is_written() {
    let fx = Fixture::start("status-upd", "apply_mode = \"update\"").await;
    for round in 0..SYNCS {
        // Rounds 1 and 3 change the image: `GET` + `PUT` meet the status writes too.
        let image = match round {
            1 | 2 => "nginx:1.1",
            3 | 4 => "nginx:1.2",
            _ => "nginx:1.0",
        };
        let changed = matches!(round, 1 | 3);
        if changed {
            fx.repo.write("web.yaml", &deployments(image));
            fx.repo.commit_and_push(&format!("image {image}"));
        }
        let run = fx.sync_under_writes().await;
        assert_eq!(run.code, Some(0), "sync {round}: {}{}", run.stdout, run.stderr);
        let expected = if changed { format!("({N} configured)") } else { format!("({N} unchanged)") };
        assert!(run.stdout.contains(&expected), "sync {round}: {}", run.stdout);
        assert!(!run.stderr.contains("conflict:"), "sync {round}: {}", run.stderr);
        assert_eq!(images(&fx.env.client, &fx.env.namespace).await, vec![image.to_string(); N], "sync {round}");
    }
    fx.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_tells_a_status_write_from_a_correction() {
    let fx = Fixture::start("status-ssa", "").await;
    for round in 0..SYNCS {
        let run = fx.sync_under_writes().await;
        assert_eq!(run.code, Some(0), "sync {round}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(&format!("({N} unchanged)")), "sync {round}: {}", run.stdout);
    }
    // A change behind gitward's back (another manager takes the image) is still corrected and
    // reported, status writes going on.
    let api: Api<Deployment> = Api::namespaced(fx.env.client.clone(), &fx.env.namespace);
    let edit =
        serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "evil:1"}]}}}});
    let params = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    api.patch("web-7", &params, &Patch::Strategic(&edit)).await.unwrap();
    let run = fx.sync_under_writes().await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(&format!("(1 drift-corrected, {} unchanged)", N - 1)), "{}", run.stdout);
    let (env, _repo) = fx.stop().await;
    assert_eq!(images(&env.client, &env.namespace).await, vec!["nginx:1.0".to_string(); N]);
}
