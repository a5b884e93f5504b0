//! Bounded retries of API requests the server asked to be retried (`Retry-After`).
//!
//! The policy follows client-go's `rest.Request` (`checkWait`/`retryAfterSeconds`): a response
//! with status 429 or any 5xx that carries `Retry-After: <seconds>` is sent again after that many
//! seconds. The API server sends such answers when it has not processed the request at all —
//! `429 storage is (re)initializing` while the watch cache of a just-established CRD fills,
//! priority-and-fairness rejections, `503` during start-up — so a retry is safe for every verb.
//! Beyond client-go, a 429, 503 or 504 without the header is retried with exponential backoff
//! (as kube's own policy does). Everything else — a 500 from a failing admission webhook, 409
//! Conflict, connection errors — is returned to the caller at once: 409 in particular means the
//! caller acted on stale data and must re-plan, never retry in place (DESIGN.md decision 5).
//!
//! Bounds, per request: at most [`MAX_RETRIES`] retries, no single wait longer than
//! [`MAX_DELAY`], and no retry that would start later than [`DEADLINE`] after the first try.
//! When a bound would be crossed the last response is returned as it is.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use tokio::time::Instant;
use tower::BoxError;
use tower::retry::Policy;
use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
use tower::util::rng::HasherRng;

/// Most retries of one request (client-go's default `maxRetries` is 10 as well).
pub const MAX_RETRIES: u32 = 10;
/// Latest start of a retry, measured from the first try of the request.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// Longest single wait; a larger `Retry-After` is shortened to this.
pub const MAX_DELAY: Duration = Duration::from_secs(10);
/// First wait of the backoff used when a 429/503/504 carries no `Retry-After`.
const MIN_BACKOFF: Duration = Duration::from_millis(200);

/// A [`tower::retry::Policy`] for kube requests: honours `Retry-After` on 429 and 5xx, bounded
/// by [`MAX_RETRIES`], [`MAX_DELAY`] and [`DEADLINE`]. One instance is cloned per request
/// (tower's `Retry` does so), so the counters are per request.
#[derive(Clone)]
pub struct RetryAfter {
    backoff: ExponentialBackoff,
    retries: u32,
    first_try: Option<Instant>,
}

impl Default for RetryAfter {
    fn default() -> Self {
        let backoff = ExponentialBackoffMaker::new(MIN_BACKOFF, MAX_DELAY, 0.5, HasherRng::new())
            .expect("constant backoff bounds are valid")
            .make_backoff();
        Self { backoff, retries: 0, first_try: None }
    }
}

/// The wait a response asks for: `Some(seconds)` from `Retry-After` on 429 or 5xx;
/// `Some(None)` for a 429/503/504 without it (use backoff); `None` when it is not retried.
fn requested_wait<B>(response: &Response<B>) -> Option<Option<Duration>> {
    let status = response.status();
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let header = response.headers().get(http::header::RETRY_AFTER);
    match header.and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(seconds) => Some(Some(Duration::from_secs(seconds))),
        None if matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
        ) =>
        {
            Some(None)
        }
        None => None,
    }
}

impl<B> Policy<Request<Body>, Response<B>, BoxError> for RetryAfter {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, req: &mut Request<Body>, result: &mut Result<Response<B>, BoxError>) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        let asked = requested_wait(response)?;
        if self.retries >= MAX_RETRIES {
            return None;
        }
        let backoff = self.backoff.next_backoff();
        let wait = match asked {
            Some(seconds) => seconds.min(MAX_DELAY),
            None => backoff.deadline().saturating_duration_since(Instant::now()),
        };
        let first_try = *self.first_try.get_or_insert_with(Instant::now);
        if first_try.elapsed() + wait > DEADLINE {
            return None;
        }
        self.retries += 1;
        tracing::debug!(
            status = response.status().as_u16(),
            method = %req.method(),
            path = req.uri().path(),
            retry = self.retries,
            wait_ms = wait.as_millis() as u64,
            "retrying request the API server asked to retry"
        );
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        self.first_try.get_or_insert_with(Instant::now);
        let body = req.body().try_clone()?;
        let mut copy = Request::builder().method(req.method().clone()).uri(req.uri().clone()).version(req.version());
        if let Some(headers) = copy.headers_mut() {
            headers.extend(req.headers().clone());
        }
        let mut copy = copy.body(body).ok()?;
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, retry_after: Option<&str>) -> Result<Response<()>, BoxError> {
        let mut b = Response::builder().status(status);
        if let Some(v) = retry_after {
            b = b.header("Retry-After", v);
        }
        Ok(b.body(()).unwrap())
    }

    fn wait_of(policy: &mut RetryAfter, status: u16, retry_after: Option<&str>) -> Option<Duration> {
        let mut req = Request::new(Body::empty());
        let mut res = answer(status, retry_after);
        let now = Instant::now();
        policy.retry(&mut req, &mut res).map(|sleep| sleep.deadline() - now)
    }

    #[tokio::test(start_paused = true)]
    async fn storage_reinitializing_429_waits_as_long_as_the_server_asks() {
        let mut p = RetryAfter::default();
        assert_eq!(wait_of(&mut p, 429, Some("1")), Some(Duration::from_secs(1)));
        assert_eq!(wait_of(&mut p, 429, Some("3")), Some(Duration::from_secs(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_5xx_with_retry_after_is_retried_and_one_without_is_not() {
        let mut p = RetryAfter::default();
        assert_eq!(wait_of(&mut p, 500, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(wait_of(&mut p, 500, None), None, "a failing webhook's 500 is not retried");
        assert!(wait_of(&mut p, 503, None).is_some(), "503 without the header backs off");
    }

    #[tokio::test(start_paused = true)]
    async fn client_errors_and_conflicts_are_never_retried() {
        let mut p = RetryAfter::default();
        for status in [400, 403, 404, 409, 422] {
            assert_eq!(wait_of(&mut p, status, Some("1")), None, "{status}");
        }
        assert_eq!(wait_of(&mut p, 200, Some("1")), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_retry_after_is_capped() {
        let mut p = RetryAfter::default();
        assert_eq!(wait_of(&mut p, 429, Some("3600")), Some(MAX_DELAY));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_after_the_maximum_count() {
        let mut p = RetryAfter::default();
        for _ in 0..MAX_RETRIES {
            assert!(wait_of(&mut p, 429, Some("0")).is_some());
        }
        assert_eq!(wait_of(&mut p, 429, Some("0")), None);
    }

    #[tokio::test(start_paused = true)]
    async fn no_retry_starts_after_the_deadline() {
        let mut p = RetryAfter::default();
        let mut req = Request::new(Body::empty());
        Policy::<_, Response<()>, BoxError>::clone_request(&mut p, &req);
        tokio::time::advance(DEADLINE - Duration::from_secs(5)).await;
        assert_eq!(wait_of(&mut p, 429, Some("4")), Some(Duration::from_secs(4)));
        tokio::time::advance(Duration::from_secs(4)).await;
        let mut res = answer(429, Some("2"));
        assert!(p.retry(&mut req, &mut res).is_none(), "would start past the deadline");
    }

    #[test]
    fn requests_with_a_body_are_cloned_whole() {
        let mut p = RetryAfter::default();
        let req = Request::builder()
            .method("PATCH")
            .uri("/api/v1/namespaces/a/configmaps/b")
            .header("content-type", "application/apply-patch+yaml")
            .body(Body::from(b"kind: ConfigMap".to_vec()))
            .unwrap();
        let copy = Policy::<_, Response<()>, BoxError>::clone_request(&mut p, &req).expect("a byte body can be cloned");
        assert_eq!(copy.method(), "PATCH");
        assert_eq!(copy.headers()["content-type"], "application/apply-patch+yaml");
    }
}
