//! `[[preview]]`: a forge repository whose pull requests get a preview report as comments and a
//! `gitward/preview` commit status ([`Preview`]); the table as written, and its checks.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::raw::RawPreview;
use super::resolve::Resolver;
use super::{Result, SyncSet, SyncUnit};

/// Which forge's REST API a preview speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// GitHub or GitHub Enterprise (REST API `2022-11-28`).
    Github,
    /// GitLab (REST API v4): merge requests and their notes.
    Gitlab,
    /// Gitea, and Forgejo, which speaks the same API (`/api/v1`).
    Gitea,
}

impl ForgeKind {
    /// The lowercase name, as the file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::Github => "github",
            ForgeKind::Gitlab => "gitlab",
            ForgeKind::Gitea => "gitea",
        }
    }
}

/// How gitward authenticates to the forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForgeAuth {
    /// An API token (a personal or project access token), read from the file at each use.
    Token {
        /// The file holding the token, trimmed when read.
        token_file: PathBuf,
    },
    /// A GitHub App: an RS256 JWT signed with its key buys an installation token.
    GithubApp {
        /// The App's id (the JWT's `iss`).
        app_id: u64,
        /// The installation whose token is asked for.
        installation_id: u64,
        /// The App's private key, PEM.
        private_key_file: PathBuf,
    },
}

/// One `[[preview]]` table: where pull requests are previewed, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// The forge's API ([`ForgeKind`]).
    pub forge: ForgeKind,
    /// The API base without a trailing `/`: `https://api.github.com` (or a GitHub Enterprise
    /// `https://host/api/v3`), `https://gitlab.com/api/v4`, `https://gitea.host/api/v1`.
    pub api_url: String,
    /// `owner/name`; GitLab: the project's full path or its numeric id.
    pub repository: String,
    /// As whom gitward posts ([`ForgeAuth`]).
    pub auth: ForgeAuth,
    /// Whether pull requests from forks are previewed (default false: a fork's head would
    /// have gitward render code nobody with write access wrote).
    pub allow_forks: bool,
    /// The units previewed, by name; empty: every unit.
    pub sync: Vec<String>,
    /// How often the pull requests' heads are fetched without a webhook (default
    /// [`DEFAULT_PREVIEW_INTERVAL`], 1 minute); any accepted webhook starts a round at once.
    pub interval: std::time::Duration,
}

/// How often `[[preview]]` fetches the pull requests' heads by default: 1 minute.
pub const DEFAULT_PREVIEW_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

impl Preview {
    /// Whether this preview covers the unit named `unit`.
    pub fn covers(&self, unit: &str) -> bool {
        self.sync.is_empty() || self.sync.iter().any(|u| u == unit)
    }
}

impl Resolver<'_> {
    /// Resolves every `[[preview]]` table; `units` and `sets` are what `sync = [...]` may name.
    pub(super) fn previews(
        &self,
        tables: Vec<Spanned<RawPreview>>,
        units: &[SyncUnit],
        sets: &[SyncSet],
    ) -> Result<Vec<Preview>> {
        tables.into_iter().enumerate().map(|(i, t)| self.preview(i, t, units, sets)).collect()
    }

    fn preview(
        &self,
        index: usize,
        table: Spanned<RawPreview>,
        units: &[SyncUnit],
        sets: &[SyncSet],
    ) -> Result<Preview> {
        let span = table.span();
        let raw = table.into_inner();
        let key = |k: &str| format!("preview[{index}].{k}");
        let forge = raw.forge;
        let api_url = match (raw.api_url, forge) {
            (Some(url), _) => {
                self.check(url, &key("api_url"), super::notify::http_url)?.trim_end_matches('/').to_owned()
            }
            (None, ForgeKind::Github) => "https://api.github.com".to_owned(),
            (None, ForgeKind::Gitlab) => "https://gitlab.com/api/v4".to_owned(),
            (None, ForgeKind::Gitea) => {
                let message = "gitea has no public default: add api_url = \"https://gitea.host/api/v1\"";
                return Err(self.invalid(Some(span), &key("api_url"), message.to_owned()));
            }
        };
        let check = if forge == ForgeKind::Gitlab { project } else { owner_name };
        let repository = self.check(raw.repository, &key("repository"), check)?;
        let app = (raw.app_id, raw.installation_id, raw.private_key_file);
        let auth = match (raw.token_file, app) {
            (Some(t), (None, None, None)) => ForgeAuth::Token { token_file: self.file(t, &key("token_file"))? },
            (None, (Some(app_id), Some(installation_id), Some(key_file))) if forge == ForgeKind::Github => {
                let private_key_file = self.file(key_file, &key("private_key_file"))?;
                ForgeAuth::GithubApp { app_id, installation_id, private_key_file }
            }
            (None, (None, None, None)) => {
                let message = "needs a token: add token_file = \"/path/to/token\" (or, on github, app_id, \
                               installation_id and private_key_file)";
                return Err(self.invalid(Some(span), &key("token_file"), message.to_owned()));
            }
            (_, _) => {
                let message = "either token_file, or (github only) all of app_id, installation_id and \
                               private_key_file";
                return Err(self.invalid(Some(span), &key("token_file"), message.to_owned()));
            }
        };
        let sync = self.unit_names(raw.sync.unwrap_or_default(), units, sets, &key("sync"))?;
        Ok(Preview {
            forge,
            api_url,
            repository,
            auth,
            allow_forks: raw.allow_forks.unwrap_or(false),
            interval: self.duration(raw.interval, &key("interval"))?.unwrap_or(DEFAULT_PREVIEW_INTERVAL),
            sync,
        })
    }
}

fn owner_name(value: &str) -> std::result::Result<(), String> {
    let parts: Vec<&str> = value.split('/').collect();
    if parts.len() == 2 && parts.iter().all(|p| !p.is_empty() && !p.contains(char::is_whitespace)) {
        Ok(())
    } else {
        Err(format!("`{value}` is not `owner/name`"))
    }
}

fn project(value: &str) -> std::result::Result<(), String> {
    let parts: Vec<&str> = value.split('/').collect();
    let path = parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && !p.contains(char::is_whitespace));
    if path || (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())) {
        Ok(())
    } else {
        Err(format!("`{value}` is neither a project path (`group/name`) nor a project id"))
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
    fn a_preview_gets_its_default_api_no_forks_and_every_unit() {
        let text = "[[preview]]\nforge = \"github\"\nrepository = \"acme/deploy\"\ntoken_file = \"tok\"\n";
        let config = parse(&format!("{MINIMAL}{text}")).unwrap();
        let preview = &config.preview[0];
        assert_eq!(preview.api_url, "https://api.github.com");
        assert_eq!(preview.auth, ForgeAuth::Token { token_file: "/etc/gitward/tok".into() });
        assert!(!preview.allow_forks && preview.covers("shop") && preview.covers("other"));
        assert!(parse(MINIMAL).unwrap().preview.is_empty());
    }

    #[test]
    fn a_github_app_and_a_gitlab_project_id_are_taken() {
        let text = "[[preview]]\nforge = \"github\"\nrepository = \"acme/deploy\"\napp_id = 12\n\
                    installation_id = 34\nprivate_key_file = \"app.pem\"\nallow_forks = true\nsync = [\"shop\"]\n\
                    [[preview]]\nforge = \"gitlab\"\nrepository = \"4711\"\ntoken_file = \"t\"\n";
        let config = parse(&format!("{MINIMAL}{text}")).unwrap();
        let app =
            ForgeAuth::GithubApp { app_id: 12, installation_id: 34, private_key_file: "/etc/gitward/app.pem".into() };
        assert_eq!(config.preview[0].auth, app);
        assert!(config.preview[0].allow_forks && !config.preview[0].covers("other"));
        assert_eq!(config.preview[1].repository, "4711");
        assert_eq!(config.preview[1].api_url, "https://gitlab.com/api/v4");
    }

    #[test]
    fn bad_previews_are_refused_with_the_key_and_why() {
        let e = error("[[preview]]\nforge = \"gitea\"\nrepository = \"a/b\"\ntoken_file = \"t\"\n");
        assert!(e.contains("preview[0].api_url: gitea has no public default"), "{e}");
        let e = error("[[preview]]\nforge = \"github\"\nrepository = \"a/b\"\n");
        assert!(e.contains("preview[0].token_file: needs a token"), "{e}");
        let e = error(
            "[[preview]]\nforge = \"gitlab\"\nrepository = \"a/b\"\napp_id = 1\ninstallation_id = 2\nprivate_key_file = \"k\"\n",
        );
        assert!(e.contains("(github only)"), "{e}");
        let e = error("[[preview]]\nforge = \"github\"\nrepository = \"a/b\"\ntoken_file = \"t\"\napp_id = 1\n");
        assert!(e.contains("either token_file"), "{e}");
        let e = error("[[preview]]\nforge = \"github\"\nrepository = \"a/b/c\"\ntoken_file = \"t\"\n");
        assert!(e.contains("preview[0].repository: `a/b/c` is not `owner/name`"), "{e}");
        let e = error("[[preview]]\nforge = \"github\"\nrepository = \"a/b\"\ntoken_file = \"t\"\nsync = [\"cart\"]\n");
        assert!(e.contains("preview[0].sync: no [[sync]] unit is named `cart`"), "{e}");
        let e = error("[[preview]]\nforge = \"bitbucket\"\nrepository = \"a/b\"\n");
        assert!(e.contains("unknown variant `bitbucket`"), "{e}");
    }
}
