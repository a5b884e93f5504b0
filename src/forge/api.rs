//! What each forge's REST API calls things, pure: the path of each request, the headers, the
//! body of a status, and what an answer means. The requests, by forge:
//!
//! - GitHub (REST `2022-11-28`, <https://docs.github.com/en/rest/issues/comments>,
//!   <https://docs.github.com/en/rest/commits/statuses>, <https://docs.github.com/en/rest/pulls/pulls>):
//!   `GET|POST /repos/{o}/{r}/issues/{n}/comments` (`per_page=100&page=N`, the next page in
//!   `Link: <…>; rel="next"`), `PATCH|DELETE /repos/{o}/{r}/issues/comments/{id}`,
//!   `POST /repos/{o}/{r}/statuses/{sha}`, `GET /repos/{o}/{r}/pulls/{n}`, `GET /user`;
//!   `Accept: application/vnd.github+json`, `X-GitHub-Api-Version: 2022-11-28`,
//!   `Authorization: Bearer …`. A comment body holds at most 65,536 characters (422 beyond).
//! - GitLab (REST v4, <https://docs.gitlab.com/api/notes/#merge-requests>,
//!   <https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit>,
//!   <https://docs.gitlab.com/api/merge_requests/>): `GET|POST /projects/:id/merge_requests/:iid/notes`
//!   (`per_page=100&page=N`, the next page in `X-Next-Page`), `PUT|DELETE …/notes/:note_id`,
//!   `POST /projects/:id/statuses/:sha` (`state` `pending`, `success`, `failed`; `name`),
//!   `GET /projects/:id/merge_requests/:iid`, `GET /user`; `PRIVATE-TOKEN: …`. A note holds at
//!   most 1,000,000 characters.
//! - Gitea and Forgejo (<https://gitea.com/api/swagger>): `GET|POST /repos/{o}/{r}/issues/{idx}/comments`
//!   (`page`/`limit` sent; the server answers every comment of an issue at once and a `Link`
//!   header when it pages), `PATCH|DELETE /repos/{o}/{r}/issues/comments/{id}`,
//!   `POST /repos/{o}/{r}/statuses/{sha}`, `GET /repos/{o}/{r}/pulls/{n}`, `GET /user`;
//!   `Authorization: token …`. Gitea documents no body limit (the column is `LONGTEXT`); GitHub's
//!   is used.

use serde_json::{Value, json};

use crate::config::ForgeKind;

/// The context (GitHub, Gitea) or name (GitLab) of the preview's commit status.
pub const STATUS_CONTEXT: &str = "gitward/preview";

/// GitHub's and Gitea's comments per page, and GitLab's notes.
pub(super) const PER_PAGE: usize = 100;

/// Gitea's page size: its `MAX_RESPONSE_ITEMS` default.
const GITEA_LIMIT: usize = 50;

/// The state of a preview's commit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusState {
    /// The preview of this head is under way.
    Pending,
    /// The preview found nothing that fails.
    Success,
    /// The preview found something that fails.
    Failure,
}

/// A comment on a pull request, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// The forge's id of the comment (GitLab: the note's id).
    pub id: u64,
    /// Its author's login (GitLab: username).
    pub author: String,
    /// Its Markdown.
    pub body: String,
}

/// A pull request's head, as the forge tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The head commit's SHA.
    pub sha: String,
    /// Whether the head is in another repository than the base (a fork).
    pub fork: bool,
    /// Whether the pull request is open (GitHub and Gitea `state: "open"`, GitLab
    /// `"opened"`): a forge keeps the head ref of a closed one.
    pub open: bool,
}

/// The paths of one repository's requests on one forge.
#[derive(Debug, Clone)]
pub(super) struct Routes {
    pub kind: ForgeKind,
    /// The API base, no trailing `/`.
    pub base: String,
    /// `owner/name`, or GitLab's project path or id.
    pub repository: String,
}

impl Routes {
    /// The repository's part of a path: `/repos/o/r`, or GitLab's `/projects/<encoded>`.
    fn repo(&self) -> String {
        match self.kind {
            ForgeKind::Gitlab => {
                let id: String = url::form_urlencoded::byte_serialize(self.repository.as_bytes()).collect();
                format!("{}/projects/{id}", self.base)
            }
            ForgeKind::Github | ForgeKind::Gitea => format!("{}/repos/{}", self.base, self.repository),
        }
    }

    /// The comments of pull request `pr`, page `page` (1-based).
    pub fn comments(&self, pr: u64, page: usize) -> String {
        match self.kind {
            ForgeKind::Github => format!("{}/issues/{pr}/comments?per_page={PER_PAGE}&page={page}", self.repo()),
            ForgeKind::Gitlab => format!(
                "{}/merge_requests/{pr}/notes?per_page={PER_PAGE}&page={page}&sort=asc&order_by=created_at",
                self.repo()
            ),
            ForgeKind::Gitea => format!("{}/issues/{pr}/comments?page={page}&limit={GITEA_LIMIT}", self.repo()),
        }
    }

    /// Where a new comment on `pr` is posted.
    pub fn new_comment(&self, pr: u64) -> String {
        match self.kind {
            ForgeKind::Gitlab => format!("{}/merge_requests/{pr}/notes", self.repo()),
            ForgeKind::Github | ForgeKind::Gitea => format!("{}/issues/{pr}/comments", self.repo()),
        }
    }

    /// Comment `id` of `pr`, to edit or delete.
    pub fn comment(&self, pr: u64, id: u64) -> String {
        match self.kind {
            ForgeKind::Gitlab => format!("{}/merge_requests/{pr}/notes/{id}", self.repo()),
            ForgeKind::Github | ForgeKind::Gitea => format!("{}/issues/comments/{id}", self.repo()),
        }
    }

    /// The edit's method: GitLab `PUT`s a note, the others `PATCH` a comment.
    pub fn edit_method(&self) -> reqwest::Method {
        match self.kind {
            ForgeKind::Gitlab => reqwest::Method::PUT,
            ForgeKind::Github | ForgeKind::Gitea => reqwest::Method::PATCH,
        }
    }

    /// The statuses of commit `sha`.
    pub fn status(&self, sha: &str) -> String {
        format!("{}/statuses/{sha}", self.repo())
    }

    /// Pull request `pr` (GitLab: merge request).
    pub fn pull(&self, pr: u64) -> String {
        match self.kind {
            ForgeKind::Gitlab => format!("{}/merge_requests/{pr}", self.repo()),
            ForgeKind::Github | ForgeKind::Gitea => format!("{}/pulls/{pr}", self.repo()),
        }
    }

    /// The authenticated user.
    pub fn user(&self) -> String {
        format!("{}/user", self.base)
    }

    /// The headers every request carries besides the token's.
    pub fn headers(&self) -> &'static [(&'static str, &'static str)] {
        match self.kind {
            ForgeKind::Github => &[("Accept", "application/vnd.github+json"), ("X-GitHub-Api-Version", "2022-11-28")],
            ForgeKind::Gitlab | ForgeKind::Gitea => &[("Accept", "application/json")],
        }
    }

    /// The header that carries `token`.
    pub fn token_header(&self, token: &str) -> (&'static str, String) {
        match self.kind {
            ForgeKind::Github => ("Authorization", format!("Bearer {token}")),
            ForgeKind::Gitlab => ("PRIVATE-TOKEN", token.to_owned()),
            ForgeKind::Gitea => ("Authorization", format!("token {token}")),
        }
    }

    /// The most characters a comment body may hold.
    pub fn body_limit(&self) -> usize {
        match self.kind {
            ForgeKind::Gitlab => 1_000_000,
            ForgeKind::Github | ForgeKind::Gitea => 65_536,
        }
    }

    /// The body of a comment or note.
    pub fn comment_body(&self, markdown: &str) -> Value {
        json!({ "body": markdown })
    }

    /// The body of the preview's commit status.
    pub fn status_body(&self, state: StatusState, description: &str) -> Value {
        let state = match (self.kind, state) {
            (_, StatusState::Pending) => "pending",
            (_, StatusState::Success) => "success",
            (ForgeKind::Gitlab, StatusState::Failure) => "failed",
            (_, StatusState::Failure) => "failure",
        };
        match self.kind {
            ForgeKind::Gitlab => json!({"state": state, "name": STATUS_CONTEXT, "description": description}),
            _ => json!({"state": state, "context": STATUS_CONTEXT, "description": description}),
        }
    }

    /// The comments of one page of the listing; GitLab's system notes (a push, a label) left out.
    pub fn parse_comments(&self, page: &Value) -> Option<Vec<Comment>> {
        let author = if self.kind == ForgeKind::Gitlab { ("author", "username") } else { ("user", "login") };
        let notes = page.as_array()?;
        let ours = notes.iter().filter(|n| !n["system"].as_bool().unwrap_or(false));
        ours.map(|n| {
            Some(Comment {
                id: n["id"].as_u64()?,
                author: n[author.0][author.1].as_str().unwrap_or_default().to_owned(),
                body: n["body"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect()
    }

    /// The id of a comment just created.
    pub fn parse_id(&self, created: &Value) -> Option<u64> {
        created["id"].as_u64()
    }

    /// The login in the answer of [`Routes::user`].
    pub fn parse_login(&self, user: &Value) -> Option<String> {
        let key = if self.kind == ForgeKind::Gitlab { "username" } else { "login" };
        user[key].as_str().map(str::to_owned)
    }

    /// The head of a pull request (a head repository gone is a fork: only forks are deleted
    /// under an open pull request).
    pub fn parse_head(&self, pull: &Value) -> Option<Head> {
        match self.kind {
            ForgeKind::Gitlab => Some(Head {
                sha: pull["sha"].as_str()?.to_owned(),
                fork: pull["source_project_id"] != pull["target_project_id"],
                open: pull["state"] == "opened",
            }),
            ForgeKind::Github | ForgeKind::Gitea => {
                let (head, base) = (&pull["head"]["repo"], &pull["base"]["repo"]);
                let fork = head.is_null() || head["full_name"] != base["full_name"];
                Some(Head { sha: pull["head"]["sha"].as_str()?.to_owned(), fork, open: pull["state"] == "open" })
            }
        }
    }
}

/// The next page's URL from a `Link` header: the `<…>` of the entry with `rel="next"`.
pub(super) fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|entry| {
        let (url, params) = entry.trim().split_once(';')?;
        let next = params.split(';').any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"));
        next.then(|| url.trim().trim_start_matches('<').trim_end_matches('>').to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(kind: ForgeKind, base: &str, repository: &str) -> Routes {
        Routes { kind, base: base.into(), repository: repository.into() }
    }

    #[test]
    fn each_forge_gets_its_paths_and_states() {
        let gl = routes(ForgeKind::Gitlab, "https://gitlab.com/api/v4", "g/sub/app");
        assert_eq!(gl.comment(7, 9), "https://gitlab.com/api/v4/projects/g%2Fsub%2Fapp/merge_requests/7/notes/9");
        assert_eq!(gl.status_body(StatusState::Failure, "x")["state"], "failed");
        assert_eq!(gl.status_body(StatusState::Failure, "x")["name"], STATUS_CONTEXT);
        let gh = routes(ForgeKind::Github, "https://api.github.com", "o/r");
        assert_eq!(gh.comments(3, 2), "https://api.github.com/repos/o/r/issues/3/comments?per_page=100&page=2");
        assert_eq!(gh.comment(3, 11), "https://api.github.com/repos/o/r/issues/comments/11");
        assert_eq!(gh.status_body(StatusState::Failure, "x")["state"], "failure");
        let gt = routes(ForgeKind::Gitea, "https://h/api/v1", "o/r");
        assert_eq!(gt.pull(4), "https://h/api/v1/repos/o/r/pulls/4");
        assert_eq!(gt.token_header("t"), ("Authorization", "token t".to_owned()));
    }

    #[test]
    fn a_head_from_another_repository_or_none_is_a_fork() {
        let gh = routes(ForgeKind::Github, "https://api.github.com", "o/r");
        let pull = |head: Value| json!({"state": "open", "head": {"sha": "abc", "repo": head}, "base": {"repo": {"full_name": "o/r"}}});
        let head = Head { sha: "abc".into(), fork: false, open: true };
        assert_eq!(gh.parse_head(&pull(json!({"full_name": "o/r"}))), Some(head));
        assert!(gh.parse_head(&pull(json!({"full_name": "x/r"}))).unwrap().fork);
        assert!(gh.parse_head(&pull(Value::Null)).unwrap().fork);
        let gl = routes(ForgeKind::Gitlab, "https://gitlab.com/api/v4", "1");
        let mr = json!({"sha": "abc", "state": "merged", "source_project_id": 2, "target_project_id": 1});
        let head = gl.parse_head(&mr).unwrap();
        assert!(head.fork && !head.open, "{head:?}");
    }

    #[test]
    fn the_next_link_is_read_among_others() {
        let link = "<https://api.github.com/x?page=1>; rel=\"prev\", <https://api.github.com/x?page=3>; rel=\"next\"";
        assert_eq!(next_link(link).as_deref(), Some("https://api.github.com/x?page=3"));
        assert_eq!(next_link("<https://a/x?page=1>; rel=\"first\""), None);
    }
}
