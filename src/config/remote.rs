//! `[render] remote_base_hosts`: the hosts a unit with `allow_remote_bases` may fetch a
//! kustomize remote base from ([`RemoteBaseHosts`]), and `remote_base_ca_file`, the
//! certificates their TLS is checked against ([`RemoteBases`]). The operator chooses them; a
//! repository only picks among them.
//!
//! An entry is a host (`github.com`: port 443) or `host:port` (`git.example.org:8443`,
//! `[2001:db8::1]:443`). A loopback, unspecified, link-local or cloud metadata host
//! ([`super::restricted_host`]) is allowed only by an entry that names that very host with
//! its port written out (`127.0.0.1:8443`), as `[render] chart_repositories` allows them.

use std::path::PathBuf;

use super::address::{Restricted, restricted_host};

/// Where remote bases may come from (`[render] remote_base_hosts`, `remote_base_ca_file`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteBases {
    /// The hosts, `remote_base_hosts` ([`RemoteBaseHosts`]).
    pub hosts: RemoteBaseHosts,
    /// `remote_base_ca_file`: a PEM file of the certificates git trusts for remote bases, in
    /// place of the system's trust store (`GIT_SSL_CAINFO`), for a private git server with its
    /// own CA. Default `None`: the system's store (`/etc/ssl`, `/etc/pki`).
    pub ca_file: Option<PathBuf>,
}

/// `[render] remote_base_hosts`: the origins of remote bases. Default: none, and then every
/// remote base is refused, whatever a unit's `allow_remote_bases` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteBaseHosts {
    /// (host lowercased without a trailing dot or brackets, the port written if any).
    entries: Vec<(String, Option<u16>)>,
}

/// How a remote base's origin is allowed ([`RemoteBaseHosts::allows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An ordinary host: every address it resolves to must be ordinary too
    /// ([`super::restricted_ip`]), checked when the proxy connects.
    Ordinary,
    /// A restricted host ([`Restricted`]) listed with its port: connected to as named.
    Vouched,
}

impl RemoteBaseHosts {
    /// Reads the entries of `[render] remote_base_hosts`.
    ///
    /// Errors: a message naming an entry that is not a host or `host:port` (a scheme, a path,
    /// user information or a bad port are refused).
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut parsed = Vec::new();
        for entry in entries {
            let bad = |why: &str| format!("`{entry}` {why}: write a host or host:port, such as `github.com`");
            if entry.is_empty() || entry.contains(['/', '@', '?', '#']) {
                return Err(bad("is not a host"));
            }
            let url = url::Url::parse(&format!("https://{entry}/")).map_err(|e| bad(&e.to_string()))?;
            let host = url.host_str().ok_or_else(|| bad("has no host"))?;
            let written = entry.rsplit_once(':').filter(|(h, p)| !p.contains(']') && !h.is_empty() && !p.is_empty());
            let port = match written {
                Some((_, p)) => Some(p.parse::<u16>().map_err(|_| bad("has no valid port"))?),
                None => None,
            };
            parsed.push((normal(host), port));
        }
        Ok(Self { entries: parsed })
    }

    /// Whether a remote base at `host` and `port` may be fetched, and how ([`Origin`]).
    ///
    /// Errors: a message saying why not (not listed; a restricted host not listed with its
    /// port).
    pub fn allows(&self, host: &str, port: u16) -> Result<Origin, String> {
        let host = normal(host);
        let exact = self.entries.iter().any(|(h, p)| *h == host && *p == Some(port));
        if let Some(kind) = restricted_host(&host) {
            return match exact {
                true => Ok(Origin::Vouched),
                false => Err(restricted(&host, port, kind)),
            };
        }
        if exact || self.entries.iter().any(|(h, p)| *h == host && p.is_none() && port == 443) {
            return Ok(Origin::Ordinary);
        }
        let listed: Vec<String> =
            self.entries.iter().map(|(h, p)| p.map_or(h.clone(), |p| format!("{h}:{p}"))).collect();
        let listed = if listed.is_empty() { "none listed".to_owned() } else { listed.join(", ") };
        Err(format!("{host}:{port} is not in [render] remote_base_hosts ({listed})"))
    }
}

fn restricted(host: &str, port: u16, kind: Restricted) -> String {
    format!("{host} is a {kind} address: refused unless [render] remote_base_hosts lists `{host}:{port}`")
}

/// A host as entries compare it: lowercase, no trailing dot, no IPv6 brackets.
fn normal(host: &str) -> String {
    host.trim_end_matches('.').trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_host_allows_its_port_and_a_restricted_host_only_its_exact_origin() {
        let list = RemoteBaseHosts::parse(["GitHub.com", "git.example.org:8443", "127.0.0.1:9443"]).unwrap();
        assert_eq!(list.allows("github.com", 443), Ok(Origin::Ordinary));
        assert_eq!(list.allows("git.example.org", 8443), Ok(Origin::Ordinary));
        assert_eq!(list.allows("127.0.0.1", 9443), Ok(Origin::Vouched));
        for (host, port) in [("github.com", 8443), ("git.example.org", 443), ("evil.example", 443), ("127.0.0.1", 443)]
        {
            assert!(list.allows(host, port).is_err(), "{host}:{port}");
        }
        let loose = RemoteBaseHosts::parse(["localhost", "169.254.169.254"]).unwrap();
        assert!(loose.allows("localhost", 443).unwrap_err().contains("loopback"));
        assert!(loose.allows("169.254.169.254", 443).unwrap_err().contains("metadata"));
        assert!(RemoteBaseHosts::default().allows("github.com", 443).unwrap_err().contains("none listed"));
    }

    #[test]
    fn entries_that_are_no_host_are_refused() {
        for bad in ["https://github.com", "github.com/org", "user@github.com", "github.com:x", ""] {
            assert!(RemoteBaseHosts::parse([bad]).is_err(), "{bad}");
        }
        assert!(RemoteBaseHosts::parse(["[::1]:8443"]).unwrap().allows("::1", 8443).is_ok());
    }
}
