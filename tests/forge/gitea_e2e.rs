//! `gitward run` previewing a real Gitea's pull request: the unit syncs the repository over
//! HTTP with a token, the daemon fetches `refs/pull/<n>/head`, asks the API whether the pull
//! request is open, and posts one comment and a `gitward/preview` status; a new head edits the
//! comment in place.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::common;
use crate::common::gitea::{Gitea, USER};

/// A liveness bound for each asynchronous effect (the daemon polls the forge every second).
const WAIT: Duration = Duration::from_secs(60);

const MARKER: &str = "<!-- gitward-preview";

/// The pull request's comments by [`USER`]: `(id, body)`.
async fn ours(gitea: &Gitea, pr: u64) -> Vec<(u64, String)> {
    let comments = gitea.api(Method::GET, &format!("/repos/{USER}/deploy/issues/{pr}/comments"), None).await;
    comments
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["user"]["login"] == USER)
        .map(|c| (c["id"].as_u64().unwrap(), c["body"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// The states of commit `sha`'s `gitward/preview` statuses, oldest first.
async fn statuses(gitea: &Gitea, sha: &str) -> Vec<String> {
    let list = gitea.api(Method::GET, &format!("/repos/{USER}/deploy/statuses/{sha}?sort=oldest"), None).await;
    let mut states: Vec<(i64, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["context"] == "gitward/preview")
        .map(|s| {
            // Gitea answers the state as `status`; GitHub's spelling is `state`.
            let state = s["status"].as_str().or(s["state"].as_str()).unwrap_or_default().to_owned();
            (s["id"].as_i64().unwrap_or_default(), state)
        })
        .collect();
    states.sort();
    states.into_iter().map(|(_, s)| s).collect()
}

/// Waits until the pull request has exactly one comment of ours holding `needle` and `sha` a
/// `success` status; the comment.
async fn wait_for(gitea: &Gitea, pr: u64, sha: &str, needle: &str) -> Option<(u64, String)> {
    let found = std::sync::Mutex::new(None);
    let done = common::eventually(WAIT, || async {
        let comments = ours(gitea, pr).await;
        let posted = comments.len() == 1 && comments[0].1.contains(needle);
        let success = statuses(gitea, sha).await.last().map(String::as_str) == Some("success");
        if posted && success {
            *found.lock().unwrap() = Some(comments[0].clone());
        }
        posted && success
    })
    .await;
    if done { found.into_inner().unwrap() } else { None }
}

#[tokio::test]
async fn a_gitea_pull_request_gets_one_preview_comment_edited_for_each_new_head() {
    let started = std::time::Instant::now();
    let (env, namespace) = common::setup_ns("gitea-preview").await;
    let gitea = Gitea::start().await;
    eprintln!("gitea up after {:?}", started.elapsed());
    gitea.create_repo("deploy").await;
    let work = gitea.work("deploy");
    work.push("main", &[("cm.yaml", &common::cm("preview-base", "1"))], "first");

    let dir = tempfile::tempdir().unwrap();
    let git = format!("[sync.git]\ntoken_file = \"{}\"\n", gitea.token_file.display());
    let unit = common::unit_toml("app", Path::new(&gitea.git_url("deploy")), "", &namespace, &git);
    let preview = format!(
        "[[preview]]\nforge = \"gitea\"\napi_url = \"{}\"\nrepository = \"{USER}/deploy\"\ntoken_file = \"{}\"\ninterval = \"1s\"\n",
        gitea.api_url(),
        gitea.token_file.display()
    );
    let (config, port) = common::daemon_config(dir.path(), &preview, "", &unit);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(env.client.clone(), &namespace);
    let synced = common::eventually(WAIT, || async { cms.get_opt("preview-base").await.unwrap().is_some() }).await;
    assert!(synced, "main synced from gitea over HTTP with the token: {}", daemon.log_text());

    // A pull request that edits the ConfigMap and adds another.
    let first = work.push(
        "change",
        &[("cm.yaml", &common::cm("preview-base", "2")), ("added.yaml", &common::cm("preview-added", "1"))],
        "change the value, add a ConfigMap",
    );
    let pr = gitea.open_pull("deploy", "change", "main", "a change").await;
    let posted = wait_for(&gitea, pr, &first, "preview-added").await;
    let Some((id, body)) = posted else {
        panic!(
            "no preview of {first}: comments {:?}, statuses {:?}\n{}",
            ours(&gitea, pr).await,
            statuses(&gitea, &first).await,
            daemon.log_text()
        )
    };
    assert!(body.starts_with(MARKER), "{body}");
    assert!(body.contains("preview-base") && !body.contains("preview-second"), "{body}");
    assert_eq!(statuses(&gitea, &first).await, ["pending", "success"], "{}", daemon.log_text());

    // A second head: the same comment edited, the new head's own statuses.
    let second = work.push("change", &[("second.yaml", &common::cm("preview-second", "1"))], "add a second one");
    let edited = wait_for(&gitea, pr, &second, "preview-second").await;
    let Some((edited_id, edited_body)) = edited else {
        panic!(
            "no preview of {second}: comments {:?}, statuses {:?}\n{}",
            ours(&gitea, pr).await,
            statuses(&gitea, &second).await,
            daemon.log_text()
        )
    };
    assert_eq!(edited_id, id, "edited in place, not posted again");
    assert!(edited_body.starts_with(MARKER) && edited_body.contains("preview-added"), "{edited_body}");
    assert_eq!(statuses(&gitea, &second).await, ["pending", "success"]);
    assert_eq!(statuses(&gitea, &first).await, ["pending", "success"], "the old head's statuses stay");
    // Previewing changed nothing in the cluster: main is what is applied.
    assert!(cms.get_opt("preview-added").await.unwrap().is_none());
    let all: Vec<Value> = serde_json::from_value(
        gitea.api(Method::GET, &format!("/repos/{USER}/deploy/issues/{pr}/comments"), None).await,
    )
    .unwrap();
    assert_eq!(all.len(), 1, "no other comment: {all:?}");
    eprintln!("gitea preview test took {:?}", started.elapsed());
}
