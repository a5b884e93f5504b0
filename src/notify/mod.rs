//! Notifications of syncs (`[[notify]]`): one [`Observer`] of a unit's syncs ([`Watch`]) that
//! turns transitions into [`Notice`]s, and per notifier a background task that sends them — a
//! signed JSON webhook, a Slack incoming-webhook message, or a commit status on GitHub,
//! GitLab or Gitea (`render`).
//!
//! What is sent (`track`): a revision that `failed` or is `degraded`, the first good sync
//! after one (`recovered`), and with `on = ["applied", …]` every revision — a forge's `pending`
//! when its objects are sent, `success` at its end. Each (unit, revision, state) is sent once:
//! the retries of a failing revision, and resyncs of an applied one, send nothing.
//!
//! The observer neither waits nor fails ([`crate::sync::outcome`]): it queues each notice on
//! its notifier's bounded queue ([`QUEUE`]); a full queue drops it (counted in
//! `gitward_notify_dropped_total`). Each notifier's task sends in order, retrying a failure
//! that may pass (no answer, a 5xx or 429) with exponential backoff (four
//! times); a notice that still fails is counted (`gitward_notify_failures_total{notifier}`) and
//! logged at warn once per failure streak, and the recovery once at info. Secrets — tokens,
//! the webhook key, Slack's URL — are read from their files at each send and never logged;
//! error messages in notices are masked ([`crate::telemetry::mask`]).

mod render;
mod send;
mod track;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::debug;

pub use send::NotifyMetrics;
pub use track::{Notice, NoticeCounts, State};

use crate::config::{Notify, NotifyEvent, SyncUnit};
use crate::sync::Report;
use crate::sync::outcome::{Cause, Observer, Outcome};

/// Notices queued for one notifier; more are dropped (counted).
pub const QUEUE: usize = 64;

/// The notifiers of a process, shared by every unit's [`Watch`]: the `[[notify]]` tables in
/// force and the queue of each one's task. Cheap to clone.
#[derive(Clone, Default)]
pub struct Notifications {
    /// The notifiers in force, swapped whole by [`Notifications::configure`].
    current: Arc<Mutex<Arc<Workers>>>,
    /// Every task started, for [`Notifications::flush`].
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    metrics: NotifyMetrics,
}

/// The notifiers of one config.
#[derive(Default)]
struct Workers {
    config: Vec<Notify>,
    queues: Vec<tokio::sync::mpsc::Sender<Notice>>,
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
            let (tx, task) = send::spawn(index, notify.clone(), self.metrics.clone());
            queues.push(tx);
            tasks.push(task);
        }
        *current = Arc::new(Workers { config: config.to_vec(), queues });
    }

    /// The observer of `unit`'s syncs.
    pub fn watch(&self, unit: &SyncUnit) -> Watch {
        Watch {
            unit: unit.name.clone(),
            cluster: unit.cluster.clone(),
            repo: unit.repo.clone(),
            tracker: track::Tracker::default(),
            notifications: self.clone(),
        }
    }

    /// Queues `notice` for every notifier that wants it.
    fn send(&self, notice: &Notice) {
        let workers = self.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (index, (notify, queue)) in workers.config.iter().zip(&workers.queues).enumerate() {
            if !wants(notify, notice) {
                continue;
            }
            if queue.try_send(notice.clone()).is_err() {
                self.metrics.dropped(index, notify.kind);
                debug!(unit = %notice.unit, notifier = %send::label(index), "notification queue full: a notice was dropped");
            }
        }
    }

    /// Ends the notifiers and waits until what they queued is sent, at most `bound` (then
    /// leaves the rest): `gitward sync` before it exits.
    pub async fn flush(self, bound: Duration) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Arc::default();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        if tokio::time::timeout(bound, futures::future::join_all(tasks)).await.is_err() {
            debug!("notifications still queued at exit were not sent");
        }
    }
}

/// Whether `notify` is told of `notice`: its unit and event are wanted (`applied` wants the
/// success of a recovering revision too); webhooks and Slack are not told of `pending`.
fn wants(notify: &Notify, notice: &Notice) -> bool {
    if notice.state == State::Pending && !notify.kind.is_forge() {
        return false;
    }
    notify.wants(&notice.unit, notice.event)
        || (notice.event == NotifyEvent::Recovered && notify.wants(&notice.unit, NotifyEvent::Applied))
}

/// The observer of one unit's syncs ([`Notifications::watch`]): its transitions, queued.
pub struct Watch {
    unit: String,
    cluster: String,
    repo: String,
    tracker: track::Tracker,
    notifications: Notifications,
}

impl Observer for Watch {
    fn applied(&mut self, cause: &Cause, report: &Report, _tracked: usize) {
        if let Some(notice) = self.tracker.applied(cause, report) {
            self.notifications.send(&self.complete(notice));
        }
    }

    fn finished(&mut self, outcome: &Outcome) {
        if let Some(notice) = self.tracker.finished(outcome) {
            self.notifications.send(&self.complete(notice));
        }
    }
}

impl Watch {
    fn complete(&self, notice: Notice) -> Notice {
        Notice { unit: self.unit.clone(), cluster: self.cluster.clone(), repo: self.repo.clone(), ..notice }
    }
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
