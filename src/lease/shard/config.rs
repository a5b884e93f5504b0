//! [`ShardConfig`]: one replica's sharding settings, its identity and the Lease names.

use std::time::Duration;

use super::{BUCKET_PREFIX, LEGACY_UNIT_PREFIX, MEMBER_PREFIX};
use crate::lease::election::LeaderConfig;

/// One replica's sharding settings, resolved from [`crate::config::Sharding`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// Namespace of every membership and bucket Lease.
    pub namespace: String,
    /// This replica: an RFC 1123 label, unique among live replicas.
    pub identity: String,
    /// The failover bound `D` (see the module doc); at least 2 s.
    pub lease_duration: Duration,
    /// The installation (`[daemon.sharding] group`): part of every Lease name, so that two
    /// installations sharing the namespace never count each other's replicas. `None`: the
    /// plain `gitward-member-`, `gitward-bucket-` prefixes.
    pub group: Option<String>,
}

impl ShardConfig {
    /// `L`, the duration written to every Lease: half of `lease_duration`, rounded up to whole
    /// seconds (the Lease counts whole seconds), at least 1 s.
    pub fn lease(&self) -> Duration {
        let half = self.lease_duration / 2;
        Duration::from_secs((half.as_secs() + u64::from(half.subsec_nanos() > 0)).max(1))
    }

    /// How often Leases are renewed and free ones polled: `L/3`, as leader election's default
    /// ratio (5 s of 15 s).
    pub fn renew_every(&self) -> Duration {
        self.lease() / 3
    }

    /// The prefix of membership Leases: [`MEMBER_PREFIX`], or `gitward-<group>-member-`.
    pub fn member_prefix(&self) -> String {
        self.group.as_ref().map_or_else(|| MEMBER_PREFIX.to_owned(), |g| format!("gitward-{g}-member-"))
    }

    /// The prefix of bucket Leases: [`BUCKET_PREFIX`], or `gitward-<group>-bucket-`.
    pub fn bucket_prefix(&self) -> String {
        self.group.as_ref().map_or_else(|| BUCKET_PREFIX.to_owned(), |g| format!("gitward-{g}-bucket-"))
    }

    /// The prefix of the unit Leases of gitward before bucket Leases: [`LEGACY_UNIT_PREFIX`],
    /// or `gitward-<group>-unit-`.
    pub fn legacy_unit_prefix(&self) -> String {
        self.group.as_ref().map_or_else(|| LEGACY_UNIT_PREFIX.to_owned(), |g| format!("gitward-{g}-unit-"))
    }

    /// The name of `identity`'s membership Lease.
    pub fn member_lease(&self, identity: &str) -> String {
        format!("{}{identity}", self.member_prefix())
    }

    /// The name of bucket `b`'s Lease ([`crate::lease::assignment::bucket`]).
    pub fn bucket_lease(&self, b: u32) -> String {
        format!("{}{b}", self.bucket_prefix())
    }

    /// The bucket whose Lease is `name`, if it is one of this installation's bucket Leases.
    pub fn bucket_of_lease(&self, name: &str) -> Option<u32> {
        name.strip_prefix(&self.bucket_prefix())?.parse().ok()
    }

    /// The election config for the Lease `name`, held by this replica.
    pub fn leader_config(&self, name: String) -> LeaderConfig {
        LeaderConfig {
            namespace: self.namespace.clone(),
            name,
            identity: self.identity.clone(),
            lease_duration: self.lease(),
            renew_every: self.renew_every(),
        }
    }
}

/// A default identity: [`crate::cluster::agent::process_identity`] (`$POD_NAME` or the host
/// name, then `-<pid>`, an RFC 1123 label). A container restarted in the same pod gets the same
/// identity and so takes its own Leases back at once; that is safe because the process that
/// held them is gone.
pub fn default_identity() -> String {
    crate::cluster::agent::process_identity()
}

/// The User-Agent of a sharded replica's clients: `gitward/<version> (<identity>)`
/// ([`crate::cluster::agent::user_agent`]).
pub fn user_agent(identity: &str) -> String {
    crate::cluster::agent::user_agent(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_is_half_the_failover_bound_in_whole_seconds() {
        let cfg = |secs| ShardConfig {
            namespace: "ns".into(),
            identity: "a".into(),
            lease_duration: Duration::from_secs(secs),
            group: None,
        };
        assert_eq!(cfg(15).lease(), Duration::from_secs(8));
        assert_eq!(cfg(4).lease(), Duration::from_secs(2));
        assert_eq!(cfg(2).lease(), Duration::from_secs(1));
        assert!(cfg(4).leader_config("x".into()).validate().is_ok());
        assert!(cfg(2).leader_config("x".into()).validate().is_ok());
    }
}
