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
//! It also tells a server that is no Kubernetes API server: every API server answers
//! `GET /api/v1` with its core resources as JSON, so a 404 there, or a success that is not
//! JSON (a web server's HTML page), fails with [`NotAnApiServer`], naming the kubeconfig
//! context and file the URL came from. Without it, such a server's 404 read as "the API server
//! does not serve ConfigMap", and its HTML page was quoted as an error.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tower::{BoxError, Layer, Service};

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
}

impl RequestFailed {
    /// The error of a request to `server` that failed with `error` inside the stack.
    pub fn new(server: &str, error: &(dyn std::error::Error + 'static)) -> Self {
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
        Self { server: server.to_owned(), cause: deepest.to_string(), connect }
    }

    fn sentence(&self) -> String {
        let cause = &self.cause;
        if self.connect {
            format!(
                "cannot reach the API server at {}: {cause}; check that it is running and that [cluster] \
                 kubeconfig and context point at it",
                self.server
            )
        } else {
            format!("request to the API server at {} failed: {cause}", self.server)
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
    /// Where the URL comes from: `context <name> in <file>` ([`super::origin`]).
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
    origin: Arc<str>,
}

impl NameServerLayer {
    /// A layer naming `server` (the cluster URL) in transport errors, and `origin` (where the
    /// URL comes from, [`super::origin`]) when it is no API server.
    pub fn new(server: &str, origin: &str) -> Self {
        Self { server: server.into(), origin: origin.into() }
    }
}

impl<S> Layer<S> for NameServerLayer {
    type Service = NameServer<S>;

    fn layer(&self, inner: S) -> NameServer<S> {
        NameServer { inner, server: self.server.clone(), origin: self.origin.clone() }
    }
}

/// Turns the errors of the service it wraps into [`RequestFailed`], and an answer to
/// `GET /api/v1` no API server gives into [`NotAnApiServer`] (see the module doc).
#[derive(Debug, Clone)]
pub struct NameServer<S> {
    inner: S,
    server: Arc<str>,
    origin: Arc<str>,
}

impl<S, B, RB> Service<http::Request<B>> for NameServer<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        let server = self.server.clone();
        self.inner.poll_ready(cx).map_err(|e| name(&server, e.into()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let server = self.server.clone();
        let origin =
            (request.method() == http::Method::GET && request.uri().path() == CORE).then(|| self.origin.clone());
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await.map_err(|e| name(&server, e.into()))?;
            if let Some(origin) = origin {
                let content_type = response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
                if let Some(e) = NotAnApiServer::judge(&server, &origin, response.status(), content_type) {
                    return Err(Box::new(e) as BoxError);
                }
            }
            Ok(response)
        })
    }
}

/// `error` as [`RequestFailed`], unless kube raised it (kube reads those back by type) or the
/// fence refused the request before sending it ([`super::fence::Fenced`]).
fn name(server: &str, error: BoxError) -> BoxError {
    if error.is::<kube::Error>() || error.is::<super::fence::Fenced>() {
        return error;
    }
    Box::new(RequestFailed::new(server, error.as_ref()))
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
        let e = RequestFailed::new("https://127.0.0.1:6443", &io);
        assert!(e.connect);
        let text = e.to_string();
        assert!(text.starts_with("cannot reach the API server at https://127.0.0.1:6443: "), "{text}");
        assert!(text.contains("[cluster] kubeconfig"), "{text}");
        let other = RequestFailed::new("https://k", &std::io::Error::other("connection reset"));
        assert_eq!(other.to_string(), "request to the API server at https://k failed: connection reset");
    }
}
