//! The read-only web dashboard (`[daemon.ui] enabled = true`), served on the daemon's listener
//! beside the webhook and probe routes ([`super::http`]).
//!
//! | route | answers |
//! |---|---|
//! | `GET /` | every unit: cluster, ref, revision applied, last result, health counts, last apply, suspended |
//! | `GET /units/<name>` | one unit: its unhealthy objects and why, its recent syncs; 404 for an unknown unit |
//! | `GET /events`, `GET /units/<name>/events` | the live part of that page, as Server-Sent Events (`event: update`, the escaped HTML) whenever it changes |
//! | `GET /login`, `POST /login` | the login form; a right `token` sets the session cookie and redirects to `/` (303), a wrong one 401 |
//!
//! Pages are rendered on the server ([`page`]); the one embedded script only swaps in what the
//! live stream sends. [`Board`] ([`crate::observe::board`]) holds what is shown, fed by one sync
//! observer. [`access`] decides
//! who may read and sets the security headers of every response here.

pub mod access;
pub mod page;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::warn;

pub use crate::observe::board::Board;
pub use access::Token;

use super::trigger::Statuses;

/// Live streams open at once: 32. A stream holds no request slot once its headers are sent
/// ([`super::http::MAX_CONCURRENT_REQUESTS`] counts requests until then), so this bounds what
/// open tabs can hold; one more gets 503 and its browser retries.
pub const MAX_STREAMS: usize = 32;

/// How often a live stream renders its page again even without a sync: 2 s. Suspending a unit
/// or the start of its health wait changes what the page shows without a sync's end; an
/// unchanged render sends nothing.
pub const REFRESH: Duration = Duration::from_secs(2);

/// Longest login body read, in bytes: 4 KiB.
const LOGIN_LIMIT: usize = 4096;

/// What the dashboard's handlers share. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Dashboard {
    /// What the units' syncs left.
    pub board: Board,
    /// The units' readiness status (suspended, waiting for health, the revision of a sync
    /// from before the board saw one).
    pub status: Statuses,
    /// The token of `[daemon.ui] token_file`; `None`: no token, loopback only.
    token: Option<Token>,
    /// Permits of the live streams ([`MAX_STREAMS`]).
    streams: Arc<Semaphore>,
    /// Turns true when the listener shuts down: the live streams end, so a graceful shutdown
    /// does not wait on them forever.
    stop: Arc<watch::Sender<bool>>,
}

impl Dashboard {
    /// A dashboard of `board` and `status`, asking for `token` when there is one.
    pub fn new(board: Board, status: Statuses, token: Option<Token>) -> Self {
        let stop = Arc::new(watch::channel(false).0);
        Self { board, status, token, streams: Arc::new(Semaphore::new(MAX_STREAMS)), stop }
    }

    /// Ends every live stream (the listener is shutting down).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

/// The routes of the module doc, each behind [`access::guard`].
pub fn routes(ui: Dashboard) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/events", get(index_events))
        .route("/units/{name}", get(unit))
        .route("/units/{name}/events", get(unit_events))
        .route("/login", get(login_form).post(login))
        .layer(axum::middleware::from_fn_with_state(ui.clone(), access::guard))
        .with_state(ui)
}

async fn index(State(ui): State<Dashboard>) -> Html<String> {
    Html(page::page("units", "/events", &page::index(&ui.board, &ui.status)))
}

async fn unit(State(ui): State<Dashboard>, Path(name): Path<String>) -> Response {
    match page::unit(&ui.board, &ui.status, &name) {
        Some(live) => Html(page::page(&name, &format!("/units/{name}/events"), &live)).into_response(),
        None => {
            (StatusCode::NOT_FOUND, Html(page::page("not found", "/events", "<h1>No such unit</h1>"))).into_response()
        }
    }
}

async fn index_events(State(ui): State<Dashboard>) -> Response {
    live(ui, |ui| Some(page::index(&ui.board, &ui.status)))
}

async fn unit_events(State(ui): State<Dashboard>, Path(name): Path<String>) -> Response {
    live(ui, move |ui| page::unit(&ui.board, &ui.status, &name))
}

async fn login_form(State(ui): State<Dashboard>) -> Response {
    match ui.token {
        Some(_) => Html(page::login("This dashboard needs its token.")).into_response(),
        None => Redirect::to("/").into_response(),
    }
}

/// `POST /login` with `token=<token>` (`application/x-www-form-urlencoded`, the form's).
async fn login(State(ui): State<Dashboard>, body: Body) -> Response {
    let Some(token) = &ui.token else {
        return Redirect::to("/").into_response();
    };
    let Ok(body) = axum::body::to_bytes(body, LOGIN_LIMIT).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "login body over 4 KiB\n").into_response();
    };
    let presented = url::form_urlencoded::parse(&body).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    if presented.is_some_and(|p| token.matches(&p)) {
        return (StatusCode::SEE_OTHER, [(header::SET_COOKIE, token.set_cookie()), (header::LOCATION, "/".into())])
            .into_response();
    }
    warn!("dashboard login refused: wrong token");
    (StatusCode::UNAUTHORIZED, Html(page::login("Wrong token."))).into_response()
}

/// A live stream of what `render` makes of the dashboard: at once, then each time it renders
/// differently after a change of the board or a [`REFRESH`]; it ends when `render` finds
/// nothing (the unit left the config) or the listener stops. 503 over [`MAX_STREAMS`].
fn live<F>(ui: Dashboard, render: F) -> Response
where
    F: Fn(&Dashboard) -> Option<String> + Send + 'static,
{
    let Ok(permit) = ui.streams.clone().try_acquire_owned() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many live dashboards open\n").into_response();
    };
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stream = UpdateStream {
        changes: ui.board.subscribe(),
        stop: ui.stop.subscribe(),
        ui,
        render,
        tick,
        last: None,
        _permit: permit,
    };
    let events = futures::stream::unfold(stream, |mut s| async move {
        let html = s.next().await?;
        Some((Ok::<_, Infallible>(Event::default().event("update").data(html)), s))
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

/// One live stream's state.
struct UpdateStream<F> {
    ui: Dashboard,
    render: F,
    changes: watch::Receiver<u64>,
    stop: watch::Receiver<bool>,
    tick: tokio::time::Interval,
    /// What was sent last; `None` before the first.
    last: Option<String>,
    _permit: OwnedSemaphorePermit,
}

impl<F: Fn(&Dashboard) -> Option<String>> UpdateStream<F> {
    /// The next render to send; `None` to end the stream.
    async fn next(&mut self) -> Option<String> {
        loop {
            if self.last.is_some() {
                tokio::select! {
                    _ = self.stop.wait_for(|stop| *stop) => return None,
                    changed = self.changes.changed() => changed.ok()?,
                    _ = self.tick.tick() => {}
                }
            }
            if *self.stop.borrow() {
                return None;
            }
            let html = (self.render)(&self.ui)?;
            if self.last.as_ref() != Some(&html) {
                self.last = Some(html.clone());
                return Some(html);
            }
        }
    }
}
