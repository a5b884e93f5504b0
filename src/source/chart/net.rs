//! gitward's own HTTP requests to chart repositories and registries: one client per fetch
//! that holds the allow-list ([`crate::config::ChartRepositories`]) at every step a request
//! can take, sends credentials only to the origin they were configured for, and reads every
//! body through a byte cap.
//!
//! - A URL gitward chooses from repository content (a `Chart.yaml` dependency, an
//!   `index.yaml` archive URL, a registry's token service) is checked by the caller before it
//!   is requested ([`Net::allowed`]).
//! - A redirect may go to another host (chart archives on a CDN), but never to a restricted
//!   address ([`crate::config::Restricted`]: loopback, link-local, metadata, a private network
//!   — RFC 1918, CGNAT, IPv6 unique local — or a cluster-internal name such as `*.svc`) that
//!   `chart_repositories` does not list with its port, and at most 10 times. The redirect is
//!   refused before any connection to its target.
//! - A host *name* is resolved by gitward's resolver, which refuses a name that resolves to
//!   such an address (a DNS name pointed at `127.0.0.1`, `10.0.0.1` or `169.254.169.254`,
//!   rebinding included, since the check is on the addresses the connection uses) unless the
//!   name is listed ([`crate::config::refused_resolution`]: any listed name may lead into a
//!   private network, only `localhost` or a metadata name listed as such to the host's own
//!   addresses); an address literal is judged from the URL, since no resolution happens.
//! - Credentials (`username` + `password_file`, or a registry token) go only to the
//!   (scheme, host, port) of the unit's own repository — as Helm 3.6.1 does since
//!   CVE-2021-32690 — never to an absolute URL elsewhere, and reqwest drops the
//!   `Authorization` header on a redirect that changes scheme, host or port.
//! - A body larger than its cap is [`Error::FileTooLarge`] naming the URL and the cap, by
//!   `Content-Length` before reading or as read; never a shorter result.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::{ChartRepositories, Location, refused_resolution, restricted_host};
use crate::source::{Error, Result};
use crate::telemetry::url::{redact, redact_text};

/// How many redirects one request follows (reqwest's default too).
const MAX_REDIRECTS: usize = 10;

/// What a request carries.
#[derive(Debug, Clone)]
pub(in crate::source) enum Auth {
    /// Nothing.
    None,
    /// The unit's Basic credentials, sent only when the URL is on their origin.
    Basic,
    /// A registry's bearer token, sent only when the URL is on the credentials' origin.
    Bearer(String),
}

/// A GET that failed ([`Net::get_or_down`]).
#[derive(Debug)]
pub(in crate::source) struct Failed {
    /// What failed, as [`Net::get`] returns it.
    pub error: Error,
    /// Whether the server could not be reached or failed itself (connection refused, a
    /// timeout, a 5xx status, a body broken off), as opposed to an answer it gave on purpose
    /// (a 404, 401 or 403, a body over the cap): the case a kept answer may stand in for.
    pub down: bool,
}

/// One fetch's HTTP client, allow-list and credentials.
pub(in crate::source) struct Net {
    client: reqwest::Client,
    unit: String,
    allow: Arc<ChartRepositories>,
    /// The unit's own repository (its `repo_url`, an artifact's repository), which the
    /// allow-list counts as listed.
    own: Option<String>,
    /// The origin of the unit's own repository: the only one credentials and tokens go to.
    origin: Option<Location>,
    /// The user name and password (read from `password_file` at each fetch, never kept
    /// beyond it).
    credentials: Option<(String, String)>,
}

impl Net {
    /// A client for `unit` whose own repository is `own` (as the allow-list compares it):
    /// extra CA certificates `ca_pem`, credentials `basic` for the origin of `origin` (the
    /// URL requests to that repository go to: `own` itself, or a registry's `https://host`),
    /// a request timeout (connect and per read; each at most the fetch timeouts,
    /// [`crate::source::network_timeouts`]), the allow-list in its redirect policy and
    /// resolver.
    ///
    /// Errors: [`Error::Credentials`] for a CA file without a certificate,
    /// [`Error::FetchFailed`] when the client cannot be built.
    pub fn new(
        unit: &str,
        allow: &ChartRepositories,
        own: Option<&str>,
        origin: Option<&str>,
        ca_pem: Option<Vec<u8>>,
        basic: Option<(String, String)>,
        timeout: std::time::Duration,
    ) -> Result<Self> {
        super::install_crypto_provider();
        let allow = Arc::new(allow.clone());
        let repo = own.map(redact).unwrap_or_default();
        let (connect, idle) = crate::source::network_timeouts();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("gitward/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(timeout.min(connect))
            .read_timeout(timeout.min(idle))
            .redirect(redirect_policy(allow.clone()))
            .dns_resolver(Arc::new(Resolver { allow: allow.clone() }));
        if let Some(pem) = ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| Error::Credentials {
                unit: unit.to_owned(),
                repo: repo.clone(),
                message: format!("ca_file holds no PEM certificate: {e}"),
            })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder.build().map_err(|e| Error::FetchFailed {
            unit: unit.to_owned(),
            repo: repo.clone(),
            message: redact_text(&crate::telemetry::error_chain(&e)),
        })?;
        let origin = origin.and_then(|o| Location::parse(o).ok());
        Ok(Self { client, unit: unit.to_owned(), allow, own: own.map(str::to_owned), origin, credentials: basic })
    }

    /// Whether `url` may be requested: listed in `chart_repositories` or under the unit's own
    /// repository, and no unlisted restricted address ([`restricted_host`]).
    ///
    /// Errors: the allow-list's reason, naming the URL (redacted).
    pub fn allowed(&self, url: &str) -> std::result::Result<(), String> {
        self.allow.allows(self.own.as_deref(), url)
    }

    /// Whether the allow-list itself (not the unit's own repository) covers `url`: a
    /// registry's token service listed there gets the registry's credentials.
    pub fn listed(&self, url: &str) -> bool {
        self.allow.lists(url)
    }

    /// Whether `url` is on the origin of the unit's own repository, the one credentials were
    /// configured for.
    pub fn on_credentials_origin(&self, url: &str) -> bool {
        let Ok(location) = Location::parse(url) else { return false };
        self.origin.as_ref().is_some_and(|origin| origin.same_origin(&location))
    }

    /// Whether there are Basic credentials to send.
    pub fn has_credentials(&self) -> bool {
        self.credentials.is_some()
    }

    /// Sends GET `url` with `accept` (when given) and `auth` — Basic or Bearer only on the
    /// credentials' origin, or to a URL `listed` explicitly when `to_listed` is set.
    ///
    /// Errors: [`Error::FetchFailed`] (no answer), naming the URL redacted.
    pub async fn send(
        &self,
        url: &str,
        accept: Option<&str>,
        auth: &Auth,
        to_listed: bool,
    ) -> Result<reqwest::Response> {
        self.request(reqwest::Method::GET, url, accept, auth, to_listed).send().await.map_err(|e| self.failed(url, &e))
    }

    /// Sends `method` `url` with `body` of `content_type` (a registry push: blobs, manifests),
    /// `auth` only on the credentials' origin, as [`Net::send`] does.
    ///
    /// Errors: [`Error::FetchFailed`] (no answer), naming the URL redacted.
    pub async fn send_body(
        &self,
        method: reqwest::Method,
        url: &str,
        content_type: &str,
        body: Vec<u8>,
        auth: &Auth,
    ) -> Result<reqwest::Response> {
        let request = self.request(method, url, None, auth, false);
        let request = request.header(reqwest::header::CONTENT_TYPE, content_type).body(body);
        request.send().await.map_err(|e| self.failed(url, &e))
    }

    /// The request [`Net::send`] and [`Net::send_body`] send.
    fn request(
        &self,
        method: reqwest::Method,
        url: &str,
        accept: Option<&str>,
        auth: &Auth,
        to_listed: bool,
    ) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, url);
        if let Some(accept) = accept {
            request = request.header(reqwest::header::ACCEPT, accept);
        }
        let trusted = self.on_credentials_origin(url) || (to_listed && self.listed(url));
        match (auth, &self.credentials) {
            (Auth::Basic, Some((user, password))) if trusted => request = request.basic_auth(user, Some(password)),
            (Auth::Bearer(token), _) if self.on_credentials_origin(url) => request = request.bearer_auth(token),
            _ => {}
        }
        request
    }

    /// Reads `response`'s body (from `url`), at most `max` bytes.
    ///
    /// Errors: [`Error::FileTooLarge`] naming the URL and the cap (by `Content-Length`, or
    /// as read), [`Error::FetchFailed`] when the body breaks off.
    pub async fn read(&self, url: &str, mut response: reqwest::Response, max: u64) -> Result<Vec<u8>> {
        let too_large =
            |size: u64| Error::FileTooLarge { unit: self.unit.clone(), path: redact(url), size, limit: max };
        if let Some(length) = response.content_length().filter(|&l| l > max) {
            return Err(too_large(length));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failed(url, &e))? {
            body.extend_from_slice(&chunk);
            if body.len() as u64 > max {
                return Err(too_large(body.len() as u64));
            }
        }
        Ok(body)
    }

    /// GET `url` with the unit's Basic credentials (on their origin only), its body read
    /// within `max` bytes.
    ///
    /// Errors: [`Error::FetchFailed`] (no answer, an error status), [`Error::Credentials`]
    /// (401, 403), [`Error::FileTooLarge`].
    pub async fn get(&self, url: &str, max: u64) -> Result<Vec<u8>> {
        self.get_or_down(url, max).await.map_err(|failed| failed.error)
    }

    /// [`Net::get`], telling a server that is down — no connection, a timeout, a 5xx answer,
    /// a body broken off — apart from one that answered (a 404, 401, a body over the cap).
    ///
    /// Errors: those of [`Net::get`], as a [`Failed`].
    pub async fn get_or_down(&self, url: &str, max: u64) -> std::result::Result<Vec<u8>, Failed> {
        let answered = |error| Failed { error, down: false };
        let response = match self.request(reqwest::Method::GET, url, None, &Auth::Basic, false).send().await {
            Ok(response) => response,
            Err(e) => return Err(Failed { down: e.is_connect() || e.is_timeout(), error: self.failed(url, &e) }),
        };
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            let message = format!("{} answered {status}", redact(url));
            return Err(answered(Error::Credentials { unit: self.unit.clone(), repo: self.own_shown(), message }));
        }
        if !status.is_success() {
            let repo = redact(url);
            let error = Error::FetchFailed { unit: self.unit.clone(), repo, message: format!("answered {status}") };
            return Err(Failed { error, down: status.is_server_error() });
        }
        self.read(url, response, max)
            .await
            .map_err(|error| Failed { down: matches!(error, Error::FetchFailed { .. }), error })
    }

    /// The unit's own repository, redacted, for errors.
    pub fn own_shown(&self) -> String {
        self.own.as_deref().map(redact).unwrap_or_default()
    }

    /// A failed request as [`Error::FetchFailed`], every URL in it redacted.
    fn failed(&self, url: &str, error: &reqwest::Error) -> Error {
        let message = redact_text(&crate::telemetry::error_chain(error));
        Error::FetchFailed { unit: self.unit.clone(), repo: redact(url), message }
    }
}

/// Follows at most [`MAX_REDIRECTS`] redirects, none to an unlisted restricted address
/// ([`restricted_host`]: loopback, link-local, metadata, private, cluster-internal).
fn redirect_policy(allow: Arc<ChartRepositories>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        let url = attempt.url();
        let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = url.port_or_known_default().unwrap_or_default();
        match restricted_host(&host) {
            Some(kind) if !allow.lists_origin(&host, port) => {
                let shown = redact(url.as_str());
                attempt.error(format!("redirected to {shown}, a {kind} address not in [render] chart_repositories"))
            }
            _ => attempt.follow(),
        }
    })
}

/// The system resolver (`getaddrinfo`, through tokio), refusing a name that resolves to a
/// restricted address unless `chart_repositories` names it ([`refused_resolution`]).
struct Resolver {
    allow: Arc<ChartRepositories>,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let listed = allow.lists_host(&host);
            if let Some((addr, kind)) = addrs.iter().find_map(|a| Some((a, refused_resolution(&host, a.ip(), listed)?)))
            {
                let message =
                    format!("{host} resolves to {}, a {kind} address not in [render] chart_repositories", addr.ip());
                return Err(message.into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(allowed: &[&str]) -> Net {
        let allow = ChartRepositories::parse(allowed.iter().copied()).unwrap();
        Net::new("u", &allow, None, None, None, None, std::time::Duration::from_secs(5)).unwrap()
    }

    /// A loopback server answering 404 to each connection; returns its port and the count of
    /// connections it accepted.
    fn not_found() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = stream.read(&mut [0; 4096]);
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            }
        });
        (port, accepted)
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_at_connect_unless_listed() {
        let (port, accepted) = not_found();
        let url = format!("http://localhost:{port}/index.yaml");
        let error = net(&[]).get(&url, 1024).await.unwrap_err().to_string();
        assert!(error.contains("localhost resolves to ") && error.contains(", a loopback address"), "{error}");
        let error = net(&[&format!("http://localhost:{port}")]).get(&url, 1024).await.unwrap_err().to_string();
        assert!(error.contains("answered 404"), "listed, it connects: {error}");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1, "only the listed name was connected to");
    }

    /// A loopback server answering each connection with `status`; returns its port.
    fn answering(status: &'static str) -> u16 {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.read(&mut [0; 4096]);
                let head = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = stream.write_all(head.as_bytes());
            }
        });
        port
    }

    #[tokio::test]
    async fn a_refused_connection_and_a_5xx_are_down_and_a_404_or_401_is_an_answer() {
        let closed = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port();
        let cases = [(closed, true), (answering("503 Service Unavailable"), true)];
        let cases =
            cases.into_iter().chain([(answering("404 Not Found"), false), (answering("401 Unauthorized"), false)]);
        for (port, down) in cases {
            let origin = format!("http://127.0.0.1:{port}");
            let failed = net(&[&origin]).get_or_down(&format!("{origin}/index.yaml"), 1024).await.unwrap_err();
            assert_eq!(failed.down, down, "port {port}: {}", failed.error);
        }
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_an_error_naming_the_url_and_the_cap() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let _ = stream.read(&mut [0; 4096]);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(&[b'x'; 3000]);
        });
        let url = format!("http://127.0.0.1:{port}/index.yaml");
        let error = net(&[&format!("http://127.0.0.1:{port}")]).get(&url, 1024).await.unwrap_err();
        assert!(matches!(error, Error::FileTooLarge { limit: 1024, .. }), "{error}");
        assert!(error.to_string().contains(&url), "{error}");
    }
}
