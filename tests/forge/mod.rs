//! Preview reports on pull requests (`gitward::forge`) against a recording test forge that answers as GitHub, GitLab and Gitea do: comments kept in place, split under each forge's limit, commit statuses, fork pull requests; no cluster needed.

pub(crate) mod comments;
pub(crate) mod server;
