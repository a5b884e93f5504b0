//! Notifications of syncs (`[[notify]]`): the notifiers of a process ([`Notifications`]) and
//! per notifier a background task that sends each [`Notice`] — a signed JSON webhook, a Slack
//! incoming-webhook message, or a commit status on GitHub, GitLab or Gitea (`render`). Which
//! syncs give a notice is the observer's (`observe::notify`): a revision that `failed` or is
//! `degraded`, the first good sync after one (`recovered`), and with `on = ["applied", …]`
//! every revision — a forge's `pending` when its objects are sent, `success` at its end.
//!
//! The observer neither waits nor fails: it queues each notice ([`Notifications::send`]) on
//! its notifier's bounded queue ([`QUEUE`]); a full queue drops its *oldest* notice, so the
//! newest state of each commit is the one kept (counted in `gitward_notify_dropped_total` and
//! logged at warn). Each notifier's task sends in order, retrying a failure
//! that may pass (no answer, a 5xx or 429) with exponential backoff (four
//! times); a notice that still fails is counted (`gitward_notify_failures_total{notifier}`) and
//! logged at warn once per failure streak, and the recovery once at info. Secrets — tokens,
//! the webhook key, Slack's URL — are read from their files at each send and never logged;
//! error messages in notices are masked ([`crate::telemetry::mask`]).

mod notice;
mod render;
mod send;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::task::JoinHandle;
use tracing::warn;

pub use notice::{Notice, NoticeCounts, State};
pub use send::NotifyMetrics;

use crate::config::{Notify, NotifyEvent};

/// Notices queued for one notifier; past it the oldest queued is dropped (counted).
pub const QUEUE: usize = 64;

/// The notifiers of a process, shared by every unit's observer of notifications: the
/// `[[notify]]` tables in force and the queue of each one's task. Cheap to clone.
#[derive(Clone, Default)]
pub struct Notifications {
    /// The notifiers in force, swapped whole by [`Notifications::configure`].
    current: Arc<Mutex<Arc<Workers>>>,
    /// Every task started, for [`Notifications::flush`].
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Notices queued and neither sent, failed nor dropped yet, over every notifier: what
    /// [`Notifications::flush`] says it left.
    undelivered: Arc<AtomicUsize>,
    metrics: NotifyMetrics,
}

/// The notifiers of one config.
#[derive(Default)]
struct Workers {
    config: Vec<Notify>,
    queues: Vec<tokio::sync::broadcast::Sender<Notice>>,
}

impl Notifications {
    /// The notifiers of `config` (`[[notify]]`), each with its task started (a tokio runtime
    /// must be running), counting into `metrics`.
    pub fn start(config: &[Notify], metrics: NotifyMetrics) -> Self {
        let notifications = Self { metrics, ..Self::default() };
        notifications.configure(config);
        notifications
    }

    /// Puts `config` in force (a reload), unless it is the one in force: new tasks start, the
    /// old ones end once their queue is drained.
    pub fn configure(&self, config: &[Notify]) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.config == config {
            return;
        }
        let mut queues = Vec::with_capacity(config.len());
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        for (index, notify) in config.iter().enumerate() {
            let (tx, task) = send::spawn(index, notify.clone(), self.metrics.clone(), self.undelivered.clone());
            queues.push(tx);
            tasks.push(task);
        }
        *current = Arc::new(Workers { config: config.to_vec(), queues });
    }

    /// Queues `notice` for every notifier that wants it: its unit and event are wanted, and a
    /// webhook or Slack is not told of `pending`. A full queue drops its oldest notice.
    pub fn send(&self, notice: &Notice) {
        let workers = self.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (notify, queue) in workers.config.iter().zip(&workers.queues) {
            if !wants(notify, notice) {
                continue;
            }
            // A full queue drops its oldest notice; the task counts it when it reads on.
            if queue.send(notice.clone()).is_ok() {
                self.undelivered.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Ends the notifiers and waits until what they queued is sent, at most `bound`, then
    /// leaves the rest and says how many (a warning): `gitward sync` before it exits. Returns
    /// how many notices were left undelivered.
    pub async fn flush(self, bound: Duration) -> usize {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Arc::default();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        let ended = tokio::time::timeout(bound, futures::future::join_all(tasks)).await.is_ok();
        let undelivered = self.undelivered.load(Ordering::Relaxed);
        if !ended && undelivered > 0 {
            let bound_s = bound.as_secs();
            warn!(
                undelivered,
                bound_s, "notifications not delivered before exit: their commit statuses stay as they were"
            );
        }
        undelivered
    }
}

/// Whether `notify` is told of `notice`: its unit and event are wanted (`applied` wants the
/// success of a recovering revision too); webhooks and Slack are not told of `pending`.
fn wants(notify: &Notify, notice: &Notice) -> bool {
    if matches!(notice.state, State::Pending | State::Cancelled) && !notify.kind.is_forge() {
        return false;
    }
    notify.wants(&notice.unit, notice.event)
        || (notice.event == NotifyEvent::Recovered && notify.wants(&notice.unit, NotifyEvent::Applied))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NotifyKind;

    fn notify(kind: NotifyKind, on: &[NotifyEvent], units: &[&str]) -> Notify {
        Notify {
            kind,
            url: "https://h".into(),
            token_file: None,
            secret_file: None,
            units: units.iter().map(|u| u.to_string()).collect(),
            on: on.to_vec(),
            repository: None,
        }
    }

    fn notice(event: NotifyEvent, state: State) -> Notice {
        Notice {
            unit: "shop".into(),
            cluster: "default".into(),
            repo: String::new(),
            revision: "a".into(),
            event,
            state,
            result: "healthy",
            trigger: None,
            counts: NoticeCounts::default(),
            errors: Vec::new(),
            unhealthy: Vec::new(),
            time: jiff::Timestamp::UNIX_EPOCH,
        }
    }

    /// A loopback webhook receiver answering 200 that records each body's revision.
    async fn receiver() -> (String, Arc<Mutex<Vec<String>>>) {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let record = seen.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let record = record.clone();
            async move {
                let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                record.lock().unwrap().push(value["revision"].as_str().unwrap_or_default().to_owned());
                "ok"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, seen)
    }

    #[tokio::test]
    async fn a_full_queue_drops_its_oldest_notices_keeps_the_newest_and_counts_them() {
        let (url, seen) = receiver().await;
        let hook = Notify { url, ..notify(NotifyKind::Webhook, &[NotifyEvent::Failed], &[]) };
        let mut registry = prometheus_client::registry::Registry::with_prefix("gitward");
        let notifications = Notifications::start(&[hook], NotifyMetrics::registered(&mut registry));
        // Queued before the notifier's task first runs (this test's runtime has one thread).
        for i in 0..QUEUE + 6 {
            notifications.send(&Notice { revision: format!("r{i}"), ..notice(NotifyEvent::Failed, State::Failure) });
        }
        assert_eq!(notifications.clone().flush(Duration::from_secs(60)).await, 0, "all dealt with");
        let seen = seen.lock().unwrap().clone();
        let expected: Vec<String> = (6..QUEUE + 6).map(|i| format!("r{i}")).collect();
        assert_eq!(seen, expected, "the newest {QUEUE} sent in order, the 6 oldest dropped");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("gitward_notify_dropped_total{notifier=\"notify[0]\",kind=\"webhook\"} 6"), "{text}");
    }

    #[test]
    fn notifiers_are_told_what_they_asked_for() {
        let failed = notice(NotifyEvent::Failed, State::Failure);
        let pending = notice(NotifyEvent::Applied, State::Pending);
        let recovered = notice(NotifyEvent::Recovered, State::Success);
        let hook = notify(NotifyKind::Webhook, &[NotifyEvent::Failed, NotifyEvent::Applied], &[]);
        assert!(wants(&hook, &failed));
        assert!(!wants(&hook, &pending), "a webhook is not told of pending");
        assert!(wants(&hook, &recovered), "applied covers the success of a recovering revision");
        let github = notify(NotifyKind::Github, &[NotifyEvent::Applied], &["shop"]);
        assert!(wants(&github, &pending) && !wants(&github, &failed));
        let other = notify(NotifyKind::Github, &[NotifyEvent::Failed], &["cart"]);
        assert!(!wants(&other, &failed), "another unit's notifier");
    }
}
