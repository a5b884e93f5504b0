//! A read-only state directory, through the real `gitward` binary, real git and the real
//! apiserver. The directory is made read-only for gitward alone: it runs in a private mount
//! namespace (`unshare --mount --map-root-user`) where the state directory is bind-mounted onto
//! itself read-only, which holds for root too (file modes do not). The sync fails with the file
//! system's own error, the last good revision stays applied, the daemon neither exits nor spins,
//! and once the directory is writable again everything converges without a restart.
//!
//! A full state directory likewise: a small tmpfs mounted on it by the test and filled until the
//! kernel answers `ENOSPC`, while the new revision needs more space; freed, everything converges.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

const WAIT: Duration = Duration::from_secs(60);
/// The value of the units' Secret: it must appear in no output of any run.
const SECRET: &str = "gitward-canary-faults-state";

/// The command prefix that runs its arguments with `dir` read-only (see the module doc).
fn read_only(dir: &Path) -> Vec<String> {
    let script = r#"mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@""#;
    ["unshare", "--mount", "--map-root-user", "sh", "-c", script, dir.to_str().unwrap()].map(String::from).to_vec()
}

/// Makes the bind mount of `dir` writable again in the mount namespace of process `pid`.
fn make_writable(pid: u32, dir: &Path) {
    let out = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-U", "-m", "--preserve-credentials", "mount", "-o", "remount,bind,rw"])
        .args([dir, dir])
        .output()
        .expect("nsenter runs");
    assert!(
        out.status.success(),
        "remount read-write in gitward's namespace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The names of the ConfigMaps in `ns` (without the apiserver's own).
async fn names(client: &kube::Client, ns: &str) -> Vec<String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    names.sort();
    names
}

/// A unit `app` (ConfigMaps `a` and `b`, and the canary Secret) synced once by `gitward sync`,
/// its state under `dir/state`, and a second revision pushed: `b` leaves git, `c` (and `more`)
/// joins.
struct OneShot {
    env: common::TestEnv,
    _repo: common::GitRepo,
    config: std::path::PathBuf,
    runs: Vec<common::Run>,
}

impl OneShot {
    async fn new(prefix: &str, dir: &Path, more: &[(&str, String)]) -> Self {
        let (env, _, repo) = common::setup_repo(prefix).await;
        repo.write("a.yaml", &common::cm("a", "1"));
        repo.push(&[("b.yaml", &common::cm("b", "1")), ("s.yaml", &common::secret_yaml("s", SECRET))], "first");
        let config = common::config_file(dir, &common::unit_toml("app", &repo.bare(), "", &env.namespace, ""));
        let first = common::gitward(&["sync"], &config, WAIT);
        assert_eq!(first.code, Some(0), "{}", first.stderr);
        repo.remove("b.yaml");
        repo.write("c.yaml", &common::cm("c", "1"));
        for (path, content) in more {
            repo.write(path, content);
        }
        repo.commit_and_push("second");
        Self { env, _repo: repo, config, runs: vec![first] }
    }

    /// `gitward sync` of the second revision, run by `wrapper`, fails: exit 2, `error` in its
    /// `sync failed` event, and the first revision stays applied, nothing pruned.
    async fn fails(&mut self, wrapper: &[&str], error: &str) {
        let run = common::gitward_in(wrapper, &["sync"], &self.config, WAIT);
        assert_eq!(run.code, Some(2), "{}", run.stderr);
        let failed = common::log_events(&run.stderr, "sync failed").next().unwrap_or_else(|| panic!("{}", run.stderr));
        let said = failed["error"].as_str().unwrap_or_default();
        assert!(said.contains(error), "the error says why: {said}");
        assert_eq!(names(&self.env.client, &self.env.namespace).await, ["a", "b"], "the last good revision stays");
        self.runs.push(run);
    }

    /// The fault gone, the next `gitward sync` applies the second revision; no run printed the
    /// Secret.
    async fn converges(&mut self) {
        let run = common::gitward(&["sync"], &self.config, WAIT);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert_eq!(names(&self.env.client, &self.env.namespace).await, ["a", "c"]);
        self.runs.push(run);
        for run in &self.runs {
            common::assert_no_secret(&format!("{}{}", run.stdout, run.stderr), SECRET);
        }
    }
}

/// Units `old` (ConfigMaps `old-a`, `old-b` and the canary Secret; synced once by `gitward sync
/// --sync old`) and `new` (`new-n`, never synced; other credentials, so its mirror is its own,
/// not `old`'s, and does not exist yet) of one repository, for `gitward run` with its
/// state under `dir/state`; then a second revision of `old` pushed: `old-b` leaves git, `old-c`
/// (and `more`) joins.
struct TwoUnits {
    env: common::TestEnv,
    _repo: common::GitRepo,
    config: std::path::PathBuf,
    port: u16,
    first: common::Run,
}

impl TwoUnits {
    async fn new(prefix: &str, dir: &Path, more: &[(&str, String)]) -> Self {
        let env = common::setup(prefix).await;
        let ns = env.namespace.as_str();
        let repo = common::GitRepo::new();
        repo.write("old/a.yaml", &common::cm("old-a", "1"));
        repo.write("old/b.yaml", &common::cm("old-b", "1"));
        repo.write("new/n.yaml", &common::cm("new-n", "1"));
        repo.push(&[("old/s.yaml", &common::secret_yaml("s", SECRET))], "first");
        let units = common::unit_toml("old", &repo.bare(), "old", ns, "")
            + &common::unit_toml("new", &repo.bare(), "new", ns, "[sync.git]\nusername = \"new\"\n");
        let (config, port) = common::daemon_config(dir, "", "", &units);
        let first = common::gitward(&["sync", "--sync", "old"], &config, WAIT);
        assert_eq!(first.code, Some(0), "{}", first.stderr);
        repo.remove("old/b.yaml");
        repo.write("old/c.yaml", &common::cm("old-c", "1"));
        for (path, content) in more {
            repo.write(path, content);
        }
        repo.commit_and_push("second");
        Self { env, _repo: repo, config, port, first }
    }

    /// The daemon, started on the faulty state directory, retries both units with backoff —
    /// `old`'s syncs fail, `new` cannot start, each at least three times with `error` — and
    /// stays up (`/healthz` 200) but not ready, with the first revision still applied.
    async fn retries_without_loss(&self, daemon: &mut common::Daemon, error: &str) {
        let count = |daemon: &common::Daemon, message: &str, unit: &str| {
            daemon.events().iter().filter(|e| e["message"] == message && e["unit"] == unit).count()
        };
        let retried = common::eventually(WAIT, || async {
            count(daemon, "sync failed", "old") >= 3 && count(daemon, "unit not started", "new") >= 3
        })
        .await;
        assert!(retried, "both units are retried: {}", daemon.log_text());
        daemon.assert_up_but_not_ready();
        for message in ["sync failed", "unit not started"] {
            let event = daemon.logged(message).into_iter().next().unwrap();
            assert!(event["error"].as_str().unwrap_or_default().contains(error), "{event}");
        }
        let ns = &self.env.namespace;
        assert_eq!(names(&self.env.client, ns).await, ["old-a", "old-b"], "the last good revision stays applied");
        // Backoff, not a hot loop: 1 s doubling (with jitter) gives a handful of attempts, not hundreds.
        let attempts = count(daemon, "sync failed", "old");
        assert!(attempts < 10, "{attempts} attempts: {}", daemon.log_text());
    }

    /// The fault repaired, both units converge without a restart, and no output held the Secret.
    async fn converges(&self, daemon: &mut common::Daemon) {
        let (client, ns) = (&self.env.client, self.env.namespace.as_str());
        let converged =
            common::eventually(WAIT, || async { names(client, ns).await == ["new-n", "old-a", "old-c"] }).await;
        assert!(converged, "{:?}: {}", names(client, ns).await, daemon.log_text());
        assert!(daemon.wait_ready(WAIT).await, "ready once both units synced: {}", daemon.log_text());
        assert!(daemon.child.try_wait().unwrap().is_none(), "no restart was needed");
        common::assert_no_secret(&format!("{}{}", self.first.stderr, daemon.log_text()), SECRET);
    }
}

/// `gitward sync` with its state directory read-only: exit 2, the error says so, nothing of
/// the new revision is applied and nothing pruned; writable again, the next sync applies it.
#[tokio::test]
async fn a_read_only_state_directory_fails_the_sync_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut unit = OneShot::new("state-ro", dir.path(), &[]).await;
    let wrapper = read_only(&dir.path().join("state"));
    unit.fails(&wrapper.iter().map(String::as_str).collect::<Vec<_>>(), "Read-only file system").await;
    unit.converges().await;
}

/// The daemon started with its state directory read-only: unit `old` (its mirror made by an
/// earlier sync) fails its syncs, unit `new` (no mirror yet) cannot start; both are retried with
/// backoff — the process stays up, `/healthz` answers, `/readyz` is 503 — and nothing changes in
/// the cluster. Made writable in place, both converge without a restart.
#[tokio::test]
async fn the_daemon_survives_a_read_only_state_directory_and_converges_once_writable() {
    let dir = tempfile::tempdir().unwrap();
    let units = TwoUnits::new("state-ro-daemon", dir.path(), &[]).await;
    let state = dir.path().join("state");
    let wrapper = read_only(&state);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut daemon = common::Daemon::start_in(&wrapper, &units.config, units.port, &[]);
    units.retries_without_loss(&mut daemon, "Read-only file system").await;
    make_writable(daemon.child.id(), &state);
    units.converges(&mut daemon).await;
}

/// A small tmpfs mounted on a directory for one test, unmounted (lazily) when dropped. Real
/// `ENOSPC` from the kernel, not a simulation: the tests run as root.
struct Tmpfs {
    dir: std::path::PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir).output();
        let out = out.expect("mount runs");
        assert!(out.status.success(), "mount a tmpfs on {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
        Self { dir: dir.to_path_buf() }
    }

    /// Fills the file system: writes `filler` until the kernel answers `ENOSPC`; returns its size.
    fn fill(&self) -> u64 {
        use std::io::Write;
        let mut file = std::fs::File::create(self.filler()).unwrap();
        let chunk = vec![0x5a_u8; 64 << 10];
        let mut written = 0;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("fill {}: {e}", self.dir.display()),
            }
        }
        let _ = file.sync_all();
        written
    }

    /// Frees the space again.
    fn free(&self) {
        std::fs::remove_file(self.filler()).unwrap();
    }

    fn filler(&self) -> std::path::PathBuf {
        self.dir.join("filler")
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// 1 MiB of incompressible bytes as hex (2 MiB of text): a file the next fetch must store.
fn incompressible() -> String {
    let mut bytes = vec![0u8; 1 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in bytes.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    hex::encode(bytes)
}

/// `gitward sync` with its state directory full (a 4 MiB tmpfs filled to `ENOSPC`) while the
/// new revision brings 2 MiB more: exit 2, the error says the device is full, the last good
/// revision stays applied and nothing is pruned; with the space freed, the next sync applies it.
#[tokio::test]
async fn a_full_state_directory_fails_the_sync_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(&dir.path().join("state"), "4m");
    let mut unit = OneShot::new("state-full", dir.path(), &[("blob.txt", incompressible())]).await;
    let filled = tmpfs.fill();
    eprintln!("state directory filled with {filled} bytes");
    unit.fails(&[], "No space left on device").await;
    tmpfs.free();
    unit.converges().await;
}

/// The daemon with its state directory full: unit `old` (its mirror made by an earlier sync)
/// fails to fetch a revision 2 MiB larger, unit `new` cannot create its mirror; both are retried
/// with backoff — the process stays up, `/healthz` answers, `/readyz` is 503 — and the cluster
/// keeps the last good revision. Once space is freed, both converge without a restart.
#[tokio::test]
async fn the_daemon_survives_a_full_state_directory_and_converges_once_space_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(&dir.path().join("state"), "4m");
    let units = TwoUnits::new("state-full-daemon", dir.path(), &[("old/blob.txt", incompressible())]).await;
    tmpfs.fill();
    let mut daemon = common::Daemon::start(&units.config, units.port, &[]);
    units.retries_without_loss(&mut daemon, "No space left on device").await;
    tmpfs.free();
    units.converges(&mut daemon).await;
}
