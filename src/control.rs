//! `gitward suspend`, `gitward resume` and `gitward reconcile`: the controls a person sets on a
//! unit's ApplySet parent for the running daemon — any replica, whichever runs the unit — to
//! act on ([`crate::cluster::inventory::control`]), as `flux suspend`, `flux resume` and
//! `flux reconcile` do through Flux's objects. The daemon sees them through its watch of the
//! parent; these commands only write them, and `reconcile` reads the parent until the daemon
//! records that it handled the request.

use std::time::Duration;

use crate::cluster::agent;
use crate::cluster::inventory::Inventory;
use crate::config::SyncUnit;
use crate::status::{self, UnitState};

/// Errors of the control commands. Worth retrying those from the API server; the others
/// need the unit synced once or resumed first.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The parent could not be read or written (it may not exist: the unit never synced).
    #[error(transparent)]
    Cluster(#[from] crate::cluster::Error),
    /// Reading the unit's state after its sync failed.
    #[error(transparent)]
    Status(#[from] status::Error),
    /// `reconcile` of a unit that has no ApplySet parent: no daemon synced it yet.
    #[error("unit {unit}: not synced yet (its ApplySet parent does not exist)")]
    NotSynced {
        /// The unit.
        unit: String,
    },
    /// `reconcile` of a suspended unit, which the daemon would not act on.
    #[error("unit {unit}: suspended (by {by}); `gitward resume {unit}` first")]
    Suspended {
        /// The unit.
        unit: String,
        /// Who suspended it (`config` for `suspend = true`).
        by: String,
    },
    /// The daemon took the request while a health wait of the unit runs: the sync runs once
    /// that wait ends (at most the unit's `health_timeout`), after `reconcile` stopped waiting.
    #[error("unit {unit}: the sync request is queued behind a health wait{waiting}, not handled within {}s; it runs when that wait ends", after.as_secs())]
    QueuedBehindWait {
        /// The unit.
        unit: String,
        /// How long `reconcile` waited.
        after: Duration,
        /// Empty, or ` (since <time>, for <objects>)`: the wait as the parent records it.
        waiting: String,
    },
    /// No daemon handled the request in time.
    #[error("unit {unit}: no daemon handled the sync request within {}s", after.as_secs())]
    TimedOut {
        /// The unit.
        unit: String,
        /// How long `reconcile` waited.
        after: Duration,
    },
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// Who runs the command, for `gitward.dev/suspended-by`: `<user>@<host name>`, the user being
/// `$USER`, else `$LOGNAME`, else the numeric `uid:<n>` (a container's user often has neither
/// variable nor a passwd entry); the host `unknown` when it cannot be read.
pub fn who() -> String {
    let named = ["USER", "LOGNAME"].into_iter().find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()));
    // SAFETY: getuid(2) cannot fail and touches no memory of ours.
    let user = named.unwrap_or_else(|| format!("uid:{}", unsafe { libc::getuid() }));
    format!("{user}@{}", agent::hostname().unwrap_or_else(|| "unknown".to_owned()))
}

/// Whether `unit` is suspended, by its config or its parent (a parent that cannot be read
/// counts as not suspended).
pub async fn is_suspended(client: &kube::Client, unit: &SyncUnit) -> bool {
    let inventory = Inventory::new(&unit.inventory);
    unit.suspend || inventory.control(client).await.ok().flatten().is_some_and(|c| c.suspended)
}

/// Makes the one unit of `units` sync `revision` (a commit SHA, tag or branch) instead of its
/// ref, for `gitward sync --revision`; `one`: one unit was named.
///
/// Errors: a message when not exactly one unit was named, or when it is a chart or OCI
/// artifact unit (whose version is in its config, not a git revision).
pub fn pin_revision(units: &mut [SyncUnit], revision: &str, one: bool) -> std::result::Result<(), String> {
    let [unit] = units else { return Err("--revision needs one unit: --sync NAME or NAME".to_owned()) };
    if !one {
        return Err("--revision needs one unit: --sync NAME or NAME".to_owned());
    }
    if unit.helm.chart.is_some() || unit.repo.starts_with("oci://") {
        return Err(format!(
            "unit {}: --revision needs a git unit (a chart or OCI artifact unit names its version in the config)",
            unit.name
        ));
    }
    unit.reference = revision.to_owned();
    Ok(())
}

/// Suspends `unit` ([`suspend`]) or resumes it ([`resume`]); what it did, as
/// `gitward suspend` and `resume` print it: `suspended`, `resumed`, or `resumed (still
/// suspended by its config)`.
///
/// Errors: as [`suspend`].
pub async fn set_suspended(client: &kube::Client, unit: &SyncUnit, suspended: bool) -> Result<&'static str> {
    if suspended {
        suspend(client, unit).await?;
        return Ok("suspended");
    }
    resume(client, unit).await?;
    Ok(if unit.suspend { "resumed (still suspended by its config)" } else { "resumed" })
}

/// Suspends `unit` (`gitward.dev/suspended` on its parent, with [`who`] and now).
///
/// Errors: [`Error::Cluster`] (the parent missing or not writable).
pub async fn suspend(client: &kube::Client, unit: &SyncUnit) -> Result<()> {
    Ok(Inventory::new(&unit.inventory).suspend(client, &who()).await?)
}

/// Resumes `unit` (removes `gitward.dev/suspended` and who and when). A unit that
/// `suspend = true` suspends stays suspended: the config says so.
///
/// Errors: [`Error::Cluster`].
pub async fn resume(client: &kube::Client, unit: &SyncUnit) -> Result<()> {
    Ok(Inventory::new(&unit.inventory).resume(client).await?)
}

/// Asks the daemon to fetch and sync `unit` now: sets `gitward.dev/requested-at` to a new
/// token (the time now, RFC 3339 with nanoseconds), returned for [`wait_handled`].
///
/// Errors: [`Error::NotSynced`], [`Error::Suspended`] (by the parent or the config),
/// [`Error::Cluster`].
pub async fn request(client: &kube::Client, unit: &SyncUnit) -> Result<String> {
    let inventory = Inventory::new(&unit.inventory);
    let Some(control) = inventory.control(client).await? else {
        return Err(Error::NotSynced { unit: unit.name.clone() });
    };
    if control.suspended || unit.suspend {
        let by = if control.suspended { control.suspended_by.unwrap_or_default() } else { "config".to_owned() };
        return Err(Error::Suspended { unit: unit.name.clone(), by });
    }
    let token = jiff::Timestamp::now().to_string();
    inventory.request_sync(client, &token).await?;
    Ok(token)
}

/// Waits (reading the parent every second, at most `timeout`) until the daemon records that
/// it handled the request `token` (`gitward.dev/handled-at`), then reads the unit's state.
///
/// Errors: [`Error::QueuedBehindWait`] (the daemon took it while a health wait runs),
/// [`Error::TimedOut`], [`Error::Cluster`], [`Error::Status`].
pub async fn wait_handled(client: &kube::Client, unit: &SyncUnit, token: &str, timeout: Duration) -> Result<UnitState> {
    let inventory = Inventory::new(&unit.inventory);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let control = inventory.control(client).await?.unwrap_or_default();
        if control.handled_at.as_deref() == Some(token) {
            return Ok(status::unit_state(client, unit).await?);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(timed_out(client, unit, control, token, timeout).await);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Why the request `token` was not handled within `after`: queued behind a health wait when the
/// daemon said so on the parent ([`crate::cluster::inventory::control::QUEUED_AT`]), named with
/// the wait the parent records; else no daemon handled it.
async fn timed_out(
    client: &kube::Client,
    unit: &SyncUnit,
    control: crate::cluster::inventory::Control,
    token: &str,
    after: Duration,
) -> Error {
    if control.queued_at.as_deref() != Some(token) {
        return Error::TimedOut { unit: unit.name.clone(), after };
    }
    let state = status::unit_state(client, unit).await.ok();
    let waiting = state
        .and_then(|s| s.last)
        .and_then(|r| r.waiting)
        .map(|w| format!(" (since {}, for {})", w.since, w.objects))
        .unwrap_or_default();
    Error::QueuedBehindWait { unit: unit.name.clone(), after, waiting }
}

/// The exit code of `reconcile` for the state its sync left, as `gitward sync`'s: 0 applied
/// cleanly, 1 some objects were not applied (named in the attempt), 2 the sync failed as a
/// whole (an error recorded with no object named) or applied nothing.
pub fn exit_code(state: &UnitState) -> u8 {
    match (&state.last, &state.attempt.last_error) {
        (None, _) => 2,
        (Some(_), Some(_)) if state.attempt.failed.is_empty() => 2,
        (Some(_), Some(_)) => 1,
        (Some(_), None) if !state.attempt.failed.is_empty() => 1,
        (Some(_), None) => 0,
    }
}
