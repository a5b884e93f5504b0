//! Which live replica owns which bucket of units: rendezvous (highest-random-weight) hashing,
//! Thaler and Ravishankar 1996, and the settle time before a member counts. Pure functions of
//! names and instants, so every replica with the same view computes the same owner (see
//! [`super::shard`] for the loop that feeds them).
//!
//! Units are grouped into [`BUCKETS`] buckets by the hash of their name ([`bucket`]); a bucket
//! is owned, fenced and handed over whole, under one Lease. A Lease per unit cost
//! `3 × units / L` renewals a second: at 1,000 units and `L` = 8 s, 375 writes a second, which
//! the API server of a small cluster could not keep up with, and units hopped between replicas
//! as their renewals missed the deadline. A fixed count keeps every replica's map of units to
//! Leases the same whatever its config: two replicas never guard one unit with two Leases.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// The rendezvous weight of `member` for `unit`: the first 8 bytes, big-endian, of
/// `sha256(member ‖ 0x00 ‖ unit)`. The zero byte keeps `("ab", "c")` and `("a", "bc")` apart.
pub fn weight(member: &str, unit: &str) -> u64 {
    let mut input = Vec::with_capacity(member.len() + unit.len() + 1);
    input.extend_from_slice(member.as_bytes());
    input.push(0);
    input.extend_from_slice(unit.as_bytes());
    leading_u64(&input)
}

/// The first 8 bytes, big-endian, of `sha256(input)`.
fn leading_u64(input: &[u8]) -> u64 {
    let digest = Sha256::digest(input);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The member that owns `unit`: the one with the highest [`weight`] (ties, which need a
/// 64-bit collision, go to the greater identity). `None` when there are no members.
pub fn owner<'a>(unit: &str, members: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    members.into_iter().max_by_key(|member| (weight(member, unit), *member))
}

/// How many buckets the units are spread over, each under one Lease: at most this many unit
/// Leases are renewed, however many units there are. 64 buckets over 3 replicas give each
/// about 21 (±4, the binomial spread); a replica's share of the units is as even as its
/// share of the buckets.
pub const BUCKETS: u32 = 64;

/// The bucket of `unit`: the first 8 bytes, big-endian, of `sha256(unit)`, modulo [`BUCKETS`]
/// (taken from its [`name_key`], whose remainder is the same).
pub fn bucket(unit: &str) -> u32 {
    key_bucket(name_key(unit))
}

/// The bucket of the unit whose [`name_key`] is `key`.
pub fn key_bucket(key: u64) -> u32 {
    // The remainder is below BUCKETS, a u32.
    (key % u64::from(BUCKETS)) as u32
}

/// The key an advert names `unit` by ([`super::member::UnitKey`]): the low 48 bits of the
/// number [`bucket`] reduces, so `name_key(unit) % BUCKETS == bucket(unit)` (64 divides
/// 2^48). Two units of one fleet share a key with a chance of about `n² / 2^49` (n = 10,000:
/// 2 in 10 million); they would then count as one unit for the assignment.
pub fn name_key(unit: &str) -> u64 {
    leading_u64(unit.as_bytes()) & ((1 << 48) - 1)
}

/// The first 4 bytes, big-endian, of `sha256(fingerprint)`: what an advert says of a unit's
/// version ([`super::member::UnitKey`]). Two versions of one unit look alike with a chance of
/// 1 in 2^32.
pub fn version_key(fingerprint: &str) -> u32 {
    // The leading 32 of 64 bits.
    (leading_u64(fingerprint.as_bytes()) >> 32) as u32
}

/// [`bucket`] remembered by unit name, for a loop that asks for the bucket of every unit of
/// every member ten times a second. Holds one entry per unit name ever asked about (the units
/// of the replicas' configs); one task's, not shared.
#[derive(Debug, Default)]
pub(crate) struct BucketMemo(std::cell::RefCell<std::collections::HashMap<String, u32>>);

impl BucketMemo {
    /// The bucket of `unit`.
    pub(crate) fn of(&self, unit: &str) -> u32 {
        if let Some(b) = self.0.borrow().get(unit) {
            return *b;
        }
        let b = bucket(unit);
        self.0.borrow_mut().insert(unit.to_owned(), b);
        b
    }
}

/// The rendezvous key of bucket `b`: its number in decimal, as in its Lease's name.
pub fn bucket_key(b: u32) -> String {
    b.to_string()
}

/// The member that owns `unit` when every member runs the same config: the rendezvous
/// [`owner`] of its [`bucket`]. `None` when there are no members.
pub fn unit_owner<'a>(unit: &str, members: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    owner(&bucket_key(bucket(unit)), members)
}

/// A member that runs a unit, for [`assign_bucket`]: its identity, the version it advertises for
/// the unit ([`version_key`] of [`crate::config::SyncUnit::fingerprint`]) and when it joined
/// (its membership Lease's `acquireTime`; `None` sorts first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The member's identity.
    pub member: &'a str,
    /// The unit's version in that member's config ([`version_key`]).
    pub fingerprint: u32,
    /// When the member joined.
    pub joined: Option<k8s_openapi::jiff::Timestamp>,
}

/// The owner of bucket `b`, whose units are given by their candidates (`units`: for each unit
/// of the bucket any counting member runs, the members that run it).
///
/// A member qualifies for a unit when it runs the unit in the version of the unit's
/// newest-joined candidate (ties: the greater identity): in a rolling update the new config's
/// version of a unit wins as soon as one new replica counts, and the unit is never applied by
/// an old and a new replica in turn. The bucket goes by rendezvous on [`bucket_key`] to a member
/// that qualifies for every unit of the bucket; when none does (replicas whose configs differ
/// in more than versions: a unit only old replicas run beside one the newest changed), to the
/// newest-joined candidate of the bucket (ties: the greater identity) — the newest config
/// wins, as for one unit, and the units it no longer runs wait for the old replicas to leave.
/// `None` when no unit has a candidate. Every replica computes the same answer from the same
/// Leases.
pub fn assign_bucket<'a, 'u>(b: u32, units: impl IntoIterator<Item = &'u [Candidate<'a>]>) -> Option<&'a str>
where
    'a: 'u,
{
    let mut qualified: Option<BTreeSet<&'a str>> = None;
    let mut newest: Option<&Candidate<'a>> = None;
    for candidates in units {
        let Some(unit_newest) = candidates.iter().max_by_key(|c| (c.joined, c.member)) else { continue };
        if newest.is_none_or(|n| (unit_newest.joined, unit_newest.member) > (n.joined, n.member)) {
            newest = Some(unit_newest);
        }
        let winners: BTreeSet<&'a str> =
            candidates.iter().filter(|c| c.fingerprint == unit_newest.fingerprint).map(|c| c.member).collect();
        qualified = Some(match qualified {
            None => winners,
            Some(q) => q.intersection(&winners).copied().collect(),
        });
    }
    let qualified = qualified?;
    if qualified.is_empty() {
        return newest.map(|n| n.member);
    }
    owner(&bucket_key(b), qualified)
}

/// The members that count for the assignment at `now`: live for the settle time `settle` by
/// this process's clock, where `first_live` records since when (updated here: members no
/// longer live are forgotten, new ones recorded). This replica (`own`) counts from its first
/// round; a member first seen within this replica's own first settle time counts from that
/// same moment, as having started with it. So replicas started together (within `settle` of
/// one another) all count each other at the end of their first settle time, and none claims
/// the others' units for the moments between their Leases appearing; a member that joins later
/// counts `settle` after it is first seen, so its share's owners keep applying until then.
pub(crate) fn eligible(
    first_live: &mut BTreeMap<String, Instant>,
    live: &BTreeSet<String>,
    own: &str,
    settle: Duration,
    now: Instant,
) -> Vec<String> {
    first_live.retain(|member, _| live.contains(member));
    let origin = *first_live.entry(own.to_owned()).or_insert(now);
    let since = if now < origin + settle { origin } else { now };
    for member in live {
        first_live.entry(member.clone()).or_insert(since);
    }
    live.iter().filter(|m| first_live[*m] + settle <= now).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("replica-{i}")).collect()
    }

    fn assignment(units: &[String], members: &[String]) -> BTreeMap<String, String> {
        units.iter().map(|u| (u.clone(), owner(u, members.iter().map(String::as_str)).unwrap().to_owned())).collect()
    }

    fn units(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("unit-{i}")).collect()
    }

    #[test]
    fn replicas_started_together_count_each_other_when_their_first_settle_time_ends() {
        let settle = Duration::from_secs(10);
        let t0 = Instant::now();
        let after = |ms: u64| t0 + Duration::from_millis(ms);
        let live = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let (me, b, c, d) = ("replica-a", "replica-b", "replica-c", "replica-d");
        let mut first = BTreeMap::new();
        assert!(eligible(&mut first, &live(&[me]), me, settle, t0).is_empty());
        // The others' Leases appear 3 s and 9.9 s after this replica's first round: they
        // started with it.
        assert!(eligible(&mut first, &live(&[me, b]), me, settle, after(3_000)).is_empty());
        assert!(eligible(&mut first, &live(&[me, b, c]), me, settle, after(9_900)).is_empty());
        // At the end of its settle time all three count at once: it never claims their units
        // as the only member.
        assert_eq!(eligible(&mut first, &live(&[me, b, c]), me, settle, after(10_000)), vec![me, b, c]);
        // A member that joins later counts a settle time after it is first seen.
        let four = live(&[me, b, c, d]);
        assert_eq!(eligible(&mut first, &four, me, settle, after(12_000)).len(), 3);
        assert_eq!(eligible(&mut first, &four, me, settle, after(21_900)).len(), 3);
        assert_eq!(eligible(&mut first, &four, me, settle, after(22_000)).len(), 4);
        // One that stops being live is forgotten and counted afresh when it is back.
        assert_eq!(eligible(&mut first, &live(&[me, b, c]), me, settle, after(23_000)).len(), 3);
        assert_eq!(eligible(&mut first, &four, me, settle, after(24_000)).len(), 3);
        assert_eq!(eligible(&mut first, &four, me, settle, after(34_000)).len(), 4);
    }

    #[test]
    fn every_unit_has_exactly_one_owner_and_shares_are_even() {
        let units = units(3000);
        let before = assignment(&units, &members(3));
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for owner in before.values() {
            *counts.entry(owner).or_default() += 1;
        }
        assert_eq!(counts.len(), 3);
        assert!(counts.values().all(|n| (900..=1100).contains(n)), "{counts:?}");
    }

    #[test]
    fn a_joining_member_takes_only_its_share_and_only_for_itself() {
        let units = units(3000);
        let before = assignment(&units, &members(3));
        let after = assignment(&units, &members(4));
        let moved: Vec<_> = units.iter().filter(|u| before[*u] != after[*u]).collect();
        assert!(moved.iter().all(|u| after[*u] == "replica-3"), "units move only to the new member");
        assert!((600..=900).contains(&moved.len()), "about a quarter moved: {}", moved.len());
    }

    #[test]
    fn a_leaving_member_gives_up_only_its_own_units() {
        let units = units(3000);
        let before = assignment(&units, &members(4));
        let after = assignment(&units, &members(3));
        for unit in &units {
            if before[unit] != "replica-3" {
                assert_eq!(before[unit], after[unit], "{unit} moved though its owner stayed");
            }
        }
    }

    #[test]
    fn only_members_running_the_newest_version_of_a_unit_are_candidates() {
        let at = |s: i64| Some(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let c = |member, fingerprint, joined| Candidate { member, fingerprint, joined };
        // Old replicas a, b run v1; c, started later, runs v2: only c may own the unit's bucket.
        let mixed = [c("a", 1, at(10)), c("b", 1, at(11)), c("c", 2, at(50))];
        for b in [1, 2, 3, 4] {
            assert_eq!(assign_bucket(b, [&mixed[..]]), Some("c"));
        }
        // The same version everywhere: plain rendezvous over all of them.
        let same = [c("a", 1, at(10)), c("b", 1, at(11)), c("c", 1, at(50))];
        assert_eq!(assign_bucket(1, [&same[..]]), owner("1", ["a", "b", "c"]));
    }

    #[test]
    fn buckets_are_spread_evenly_and_each_is_owned_whole() {
        let units = units(3000);
        let mut sizes = vec![0usize; BUCKETS as usize];
        for unit in &units {
            sizes[bucket(unit) as usize] += 1;
        }
        // The bucket names a Lease: it must stay the remainder of the whole leading 64 bits.
        let moved = units.iter().filter(|u| leading_u64(u.as_bytes()) % u64::from(BUCKETS) != u64::from(bucket(u)));
        assert_eq!(moved.count(), 0, "a unit's bucket changed with its name key");
        // 3000 / 64 ≈ 47 a bucket; none empty or more than twice that.
        assert!(sizes.iter().all(|n| (20..=94).contains(n)), "{sizes:?}");
        let members = members(3);
        let owners: BTreeSet<&str> = units
            .iter()
            .filter(|u| bucket(u) == 7)
            .map(|u| unit_owner(u, members.iter().map(String::as_str)).unwrap())
            .collect();
        assert_eq!(owners.len(), 1, "a bucket's units have one owner");
    }

    #[test]
    fn a_bucket_goes_to_a_member_running_the_newest_version_of_each_of_its_units() {
        let at = |s: i64| Some(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let c = |member, fingerprint, joined| Candidate { member, fingerprint, joined };
        // The same config everywhere: rendezvous over all members on the bucket's key.
        let same = vec![vec![c("a", 1, at(10)), c("b", 1, at(11)), c("c", 1, at(50))]; 2];
        assert_eq!(assign_bucket(5, same.iter().map(Vec::as_slice)), owner("5", ["a", "b", "c"]));
        // c, newest, changed unit 1 and runs unit 2 as the others do: only c qualifies for both.
        let changed = [
            vec![c("a", 1, at(10)), c("b", 1, at(11)), c("c", 2, at(50))],
            vec![c("a", 3, at(10)), c("b", 3, at(11)), c("c", 3, at(50))],
        ];
        for b in 0..BUCKETS {
            assert_eq!(assign_bucket(b, changed.iter().map(Vec::as_slice)), Some("c"));
        }
        // A unit only the old members run, beside a new one only c runs: c, the newest, owns
        // the bucket.
        let split = [vec![c("a", 4, at(10)), c("b", 4, at(11))], vec![c("c", 5, at(50))]];
        assert_eq!(assign_bucket(3, split.iter().map(Vec::as_slice)), Some("c"));
        // A unit only a and b run (c has dropped it, or benched it): they share the bucket.
        let dropped = [vec![c("a", 4, at(10)), c("b", 4, at(11))]];
        assert_eq!(assign_bucket(9, dropped.iter().map(Vec::as_slice)), owner("9", ["a", "b"]));
        assert_eq!(assign_bucket(9, []), None);
        assert_eq!(assign_bucket(9, [&[][..]]), None);
    }

    #[test]
    fn no_members_no_owner() {
        assert_eq!(owner("unit", std::iter::empty()), None);
    }
}
