//! A report's comments and status on each forge: posted once among many others' comments,
//! edited in place for a new head, split into parts that each fit and render, the parts a
//! shorter report lost deleted, fork pull requests left alone.

use gitward::config::{ForgeAuth, ForgeKind};
use gitward::forge::{MARKER, Poster, Published};
use serde_json::Value;

use super::server::{Recorded, TestForge};

const HEAD_1: &str = "1111111111111111111111111111111111111111";
const HEAD_2: &str = "2222222222222222222222222222222222222222";

fn report(line: &str) -> String {
    format!(
        "{MARKER}\n## gitward preview\n\n<details>\n<summary>unit shop</summary>\n\n```diff\n{line}\n```\n</details>\n"
    )
}

/// A report of about `bytes` bytes: one `<details>` per unit, each holding a long diff fence.
fn big_report(bytes: usize) -> String {
    let mut text = format!("{MARKER}\n## gitward preview\n\n");
    let mut unit = 0;
    while text.len() < bytes {
        text.push_str(&format!("<details>\n<summary>unit u{unit}: changed</summary>\n\n```diff\n"));
        for i in 0..400 {
            text.push_str(&format!("+  key{i}: value of unit {unit}, line {i}, éé\n"));
        }
        text.push_str("```\n</details>\n\n");
        unit += 1;
    }
    text
}

/// Whether `body` renders on its own: fences closed and `<details>` balanced outside them.
fn balanced(body: &str) -> bool {
    let (mut fence, mut depth) = (false, 0i64);
    for line in body.lines() {
        if line.starts_with("```") {
            fence = !fence;
        } else if !fence {
            depth += line.matches("<details>").count() as i64 - line.matches("</details>").count() as i64;
            if depth < 0 {
                return false;
            }
        }
    }
    !fence && depth == 0
}

fn writes(requests: &[Recorded]) -> Vec<(String, String)> {
    requests.iter().filter(|r| r.method != "GET").map(|r| (r.method.clone(), r.path.clone())).collect()
}

fn states(forge: &TestForge) -> Vec<(String, String)> {
    let state = forge.state.lock().unwrap();
    state.statuses.iter().map(|(sha, b)| (sha[..4].to_owned(), b["state"].as_str().unwrap().to_owned())).collect()
}

#[tokio::test]
async fn github_posts_once_among_120_comments_then_edits_it_for_a_new_head() {
    let forge = TestForge::start(ForgeKind::Github).await;
    forge.pull(7, HEAD_1, false);
    for i in 0..120 {
        // Another bot's comment quoting the marker is not gitward's.
        let body = if i == 50 { format!("{MARKER}\nquoted") } else { format!("comment {i}") };
        forge.comment(7, if i == 50 { "other-bot" } else { "alice" }, &body);
    }
    let poster = Poster::new(&forge.preview(false)).unwrap();
    assert!(poster.pending(7, HEAD_1).await.unwrap());
    let first = poster.publish(7, HEAD_1, &report("+a"), false).await.unwrap();
    let Published::Posted { comments, created: 1, edited: 0, deleted: 0, status_set: true } = &first else {
        panic!("{first:?}")
    };
    let requests = forge.take();
    for r in &requests {
        assert_eq!(r.header("accept"), Some("application/vnd.github+json"), "{} {}", r.method, r.path);
        assert_eq!(r.header("x-github-api-version"), Some("2022-11-28"));
        assert_eq!(r.header("authorization"), Some("Bearer s3cret"));
    }
    let lists: Vec<&str> = requests
        .iter()
        .filter(|r| r.path == "/repos/acme/deploy/issues/7/comments" && r.method == "GET")
        .map(|r| r.query.as_str())
        .collect();
    assert_eq!(lists, ["per_page=100&page=1", "per_page=100&page=2"]);
    assert_eq!(
        writes(&requests),
        [
            ("POST".into(), format!("/repos/acme/deploy/statuses/{HEAD_1}")),
            ("POST".into(), "/repos/acme/deploy/issues/7/comments".into()),
            ("POST".into(), format!("/repos/acme/deploy/statuses/{HEAD_1}")),
        ]
    );
    let status = &forge.state.lock().unwrap().statuses[0].1.clone();
    assert_eq!((status["context"].as_str(), status["state"].as_str()), (Some("gitward/preview"), Some("pending")));
    let ours = forge.comments_of(7, "gitward-bot");
    assert_eq!((ours.len(), ours[0].0, ours[0].1.as_str()), (1, comments[0], report("+a").as_str()));

    // The same head again: nothing to change, no status posted twice.
    assert!(!poster.pending(7, HEAD_1).await.unwrap());
    let again = poster.publish(7, HEAD_1, &report("+a"), false).await.unwrap();
    assert!(matches!(again, Published::Posted { created: 0, edited: 0, status_set: false, .. }), "{again:?}");
    assert_eq!(writes(&forge.take()), []);

    // A new head, failing: the same comment edited in place.
    forge.pull(7, HEAD_2, false);
    poster.pending(7, HEAD_2).await.unwrap();
    let second = poster.publish(7, HEAD_2, &report("+b"), true).await.unwrap();
    assert!(
        matches!(&second, Published::Posted { comments: c, edited: 1, created: 0, .. } if c == comments),
        "{second:?}"
    );
    let requests = forge.take();
    assert!(
        writes(&requests).contains(&("PATCH".into(), format!("/repos/acme/deploy/issues/comments/{}", comments[0])))
    );
    let patch = requests.iter().find(|r| r.method == "PATCH").unwrap();
    assert_eq!(patch.body["body"].as_str(), Some(report("+b").as_str()));
    assert_eq!(forge.comments_of(7, "gitward-bot").len(), 1);
    assert_eq!(forge.comments_of(7, "alice").len(), 119);
    assert_eq!(
        states(&forge),
        [("1111", "pending"), ("1111", "success"), ("2222", "pending"), ("2222", "failure")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );

    // A report of a head the pull request has left is not posted.
    let stale = poster.publish(7, HEAD_1, &report("+old"), false).await.unwrap();
    assert_eq!(stale, Published::Stale { head: HEAD_2.into() });
}

#[tokio::test]
async fn github_gets_a_200kb_report_as_parts_that_fit_and_render_and_a_shorter_one_deletes_the_rest() {
    let forge = TestForge::start(ForgeKind::Github).await;
    forge.pull(3, HEAD_1, false);
    forge.comment(3, "alice", "looks good");
    let poster = Poster::new(&forge.preview(false)).unwrap();
    let big = big_report(200_000);
    let published = poster.publish(3, HEAD_1, &big, false).await.unwrap();
    let Published::Posted { comments, created, .. } = &published else { panic!("{published:?}") };
    assert!(*created >= 4, "{published:?}");
    let ours = forge.comments_of(3, "gitward-bot");
    assert_eq!(ours.iter().map(|c| c.0).collect::<Vec<_>>(), *comments, "consecutive, part 1 first");
    let count = ours.len();
    for (i, (_, body)) in ours.iter().enumerate() {
        assert!(body.chars().count() <= 65_536, "part {} has {} characters", i + 1, body.chars().count());
        assert!(body.starts_with(&format!("<!-- gitward-preview part {}/{count} -->\n", i + 1)), "{}", &body[..80]);
        assert!(balanced(body), "part {} does not render alone", i + 1);
    }
    // Every line of the report is in the parts, in order.
    let carried: Vec<&str> = ours.iter().flat_map(|(_, b)| b.lines()).filter(|l| l.starts_with("+  key")).collect();
    let lines: Vec<&str> = big.lines().filter(|l| l.starts_with("+  key")).collect();
    assert_eq!(carried, lines);
    forge.take();

    let shrunk = poster.publish(3, HEAD_1, &report("+small"), false).await.unwrap();
    assert!(
        matches!(&shrunk, Published::Posted { edited: 1, created: 0, deleted, .. } if *deleted == count - 1),
        "{shrunk:?}"
    );
    let deletes: Vec<String> =
        writes(&forge.take()).into_iter().filter(|(m, _)| m == "DELETE").map(|(_, p)| p).collect();
    let expected: Vec<String> =
        comments[1..].iter().map(|id| format!("/repos/acme/deploy/issues/comments/{id}")).collect();
    assert_eq!(deletes, expected);
    assert_eq!(forge.comments_of(3, "gitward-bot"), [(comments[0], report("+small"))]);
    assert_eq!(forge.comments_of(3, "alice").len(), 1);
}

#[tokio::test]
async fn gitlab_pages_notes_by_x_next_page_and_puts_edits_with_its_token_header() {
    let forge = TestForge::start(ForgeKind::Gitlab).await;
    forge.pull(12, HEAD_1, false);
    for i in 0..250 {
        forge.comment(12, "alice", &format!("note {i}"));
    }
    let poster = Poster::new(&forge.preview(false)).unwrap();
    poster.pending(12, HEAD_1).await.unwrap();
    poster.publish(12, HEAD_1, &report("+a"), true).await.unwrap();
    forge.pull(12, HEAD_2, false);
    let second = poster.publish(12, HEAD_2, &report("+b"), false).await.unwrap();
    assert!(matches!(second, Published::Posted { edited: 1, created: 0, .. }), "{second:?}");
    let requests = forge.take();
    assert!(
        requests.iter().all(|r| r.header("private-token") == Some("s3cret") && r.header("authorization").is_none())
    );
    let pages: Vec<&str> =
        requests.iter().filter(|r| r.method == "GET" && r.path.ends_with("/notes")).map(|r| r.query.as_str()).collect();
    assert_eq!(pages.len(), 6, "three pages of 100, twice: {pages:?}");
    assert!(pages[2].starts_with("per_page=100&page=3"), "{pages:?}");
    let ours = forge.comments_of(12, "gitward-bot");
    assert_eq!(ours.len(), 1);
    let put = requests.iter().find(|r| r.method == "PUT").expect("an edit");
    assert_eq!(put.path, format!("/projects/acme%2Fdeploy/merge_requests/12/notes/{}", ours[0].0));
    let state = forge.state.lock().unwrap();
    let failed = &state.statuses[1].1;
    assert_eq!((failed["state"].as_str(), failed["name"].as_str()), (Some("failed"), Some("gitward/preview")));
    assert_eq!(state.statuses.len(), 3);
}

#[tokio::test]
async fn gitea_lists_comments_once_and_patches_with_its_token_header() {
    let forge = TestForge::start(ForgeKind::Gitea).await;
    forge.pull(5, HEAD_1, false);
    for i in 0..120 {
        forge.comment(5, "alice", &format!("comment {i}"));
    }
    let poster = Poster::new(&forge.preview(false)).unwrap();
    poster.publish(5, HEAD_1, &report("+a"), false).await.unwrap();
    forge.pull(5, HEAD_2, false);
    poster.publish(5, HEAD_2, &report("+b"), false).await.unwrap();
    let requests = forge.take();
    assert!(requests.iter().all(|r| r.header("authorization") == Some("token s3cret")));
    let lists = requests.iter().filter(|r| r.method == "GET" && r.path.ends_with("/comments")).count();
    assert_eq!(lists, 2, "Gitea answers all comments at once: one listing per publish");
    let ours = forge.comments_of(5, "gitward-bot");
    assert_eq!(ours.len(), 1);
    let patch = requests.iter().find(|r| r.method == "PATCH").expect("an edit");
    assert_eq!(patch.path, format!("/repos/acme/deploy/issues/comments/{}", ours[0].0));
    let statuses: Vec<Value> = forge.state.lock().unwrap().statuses.iter().map(|s| s.1.clone()).collect();
    assert_eq!(statuses[0]["context"], "gitward/preview");
    assert_eq!(statuses.len(), 2);
}

#[tokio::test]
async fn a_fork_pull_request_is_left_alone_unless_forks_are_allowed() {
    let forge = TestForge::start(ForgeKind::Github).await;
    forge.pull(9, HEAD_1, true);
    let poster = Poster::new(&forge.preview(false)).unwrap();
    assert!(poster.is_fork(9).await.unwrap());
    assert!(!poster.wanted(9).await.unwrap());
    assert!(!poster.pending(9, HEAD_1).await.unwrap());
    assert_eq!(poster.publish(9, HEAD_1, &report("+a"), false).await.unwrap(), Published::SkippedFork);
    assert_eq!(writes(&forge.take()), []);
    let allowed = Poster::new(&forge.preview(true)).unwrap();
    assert_eq!(allowed.head_of(9).await.unwrap().sha, HEAD_1);
    let posted = allowed.publish(9, HEAD_1, &report("+a"), false).await.unwrap();
    assert!(matches!(posted, Published::Posted { created: 1, .. }), "{posted:?}");
}

#[tokio::test]
async fn a_github_app_signs_a_jwt_for_an_installation_token_and_posts_as_its_bot() {
    let forge = TestForge::start(ForgeKind::Github).await;
    let dir = tempfile::tempdir().unwrap();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).current_dir(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    openssl(&["genrsa", "-out", "app.pem", "2048"]);
    openssl(&["rsa", "-in", "app.pem", "-pubout", "-out", "app.pub"]);
    forge.state.lock().unwrap().app = Some((4242, std::fs::read(dir.path().join("app.pub")).unwrap()));
    forge.pull(8, HEAD_1, false);
    // The token's user once posted a preview here: not the App's, so left alone.
    forge.comment(8, "gitward-bot", &report("+by the token"));
    let mut preview = forge.preview(false);
    preview.auth =
        ForgeAuth::GithubApp { app_id: 4242, installation_id: 77, private_key_file: dir.path().join("app.pem") };
    let poster = Poster::new(&preview).unwrap();
    poster.publish(8, HEAD_1, &report("+a"), false).await.unwrap();
    forge.pull(8, HEAD_2, false);
    let second = poster.publish(8, HEAD_2, &report("+b"), false).await.unwrap();
    assert!(matches!(second, Published::Posted { edited: 1, created: 0, .. }), "{second:?}");
    assert_eq!(forge.comments_of(8, "gitward-app[bot]").len(), 1);
    assert_eq!(
        forge.comments_of(8, "gitward-bot"),
        [(forge.comments_of(8, "gitward-bot")[0].0, report("+by the token"))]
    );
    let requests = forge.take();
    assert_eq!(forge.state.lock().unwrap().installation_tokens, 1, "the installation token is kept until it expires");
    let writes = requests.iter().filter(|r| r.method != "GET" && !r.path.starts_with("/app"));
    assert!(writes.clone().count() >= 3);
    assert!(writes.clone().all(|r| r.header("authorization") == Some("Bearer ghs_installation1")));
}
