//! `[render] chart_repositories`: the chart repositories and registries gitward itself may
//! fetch from ([`ChartRepositories`]); the addresses it never reaches unless one is listed are
//! classified in `address` ([`restricted_host`], [`super::refused_resolution`]).
//!
//! A URL is read as (scheme, host, port, path) ([`Location`]) with the `url` crate (WHATWG
//! URL: a host is lower-cased, an IPv4 address in any spelling — `0x7f.1`, `2130706433` — is
//! read as the address it names). An entry allows a URL when scheme, host and port are equal
//! (the scheme's port when none is written: 443 for `https` and `oci`, 80 for `http`) and the
//! URL's path is the entry's path or below it on a `/` boundary: `https://h/org/charts` allows
//! `https://h/org/charts/index.yaml`, not `https://h/org/charts-evil`.
//!
//! Loopback (`127.0.0.0/8`, `::1`, `localhost`), unspecified (`0.0.0.0`, `::`), link-local
//! (`169.254.0.0/16`, `fe80::/10`) and cloud metadata addresses (`169.254.169.254`,
//! `fd00:ec2::254`, `100.100.100.200`, `metadata.google.internal`), private networks (RFC 1918,
//! CGNAT `100.64.0.0/10`, IPv6 `fc00::/7`) and cluster-internal names (one label, `*.svc`,
//! `*.cluster.local`, …) are refused unless an entry names that very host and port; a unit's
//! own `repo_url` does not make them allowed.

use super::address::restricted_host;

/// A URL as an allow-list compares it: scheme, host, port, path without a trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// `https`, `http` or `oci`.
    pub scheme: String,
    /// The host as the `url` crate normalises it; an IPv6 address without brackets.
    pub host: String,
    /// The port written, else the scheme's (443 for `https` and `oci`, 80 for `http`).
    pub port: u16,
    /// The path, `/`-separated, without a trailing `/` (`""` for the root).
    pub path: String,
}

impl Location {
    /// Reads `url`.
    ///
    /// Errors: a message when it does not parse, has no host, or its scheme is not `https`,
    /// `http` or `oci`.
    pub fn parse(url: &str) -> Result<Self, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        let scheme = parsed.scheme().to_owned();
        let default = match scheme.as_str() {
            "https" | "oci" => 443,
            "http" => 80,
            _ => return Err(format!("the scheme `{scheme}` is not https, http or oci")),
        };
        let host = match parsed.host() {
            Some(url::Host::Domain(d)) => d.trim_end_matches('.').to_ascii_lowercase(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err("has no host".into()),
        };
        let port = parsed.port().unwrap_or(default);
        Ok(Self { scheme, host, port, path: parsed.path().trim_end_matches('/').to_owned() })
    }

    /// `scheme://host:port`, the origin credentials are configured for.
    pub fn origin(&self) -> String {
        match self.host.contains(':') {
            true => format!("{}://[{}]:{}", self.scheme, self.host, self.port),
            false => format!("{}://{}:{}", self.scheme, self.host, self.port),
        }
    }

    /// Whether `other` is this location or below it: same scheme, host and port, and a path
    /// equal to this one or under it on a `/` boundary.
    pub fn covers(&self, other: &Location) -> bool {
        let under =
            other.path == self.path || other.path.strip_prefix(&self.path).is_some_and(|rest| rest.starts_with('/'));
        self.scheme == other.scheme && self.host == other.host && self.port == other.port && under
    }

    /// Whether `other` has the same scheme, host and port.
    pub fn same_origin(&self, other: &Location) -> bool {
        self.scheme == other.scheme && self.host == other.host && self.port == other.port
    }
}

/// `[render] chart_repositories`: the repositories gitward may fetch from besides each unit's
/// own `repo_url`. Default: none, so only a unit's own repository (and no address of
/// [`restricted_host`]) is reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChartRepositories {
    /// The entries as written (no trailing `/`), for messages.
    written: Vec<String>,
    /// The entries read.
    entries: Vec<Location>,
}

impl ChartRepositories {
    /// Reads the entries of `[render] chart_repositories`.
    ///
    /// Errors: a message naming the entry that is not an `https://`, `http://` or `oci://`
    /// URL, or that carries userinfo, a query or a fragment (credentials belong in
    /// `password_file`, never in the allow-list).
    pub fn parse<'a>(urls: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut out = Self::default();
        for url in urls {
            let written = url.trim_end_matches('/');
            let location =
                Location::parse(written).map_err(|m| format!("`{}`: {m}", crate::telemetry::url::redact(url)))?;
            let parsed = url::Url::parse(written).map_err(|e| e.to_string())?;
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(format!(
                    "`{}`: no credentials in the URL (use password_file)",
                    crate::telemetry::url::redact(url)
                ));
            }
            if parsed.query().is_some() || parsed.fragment().is_some() {
                return Err(format!("`{written}`: no query or fragment"));
            }
            out.written.push(written.to_owned());
            out.entries.push(location);
        }
        Ok(out)
    }

    /// Whether gitward may fetch `url`, for a unit whose own repository is `own` (its
    /// `repo_url`, or an OCI artifact's repository; `None` for a chart in git).
    ///
    /// Errors: why not, naming the URL (redacted) — an address of [`restricted_host`] not
    /// listed, or a repository that is neither listed nor under `own`.
    pub fn allows(&self, own: Option<&str>, url: &str) -> Result<(), String> {
        let shown = crate::telemetry::url::redact(url);
        let location = Location::parse(url).map_err(|m| format!("`{shown}`: {m}"))?;
        if self.entries.iter().any(|e| e.covers(&location)) {
            return Ok(());
        }
        if let Some(kind) = restricted_host(&location.host) {
            return Err(format!(
                "`{shown}` is a {kind} address: refused unless [render] chart_repositories lists {}",
                location.origin()
            ));
        }
        if own.and_then(|o| Location::parse(o).ok()).is_some_and(|o| o.covers(&location)) {
            return Ok(());
        }
        Err(format!("`{shown}` is not in [render] chart_repositories ({})", self.listed()))
    }

    /// Whether an entry covers `url` (not counting a unit's own repository).
    pub fn lists(&self, url: &str) -> bool {
        Location::parse(url).is_ok_and(|l| self.entries.iter().any(|e| e.covers(&l)))
    }

    /// Whether an entry names `host` (as [`Location::host`] reads it): a host name listed may
    /// resolve to an address of a private network ([`super::refused_resolution`]).
    pub fn lists_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.entries.iter().any(|e| e.host == host)
    }

    /// Whether an entry names `host` and `port`: an address of [`restricted_host`] is reached
    /// only then (redirects included).
    pub fn lists_origin(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.entries.iter().any(|e| e.host == host && e.port == port)
    }

    /// The entries, comma-separated, or `none listed`.
    fn listed(&self) -> String {
        if self.written.is_empty() { "none listed".to_owned() } else { self.written.join(", ") }
    }
}

/// The repository of an OCI artifact URL (`oci://host/path:tag` or `…@sha256:<hex>`): the URL
/// without its tag or digest, as the allow-list compares it.
pub fn artifact_repository(url: &str) -> String {
    let (head, rest) = url.split_once("://").unwrap_or(("", url));
    let Some((authority, path)) = rest.split_once('/') else { return url.to_owned() };
    let path = path.split_once('@').map_or(path, |(repository, _)| repository);
    let path = path.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')).map_or(path, |(repository, _)| repository);
    format!("{head}://{authority}/{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_allows_its_path_and_below_on_a_segment_boundary() {
        let list = ChartRepositories::parse(["https://charts.example.com/org/charts/", "oci://ghcr.io/org"]).unwrap();
        assert!(list.allows(None, "https://charts.example.com/org/charts/index.yaml").is_ok());
        assert!(list.allows(None, "https://CHARTS.example.com:443/org/charts").is_ok());
        assert!(list.allows(None, "oci://ghcr.io/org/charts/demo").is_ok());
        for refused in [
            "https://charts.example.com/org/charts-evil/index.yaml",
            "http://charts.example.com/org/charts/index.yaml",
            "https://charts.example.com:8443/org/charts/index.yaml",
            "oci://ghcr.io/other",
        ] {
            let error = list.allows(None, refused).unwrap_err();
            assert!(error.contains("is not in [render] chart_repositories"), "{refused}: {error}");
        }
        assert!(list.allows(Some("https://other.example.com/x"), "https://other.example.com/x/a.tgz").is_ok());
    }

    #[test]
    fn loopback_link_local_and_metadata_need_an_exact_entry_even_as_the_own_repository() {
        let none = ChartRepositories::default();
        for url in [
            "http://127.0.0.1:8080/any/path?",
            "http://127.1:8080/",
            "http://0x7f000001/",
            "http://2130706433/",
            "http://localhost:5000",
            "http://[::1]:80/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
            "http://169.254.169.254/latest/meta-data",
            "http://[fd00:ec2::254]/",
            "http://[fe80::1]/",
            "http://metadata.google.internal/computeMetadata/v1/",
            "oci://127.0.0.1:5000/charts",
        ] {
            let error = none.allows(Some(url), url).unwrap_err();
            assert!(error.contains("address: refused unless"), "{url}: {error}");
        }
        let listed = ChartRepositories::parse(["http://127.0.0.1:8080"]).unwrap();
        assert!(listed.allows(None, "http://127.0.0.1:8080/charts/index.yaml").is_ok());
        assert!(listed.allows(None, "http://127.0.0.1:8081/index.yaml").is_err(), "another port");
        assert!(listed.lists_origin("127.0.0.1", 8080) && !listed.lists_origin("127.0.0.1", 80));
    }

    #[test]
    fn entries_with_credentials_or_other_schemes_are_refused() {
        let error = ChartRepositories::parse(["https://u:s3cret@h/charts"]).unwrap_err();
        assert!(error.contains("no credentials") && !error.contains("s3cret"), "{error}");
        assert!(ChartRepositories::parse(["file:///charts"]).unwrap_err().contains("scheme `file`"));
        assert!(ChartRepositories::parse(["https://h/c?x=1"]).unwrap_err().contains("no query"));
    }

    #[test]
    fn an_artifact_url_is_compared_without_its_tag_or_digest() {
        assert_eq!(artifact_repository("oci://127.0.0.1:5000/a/app:v1"), "oci://127.0.0.1:5000/a/app");
        assert_eq!(artifact_repository("oci://u:p@r/app@sha256:ab"), "oci://u:p@r/app");
        assert_eq!(artifact_repository("oci://r:5000/app"), "oci://r:5000/app");
    }

    #[test]
    fn private_and_cluster_internal_hosts_need_an_exact_entry_even_as_the_own_repository() {
        let none = ChartRepositories::default();
        for url in [
            "https://10.0.0.5/charts",
            "https://172.20.1.1:8443/",
            "http://192.168.0.10/",
            "http://100.64.3.4/",
            "http://[fd12::1]/",
            "http://[::ffff:10.0.0.5]/",
            "http://167772165/",
            "http://chartmuseum/",
            "http://chartmuseum.tools.svc:8080/",
            "http://chartmuseum.tools.svc.cluster.local:8080/",
            "oci://registry.internal/charts",
        ] {
            let error = none.allows(Some(url), url).unwrap_err();
            assert!(error.contains("address: refused unless"), "{url}: {error}");
        }
        let listed = ChartRepositories::parse(["http://chartmuseum.tools.svc:8080"]).unwrap();
        assert!(listed.allows(None, "http://chartmuseum.tools.svc:8080/index.yaml").is_ok());
        assert!(listed.allows(None, "http://chartmuseum.tools.svc:6379/").is_err(), "another port");
        assert!(none.allows(Some("https://charts.example.com"), "https://charts.example.com/a.tgz").is_ok());
    }
}
