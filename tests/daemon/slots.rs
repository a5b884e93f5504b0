//! The order of sync slots: with one slot kept busy by periodic resyncs, units a SIGHUP adds get
//! the slot for their first syncs before any resync runs again (the real binary, real git, the
//! real apiserver; the order read from the daemon's `sync triggered` events, each logged by a
//! sync holding the one slot). With one first-come queue the new units waited behind every
//! resync already queued, as the last of 5,000 units starting did behind the first ones'
//! resyncs.

use crate::common;

use std::time::Duration;

/// Units started with the daemon, and added by a SIGHUP; each of `OBJECTS` ConfigMaps in its
/// own directory of one repository.
const OLD: usize = 24;
const NEW: usize = 8;
const OBJECTS: usize = 60;
const WAIT: Duration = Duration::from_secs(240);

fn config(dir: &std::path::Path, port: u16, repo: &std::path::Path, namespace: &str, units: usize) -> String {
    let units: String =
        (0..units).map(|u| common::unit_toml(&format!("u{u}"), repo, &format!("u{u}"), namespace, "")).collect();
    // A resync every 2 s of 24 units of 60 objects (about 0.2 s each) is more than one slot
    // serves: resyncs queue for it all the time.
    format!(
        "[cluster]\nmax_in_flight = 4\n\n[daemon]\nstate_dir = \"{}\"\nlisten = \"127.0.0.1:{port}\"\ninterval = \"1h\"\n\
         resync_interval = \"2s\"\nmax_concurrent_syncs = 1\nself_heal = false\n\n{units}",
        dir.join("state").display()
    )
}

#[tokio::test]
async fn units_a_reload_adds_sync_before_the_resyncs_waiting_for_the_slot() {
    let (env, _, repo) = common::setup_repo("slot-order").await;
    for u in 0..OLD + NEW {
        let objects: String =
            (0..OBJECTS).map(|j| format!("---\n{}", common::cm(&format!("u{u}-c{j}"), "1"))).collect();
        repo.write(&format!("u{u}/objects.yaml"), &objects);
    }
    repo.commit_and_push("first");
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let path = dir.path().join("gitward.toml");
    std::fs::write(&path, config(dir.path(), port, &repo.bare(), &env.namespace, OLD)).unwrap();
    let daemon = common::Daemon::start(&path, port, &[]);
    let triggered = || daemon.logged("sync triggered");
    let resyncing =
        common::eventually(WAIT, || async { triggered().iter().filter(|e| e["trigger"] == "resync").count() >= OLD })
            .await;
    assert!(resyncing, "the old units do not resync: {}", daemon.log_text());

    // Counted from here: the syncs that end after the reload, until every added unit's first.
    let mark = daemon.logged("sync complete").len();
    std::fs::write(&path, config(dir.path(), port, &repo.bare(), &env.namespace, OLD + NEW)).unwrap();
    daemon.signal("HUP");
    let is_new = |e: &serde_json::Value| {
        e["unit"]
            .as_str()
            .and_then(|u| u.strip_prefix('u'))
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n >= OLD)
    };
    let complete = || daemon.logged("sync complete");
    let added = common::eventually(WAIT, || async { complete().iter().filter(|e| is_new(e)).count() >= NEW }).await;
    let events = complete();
    assert!(added, "the added units did not sync: {}", daemon.log_text());
    let last_new = events.iter().rposition(is_new).unwrap();
    let order: Vec<&str> = events[mark..=last_new].iter().map(|e| e["unit"].as_str().unwrap_or("?")).collect();
    let old = events[mark..=last_new].iter().filter(|e| !is_new(e)).count();
    eprintln!("syncs ended after the reload, until the last added unit's first: {}", order.join(" "));
    // The added units' early applies run in the push lane meanwhile, and the resync holding the
    // slot at the reload ends first: a few old units' syncs may end before the added ones get the
    // slot, never the queue of resyncs (all 24 with one first-come queue).
    assert!(
        old <= OLD / 3,
        "{old} resyncs of the {OLD} old units ran before every added unit had its first sync: {}",
        order.join(" ")
    );
}
