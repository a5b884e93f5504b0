//! The election loop: a state machine (follower, leader) that takes, renews and gives up one
//! Lease as the parent module's doc describes, publishing whether this candidate leads.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tracing::{debug, info, warn};

use super::{Error, HOLDER_NONCE_ANNOTATION, LeaderConfig, Result, Seen, holder_nonce, now, process_nonce, request};
use crate::cluster::fence::{Fence, boottime};
use crate::cluster::is_status;
use crate::telemetry::error_chain;

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

/// `metadata` carrying this process's nonce as the holder's ([`HOLDER_NONCE_ANNOTATION`]).
fn with_nonce(mut metadata: ObjectMeta) -> ObjectMeta {
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(HOLDER_NONCE_ANNOTATION.into(), process_nonce().into());
    metadata
}

/// The election loop's state machine (client-go's `LeaderElector`).
pub(super) struct Elector {
    /// The Leases of `cfg.namespace`.
    api: Api<Lease>,
    /// `Lease/<namespace>/<name>` for logs.
    lease: String,
    /// The (repaired) config.
    cfg: LeaderConfig,
    /// Publishes the state to every [`super::Leadership`].
    tx: watch::Sender<bool>,
    /// Publishes the Lease's deadline to the clients it guards; closed on stepping down and
    /// when the loop ends (dropped).
    fence: Fence,
    /// The start of the attempt in progress by `CLOCK_BOOTTIME`: a successful write makes
    /// the Lease ours until this plus `lease_duration`.
    attempt_started: Duration,
    /// A Lease naming our identity with another process's nonce was seen (logged once).
    twin_seen: bool,
    /// The record as last seen, for the expiry judgement.
    observed: Option<Observed>,
    /// The Lease as last written by us while leader (its `resourceVersion` locks the renewal).
    held: Option<Lease>,
    /// Failed rounds in a row; only the first of a streak is a warning.
    failures: u32,
}

impl Drop for Elector {
    /// The loop ended (its task aborted or every handle dropped): nobody renews the Lease any
    /// more, so nothing it guards may write.
    fn drop(&mut self) {
        self.fence.close();
    }
}

impl Elector {
    /// The loop for `cfg` (already repaired), publishing on `tx`; `seen` starts the expiry
    /// judgement ([`super::spawn_seen`]).
    pub(super) fn new(
        api: Api<Lease>,
        cfg: LeaderConfig,
        tx: watch::Sender<bool>,
        fence: Fence,
        seen: Option<Seen>,
    ) -> Self {
        let observed = seen.map(|seen| Observed { spec: seen.spec, at: seen.at });
        let lease = cfg.lease_ref();
        let attempt_started = boottime();
        Self { api, lease, cfg, tx, fence, attempt_started, twin_seen: false, observed, held: None, failures: 0 }
    }

    /// Publishes the deadline won by the write whose attempt started at `attempt_started`:
    /// `valid_until` = that start + `lease_duration`, refused from the renew deadline on.
    fn publish_deadline(&self) {
        let margin = self.cfg.lease_duration.saturating_sub(self.cfg.renew_deadline());
        self.fence.publish(self.attempt_started + self.cfg.lease_duration, margin);
    }

    /// Runs rounds until every [`super::Leadership`] is gone.
    pub(super) async fn run(mut self) {
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
                self.publish_deadline();
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
        // The fence counts time suspended, which tokio's clock does not.
        if left.is_zero() || !self.fence.admits() {
            return self.step_down("renew deadline passed");
        }
        match timeout(left, self.renew()).await {
            Ok(Ok(Renewal::Renewed(start))) => {
                self.failures = 0;
                self.publish_deadline();
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
        self.fence.close();
        self.tx.send_replace(false);
        self.held = None;
        info!(identity = %self.cfg.identity, lease = %self.lease, reason, "leadership lost");
        State::Follower
    }

    /// Reads the Lease and takes it if it is missing, free, expired or already ours. Returns
    /// the instant the attempt started when we now hold it, `None` when someone else does.
    async fn try_acquire(&mut self) -> Result<Option<Instant>> {
        let start = Instant::now();
        self.attempt_started = boottime();
        let Some(current) = self.api.get_opt(&self.cfg.name).await.map_err(request(&self.lease, "get"))? else {
            return self.create(start).await;
        };
        let spec = current.spec.clone().unwrap_or_default();
        self.observe(&spec, start);
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        let ours = holder == self.cfg.identity && holder_nonce(&current) == process_nonce();
        if holder == self.cfg.identity && !ours && !self.twin_seen {
            self.twin_seen = true;
            warn!(identity = %self.cfg.identity, lease = %self.lease, nonce = holder_nonce(&current), "another process holds this Lease under this replica's identity; not taking it while it renews (give each replica its own identity)");
        }
        if !ours && !holder.is_empty() && !self.expired(&spec, start) {
            return Ok(None);
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        let wanted = if ours {
            self.record(spec.acquire_time.clone().unwrap_or_else(now), transitions, &spec)
        } else {
            self.record(now(), transitions.saturating_add(1), &spec)
        };
        let lease = Lease { metadata: with_nonce(current.metadata), spec: Some(wanted) };
        match self.api.replace(&self.cfg.name, &PostParams::default(), &lease).await {
            Ok(written) => Ok(self.hold(written, start)),
            Err(e) if is_status(&e, 409) => Ok(None),
            Err(e) => Err(request(&self.lease, "replace")(e)),
        }
    }

    /// Creates the missing Lease with us as holder; `None` if another candidate created it first.
    async fn create(&mut self, start: Instant) -> Result<Option<Instant>> {
        let metadata = with_nonce(ObjectMeta {
            name: Some(self.cfg.name.clone()),
            namespace: Some(self.cfg.namespace.clone()),
            ..Default::default()
        });
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
            self.attempt_started = boottime();
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
                    if holder.as_deref() != Some(self.cfg.identity.as_str()) || holder_nonce(&fresh) != process_nonce()
                    {
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
