//! Names the API server in transport errors: a request that got no HTTP answer (connection
//! refused, DNS, TLS, a timeout, a dropped connection) fails with [`RequestFailed`], which says
//! which server and what to check, instead of hyper's `client error (Connect)` repeated at
//! every layer of the error's chain.
//!
//! The layer sits outermost in the client's stack (see [`super::connect_as`]), so every request
//! of every caller — discovery, watches, applies, the health wait — names the server. Errors
//! that kube itself raised inside the stack (an auth plugin that failed) pass through as they
//! are, since kube's `Client::send` reads them back by type.

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

/// The [`Layer`] of [`NameServer`] for one server URL.
#[derive(Debug, Clone)]
pub struct NameServerLayer {
    server: Arc<str>,
}

impl NameServerLayer {
    /// A layer naming `server` (the cluster URL) in transport errors.
    pub fn new(server: &str) -> Self {
        Self { server: server.into() }
    }
}

impl<S> Layer<S> for NameServerLayer {
    type Service = NameServer<S>;

    fn layer(&self, inner: S) -> NameServer<S> {
        NameServer { inner, server: self.server.clone() }
    }
}

/// Turns the errors of the service it wraps into [`RequestFailed`] (see the module doc).
#[derive(Debug, Clone)]
pub struct NameServer<S> {
    inner: S,
    server: Arc<str>,
}

impl<S, R> Service<R> for NameServer<S>
where
    S: Service<R>,
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

    fn call(&mut self, request: R) -> Self::Future {
        let server = self.server.clone();
        let future = self.inner.call(request);
        Box::pin(async move { future.await.map_err(|e| name(&server, e.into())) })
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
