//! What one notification tells ([`Notice`]): a unit's revision and how its sync went, and the
//! commit status it sets ([`State`]). The observer of a unit's syncs that gives them is
//! `observe::notify`; here they are rendered and sent.

use crate::config::NotifyEvent;
use crate::telemetry::Masked;

/// A commit status's state, as the forges know it (GitHub and Gitea spell them `pending`,
/// `success`, `failure`; GitLab `running`, `success`, `failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The revision's objects were sent; its health is not yet judged.
    Pending,
    /// The revision applied and is healthy (or no wait ran).
    Success,
    /// The revision failed or is degraded, or its health wait timed out.
    Failure,
    /// The revision's health wait was cancelled before it was judged (a newer revision, a
    /// reload, shutdown): its `pending` status ends here, and a later judgement of the same
    /// revision is still told. GitHub and Gitea spell it `error`, GitLab `canceled`.
    Cancelled,
}

/// Object counts of a sync, as a notice carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct NoticeCounts {
    /// Created (adopted included).
    pub created: usize,
    /// Configured (drift corrected included).
    pub configured: usize,
    /// Pruned.
    pub pruned: usize,
    /// Unchanged.
    pub unchanged: usize,
    /// Not applied: failed, skipped, in conflict.
    pub failed: usize,
}

/// What one notification tells: a unit's revision and how its sync went.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The unit's name.
    pub unit: String,
    /// The cluster the unit applies to.
    pub cluster: String,
    /// The unit's repository URL (`repo`), where a forge's `owner/name` is read from.
    pub repo: String,
    /// The full revision: the 40-hex commit id of a git unit.
    pub revision: String,
    /// Which transition this is.
    pub event: NotifyEvent,
    /// The commit status it sets.
    pub state: State,
    /// The sync's result: `pending`, or as recorded on the parent (`failed`, `degraded`,
    /// `healthy`, `applied`).
    pub result: &'static str,
    /// The trigger that asked for the sync (`None` for `gitward sync`).
    pub trigger: Option<&'static str>,
    /// The object counts (zero for a sync that failed as a whole).
    pub counts: NoticeCounts,
    /// The first errors, masked: objects not applied, or why the sync failed as a whole.
    pub errors: Vec<Masked>,
    /// The first objects the health wait left not healthy, with their reason, masked.
    pub unhealthy: Vec<Masked>,
    /// When the transition was seen.
    pub time: jiff::Timestamp,
}
