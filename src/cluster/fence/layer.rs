//! The client layer of a [`Fence`]: in each unit client's stack below the retry layer, it
//! refuses a write the fence does not admit, asks the API server to give it up when its Lease
//! runs out, and runs each admitted write in a task of its own, bounded and counted in flight.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Method, Request};
use tower::{BoxError, Layer, Service};

use super::deadline::{Fence, InFlight};

impl Fence {
    /// The [`FenceLayer`] checking this fence.
    pub fn layer(&self) -> FenceLayer {
        FenceLayer { fence: self.clone() }
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
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::cluster::fence::{Fenced, WRITE_TIMEOUT, boottime};

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
        let origin = Arc::new(crate::cluster::Origin::default());
        let client = tower::Layer::layer(&crate::cluster::stack("https://k", &origin, &fence), transport);
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
