//! The fence on the wire: a unit's writes go out on connections whose every write of request
//! bytes is checked against the unit's [`Fence`] first.
//!
//! A [`Transport`](super::Transport) keeps, beside kube's stack for reads and unfenced
//! clients, one connection pool per live fence ([`Pools::of`]): kube's own layers (base URI,
//! authentication, headers with the User-Agent and any `Impersonate-User`) over a hyper client
//! whose connector wraps each connection's TCP stream (below TLS) in a [`FencedIo`]. A
//! fenced client sends its writes (`POST`, `PUT`, `PATCH`, `DELETE`, not dry runs) to that pool
//! and everything else to the shared one ([`Route`]), so every byte a fenced pool's connection
//! writes belongs to a write of that fence's unit.
//!
//! [`FencedIo`] reads [`super::fence::boottime`] before each `poll_write`,
//! `poll_write_vectored` and `poll_flush` of the socket and fails it once the fence no longer
//! admits writes. It sits under TLS, so what it checks is each write of ciphertext (and of
//! handshake records): between its clock read and the `write(2)` there is no encryption, only
//! the call down to the socket.
//! A request is acted on by the API server only once its last byte has arrived (kube sends
//! every write with a `Content-Length`), and that byte leaves this process only from a write
//! checked at that moment: a write that was admitted, then held in a queue, a connection
//! set-up or a paused process, is cut off on the wire — its connection fails, and a request
//! cut short is never acted on. The connections are HTTP/1.1 (kube's rustls connector offers
//! only `http/1.1`), so a connection carries one request at a time.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Uri};
use hyper_util::client::legacy::connect::{Connected, Connection};
use kube::client::{Body, ConfigExt, DynBody};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

use super::Buffered;
use super::fence::{Fence, WeakFence, is_write};

/// A connection's stream with the fence checked before each write of request bytes (see the
/// module doc). Reads pass unchecked: a response is read whatever the fence says.
pub struct FencedIo<T> {
    io: T,
    /// Weak: a pool's connections must not keep its fence alive ([`Pools::of`]).
    fence: WeakFence,
}

impl<T> FencedIo<T> {
    fn check(&self) -> io::Result<()> {
        self.fence.check_wire().map_err(|fenced| io::Error::new(io::ErrorKind::ConnectionAborted, fenced))
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for FencedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for FencedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for FencedIo<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

/// A connector whose connections are [`FencedIo`] of one fence.
#[derive(Clone)]
struct FencedConnector<C> {
    inner: C,
    fence: WeakFence,
}

impl<C> Service<Uri> for FencedConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: 'static,
{
    type Response = FencedIo<C::Response>;
    type Error = C::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let fence = self.fence.clone();
        Box::pin(async move { Ok(FencedIo { io: connecting.await?, fence }) })
    }
}

/// Builds the stack of one fence's pool.
type Make = dyn Fn(&Fence) -> Buffered + Send + Sync;

/// The connection pools of a transport's fences, one per live [`Fence`]; a pool goes with the
/// last handle of its fence (dropped at the next [`Pools::of`]).
#[derive(Clone)]
pub(super) struct Pools {
    make: Arc<Make>,
    pools: Arc<Mutex<Vec<(WeakFence, Buffered)>>>,
}

impl Pools {
    /// Pools over kube's stack for `config`, each built on first use. Reads the TLS settings
    /// and credentials once; contacts nobody.
    ///
    /// Errors: kube's, when its TLS connector or authentication layer cannot be built.
    pub(super) fn new(config: &kube::Config) -> kube::Result<Self> {
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.enforce_http(false);
        // Checked here, so that building a pool later cannot fail.
        config.rustls_https_connector_with_connector(http.clone())?;
        config.auth_layer()?;
        config.extra_headers_layer()?;
        let config = config.clone();
        let make = move |fence: &Fence| -> Buffered {
            // TLS over the fenced TCP stream: the fence is checked right before each write of
            // ciphertext to the socket, with no encryption between the check and the write(2).
            let fenced = FencedConnector { inner: http.clone(), fence: fence.downgrade() };
            let https = config.rustls_https_connector_with_connector(fenced).expect("checked when the pools were made");
            let mut connector = hyper_timeout::TimeoutConnector::new(https);
            connector.set_connect_timeout(config.connect_timeout);
            connector.set_read_timeout(config.read_timeout);
            connector.set_write_timeout(config.write_timeout);
            let client: hyper_util::client::legacy::Client<_, Body> =
                hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new()).build(connector);
            let auth = config.auth_layer().ok().flatten();
            let headers = config.extra_headers_layer().expect("checked when the pools were made");
            let service = ServiceBuilder::new()
                .layer(config.base_uri_layer())
                .option_layer(auth)
                .layer(headers)
                .map_err(BoxError::from)
                .service(client)
                .map_response(|response: http::Response<hyper::body::Incoming>| {
                    response
                        .map(|body| Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>)
                })
                .map_err(Into::<BoxError>::into)
                .map_future(|f| Box::pin(f) as BoxFuture<'static, _>);
            tower::buffer::Buffer::new(service, 1024)
        };
        Ok(Self { make: Arc::new(make), pools: Arc::default() })
    }

    /// The pool of `fence`, built when it has none yet (call within a Tokio runtime).
    pub(super) fn of(&self, fence: &Fence) -> Buffered {
        let mut pools = self.pools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pools.retain(|(weak, _)| weak.is_live());
        if let Some((_, pool)) = pools.iter().find(|(weak, _)| weak.is(fence)) {
            return pool.clone();
        }
        let pool = (self.make)(fence);
        pools.push((fence.downgrade(), pool.clone()));
        pool
    }

    /// How many fences have a pool.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pools.lock().map_or(0, |p| p.len())
    }
}

/// Sends a fenced client's writes to its fence's pool and everything else to the shared stack.
#[derive(Clone)]
pub(super) struct Route {
    pub(super) shared: Buffered,
    /// `None` for an unfenced client: everything goes to `shared`.
    pub(super) fenced: Option<Buffered>,
}

impl Service<Request<Body>> for Route {
    type Response = http::Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each call readies the buffer it picks.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let target = match &self.fenced {
            Some(pool) if is_write(&request) => pool.clone(),
            _ => self.shared.clone(),
        };
        Box::pin(target.oneshot(request))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::cluster::fence::boottime;

    /// A plain-HTTP server on loopback answering every request `200 {}`; counts the bytes it
    /// received.
    async fn server() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(AtomicUsize::new(0));
        let count = received.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        count.fetch_add(n, Ordering::SeqCst);
                        let answer =
                            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(answer).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (url, received)
    }

    fn patch() -> Request<Body> {
        Request::builder()
            .method("PATCH")
            .uri("/api/v1/namespaces/a/configmaps/b")
            .body(Body::from(b"{\"data\":{\"v\":\"1\"}}".to_vec()))
            .unwrap()
    }

    #[tokio::test]
    async fn a_write_that_reaches_the_wire_after_its_fence_closed_sends_no_byte() {
        let (url, received) = server().await;
        let config = kube::Config::new(url.parse().unwrap());
        let pools = Pools::new(&config).unwrap();
        let fence = Fence::new("Lease/ns/l");
        fence.publish(boottime() + Duration::from_secs(60), Duration::ZERO);
        let pool = pools.of(&fence);
        let answer = pool.clone().oneshot(patch()).await.expect("an open fence lets the write out");
        assert_eq!(answer.status(), 200);
        let sent = received.load(Ordering::SeqCst);
        assert!(sent > 0);

        // A write the layer admitted before the fence closed, reaching the wire after: the
        // idle connection and any new one refuse its bytes.
        fence.close();
        let Err(refused) = pool.clone().oneshot(patch()).await else { panic!("a write past its fence went out") };
        let chain = crate::telemetry::error_chain(refused.as_ref());
        assert!(chain.contains("write stopped on the wire") && chain.contains("Lease/ns/l"), "{chain}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(received.load(Ordering::SeqCst), sent, "bytes of the refused write reached the server");
    }

    #[tokio::test]
    async fn each_live_fence_has_one_pool_and_a_fenced_client_sends_only_its_writes_there() {
        let (url, _) = server().await;
        let config = kube::Config::new(url.parse().unwrap());
        let pools = Pools::new(&config).unwrap();
        let fence = Fence::new("Lease/ns/l");
        let again = fence.clone();
        pools.of(&fence);
        pools.of(&again);
        assert_eq!(pools.len(), 1, "clones of one fence share a pool");
        drop((fence, again));
        pools.of(&Fence::new("Lease/ns/m"));
        assert_eq!(pools.len(), 1, "a dropped fence's pool goes");

        // The fence is closed: a read still goes out (on the shared stack), a write does not.
        let closed = Fence::new("Lease/ns/n");
        let open = Fence::unfenced();
        let shared = pools.of(&open);
        let mut route = Route { shared, fenced: Some(pools.of(&closed)) };
        let read = Request::builder().uri("/api/v1/namespaces/a/configmaps/b").body(Body::empty()).unwrap();
        assert_eq!(route.call(read).await.expect("reads pass").status(), 200);
        let dry = Request::builder()
            .method("PATCH")
            .uri("/api/v1/namespaces/a/configmaps/b?dryRun=All")
            .body(Body::from(b"{}".to_vec()))
            .unwrap();
        assert_eq!(route.call(dry).await.expect("dry runs pass").status(), 200);
        assert!(route.call(patch()).await.is_err(), "a write goes to the fence's pool");
    }
}
