//! `gitward run` with `[[preview]]`: the heads of pull requests found from the refs the forge
//! keeps (`refs/pull/<n>/head` in the unit's repository), each previewed once against the real
//! apiserver and posted to the test forge — one comment per pull request, edited for a new
//! head, one status per head and state — while the unit itself stays at its branch.

use std::time::Duration;

use gitward::config::ForgeKind;
use serde_json::Value;

use super::server::{REPO, TestForge};
use crate::common;

/// The states posted for `sha`, in order.
fn states(forge: &TestForge, sha: &str) -> Vec<String> {
    let state = forge.state.lock().unwrap();
    state
        .statuses
        .iter()
        .filter(|(s, _)| s == sha)
        .map(|(_, body)| body["state"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Pushes the work tree's HEAD as pull request 1's head ref, as the forge writes it.
fn push_pull_head(repo: &common::GitRepo, files: &[(&str, &str)], message: &str) -> String {
    let work = repo.work();
    for (path, content) in files {
        repo.write(path, content);
    }
    repo.git(&["add", "-A"], &work);
    repo.git(&["commit", "-q", "-m", message], &work);
    repo.git(&["push", "-q", "-f", "origin", "HEAD:refs/pull/1/head"], &work);
    repo.git(&["rev-parse", "HEAD"], &work)
}

#[tokio::test]
async fn a_pull_request_head_is_previewed_once_and_its_comment_edited_for_the_next() {
    let (env, ns, repo) = common::setup_repo("preview-run").await;
    repo.push(&[("app.yaml", &common::cm("app", "one"))], "main");
    let forge = TestForge::start(ForgeKind::Github).await;
    let dir = tempfile::tempdir().unwrap();
    let tables = format!(
        "[[preview]]\nforge = \"github\"\napi_url = \"http://127.0.0.1:{}\"\nrepository = \"{REPO}\"\ntoken_file = \"{}\"\ninterval = \"1s\"\n",
        forge.port,
        forge.token_file.display()
    );
    let units = common::unit_toml("app", &repo.bare(), "", &ns, "");
    let (config, port) = common::daemon_config(dir.path(), &tables, "", &units);
    let daemon = common::Daemon::ready(&config, port, Duration::from_secs(60)).await;
    let applied = common::eventually(Duration::from_secs(30), || async {
        common::cm_value(&env.client, &ns, "app").await.as_deref() == Some("one")
    })
    .await;
    assert!(applied, "main not applied: {}", daemon.log_text());

    // A pull request on a branch of its own: main's work tree moves to it.
    repo.git(&["checkout", "-q", "-b", "feature"], &repo.work());
    let first = push_pull_head(&repo, &[("app.yaml", &common::cm("app", "two"))], "two");
    forge.pull(1, &first, false);
    let posted = common::eventually(Duration::from_secs(60), || async {
        states(&forge, &first).last().map(String::as_str) == Some("success")
    })
    .await;
    assert!(posted, "no success status on {first}: {}", daemon.log_text());
    let comments = forge.comments_of(1, "gitward-bot");
    assert_eq!(comments.len(), 1, "{comments:?}");
    let (id, body) = &comments[0];
    assert!(body.starts_with(gitward::forge::MARKER_PREFIX), "{body}");
    assert!(body.contains("+  value: two") || body.contains("+value: two"), "the change is named: {body}");
    assert_eq!(states(&forge, &first), ["pending", "success"]);

    let second = push_pull_head(&repo, &[("app.yaml", &common::cm("app", "three"))], "three");
    forge.pull(1, &second, false);
    let edited = common::eventually(Duration::from_secs(60), || async {
        states(&forge, &second).last().map(String::as_str) == Some("success")
    })
    .await;
    assert!(edited, "no success status on {second}: {}", daemon.log_text());
    let comments = forge.comments_of(1, "gitward-bot");
    assert_eq!(comments.len(), 1, "one comment, edited: {comments:?}");
    assert_eq!(&comments[0].0, id, "the same comment");
    assert!(comments[0].1.contains("three"), "{}", comments[0].1);

    // Rounds go on every second: a head already previewed is not posted again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(states(&forge, &first), ["pending", "success"]);
    assert_eq!(states(&forge, &second), ["pending", "success"]);
    let posted: Vec<Value> = daemon.logged("preview posted");
    assert_eq!(posted.len(), 2, "{posted:?}");
    // The preview wrote nothing: the unit still holds main's value.
    assert_eq!(common::cm_value(&env.client, &ns, "app").await.as_deref(), Some("one"));
}
