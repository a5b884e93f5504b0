//! Which units a webhook triggers, pure (no I/O): the repository URLs and the ref a push
//! payload names, matched against the repository and ref each unit follows.
//!
//! A git unit is triggered by a webhook that names its repository (`repo`) and a ref it follows
//! ([`webhook::ref_matches`]); a webhook that names no repository (`examples/post-receive`
//! sends only the ref) by the ref alone. A chart unit or an OCI artifact unit is triggered only
//! by a webhook naming a repository it downloads from (the chart repository, the artifact's
//! repository) or, for a chart unit with values files in git, that repository and a matching
//! ref: never by a push to another repository, nor by a ref alone. URLs are compared as
//! [`repository_key`]s.

use crate::config::SyncUnit;

use super::webhook;

/// The fields of a payload's `repository` and `project` objects that hold a URL of the pushed
/// repository: GitHub's and Gitea's `clone_url`, `ssh_url`, `git_url`, `html_url` and `url`;
/// GitLab's `git_http_url`, `git_ssh_url`, `http_url`, `web_url`, `url` and `homepage`.
const URL_FIELDS: [&str; 10] = [
    "clone_url",
    "ssh_url",
    "git_url",
    "html_url",
    "url",
    "git_http_url",
    "git_ssh_url",
    "http_url",
    "web_url",
    "homepage",
];

/// The repositories a push payload names, as [`repository_key`]s, sorted and without
/// duplicates: the [`URL_FIELDS`] of its top-level `repository` object (GitHub, Gitea,
/// GitLab) and `project` object (GitLab). Empty when the body is not JSON or names none.
pub fn pushed_repositories(body: &[u8]) -> Vec<String> {
    let Ok(serde_json::Value::Object(payload)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let mut keys: Vec<String> = ["repository", "project"]
        .iter()
        .filter_map(|o| payload.get(*o)?.as_object())
        .flat_map(|o| URL_FIELDS.iter().filter_map(|f| o.get(*f)?.as_str()))
        .map(repository_key)
        .filter(|k| !k.is_empty())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A repository URL reduced to what names the repository: host (and port unless the scheme's
/// default) and path, lowercase, without the scheme, user, a trailing `/` or `.git`, a tag or
/// digest. So `https://github.com/Org/App.git`, `ssh://git@github.com/org/app`,
/// `git@github.com:org/app.git` and `https://github.com/org/app/` all give
/// `github.com/org/app`; `oci://ghcr.io/org/app:v1` gives `ghcr.io/org/app`; a local path or
/// `file://` URL gives its path. Case is ignored because the hosts that send webhooks treat
/// owner and repository names so (an extra match costs one sync; a missed one, the push).
pub fn repository_key(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => (String::new(), url),
    };
    // scp-like `user@host:path` (a colon before any slash), as git reads it.
    let scp = rest.find(':').is_some_and(|colon| rest.find('/').is_none_or(|slash| colon < slash));
    let (authority, path) = match scheme.as_str() {
        "file" => ("", rest),
        "" if scp => rest.split_once(':').expect("a colon"),
        "" => ("", rest),
        _ => rest.split_once('/').unwrap_or((rest, "")),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match (scheme.as_str(), host.rsplit_once(':')) {
        ("https" | "oci", Some((h, "443"))) | ("http", Some((h, "80"))) | ("ssh", Some((h, "22"))) => h,
        ("git", Some((h, "9418"))) => h,
        _ => host,
    };
    let mut path = path.trim_end_matches('/');
    if scheme == "oci" {
        path = path.split_once('@').map_or(path, |(p, _)| p);
        path = path.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')).map_or(path, |(p, _)| p);
    }
    let path = path.strip_suffix(".git").unwrap_or(path).trim_matches('/');
    let key = if authority.is_empty() { format!("/{path}") } else { format!("{host}/{path}") };
    key.trim_end_matches('/').to_lowercase()
}

/// What a unit's webhook triggers are matched against ([`Followed::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// A git unit: its repository's [`repository_key`] and the ref it follows.
    Git {
        /// The key of the unit's `repo`.
        repository: String,
        /// The unit's `ref`: a branch, tag, full ref or commit SHA.
        reference: String,
    },
    /// A chart or OCI artifact unit: what it downloads its revision from.
    Download {
        /// The keys of the repositories it downloads from: a chart unit's `repo_url` (and, for
        /// a registry, the chart's own repository `<repo_url>/<chart>`), an artifact's
        /// repository.
        repositories: Vec<String>,
        /// For a chart unit with values files in git: that repository's key and the ref.
        values: Option<(String, String)>,
    },
}

impl Followed {
    /// What `unit` follows, from its settings ([`SyncUnit::is_git`]).
    pub fn of(unit: &SyncUnit) -> Self {
        if let Some(chart) = &unit.helm.chart {
            let mut repositories = vec![repository_key(&chart.repo_url)];
            if chart.is_oci() {
                repositories.push(repository_key(&format!("{}/{}", chart.repo_url, chart.chart)));
            }
            let values = (!unit.repo.is_empty()).then(|| (repository_key(&unit.repo), unit.reference.clone()));
            return Followed::Download { repositories, values };
        }
        if !unit.is_git() {
            return Followed::Download { repositories: vec![repository_key(&unit.repo)], values: None };
        }
        Followed::git(&unit.repo, &unit.reference)
    }

    /// A git unit of `repo` (a URL or path, as in the config) following `reference`.
    pub fn git(repo: &str, reference: &str) -> Self {
        Followed::Git { repository: repository_key(repo), reference: reference.to_owned() }
    }

    /// Whether a webhook that pushed `pushed` (`None`: it names no ref, and any matches) and
    /// names `repositories` ([`pushed_repositories`]; empty: it names none) triggers the unit
    /// (module doc).
    pub fn triggered_by(&self, pushed: Option<&str>, repositories: &[String]) -> bool {
        let ref_matches = |reference: &str| pushed.is_none_or(|p| webhook::ref_matches(p, reference));
        let named = |key: &String| repositories.contains(key);
        match self {
            Followed::Git { repository, reference } => {
                (repositories.is_empty() || named(repository)) && ref_matches(reference)
            }
            Followed::Download { repositories: downloads, values } => {
                downloads.iter().any(named)
                    || values.as_ref().is_some_and(|(r, reference)| named(r) && ref_matches(reference))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(url: &str) -> String {
        repository_key(url)
    }

    #[test]
    fn one_repository_written_every_way_gives_one_key() {
        for url in [
            "https://github.com/org/app",
            "https://github.com/org/app.git",
            "https://github.com/org/app/",
            "https://github.com/Org/App.git/",
            "https://token@github.com:443/org/app.git",
            "http://github.com/org/app",
            "ssh://git@github.com/org/app.git",
            "ssh://git@github.com:22/org/app",
            "git@github.com:org/app.git",
            "git://github.com/org/app.git",
        ] {
            assert_eq!(key(url), "github.com/org/app", "{url}");
        }
    }

    #[test]
    fn other_repositories_hosts_and_ports_give_other_keys() {
        let app = key("https://github.com/org/app");
        for url in [
            "https://github.com/org/app2",
            "https://github.com/org/app/sub",
            "https://gitlab.com/org/app",
            "https://github.com:8443/org/app",
            "ssh://git@github.com:2222/org/app",
            "https://github.com/other/app",
        ] {
            assert_ne!(key(url), app, "{url}");
        }
    }

    #[test]
    fn local_paths_and_file_urls_give_their_path() {
        assert_eq!(key("/srv/git/app.git"), "/srv/git/app");
        assert_eq!(key("file:///srv/git/app.git/"), "/srv/git/app");
        assert_eq!(key("/srv/git/app"), "/srv/git/app");
        assert_eq!(key("git@host:app.git"), "host/app", "scp-like, no slash in the path");
    }

    #[test]
    fn an_oci_url_loses_its_tag_or_digest() {
        assert_eq!(key("oci://ghcr.io/org/app:v1"), "ghcr.io/org/app");
        assert_eq!(key("oci://127.0.0.1:5000/org/app@sha256:ab"), "127.0.0.1:5000/org/app");
        assert_eq!(key("oci://ghcr.io/org/charts"), "ghcr.io/org/charts");
        assert_eq!(key("https://ghcr.io/org/app"), "ghcr.io/org/app");
    }

    #[test]
    fn github_gitea_and_gitlab_payloads_name_their_repository() {
        let github = br#"{"ref":"refs/heads/main","repository":{"full_name":"org/app",
            "clone_url":"https://github.com/org/app.git","ssh_url":"git@github.com:org/app.git",
            "html_url":"https://github.com/org/app","url":"https://github.com/org/app"}}"#;
        assert_eq!(pushed_repositories(github), ["github.com/org/app"]);
        let gitlab = br#"{"ref":"refs/heads/main","project":{"git_ssh_url":"git@gitlab.example:g/app.git",
            "git_http_url":"https://gitlab.example/g/app.git","web_url":"https://gitlab.example/g/app"},
            "repository":{"url":"git@gitlab.example:g/app.git","homepage":"https://gitlab.example/g/app"}}"#;
        assert_eq!(pushed_repositories(gitlab), ["gitlab.example/g/app"]);
        let gitea = br#"{"ref":"refs/heads/main","repository":{"clone_url":"https://git.example/o/app.git",
            "ssh_url":"ssh://git@git.example:2222/o/app.git"}}"#;
        assert_eq!(pushed_repositories(gitea), ["git.example/o/app", "git.example:2222/o/app"]);
    }

    #[test]
    fn a_payload_without_a_repository_names_none() {
        for body in [&br#"{"ref":"refs/heads/main"}"#[..], br#"{"repository":"x"}"#, b"[]", b"payload=%7B%7D"] {
            assert!(pushed_repositories(body).is_empty(), "{}", String::from_utf8_lossy(body));
        }
    }

    fn chart(repo_url: &str, values_repo: &str) -> SyncUnit {
        let repo = if values_repo.is_empty() { String::new() } else { format!("repo = \"{values_repo}\"\n") };
        let text = format!("[[sync]]\nname = \"c\"\n{repo}[sync.helm]\nrepo_url = \"{repo_url}\"\nchart = \"demo\"\n");
        let config = crate::config::Config::from_toml(&text, std::path::Path::new("/tmp"), "t.toml").unwrap();
        config.units[0].clone()
    }

    #[test]
    fn a_git_unit_is_triggered_by_its_repository_and_ref() {
        let unit = Followed::of(&SyncUnit::new("a", "https://github.com/org/a.git"));
        let a = vec![key("git@github.com:org/a.git")];
        let b = vec![key("https://github.com/org/b")];
        assert!(unit.triggered_by(Some("refs/heads/main"), &a));
        assert!(unit.triggered_by(None, &a), "a webhook without a ref, e.g. GitHub's ping");
        assert!(!unit.triggered_by(Some("refs/heads/dev"), &a));
        assert!(!unit.triggered_by(Some("refs/heads/main"), &b), "another repository's push");
        assert!(unit.triggered_by(Some("refs/heads/main"), &[]), "no repository named: the ref alone");
    }

    #[test]
    fn a_chart_unit_is_triggered_only_by_its_own_repositories() {
        let unit = Followed::of(&chart("https://charts.example/stable/", ""));
        assert_eq!(unit, Followed::Download { repositories: vec![key("https://charts.example/stable")], values: None });
        assert!(!unit.triggered_by(Some("refs/heads/main"), &[]), "a `main` webhook naming no repository");
        assert!(!unit.triggered_by(Some("refs/heads/main"), &[key("https://github.com/org/a")]));
        assert!(unit.triggered_by(None, &[key("https://charts.example/stable")]));

        let oci = Followed::of(&chart("oci://ghcr.io/org/charts", ""));
        assert!(oci.triggered_by(None, &[key("oci://ghcr.io/org/charts/demo")]), "the chart's own repository");
        assert!(oci.triggered_by(None, &[key("https://ghcr.io/org/charts")]));
    }

    #[test]
    fn a_chart_unit_with_values_in_git_is_triggered_by_that_repository_at_its_ref() {
        let unit = Followed::of(&chart("https://charts.example", "https://github.com/org/values"));
        let values = [key("https://github.com/org/values.git")];
        assert!(unit.triggered_by(Some("refs/heads/main"), &values));
        assert!(!unit.triggered_by(Some("refs/heads/dev"), &values));
        assert!(!unit.triggered_by(Some("refs/heads/main"), &[]), "not by the ref alone");
    }

    #[test]
    fn an_artifact_unit_is_triggered_only_by_its_repository() {
        let unit = Followed::of(&SyncUnit::new("o", "oci://registry.example/manifests/app:v1"));
        assert!(unit.triggered_by(None, &[key("oci://registry.example/manifests/app")]));
        assert!(unit.triggered_by(Some("refs/heads/main"), &[key("https://registry.example/manifests/app")]));
        assert!(!unit.triggered_by(Some("refs/heads/main"), &[]));
        assert!(!unit.triggered_by(Some("refs/heads/main"), &[key("https://github.com/org/a")]));
    }
}
