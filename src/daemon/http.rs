//! The daemon's HTTP listener: signed webhooks, health, readiness and metrics.
//!
//! | route | answers |
//! |---|---|
//! | `POST /hooks/git` | 202 `{"units": [..]}` and a [`TriggerKind::Webhook`] sent to each unit following the pushed repository and ref ([`route`]), and a round of the `[[preview]]` tasks; 401 unsigned, badly signed or no secret configured; 413 body over [`BODY_LIMIT`] |
//! | `GET /healthz` | 200 `ok` while the process serves requests |
//! | `GET /readyz` | 200 `ready` when [`super::decide::readyz`], else 503 naming the units not ready; a second line `sandbox: …` ([`crate::render::sandbox::state`]); with `?verbose`, then a line per unit ([`decide::readyz_lines`]: its revision applied, failed objects, the error of a revision not applied) |
//! | `GET /metrics` | 200, [`Metrics::encode`] as [`metrics::CONTENT_TYPE`] |
//! | `GET /`, `/units/<name>`, `/events`, `/login`, … | the dashboard, with `[daemon.ui] enabled = true` ([`super::ui`]) |
//!
//! Webhooks are refused unless a secret is configured (DESIGN.md, Triggers; decision 10: the
//! secret and the presented signature are never logged).

use std::future::Future;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use tracing::{debug, info, warn};

use super::decide;
use super::metrics::{self, Metrics};
use super::route::{self, Followed};
use super::trigger::{Statuses, Trigger, TriggerKind, TriggerSender};
use super::webhook;

/// The largest webhook body accepted, in bytes: 1 MiB. GitHub caps payloads at 25 MB but a push
/// event is a few KiB; the limit bounds what an unauthenticated sender can make us buffer and
/// hash.
pub const BODY_LIMIT: usize = 1 << 20;

/// How long one request may take, body read included; a slower one gets 408. Bounds what a
/// client that sends headers and then nothing can hold.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Requests served at once; more wait (the listener is for webhooks, probes and scrapes).
pub const MAX_CONCURRENT_REQUESTS: usize = 64;

/// One unit as the webhook route sees it: (unit name, the repository and ref it follows —
/// [`Followed`] —, the sender of its trigger channel, and its side of the path-unchanged rule:
/// a webhook that leaves its path alone while it rests does not wake it, [`super::quiet`]).
pub type UnitRoute = (String, Followed, TriggerSender, Option<Arc<super::quiet::Quiet>>);

/// The shared webhook secret as bytes (the file's contents); `None` when none is configured.
pub type Secret = Option<Arc<Vec<u8>>>;

/// What the handlers share. Cheap to clone: every field is behind an `Arc`, so a clone given to
/// [`serve`] sees [`HttpState::set_units`] and [`HttpState::set_secret`] made on another.
#[derive(Debug, Clone)]
pub struct HttpState {
    /// The webhook secret; `None` refuses every webhook with 401 (unsigned webhooks are never
    /// accepted). Behind a lock so a config reload can change it ([`HttpState::set_secret`]).
    pub webhook_secret: Arc<RwLock<Secret>>,
    /// The units webhooks can trigger; replaced as a whole on config reload or leadership
    /// change ([`HttpState::set_units`]).
    pub units: Arc<RwLock<Vec<UnitRoute>>>,
    /// Per-unit status, for `/readyz`.
    pub status: Statuses,
    /// The registry `/metrics` encodes; webhook triggers are counted in it.
    pub metrics: Arc<Metrics>,
    /// The render sandbox as [`crate::render::sandbox::state`] describes it, the second line
    /// of every `/readyz` answer ([`HttpState::set_sandbox`]).
    pub sandbox: Arc<RwLock<String>>,
    /// The dashboard, when `[daemon.ui]` enables it ([`HttpState::with_ui`]); `None`: its
    /// routes are not served (404).
    pub ui: Option<super::ui::Dashboard>,
    /// Woken at each accepted webhook: the `[[preview]]` tasks then look for new pull-request
    /// heads at once (a push to a pull request's branch, or the forge's pull-request event).
    pub previews: Arc<tokio::sync::Notify>,
}

impl HttpState {
    /// A state with `webhook_secret` (`None` when none is configured) and no units yet (see
    /// [`HttpState::set_units`]).
    pub fn new(webhook_secret: Secret, status: Statuses, metrics: Arc<Metrics>) -> Self {
        let sandbox = Arc::new(RwLock::new(crate::render::sandbox::state(crate::config::SandboxMode::On)));
        Self {
            webhook_secret: Arc::new(RwLock::new(webhook_secret)),
            units: Arc::default(),
            status,
            metrics,
            sandbox,
            ui: None,
            previews: Arc::default(),
        }
    }

    /// This state serving the dashboard `ui` too.
    pub fn with_ui(self, ui: super::ui::Dashboard) -> Self {
        Self { ui: Some(ui), ..self }
    }

    /// Replaces the sandbox line of `/readyz` and `gitward_sandbox_layer` (at start and after
    /// a reload).
    pub fn set_sandbox(&self, mode: crate::config::SandboxMode) {
        *self.sandbox.write().expect("sandbox lock") = crate::render::sandbox::state(mode);
        self.metrics.set_sandbox_layers(&crate::render::sandbox::layers(mode));
    }

    /// Replaces the units webhooks can trigger (after a reload; empty when leadership is lost).
    /// A request already past the ref match keeps the senders it took.
    pub fn set_units(&self, units: Vec<UnitRoute>) {
        *self.units.write().expect("units lock") = units;
    }

    /// Replaces the webhook secret (after a reload); `None` refuses webhooks from now on.
    pub fn set_secret(&self, secret: Secret) {
        *self.webhook_secret.write().expect("secret lock") = secret;
    }

    /// The current secret (a cheap `Arc` clone, so no lock is held while hashing).
    fn secret(&self) -> Secret {
        self.webhook_secret.read().expect("secret lock").clone()
    }

    /// Sends a webhook trigger to each unit that a push of `pushed` (`None`: any ref) naming
    /// `repositories` (empty: none named) triggers ([`Followed::triggered_by`]) and counts it;
    /// returns the names of the units triggered. A payload naming the commit it pushed
    /// (`commit`, [`webhook::pushed_commit`]) gives a git unit [`Trigger::pushed`]: it syncs
    /// only a revision other than the one last applied, so the webhook of a push the ref watch
    /// already handed out syncs nothing again. A chart or artifact unit, and every unit for a
    /// payload naming no commit, gets the explicit webhook, which syncs even the revision last
    /// applied. A full channel means a sync is
    /// already queued: the trigger coalesces into it and the unit is still listed. A closed
    /// channel (the unit task has stopped, e.g. mid-reload) is skipped. The units resting under
    /// the path-unchanged rule are handed the webhook by a task of its own after its fetch
    /// ([`super::quiet::hand_out`]): only those whose path it changed wake.
    fn trigger(&self, pushed: Option<&str>, repositories: &[String], commit: bool) -> Vec<String> {
        let units = self.units.read().expect("units lock");
        let mut triggered = Vec::new();
        let mut resting = Vec::new();
        // One instant for every unit: the units of one repository then take one fetch of it
        // (a fetch that started after the webhook serves them all, `Repo::fetch_since`).
        let explicit = Trigger::now(TriggerKind::Webhook);
        let git = if commit { Trigger::pushed(explicit.at) } else { explicit.clone() };
        for (name, followed, sender, quiet) in units.iter() {
            if !followed.triggered_by(pushed, repositories) {
                continue;
            }
            let trigger = if matches!(followed, Followed::Git { .. }) { &git } else { &explicit };
            match quiet {
                Some(quiet) if quiet.rests() => resting.push((sender.clone(), Some(quiet.clone()))),
                _ => {
                    if sender.offer(trigger.clone()).is_err() {
                        debug!(unit = %name, "unit task gone, webhook trigger dropped");
                        continue;
                    }
                }
            }
            self.metrics.observe_trigger(name, TriggerKind::Webhook);
            triggered.push(name.clone());
        }
        if !resting.is_empty() {
            // Only git units rest under the path-unchanged rule.
            tokio::spawn(super::quiet::hand_out(resting, git));
        }
        triggered
    }
}

/// The routes of the module doc, over `state`, behind tower layers: at most
/// [`MAX_CONCURRENT_REQUESTS`] at once (tower), each within [`REQUEST_TIMEOUT`] (else 408,
/// tower-http). Bodies over [`BODY_LIMIT`] are refused with 413 by the webhook handler itself,
/// declared or streamed, before it buffers them. Exposed so tests can drive it without a socket
/// (`tower::ServiceExt::oneshot`).
pub fn router(state: HttpState) -> Router {
    let ui = state.ui.clone();
    let routes = Router::new()
        .route("/hooks/git", post(hook))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(state);
    let routes = match ui {
        Some(ui) => routes.merge(super::ui::routes(ui)),
        None => routes,
    };
    routes
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
        .layer(tower::limit::ConcurrencyLimitLayer::new(MAX_CONCURRENT_REQUESTS))
}

/// Serves [`router`] on an already-bound `listener` (HTTP/1.1) until `shutdown` completes, then
/// stops accepting, ends the dashboard's live streams and waits for in-flight requests to
/// finish (axum's graceful shutdown).
///
/// Errors: only what `axum::serve` returns; a failed accept is retried by axum, not returned.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: HttpState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let ui = state.ui.clone();
    let shutdown = async move {
        shutdown.await;
        if let Some(ui) = ui {
            ui.stop();
        }
    };
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}

async fn hook(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    let Some(secret) = state.secret() else {
        return reject(StatusCode::UNAUTHORIZED, &webhook::Rejection::NoSecret);
    };
    let body = match read_limited(&headers, body).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => return reject(StatusCode::PAYLOAD_TOO_LARGE, &"body over 1 MiB"),
        Err(BodyError::Read) => return reject(StatusCode::BAD_REQUEST, &"body could not be read"),
    };
    let provider = match webhook::verify(&secret, &headers, &body) {
        Ok(provider) => provider,
        Err(rejection) => return reject(StatusCode::UNAUTHORIZED, &rejection),
    };
    if state.status.standby() {
        return reject(StatusCode::SERVICE_UNAVAILABLE, &"standing by: another replica holds the leader Lease");
    }
    let pushed = webhook::pushed_ref(&body);
    let repositories = route::pushed_repositories(&body);
    let commit = webhook::pushed_commit(&body);
    // A pull request's event is for the previews alone: it pushed nothing a unit follows.
    let review = webhook::is_review_event(&headers);
    let units = if review { Vec::new() } else { state.trigger(pushed.as_deref(), &repositories, commit.is_some()) };
    state.previews.notify_waiters();
    let after = commit.as_deref().unwrap_or("");
    info!(%provider, "ref" = pushed.as_deref().unwrap_or(""), after, review, ?repositories, ?units, "webhook accepted");
    (StatusCode::ACCEPTED, axum::Json(serde_json::json!({ "units": units }))).into_response()
}

/// Logs the refusal (the reason only) and answers `status` with the reason as text.
fn reject(status: StatusCode, reason: &dyn std::fmt::Display) -> Response {
    warn!(%reason, status = status.as_u16(), "webhook rejected");
    (status, format!("webhook rejected: {reason}\n")).into_response()
}

enum BodyError {
    TooLarge,
    Read,
}

/// The whole body, refusing more than [`BODY_LIMIT`] bytes: at once when `Content-Length`
/// says so, else as soon as the streamed chunks pass the limit.
async fn read_limited(headers: &HeaderMap, body: Body) -> Result<Bytes, BodyError> {
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| BodyError::Read)?;
        if buf.len() + chunk.len() > BODY_LIMIT {
            return Err(BodyError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.into())
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<HttpState>, RawQuery(query): RawQuery) -> Response {
    let mut tail = format!("\nsandbox: {}\n", state.sandbox.read().expect("sandbox lock"));
    if state.status.standby() {
        return (StatusCode::OK, format!("ready: standing by for leadership{tail}")).into_response();
    }
    let snapshot = state.status.snapshot();
    // `?verbose` (kube-apiserver's spelling; `verbose=…` too): a line per unit after the rest.
    if query.unwrap_or_default().split('&').any(|p| p == "verbose" || p.starts_with("verbose=")) {
        tail.extend(decide::readyz_lines(&snapshot).into_iter().map(|line| line + "\n"));
    }
    if decide::readyz(false, &snapshot) {
        return (StatusCode::OK, format!("ready{tail}")).into_response();
    }
    let waiting: Vec<&str> =
        snapshot.iter().filter(|(_, u)| !decide::unit_ready(u)).map(|(name, _)| name.as_str()).collect();
    let message = if snapshot.is_empty() {
        "not ready: no sync units".to_owned()
    } else {
        format!("not ready: {}", waiting.join(", "))
    };
    (StatusCode::SERVICE_UNAVAILABLE, format!("{message}{tail}")).into_response()
}

async fn metrics_text(State(state): State<HttpState>) -> Response {
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], state.metrics.encode()).into_response()
}
