//! Coordination of replicas over `coordination.k8s.io/v1` Leases, used by both of the daemon's
//! multi-replica modes (DESIGN.md, "Added in the third round": one Lease module, the daemon keeps
//! wiring only).
//!
//! - [`election`] — the leader-election loop on one Lease (client-go's `tools/leaderelection`
//!   semantics): single-leader mode (`[daemon.leader_election]`) runs it on one Lease, sharding
//!   on each replica's membership Lease and on every unit Lease it is assigned.
//! - [`assignment`] — which live replica owns which unit: rendezvous hashing and the settle time;
//!   pure functions.
//! - [`shard`] — the sharding loop (`[daemon.sharding]`): membership, the view of live members
//!   from one watch of the Leases, ownership of units and their hand-over.

pub mod assignment;
pub mod election;
pub mod member;
pub mod shard;
