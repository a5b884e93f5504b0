//! `[daemon.sharding]`: how replicas share the units ([`super::Sharding`]).

use toml::Spanned;

use super::raw::RawSharding;
use super::resolve::{Resolver, dns_label};
use super::{ClusterConfig, Result, Sharding};

impl Resolver<'_> {
    pub(super) fn sharding(&self, raw: Spanned<RawSharding>, clusters: &[ClusterConfig]) -> Result<Sharding> {
        let raw = raw.into_inner();
        let key = |field: &str| format!("daemon.sharding.{field}");
        let lease_duration = match raw.lease_duration {
            Some(value) if value.get_ref().0 < std::time::Duration::from_secs(2) => {
                let message = "must be at least 2s (the Leases are written with half of it, in whole seconds)";
                return Err(self.invalid(Some(value.span()), &key("lease_duration"), message));
            }
            Some(value) => value.into_inner().0,
            None => Sharding::DEFAULT_LEASE_DURATION,
        };
        let cluster = match raw.cluster {
            Some(name) if clusters.iter().any(|c| c.name == *name.get_ref()) => name.into_inner(),
            Some(name) => {
                let message = format!("no cluster named `{}`", name.get_ref());
                return Err(self.invalid(Some(name.span()), &key("cluster"), message));
            }
            None => clusters[0].name.clone(),
        };
        Ok(Sharding {
            namespace: match raw.namespace {
                Some(namespace) => self.check(namespace, &key("namespace"), dns_label)?,
                None => Sharding::DEFAULT_NAMESPACE.to_owned(),
            },
            lease_duration,
            identity: raw.identity.map(|i| self.check(i, &key("identity"), dns_label)).transpose()?,
            group: match raw.group {
                Some(group) => Some(self.check(group, &key("group"), group_name)?),
                None => None,
            },
            cluster,
        })
    }
}

/// A sharding group: an RFC 1123 label of at most 20 characters, so that
/// `gitward-<group>-member-<identity>` stays a valid Lease name for any identity.
fn group_name(value: &str) -> std::result::Result<(), String> {
    if value.len() > 20 {
        return Err("at most 20 characters (it is part of every Lease name)".to_owned());
    }
    if value == "member" || value == "unit" {
        return Err(format!("`{value}` would make Lease names the ungrouped replicas read as their own"));
    }
    dns_label(value)
}
