//! The reads gitward makes from an OCI registry (the distribution spec's pull API: tag list,
//! manifest, blob), each body through a byte cap and checked against its digest, over the
//! allow-listed client of [`super::net`].
//!
//! Authentication as the distribution spec and Docker describe it: a request is sent without
//! credentials first; a `401` with `WWW-Authenticate: Basic` is answered with the unit's
//! credentials, one with `Bearer realm=…,service=…,scope=…` by a token from the realm. The
//! realm gets the unit's credentials only when it is on the registry's own origin or listed
//! in `[render] chart_repositories` (Docker Hub's `auth.docker.io` must be listed to pull
//! private charts); otherwise the token is asked for anonymously. A realm off the registry's
//! origin on an unlisted restricted address ([`crate::config::restricted_host`]: loopback,
//! link-local, metadata, a private network or a cluster-internal name) is refused before it is
//! asked anything; a realm whose name resolves to one is refused by the client's resolver.
//!
//! A registry on a loopback address (`localhost`, `127.0.0.0/8`, `[::1]`) is spoken to over
//! plain HTTP, as Docker treats loopback registries as insecure by default; any other over
//! HTTPS.

mod push;
mod referrer;

use serde::Deserialize;
use sha2::Digest as _;

use super::net::{Auth, Net};
use crate::source::{Error, Result};
use crate::telemetry::url::redact;

pub use referrer::{Attached, Referrer};

/// The largest manifest read: 4 MiB, the size registries must accept at least
/// (distribution spec, "Pushing Manifests") and containerd's own read limit.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// The most bytes of tag list read over all its pages: 16 MiB (some 500,000 tags).
pub const MAX_TAG_LIST_BYTES: u64 = 16 << 20;

/// The largest token response read: 1 MiB.
const MAX_TOKEN_BYTES: u64 = 1 << 20;

/// The manifest media types asked for.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// One layer (or config) of a manifest.
#[derive(Debug, Clone, Deserialize)]
pub(in crate::source) struct Descriptor {
    /// The media type.
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// The size the manifest claims, in bytes.
    #[serde(default)]
    pub size: i64,
    /// The descriptor's annotations (a cosign signature layer carries its signature in one).
    #[serde(default)]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// An image manifest: its layers.
#[derive(Debug, Clone, Deserialize)]
pub(in crate::source) struct Manifest {
    /// The layers, in order.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Tags {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// One registry (`host[:port]`) as one fetch reads it, with the bearer token it earned.
pub(in crate::source) struct Registry<'a> {
    net: &'a Net,
    /// `https://host[:port]` or, for a loopback host, `http://…`.
    base: String,
    /// The URL shown in errors (`oci://host/path`, redacted).
    shown: String,
    unit: String,
    token: tokio::sync::Mutex<Option<String>>,
    /// The tag list page size asked for (`n`); `None`, the registry's own (all tags at once
    /// for the CNCF distribution registry). Set only by tests, to read many pages.
    tag_page: Option<u32>,
}

impl<'a> Registry<'a> {
    /// The registry `host` (`host[:port]`) through `net`; `shown` names it in errors.
    pub fn new(net: &'a Net, unit: &str, host: &str, shown: &str) -> Self {
        let base = base(host);
        Self { net, base, shown: redact(shown), unit: unit.to_owned(), token: Default::default(), tag_page: None }
    }

    /// Every tag of `repository`, all pages (distribution spec, "Listing Tags": each page's
    /// `Link: <…>; rel="next"` header, RFC 8288, names the next), within
    /// [`MAX_TAG_LIST_BYTES`] over all pages. The first page asks for the registry's own page
    /// size (no `n`), unless [`Registry::tag_page`] set one.
    ///
    /// Errors: those of [`Registry::get`]; [`Error::Chart`] for a list that does not parse, a
    /// next page on another origin than the registry's, or one already read (a loop).
    pub async fn tags(&self, repository: &str) -> Result<Vec<String>> {
        let mut url = format!("{}/v2/{repository}/tags/list", self.base);
        if let Some(n) = self.tag_page {
            url.push_str(&format!("?n={n}"));
        }
        let (mut tags, mut read, mut seen) = (Vec::new(), 0u64, std::collections::HashSet::new());
        loop {
            let (headers, body) = self.get(&url, "application/json", MAX_TAG_LIST_BYTES - read).await?;
            read += body.len() as u64;
            let page: Tags = serde_json::from_slice(&body).map_err(|e| self.unreadable(&url, e))?;
            tags.extend(page.tags.unwrap_or_default());
            let next = headers.get(reqwest::header::LINK).and_then(|l| l.to_str().ok()).and_then(next_link);
            let Some(next) = next else { return Ok(tags) };
            let here = url::Url::parse(&url).map_err(|e| self.unreadable(&url, e))?;
            let joined = here.join(&next).map_err(|e| self.unreadable(&url, e))?;
            seen.insert(url.clone());
            let refused = if joined.origin() != here.origin() {
                Some("leaves the registry")
            } else if seen.contains(joined.as_str()) {
                Some("was read before")
            } else {
                None
            };
            if let Some(refused) = refused {
                let message = format!("the tag list's next page {} {refused}", redact(joined.as_str()));
                return Err(Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message });
            }
            url = joined.into();
        }
    }

    /// Asks for tag list pages of `n` tags (the distribution spec's `n`); a registry may
    /// answer fewer. Default: no `n`, the registry's own page size.
    #[cfg(test)]
    fn tag_page(mut self, n: u32) -> Self {
        self.tag_page = Some(n);
        self
    }

    /// The image manifest of `reference` (a tag or `sha256:<hex>`) in `repository`, within
    /// [`MAX_MANIFEST_BYTES`], and its digest (`sha256:<hex>` of the bytes read; a digest
    /// reference must match it).
    ///
    /// Errors: those of [`Registry::get`]; [`Error::Chart`] for a manifest that does not
    /// parse, is an index, or does not match its digest.
    pub async fn manifest(&self, repository: &str, reference: &str) -> Result<(Manifest, String)> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        self.manifest_if_any(repository, reference).await?.ok_or_else(|| self.missing(&url))
    }

    /// As [`Registry::manifest`], but `None` when the registry answers `404 Not Found` (a tag
    /// that does not exist, such as the cosign signature tag of an unsigned manifest).
    ///
    /// Errors: those of [`Registry::manifest`], a 404 aside.
    pub async fn manifest_if_any(&self, repository: &str, reference: &str) -> Result<Option<(Manifest, String)>> {
        let Some((url, _, body, digest)) = self.manifest_bytes(repository, reference, MANIFEST_TYPES).await? else {
            return Ok(None);
        };
        let manifest: Manifest = serde_json::from_slice(&body).map_err(|e| self.unreadable(&url, e))?;
        Ok(Some((manifest, digest)))
    }

    /// The manifest `reference` of `repository` as the registry holds it, `accept` its media
    /// types: its URL, the response's headers, its bytes and their digest (`sha256:<hex>`);
    /// `None` for a `404 Not Found`.
    ///
    /// Errors: those of [`Registry::get`], a 404 aside; [`Error::Chart`] when a digest
    /// reference's bytes do not match it.
    pub(super) async fn manifest_bytes(
        &self,
        repository: &str,
        reference: &str,
        accept: &str,
    ) -> Result<Option<(String, reqwest::header::HeaderMap, Vec<u8>, String)>> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let Some((headers, body)) = self.get_if_any(&url, accept, MAX_MANIFEST_BYTES).await? else {
            return Ok(None);
        };
        let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&body)));
        if reference.starts_with("sha256:") && !reference.eq_ignore_ascii_case(&digest) {
            let message = format!("the manifest {reference} read has the digest {digest}");
            return Err(Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message });
        }
        Ok(Some((url, headers, body, digest)))
    }

    /// The blob `layer` of `repository`, at most `max` bytes (its claimed size is checked
    /// first), checked against its digest.
    ///
    /// Errors: those of [`Registry::get`]; [`Error::FileTooLarge`]; [`Error::Chart`] when the
    /// bytes do not match the digest or the digest is not sha256.
    pub async fn blob(&self, repository: &str, layer: &Descriptor, max: u64) -> Result<Vec<u8>> {
        let url = format!("{}/v2/{repository}/blobs/{}", self.base, layer.digest);
        let claimed = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if claimed > max {
            return Err(Error::FileTooLarge { unit: self.unit.clone(), path: redact(&url), size: claimed, limit: max });
        }
        let Some(expected) = layer.digest.strip_prefix("sha256:") else {
            let message = format!("the layer digest {} is not a sha256 digest", layer.digest);
            return Err(Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message });
        };
        let (_, body) = self.get(&url, "*/*", max).await?;
        let digest = hex::encode(sha2::Sha256::digest(&body));
        if !digest.eq_ignore_ascii_case(expected) {
            let message =
                format!("digest mismatch: the manifest gives {}, the download is sha256:{digest}", layer.digest);
            return Err(Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message });
        }
        Ok(body)
    }

    /// GET `url` on the registry, answering its challenge once; the headers and the body,
    /// at most `max` bytes.
    ///
    /// Errors: [`Error::FetchFailed`] (no answer, an error status), [`Error::Credentials`]
    /// (401 or 403 after authenticating), [`Error::FileTooLarge`].
    async fn get(&self, url: &str, accept: &str, max: u64) -> Result<(reqwest::header::HeaderMap, Vec<u8>)> {
        self.get_if_any(url, accept, max).await?.ok_or_else(|| self.missing(url))
    }

    /// As [`Registry::get`], but `None` for a `404 Not Found`.
    async fn get_if_any(
        &self,
        url: &str,
        accept: &str,
        max: u64,
    ) -> Result<Option<(reqwest::header::HeaderMap, Vec<u8>)>> {
        let response = self.authorised(url, |auth| async move { self.net.send(url, Some(accept), &auth, false).await });
        let response = response.await?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let message = format!("{} answered {status}", redact(url));
            return Err(Error::FetchFailed { unit: self.unit.clone(), repo: self.shown.clone(), message });
        }
        let headers = response.headers().clone();
        Ok(Some((headers, self.net.read(url, response, max).await?)))
    }

    /// The response to `send` of a request to `url` with the registry's token, or with what
    /// its challenge asks ([`Registry::answer`]) once it answers `401`: the registry's answer
    /// of any other status. A request that got no answer names the registry as configured;
    /// the message names the URL asked.
    ///
    /// Errors: [`Error::FetchFailed`] (no answer), [`Error::Credentials`] (401 or 403 after
    /// authenticating, or a challenge that cannot be answered).
    pub(super) async fn authorised<F, Fut>(&self, url: &str, send: F) -> Result<reqwest::Response>
    where
        F: Fn(Auth) -> Fut,
        Fut: std::future::Future<Output = Result<reqwest::Response>>,
    {
        let mut auth = match self.token.lock().await.clone() {
            Some(token) => Auth::Bearer(token),
            None => Auth::None,
        };
        for attempt in 0..2 {
            let response = send(auth.clone()).await.map_err(|e| match e {
                Error::FetchFailed { unit, message, .. } => {
                    Error::FetchFailed { unit, repo: self.shown.clone(), message }
                }
                other => other,
            })?;
            let status = response.status();
            if status == reqwest::StatusCode::UNAUTHORIZED && attempt == 0 {
                let challenge = response.headers().get(reqwest::header::WWW_AUTHENTICATE);
                let challenge = challenge.and_then(|c| c.to_str().ok()).unwrap_or_default().to_owned();
                auth = self.answer(&challenge).await?;
                continue;
            }
            if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
                let message = format!("{} answered {status}", redact(url));
                return Err(Error::Credentials { unit: self.unit.clone(), repo: self.shown.clone(), message });
            }
            return Ok(response);
        }
        unreachable!("the second attempt returns")
    }

    /// What to send after a `401` with `challenge` ([module docs](self)).
    ///
    /// Errors: [`Error::Credentials`] when a Basic challenge comes and there are no
    /// credentials, or the token service refuses; [`Error::Chart`] for a refused realm.
    async fn answer(&self, challenge: &str) -> Result<Auth> {
        let refused =
            |message: String| Error::Credentials { unit: self.unit.clone(), repo: self.shown.clone(), message };
        let (kind, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if kind.eq_ignore_ascii_case("basic") {
            return match self.net.has_credentials() {
                true => Ok(Auth::Basic),
                false => Err(refused("the registry asks for credentials (username and password_file)".into())),
            };
        }
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(refused(format!(
                "the registry asks for `{kind}` authentication, which gitward does not speak"
            )));
        }
        let params = challenge_params(params);
        let param = |name: &str| params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
        let Some(realm) = param("realm") else { return Err(refused("the Bearer challenge names no realm".into())) };
        let mut token_url = url::Url::parse(realm).map_err(|e| refused(format!("the token realm `{realm}`: {e}")))?;
        for name in ["service", "scope"] {
            if let Some(value) = param(name) {
                token_url.query_pairs_mut().append_pair(name, value);
            }
        }
        let token_url = token_url.to_string();
        let on_registry = token_url.starts_with(&format!("{}/", self.base));
        let host = url::Url::parse(&token_url).ok().and_then(|u| u.host_str().map(str::to_owned));
        if let Some(kind) = host.as_deref().and_then(crate::config::restricted_host)
            && !on_registry
            && !self.net.listed(&token_url)
        {
            let shown = redact(&token_url);
            let message = format!("the token realm {shown} is a {kind} address not in [render] chart_repositories");
            return Err(Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message });
        }
        let response = self.net.send(&token_url, Some("application/json"), &Auth::Basic, true).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(refused(format!("the token service {} answered {status}", redact(&token_url))));
        }
        let body = self.net.read(&token_url, response, MAX_TOKEN_BYTES).await?;
        #[derive(Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body).map_err(|e| self.unreadable(&token_url, e))?;
        let Some(token) = token.token.or(token.access_token) else {
            return Err(refused(format!("the token service {} gave no token", redact(&token_url))));
        };
        *self.token.lock().await = Some(token.clone());
        Ok(Auth::Bearer(token))
    }

    /// The error of a `404 Not Found` for `url`.
    fn missing(&self, url: &str) -> Error {
        let message = format!("{} answered {}", redact(url), reqwest::StatusCode::NOT_FOUND);
        Error::FetchFailed { unit: self.unit.clone(), repo: self.shown.clone(), message }
    }

    fn unreadable(&self, url: &str, error: impl std::fmt::Display) -> Error {
        let message = format!("the registry's answer from {} does not parse: {error}", redact(url));
        Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message }
    }
}

/// `https://host` or, for a loopback host, `http://host` ([module docs](self)).
pub(in crate::source) fn base(host: &str) -> String {
    format!("{}://{host}", scheme(host))
}

/// `http` for a loopback registry host (`localhost`, `127.0.0.0/8`, `[::1]`), else `https`.
fn scheme(host: &str) -> &'static str {
    let name = host.rsplit_once(':').filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()));
    let name = name.map_or(host, |(name, _)| name).trim_matches(['[', ']']);
    let loopback = name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback { "http" } else { "https" }
}

/// The target of `rel="next"` in a `Link` header (RFC 8288).
fn next_link(link: &str) -> Option<String> {
    link.split(',').find(|part| part.contains("rel=\"next\"") || part.contains("rel=next")).and_then(|part| {
        let (_, rest) = part.split_once('<')?;
        Some(rest.split_once('>')?.0.to_owned())
    })
}

/// `key="value",key=value` pairs of a challenge (RFC 7235 auth-params).
fn challenge_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_owned();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => after.split_once(',').unwrap_or((after, "")),
        };
        out.push((key, value.to_owned()));
        rest = next.trim_start().trim_start_matches(',');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_links_and_schemes_are_read() {
        let params = challenge_params(
            r#"realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#,
        );
        assert_eq!(params[0], ("realm".into(), "https://auth.example/token".into()));
        assert_eq!(params[2], ("scope".into(), "repository:a/b:pull".into()));
        assert_eq!(
            next_link(r#"</v2/a/tags/list?n=2&last=b>; rel="next""#).as_deref(),
            Some("/v2/a/tags/list?n=2&last=b")
        );
        assert_eq!(scheme("127.0.0.1:5000"), "http");
        assert_eq!(scheme("[::1]:5000"), "http");
        assert_eq!(scheme("ghcr.io"), "https");
    }

    /// The CNCF distribution registry the integration tests use (`registry` in
    /// `GITWARD_TOOLS_BIN`, else `target/tools/bin`: `scripts/tools` builds it) on a free
    /// loopback port, its access log in the directory; killed when dropped.
    struct Served {
        host: String,
        child: std::process::Child,
        dir: tempfile::TempDir,
    }

    impl Served {
        async fn start() -> Self {
            super::super::install_crypto_provider();
            let bin = std::env::var_os("GITWARD_TOOLS_BIN").map(std::path::PathBuf::from);
            let bin = bin.unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin"));
            let registry = bin.join("registry");
            assert!(registry.is_file(), "{} is missing: run scripts/tools first", registry.display());
            let dir = tempfile::tempdir().unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let config = format!(
                "version: 0.1\nlog: {{level: warn, accesslog: {{disabled: false}}}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            );
            std::fs::write(dir.path().join("config.yml"), config).unwrap();
            let log = std::fs::File::create(dir.path().join("access.log")).unwrap();
            let child = std::process::Command::new(registry)
                .arg("serve")
                .arg(dir.path().join("config.yml"))
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("the registry starts");
            let served = Self { host: format!("127.0.0.1:{port}"), child, dir };
            for _ in 0..300 {
                if reqwest::get(format!("http://{}/v2/", served.host)).await.is_ok_and(|r| r.status().is_success()) {
                    return served;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("the registry on {} never answered /v2/", served.host);
        }

        fn access_log(&self) -> String {
            std::fs::read_to_string(self.dir.path().join("access.log")).unwrap()
        }
    }

    impl Drop for Served {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Seven versions read two tags a page from the real registry: every page is followed and
    /// the newest version (`1.10.0`, on the second page by the registry's lexical order) is
    /// the one chosen.
    #[tokio::test]
    async fn every_page_of_a_tag_list_is_read_and_the_newest_version_found() {
        use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
        let served = Served::start().await;
        let client = oci_client::Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
        let versions = ["1.0.0", "1.2.0", "0.9.0", "1.10.0", "1.1.0", "1.9.9", "1.3.0"];
        for version in versions {
            let reference = oci_client::Reference::with_tag(served.host.clone(), "charts/app".into(), version.into());
            let layers = [ImageLayer::new(version.as_bytes().to_vec(), "application/tar+gzip".into(), None)];
            let config = Config::new(b"{}".to_vec(), "application/vnd.cncf.helm.config.v1+json".into(), None);
            let auth = oci_client::secrets::RegistryAuth::Anonymous;
            client.push(&reference, &layers, config, &auth, None).await.expect("push");
        }
        let url = format!("oci://{}/charts", served.host);
        let allow = crate::config::ChartRepositories::parse([url.as_str()]).unwrap();
        let timeout = std::time::Duration::from_secs(30);
        let net = Net::new("u", &allow, Some(&url), Some(&format!("{}/", base(&served.host))), None, None, timeout);
        let net = net.unwrap();
        let registry = Registry::new(&net, "u", &served.host, &url).tag_page(2);

        let tags = registry.tags("charts/app").await.expect("the tag list");
        let mut sorted = versions.to_vec();
        sorted.sort();
        assert_eq!(tags, sorted, "every page read, once");
        let pages = served.access_log().matches("/v2/charts/app/tags/list?").count();
        assert_eq!(pages, 4, "two tags a page: {}", served.access_log());
        let any = crate::config::VersionConstraint::parse("").unwrap();
        let source = crate::config::ChartSource::anonymous(&url, "app", any);
        let spec = super::super::ChartSpec {
            unit: "u".into(),
            source,
            max_bytes: 1 << 20,
            timeout,
            cosign_public_key_file: None,
            chart_repositories: allow,
        };
        let offers = tags.iter().map(|tag| super::super::Offer { version: tag.clone(), location: tag.clone() });
        let chosen = super::super::choose(&spec, &url, offers.collect()).expect("a version");
        assert_eq!(chosen.version, "1.10.0");
    }

    /// A registry whose tag list names as its next page one on another origin, or itself:
    /// both refused, naming the link, and no request goes to the other origin.
    #[tokio::test]
    async fn a_next_page_on_another_origin_or_read_before_is_refused() {
        super::super::install_crypto_provider();
        for (link, refused) in [
            ("http://127.0.0.2:9/v2/x/tags/list?n=1&last=a", "leaves the registry"),
            ("/v2/x/tags/list?n=1&last=a", "was read before"),
        ] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let host = listener.local_addr().unwrap().to_string();
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLink: <{link}>; rel=\"next\"\r\nContent-Length: 14\r\nConnection: close\r\n\r\n{{\"tags\":[\"a\"]}}"
            );
            let server = tokio::spawn(async move {
                loop {
                    let (mut stream, _) = listener.accept().await.unwrap();
                    let mut request = [0u8; 4096];
                    let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut request).await;
                    let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, answer.as_bytes()).await;
                }
            });
            let url = format!("oci://{host}/x");
            let allow = crate::config::ChartRepositories::parse([url.as_str()]).unwrap();
            let timeout = std::time::Duration::from_secs(10);
            let net = Net::new("u", &allow, Some(&url), Some(&format!("{}/", base(&host))), None, None, timeout);
            let net = net.unwrap();
            let error = Registry::new(&net, "u", &host, &url).tag_page(1).tags("x").await.unwrap_err().to_string();
            server.abort();
            assert!(error.contains(refused) && error.contains("/v2/x/tags/list?n=1&last=a"), "{error}");
        }
    }
}
