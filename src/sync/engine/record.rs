//! What the ApplySet parent records, as the daemon and the CLI ask for it: each a verb of the
//! parent ([`crate::sync::parent`]) given the cluster view and the hooks' record it carries.

use std::time::{Instant, SystemTime};

use super::Engine;
use crate::cluster::inventory::Control;
use crate::health::record::SyncResult;
use crate::health::wait::HealthWait;
use crate::source::Revision;
use crate::sync::outcome::Failure;
use crate::sync::{Report, Result};

impl Engine {
    /// Fetches for a sync (the daemon's: [`crate::sync::repo::Repo::fetch_since`] with `not_before`, the
    /// instant of the event that asked for it). A sync begins here: until it resolves a
    /// revision, a failure attempted none ([`Engine::record_failure`] names the ref).
    ///
    /// Errors: those of [`crate::sync::repo::Repo::fetch_since`].
    pub async fn fetch_since(&mut self, not_before: Instant) -> Result<Revision> {
        self.parent.begin_attempt(None);
        self.loader.fetch_since(not_before).await
    }

    /// Marks the sync about to run as the answer to the sync request `token`
    /// ([`crate::cluster::inventory::control::REQUESTED_AT`]): its final record (the result
    /// after its health wait, or its failure) writes it as handled
    /// ([`crate::cluster::inventory::control::HANDLED_AT`]), even when nothing else changed.
    pub fn answer_request(&mut self, token: String) {
        self.parent.answer_request(token);
    }

    /// The revision the sync in progress (or the last one) attempts, once its fetch resolved
    /// one; `None` when a fetch failed before that. What a sync that failed as a whole tried.
    pub fn attempted(&self) -> Option<&Revision> {
        self.parent.attempted()
    }

    /// How many members the unit's ApplySet parent records (its members record, as the engine
    /// last read or wrote it): what `gitward_tracked_objects` counts. `None` before the engine
    /// has read or written the parent.
    pub fn recorded_members(&self) -> Option<usize> {
        self.parent.recorded_members()
    }

    /// The controls on the unit's ApplySet parent as its watch sees them
    /// ([`crate::cluster::inventory::ParentWatch::control`]); starts the watch if none runs.
    pub fn control(&mut self) -> tokio::sync::watch::Receiver<Option<Control>> {
        self.parent.control(&self.view)
    }

    /// The controls on the unit's ApplySet parent by one metadata GET (none for a parent that
    /// does not exist), for when its watch has not listed yet.
    ///
    /// Errors: [`crate::sync::Error::Cluster`] when the parent cannot be read.
    pub async fn read_control(&self) -> Result<Control> {
        self.parent.read_control(&self.view).await
    }

    /// Notes on the ApplySet parent that the sync request `token` waits for the unit's running
    /// health wait ([`crate::cluster::inventory::control::QUEUED_AT`], which `gitward
    /// reconcile` reads): a future that owns what it needs, to run beside the unit's loop.
    ///
    /// Errors: [`crate::sync::Error::Cluster`] when the parent cannot be written.
    pub fn note_request_queued(&self, token: String) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        self.parent.note_request_queued(&self.view, token)
    }

    /// Records `result` for `revision` on the ApplySet parent ([`crate::health::record`]),
    /// keeping the recorded attempt: one server-side apply of the parent, and only when the
    /// revision or the result differs from what it records. Returns whether it wrote.
    ///
    /// Errors: [`crate::sync::Error::Cluster`] when the parent cannot be read or written.
    pub async fn record(&mut self, revision: &Revision, result: SyncResult) -> Result<bool> {
        self.parent.record(&self.view, &mut self.hooks, revision, result).await
    }

    /// Records a sync's `report` with `result` and its attempt
    /// (`crate::sync::parent::ApplySetParent::record_sync`); `judged` false when no wait judged
    /// the unit. Returns whether it wrote.
    ///
    /// Errors: as [`Engine::record`].
    pub async fn record_sync(&mut self, report: &Report, result: SyncResult, judged: bool) -> Result<bool> {
        self.parent.record_sync(&self.view, &mut self.hooks, report, result, judged).await
    }

    /// Records, with the apply of `report`'s revision and before `wait` runs, the wait in
    /// progress, so that `gitward status` names the revision while its health is waited on.
    /// Returns whether it wrote.
    ///
    /// Errors: as [`Engine::record`].
    pub async fn record_waiting(&mut self, report: &Report, wait: &HealthWait) -> Result<bool> {
        self.parent.record_waiting(&self.view, &mut self.hooks, report, wait).await
    }

    /// Records that the sync in progress failed as a whole with `failure`, and with `retry_at`
    /// the daemon's next try (`crate::sync::parent::ApplySetParent::record_failure`). Returns
    /// whether it wrote.
    ///
    /// Errors: as [`Engine::record`].
    pub async fn record_failure(&mut self, failure: &Failure, retry_at: Option<SystemTime>) -> Result<bool> {
        self.parent.record_failure(&self.view, &mut self.hooks, failure, retry_at).await
    }
}
