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
//! [`spawn`] runs the loop as a task and hands back a [`Leadership`] handle; the daemon applies
//! only while [`Leadership::is_leader`] is true. On shutdown, stop the task and call [`release`]
//! so that another replica takes over at once instead of after the Lease expires.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tracing::{debug, info, warn};

use crate::cluster::is_status;
use crate::telemetry::error_chain;

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
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
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
}

impl Leadership {
    /// True while this candidate holds the Lease. Check it before each apply; an apply already
    /// in flight when it turns false is not interrupted by this module.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow() && !self.has_ended()
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
    let api = Api::namespaced(client, &cfg.namespace);
    let observed = seen.map(|seen| Observed { spec: seen.spec, at: seen.at });
    let elector = Elector { api, lease: cfg.lease_ref(), cfg, tx, observed, held: None, failures: 0 };
    (Leadership { rx }, tokio::spawn(elector.run()))
}

/// Gives the Lease up, if `cfg.identity` holds it, so another candidate takes over at once:
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
    let spec = current.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return Ok(false);
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
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

/// The election record as last seen, and when it was first seen like that.
struct Observed {
    /// The Lease's spec.
    spec: LeaseSpec,
    /// When this candidate first saw `spec` (monotonic clock): the start of the expiry wait.
    at: Instant,
}

/// Where the loop is.
enum State {
    /// Not holding the Lease: poll it and take it when free or expired.
    Follower,
    /// Holding the Lease (and having published `true`).
    Leader {
        /// After this instant the leader must not act: the renew deadline since the start of
        /// the last successful renewal.
        valid_until: Instant,
        /// When to send the next renewal.
        next_renew: Instant,
    },
}

/// Outcome of one renewal.
enum Renewal {
    /// Written; the write's request started at this instant.
    Renewed(Instant),
    /// The Lease is someone else's (or was deleted): the holder we read, if any.
    Lost(Option<String>),
}

/// The election loop's state machine (client-go's `LeaderElector`).
struct Elector {
    /// The Leases of `cfg.namespace`.
    api: Api<Lease>,
    /// `Lease/<namespace>/<name>` for logs.
    lease: String,
    /// The (repaired) config.
    cfg: LeaderConfig,
    /// Publishes the state to every [`Leadership`].
    tx: watch::Sender<bool>,
    /// The record as last seen, for the expiry judgement.
    observed: Option<Observed>,
    /// The Lease as last written by us while leader (its `resourceVersion` locks the renewal).
    held: Option<Lease>,
    /// Failed rounds in a row; only the first of a streak is a warning.
    failures: u32,
}

impl Elector {
    /// Runs rounds until every [`Leadership`] is gone.
    async fn run(mut self) {
        let mut state = State::Follower;
        let tx = self.tx.clone();
        loop {
            tokio::select! {
                () = tx.closed() => return,
                next = self.step(state) => state = next,
            }
        }
    }

    /// One round: wait as the state says, then try to acquire or renew.
    async fn step(&mut self, state: State) -> State {
        match state {
            State::Follower => self.follower_round().await,
            State::Leader { valid_until, next_renew } => self.leader_round(valid_until, next_renew).await,
        }
    }

    /// Tries to acquire; on success becomes leader, else waits `renew_every` (+ up to 20 %
    /// jitter, as client-go's `JitterFactor` 1.2, so candidates do not poll in step).
    async fn follower_round(&mut self) -> State {
        let bound = self.cfg.lease_duration;
        let attempt = timeout(bound, self.try_acquire()).await.unwrap_or_else(|_| Err(self.timeout("acquire", bound)));
        match attempt {
            Ok(Some(start)) => {
                self.failures = 0;
                self.tx.send_replace(true);
                info!(identity = %self.cfg.identity, lease = %self.lease, "leadership acquired");
                State::Leader {
                    valid_until: start + self.cfg.renew_deadline(),
                    next_renew: start + self.cfg.renew_every,
                }
            }
            Ok(None) => {
                self.failures = 0;
                self.pause().await;
                State::Follower
            }
            Err(e) => {
                self.failed(&e);
                self.pause().await;
                State::Follower
            }
        }
    }

    /// Waits until the next renewal is due, renews within the deadline, and steps down if that
    /// cannot be done.
    async fn leader_round(&mut self, valid_until: Instant, next_renew: Instant) -> State {
        sleep_until(next_renew.min(valid_until)).await;
        let left = valid_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return self.step_down("renew deadline passed");
        }
        match timeout(left, self.renew()).await {
            Ok(Ok(Renewal::Renewed(start))) => {
                self.failures = 0;
                State::Leader {
                    valid_until: start + self.cfg.renew_deadline(),
                    next_renew: start + self.cfg.renew_every,
                }
            }
            Ok(Ok(Renewal::Lost(holder))) => {
                debug!(lease = %self.lease, holder = holder.as_deref().unwrap_or(""), "lease taken by another");
                self.step_down("lease taken by another")
            }
            Ok(Err(e)) => {
                self.failed(&e);
                // Retry sooner than a full period: the deadline is running.
                let retry = (self.cfg.renew_every / 4).max(Duration::from_millis(50));
                State::Leader { valid_until, next_renew: Instant::now() + retry }
            }
            Err(_) => self.step_down("renewal did not complete before the renew deadline"),
        }
    }

    /// Publishes `false` and logs why; the next round reads the Lease again as a follower.
    fn step_down(&mut self, reason: &'static str) -> State {
        self.tx.send_replace(false);
        self.held = None;
        info!(identity = %self.cfg.identity, lease = %self.lease, reason, "leadership lost");
        State::Follower
    }

    /// Reads the Lease and takes it if it is missing, free, expired or already ours. Returns
    /// the instant the attempt started when we now hold it, `None` when someone else does.
    async fn try_acquire(&mut self) -> Result<Option<Instant>> {
        let start = Instant::now();
        let Some(current) = self.api.get_opt(&self.cfg.name).await.map_err(request(&self.lease, "get"))? else {
            return self.create(start).await;
        };
        let spec = current.spec.clone().unwrap_or_default();
        self.observe(&spec, start);
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        let ours = holder == self.cfg.identity;
        if !ours && !holder.is_empty() && !self.expired(&spec, start) {
            return Ok(None);
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        let wanted = if ours {
            self.record(spec.acquire_time.clone().unwrap_or_else(now), transitions, &spec)
        } else {
            self.record(now(), transitions.saturating_add(1), &spec)
        };
        let lease = Lease { metadata: current.metadata, spec: Some(wanted) };
        match self.api.replace(&self.cfg.name, &PostParams::default(), &lease).await {
            Ok(written) => Ok(self.hold(written, start)),
            Err(e) if is_status(&e, 409) => Ok(None),
            Err(e) => Err(request(&self.lease, "replace")(e)),
        }
    }

    /// Creates the missing Lease with us as holder; `None` if another candidate created it first.
    async fn create(&mut self, start: Instant) -> Result<Option<Instant>> {
        let metadata = ObjectMeta {
            name: Some(self.cfg.name.clone()),
            namespace: Some(self.cfg.namespace.clone()),
            ..Default::default()
        };
        let lease = Lease { metadata, spec: Some(self.record(now(), 0, &LeaseSpec::default())) };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(written) => Ok(self.hold(written, start)),
            Err(e) if is_status(&e, 409) => Ok(None),
            Err(e) => Err(request(&self.lease, "create")(e)),
        }
    }

    /// Remembers `written` as the held Lease; returns `Some(start)`.
    fn hold(&mut self, written: Lease, start: Instant) -> Option<Instant> {
        self.observe(written.spec.as_ref().unwrap_or(&LeaseSpec::default()), start);
        self.held = Some(written);
        Some(start)
    }

    /// Renews the held Lease with its `resourceVersion`. On a 409, reads it again: if it is
    /// still ours, tries once more with the fresh version; if not, it is lost.
    async fn renew(&mut self) -> Result<Renewal> {
        for _ in 0..2 {
            let start = Instant::now();
            let Some(mut lease) = self.held.clone() else { return Ok(Renewal::Lost(None)) };
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.renew_time = Some(now());
            spec.lease_duration_seconds = Some(self.cfg.lease_seconds());
            match self.api.replace(&self.cfg.name, &PostParams::default(), &lease).await {
                Ok(written) => {
                    self.hold(written, start);
                    return Ok(Renewal::Renewed(start));
                }
                Err(e) if is_status(&e, 404) => return Ok(Renewal::Lost(None)),
                Err(e) if is_status(&e, 409) => {
                    let fresh = self.api.get_opt(&self.cfg.name).await.map_err(request(&self.lease, "get"))?;
                    let Some(fresh) = fresh else { return Ok(Renewal::Lost(None)) };
                    let holder = fresh.spec.as_ref().and_then(|s| s.holder_identity.clone());
                    if holder.as_deref() != Some(self.cfg.identity.as_str()) {
                        return Ok(Renewal::Lost(holder));
                    }
                    self.held = Some(fresh);
                }
                Err(e) => return Err(request(&self.lease, "replace")(e)),
            }
        }
        Err(Error::Conflict { lease: self.lease.clone() })
    }

    /// The record we write as holder: `acquire_time` and `transitions` as given, renewed now,
    /// keeping fields this module does not manage (`preferredHolder`, `strategy`).
    fn record(&self, acquire_time: MicroTime, transitions: i32, old: &LeaseSpec) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.lease_seconds()),
            acquire_time: Some(acquire_time),
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..old.clone()
        }
    }

    /// Notes the record read at `at`, restarting the expiry wait if it changed.
    fn observe(&mut self, spec: &LeaseSpec, at: Instant) {
        if self.observed.as_ref().is_none_or(|o| o.spec != *spec) {
            self.observed = Some(Observed { spec: spec.clone(), at });
        }
    }

    /// True when `spec` has not changed for its `leaseDurationSeconds` (ours if unset) by our
    /// clock, as client-go's `isLeaseValid` judges.
    fn expired(&self, spec: &LeaseSpec, now: Instant) -> bool {
        let duration = match spec.lease_duration_seconds {
            Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs().into()),
            _ => self.cfg.lease_duration,
        };
        self.observed.as_ref().is_some_and(|o| o.at + duration <= now)
    }

    /// Sleeps a follower's period with jitter.
    async fn pause(&self) {
        sleep(self.cfg.renew_every.mul_f64(rand::random_range(1.0..1.2))).await;
    }

    /// An [`Error::Timeout`] for `verb` after `after`.
    fn timeout(&self, verb: &'static str, after: Duration) -> Error {
        Error::Timeout { lease: self.lease.clone(), verb, after }
    }

    /// Logs a failed round: a warning for the first of a streak, then debug.
    fn failed(&mut self, e: &Error) {
        self.failures += 1;
        let error = error_chain(e);
        if self.failures == 1 {
            warn!(identity = %self.cfg.identity, lease = %self.lease, error, "lease request failed");
        } else {
            debug!(identity = %self.cfg.identity, lease = %self.lease, error, failures = self.failures, "lease request failed");
        }
    }
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
