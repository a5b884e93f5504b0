//! Why a unit syncs: the [`Trigger`] sent to a unit's task, and the per-unit [`Status`] that
//! `/readyz`, `/metrics` and sd_notify read.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// What started a sync (DESIGN.md, Triggers). Also a metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TriggerKind {
    /// The first sync after start or leadership.
    Startup,
    /// The poll interval elapsed (fetch; sync only when the revision moved).
    Poll,
    /// A ref of a local repository changed on disk (a `git push` into it).
    Push,
    /// `POST /hooks/git` with a valid signature.
    Webhook,
    /// Someone else changed a member (self-heal).
    Drift,
    /// The periodic full resync.
    Resync,
    /// SIGHUP: config reloaded.
    Reload,
    /// A retry after a failed sync (exponential backoff).
    Retry,
}

impl TriggerKind {
    /// Lowercase name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Startup => "startup",
            TriggerKind::Poll => "poll",
            TriggerKind::Push => "push",
            TriggerKind::Webhook => "webhook",
            TriggerKind::Drift => "drift",
            TriggerKind::Resync => "resync",
            TriggerKind::Reload => "reload",
            TriggerKind::Retry => "retry",
        }
    }

    /// True for the triggers that only mean "git may have moved" (poll, and the ref watch of a
    /// local repository): they sync only when the fetched revision differs from the one last
    /// applied. One `git push` can raise more than one ref event; without this each would
    /// re-send every object. A webhook is an explicit request and syncs even the same revision,
    /// as do startup, drift, resync, reload and retry.
    pub fn needs_new_revision(self) -> bool {
        matches!(self, TriggerKind::Poll | TriggerKind::Push)
    }
}

impl fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request to sync one unit.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// What asked.
    pub kind: TriggerKind,
    /// When, for the `trigger_to_applied_ms` log field.
    pub at: Instant,
}

impl Trigger {
    /// A trigger of `kind`, now.
    pub fn now(kind: TriggerKind) -> Self {
        Self { kind, at: Instant::now() }
    }
}

/// What is known of one unit, for `/readyz`, `/metrics` and sd_notify.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitStatus {
    /// The unit has completed at least one sync attempt and its caches are synced.
    pub cache_synced: bool,
    /// Outcome of the last sync: `Some(true)` it ran to the end against an API server that
    /// answered (some objects may have failed: see `failed_objects`), `Some(false)` it failed
    /// as a whole (git, render, parse, the cluster unreachable), `None` none yet.
    pub last_sync_ok: Option<bool>,
    /// Objects the last sync could not apply (rejected by the API server, RBAC or an admission
    /// webhook). They are logged, counted in metrics and shown in `STATUS=`; they do not make
    /// the unit unready: a pod taken out of its Service would miss the webhook of the fix.
    pub failed_objects: usize,
    /// The revision last applied.
    pub last_revision: Option<String>,
    /// Members in the unit's inventory.
    pub tracked_objects: usize,
    /// The objects the last sync changed, by health at the end of its wait; `None` while the
    /// wait runs or when none ran. Shown in sd_notify `STATUS=`; `/readyz` does not follow it
    /// (an application that does not become healthy is not a reason to restart gitward).
    pub health: Option<crate::health::Counts>,
    /// A health wait is running (sd_notify `STATUS=` says `waiting for health`).
    pub waiting: bool,
    /// A sync of the unit has run to the end against an API server that answered
    /// (`last_sync_ok` was `Some(true)`) at least once since its task started; it stays true.
    /// `READY=1` waits for this of every unit, so a daemon whose syncs all failed (the cluster
    /// unreachable) does not say it is ready.
    pub applied_once: bool,
}

/// Status of every unit, shared between unit tasks and the HTTP server; and whether this
/// replica is standing by for leadership.
#[derive(Debug, Clone, Default)]
pub struct Status(Arc<RwLock<BTreeMap<String, UnitStatus>>>, Arc<AtomicBool>);

impl Status {
    /// Marks this replica as standing by (leader election on, not the leader) or not.
    pub fn set_standby(&self, standby: bool) {
        self.1.store(standby, Ordering::SeqCst);
    }

    /// True while this replica stands by for leadership: it applies nothing, counts as ready
    /// (so a rolling update can bring it up while another replica leads), and refuses webhooks
    /// with 503 so the sender knows to retry.
    pub fn standby(&self) -> bool {
        self.1.load(Ordering::SeqCst)
    }

    /// Replaces the status of `unit`.
    pub fn set(&self, unit: &str, status: UnitStatus) {
        self.0.write().expect("status lock").insert(unit.to_string(), status);
    }

    /// Forgets units not in `names` (after a reload).
    pub fn retain(&self, names: &[String]) {
        self.0.write().expect("status lock").retain(|k, _| names.contains(k));
    }

    /// A copy of all units' status.
    pub fn snapshot(&self) -> BTreeMap<String, UnitStatus> {
        self.0.read().expect("status lock").clone()
    }

    /// Ready: standing by for leadership, or at least one unit and every unit's cache synced
    /// and its last sync not failed as a whole (failed objects alone do not count; see
    /// [`UnitStatus::failed_objects`]).
    pub fn ready(&self) -> bool {
        super::decide::readyz(self.standby(), &self.0.read().expect("status lock"))
    }
}
