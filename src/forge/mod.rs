//! Preview reports on pull requests (`[[preview]]`): a report's Markdown posted as comments on
//! a GitHub pull request, a GitLab merge request or a Gitea/Forgejo pull request, kept up to
//! date in place, and the `gitward/preview` commit status of its head.
//!
//! [`Poster`] is what the daemon calls: [`Poster::pending`] when a preview of a head starts,
//! [`Poster::publish`] with its report, [`Poster::head_of`] and [`Poster::is_fork`] to ask about
//! a pull request. Files: `api` (pure: each forge's paths, headers, bodies and answers, with
//! the API docs they follow), `client` (the requests, pagination), `auth` (a token file, or a
//! GitHub App's installation token), `split` (pure: a report over the forge's limit as parts
//! that render on their own, never truncated), `upkeep` (pure: which comments to edit, post and
//! delete).

mod api;
mod auth;
mod client;
pub mod split;
mod upkeep;

use std::collections::HashSet;
use std::path::PathBuf;

use tokio::sync::{Mutex, OnceCell};

pub use api::{Comment, Head, STATUS_CONTEXT, StatusState};
pub use client::Client;
pub use split::{MARKER, MARKER_PREFIX, split_bodies};
pub use upkeep::{Step, plan};

use crate::config::Preview;

/// What went wrong talking to a forge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request got no answer (connection, TLS, timeout).
    #[error("{request}: {source}")]
    Http {
        /// The method and path.
        request: String,
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
    },
    /// The forge answered other than 2xx.
    #[error("{request}: the forge answered {status}: {message}")]
    Status {
        /// The method and path.
        request: String,
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        message: String,
    },
    /// The token file or the App's key could not be read or used.
    #[error("credentials {}: {source}", path.display())]
    Credentials {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An answer without what the API documents.
    #[error("{0}")]
    Answer(String),
}

/// What [`Poster::publish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The report is on the pull request: its comments' ids in part order, and what changed.
    Posted {
        /// The ids of the report's comments, part 1 first.
        comments: Vec<u64>,
        /// Comments posted.
        created: usize,
        /// Comments whose body was replaced.
        edited: usize,
        /// Comments of parts the report no longer has, deleted.
        deleted: usize,
        /// Whether the commit status was set now (false: it already was, for this head).
        status_set: bool,
    },
    /// The pull request's head is in a fork and `allow_forks` is off: nothing was posted.
    SkippedFork,
    /// The pull request has moved on to another head: a report of an old one is not posted.
    Stale {
        /// The head the pull request has now.
        head: String,
    },
}

/// Posts the reports of one `[[preview]]` repository, as one identity.
#[derive(Debug)]
pub struct Poster {
    client: Client,
    allow_forks: bool,
    identity: OnceCell<String>,
    /// The (head SHA, state) pairs already set, so each is posted at most once.
    statuses: Mutex<HashSet<(String, StatusState)>>,
}

impl Poster {
    /// The poster of `preview` (no request is sent yet).
    pub fn new(preview: &Preview) -> Result<Poster, Error> {
        Ok(Poster {
            client: Client::new(preview)?,
            allow_forks: preview.allow_forks,
            identity: OnceCell::new(),
            statuses: Mutex::new(HashSet::new()),
        })
    }

    /// The most bytes one comment may hold on this forge.
    pub fn body_limit(&self) -> usize {
        self.client.routes.body_limit()
    }

    /// Pull request `pr`'s head: its SHA and whether a fork holds it.
    pub async fn head_of(&self, pr: u64) -> Result<Head, Error> {
        self.client.head(pr).await
    }

    /// Whether pull request `pr`'s head is in a fork.
    pub async fn is_fork(&self, pr: u64) -> Result<bool, Error> {
        Ok(self.client.head(pr).await?.fork)
    }

    /// Whether a preview of `pr` is to be made at all: not when a fork holds its head and forks
    /// are not allowed.
    pub async fn wanted(&self, pr: u64) -> Result<bool, Error> {
        Ok(self.allow_forks || !self.is_fork(pr).await?)
    }

    /// The `pending` status on `head_sha` while its preview is made; true when set now, false
    /// when it was already (each (head, state) is posted once) or `pr` is a fork's and forks
    /// are not allowed.
    pub async fn pending(&self, pr: u64, head_sha: &str) -> Result<bool, Error> {
        let key = (head_sha.to_owned(), StatusState::Pending);
        if self.statuses.lock().await.contains(&key) || !self.wanted(pr).await? {
            return Ok(false);
        }
        self.status(head_sha, StatusState::Pending, "gitward is previewing this head").await
    }

    /// Puts `markdown`, the report of `pr` at `head_sha`, on the pull request and sets the
    /// head's status (`failure` when `failing`, else `success`). Skipped for a fork's pull
    /// request unless `allow_forks`, and when the pull request has moved on to another head.
    ///
    /// The report, split into parts under the forge's limit ([`split_bodies`]), goes into
    /// the preview comments gitward's identity already has there, in order: each edited in place
    /// when its part changed, one posted per part beyond them, those beyond the parts deleted.
    pub async fn publish(&self, pr: u64, head_sha: &str, markdown: &str, failing: bool) -> Result<Published, Error> {
        let head = self.client.head(pr).await?;
        if head.fork && !self.allow_forks {
            return Ok(Published::SkippedFork);
        }
        if head.sha != head_sha {
            return Ok(Published::Stale { head: head.sha });
        }
        let identity = self.identity.get_or_try_init(|| self.client.identity()).await?;
        let existing = self.client.comments(pr).await?;
        let ours: Vec<&Comment> =
            existing.iter().filter(|c| &c.author == identity && c.body.starts_with(MARKER_PREFIX)).collect();
        let bodies = split_bodies(markdown, self.body_limit());
        let (mut comments, mut created, mut edited, mut deleted) = (Vec::new(), 0, 0, 0);
        for step in plan(&ours, &bodies) {
            match step {
                Step::Keep { id } => comments.push(id),
                Step::Edit { id, body } => {
                    self.client.edit_comment(pr, id, body).await?;
                    comments.push(id);
                    edited += 1;
                }
                Step::Create { body } => {
                    comments.push(self.client.create_comment(pr, body).await?);
                    created += 1;
                }
                Step::Delete { id } => {
                    self.client.delete_comment(pr, id).await?;
                    deleted += 1;
                }
            }
        }
        let (state, description) = if failing {
            (StatusState::Failure, "the preview found what would fail")
        } else {
            (StatusState::Success, "the preview found nothing that fails")
        };
        let status_set = self.status(head_sha, state, description).await?;
        Ok(Published::Posted { comments, created, edited, deleted, status_set })
    }

    async fn status(&self, sha: &str, state: StatusState, description: &str) -> Result<bool, Error> {
        let mut set = self.statuses.lock().await;
        let key = (sha.to_owned(), state);
        if set.contains(&key) {
            return Ok(false);
        }
        self.client.set_status(sha, state, description).await?;
        set.insert(key);
        Ok(true)
    }
}
