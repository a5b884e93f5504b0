//! One notifier's task: sends its queued notices in order, retries those that may pass, counts
//! and logs failures once per streak ([`NotifyMetrics`]).

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::{Notice, QUEUE, render};
use crate::config::{Notify, NotifyKind};

/// Retries of a notice whose send may pass (no answer, a 5xx, a 429), after the first try.
pub const RETRIES: usize = 4;
/// The first retry's delay; each next one doubles (with jitter), up to [`MAX_DELAY`].
const MIN_DELAY: Duration = Duration::from_millis(500);
/// The longest delay between two tries.
const MAX_DELAY: Duration = Duration::from_secs(10);
/// How long a request may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(15);

/// The notifier's name in logs and metrics: `notify[<index>]`, its `[[notify]]` table.
pub(super) fn label(index: usize) -> String {
    format!("notify[{index}]")
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NotifierLabels {
    notifier: String,
    kind: &'static str,
}

/// The notifiers' counters, registered with the daemon's metrics ([`NotifyMetrics::registered`]):
/// `gitward_notify_sent_total`, `gitward_notify_failures_total` (notices not sent after their
/// retries) and `gitward_notify_dropped_total` (the oldest notices a full queue dropped), each by
/// `notifier` (`notify[0]`) and `kind`. Cheap to clone: clones count into the same series.
#[derive(Clone, Debug, Default)]
pub struct NotifyMetrics {
    sent: Family<NotifierLabels, Counter>,
    failures: Family<NotifierLabels, Counter>,
    dropped: Family<NotifierLabels, Counter>,
}

impl NotifyMetrics {
    /// New counters, registered in `registry` (whose prefix is `gitward`).
    pub fn registered(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        metrics.register(registry);
        metrics
    }

    fn register(&self, registry: &mut Registry) {
        registry.register("notify_sent", "Notifications sent, by notifier", self.sent.clone());
        registry.register(
            "notify_failures",
            "Notifications not sent after their retries, by notifier",
            self.failures.clone(),
        );
        registry.register("notify_dropped", "Notifications dropped by a full queue, by notifier", self.dropped.clone());
    }

    fn labels(index: usize, kind: NotifyKind) -> NotifierLabels {
        NotifierLabels { notifier: label(index), kind: kind.as_str() }
    }
}

/// Starts the task of notifier `index`: its queue and its handle. The queue keeps the newest
/// [`QUEUE`] notices (a broadcast channel with one receiver: past it, the oldest is dropped and
/// the task told how many). The task ends once the queue is closed and drained; each notice it
/// sends, fails or finds dropped is taken off `undelivered`.
pub(super) fn spawn(
    index: usize,
    notify: Notify,
    metrics: NotifyMetrics,
    undelivered: Arc<AtomicUsize>,
) -> (broadcast::Sender<Notice>, JoinHandle<()>) {
    let (tx, rx) = broadcast::channel(QUEUE);
    let sender = Sender { index, notify, metrics, client: client(), failing: false, undelivered };
    (tx, tokio::spawn(sender.run(rx)))
}

fn client() -> Option<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .user_agent(concat!("gitward/", env!("CARGO_PKG_VERSION")))
        .timeout(TIMEOUT)
        // A token goes to the configured URL only, never where a redirect points.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .inspect_err(|e| warn!(error = %crate::telemetry::error_chain(e), "notifications: no HTTP client"))
        .ok()
}

/// Why a send failed, and whether trying again may help.
#[derive(Debug)]
struct Failed {
    message: String,
    transient: bool,
}

struct Sender {
    index: usize,
    notify: Notify,
    metrics: NotifyMetrics,
    client: Option<reqwest::Client>,
    /// The last notice failed: the next failure is not logged at warn again.
    failing: bool,
    /// The process's count of notices queued and not yet dealt with.
    undelivered: Arc<AtomicUsize>,
}

impl Sender {
    async fn run(mut self, mut rx: broadcast::Receiver<Notice>) {
        loop {
            match rx.recv().await {
                Ok(notice) => {
                    let result = self.send(&notice).await;
                    self.count(&notice, result);
                    self.undelivered.fetch_sub(1, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Lagged(dropped)) => {
                    let labels = NotifyMetrics::labels(self.index, self.notify.kind);
                    self.metrics.dropped.get_or_create(&labels).inc_by(dropped);
                    let dropped = usize::try_from(dropped).unwrap_or(usize::MAX);
                    self.undelivered.fetch_sub(dropped, Ordering::Relaxed);
                    warn!(
                        notifier = label(self.index),
                        dropped, "notification queue full: the oldest notices were dropped"
                    );
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    fn count(&mut self, notice: &Notice, result: Result<(), Failed>) {
        let labels = NotifyMetrics::labels(self.index, self.notify.kind);
        let notifier = label(self.index);
        let kind = self.notify.kind.as_str();
        match result {
            Ok(()) => {
                self.metrics.sent.get_or_create(&labels).inc();
                if std::mem::replace(&mut self.failing, false) {
                    info!(notifier, kind, unit = %notice.unit, "notifier recovered");
                }
                debug!(notifier, kind, unit = %notice.unit, event = notice.event.as_str(), "notification sent");
            }
            Err(failed) => {
                self.metrics.failures.get_or_create(&labels).inc();
                let error = crate::telemetry::mask::mask(&failed.message).into_owned();
                if std::mem::replace(&mut self.failing, true) {
                    debug!(notifier, kind, unit = %notice.unit, error, "notification failed");
                } else {
                    // The first failure of a streak at warn, the rest at debug: one message to search for.
                    warn!(notifier, kind, unit = %notice.unit, error, streak = "first", "notification failed");
                }
            }
        }
    }

    /// Sends `notice`, retrying what may pass.
    async fn send(&self, notice: &Notice) -> Result<(), Failed> {
        let permanent = |message: String| Failed { message, transient: false };
        let secret_file = self.notify.token_file.as_ref().or(self.notify.secret_file.as_ref());
        let secret = match secret_file {
            Some(path) => Some(read_secret(path).await.map_err(permanent)?),
            None => None,
        };
        let request = render::request(&self.notify, notice, secret.as_deref()).map_err(permanent)?;
        let Some(client) = &self.client else { return Err(permanent("no HTTP client".into())) };
        let backoff = ExponentialBuilder::default()
            .with_min_delay(MIN_DELAY)
            .with_max_delay(MAX_DELAY)
            .with_max_times(RETRIES)
            .with_jitter();
        (|| post(client, &request)).retry(backoff).when(|f: &Failed| f.transient).await
    }
}

/// A secret file's text, trimmed and registered for masking.
async fn read_secret(path: &std::path::Path) -> Result<String, String> {
    let text = tokio::fs::read_to_string(path).await.map_err(|e| format!("{}: read failed: {e}", path.display()))?;
    let secret = text.trim().to_owned();
    if secret.is_empty() {
        return Err(format!("{}: empty", path.display()));
    }
    crate::telemetry::mask::register([secret.as_str()]);
    Ok(secret)
}

/// One try of `request`: a 2xx is sent; a 5xx, 429 or no answer may pass.
async fn post(client: &reqwest::Client, request: &render::Request) -> Result<(), Failed> {
    let mut builder = client.post(&request.url).header("Content-Type", "application/json").body(request.body.clone());
    for (name, value) in &request.headers {
        builder = builder.header(*name, value);
    }
    let host = request.url.split('/').nth(2).unwrap_or_default().to_owned();
    let response = builder.send().await.map_err(|e| Failed {
        // Without the URL: Slack's is the secret.
        message: format!("{host}: {}", crate::telemetry::error_chain(&e.without_url())),
        transient: true,
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    Err(Failed {
        message: format!("{host} answered {status}"),
        transient: status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS,
    })
}
