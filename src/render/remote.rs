//! Which kustomize remote bases a unit with `allow_remote_bases` may fetch ([`check`]): an
//! `https://` URL (optionally `git::https://`) on a host of `[render] remote_base_hosts`,
//! whose query holds only what kustomize reads (`ref`, `version`, `timeout`, `submodules`)
//! with values it cannot turn into anything else. kustomize hands `ref` (or `version`) to
//! `git fetch --depth=1 origin <ref>`, where a value starting with `-` is an option
//! (`--upload-pack=<command>` runs a command); a ref is therefore held to git's own ref-name
//! rules (`git check-ref-format`) and may not start with `-`.
//!
//! kustomize finds the query after the first `?` of the whole reference, before any `#`
//! fragment handling; a reference with `#` or `;` is refused, so that gitward and kustomize
//! read the same query.

use crate::config::{Origin, RemoteBaseHosts};

/// A remote base that may be fetched: the `host:port` its clone connects to (lowercase) and
/// how the host was allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Base {
    /// `host:port` as the proxy is asked for it (`[v6]:port` for an IPv6 address).
    pub target: String,
    /// [`Origin::Vouched`] for a restricted host listed with its port.
    pub origin: Origin,
}

/// Checks `reference` (a `resources`-like entry kustomize reads as remote) against `hosts`.
///
/// Errors: a message saying why the base is refused.
pub(super) fn check(reference: &str, hosts: &RemoteBaseHosts) -> Result<Base, String> {
    let written = reference.trim();
    let url = written.strip_prefix("git::").unwrap_or(written);
    if url.contains(['#', ';']) || url.chars().any(char::is_control) {
        return Err("a remote base may not hold `#`, `;` or control characters".into());
    }
    let Some((scheme, _)) = url.split_once("://") else {
        return Err("only https:// bases are fetched (write the full https:// URL)".into());
    };
    if !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("only https:// bases are fetched, not {scheme}://"));
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("a remote base may not carry user information".into());
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err("the URL has no host".into()),
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    let origin = hosts.allows(&host, port)?;
    if let Some((_, query)) = url.split_once('?') {
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            query_pair(&key, &value)?;
        }
    }
    let target = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    Ok(Base { target, origin })
}

/// One `key=value` of a remote base's query, as kustomize reads it.
fn query_pair(key: &str, value: &str) -> Result<(), String> {
    match key {
        "ref" | "version" => ref_name(value).map_err(|why| format!("{key}={value:?} is not a plain git ref: {why}")),
        "timeout" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.') => Ok(()),
        "submodules" if matches!(value, "true" | "false") => Ok(()),
        _ => Err(format!(
            "the query field {key}={value:?} is not one kustomize reads (ref, version, timeout, submodules)"
        )),
    }
}

/// Whether `name` is a ref name git takes as one (`git check-ref-format --allow-onelevel`,
/// `refs.c` `check_refname_component`) and not an option: a branch, a tag, a full ref or a
/// commit id.
///
/// Errors: the rule `name` breaks.
pub(super) fn ref_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 255 {
        return Err("empty or longer than 255 bytes");
    }
    if name.starts_with('-') {
        return Err("it starts with `-`, which git reads as an option");
    }
    if name.bytes().any(|b| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b)) {
        return Err("it holds a space, a control character or one of ~ ^ : ? * [ \\");
    }
    if name.contains("..") || name.contains("@{") || name == "@" {
        return Err("it holds `..` or `@{`, or is `@`");
    }
    if name.starts_with('/') || name.ends_with('/') || name.ends_with('.') || name.contains("//") {
        return Err("it starts or ends with `/`, ends with `.` or holds `//`");
    }
    if name.split('/').any(|part| part.starts_with('.') || part.ends_with(".lock")) {
        return Err("a component starts with `.` or ends with `.lock`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> RemoteBaseHosts {
        RemoteBaseHosts::parse(["github.com", "127.0.0.1:8443"]).unwrap()
    }

    #[test]
    fn plain_refs_pass_and_options_or_odd_names_do_not() {
        for ok in ["main", "v1.2.3", "release/1.x", "refs/tags/v1", "0123456789abcdef0123456789abcdef01234567"] {
            assert_eq!(ref_name(ok), Ok(()), "{ok}");
        }
        for bad in ["--upload-pack=cat /x>&2", "-b", "a..b", "a b", "x@{1}", "@", "a/.b", "a.lock", "a/", "", "a:b"] {
            assert!(ref_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_https_bases_on_listed_hosts_with_plain_refs_are_fetched() {
        let ok = check("https://github.com/org/repo//base?ref=v1&timeout=90s", &hosts()).unwrap();
        assert_eq!(ok, Base { target: "github.com:443".into(), origin: Origin::Ordinary });
        let vouched = check("git::https://127.0.0.1:8443/o/r//b?version=main", &hosts()).unwrap();
        assert_eq!(vouched.origin, Origin::Vouched);
        let refused = [
            ("https://github.com/o/r//b?ref=--upload-pack=cat%20/etc/passwd%3E%262%3Bfalse", "-"),
            ("https://github.com/o/r//b?ref=main&ref=-x", "-"),
            ("file:///srv/repo.git//app?ref=main", "file://"),
            ("github.com/org/repo//base?ref=v1", "https://"),
            ("git@github.com:o/r.git", "https://"),
            ("ssh://git@github.com/o/r.git", "ssh://"),
            ("http://github.com/o/r//b", "http://"),
            ("https://evil.example/o/r//b?ref=main", "not in [render] remote_base_hosts"),
            ("https://127.0.0.1:9999/o/r//b", "loopback"),
            ("https://github.com/o/r//b#?ref=--x", "#"),
            ("https://github.com/o/r//b?ref=main;x=1", ";"),
            ("https://github.com/o/r//b?upload-pack=x", "not one kustomize reads"),
            ("https://u:p@github.com/o/r//b", "user information"),
        ];
        for (base, why) in refused {
            let err = check(base, &hosts()).unwrap_err();
            assert!(err.contains(why), "{base}: {err}");
        }
    }
}
