//! Signed, chained attestations of what each sync applied (`[provenance]`): one in-toto
//! Statement v1 ([`statement`]) per sync that created, configured or pruned anything, in a DSSE
//! envelope ([`dsse`]) signed with the config's key ([`key`]), its `previous` the digest of the
//! unit's envelope before it. The engine's part [`Attestor`] makes and keeps them (the unit's
//! ConfigMap, [`kept`], and its journal under the state directory); [`chain`] checks them
//! offline and [`live`] against the cluster (`gitward attest verify`); with `oci_referrers`, an OCI
//! artifact unit's or OCI chart unit's are also pushed to its registry as referrers of the
//! manifest applied ([`referrer`]).

mod attestor;
pub mod chain;
pub mod dsse;
pub mod kept;
pub mod key;
pub mod live;
pub mod members;
pub mod referrer;
mod shared;
pub mod statement;

pub(in crate::sync) use attestor::{Attestor, Concluded};
