//! The fence itself: one Lease's deadline as its election loop publishes it, read by
//! `CLOCK_BOOTTIME`; whether a write may be sent now; how long an admitted write may take; the
//! writes let through that are still in flight; and the errors of a write refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Longest a write let through the fence may take to be answered; past it the write fails
/// with a timeout, and an abandoned write stops counting as in flight. The API server's own
/// default `--request-timeout` is 60 s; writes of one object answer in milliseconds.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A fence that never closes (no Lease: one replica, `gitward sync`).
const OPEN: u64 = u64::MAX;
/// A closed fence (no Lease held yet, or no longer).
const CLOSED: u64 = 0;

/// Time since boot by `CLOCK_BOOTTIME`, which counts time spent suspended (Linux
/// `clock_gettime(2)`).
pub fn boottime() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(OPEN - 1)
}

/// A write refused by a [`Fence`]: it was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{method} {path} not sent: this replica no longer holds {lease} (fenced: its deadline less the margin has passed)"
)]
pub struct Fenced {
    /// The Lease, `Lease/<namespace>/<name>`.
    pub lease: String,
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
}

/// A write whose bytes were stopped on the wire by a [`Fence`]
/// ([`crate::cluster::wire::FencedIo`]): refused at a write of its bytes, the request was not
/// completed and the API server does not act on it; refused at the flush after its last write,
/// it may have arrived whole (the fence closed in between).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "write stopped on the wire: this replica no longer holds {lease} (fenced: its deadline less the margin has passed)"
)]
pub struct FencedOnWire {
    /// The Lease, `Lease/<namespace>/<name>`.
    pub lease: String,
}

/// A [`Fence`] that does not keep it alive, to key what belongs to it.
#[derive(Clone)]
pub(crate) struct WeakFence(std::sync::Weak<Inner>);

impl WeakFence {
    /// True while a [`Fence`] handle of it lives.
    pub(crate) fn is_live(&self) -> bool {
        self.0.strong_count() > 0
    }

    /// [`Fence::check_wire`] of the fence; a fence no handle is left of admits nothing.
    ///
    /// Errors: [`FencedOnWire`].
    pub(crate) fn check_wire(&self) -> Result<(), FencedOnWire> {
        match self.0.upgrade() {
            Some(inner) => Fence { inner }.check_wire(),
            None => Err(FencedOnWire { lease: "its Lease (dropped)".to_owned() }),
        }
    }

    /// True when this is a handle of `fence`.
    pub(crate) fn is(&self, fence: &Fence) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&fence.inner))
    }
}

/// The deadline of one Lease as the unit clients check it. Cheap to clone: clones share the
/// state. Equal when they are clones of one fence.
#[derive(Clone)]
pub struct Fence {
    inner: Arc<Inner>,
}

struct Inner {
    /// `Lease/<namespace>/<name>`, for [`Fenced`]; empty for [`Fence::unfenced`].
    lease: String,
    /// Writes are refused from this instant on ([`boottime`], ns); [`CLOSED`] or [`OPEN`].
    closes_at: AtomicU64,
    /// The Lease's deadline itself, as last published ([`boottime`], ns; 0 before).
    valid_until: AtomicU64,
    /// The margin last published (ns).
    margin: AtomicU64,
    /// Writes let through whose answer has not come yet.
    in_flight: AtomicUsize,
    /// Woken when `in_flight` drops.
    idle: Notify,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("lease", &self.inner.lease)
            .field("admits", &self.admits())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl PartialEq for Fence {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Fence {}

impl Fence {
    fn with(lease: String, closes_at: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                lease,
                closes_at: AtomicU64::new(closes_at),
                valid_until: AtomicU64::new(0),
                margin: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                idle: Notify::new(),
            }),
        }
    }

    /// A fence for the Lease `lease` (`Lease/<namespace>/<name>`), closed until its election
    /// loop publishes a deadline.
    pub fn new(lease: impl Into<String>) -> Self {
        Self::with(lease.into(), CLOSED)
    }

    /// A fence that admits every write, for clients no Lease guards.
    pub fn unfenced() -> Self {
        Self::with(String::new(), OPEN)
    }

    /// True for [`Fence::unfenced`].
    pub fn is_unfenced(&self) -> bool {
        self.inner.lease.is_empty()
    }

    /// The Lease this fence guards (`Lease/<namespace>/<name>`; empty when unfenced).
    pub fn lease(&self) -> &str {
        &self.inner.lease
    }

    /// Publishes the Lease's deadline: `valid_until` ([`boottime`]) is when another replica
    /// may take the Lease over, judged by this process's clock; writes are refused from
    /// `valid_until − margin` on. Does nothing to an unfenced fence.
    pub fn publish(&self, valid_until: Duration, margin: Duration) {
        if self.is_unfenced() {
            return;
        }
        self.inner.valid_until.store(nanos(valid_until), Ordering::SeqCst);
        self.inner.margin.store(nanos(margin), Ordering::SeqCst);
        let closes = nanos(valid_until.saturating_sub(margin)).max(1);
        self.inner.closes_at.store(closes, Ordering::SeqCst);
    }

    /// Closes the fence at once (the Lease was lost, released or its loop ended). Does nothing
    /// to an unfenced fence.
    pub fn close(&self) {
        if !self.is_unfenced() {
            self.inner.closes_at.store(CLOSED, Ordering::SeqCst);
        }
    }

    /// The Lease deadline last published ([`boottime`]), if any.
    pub fn valid_until(&self) -> Option<Duration> {
        match self.inner.valid_until.load(Ordering::SeqCst) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// True while a write may be sent now.
    pub fn admits(&self) -> bool {
        let closes = self.inner.closes_at.load(Ordering::SeqCst);
        closes == OPEN || nanos(boottime()) < closes
    }

    /// `Ok` while a write may be sent now, else the [`Fenced`] error for `method` and `path`.
    ///
    /// Errors: [`Fenced`] at or after the published deadline less the margin, or when closed.
    pub fn check(&self, method: &str, path: &str) -> Result<(), Fenced> {
        if self.admits() {
            return Ok(());
        }
        Err(Fenced { lease: self.inner.lease.clone(), method: method.to_owned(), path: path.to_owned() })
    }

    /// Writes let through whose answer has not come yet.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// True when no write let through can still be in flight: each was answered or timed out.
    pub fn is_drained(&self) -> bool {
        self.in_flight() == 0
    }

    /// Waits until [`Self::is_drained`], at most `bound`; returns whether it is. Close the
    /// fence first, or new writes may keep it busy.
    pub async fn drained(&self, bound: Duration) -> bool {
        let until = tokio::time::Instant::now() + bound;
        loop {
            let notified = self.inner.idle.notified();
            if self.is_drained() {
                return true;
            }
            let wake = (tokio::time::Instant::now() + Duration::from_millis(200)).min(until);
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(wake) => {}
            }
            if tokio::time::Instant::now() >= until {
                return self.is_drained();
            }
        }
    }

    /// `Ok` while a write's bytes may go on the wire now ([`crate::cluster::wire::FencedIo`]).
    ///
    /// Errors: [`FencedOnWire`] when [`Self::admits`] is false.
    pub fn check_wire(&self) -> Result<(), FencedOnWire> {
        if self.admits() {
            return Ok(());
        }
        Err(FencedOnWire { lease: self.inner.lease.clone() })
    }

    /// How long a write admitted now may wait for its answer: until the Lease's published
    /// deadline (`valid_until`, when another replica may take it over), at most
    /// [`WRITE_TIMEOUT`]; [`WRITE_TIMEOUT`] for an unfenced fence or before any deadline.
    pub fn write_budget(&self) -> Duration {
        match self.valid_until() {
            Some(until) if !self.is_unfenced() => until.saturating_sub(boottime()).min(WRITE_TIMEOUT),
            _ => WRITE_TIMEOUT,
        }
    }

    /// How long the API server may work on a write admitted now, counted from when it receives
    /// it: the margin last published, at most [`Self::write_budget`] (the budget alone when no
    /// margin is published). A write's bytes leave only before `valid_until − margin`
    /// ([`crate::cluster::wire`]), so a server that gives up that long after receiving it does
    /// so by `valid_until`, when another replica may take the Lease.
    pub fn server_timeout(&self) -> Duration {
        let budget = self.write_budget();
        match Duration::from_nanos(self.inner.margin.load(Ordering::SeqCst)) {
            Duration::ZERO => budget,
            margin => margin.min(budget),
        }
    }

    /// A handle that does not keep the fence alive.
    pub(crate) fn downgrade(&self) -> WeakFence {
        WeakFence(Arc::downgrade(&self.inner))
    }
}

/// Counts one admitted write while it lives: held by the task that awaits the answer.
pub(super) struct InFlight {
    fence: Fence,
}

impl InFlight {
    pub(super) fn start(fence: &Fence) -> Self {
        fence.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        Self { fence: fence.clone() }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.fence.inner.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.fence.inner.idle.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boottime_advances() {
        let a = boottime();
        std::thread::sleep(Duration::from_millis(2));
        assert!(boottime() > a);
    }

    #[test]
    fn a_fence_admits_until_its_deadline_less_the_margin() {
        let fence = Fence::new("Lease/ns/l");
        assert!(!fence.admits(), "closed until a deadline is published");
        fence.publish(boottime() + Duration::from_secs(60), Duration::from_secs(20));
        assert!(fence.admits());
        fence.publish(boottime() + Duration::from_secs(10), Duration::from_secs(20));
        let err = fence.check("PATCH", "/api/v1/namespaces/a/configmaps/b").unwrap_err();
        assert_eq!(err.lease, "Lease/ns/l");
        assert!(err.to_string().starts_with("PATCH /api/v1/namespaces/a/configmaps/b not sent"), "{err}");
        fence.publish(boottime() + Duration::from_secs(60), Duration::ZERO);
        fence.close();
        assert!(!fence.admits());
        let open = Fence::unfenced();
        open.close();
        assert!(open.admits(), "an unfenced client is never closed");
    }
}
