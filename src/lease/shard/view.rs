//! The sharding loop's view of what members run: its own advert (written on its membership
//! Lease, less the units it could not start), the owner of each bucket among the members that
//! advertise its units, the nonce check, and the survey of unrenewed and stale Leases.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::time::Instant;
use tracing::{info, warn};

use std::sync::Arc;

use super::super::assignment::{BUCKETS, Candidate, assign_bucket, key_bucket, name_key};
use super::super::election::Seen;
use super::super::member::{Advert, UnitKey, unit_keys};
use super::{BENCH_FOR, STALE_AFTER, Shard};

impl Shard {
    /// Notes this process's nonce coming back on its own membership Lease, and refuses to run
    /// anything once another nonce follows it: only another process with this identity writes
    /// one (a predecessor's, left on the Lease before this process first wrote, is ignored).
    pub(super) fn check_nonce(&mut self, identity: &str, advert: &Advert) {
        if identity != self.cfg.identity || self.membership.refused.is_some() {
            return;
        }
        if advert.nonce == self.membership.nonce {
            self.membership.confirmed = true;
        } else if self.membership.confirmed {
            let reason = format!(
                "another process writes the membership Lease of identity {identity} (nonce {} after this process's {}): \
                 give every replica its own [daemon.sharding] identity",
                advert.nonce, self.membership.nonce
            );
            tracing::error!(identity, reason = %reason, "sharding: identity in use twice; this replica runs no unit");
            self.membership.refused = Some(reason);
        }
    }

    /// Reads the advert on member `identity`'s Lease, unless its annotations are those last
    /// read: a membership Lease is renewed every few seconds, and an advert of 10,000 unit keys
    /// (130 KiB) was decoded again at every renewal.
    pub(super) fn note_advert(&mut self, identity: &str, lease: &Lease) {
        let annotations = lease.metadata.annotations.as_ref();
        if annotations.is_some() && self.adverts.texts.get(identity) == annotations {
            return;
        }
        let Some(advert) = Advert::read(lease) else { return };
        self.check_nonce(identity, &advert);
        self.adverts.texts.insert(identity.to_owned(), annotations.cloned().unwrap_or_default());
        if self.adverts.by_member.get(identity) != Some(&advert) {
            self.adverts.by_member.insert(identity.to_owned(), advert);
            self.adverts.changes += 1;
        }
    }
    /// Leaves the units the daemon could not start ([`Running::failed`](super::Running::failed)) to the others for
    /// [`BENCH_FOR`]: they drop out of this replica's advert, so the assignment moves them and
    /// their Leases are handed over as for any other move.
    pub(super) fn bench(&mut self, now: Instant) {
        self.adverts.benched.retain(|_, until| *until > now);
        let failed = self.running.borrow().failed.clone();
        for unit in failed {
            if !self.adverts.benched.contains_key(&unit) {
                warn!(unit = %unit, identity = %self.cfg.identity, "sharding: unit could not start here; leaving it to the other replicas");
                self.adverts.benched.insert(unit, now + BENCH_FOR);
            }
        }
    }
    /// The units this replica offers to run ([`Offer`]), made again only when the config's
    /// units or the benched ones changed: at 10,000 units, copying and hashing them every
    /// round (ten a second) took most of the loop's CPU.
    pub(super) fn offered(&mut self) -> Arc<Offer> {
        let changed = self.units.has_changed().unwrap_or(false);
        if let Some(offer) = &self.adverts.offer
            && !changed
            && offer.benched.iter().eq(self.adverts.benched.keys())
        {
            return offer.clone();
        }
        let mut named = self.units.borrow_and_update().clone();
        named.retain(|unit, _| !self.adverts.benched.contains_key(unit));
        let mut by_bucket: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for unit in named.keys() {
            by_bucket.entry(self.buckets.memo.of(unit)).or_default().push(unit.clone());
        }
        let keys = Arc::new(unit_keys(&named));
        let benched = self.adverts.benched.keys().cloned().collect();
        let offer = Arc::new(Offer { named, keys, by_bucket, benched });
        self.adverts.offer = Some(offer.clone());
        offer
    }
    /// Writes this replica's advert when it differs from the last one written (at start, after
    /// a reload); a failed write (the membership Lease not created yet) is tried again at the
    /// next round.
    pub(super) fn advertise(&mut self) {
        let offer = self.offered();
        let own = Advert { units: offer.keys.clone(), nonce: self.membership.nonce.clone(), buckets: Some(BUCKETS) };
        if let Some((advert, task)) = &self.adverts.publishing {
            if !task.is_finished() {
                return;
            }
            let advert = advert.clone();
            let Some((_, task)) = self.adverts.publishing.take() else { return };
            if futures::FutureExt::now_or_never(task).and_then(Result::ok).unwrap_or(false) {
                self.adverts.published = Some(advert);
            }
        }
        if self.adverts.published.as_ref() == Some(&own) {
            return;
        }
        let (client, namespace, name) =
            (self.client.clone(), self.cfg.namespace.clone(), self.cfg.member_lease(&self.cfg.identity));
        let (advert, refused_before) = (own.clone(), self.adverts.refused.clone());
        let task = tokio::spawn(async move {
            match advert.publish(client, &namespace, &name, &offer.named).await {
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
        self.adverts.publishing = Some((own, task));
    }
    /// The buckets this replica owns now: for each bucket holding a unit of its config, the
    /// members that count (`eligible`), group units into [`BUCKETS`] buckets, and advertise
    /// units of it — this replica by the advert the watch showed back, and only while that
    /// equals its config — and [`assign_bucket`] among them.
    /// Computed again only when the members that count, what they advertise, when they
    /// joined or this replica's offer changed.
    pub(super) fn mine(&mut self, eligible: &[String]) -> BTreeSet<u32> {
        let offer = self.offered();
        let joined = |member: &str| {
            let seen = self.leases.seen.get(&self.cfg.member_lease(member))?;
            seen.spec.acquire_time.as_ref().map(|t| t.0)
        };
        let key: MineKey =
            (eligible.iter().map(|m| (m.clone(), joined(m))).collect(), self.adverts.changes, offer.clone());
        if let Some((seen, mine)) = &self.buckets.mine_memo
            && *seen == key
        {
            return mine.clone();
        }
        let own_current = self.adverts.by_member.get(&self.cfg.identity).is_some_and(|a| a.units == offer.keys);
        let mut by_bucket: BTreeMap<u32, BTreeMap<u64, Vec<Candidate>>> = BTreeMap::new();
        for (member, joined) in key.0.iter().filter(|(m, _)| *m != self.cfg.identity || own_current) {
            let Some(advert) = self.adverts.by_member.get(member).filter(|a| a.buckets == Some(BUCKETS)) else {
                continue;
            };
            for unit in advert.units.iter() {
                let b = unit.bucket();
                if offer.by_bucket.contains_key(&b) {
                    let candidate = Candidate { member, fingerprint: unit.version, joined: *joined };
                    by_bucket.entry(b).or_default().entry(unit.name).or_default().push(candidate);
                }
            }
        }
        let mine: BTreeSet<u32> = by_bucket
            .into_iter()
            .filter(|(b, units)| {
                assign_bucket(*b, units.values().map(Vec::as_slice)) == Some(self.cfg.identity.as_str())
            })
            .map(|(b, _)| b)
            .collect();
        self.buckets.mine_memo = Some((key, mine.clone()));
        mine
    }
    /// Counts the units some live member runs whose bucket's Lease nobody renews, and about once
    /// a second collects stale Leases: a membership Lease of another replica, a bucket Lease of
    /// a bucket no unit a live member runs falls in, or a unit Lease of a gitward before bucket
    /// Leases, that has been released or expired for [`STALE_AFTER`] Lease durations. Only the live member that wins the Lease's name by rendezvous deletes it,
    /// with its `resourceVersion` as precondition, so a Lease taken meanwhile is kept.
    pub(super) fn survey(&mut self, live: &BTreeSet<String>, now: Instant) {
        let lease = self.cfg.lease();
        let buckets = self.advertised(live);
        let renewed = |seen: Option<&Seen>| {
            seen.is_some_and(|s| {
                s.spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty()) && self.expiry(s) > now
            })
        };
        let unrenewed: usize = buckets
            .iter()
            .filter(|(b, _)| !renewed(self.leases.seen.get(&self.cfg.bucket_lease(**b))))
            .map(|(_, n)| n)
            .sum();
        self.metrics.units_unrenewed(&self.cfg.identity, unrenewed);
        if now < self.leases.collected + Duration::from_secs(1) {
            return;
        }
        let (member_prefix, legacy_prefix) = (self.cfg.member_prefix(), self.cfg.legacy_unit_prefix());
        let own_member = self.cfg.member_lease(&self.cfg.identity);
        let stale: Vec<(String, String)> = self
            .leases
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
            .filter_map(|(name, _)| Some((name.clone(), self.leases.versions.get(name)?.clone())))
            .collect();
        self.leases.collected = now;
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

    /// How many units each bucket holds that this replica's config or a live member's advert
    /// names (each unit once); computed again only when those changed.
    fn advertised(&mut self, live: &BTreeSet<String>) -> Arc<BTreeMap<u32, usize>> {
        let key: AdvertisedKey = (live.clone(), self.adverts.changes, self.offered());
        if let Some((seen, counts)) = &self.buckets.advertised_memo
            && *seen == key
        {
            return counts.clone();
        }
        let own = key.2.named.keys().chain(&key.2.benched);
        let mut units: BTreeSet<u64> = own.map(|u| name_key(u)).collect();
        for member in live {
            if let Some(advert) = self.adverts.by_member.get(member) {
                units.extend(advert.units.iter().map(|k| k.name));
            }
        }
        let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
        for unit in units {
            *counts.entry(key_bucket(unit)).or_default() += 1;
        }
        let counts = Arc::new(counts);
        self.buckets.advertised_memo = Some((key, counts.clone()));
        counts
    }
}

/// The units this replica offers to run: those of its config, but the benched ones.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Offer {
    /// Name → fingerprint.
    pub(super) named: BTreeMap<String, String>,
    /// Their keys, as advertised.
    pub(super) keys: Arc<BTreeSet<UnitKey>>,
    /// Their names by bucket.
    pub(super) by_bucket: BTreeMap<u32, Vec<String>>,
    /// The benched units left out.
    benched: Vec<String>,
}

/// What [`Shard::mine`] was computed from: the members that count with when each joined, the
/// adverts seen, and the offer.
pub(super) type MineKey = (Vec<(String, Option<k8s_openapi::jiff::Timestamp>)>, u64, Arc<Offer>);

/// What [`Shard::advertised`] was computed from: the live members, the adverts seen and the
/// offer (the config's units).
pub(super) type AdvertisedKey = (BTreeSet<String>, u64, Arc<Offer>);
