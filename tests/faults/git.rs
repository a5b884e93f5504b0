//! Faults on the git side, through the real `gitward` binary, real git and the real apiserver:
//! an unreachable remote and a damaged mirror in the state directory. Each ends with the last
//! good revision applied (nothing applied or pruned from a revision that could not be read)
//! and, once the fault is gone, the cluster equal to git with nothing lost or left over.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{self, Run, gitward};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

/// The value of the unit's Secret: it must appear in no output of any run.
const SECRET: &str = "gitward-canary-faults-git";

/// A unit whose first revision (ConfigMaps `a` and `b`, value 1) was synced by the binary.
struct Unit {
    env: common::TestEnv,
    repo: common::GitRepo,
    dir: tempfile::TempDir,
    config: PathBuf,
}

async fn synced(prefix: &str) -> Unit {
    let (env, _, repo) = common::setup_repo(prefix).await;
    repo.write("a.yaml", &common::cm("a", "1"));
    repo.push(&[("b.yaml", &common::cm("b", "1")), ("s.yaml", &common::secret_yaml("s", SECRET))], "good");
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, ""));
    let unit = Unit { env, repo, dir, config };
    let first = unit.sync();
    assert_eq!(first.code, Some(0), "first sync: {}", first.stderr);
    unit
}

impl Unit {
    /// `gitward sync`, checked for Secret data in its output.
    fn sync(&self) -> Run {
        let run = gitward(&["sync"], &self.config, Duration::from_secs(120));
        common::assert_no_secret(&format!("{}{}", run.stdout, run.stderr), SECRET);
        run
    }

    /// The unit's mirror: the one directory under `state/mirrors` (shared by repository and
    /// credentials, so not named after the unit).
    fn mirror(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.dir.path().join("state/mirrors"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect();
        assert_eq!(dirs.len(), 1, "one mirror: {dirs:?}");
        dirs.remove(0)
    }

    /// The second revision: `b` leaves git, `c` joins; `a` stays as it was, so reading this
    /// revision needs objects fetched before.
    fn push_second(&self) {
        self.repo.remove("b.yaml");
        self.repo.write("c.yaml", &common::cm("c", "2"));
        self.repo.commit_and_push("second");
    }

    /// The ConfigMaps of the unit's namespace, name → value (the inventory parent is a Secret).
    async fn live(&self) -> Vec<(String, String)> {
        let api: Api<ConfigMap> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let mut live: Vec<(String, String)> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"))
            .map(|c| (c.metadata.name.unwrap(), c.data.unwrap_or_default().remove("value").unwrap_or_default()))
            .collect();
        live.sort();
        live
    }

    /// The first revision exactly: nothing of the second applied, nothing pruned.
    async fn first_revision_stays(&self) {
        assert_eq!(self.live().await, [pair("a", "1"), pair("b", "1")], "the last good revision must stay applied");
    }

    /// The second revision exactly: `b` pruned, no orphan, nothing lost.
    async fn equals_second_revision(&self) {
        assert_eq!(self.live().await, [pair("a", "1"), pair("c", "2")], "the cluster must equal git");
    }
}

fn pair(name: &str, value: &str) -> (String, String) {
    (name.to_string(), value.to_string())
}

/// Why the run cloned its mirror again (the `reason` of its `mirror damaged; cloned again`
/// warning), if it did.
fn cloned_again(run: &Run) -> Option<String> {
    let event = common::log_events(&run.stderr, "mirror damaged; cloned again").next()?;
    Some(event["reason"].as_str().unwrap_or_default().to_string())
}

/// The pack files of a bare repository.
fn packs(repo: &Path) -> Vec<PathBuf> {
    let dir = repo.join("objects/pack");
    let mut packs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect();
    packs.sort();
    packs
}

/// The repository moved away after a first sync: the sync fails with a clear error naming the
/// remote, exit 2, and changes nothing; the sound mirror is not thrown away for it. Back in
/// place, the next sync applies the revision pushed meanwhile.
#[tokio::test]
async fn an_unreachable_remote_keeps_the_last_good_revision_applied() {
    let unit = synced("git-unreachable").await;
    unit.push_second();
    let moved = unit.repo.bare().with_extension("moved");
    std::fs::rename(unit.repo.bare(), &moved).unwrap();

    let run = unit.sync();
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let failed = common::log_events(&run.stderr, "sync failed").next().unwrap_or_else(|| panic!("{}", run.stderr));
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("fetch from") && error.contains(unit.repo.bare().to_str().unwrap()),
        "the error names the remote: {error}"
    );
    assert_eq!(cloned_again(&run), None, "a sound mirror is kept when the remote is down: {}", run.stderr);
    unit.first_revision_stays().await;

    std::fs::rename(&moved, unit.repo.bare()).unwrap();
    let run = unit.sync();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    unit.equals_second_revision().await;
}

/// Every pack file of the mirror truncated to half: the fetch or the read of the revision fails,
/// the mirror is found damaged and cloned again, and the sync goes on. With the remote down at
/// the same time, the sync fails clearly and changes nothing, and repairs itself afterwards.
#[tokio::test]
async fn a_truncated_pack_in_the_mirror_is_cloned_again() {
    let unit = synced("git-truncated").await;
    let truncate = |unit: &Unit| {
        let packs = packs(&unit.mirror());
        assert!(!packs.is_empty(), "the mirror holds packs");
        for pack in packs {
            let len = std::fs::metadata(&pack).unwrap().len();
            std::fs::OpenOptions::new().write(true).open(&pack).unwrap().set_len(len / 2).unwrap();
        }
    };

    // Damaged and the remote down: a clear error, nothing changes.
    truncate(&unit);
    unit.push_second();
    let moved = unit.repo.bare().with_extension("moved");
    std::fs::rename(unit.repo.bare(), &moved).unwrap();
    let run = unit.sync();
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("fetch from"), "{}", run.stderr);
    unit.first_revision_stays().await;

    // The remote is back: cloned again, applied.
    std::fs::rename(&moved, unit.repo.bare()).unwrap();
    let run = unit.sync();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // The fetch brings the new commit and tree; `a`'s blob is in the truncated pack.
    let reason = cloned_again(&run).unwrap_or_else(|| panic!("the repair is logged: {}", run.stderr));
    assert!(reason.contains("objects of revision"), "{reason}");
    unit.equals_second_revision().await;

    // Damaged again with nothing new to fetch: the revision cannot be read, so it is cloned
    // again too, and the sync is a no-op.
    truncate(&unit);
    let run = unit.sync();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let reason = cloned_again(&run).unwrap_or_else(|| panic!("the repair is logged: {}", run.stderr));
    assert!(reason.contains("not found"), "the ref no longer leads to a readable commit: {reason}");
    unit.equals_second_revision().await;
    let leftovers: Vec<_> = std::fs::read_dir(unit.dir.path().join("state/mirrors"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    let mirror = unit.mirror().file_name().unwrap().to_string_lossy().to_string();
    assert_eq!(leftovers, [mirror], "no fresh or broken copies are left behind");
}

/// The mirror's branch ref deleted (loose and packed), then its `HEAD`: the fetch writes the
/// ref again; a mirror libgit2 cannot open is created again and filled. Each sync applies.
#[tokio::test]
async fn a_mirror_that_lost_its_ref_or_its_head_repairs_itself() {
    let unit = synced("git-lost-ref").await;
    let mirror = unit.mirror();
    let _ = std::fs::remove_file(mirror.join("refs/heads/main"));
    if let Ok(packed) = std::fs::read_to_string(mirror.join("packed-refs")) {
        let kept: String =
            packed.lines().filter(|l| !l.ends_with("refs/heads/main")).map(|l| format!("{l}\n")).collect();
        std::fs::write(mirror.join("packed-refs"), kept).unwrap();
    }
    unit.push_second();
    let run = unit.sync();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    unit.equals_second_revision().await;

    std::fs::remove_file(mirror.join("HEAD")).unwrap();
    unit.repo.write("a.yaml", &common::cm("a", "3"));
    unit.repo.commit_and_push("third");
    let run = unit.sync();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(unit.live().await, [pair("a", "3"), pair("c", "2")]);
}
