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

/// `repo` with the userinfo of a `scheme://userinfo@host/…` URL replaced by `***`; other forms
/// unchanged (scp-like `git@host:path` carries a user name only, never a secret).
pub(super) fn redact(url: &str) -> String {
    match userinfo(url) {
        Some(info) => url.replacen(&format!("{info}@"), "***@", 1),
        None => url.to_string(),
    }
}

/// `message` (from libgit2, about `url`) with every occurrence of the URL's userinfo replaced by
/// `***`, so a token embedded in the URL never reaches an error or a log line.
pub(super) fn redact_message(url: &str, message: &str) -> String {
    match userinfo(url) {
        Some(info) => message.replace(info, "***"),
        None => message.to_string(),
    }
}

/// The port an SSH remote connects to: 22 unless an `ssh://host:port/` URL says otherwise;
/// `None` for other transports.
pub(super) fn ssh_port(url: &str) -> Option<u16> {
    let rest = match url.split_once("://") {
        Some(("ssh" | "ssh+git" | "git+ssh", rest)) => rest,
        Some(_) => return None,
        None if is_scp_like(url) => return Some(22),
        None => return None,
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let port = match host_port.rsplit_once(']') {
        Some((_, after)) => after.strip_prefix(':'),
        None => host_port.rsplit_once(':').map(|(_, port)| port),
    };
    Some(port.and_then(|p| p.parse().ok()).unwrap_or(22))
}

/// The non-empty userinfo of a `scheme://userinfo@host/…` URL.
fn userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let (info, _) = authority.rsplit_once('@')?;
    (!info.is_empty()).then_some(info)
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
        assert_eq!(redact("https://h/r@v1"), "https://h/r@v1");
        assert_eq!(redact("git@h:o/r.git"), "git@h:o/r.git");
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
