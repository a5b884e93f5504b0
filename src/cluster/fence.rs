//! Fencing to the wire: a unit's writes are refused, request by request and byte by byte,
//! once the Lease that lets this replica run the unit may have run out.
//!
//! A [`Fence`] holds the deadline its Lease's election loop publishes on every acquisition and
//! renewal ([`Fence::publish`]: the Lease's `valid_until` and a margin), and is closed when the
//! loop steps down or ends. It is checked twice on the way out:
//!
//! 1. [`FenceLayer`] sits in each unit client's stack *below* the retry layer (see
//!    [`super::registry::Registry::fenced_client`]), so every try of a write — the first and
//!    each retry — is checked when it is handed to the transport: a write (`POST`, `PUT`,
//!    `PATCH`, `DELETE`) at or after `valid_until − margin` fails with [`Fenced`] and is never
//!    queued. Reads pass, and so do dry-run writes (`dryRun=All`: the API server persists
//!    nothing).
//! 2. The write then goes out on a connection of its fence's own pool
//!    ([`super::wire`]), whose stream checks the fence again before each write of request
//!    bytes and flush ([`FencedIo`](super::wire::FencedIo)): a write admitted by the layer and
//!    then held — in the client's queues, waiting for a connection or its TLS handshake, or in a
//!    process stopped between the two checks — is cut off on the wire with
//!    [`FencedOnWire`]. The API server acts on a request only once its last byte has arrived,
//!    and no byte leaves after the deadline less the margin but from a write checked at that
//!    moment.
//!
//! Time is read from `CLOCK_BOOTTIME` ([`boottime`]), which keeps counting while the machine
//! is suspended; tokio's `Instant` (`CLOCK_MONOTONIC`) stops then, so a replica whose VM was
//! paused would wake believing its Lease still valid. A process stopped by SIGSTOP, swapped
//! out or throttled wakes with its deadline passed by either clock, and its first write — or
//! the rest of one it had begun — is refused before the task that would abort the unit has
//! run.
//!
//! Each admitted write is bounded twice. The client gives up on it when the Lease it was
//! admitted under runs out ([`Fence::write_budget`]: until `valid_until`, at most
//! [`WRITE_TIMEOUT`]), closing its connection, which cancels the request's context in the API
//! server. And the request carries the API server's `timeout` parameter set to the margin
//! ([`Fence::server_timeout`]), below the fencing margin by construction: its bytes leave only
//! before `valid_until − margin`, so the server, which abandons it that long after receiving
//! it, does so by `valid_until`. A write the server cannot answer within the margin fails (504,
//! retried while the fence admits it): a longer `lease_duration` gives slow writes more time.
//! kube's own socket timeouts (connect 30 s, a write blocked 295 s, reads unbounded) are far
//! longer and stay as they are for reads and unfenced clients.
//!
//! The fence also counts the writes it let through whose answer has not come
//! ([`Fence::drained`]): a Lease is released only once none of them can still be in flight,
//! so the next holder's first write cannot be overtaken by one of ours. Each admitted write
//! runs in a task of its own, so a caller that stops waiting (its unit task aborted) does not
//! cut the count short: the write stays counted until the server has answered it or its bound
//! has passed.
//!
//! The window that remains, exactly:
//!
//! - **A pause inside the last check.** [`FencedIo`](super::wire::FencedIo) sits under TLS:
//!   it reads the clock and then, in the same synchronous call (no await, no encryption
//!   between), writes the ciphertext to the socket. A stop (SIGSTOP, a VM suspended, a thread
//!   descheduled) that lands between that clock read and the `write(2)` sends those bytes when
//!   the process runs again, however late. It is the call from the check down to the syscall,
//!   a few hundred nanoseconds per write, and it can complete at most the request being
//!   written on each connection of the pool: at most `max_in_flight` requests of the unit.
//!   (With the check above TLS, the window held each request's encryption too.)
//! - **Bytes sent in time, acted on late.** Bytes that reached the socket before
//!   `valid_until − margin` reach the API server at once, but the server may act on them
//!   later (API Priority and Fairness queues, admission webhooks, etcd). The `timeout`
//!   parameter makes it abandon such a request a margin after its arrival, so by
//!   `valid_until`, at its next context check; a transaction already handed to etcd by then
//!   still commits, and a server that does not honour the parameter is bounded only by its own
//!   `--request-timeout` (60 s by default). The margin (`L − renew deadline`, a third of the
//!   Lease with sharding) is the budget for this. Kubernetes Leases offer no server-side
//!   precondition to close it.
//!
//! Why the next owner's writes win over such a late write: both replicas apply with the same
//! field manager, so a late apply of the revision the new owner applied is a no-op (same
//! fields, same values: the resourceVersion stays); a late apply of anything else moves the
//! object's resourceVersion to one the new owner did not write, which its member watch
//! reports as drift (`MetadataCache::is_own`), and its self-heal (`[daemon] self_heal`, on by
//! default) applies the new owner's revision again; a late prune delete carries the uid and
//! resourceVersion preconditions of the old owner's re-check read, so it fails with 409 on
//! any object the new owner has written since.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Method, Request};
use tokio::sync::Notify;
use tower::{BoxError, Layer, Service};

/// Longest a write let through the fence may take to be answered; past it the write fails
/// with a timeout, and an abandoned write stops counting as in flight. The API server's own
/// default `--request-timeout` is 60 s; writes of one object answer in milliseconds.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A fence that never closes (no Lease: one replica, `gitward sync`).
const OPEN: u64 = u64::MAX;
/// A closed fence (no Lease held yet, or no longer).
const CLOSED: u64 = 0;

/// Time since boot by `CLOCK_BOOTTIME`, which counts time spent suspended (Linux
/// `clock_gettime(2)`).
pub fn boottime() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(OPEN - 1)
}

/// A write refused by a [`Fence`]: it was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{method} {path} not sent: this replica no longer holds {lease} (fenced: its deadline less the margin has passed)"
)]
pub struct Fenced {
    /// The Lease, `Lease/<namespace>/<name>`.
    pub lease: String,
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
}

/// A write whose bytes were stopped on the wire by a [`Fence`] ([`super::wire::FencedIo`]):
/// refused at a write of its bytes, the request was not completed and the API server does not
/// act on it; refused at the flush after its last write, it may have arrived whole (the fence
/// closed in between).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "write stopped on the wire: this replica no longer holds {lease} (fenced: its deadline less the margin has passed)"
)]
pub struct FencedOnWire {
    /// The Lease, `Lease/<namespace>/<name>`.
    pub lease: String,
}

/// A [`Fence`] that does not keep it alive, to key what belongs to it.
#[derive(Clone)]
pub(crate) struct WeakFence(std::sync::Weak<Inner>);

impl WeakFence {
    /// True while a [`Fence`] handle of it lives.
    pub(crate) fn is_live(&self) -> bool {
        self.0.strong_count() > 0
    }

    /// [`Fence::check_wire`] of the fence; a fence no handle is left of admits nothing.
    ///
    /// Errors: [`FencedOnWire`].
    pub(crate) fn check_wire(&self) -> Result<(), FencedOnWire> {
        match self.0.upgrade() {
            Some(inner) => Fence { inner }.check_wire(),
            None => Err(FencedOnWire { lease: "its Lease (dropped)".to_owned() }),
        }
    }

    /// True when this is a handle of `fence`.
    pub(crate) fn is(&self, fence: &Fence) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&fence.inner))
    }
}

/// The deadline of one Lease as the unit clients check it. Cheap to clone: clones share the
/// state. Equal when they are clones of one fence.
#[derive(Clone)]
pub struct Fence {
    inner: Arc<Inner>,
}

struct Inner {
    /// `Lease/<namespace>/<name>`, for [`Fenced`]; empty for [`Fence::unfenced`].
    lease: String,
    /// Writes are refused from this instant on ([`boottime`], ns); [`CLOSED`] or [`OPEN`].
    closes_at: AtomicU64,
    /// The Lease's deadline itself, as last published ([`boottime`], ns; 0 before).
    valid_until: AtomicU64,
    /// The margin last published (ns).
    margin: AtomicU64,
    /// Writes let through whose answer has not come yet.
    in_flight: AtomicUsize,
    /// Woken when `in_flight` drops.
    idle: Notify,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("lease", &self.inner.lease)
            .field("admits", &self.admits())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl PartialEq for Fence {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Fence {}

impl Fence {
    fn with(lease: String, closes_at: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                lease,
                closes_at: AtomicU64::new(closes_at),
                valid_until: AtomicU64::new(0),
                margin: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                idle: Notify::new(),
            }),
        }
    }

    /// A fence for the Lease `lease` (`Lease/<namespace>/<name>`), closed until its election
    /// loop publishes a deadline.
    pub fn new(lease: impl Into<String>) -> Self {
        Self::with(lease.into(), CLOSED)
    }

    /// A fence that admits every write, for clients no Lease guards.
    pub fn unfenced() -> Self {
        Self::with(String::new(), OPEN)
    }

    /// True for [`Fence::unfenced`].
    pub fn is_unfenced(&self) -> bool {
        self.inner.lease.is_empty()
    }

    /// The Lease this fence guards (`Lease/<namespace>/<name>`; empty when unfenced).
    pub fn lease(&self) -> &str {
        &self.inner.lease
    }

    /// Publishes the Lease's deadline: `valid_until` ([`boottime`]) is when another replica
    /// may take the Lease over, judged by this process's clock; writes are refused from
    /// `valid_until − margin` on. Does nothing to an unfenced fence.
    pub fn publish(&self, valid_until: Duration, margin: Duration) {
        if self.is_unfenced() {
            return;
        }
        self.inner.valid_until.store(nanos(valid_until), Ordering::SeqCst);
        self.inner.margin.store(nanos(margin), Ordering::SeqCst);
        let closes = nanos(valid_until.saturating_sub(margin)).max(1);
        self.inner.closes_at.store(closes, Ordering::SeqCst);
    }

    /// Closes the fence at once (the Lease was lost, released or its loop ended). Does nothing
    /// to an unfenced fence.
    pub fn close(&self) {
        if !self.is_unfenced() {
            self.inner.closes_at.store(CLOSED, Ordering::SeqCst);
        }
    }

    /// The Lease deadline last published ([`boottime`]), if any.
    pub fn valid_until(&self) -> Option<Duration> {
        match self.inner.valid_until.load(Ordering::SeqCst) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// True while a write may be sent now.
    pub fn admits(&self) -> bool {
        let closes = self.inner.closes_at.load(Ordering::SeqCst);
        closes == OPEN || nanos(boottime()) < closes
    }

    /// `Ok` while a write may be sent now, else the [`Fenced`] error for `method` and `path`.
    ///
    /// Errors: [`Fenced`] at or after the published deadline less the margin, or when closed.
    pub fn check(&self, method: &str, path: &str) -> Result<(), Fenced> {
        if self.admits() {
            return Ok(());
        }
        Err(Fenced { lease: self.inner.lease.clone(), method: method.to_owned(), path: path.to_owned() })
    }

    /// Writes let through whose answer has not come yet.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// True when no write let through can still be in flight: each was answered or timed out.
    pub fn is_drained(&self) -> bool {
        self.in_flight() == 0
    }

    /// Waits until [`Self::is_drained`], at most `bound`; returns whether it is. Close the
    /// fence first, or new writes may keep it busy.
    pub async fn drained(&self, bound: Duration) -> bool {
        let until = tokio::time::Instant::now() + bound;
        loop {
            let notified = self.inner.idle.notified();
            if self.is_drained() {
                return true;
            }
            let wake = (tokio::time::Instant::now() + Duration::from_millis(200)).min(until);
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(wake) => {}
            }
            if tokio::time::Instant::now() >= until {
                return self.is_drained();
            }
        }
    }

    /// `Ok` while a write's bytes may go on the wire now ([`super::wire::FencedIo`]).
    ///
    /// Errors: [`FencedOnWire`] when [`Self::admits`] is false.
    pub fn check_wire(&self) -> Result<(), FencedOnWire> {
        if self.admits() {
            return Ok(());
        }
        Err(FencedOnWire { lease: self.inner.lease.clone() })
    }

    /// How long a write admitted now may wait for its answer: until the Lease's published
    /// deadline (`valid_until`, when another replica may take it over), at most
    /// [`WRITE_TIMEOUT`]; [`WRITE_TIMEOUT`] for an unfenced fence or before any deadline.
    pub fn write_budget(&self) -> Duration {
        match self.valid_until() {
            Some(until) if !self.is_unfenced() => until.saturating_sub(boottime()).min(WRITE_TIMEOUT),
            _ => WRITE_TIMEOUT,
        }
    }

    /// How long the API server may work on a write admitted now, counted from when it receives
    /// it: the margin last published, at most [`Self::write_budget`] (the budget alone when no
    /// margin is published). A write's bytes leave only before `valid_until − margin`
    /// ([`super::wire`]), so a server that gives up that long after receiving it does so by
    /// `valid_until`, when another replica may take the Lease.
    pub fn server_timeout(&self) -> Duration {
        let budget = self.write_budget();
        match Duration::from_nanos(self.inner.margin.load(Ordering::SeqCst)) {
            Duration::ZERO => budget,
            margin => margin.min(budget),
        }
    }

    /// A handle that does not keep the fence alive.
    pub(crate) fn downgrade(&self) -> WeakFence {
        WeakFence(Arc::downgrade(&self.inner))
    }

    /// The [`FenceLayer`] checking this fence.
    pub fn layer(&self) -> FenceLayer {
        FenceLayer { fence: self.clone() }
    }
}

/// Counts one admitted write while it lives: held by the task that awaits the answer.
struct InFlight {
    fence: Fence,
}

impl InFlight {
    fn start(fence: &Fence) -> Self {
        fence.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        Self { fence: fence.clone() }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.fence.inner.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.fence.inner.idle.notify_waiters();
    }
}

/// Whether `request` changes state on the server: a write that is not a dry run.
pub(crate) fn is_write<B>(request: &Request<B>) -> bool {
    let write = matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE);
    let dry_run = request.uri().query().is_some_and(|q| q.split('&').any(|p| p == "dryRun=All"));
    write && !dry_run
}

/// Adds the API server's `timeout` query parameter (a Go duration, here in milliseconds) to a
/// fenced write that has none: the server cancels the request's context once that long has
/// passed since it received the request (k8s.io/apiserver `WithRequestDeadline`, as client-go
/// sends it for `--request-timeout`), so a write queued on the server is not acted on after
/// the Lease it was sent under has run out ([`Fence::server_timeout`]).
fn ask_server_to_give_up<B>(request: &mut Request<B>, budget: Duration) {
    let uri = request.uri();
    if uri.query().is_some_and(|q| q.split('&').any(|p| p.starts_with("timeout="))) {
        return;
    }
    let millis = budget.as_millis().max(1);
    let path_and_query = match uri.query() {
        Some(q) => format!("{}?{q}&timeout={millis}ms", uri.path()),
        None => format!("{}?timeout={millis}ms", uri.path()),
    };
    let mut parts = uri.clone().into_parts();
    if let Ok(pq) = path_and_query.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
}

/// The [`Layer`] of [`FenceService`] for one [`Fence`].
#[derive(Debug, Clone)]
pub struct FenceLayer {
    fence: Fence,
}

impl<S> Layer<S> for FenceLayer {
    type Service = FenceService<S>;

    fn layer(&self, inner: S) -> FenceService<S> {
        FenceService { inner, fence: self.fence.clone() }
    }
}

/// Refuses writes its [`Fence`] does not admit, bounds and counts those it lets through (see
/// the module doc).
#[derive(Debug, Clone)]
pub struct FenceService<S> {
    inner: S,
    fence: Fence,
}

impl<S, B> Service<Request<B>> for FenceService<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if self.fence.is_unfenced() || !is_write(&request) {
            let future = self.inner.call(request);
            return Box::pin(async move { future.await.map_err(Into::into) });
        }
        if let Err(fenced) = self.fence.check(request.method().as_str(), request.uri().path()) {
            tracing::debug!(lease = %fenced.lease, method = %fenced.method, path = %fenced.path, "write fenced");
            return Box::pin(std::future::ready(Err(Box::new(fenced) as BoxError)));
        }
        let budget = self.fence.write_budget();
        let mut request = request;
        ask_server_to_give_up(&mut request, self.fence.server_timeout());
        let guard = InFlight::start(&self.fence);
        let future = self.inner.call(request);
        // Its own task: a caller that stops waiting does not cancel the count (see the module
        // doc), and the write ends by its answer or the Lease's deadline.
        let write = tokio::spawn(async move {
            let answer = tokio::time::timeout(budget, future).await;
            drop(guard);
            match answer {
                Ok(result) => result.map_err(Into::into),
                Err(_) => Err(BoxError::from(format!(
                    "no answer within {budget:?} (the time left of the Lease it was sent under)"
                ))),
            }
        });
        Box::pin(async move { write.await.map_err(BoxError::from)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boottime_advances() {
        let a = boottime();
        std::thread::sleep(Duration::from_millis(2));
        assert!(boottime() > a);
    }

    #[test]
    fn a_fence_admits_until_its_deadline_less_the_margin() {
        let fence = Fence::new("Lease/ns/l");
        assert!(!fence.admits(), "closed until a deadline is published");
        fence.publish(boottime() + Duration::from_secs(60), Duration::from_secs(20));
        assert!(fence.admits());
        fence.publish(boottime() + Duration::from_secs(10), Duration::from_secs(20));
        let err = fence.check("PATCH", "/api/v1/namespaces/a/configmaps/b").unwrap_err();
        assert_eq!(err.lease, "Lease/ns/l");
        assert!(err.to_string().starts_with("PATCH /api/v1/namespaces/a/configmaps/b not sent"), "{err}");
        fence.publish(boottime() + Duration::from_secs(60), Duration::ZERO);
        fence.close();
        assert!(!fence.admits());
        let open = Fence::unfenced();
        open.close();
        assert!(open.admits(), "an unfenced client is never closed");
    }

    #[test]
    fn a_fenced_write_asks_the_server_to_give_up_when_its_lease_runs_out() {
        let req = |uri: &str| Request::builder().method("PATCH").uri(uri).body(()).unwrap();
        let mut plain = req("/api/v1/namespaces/a/configmaps/b");
        ask_server_to_give_up(&mut plain, Duration::from_millis(2500));
        assert_eq!(plain.uri().to_string(), "/api/v1/namespaces/a/configmaps/b?timeout=2500ms");
        let mut with_query = req("/api/v1/namespaces/a/configmaps/b?fieldManager=gitward&force=true");
        ask_server_to_give_up(&mut with_query, Duration::ZERO);
        assert_eq!(with_query.uri().query(), Some("fieldManager=gitward&force=true&timeout=1ms"));
        let mut own = req("/api/v1/namespaces/a/configmaps/b?timeout=5s");
        ask_server_to_give_up(&mut own, Duration::from_secs(1));
        assert_eq!(own.uri().query(), Some("timeout=5s"), "a timeout already asked for stays");

        let fence = Fence::new("Lease/ns/l");
        assert_eq!(fence.write_budget(), WRITE_TIMEOUT, "no deadline yet");
        fence.publish(boottime() + Duration::from_secs(4), Duration::from_secs(1));
        let budget = fence.write_budget();
        assert!(budget <= Duration::from_secs(4) && budget > Duration::from_secs(3), "{budget:?}");
        assert_eq!(fence.server_timeout(), Duration::from_secs(1), "the margin, below the budget");
        fence.publish(boottime() + Duration::from_secs(4), Duration::ZERO);
        assert!(fence.server_timeout() > Duration::from_secs(3), "no margin: the budget");
        assert_eq!(Fence::unfenced().write_budget(), WRITE_TIMEOUT);
    }

    #[test]
    fn writes_are_told_from_reads_and_dry_runs() {
        let req = |m: &str, uri: &str| Request::builder().method(m).uri(uri).body(()).unwrap();
        assert!(is_write(&req("PATCH", "/api/v1/namespaces/a/configmaps/b?fieldManager=gitward")));
        assert!(is_write(&req("DELETE", "/api/v1/namespaces/a/configmaps/b")));
        assert!(is_write(&req("POST", "/api/v1/namespaces")));
        assert!(!is_write(&req("GET", "/api/v1/namespaces/a/configmaps/b")));
        assert!(!is_write(&req("PATCH", "/api/v1/namespaces/a/configmaps/b?dryRun=All&fieldManager=x")));
    }

    #[tokio::test]
    async fn a_write_whose_caller_stopped_waiting_counts_until_it_is_answered() {
        use kube::client::Body;
        use tower::ServiceExt;
        let fence = Fence::new("Lease/ns/l");
        fence.publish(boottime() + Duration::from_secs(60), Duration::ZERO);
        let (answer_tx, answer_rx) = tokio::sync::oneshot::channel::<()>();
        let answer = std::sync::Mutex::new(Some(answer_rx));
        let transport = tower::service_fn(move |_req: Request<Body>| {
            let wait = answer.lock().unwrap().take();
            async move {
                if let Some(wait) = wait {
                    let _ = wait.await;
                }
                Ok::<_, BoxError>(http::Response::new(Body::empty()))
            }
        });
        let service = fence.layer().layer(transport);
        let request = Request::builder().method("DELETE").uri("/api/v1/namespaces/a").body(Body::empty()).unwrap();
        let caller = tokio::spawn(service.oneshot(request));
        while fence.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        caller.abort();
        let _ = caller.await;
        assert!(!fence.drained(Duration::from_millis(20)).await, "aborted, but the server has not answered");
        answer_tx.send(()).unwrap();
        assert!(fence.drained(Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn a_write_the_server_asks_to_retry_is_not_sent_again_once_the_fence_closed() {
        use kube::client::Body;
        use tower::ServiceExt;
        let fence = Fence::new("Lease/ns/l");
        fence.publish(boottime() + Duration::from_secs(60), Duration::from_secs(1));
        let calls = Arc::new(AtomicUsize::new(0));
        let (seen, closing) = (calls.clone(), fence.clone());
        // The transport: every try answers 429 Retry-After: 0, and the deadline passes while
        // the first is out.
        let transport = tower::service_fn(move |_req: Request<Body>| {
            seen.fetch_add(1, Ordering::SeqCst);
            closing.close();
            async move {
                let empty = http_body_util::BodyExt::map_err(http_body_util::Empty::new(), BoxError::from);
                let body = Box::new(empty) as Box<kube::client::DynBody>;
                Ok::<_, BoxError>(http::Response::builder().status(429).header("Retry-After", "0").body(body).unwrap())
            }
        });
        let origin = Arc::new(super::super::Origin::default());
        let client = tower::Layer::layer(&super::super::stack("https://k", &origin, &fence), transport);
        let request = Request::builder()
            .method("PATCH")
            .uri("/api/v1/namespaces/a/configmaps/b")
            .body(Body::from(b"{}".to_vec()))
            .unwrap();
        let answer = client.oneshot(request).await;
        let Err(error) = answer else { panic!("the retry was sent, not refused") };
        assert!(error.is::<Fenced>(), "{error}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the retry never reached the transport");
    }
}
