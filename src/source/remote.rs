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

/// `url` with its secrets replaced by `***` ([`crate::telemetry::url::redact`]).
pub(super) fn redact(url: &str) -> String {
    crate::telemetry::url::redact(url)
}

/// `message` (from libgit2, about `url`) with the URL's secrets replaced by `***`
/// ([`crate::telemetry::url::redact_in`]).
pub(super) fn redact_message(url: &str, message: &str) -> String {
    crate::telemetry::url::redact_in(url, message)
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

/// The network host `repo` is fetched from, with its port when the URL names one
/// (`git.example.com`, `127.0.0.1:8080`; an `oci://` registry, an scp-like `git@host:path`'s
/// host); `None` for a local path or a `file://` URL.
pub(super) fn host(repo: &str) -> Option<String> {
    if !repo.contains("://") {
        let (head, _) = repo.split_once(':').filter(|_| is_scp_like(repo))?;
        return Some(head.rsplit_once('@').map_or(head, |(_, host)| host).to_ascii_lowercase());
    }
    let parsed = url::Url::parse(repo).ok()?;
    let host = parsed.host_str().filter(|h| !h.is_empty() && parsed.scheme() != "file")?;
    Some(match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
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
    fn the_host_of_a_remote_is_its_url_or_scp_host_and_port_and_none_for_local_paths() {
        assert_eq!(host("https://tok@Git.Example.com/a/b.git").as_deref(), Some("git.example.com"));
        assert_eq!(host("http://127.0.0.1:8080/x.git").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(host("oci://ghcr.io/org/app").as_deref(), Some("ghcr.io"));
        assert_eq!(host("ssh://git@host:2222/r.git").as_deref(), Some("host:2222"));
        assert_eq!(host("git@github.com:org/r.git").as_deref(), Some("github.com"));
        assert_eq!(host("file:///srv/git/r"), None);
        assert_eq!(host("/srv/git/r"), None);
        assert_eq!(host("relative/dir"), None);
    }

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
