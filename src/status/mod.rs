//! `gitward status`: what each unit applied, when, with what result, what it last attempted
//! and why that failed, and the health of what it manages — read from the cluster alone, so it
//! needs no running daemon.
//!
//! Per unit: one metadata GET of the ApplySet parent (its `gitward.dev/last-*` record and
//! attempt, [`crate::health::record`], its group-kinds and its record of members), then one
//! list per group-kind selected by `applyset.kubernetes.io/part-of=<id>`: metadata only for
//! kinds without health, full objects in pages for health-bearing kinds
//! ([`crate::health::bears_health`]), judged by [`crate::health::status`]
//! ([`crate::health::survey`]). A recorded member that no list returns is `NotCreated` when the
//! last attempt recorded a failure for it (`gitward.dev/last-failed`: its create was refused),
//! else `Missing`.
//!
//! The report's types are here; its parts by role: `read` (a unit's state read from its
//! ApplySet parent and live members), `depends` (each `depends_on` unit judged from its own
//! record) and `render` (the stdout line, the text and JSON reports, the sandbox line).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::health::record::{Attempt, NotApplied, Record, SyncResult};
use crate::health::{Counts, Health, survey};

mod depends;
mod read;
mod render;

pub use depends::{DependencyState, dependencies, unmet};
pub use read::unit_state;
pub use render::{line, render_json, render_text, sandbox};

/// Errors reading a unit's state. Worth retrying: they come from the API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The parent could not be read, or discovery of a member kind failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::Error),
    /// Listing the members of one group-kind failed (RBAC, API server down).
    #[error("{group_kind}: listing members failed")]
    ListFailed {
        /// `Kind.group` being listed.
        group_kind: String,
        /// What the API server said.
        source: kube::Error,
    },
}

impl From<survey::Error> for Error {
    fn from(e: survey::Error) -> Self {
        Error::ListFailed { group_kind: e.group_kind, source: e.source }
    }
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// The state of a member that is not `Current`: its kstatus health, `NotCreated` — recorded in
/// the parent, not in the cluster, and the last attempt failed or skipped it — or `Missing` —
/// recorded in the parent, not in the cluster, with no failure recorded (deleted by hand, or
/// its kind no longer served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberHealth {
    /// The member exists; its health by the kstatus rules.
    Is(Health),
    /// The member does not exist, and the last attempt recorded why it could not make it.
    NotCreated,
    /// The member does not exist.
    Missing,
}

impl MemberHealth {
    /// The name printed: a [`Health`] name, `NotCreated` or `Missing`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberHealth::Is(h) => h.as_str(),
            MemberHealth::NotCreated => "NotCreated",
            MemberHealth::Missing => "Missing",
        }
    }
}

impl fmt::Display for MemberHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for MemberHealth {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One member that is not `Current`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unhealthy {
    /// `Kind/ns/name`.
    pub object: String,
    /// Its health, or `Missing`.
    pub health: MemberHealth,
    /// The rule's reason (`ProgressDeadlineExceeded`, `JobFailed`, a condition's reason;
    /// `NotFound` for a missing member; empty for one not created).
    pub reason: String,
    /// The rule's or the controller's message; for a member not created, the failure the
    /// last attempt recorded for it.
    pub message: String,
}

/// What `gitward status` reports of one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitState {
    /// The unit's name.
    pub unit: String,
    /// The ApplySet parent, `Kind/ns/name`.
    pub parent: String,
    /// The ApplySet id (KEP-3659): the value of every member's `applyset.kubernetes.io/part-of`.
    pub applyset_id: String,
    /// A `kubectl get` command that lists the unit's members of every kind it holds
    /// (`kubectl get configmaps,deployments.apps -A -l applyset.kubernetes.io/part-of=<id>`);
    /// `None` while the parent records no kind.
    pub selector: Option<String>,
    /// The last recorded sync; `None` when the parent does not exist or records none.
    pub last: Option<Record>,
    /// The last attempt as the parent records it; flattened into the JSON.
    #[serde(flatten)]
    pub attempt: LastAttempt,
    /// The members as the cluster holds them now; flattened into the JSON.
    #[serde(flatten)]
    pub members: LiveMembers,
    /// Set while the unit is suspended (`gitward suspend`, `suspend = true`): the daemon
    /// applies, prunes and heals nothing of it.
    pub suspended: Option<Suspended>,
    /// Each unit of its `depends_on`, judged from that unit's record ([`dependencies`]);
    /// empty until filled in by the caller, or without `depends_on`.
    pub dependencies: Vec<DependencyState>,
}

/// A unit's last attempt, as its parent records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LastAttempt {
    /// The revision last attempted, applied or not (`gitward.dev/last-attempted-revision`).
    pub last_attempted_revision: Option<String>,
    /// The ref last attempted when it resolved to no revision — not found, or the fetch failed
    /// (`gitward.dev/last-attempted-ref`); `last_attempted_revision` is then `None`.
    pub last_attempted_ref: Option<String>,
    /// Why the last attempt did not apply cleanly (`gitward.dev/last-error`): a revision that
    /// does not parse, a refused prune, objects that failed.
    pub last_error: Option<String>,
    /// The objects the last attempt failed or skipped, with the reasons.
    pub failed: Vec<NotApplied>,
    /// When the daemon, backing off after the failed attempt, tries again
    /// (`gitward.dev/retry-at`, RFC 3339 UTC); `None` when no retry is scheduled.
    pub retry_at: Option<String>,
}

/// A unit's recorded members, as the cluster holds them now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveMembers {
    /// Members by kind (`Deployment` → 2).
    pub objects: BTreeMap<String, usize>,
    /// Members by health bucket (members of kinds without health count as healthy).
    pub health: Counts,
    /// Recorded members not in the cluster.
    pub missing: usize,
    /// Members that are not `Current` (or missing), with their reason.
    pub unhealthy: Vec<Unhealthy>,
}

/// Who suspended a unit, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suspended {
    /// `user@host` of `gitward suspend` (`gitward.dev/suspended-by`), or `config` for
    /// `suspend = true`.
    pub by: String,
    /// When (RFC 3339, `gitward.dev/suspended-at`); `None` for `suspend = true`.
    pub at: Option<String>,
}

impl UnitState {
    /// True when a revision was applied without failed objects, the last attempt left no
    /// error, no health wait runs, and every member is present and `Current` now (exit 0 of
    /// `gitward status`): [`UnitState::now`] is `healthy`.
    pub fn healthy(&self) -> bool {
        self.now() == "healthy"
    }

    /// The unit's state now, the first word of its [`line()`], in this order: `never applied`;
    /// `failed` (the last attempt did not apply cleanly, or objects failed); `degraded` (a
    /// member is `Failed` now); `waiting` (the parent records a health wait in progress);
    /// `progressing` (a member is not `Current`, or missing); else `healthy`. Live health
    /// wins over the recorded result, which `gitward status` prints below it.
    pub fn now(&self) -> &'static str {
        let Some(last) = &self.last else { return "never applied" };
        if last.result == SyncResult::Failed || self.attempt.last_error.is_some() {
            "failed"
        } else if self.members.health.degraded > 0 {
            "degraded"
        } else if last.waiting.is_some() {
            "waiting"
        } else if !self.members.unhealthy.is_empty() {
            "progressing"
        } else {
            "healthy"
        }
    }

    /// What was last attempted, as printed: the revision, or `ref <name> (not resolved)`.
    fn attempted(&self) -> Option<String> {
        let attempt = Attempt {
            revision: self.attempt.last_attempted_revision.clone(),
            reference: self.attempt.last_attempted_ref.clone(),
            ..Attempt::default()
        };
        attempt.attempted()
    }
}

#[cfg(test)]
mod tests;
