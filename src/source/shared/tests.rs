//! Tests of the shared mirrors: one open mirror per directory, one fetch for many units; and
//! the helpers the source tests build repositories and specs with.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use git2::Repository;

use super::{open, registry};
use crate::source::{Credentials, SourceSpec, mirror};

/// A unit's spec for `main` of `repo`, at the root, without credentials.
pub(in crate::source) fn spec(unit: &str, repo: &str) -> SourceSpec {
    SourceSpec {
        unit: unit.into(),
        repo: repo.into(),
        reference: "main".into(),
        path: Default::default(),
        credentials: Credentials::default(),
        max_file_bytes: 1 << 20,
        verify: None,
    }
}

/// Runs `git args` in `dir` with no user or system config; its standard output, trimmed.
pub(in crate::source) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Units asking at once for a fetch no older than one instant wait for the one running:
/// one fetch serves them all, and each gets its outcome.
#[test]
fn concurrent_requests_are_served_by_one_fetch() {
    let temp = tempfile::tempdir().unwrap();
    let remote = temp.path().join("remote.git");
    let work = temp.path().join("work");
    git(temp.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
    git(temp.path(), &["init", "-q", work.to_str().unwrap()]);
    std::fs::write(work.join("a.yaml"), "kind: A\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "first"]);
    git(&work, &["push", "-q", remote.to_str().unwrap(), "main"]);
    let url = remote.to_str().unwrap();
    let shared = open(&temp.path().join("state"), &spec("a", url), url).unwrap();
    let asked = Instant::now();
    let barrier = std::sync::Barrier::new(8);
    std::thread::scope(|scope| {
        for unit in 0..8 {
            let (shared, barrier) = (&shared, &barrier);
            scope.spawn(move || {
                barrier.wait();
                shared.fetch_refs(&spec(&format!("u{unit}"), url), asked).unwrap();
            });
        }
    });
    assert_eq!(shared.fetches.load(Ordering::Relaxed), 1, "one fetch for eight requests");
    assert!(mirror::tips(&shared.handle("a").unwrap()).iter().any(|(name, _)| name == "refs/heads/main"));
    shared.fetch_refs(&spec("a", url), Instant::now()).unwrap();
    assert_eq!(shared.fetches.load(Ordering::Relaxed), 2, "a later request fetches again");
}

#[test]
fn units_of_one_url_share_one_open_mirror_and_old_ones_go() {
    let state = tempfile::tempdir().unwrap();
    let old = |unit: &str| state.path().join("mirrors").join(unit);
    Repository::init_bare(old("shop")).unwrap();
    Repository::init_bare(old("cart")).unwrap();
    let url = "/srv/git/fleet.git";
    let first = open(state.path(), &spec("shop", url), url).unwrap();
    assert!(!old("shop").exists(), "the per-unit mirror of the old layout is removed");
    assert!(old("cart").exists(), "only the opening unit's");
    let second = open(state.path(), &spec("cart", url), url).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    assert!(!old("cart").exists(), "removed too when the shared mirror was open already");
    assert!(first.handle("shop").unwrap().is_bare());
    let path = first.path().to_path_buf();
    drop((first, second));
    assert!(registry().get(&path).is_none_or(|w| w.upgrade().is_none()), "closed with its last unit");
    assert!(open(state.path(), &spec("shop", url), url).unwrap().handle("shop").unwrap().is_bare());
}
