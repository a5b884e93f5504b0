//! Remote URLs: local paths made absolute, userinfo redacted for errors and logs, the SSH port
//! for known_hosts lookups.

use std::path::Path;

/// The URL handed to libgit2 for `repo`: URLs (`scheme://…`) and scp-like `[user@]host:path`
/// unchanged; anything else is a local path, made absolute against the current directory
/// (libgit2's local transport takes a plain path). As git does, a `:` before any `/` makes
/// scp-like syntax.
pub(super) fn normalise(repo: &str) -> String {
    if repo.contains("://") || is_scp_like(repo) {
        return repo.to_string();
    }
    match std::path::absolute(Path::new(repo)) {
        Ok(path) => path.to_string_lossy().into_owned(),
        Err(_) => repo.to_string(),
    }
}

/// The directory of a repository on this host: a `file://` URL's path or a local path as
/// [`normalise`] leaves it; `None` for network URLs and scp-like addresses.
pub(super) fn local_path(url: &str) -> Option<std::path::PathBuf> {
    match url.strip_prefix("file://") {
        Some(path) => Some(path.into()),
        None if url.contains("://") || is_scp_like(url) => None,
        None => Some(url.into()),
    }
}

/// `repo` with the secrets of a `scheme://…` URL replaced by `***`: the userinfo, and the values
/// of query parameters that carry credentials ([`is_secret_param`]); other forms unchanged
/// (scp-like `git@host:path` carries a user name only, never a secret). Parsed with the `url`
/// crate (WHATWG URL); the text is rebuilt only when something was redacted.
pub(super) fn redact(url: &str) -> String {
    let (info, values) = secrets(url);
    let mut out = url.to_string();
    if let Some(info) = info {
        out = out.replacen(&format!("{info}@"), "***@", 1);
    }
    for value in values {
        out = out.replace(&format!("={value}"), "=***");
    }
    out
}

/// `message` (from libgit2, about `url`) with every occurrence of the URL's secrets (userinfo,
/// credential query values) replaced by `***`, so a token embedded in the URL never reaches an
/// error or a log line.
pub(super) fn redact_message(url: &str, message: &str) -> String {
    let (info, values) = secrets(url);
    info.into_iter().chain(values).fold(message.to_string(), |m, secret| m.replace(secret.as_str(), "***"))
}

/// The port an SSH remote connects to: 22 unless an `ssh://host:port/` URL says otherwise;
/// `None` for other transports.
pub(super) fn ssh_port(url: &str) -> Option<u16> {
    if !url.contains("://") {
        return is_scp_like(url).then_some(22);
    }
    let parsed = url::Url::parse(url).ok()?;
    matches!(parsed.scheme(), "ssh" | "ssh+git" | "git+ssh").then(|| parsed.port().unwrap_or(22))
}

/// Query parameter names that carry credentials (GitLab's `private_token`, OAuth's
/// `access_token`, …), compared case-insensitively.
fn is_secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["token", "password", "secret", "signature", "sig", "key"].iter().any(|s| name.contains(s))
}

/// The secret substrings of a `scheme://…` URL as written: its userinfo (`user:password`, or a
/// bare token) and the values of credential query parameters. Nothing for other forms.
fn secrets(url: &str) -> (Option<String>, Vec<String>) {
    if !url.contains("://") {
        return (None, Vec::new());
    }
    let Ok(parsed) = url::Url::parse(url) else { return (None, Vec::new()) };
    let mut info_text = None;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // As written in the text (the parser percent-encodes what it stores).
        let rest = url.split_once("://").map_or("", |(_, rest)| rest);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if let Some((info, _)) = authority.rsplit_once('@')
            && !info.is_empty()
        {
            info_text = Some(info.to_string());
        }
    }
    let mut out = Vec::new();
    let raw_query = url.split_once('?').map_or("", |(_, q)| q.split('#').next().unwrap_or_default());
    for pair in raw_query.split('&') {
        if let Some((name, value)) = pair.split_once('=')
            && is_secret_param(name)
            && !value.is_empty()
        {
            out.push(value.to_string());
        }
    }
    (info_text, out)
}

/// git's rule: `[user@]host:path` with the first `:` before any `/` is an SSH remote.
fn is_scp_like(repo: &str) -> bool {
    match (repo.find(':'), repo.find('/')) {
        (Some(colon), Some(slash)) => colon > 0 && colon < slash,
        (Some(colon), None) => colon > 0,
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_scp_remotes_are_kept_and_paths_made_absolute() {
        assert_eq!(normalise("https://h/r.git"), "https://h/r.git");
        assert_eq!(normalise("git@github.com:o/r.git"), "git@github.com:o/r.git");
        assert_eq!(normalise("file:///srv/r.git"), "file:///srv/r.git");
        assert_eq!(normalise("/srv/r.git"), "/srv/r.git");
        let relative = normalise("repos/r.git");
        assert!(Path::new(&relative).is_absolute(), "{relative}");
        assert!(relative.ends_with("repos/r.git"));
        assert!(Path::new(&normalise("./a:b")).is_absolute(), "a / before the : means a path");
    }

    #[test]
    fn userinfo_is_redacted_from_urls_and_messages() {
        let url = "https://bot:s3cr3t@git.example.com/o/r.git";
        assert_eq!(redact(url), "https://***@git.example.com/o/r.git");
        let message = redact_message(url, "failed to reach bot:s3cr3t@git.example.com");
        assert!(!message.contains("s3cr3t"), "{message}");
        assert_eq!(redact("https://tok@h/r"), "https://***@h/r");
        assert_eq!(redact("https://t@h/r"), "https://***@h/r");
        assert_eq!(redact("https://h/r@v1"), "https://h/r@v1");
        assert_eq!(redact("git@h:o/r.git"), "git@h:o/r.git");
    }

    #[test]
    fn credential_query_parameters_are_redacted() {
        let url = "https://git.example.com/o/r.git?private_token=glpat-abc&ref=main";
        assert_eq!(redact(url), "https://git.example.com/o/r.git?private_token=***&ref=main");
        let message = redact_message(url, "401 for https://git.example.com/o/r.git?private_token=glpat-abc");
        assert!(!message.contains("glpat-abc"), "{message}");
        assert_eq!(redact("https://h/r.git?ref=main"), "https://h/r.git?ref=main");
    }

    #[test]
    fn local_paths_and_file_urls_are_on_this_host() {
        assert_eq!(local_path("/srv/git/shop.git"), Some("/srv/git/shop.git".into()));
        assert_eq!(local_path("file:///srv/git/shop.git"), Some("/srv/git/shop.git".into()));
        assert_eq!(local_path("https://git.example.com/shop.git"), None);
        assert_eq!(local_path("git@github.com:acme/shop.git"), None);
    }

    #[test]
    fn ssh_port_defaults_to_22() {
        assert_eq!(ssh_port("git@h:o/r.git"), Some(22));
        assert_eq!(ssh_port("ssh://git@h/o/r.git"), Some(22));
        assert_eq!(ssh_port("ssh://git@h:2222/o/r.git"), Some(2222));
        assert_eq!(ssh_port("ssh://[::1]:2222/r.git"), Some(2222));
        assert_eq!(ssh_port("ssh://[::1]/r.git"), Some(22));
        assert_eq!(ssh_port("https://h/r.git"), None);
        assert_eq!(ssh_port("/srv/r.git"), None);
    }
}
