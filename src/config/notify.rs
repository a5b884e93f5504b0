//! `[[notify]]`: where gitward tells of syncs beyond its log — a signed JSON webhook, a Slack
//! incoming webhook, or a commit status on GitHub, GitLab or Gitea ([`Notify`]); the table as
//! written, and its checks.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::raw::RawNotify;
use super::resolve::Resolver;
use super::{Result, SyncSet, SyncUnit};

/// Where notifications go (`kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NotifyKind {
    /// A JSON `POST` to `url`, signed with `secret_file` when given.
    Webhook,
    /// A Slack incoming webhook message (`blocks` and a `text` fallback) to `url`.
    Slack,
    /// A GitHub commit status (REST `POST /repos/{owner}/{repo}/statuses/{sha}`).
    Github,
    /// A GitLab commit status (REST `POST /projects/{id}/statuses/{sha}`).
    Gitlab,
    /// A Gitea (or Forgejo) commit status (REST `POST /repos/{owner}/{repo}/statuses/{sha}`).
    Gitea,
}

impl NotifyKind {
    /// The lowercase name, as the file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyKind::Webhook => "webhook",
            NotifyKind::Slack => "slack",
            NotifyKind::Github => "github",
            NotifyKind::Gitlab => "gitlab",
            NotifyKind::Gitea => "gitea",
        }
    }

    /// True for the kinds that set commit statuses on a forge (they need a `token_file`).
    pub fn is_forge(self) -> bool {
        matches!(self, NotifyKind::Github | NotifyKind::Gitlab | NotifyKind::Gitea)
    }
}

/// What a notifier is told of (`on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NotifyEvent {
    /// A revision failed: an object the API server refused, a post hook that failed, or the
    /// sync failed as a whole (a parse or render error, an unreachable cluster).
    Failed,
    /// A revision applied but its health wait found an object `Failed`.
    Degraded,
    /// The first good sync after a failed or degraded one.
    Recovered,
    /// Every revision: a forge's `pending` status when its objects are sent, and the end of
    /// each good sync (`success`).
    Applied,
}

impl NotifyEvent {
    /// The lowercase name, as the file spells it and the webhook body's `event` carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Failed => "failed",
            NotifyEvent::Degraded => "degraded",
            NotifyEvent::Recovered => "recovered",
            NotifyEvent::Applied => "applied",
        }
    }
}

/// One `[[notify]]` table: a notifier and what it is told of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// What is sent, and how ([`NotifyKind`]), required.
    pub kind: NotifyKind,
    /// Where, required, `http://` or `https://`: the webhook's URL; Slack's incoming-webhook
    /// URL (it is the secret, so it is masked in every line gitward writes); for forges the
    /// API base — `https://api.github.com` or a GitHub Enterprise `https://host/api/v3`,
    /// `https://gitlab.com/api/v4`, `https://gitea.host/api/v1` — without a trailing `/`.
    pub url: String,
    /// The API token of a forge, read at each send (trimmed) and masked in logs; required for
    /// forges, refused for the other kinds.
    pub token_file: Option<PathBuf>,
    /// The webhook's HMAC-SHA256 key, read at each send (trimmed): the body is signed in
    /// `X-Gitward-Signature-256: sha256=<hex>`; only for `webhook`. Default: unsigned.
    pub secret_file: Option<PathBuf>,
    /// The units told of, by name: each a `[[sync]]` unit, or one a `[[sync_set]]`'s `name`
    /// template could make (checked when the sets expand, [`super::Config::with_sets`]).
    /// Default empty: every unit.
    pub units: Vec<String>,
    /// What is told ([`NotifyEvent`]). Default `failed`, `degraded`, `recovered`: what someone
    /// should act on, and its end, not every revision.
    pub on: Vec<NotifyEvent>,
    /// A forge's `owner/name` (GitLab: the project's full path) of the units' repository.
    /// Default: read from each unit's `repo` URL (`https://host/owner/name.git`,
    /// `ssh://git@host/owner/name`, `git@host:owner/name.git`).
    pub repository: Option<String>,
}

impl Notify {
    /// Whether `unit` is told of `event`.
    pub fn wants(&self, unit: &str, event: NotifyEvent) -> bool {
        (self.units.is_empty() || self.units.iter().any(|u| u == unit)) && self.on.contains(&event)
    }
}

impl Resolver<'_> {
    /// The unit names a table lists (`key`), each a `[[sync]]` unit of `units` or one `sets`
    /// could make; the first other name is refused with its span.
    pub(super) fn unit_names(
        &self,
        names: Vec<Spanned<String>>,
        units: &[SyncUnit],
        sets: &[SyncSet],
        key: &str,
    ) -> Result<Vec<String>> {
        let known = |n: &str| units.iter().any(|u| u.name == n) || super::depends::made_by_a_set(sets, n);
        if let Some(unknown) = names.iter().find(|n| !known(n.get_ref())) {
            let message = format!("no [[sync]] unit is named `{}`, nor can a sync set make it", unknown.get_ref());
            return Err(self.invalid(Some(unknown.span()), key, message));
        }
        Ok(names.into_iter().map(Spanned::into_inner).collect())
    }

    /// Resolves every `[[notify]]` table (`tables` with the span of each); `units` are the
    /// resolved `[[sync]]` units that `units = [...]` may name, besides those `sets` could make.
    pub(super) fn notify(
        &self,
        tables: Vec<Spanned<RawNotify>>,
        units: &[SyncUnit],
        sets: &[SyncSet],
    ) -> Result<Vec<Notify>> {
        tables.into_iter().enumerate().map(|(i, t)| self.notify_table(i, t, units, sets)).collect()
    }

    fn notify_table(
        &self,
        index: usize,
        table: Spanned<RawNotify>,
        units: &[SyncUnit],
        sets: &[SyncSet],
    ) -> Result<Notify> {
        let span = table.span();
        let raw = table.into_inner();
        let key = |k: &str| format!("notify[{index}].{k}");
        let kind = raw.kind;
        let url = self.check(raw.url, &key("url"), http_url)?.trim_end_matches('/').to_owned();
        if kind.is_forge() && raw.token_file.is_none() {
            let message = format!("kind `{}` needs the API token: add token_file = \"/path/to/token\"", kind.as_str());
            return Err(self.invalid(Some(span), &key("token_file"), message));
        }
        if let Some(t) = raw.token_file.as_ref().filter(|_| !kind.is_forge()) {
            let message =
                format!("kind `{}` sends no token; token_file is for github, gitlab and gitea", kind.as_str());
            return Err(self.invalid(Some(t.span()), &key("token_file"), message));
        }
        if let Some(s) = raw.secret_file.as_ref().filter(|_| kind != NotifyKind::Webhook) {
            let message = format!("kind `{}` signs nothing; secret_file is for kind `webhook`", kind.as_str());
            return Err(self.invalid(Some(s.span()), &key("secret_file"), message));
        }
        let names = self.unit_names(raw.units.unwrap_or_default(), units, sets, &key("units"))?;
        let repository = match raw.repository {
            Some(r) => Some(self.check(r, &key("repository"), owner_name)?),
            None => None,
        };
        // A commit status is set on the unit's repository: one it cannot be derived from would
        // fail every send, so it is refused here.
        let covered = units.iter().filter(|u| names.is_empty() || names.iter().any(|n| n == &u.name));
        if let Some(unit) = covered
            .filter(|u| u.is_git())
            .find(|u| repository_path(&u.repo).is_none())
            .filter(|_| kind.is_forge() && repository.is_none())
        {
            let message = format!(
                "kind `{}` sets commit statuses on the units' repository, and the repo of unit `{}` names no \
                 owner/name: set repository = \"owner/name\"",
                kind.as_str(),
                unit.name
            );
            return Err(self.invalid(Some(span), &key("repository"), message));
        }
        if kind == NotifyKind::Slack {
            crate::telemetry::mask::register([url.as_str()]);
        }
        let mut on = raw.on.unwrap_or_else(|| vec![NotifyEvent::Failed, NotifyEvent::Degraded, NotifyEvent::Recovered]);
        on.sort();
        on.dedup();
        Ok(Notify {
            kind,
            url,
            token_file: raw.token_file.map(|p| self.file(p, &key("token_file"))).transpose()?,
            secret_file: raw.secret_file.map(|p| self.file(p, &key("secret_file"))).transpose()?,
            units: names,
            on,
            repository,
        })
    }
}

/// The repository path of a git URL, without `.git`: `https://host/owner/name.git`,
/// `ssh://git@host:22/owner/name`, `git@host:owner/name.git` give `owner/name` (GitLab's
/// nested groups: `group/sub/name`). `None` for a local path or a URL without two segments.
/// What a forge notifier without `repository` sets its commit statuses on.
pub fn repository_path(repo: &str) -> Option<String> {
    let path = if let Some((scheme, rest)) = repo.split_once("://") {
        if scheme == "file" {
            return None;
        }
        rest.split_once('/')?.1
    } else {
        let (host, path) = repo.split_once(':')?;
        if host.contains('/') {
            return None;
        }
        path
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let segments = path.split('/').filter(|s| !s.is_empty()).count();
    (segments >= 2).then(|| path.to_owned())
}

/// Refuses `value` unless it is an `http://` or `https://` URL with a host.
pub(super) fn http_url(value: &str) -> std::result::Result<(), String> {
    let rest = value.strip_prefix("https://").or_else(|| value.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        _ => Err(format!("`{value}` is not an http:// or https:// URL")),
    }
}

fn owner_name(value: &str) -> std::result::Result<(), String> {
    let parts: Vec<&str> = value.split('/').collect();
    if parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && !p.contains(char::is_whitespace)) {
        Ok(())
    } else {
        Err(format!("`{value}` is not `owner/name`"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, parse};
    use super::*;

    fn error(tables: &str) -> String {
        parse(&format!("{MINIMAL}{tables}")).expect_err("refused").to_string()
    }

    #[test]
    fn a_notifier_gets_the_default_events_and_every_unit() {
        let config = parse(&format!("{MINIMAL}[[notify]]\nkind = \"webhook\"\nurl = \"https://h/x/\"\n")).unwrap();
        let notify = &config.notify[0];
        assert_eq!(notify.url, "https://h/x");
        assert_eq!(notify.on, [NotifyEvent::Failed, NotifyEvent::Degraded, NotifyEvent::Recovered]);
        assert!(notify.wants("shop", NotifyEvent::Failed) && !notify.wants("shop", NotifyEvent::Applied));
        assert!(parse(MINIMAL).unwrap().notify.is_empty());
    }

    #[test]
    fn a_forge_notifier_whose_repository_cannot_be_derived_is_refused_at_load() {
        let e = error("[[notify]]\nkind = \"github\"\nurl = \"https://api.github.com\"\ntoken_file = \"t\"\n");
        assert!(e.contains("notify[0].repository") && e.contains("unit `shop`"), "{e}");
        let local = "[[sync]]\nname = \"app\"\nrepo = \"https://git.example.com/acme/app.git\"\n";
        let text = format!(
            "{MINIMAL}{local}[[notify]]\nkind = \"gitea\"\nurl = \"https://h\"\ntoken_file = \"t\"\nunits = [\"app\"]\n"
        );
        assert!(parse(&text).is_ok(), "app's repository is acme/app");
    }

    #[test]
    fn a_forge_gets_its_token_file_anchored_and_its_repository_checked() {
        let text = "[[notify]]\nkind = \"gitlab\"\nurl = \"https://gitlab.com/api/v4\"\ntoken_file = \"tok\"\n\
                    repository = \"g/sub/app\"\nunits = [\"shop\"]\non = [\"applied\", \"failed\"]\n";
        let config = parse(&format!("{MINIMAL}{text}")).unwrap();
        let notify = &config.notify[0];
        assert_eq!(notify.token_file.as_deref(), Some(std::path::Path::new("/etc/gitward/tok")));
        assert_eq!(notify.repository.as_deref(), Some("g/sub/app"));
        assert_eq!(notify.on, [NotifyEvent::Failed, NotifyEvent::Applied]);
    }

    #[test]
    fn bad_notifiers_are_refused_with_the_key_and_why() {
        let e = error("[[notify]]\nkind = \"teams\"\nurl = \"https://h\"\n");
        assert!(e.contains("unknown variant `teams`") && e.contains("webhook"), "{e}");
        let e = error("[[notify]]\nkind = \"webhook\"\n");
        assert!(e.contains("missing field `url`"), "{e}");
        let e = error("[[notify]]\nkind = \"github\"\nurl = \"https://api.github.com\"\n");
        assert!(e.contains("notify[0].token_file: kind `github` needs the API token"), "{e}");
        let e = error("[[notify]]\nkind = \"webhook\"\nurl = \"https://h\"\non = [\"exploded\"]\n");
        assert!(e.contains("unknown variant `exploded`") && e.contains("recovered"), "{e}");
        let e = error("[[notify]]\nkind = \"webhook\"\nurl = \"ftp://h\"\n");
        assert!(e.contains("line 6: notify[0].url: `ftp://h` is not an http:// or https:// URL"), "{e}");
        let e = error("[[notify]]\nkind = \"slack\"\nurl = \"https://h\"\nunits = [\"cart\"]\n");
        assert!(e.contains("notify[0].units: no [[sync]] unit is named `cart`"), "{e}");
        let e = error("[[notify]]\nkind = \"slack\"\nurl = \"https://h\"\nsecret_file = \"k\"\n");
        assert!(e.contains("secret_file is for kind `webhook`"), "{e}");
        let e = error("[[notify]]\nkind = \"gitea\"\nurl = \"https://h\"\ntoken_file = \"t\"\nrepository = \"app\"\n");
        assert!(e.contains("notify[0].repository: `app` is not `owner/name`"), "{e}");
    }
}
