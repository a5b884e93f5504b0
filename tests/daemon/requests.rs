//! What a unit's sync costs in requests, read from the apiserver's audit log. Units that start
//! after the daemon's shared metadata watches have listed (added by a reload) get their
//! members and ApplySet parents from those watches: no list of their own, which the API server
//! would answer by scanning every object of the kind, and the kinds from the discovery answers
//! an earlier unit of the cluster got: no discovery request. A sync of unchanged objects then
//! sends at most one request per object plus one for its parent; a push that leaves a plain
//! unit's path alone sends none for it.

use crate::common;

use std::time::Duration;

use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// ConfigMaps per unit.
const OBJECTS: usize = 4;

/// The requests (ResponseComplete audit events) the daemon that runs as `identity` sent.
fn requests(identity: &str) -> Vec<Value> {
    let agent = format!("({identity}-");
    let text = std::fs::read_to_string(common::audit_log()).expect("read audit log");
    text.lines()
        .filter(|l| l.contains(&agent) && l.contains("ResponseComplete"))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["userAgent"].as_str().is_some_and(|a| a.contains(&agent)))
        .collect()
}

/// `verb resource/name?query` of each request, for the failure messages.
fn lines(requests: &[&Value]) -> Vec<String> {
    requests
        .iter()
        .map(|e| format!("{} {}", e["verb"].as_str().unwrap_or(""), e["requestURI"].as_str().unwrap_or("")))
        .collect()
}

/// The lists `requests` holds that select one ApplySet's objects or parent by its exact label
/// value (`part-of=<id>`, `id=<id>`): one per unit, each scanning the kind on the API server.
fn exact_lists(requests: &[Value]) -> Vec<&Value> {
    requests
        .iter()
        .filter(|e| e["verb"] == "list")
        .filter(|e| {
            let uri = e["requestURI"].as_str().unwrap_or("");
            uri.contains("applyset.kubernetes.io%2Fpart-of%3D") || uri.contains("applyset.kubernetes.io%2Fid%3D")
        })
        .collect()
}

/// The requests of `requests` naming unit `unit`'s objects (`<unit>-<i>`) or its parent
/// (`gitward-<unit>`) in `namespace`.
fn of_unit<'a>(requests: &'a [Value], namespace: &str, unit: &str) -> Vec<&'a Value> {
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("{unit}-{i}")).chain([format!("gitward-{unit}")]).collect();
    requests
        .iter()
        .filter(|e| e["objectRef"]["namespace"] == namespace)
        .filter(|e| e["objectRef"]["name"].as_str().is_some_and(|n| names.iter().any(|m| m == n)))
        .filter(|e| e["verb"] != "watch")
        .collect()
}

fn units_toml(repo: &std::path::Path, namespace: &str, units: &[&str]) -> String {
    units.iter().map(|u| common::unit_toml(u, repo, u, namespace, "health_timeout = \"0s\"\n")).collect()
}

fn synced(daemon: &common::Daemon, unit: &str) -> usize {
    daemon.events().iter().filter(|e| e["message"] == "sync complete" && e["unit"] == unit).count()
}

#[tokio::test]
async fn units_started_late_list_nothing_and_an_unchanged_sync_sends_one_request_per_object_plus_one() {
    let (env, _, repo) = common::setup_repo("requests").await;
    for unit in ["a", "b", "c"] {
        let docs: Vec<String> = (0..OBJECTS).map(|i| common::cm(&format!("{unit}-{i}"), "1")).collect();
        repo.write(&format!("{unit}/objects.yaml"), &docs.join("---\n"));
    }
    repo.commit_and_push("three units");
    let dir = tempfile::tempdir().unwrap();

    // A first daemon makes every unit's objects and parent, then stops.
    let (config, port) =
        common::daemon_config(dir.path(), "", "", &units_toml(&repo.bare(), &env.namespace, &["a", "b", "c"]));
    let mut first = common::Daemon::ready(&config, port, WAIT).await;
    first.kill();

    // A second runs only `a`; a reload adds `b` and `c` once its watches have listed.
    let identity = format!("req-{}", env.namespace);
    // Its own config file (and so its own log), beside the first's state directory.
    let config = dir.path().join("second.toml");
    common::write_daemon_config(&config, port, "", "", &units_toml(&repo.bare(), &env.namespace, &["a"]));
    let daemon = common::Daemon::start(&config, port, &[("POD_NAME", &identity)]);
    assert!(daemon.wait_ready(WAIT).await, "not ready: {}", daemon.log_text());
    let before = requests(&identity).len();
    common::write_daemon_config(&config, port, "", "", &units_toml(&repo.bare(), &env.namespace, &["a", "b", "c"]));
    daemon.signal("HUP");
    let joined = common::eventually(WAIT, || async { synced(&daemon, "b") >= 1 && synced(&daemon, "c") >= 1 }).await;
    assert!(joined, "b and c did not sync after the reload: {}", daemon.log_text());
    let after_join = requests(&identity);
    assert!(after_join.len() > before, "the audit log holds none of the daemon's requests");
    let lists = exact_lists(&after_join[before..]);
    assert!(lists.is_empty(), "units that joined listed their own objects: {:?}", lines(&lists));
    let joined: Vec<&Value> = after_join[before..].iter().collect();
    let discovery: Vec<String> =
        lines(&joined).into_iter().filter(|l| l.contains(" /api/v1") && !l.contains("/api/v1/")).collect();
    assert!(discovery.is_empty(), "units that joined asked discovery again: {discovery:?}");

    // A revision outside every unit's path: each takes it without a sync, sending nothing.
    let mark = requests(&identity).len();
    let counts = |unit| synced(&daemon, unit);
    let (a0, b0, c0) = (counts("a"), counts("b"), counts("c"));
    let outside = repo.push(&[("README.md", "not a manifest of any unit\n")], "outside every unit");
    let taken = || {
        let events = daemon.logged("path unchanged, nothing to sync");
        ["a", "b", "c"].iter().all(|u| events.iter().any(|e| e["unit"] == *u && e["revision"] == outside.as_str()))
    };
    assert!(common::eventually(WAIT, || async { taken() }).await, "a unit synced the push: {}", daemon.log_text());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let quiet = requests(&identity);
    for unit in ["a", "b", "c"] {
        let sent = of_unit(&quiet[mark..], &env.namespace, unit);
        assert!(sent.is_empty(), "unit {unit} sent requests for a push outside its path: {:?}", lines(&sent));
    }
    assert_eq!((counts("a"), counts("b"), counts("c")), (a0, b0, c0), "{}", daemon.log_text());

    // A revision that touches each unit's path but changes none of their objects: each unit's
    // sync sends a request per object and at most one more.
    let mark = requests(&identity).len();
    for unit in ["a", "b", "c"] {
        repo.write(&format!("{unit}/NOTES.md"), "not a manifest\n");
    }
    repo.commit_and_push("inside every unit, no object changed");
    let resynced =
        common::eventually(WAIT, || async { counts("a") > a0 && counts("b") > b0 && counts("c") > c0 }).await;
    assert!(resynced, "the push did not sync every unit: {}", daemon.log_text());
    // The last of each unit's requests reaches the audit log a moment after its sync ends.
    let settled = common::eventually(Duration::from_secs(10), || async {
        let now = requests(&identity);
        ["a", "b", "c"].iter().all(|u| of_unit(&now[mark..], &env.namespace, u).len() >= OBJECTS)
    })
    .await;
    assert!(settled, "the audit log lacks the syncs' applies");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let synced_requests = requests(&identity);
    let window = &synced_requests[mark..];
    for unit in ["a", "b", "c"] {
        let sent = of_unit(window, &env.namespace, unit);
        assert!(
            sent.len() <= OBJECTS + 1,
            "unit {unit} sent {} requests for {OBJECTS} objects: {:?}",
            sent.len(),
            lines(&sent)
        );
        let applies =
            sent.iter().filter(|e| e["verb"] == "patch" && e["objectRef"]["resource"] == "configmaps").count();
        assert_eq!(applies, OBJECTS, "one apply per object: {:?}", lines(&sent));
    }
    let lists: Vec<&Value> = window.iter().filter(|e| e["verb"] == "list").collect();
    assert!(lists.is_empty(), "an unchanged sync listed: {:?}", lines(&lists));
}

/// Units added by a reload, once the shared watches have listed, create their objects with no
/// list at all: the ownership check reads from the shared watch which ApplySet labels each
/// object, instead of listing the namespace's labelled objects (which the API server answers by
/// scanning every unit's members there). The check still holds: `c` declares `a-0`, which `a`
/// owns, and is refused with the owner's name, while `a-0` keeps `a`'s label.
#[tokio::test]
async fn units_that_join_create_their_objects_with_no_list_and_still_refuse_another_units_object() {
    let env = common::setup("requests-create").await;
    let ns = &env.namespace;
    let repo = common::GitRepo::new();
    for unit in ["a", "b"] {
        let docs: Vec<String> = (0..OBJECTS).map(|i| common::cm(&format!("{unit}-{i}"), "1")).collect();
        repo.write(&format!("{unit}/objects.yaml"), &docs.join("---\n"));
    }
    repo.write("c/objects.yaml", &[common::cm("c-0", "1"), common::cm("a-0", "taken")].join("---\n"));
    repo.commit_and_push("three units, c declaring a's a-0");
    let dir = tempfile::tempdir().unwrap();
    let identity = format!("req-{ns}");
    let config = dir.path().join("gitward.toml");
    let port = common::free_port();
    common::write_daemon_config(&config, port, "", "", &units_toml(&repo.bare(), ns, &["a"]));
    let daemon = common::Daemon::start(&config, port, &[("POD_NAME", &identity)]);
    assert!(daemon.wait_ready(WAIT).await, "not ready: {}", daemon.log_text());
    let before = requests(&identity).len();

    common::write_daemon_config(&config, port, "", "", &units_toml(&repo.bare(), ns, &["a", "b", "c"]));
    daemon.signal("HUP");
    let refused = |e: &Value| e["message"] == "object failed" && e["unit"] == "c";
    let joined =
        common::eventually(WAIT, || async { synced(&daemon, "b") >= 1 && daemon.events().iter().any(refused) }).await;
    assert!(joined, "b did not sync, or c's claim on a-0 was not refused: {}", daemon.log_text());
    let events = daemon.events();
    let reason = events.iter().find(|e| refused(e)).and_then(|e| e["reason"].as_str()).unwrap_or_default();
    assert!(reason.contains("belongs to unit `a`"), "{reason}");

    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(env.client.clone(), ns);
    let part_of = |cm: k8s_openapi::api::core::v1::ConfigMap| {
        cm.metadata.labels.unwrap_or_default().remove("applyset.kubernetes.io/part-of").unwrap_or_default()
    };
    let (a0, b0, c0) = (
        configmaps.get("a-0").await.unwrap(),
        configmaps.get("b-0").await.unwrap(),
        configmaps.get("c-0").await.unwrap(),
    );
    let (a_id, b_id, c_id) = (part_of(a0), part_of(b0), part_of(c0));
    assert!(!a_id.is_empty() && a_id != b_id && b_id != c_id && a_id != c_id, "{a_id} {b_id} {c_id}");

    // Every request the reload's syncs sent is in the log once b's last object is.
    let settled = common::eventually(Duration::from_secs(10), || async {
        of_unit(&requests(&identity)[before..], ns, "b").iter().any(|e| e["objectRef"]["name"] == "b-3")
    })
    .await;
    assert!(settled, "the audit log lacks b's applies");
    let after = requests(&identity);
    let scans: Vec<&Value> = after[before..]
        .iter()
        .filter(|e| e["verb"] == "list")
        .filter(|e| e["requestURI"].as_str().is_some_and(|u| u.contains("applyset.kubernetes.io%2Fpart-of")))
        .collect();
    assert!(scans.is_empty(), "units that joined listed members: {:?}", lines(&scans));
}
