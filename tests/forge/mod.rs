//! Preview reports on pull requests (`gitward::forge`) against a recording test forge that answers as GitHub, GitLab and Gitea do: comments kept in place, split under each forge's limit, commit statuses, fork pull requests; `gitward run` posting the previews of a repository's pull-request heads, against the real apiserver; and the same against a real Gitea (`gitea_e2e`).

pub(crate) mod comments;
pub(crate) mod daemon;
pub(crate) mod gitea_e2e;
pub(crate) mod server;
