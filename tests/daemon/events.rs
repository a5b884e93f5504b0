//! Kubernetes Events of syncs (`events.k8s.io/v1`, regarding the unit's ApplySet parent): what
//! `kubectl events --for secret/gitward-app -n <ns>` shows, for `gitward run` and `gitward sync`.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

/// A generous bound for "it happened", not a speed assertion.
const WAIT: Duration = Duration::from_secs(90);

/// The Events regarding the unit `app`'s parent in `ns`, as `kubectl events --for
/// secret/gitward-app` lists them.
async fn events(client: &kube::Client, ns: &str) -> Vec<Event> {
    let params = ListParams::default().fields("regarding.kind=Secret,regarding.name=gitward-app");
    Api::<Event>::namespaced(client.clone(), ns).list(&params).await.expect("list events").items
}

fn with_reason<'a>(events: &'a [Event], reason: &str) -> Vec<&'a Event> {
    events.iter().filter(|e| e.reason.as_deref() == Some(reason)).collect()
}

fn describe(events: &[Event]) -> String {
    let line = |e: &Event| {
        let count = e.series.as_ref().map_or(1, |s| s.count);
        format!("{:?} {:?} x{count}: {:?}", e.type_, e.reason, e.note)
    };
    events.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// A revision the API server rejects an object of gives one `SyncFailed` Warning, whose series
/// counts the retries; the next good revision gives `Applied` naming its short revision.
#[tokio::test]
async fn failing_retries_count_in_one_event_and_a_good_revision_is_applied() {
    let (env, ns, repo) = common::setup_repo("events-daemon").await;
    repo.write("good.yaml", &common::cm("good", "1"));
    // A data key the API server refuses: only alphanumerics, '-', '_' and '.'.
    repo.write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  \"no spaces\": x\n");
    repo.commit_and_push("an object the API server rejects");
    let dir = tempfile::tempdir().unwrap();
    let daemon = common::polling_daemon(dir.path(), "", &common::unit_toml("app", &repo.bare(), "", &ns, ""));

    let retried = common::eventually(WAIT, || async {
        let all = events(&env.client, &ns).await;
        with_reason(&all, "SyncFailed").iter().any(|e| e.series.as_ref().is_some_and(|s| s.count >= 3))
    })
    .await;
    let all = events(&env.client, &ns).await;
    assert!(retried, "retries count in the SyncFailed series:\n{}\n{}", describe(&all), daemon.log_text());
    let failed = with_reason(&all, "SyncFailed");
    assert_eq!(failed.len(), 1, "one Event for the repeated failure:\n{}", describe(&all));
    let event = failed[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reporting_controller.as_deref(), Some("gitward.dev/gitward"));
    assert_eq!(event.regarding.as_ref().and_then(|r| r.namespace.as_deref()), Some(ns.as_str()));
    let note = event.note.as_deref().unwrap_or_default();
    assert!(note.contains(&format!("ConfigMap/{ns}/bad")), "the note names the first error: {note}");

    repo.remove("bad.yaml");
    let sha = repo.commit_and_push("the rejected object removed");
    let short = &sha[..12];
    let applied = common::eventually(WAIT, || async {
        let all = events(&env.client, &ns).await;
        with_reason(&all, "Applied").iter().any(|e| e.note.as_deref().is_some_and(|n| n.contains(short)))
    })
    .await;
    let all = events(&env.client, &ns).await;
    assert!(applied, "Applied names revision {short}:\n{}\n{}", describe(&all), daemon.log_text());
    let event = with_reason(&all, "Applied")[0];
    assert_eq!(event.type_.as_deref(), Some("Normal"));
}

/// `gitward sync` writes its Events before it exits.
#[tokio::test]
async fn a_one_shot_sync_writes_its_applied_event_before_it_exits() {
    let (env, ns, repo) = common::setup_repo("events-cli").await;
    let sha = repo.push(&[("cm.yaml", &common::cm("one", "1"))], "one ConfigMap");
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "", &ns, ""));
    let run = common::gitward(&["sync"], &config, WAIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let all = events(&env.client, &ns).await;
    let applied = with_reason(&all, "Applied");
    assert_eq!(applied.len(), 1, "one Applied Event:\n{}\n{}", describe(&all), run.stderr);
    let note = applied[0].note.as_deref().unwrap_or_default();
    assert!(note.contains(&sha[..12]) && note.contains("1 created"), "the note names the revision and counts: {note}");
}
