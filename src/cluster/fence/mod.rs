//! Fencing to the wire: a unit's writes are refused, request by request and byte by byte,
//! once the Lease that lets this replica run the unit may have run out.
//!
//! A [`Fence`] holds the deadline its Lease's election loop publishes on every acquisition and
//! renewal ([`Fence::publish`]: the Lease's `valid_until` and a margin), and is closed when the
//! loop steps down or ends. It is checked twice on the way out:
//!
//! 1. [`FenceLayer`] sits in each unit client's stack *below* the retry layer (see
//!    [`super::registry::Registry::fenced_client`]), so every try of a write — the first and
//!    each retry — is checked when it is handed to the transport: a write (`POST`, `PUT`,
//!    `PATCH`, `DELETE`) at or after `valid_until − margin` fails with [`Fenced`] and is never
//!    queued. Reads pass, and so do dry-run writes (`dryRun=All`: the API server persists
//!    nothing).
//! 2. The write then goes out on a connection of its fence's own pool
//!    ([`super::wire`]), whose stream checks the fence again before each write of request
//!    bytes and flush ([`FencedIo`](super::wire::FencedIo)): a write admitted by the layer and
//!    then held — in the client's queues, waiting for a connection or its TLS handshake, or in a
//!    process stopped between the two checks — is cut off on the wire with
//!    [`FencedOnWire`]. The API server acts on a request only once its last byte has arrived,
//!    and no byte leaves after the deadline less the margin but from a write checked at that
//!    moment.
//!
//! Time is read from `CLOCK_BOOTTIME` ([`boottime`]), which keeps counting while the machine
//! is suspended; tokio's `Instant` (`CLOCK_MONOTONIC`) stops then, so a replica whose VM was
//! paused would wake believing its Lease still valid. A process stopped by SIGSTOP, swapped
//! out or throttled wakes with its deadline passed by either clock, and its first write — or
//! the rest of one it had begun — is refused before the task that would abort the unit has
//! run.
//!
//! Each admitted write is bounded twice. The client gives up on it when the Lease it was
//! admitted under runs out ([`Fence::write_budget`]: until `valid_until`, at most
//! [`WRITE_TIMEOUT`]), closing its connection, which cancels the request's context in the API
//! server. And the request carries the API server's `timeout` parameter set to the margin
//! ([`Fence::server_timeout`]), below the fencing margin by construction: its bytes leave only
//! before `valid_until − margin`, so the server, which abandons it that long after receiving
//! it, does so by `valid_until`. A write the server cannot answer within the margin fails (504,
//! retried while the fence admits it): a longer `lease_duration` gives slow writes more time.
//! kube's own socket timeouts (connect 30 s, a write blocked 295 s, reads unbounded) are far
//! longer and stay as they are for reads and unfenced clients.
//!
//! The fence also counts the writes it let through whose answer has not come
//! ([`Fence::drained`]): a Lease is released only once none of them can still be in flight,
//! so the next holder's first write cannot be overtaken by one of ours. Each admitted write
//! runs in a task of its own, so a caller that stops waiting (its unit task aborted) does not
//! cut the count short: the write stays counted until the server has answered it or its bound
//! has passed.
//!
//! The window that remains, exactly:
//!
//! - **A pause inside the last check.** [`FencedIo`](super::wire::FencedIo) sits under TLS:
//!   it reads the clock and then, in the same synchronous call (no await, no encryption
//!   between), writes the ciphertext to the socket. A stop (SIGSTOP, a VM suspended, a thread
//!   descheduled) that lands between that clock read and the `write(2)` sends those bytes when
//!   the process runs again, however late. It is the call from the check down to the syscall,
//!   a few hundred nanoseconds per write, and it can complete at most the request being
//!   written on each connection of the pool: at most `max_in_flight` requests of the unit.
//!   (With the check above TLS, the window held each request's encryption too.)
//! - **Bytes sent in time, acted on late.** Bytes that reached the socket before
//!   `valid_until − margin` reach the API server at once, but the server may act on them
//!   later (API Priority and Fairness queues, admission webhooks, etcd). The `timeout`
//!   parameter makes it abandon such a request a margin after its arrival, so by
//!   `valid_until`, at its next context check; a transaction already handed to etcd by then
//!   still commits, and a server that does not honour the parameter is bounded only by its own
//!   `--request-timeout` (60 s by default). The margin (`L − renew deadline`, a third of the
//!   Lease with sharding) is the budget for this. Kubernetes Leases offer no server-side
//!   precondition to close it.
//!
//! Why the next owner's writes win over such a late write: both replicas apply with the same
//! field manager, so a late apply of the revision the new owner applied is a no-op (same
//! fields, same values: the resourceVersion stays); a late apply of anything else moves the
//! object's resourceVersion to one the new owner did not write, which its member watch
//! reports as drift (`MetadataCache::is_own`), and its self-heal (`[daemon] self_heal`, on by
//! default) applies the new owner's revision again; a late prune delete carries the uid and
//! resourceVersion preconditions of the old owner's re-check read, so it fails with 409 on
//! any object the new owner has written since.
//!
//! Its parts, by role: [`deadline`] is the fence itself — the Lease's deadline as published,
//! the clock it is read by, the writes it counts in flight and the errors of a refusal;
//! [`layer`] is the client layer that checks it on each write, bounds the write and counts it.

mod deadline;
mod layer;

pub(crate) use deadline::WeakFence;
pub use deadline::{Fence, Fenced, FencedOnWire, WRITE_TIMEOUT, boottime};
pub(crate) use layer::is_write;
pub use layer::{FenceLayer, FenceService};
