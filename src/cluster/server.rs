//! Names the API server in transport errors: a request that got no HTTP answer (connection
//! refused, DNS, TLS, a timeout, a dropped connection) fails with [`RequestFailed`], which says
//! which server and what to check, instead of hyper's `client error (Connect)` repeated at
//! every layer of the error's chain.
//!
//! The layer sits outermost in the client's stack (see [`super::connect_as`]), so every request
//! of every caller — discovery, watches, applies, the health wait — names the server. Errors
//! that kube itself raised inside the stack (an auth plugin that failed) pass through as they
//! are, since kube's `Client::send` reads them back by type.
//!
//! A failed TLS handshake is one sentence saying what of the server's certificate did not
//! verify ([`super::tls::Untrusted`]: unknown CA, another host name, expired) and where the
//! kubeconfig sets it. A 401 or an RBAC 403 keeps the API server's answer and code, its
//! message naming the server, the kubeconfig user, context and file, and the next step
//! ([`super::denied`]).
//!
//! It also tells a server that is no Kubernetes API server: every API server answers
//! `GET /api/v1` with its core resources as JSON, so a 404 there, or a success that is not
//! JSON (a web server's HTML page), fails with [`NotAnApiServer`], naming the kubeconfig
//! context and file the URL came from. Without it, such a server's 404 read as "the API server
//! does not serve ConfigMap", and its HTML page was quoted as an error.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use kube::client::DynBody;
use tower::{BoxError, Layer, Service};

use super::Origin;
use super::denied::Denied;
use super::tls::Untrusted;

/// A request to the API server that got no HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.sentence())]
pub struct RequestFailed {
    /// The server's URL, as the kubeconfig gives it (`https://10.0.0.1:6443`).
    pub server: String,
    /// The innermost cause, as the OS or TLS library put it (`Connection refused (os error 111)`).
    pub cause: String,
    /// Whether no connection could be made at all (refused, unresolvable, unroutable, a
    /// connect timeout): the server is down or the kubeconfig points elsewhere.
    pub connect: bool,
    /// What of the server's certificate did not verify, when the TLS handshake refused it.
    pub untrusted: Option<Untrusted>,
    /// Where the URL and the CA come from: `context <name> in <file>` ([`Origin`]).
    pub origin: String,
}

impl RequestFailed {
    /// The error of a request to `server` (its URL given by `origin`) that failed with `error`
    /// inside the stack.
    pub fn new(server: &str, origin: &str, error: &(dyn std::error::Error + 'static)) -> Self {
        let mut deepest = error;
        let mut connect = false;
        let mut current = Some(error);
        while let Some(e) = current {
            connect |= e.to_string().contains("(Connect)")
                || e.downcast_ref::<std::io::Error>().is_some_and(|io| {
                    use std::io::ErrorKind::*;
                    matches!(io.kind(), ConnectionRefused | HostUnreachable | NetworkUnreachable | AddrNotAvailable)
                });
            deepest = e;
            current = e.source();
        }
        Self {
            server: server.to_owned(),
            cause: deepest.to_string(),
            connect,
            untrusted: Untrusted::find(error),
            origin: origin.to_owned(),
        }
    }

    fn sentence(&self) -> String {
        let (server, cause, origin) = (&self.server, &self.cause, &self.origin);
        match &self.untrusted {
            Some(untrusted) => format!("the API server at {server} {}", untrusted.sentence(origin)),
            None if self.connect => format!(
                "cannot reach the API server at {server}: {cause}: check that it is running and that the server of \
                 {origin} points at it"
            ),
            None => format!("request to the API server at {server} failed: {cause}"),
        }
    }
}

/// The path every Kubernetes API server serves its core group-version at.
const CORE: &str = "/api/v1";

/// A server that answered `GET /api/v1` as no Kubernetes API server does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server at {server} answered {answer} to GET {CORE}: not a Kubernetes API server? check the server of {origin}"
)]
pub struct NotAnApiServer {
    /// The server's URL, as the kubeconfig gives it.
    pub server: String,
    /// What it answered: `404`, or `200 with text/html`.
    pub answer: String,
    /// Where the URL comes from: `context <name> in <file>` ([`Origin`]).
    pub origin: String,
}

impl NotAnApiServer {
    /// The error for an answer to `GET /api/v1` of `status` with `content_type`, or `None`
    /// when an API server could have given it (an error other than 404 — 401, 403, 5xx — is
    /// the API server's own, and kube reads it).
    pub fn judge(server: &str, origin: &str, status: http::StatusCode, content_type: Option<&str>) -> Option<Self> {
        let json = content_type.is_some_and(|t| t.contains("json") || t.contains("protobuf"));
        let answer = if status == http::StatusCode::NOT_FOUND {
            status.as_u16().to_string()
        } else if status.is_success() && !json {
            format!("{} with {}", status.as_u16(), content_type.unwrap_or("no content type"))
        } else {
            return None;
        };
        Some(Self { server: server.to_owned(), answer, origin: origin.to_owned() })
    }
}

/// The [`Layer`] of [`NameServer`] for one server URL.
#[derive(Debug, Clone)]
pub struct NameServerLayer {
    server: Arc<str>,
    origin: Arc<Origin>,
}

impl NameServerLayer {
    /// A layer naming `server` (the cluster URL) in transport errors, and `origin` (where the
    /// URL and the credentials come from) when it is no API server, a certificate did not
    /// verify or the credentials were refused.
    pub fn new(server: &str, origin: &Arc<Origin>) -> Self {
        Self { server: server.into(), origin: origin.clone() }
    }
}

impl<S> Layer<S> for NameServerLayer {
    type Service = NameServer<S>;

    fn layer(&self, inner: S) -> NameServer<S> {
        NameServer { inner, server: self.server.clone(), origin: self.origin.clone() }
    }
}

/// Turns the errors of the service it wraps into [`RequestFailed`], an answer to
/// `GET /api/v1` no API server gives into [`NotAnApiServer`], and adds who was refused to a
/// 401's or 403's message ([`Denied`]; see the module doc).
#[derive(Debug, Clone)]
pub struct NameServer<S> {
    inner: S,
    server: Arc<str>,
    origin: Arc<Origin>,
}

impl<S, B> Service<http::Request<B>> for NameServer<S>
where
    S: Service<http::Request<B>, Response = http::Response<Box<DynBody>>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        let (server, origin) = (self.server.clone(), self.origin.clone());
        self.inner.poll_ready(cx).map_err(|e| name(&server, &origin, e.into()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (server, origin) = (self.server.clone(), self.origin.clone());
        let core = request.method() == http::Method::GET && request.uri().path() == CORE;
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await.map_err(|e| name(&server, &origin, e.into()))?;
            if core {
                let content_type = response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
                let place = origin.to_string();
                if let Some(e) = NotAnApiServer::judge(&server, &place, response.status(), content_type) {
                    return Err(Box::new(e) as BoxError);
                }
            }
            match Denied::judge(response.status()) {
                Some(denied) => denied.rewrite(response, &server, &origin).await,
                None => Ok(response),
            }
        })
    }
}

/// `error` as [`RequestFailed`], unless kube raised it (kube reads those back by type) or the
/// fence refused the request before sending it ([`super::fence::Fenced`]).
fn name(server: &str, origin: &Origin, error: BoxError) -> BoxError {
    if error.is::<kube::Error>() || error.is::<super::fence::Fenced>() {
        return error;
    }
    Box::new(RequestFailed::new(server, &origin.to_string(), error.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_no_api_server_gives_to_get_api_v1_is_refused() {
        let judge = |code: u16, t: Option<&str>| {
            NotAnApiServer::judge(
                "http://127.0.0.1:8080",
                "context x in /k",
                http::StatusCode::from_u16(code).unwrap(),
                t,
            )
            .map(|e| e.to_string())
        };
        assert_eq!(
            judge(404, Some("text/html")).as_deref(),
            Some(
                "the server at http://127.0.0.1:8080 answered 404 to GET /api/v1: not a Kubernetes API server? \
                 check the server of context x in /k"
            )
        );
        assert!(judge(200, Some("text/html; charset=utf-8")).unwrap().contains("answered 200 with text/html"));
        assert_eq!(judge(200, Some("application/json")), None);
        assert_eq!(judge(403, Some("application/json")), None);
        assert_eq!(judge(503, Some("text/plain")), None);
    }

    #[test]
    fn a_refused_connection_names_the_server_and_what_to_check() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = RequestFailed::new("https://127.0.0.1:6443", "context x in /k", &io);
        assert!(e.connect);
        let text = e.to_string();
        assert!(text.starts_with("cannot reach the API server at https://127.0.0.1:6443: "), "{text}");
        assert!(
            text.ends_with(": check that it is running and that the server of context x in /k points at it"),
            "{text}"
        );
        let other = RequestFailed::new("https://k", "x", &std::io::Error::other("connection reset"));
        assert_eq!(other.to_string(), "request to the API server at https://k failed: connection reset");
    }
}
