//! The sharding loop's view of what members run: its own advert (written on its membership
//! Lease, less the units it could not start), the owner of each bucket among the members that
//! advertise its units, the nonce check, and the survey of unrenewed and stale Leases.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::time::Instant;
use tracing::{info, warn};

use super::super::assignment::{BUCKETS, Candidate, assign_bucket};
use super::super::election::Seen;
use super::super::member::Advert;
use super::{BENCH_FOR, STALE_AFTER, Shard};

impl Shard {
    /// Notes this process's nonce coming back on its own membership Lease, and refuses to run
    /// anything once another nonce follows it: only another process with this identity writes
    /// one (a predecessor's, left on the Lease before this process first wrote, is ignored).
    pub(super) fn check_nonce(&mut self, identity: &str, advert: &Advert) {
        if identity != self.cfg.identity || self.refused.is_some() {
            return;
        }
        if advert.nonce == self.nonce {
            self.confirmed = true;
        } else if self.confirmed {
            let reason = format!(
                "another process writes the membership Lease of identity {identity} (nonce {} after this process's {}): \
                 give every replica its own [daemon.sharding] identity",
                advert.nonce, self.nonce
            );
            tracing::error!(identity, reason = %reason, "sharding: identity in use twice; this replica runs no unit");
            self.refused = Some(reason);
        }
    }
    /// Leaves the units the daemon could not start ([`Running::failed`]) to the others for
    /// [`BENCH_FOR`]: they drop out of this replica's advert, so the assignment moves them and
    /// their Leases are handed over as for any other move.
    pub(super) fn bench(&mut self, now: Instant) {
        self.benched.retain(|_, until| *until > now);
        let failed = self.running.borrow().failed.clone();
        for unit in failed {
            if !self.benched.contains_key(&unit) {
                warn!(unit = %unit, identity = %self.cfg.identity, "sharding: unit could not start here; leaving it to the other replicas");
                self.benched.insert(unit, now + BENCH_FOR);
            }
        }
    }
    /// The units this replica offers to run: those of its config, but the benched ones.
    pub(super) fn offered(&self) -> BTreeMap<String, String> {
        let mut units = self.units.borrow().clone();
        units.retain(|unit, _| !self.benched.contains_key(unit));
        units
    }
    /// Writes this replica's advert when it differs from the last one written (at start, after
    /// a reload); a failed write (the membership Lease not created yet) is tried again at the
    /// next round.
    pub(super) fn advertise(&mut self) {
        let own = Advert { units: self.offered(), nonce: self.nonce.clone(), buckets: Some(BUCKETS) };
        if let Some((advert, task)) = &self.publishing {
            if !task.is_finished() {
                return;
            }
            let advert = advert.clone();
            let Some((_, task)) = self.publishing.take() else { return };
            if futures::FutureExt::now_or_never(task).and_then(Result::ok).unwrap_or(false) {
                self.published = Some(advert);
            }
        }
        if self.published.as_ref() == Some(&own) {
            return;
        }
        let (client, namespace, name) =
            (self.client.clone(), self.cfg.namespace.clone(), self.cfg.member_lease(&self.cfg.identity));
        let (advert, refused_before) = (own.clone(), self.advert_refused.clone());
        let task = tokio::spawn(async move {
            match advert.publish(client, &namespace, &name).await {
                Ok(()) => {
                    refused_before.store(false, std::sync::atomic::Ordering::Relaxed);
                    true
                }
                Err(e) => {
                    // 422: the advert itself is refused, and will be at every try.
                    let refused = crate::cluster::is_status(&e, 422);
                    if refused && !refused_before.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        warn!(lease = %name, units = advert.units.len(), error = %e, "sharding: the API server refuses this replica's advert, so it owns no bucket and runs no unit (an advert of many units passes the 256 KiB limit of an object's annotations)");
                    } else {
                        tracing::debug!(lease = %name, error = %e, "sharding: advert not written yet");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    false
                }
            }
        });
        self.publishing = Some((own, task));
    }
    /// The buckets this replica owns now: for each bucket holding a unit of its config, the
    /// members that count (`eligible`), group units into [`BUCKETS`] buckets, and advertise
    /// units of it — this replica by the advert the watch showed back, and only while that
    /// equals its config — and [`assign_bucket`] among them.
    pub(super) fn mine(&self, eligible: &[String]) -> BTreeSet<u32> {
        let units = self.offered();
        let wanted: BTreeSet<u32> = units.keys().map(|u| self.buckets.of(u)).collect();
        let joined = |member: &str| {
            let seen = self.seen.get(&self.cfg.member_lease(member))?;
            seen.spec.acquire_time.as_ref().map(|t| t.0)
        };
        let own_current = self.adverts.get(&self.cfg.identity).is_some_and(|a| a.units == units);
        let mut by_bucket: BTreeMap<u32, BTreeMap<&str, Vec<Candidate>>> = BTreeMap::new();
        for member in eligible.iter().filter(|m| **m != self.cfg.identity || own_current) {
            let Some(advert) = self.adverts.get(member).filter(|a| a.buckets == Some(BUCKETS)) else { continue };
            let joined = joined(member);
            for (unit, fingerprint) in &advert.units {
                let b = self.buckets.of(unit);
                if wanted.contains(&b) {
                    let candidate = Candidate { member, fingerprint, joined };
                    by_bucket.entry(b).or_default().entry(unit).or_default().push(candidate);
                }
            }
        }
        by_bucket
            .into_iter()
            .filter(|(b, units)| {
                assign_bucket(*b, units.values().map(Vec::as_slice)) == Some(self.cfg.identity.as_str())
            })
            .map(|(b, _)| b)
            .collect()
    }
    /// Counts the units some live member runs whose bucket's Lease nobody renews, and about once
    /// a second collects stale Leases: a membership Lease of another replica, a bucket Lease of
    /// a bucket no unit a live member runs falls in, or a unit Lease of a gitward before bucket
    /// Leases, that has been released or expired for [`STALE_AFTER`] Lease durations. Only the live member that wins the Lease's name by rendezvous deletes it,
    /// with its `resourceVersion` as precondition, so a Lease taken meanwhile is kept.
    pub(super) fn survey(&mut self, live: &BTreeSet<String>, now: Instant) {
        let lease = self.cfg.lease();
        let own_units = self.units.borrow().clone();
        let mut advertised: BTreeSet<String> = own_units.keys().cloned().collect();
        for member in live {
            if let Some(advert) = self.adverts.get(member) {
                advertised.extend(advert.units.keys().cloned());
            }
        }
        let renewed = |seen: Option<&Seen>| {
            seen.is_some_and(|s| {
                s.spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty()) && self.expiry(s) > now
            })
        };
        // Units per bucket: each bucket's Lease is looked up once.
        let mut buckets: BTreeMap<u32, usize> = BTreeMap::new();
        for unit in &advertised {
            *buckets.entry(self.buckets.of(unit)).or_default() += 1;
        }
        let unrenewed: usize =
            buckets.iter().filter(|(b, _)| !renewed(self.seen.get(&self.cfg.bucket_lease(**b)))).map(|(_, n)| n).sum();
        self.metrics.units_unrenewed(&self.cfg.identity, unrenewed);
        if now < self.collected + Duration::from_secs(1) {
            return;
        }
        let (member_prefix, legacy_prefix) = (self.cfg.member_prefix(), self.cfg.legacy_unit_prefix());
        let own_member = self.cfg.member_lease(&self.cfg.identity);
        let stale: Vec<(String, String)> = self
            .seen
            .iter()
            .filter(|(name, seen)| {
                let idle = seen.at + lease * (STALE_AFTER + 1) <= now;
                let unused = match self.cfg.bucket_of_lease(name) {
                    Some(b) => !buckets.contains_key(&b),
                    None => {
                        name.starts_with(&legacy_prefix) || (name.starts_with(&member_prefix) && **name != own_member)
                    }
                };
                idle && unused && !renewed(Some(seen))
            })
            .filter(|(name, _)| {
                super::super::assignment::owner(name, live.iter().map(String::as_str))
                    == Some(self.cfg.identity.as_str())
            })
            .filter_map(|(name, _)| Some((name.clone(), self.versions.get(name)?.clone())))
            .collect();
        self.collected = now;
        for (name, version) in stale {
            let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
            tokio::spawn(async move {
                let params = kube::api::DeleteParams {
                    preconditions: Some(kube::api::Preconditions { resource_version: Some(version), uid: None }),
                    ..Default::default()
                };
                match api.delete(&name, &params).await {
                    Ok(_) => info!(lease = %name, "sharding: stale Lease collected"),
                    Err(e) => tracing::debug!(lease = %name, error = %e, "sharding: stale Lease kept"),
                }
            });
        }
    }
}
