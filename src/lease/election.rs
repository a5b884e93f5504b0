//! Leader election over a `coordination.k8s.io/v1` Lease, so that of several replicas only one
//! applies.
//!
//! The semantics are those of client-go's `tools/leaderelection` with a `LeaseLock`:
//!
//! - The Lease's `spec` is the election record: `holderIdentity` (the leader), `leaseDurationSeconds`
//!   (how long followers wait after the last renewal before taking over), `acquireTime` (when the
//!   current holder took it), `renewTime` (its last renewal) and `leaseTransitions` (how often the
//!   holder changed). Timestamps are `MicroTime`s.
//! - A candidate creates the Lease if it is missing. It takes a held Lease only when it is free
//!   (empty `holderIdentity`, as [`release`] leaves it) or expired. Expiry is judged as client-go
//!   judges it: by the candidate's own monotonic clock — the record must not have changed for
//!   `leaseDurationSeconds` since this candidate first saw it as it is now — not by comparing the
//!   holder's `renewTime` with the local wall clock, so clock skew between machines can never make
//!   a candidate take a Lease that is still being renewed.
//! - Every write is a `replace` carrying the `resourceVersion` that was read (optimistic locking).
//!   A 409 Conflict means someone else wrote: the record is read again and never overwritten
//!   blindly.
//! - The leader renews every `renew_every`. It steps down — publishes `false` — as soon as it has
//!   not renewed within its *renew deadline* (see [`LeaderConfig::renew_deadline`]), which ends
//!   strictly before `lease_duration` has passed since the start of its last successful renewal.
//!   No other candidate can take over before then, so a leader that says `true` is the only one.
//!
//! - The holder writes this process's nonce ([`super::member::process_nonce`]) on the Lease
//!   (annotation [`super::member::HOLDER_NONCE_ANNOTATION`]) and counts a Lease naming its
//!   identity as its own only when the nonce is its own: two processes given one identity (a
//!   shared config, a `$POD_NAME` reused) never both lead; the second waits as for any holder.
//! - The Lease's deadline itself — `valid_until`, the start of the last successful renewal
//!   plus `lease_duration`, by `CLOCK_BOOTTIME` — is published on a
//!   [`Fence`] ([`Leadership::fence`]) with the margin
//!   `lease_duration − renew_deadline`, so the clients of what runs under the Lease refuse
//!   writes from the renew deadline on, request by request, whatever their tasks are doing;
//!   stepping down or the loop ending closes it.
//!
//! [`spawn`] runs the loop as a task and hands back a [`Leadership`] handle; the daemon applies
//! only while [`Leadership::is_leader`] is true. On shutdown, stop the task and call [`release`]
//! so that another replica takes over at once instead of after the Lease expires.

mod elector;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::{Instant, timeout};
use tracing::{info, warn};

use super::member::{HOLDER_NONCE_ANNOTATION, holder_nonce, process_nonce};
use crate::cluster::fence::Fence;
use crate::telemetry::error_chain;
use elector::Elector;

/// Why a Lease request failed. Never returned to callers of [`spawn`] or [`release`]: the
/// election loop logs it and retries on its next round (after `renew_every`, sooner while the
/// leader's renew deadline runs); [`release`] logs it and gives up. Public for
/// [`LeaderConfig::validate`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request (RBAC forbidden, unreachable, server error).
    #[error("{lease}: {verb} failed")]
    Request {
        /// The Lease, as `Lease/<namespace>/<name>`.
        lease: String,
        /// The request: `get`, `create` or `replace`.
        verb: &'static str,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// A request did not complete within its time bound.
    #[error("{lease}: {verb} timed out after {after:?}")]
    Timeout {
        /// The Lease, as `Lease/<namespace>/<name>`.
        lease: String,
        /// The request, or `renew` for a whole renewal.
        verb: &'static str,
        /// The bound that passed.
        after: Duration,
    },
    /// Another writer changed the Lease between our read and our write (HTTP 409), twice in a
    /// row, while we still held it.
    #[error("{lease}: conflicting writes")]
    Conflict {
        /// The Lease, as `Lease/<namespace>/<name>`.
        lease: String,
    },
    /// The config cannot give safe leader election (see [`LeaderConfig::validate`]).
    #[error("leader election: {0}")]
    InvalidConfig(String),
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// Who competes for which Lease, and its timing.
///
/// The defaults match client-go's usual `LeaseDuration` (15 s) and give the leader a
/// client-go-like renew deadline of 10 s. Invalid values are rejected by [`Self::validate`];
/// [`spawn`] repairs them instead (see there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderConfig {
    /// The namespace of the Lease; the candidates' RBAC must allow `get`, `create` and `update`
    /// of Leases there. In-cluster: `gitward-system`.
    pub namespace: String,
    /// The Lease's name, the same for every replica that competes. Default: `"gitward"`.
    pub name: String,
    /// This candidate, written to `holderIdentity`: unique per process, so that two processes
    /// never both believe they hold the Lease. Default: [`default_identity`].
    pub identity: String,
    /// How long followers wait, after the last renewal they saw, before they take over; written
    /// to `leaseDurationSeconds`, rounded up to whole seconds. At least 1 s. Default: 15 s — the
    /// longest a crashed leader's replicas wait.
    pub lease_duration: Duration,
    /// How often the leader renews and followers poll the Lease; more than zero and less than
    /// `lease_duration`. Default: 5 s — three renewals per lease duration, so one or two failed
    /// requests do not cost leadership.
    pub renew_every: Duration,
}

impl LeaderConfig {
    /// The default Lease name.
    pub const DEFAULT_NAME: &'static str = "gitward";
    /// The default lease duration (client-go's customary `LeaseDuration`).
    pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
    /// The default renewal period.
    pub const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(5);

    /// A config for the Lease `gitward` in `namespace`, with [`default_identity`] and the
    /// default durations.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: Self::DEFAULT_NAME.to_string(),
            identity: default_identity(),
            lease_duration: Self::DEFAULT_LEASE_DURATION,
            renew_every: Self::DEFAULT_RENEW_EVERY,
        }
    }

    /// Checks that names are not empty, `lease_duration` is at least 1 s (the Lease counts whole
    /// seconds) and `0 < renew_every < lease_duration`.
    ///
    /// Errors: [`Error::InvalidConfig`] naming the first offending field.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidConfig(msg));
        if self.namespace.is_empty() || self.name.is_empty() || self.identity.is_empty() {
            return bad("namespace, name and identity must not be empty".into());
        }
        if self.lease_duration < Duration::from_secs(1) {
            return bad(format!("lease_duration {:?} is less than 1s", self.lease_duration));
        }
        if self.renew_every.is_zero() || self.renew_every >= self.lease_duration {
            return bad(format!(
                "renew_every {:?} must be more than zero and less than lease_duration {:?}",
                self.renew_every, self.lease_duration
            ));
        }
        Ok(())
    }

    /// How long after the start of its last successful renewal the leader may still act: the
    /// larger of `2/3 × lease_duration` (client-go's default `RenewDeadline` : `LeaseDuration`
    /// ratio, 10 s : 15 s) and the midpoint of `renew_every` and `lease_duration` (so a renewal
    /// always has time to complete). Always less than `lease_duration`; the gap absorbs
    /// differences between the machines' clock rates and the time a holder needs to notice.
    pub fn renew_deadline(&self) -> Duration {
        let two_thirds = self.lease_duration * 2 / 3;
        let midpoint = (self.renew_every + self.lease_duration) / 2;
        two_thirds.max(midpoint)
    }

    /// `lease_duration` in whole seconds, rounded up, for `leaseDurationSeconds`: followers must
    /// never wait less than the leader assumes they do.
    fn lease_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }

    /// A config [`validate`](Self::validate) accepts, changing as little as possible: empty
    /// names take their defaults, `lease_duration` is raised to 1 s and `renew_every` lowered to
    /// a third of it.
    fn repaired(mut self) -> Self {
        if self.namespace.is_empty() {
            self.namespace = "default".into();
        }
        if self.name.is_empty() {
            self.name = Self::DEFAULT_NAME.into();
        }
        if self.identity.is_empty() {
            self.identity = default_identity();
        }
        self.lease_duration = self.lease_duration.max(Duration::from_secs(1));
        if self.renew_every.is_zero() || self.renew_every >= self.lease_duration {
            self.renew_every = self.lease_duration / 3;
        }
        self
    }

    /// The Lease as `Lease/<namespace>/<name>`, for logs and errors.
    fn lease_ref(&self) -> String {
        format!("Lease/{}/{}", self.namespace, self.name)
    }
}

/// A candidate identity unique per process: `<base>_<8 hex digits>`, where `<base>` is `$POD_NAME`
/// if set (the Deployment passes it through the downward API), else the host name, else
/// `gitward`. The random suffix keeps two processes on one host — or a restarted container in
/// the same Pod — from sharing an identity: a shared identity would let both think they lead.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(hostname)
        .unwrap_or_else(|| "gitward".to_string());
    format!("{}_{:08x}", base.trim(), rand::random::<u32>())
}

/// The kernel's host name, if readable.
pub(crate) fn hostname() -> Option<String> {
    crate::cluster::agent::hostname()
}

/// A handle on the election's outcome, like a `watch::Receiver<bool>`: cheap to clone, every
/// clone sees the same state.
///
/// It says `false` from the start until the Lease is acquired, and again as soon as the loop
/// steps down — or when the loop has ended (its task aborted, or panicked), since then nobody
/// renews the Lease.
#[derive(Debug, Clone)]
pub struct Leadership {
    /// The state the loop publishes; its sender lives in the loop's task.
    rx: watch::Receiver<bool>,
    /// The Lease's deadline, published by the loop.
    fence: Fence,
}

impl Leadership {
    /// True while this candidate holds the Lease and its deadline less the margin has not
    /// passed. Check it before each apply; writes already under way are refused by the
    /// clients that [`Self::fence`] guards.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow() && !self.has_ended() && self.fence.admits()
    }

    /// The fence of this Lease: give it to the clients of whatever runs only while this
    /// candidate leads ([`crate::cluster::registry::Registry::fenced_client`]).
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// True when the election loop has ended (never true while it runs).
    pub fn has_ended(&self) -> bool {
        self.rx.has_changed().is_err()
    }

    /// Waits until the state changes, like `watch::Receiver::changed`: `Ok(())` when it did
    /// (read it with [`Self::is_leader`]; the change is then marked seen), `Err` once the loop
    /// has ended — treat that as leadership lost for good.
    pub async fn changed(&mut self) -> std::result::Result<(), watch::error::RecvError> {
        self.rx.changed().await
    }

    /// Waits until this candidate is leader; returns at once if it is. Returns `false` if the
    /// loop ended first.
    pub async fn until_leader(&mut self) -> bool {
        self.rx.wait_for(|leader| *leader).await.is_ok()
    }
}

/// Starts the election loop for `cfg` on the current tokio runtime.
///
/// Returns the [`Leadership`] handle and the loop's task. The loop runs until the task is
/// aborted or every `Leadership` clone has been dropped; it never ends on its own, and it never
/// releases the Lease (call [`release`] after stopping it). Aborting the task while leader
/// leaves the Lease held until it expires — exactly what a crash does.
///
/// An invalid `cfg` (see [`LeaderConfig::validate`]) is repaired with a warning rather than
/// refused: empty names take their defaults, `lease_duration` is raised to 1 s, `renew_every`
/// lowered to a third of it. Reject bad config earlier with `validate`. ([`release`] uses the
/// config as given, so give it a valid one.)
///
/// Panics outside a tokio runtime (it calls `tokio::spawn`).
pub fn spawn(client: kube::Client, cfg: LeaderConfig) -> (Leadership, tokio::task::JoinHandle<()>) {
    spawn_seen(client, cfg, None)
}

/// A Lease record as the caller saw it and when, by the monotonic clock: what a candidate
/// needs to judge expiry (see the module doc) without watching the Lease itself first.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The Lease's `spec` as read (from a watch, a list or a get).
    pub spec: LeaseSpec,
    /// When the caller first saw `spec` exactly like this.
    pub at: Instant,
}

/// [`spawn`] for a candidate that has already been watching the Lease: `seen` starts its
/// expiry judgement, so a Lease whose record has not changed for `leaseDurationSeconds` since
/// `seen.at` is taken at the first round instead of after another lease duration of
/// watching. Sharding uses it to take a dead replica's unit Leases at once
/// (`super::shard`). The safety argument is unchanged: expiry is still judged by this
/// process's own clock from a record it saw, never from the holder's `renewTime`.
pub fn spawn_seen(
    client: kube::Client,
    cfg: LeaderConfig,
    seen: Option<Seen>,
) -> (Leadership, tokio::task::JoinHandle<()>) {
    if let Err(e) = cfg.validate() {
        warn!(error = %e, "leader election config repaired");
    }
    let cfg = cfg.repaired();
    let (tx, rx) = watch::channel(false);
    let fence = Fence::new(cfg.lease_ref());
    let api = Api::namespaced(client, &cfg.namespace);
    let elector = Elector::new(api, cfg, tx, fence.clone(), seen);
    (Leadership { rx, fence }, tokio::spawn(elector.run()))
}

/// Gives the Lease up, if `cfg.identity` holds it with this process's nonce (never another
/// process's that was given the same identity), so another candidate takes over at once:
/// clears `holderIdentity` and sets `leaseDurationSeconds` to 1 (as client-go's
/// `ReleaseOnCancel` does), with optimistic locking. Stop the loop of [`spawn`] first (abort its
/// task), or it re-acquires the Lease; and stop applying before calling this.
///
/// Returns `true` when it released the Lease, `false` when there was nothing to release (the
/// Lease is missing or someone else holds it) or the release failed. Best-effort, for shutdown:
/// a failure (RBAC, unreachable, a 409 because someone wrote in between, no answer within
/// `renew_every` but at least 2 s and at most `lease_duration` — short, so that a shutdown
/// fits systemd's and Kubernetes' stop timeouts) is logged as a warning and otherwise ignored;
/// the Lease then expires after `lease_duration`.
pub async fn release(client: kube::Client, cfg: LeaderConfig) -> bool {
    let lease = cfg.lease_ref();
    let bound = cfg.renew_every.max(Duration::from_secs(2)).min(cfg.lease_duration);
    let outcome = timeout(bound, try_release(client, &cfg, &lease)).await;
    match outcome.unwrap_or_else(|_| Err(Error::Timeout { lease: lease.clone(), verb: "release", after: bound })) {
        Ok(released) => {
            if released {
                info!(identity = %cfg.identity, lease = %lease, "leadership released");
            }
            released
        }
        Err(e) => {
            warn!(identity = %cfg.identity, lease = %lease, error = error_chain(&e), "lease release failed");
            false
        }
    }
}

/// The work of [`release`]: `Ok(true)` when released, `Ok(false)` when not ours.
async fn try_release(client: kube::Client, cfg: &LeaderConfig, lease: &str) -> Result<bool> {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let Some(mut current) = api.get_opt(&cfg.name).await.map_err(request(lease, "get"))? else {
        return Ok(false);
    };
    let nonce_ours = holder_nonce(&current) == process_nonce();
    let spec = current.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) || !nonce_ours {
        return Ok(false);
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    if let Some(annotations) = current.metadata.annotations.as_mut() {
        annotations.remove(HOLDER_NONCE_ANNOTATION);
    }
    spec.renew_time = Some(now());
    api.replace(&cfg.name, &PostParams::default(), &current).await.map_err(request(lease, "replace"))?;
    Ok(true)
}

/// The current time as a Lease timestamp.
fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Maps a client error to [`Error::Request`] for `lease` and `verb`.
fn request(lease: &str, verb: &'static str) -> impl FnOnce(kube::Error) -> Error {
    let lease = lease.to_string();
    move |source| Error::Request { lease, verb, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lease_ms: u64, renew_ms: u64) -> LeaderConfig {
        LeaderConfig {
            lease_duration: Duration::from_millis(lease_ms),
            renew_every: Duration::from_millis(renew_ms),
            ..LeaderConfig::new("ns")
        }
    }

    #[test]
    fn default_renew_deadline_is_client_go_ten_seconds() {
        assert_eq!(LeaderConfig::new("ns").renew_deadline(), Duration::from_secs(10));
    }

    #[test]
    fn renew_deadline_leaves_room_for_a_renewal_and_ends_before_the_lease() {
        for (lease, renew) in [(15_000, 5_000), (15_000, 14_000), (2_000, 500), (1_000, 999)] {
            let c = cfg(lease, renew);
            assert!(c.renew_deadline() > c.renew_every, "{lease}/{renew}");
            assert!(c.renew_deadline() < c.lease_duration, "{lease}/{renew}");
        }
    }

    #[test]
    fn lease_seconds_round_up() {
        assert_eq!(cfg(2_000, 500).lease_seconds(), 2);
        assert_eq!(cfg(2_001, 500).lease_seconds(), 3);
    }

    #[test]
    fn renew_period_not_below_lease_duration_is_invalid_and_repaired() {
        let c = cfg(2_000, 2_000);
        assert!(matches!(c.validate(), Err(Error::InvalidConfig(_))));
        let fixed = c.repaired();
        assert!(fixed.validate().is_ok());
        assert_eq!(fixed.renew_every, Duration::from_secs(2) / 3);
    }

    #[test]
    fn default_identity_is_unique_per_call() {
        assert_ne!(default_identity(), default_identity());
    }
}
