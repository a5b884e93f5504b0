//! The daemon's decisions, pure functions of what it knows (STYLE.md, "Decisions apart from side
//! effects"): which unit tasks to start, restart and stop when the config or this replica's
//! units change ([`plan_units`], [`plan_ownership`]); when `READY=1` and `/readyz` say ready
//! ([`ready`], [`readyz`]); the sd_notify `STATUS=` line ([`status_line`]); whether a reload may change
//! the config ([`fixed_at_start`]). The daemon's loop
//! ([`super::run`]) and the set of running units ([`super::units`]) carry them out.
//!
//! What readiness follows: `READY=1` (and the `ready` log line) once every unit has applied
//! once — a sync that ran to the end, objects the API server refused aside; a daemon whose
//! syncs all fail, e.g. the cluster unreachable, never sends it, and systemd's start timeout
//! applies. `/readyz`: every unit's last sync not failed as a whole, an API server that does not
//! answer counting as failed; a standby replica is ready. Neither follows health: an application
//! that does not become healthy is not a reason to restart or unroute gitward.

use std::collections::{BTreeMap, BTreeSet};

use super::trigger::UnitStatus;
use crate::config::Config;
use crate::lease::shard::Ownership;

/// What a reconcile of the running unit tasks with the wanted units does ([`plan_units`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UnitPlan {
    /// Running units to abort: no longer wanted, or their settings changed (then they are
    /// started again, in `start`).
    pub stop: Vec<String>,
    /// Of `stop`, those no longer wanted at all: their gauges are dropped.
    pub forget: Vec<String>,
    /// Units to start, in name order: wanted, and not running (once `stop` is done) nor still
    /// stopping after a hand-over.
    pub start: Vec<String>,
    /// Running units kept as they are (a SIGHUP sends each a reload trigger).
    pub keep: Vec<String>,
}

/// Plans a reconcile: `running` maps each running unit to the settings it was started with,
/// `stopping` names units handed over and not yet stopped, `wanted` maps each unit that should
/// run (the config's, or with sharding those this replica holds) to its settings now. A unit
/// runs with the settings it was started with: one whose settings changed is stopped and
/// started again.
pub fn plan_units<C: PartialEq>(
    running: &BTreeMap<&str, &C>,
    stopping: &BTreeSet<&str>,
    wanted: &BTreeMap<&str, &C>,
) -> UnitPlan {
    let mut plan = UnitPlan::default();
    for (name, config) in running {
        match wanted.get(name) {
            Some(want) if *want == *config => plan.keep.push(name.to_string()),
            Some(_) => plan.stop.push(name.to_string()),
            None => {
                plan.stop.push(name.to_string());
                plan.forget.push(name.to_string());
            }
        }
    }
    let kept: BTreeSet<&str> = plan.keep.iter().map(String::as_str).collect();
    plan.start = wanted
        .keys()
        .filter(|name| !kept.contains(*name) && !stopping.contains(*name))
        .map(|name| name.to_string())
        .collect();
    plan
}

/// What a new [`Ownership`] does to the unit tasks ([`plan_ownership`]); units newly held are
/// then started by a reconcile ([`plan_units`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OwnershipPlan {
    /// Units stopping after a hand-over whose Lease was lost meanwhile: abort them now.
    pub abort_stopping: Vec<String>,
    /// Running units assigned to another replica: stop them after their in-flight sync; the
    /// Lease is released once they stopped.
    pub hand_over: Vec<String>,
    /// Running units whose Lease was lost: abort them at once (fencing: never apply without
    /// the Lease).
    pub abort: Vec<String>,
}

/// Plans the change to `ownership` for the units `running` and those `stopping` after a
/// hand-over.
pub fn plan_ownership<'a>(
    running: impl IntoIterator<Item = &'a String>,
    stopping: impl IntoIterator<Item = &'a String>,
    ownership: &Ownership,
) -> OwnershipPlan {
    let abort_stopping = stopping.into_iter().filter(|u| !ownership.releasing.contains(*u)).cloned().collect();
    let mut plan = OwnershipPlan { abort_stopping, ..OwnershipPlan::default() };
    for name in running.into_iter().filter(|u| !ownership.held.contains(*u)) {
        if ownership.releasing.contains(name) {
            plan.hand_over.push(name.clone());
        } else {
            plan.abort.push(name.clone());
        }
    }
    plan
}

/// Whether `READY=1` (and the `ready` log line) is due, once: this replica leads (or needs no
/// election), the status has an entry for each of the `expected` units it should run (every
/// unit of the config; with sharding, those it holds) and each has applied once
/// ([`UnitStatus::applied_once`], or is suspended or waits for its dependencies) — not merely tried: a daemon whose syncs all fail is not
/// ready.
pub fn ready(leading: bool, expected: usize, units: &BTreeMap<String, UnitStatus>) -> bool {
    leading
        && !units.is_empty()
        && units.len() == expected
        && units.values().all(|s| s.applied_once || s.suspended || s.blocked.is_some())
}

/// Whether `/readyz` says ready: standing by for leadership (a rolling update can bring this
/// replica up while another leads), or at least one unit and every unit's cache synced and its
/// last sync not failed as a whole (failed objects alone do not count; see
/// [`UnitStatus::failed_objects`]) or the unit suspended ([`UnitStatus::suspended`]).
pub fn readyz(standby: bool, units: &BTreeMap<String, UnitStatus>) -> bool {
    standby || (!units.is_empty() && units.values().all(unit_ready))
}

/// Whether one unit counts as ready for `/readyz` ([`readyz`]).
pub fn unit_ready(u: &UnitStatus) -> bool {
    u.suspended || u.blocked.is_some() || (u.cache_synced && u.last_sync_ok == Some(true))
}

/// The lines of `/readyz?verbose` after its headline, one per unit in name order, in the
/// kube-apiserver's `[+]`/`[-]` style: `[+]app ok: 3f2a9c1e0b7d applied`, with `, 2 objects
/// failed` when the API server refused some, and `; not applied: <error>` when a newer revision
/// failed to parse ([`crate::observe::unit::keeps_readiness`]); `[+]app suspended: 3f2a9c1e0b7d last applied` for a
/// suspended unit; `[+]app waiting for dependencies: base: not healthy (progressing)` for one
/// whose new revision waits for its `depends_on`; `[-]app failed: <error>` or `[-]app pending` for a unit not ready.
/// A unit backing off after a failed sync ends its line with `; backing off until <RFC 3339
/// time>` (its next attempt).
pub fn readyz_lines(units: &BTreeMap<String, UnitStatus>) -> Vec<String> {
    units.iter().map(|(name, s)| readyz_line(name, s) + &backing_off(s)).collect()
}

/// `; backing off until <time>` for a unit backing off, else nothing.
fn backing_off(s: &UnitStatus) -> String {
    let until = s.backoff_until.and_then(|t| jiff::Timestamp::try_from(t).ok());
    until.map(|t| format!("; backing off until {}", t.round(jiff::Unit::Second).unwrap_or(t))).unwrap_or_default()
}

/// One unit's line of [`readyz_lines`], without its backoff.
fn readyz_line(name: &str, s: &UnitStatus) -> String {
    let error = s.last_error.as_ref().map(|e| e.as_str());
    if s.suspended {
        let rev = s.last_revision.as_deref().map_or("-", |r| &r[..r.len().min(12)]);
        return format!("[+]{name} suspended: {rev} last applied");
    }
    if let Some(waiting) = &s.blocked {
        return format!("[+]{name} waiting for dependencies: {waiting}");
    }
    if s.cache_synced && s.last_sync_ok == Some(true) {
        let rev = s.last_revision.as_deref().map_or("-", |r| &r[..r.len().min(12)]);
        let failed = match s.failed_objects {
            0 => String::new(),
            n => format!(", {n} objects failed"),
        };
        let kept = error.map(|e| format!("; not applied: {e}")).unwrap_or_default();
        return format!("[+]{name} ok: {rev} applied{failed}{kept}");
    }
    let state = if s.last_sync_ok == Some(false) { "failed" } else { "pending" };
    match error {
        Some(e) => format!("[-]{name} {state}: {e}"),
        None => format!("[-]{name} {state}"),
    }
}

/// The sd_notify `STATUS=` line: per unit the state, revision, tracked objects and, once a
/// health wait ended, the changed objects by health, `; `-separated:
/// `app: synced 3f2a9c1e0b7d (12 objects; 2 healthy, 0 progressing, 1 degraded)`.
pub fn status_line(units: &BTreeMap<String, UnitStatus>) -> String {
    units
        .iter()
        .map(|(name, s)| {
            let state = match s.last_sync_ok {
                _ if s.suspended => "suspended",
                _ if s.blocked.is_some() => "waiting for dependencies",
                Some(true) => "synced",
                Some(false) => "failed",
                None => "pending",
            };
            let rev = s.last_revision.as_deref().map(|r| &r[..r.len().min(12)]).unwrap_or("-");
            let health = match (s.health, s.waiting) {
                (_, true) => "; waiting for health".to_string(),
                (Some(h), false) => {
                    format!("; {} healthy, {} progressing, {} degraded", h.healthy, h.progressing, h.degraded)
                }
                (None, false) => String::new(),
            };
            let failed = match s.failed_objects {
                0 => String::new(),
                n => format!(", {n} failed"),
            };
            format!("{name}: {state} {rev} ({} objects{failed}{health})", s.tracked_objects)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The tables a reload may not change, because the daemon set them up at start (clients,
/// the leader election loop, the sharding loop): those that `new` changes, in file order;
/// empty when the reload may go ahead. A SIGHUP that changes any is refused whole.
pub fn fixed_at_start(old: &Config, new: &Config) -> Vec<&'static str> {
    let changed = [
        ("[cluster]", old.clusters != new.clusters),
        ("[daemon.leader_election]", old.daemon.leader_election != new.daemon.leader_election),
        ("[daemon.sharding]", old.daemon.sharding != new.daemon.sharding),
    ];
    changed.into_iter().filter(|(_, c)| *c).map(|(t, _)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::Counts;
    use crate::telemetry::Masked;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_reload_restarts_changed_units_stops_removed_ones_and_starts_new_ones() {
        let (one, two) = ("v1".to_string(), "v2".to_string());
        let running = BTreeMap::from([("a", &one), ("b", &one), ("c", &one)]);
        let wanted = BTreeMap::from([("a", &one), ("b", &two), ("d", &one)]);
        let plan = plan_units(&running, &BTreeSet::new(), &wanted);
        assert_eq!(plan.keep, names(&["a"]));
        assert_eq!(plan.stop, names(&["b", "c"]));
        assert_eq!(plan.forget, names(&["c"]), "b is started again: its gauges stay");
        assert_eq!(plan.start, names(&["b", "d"]));
    }

    #[test]
    fn a_unit_still_stopping_after_a_hand_over_is_not_started_again() {
        let one = "v1".to_string();
        let wanted = BTreeMap::from([("a", &one), ("b", &one)]);
        let plan = plan_units(&BTreeMap::new(), &BTreeSet::from(["b"]), &wanted);
        assert_eq!(plan.start, names(&["a"]));
        assert!(plan.stop.is_empty() && plan.keep.is_empty());
    }

    #[test]
    fn an_unchanged_config_changes_nothing() {
        let one = "v1".to_string();
        let units = BTreeMap::from([("a", &one), ("b", &one)]);
        let plan = plan_units(&units, &BTreeSet::new(), &units);
        assert_eq!(plan, UnitPlan { keep: names(&["a", "b"]), ..UnitPlan::default() });
    }

    #[test]
    fn units_handed_over_stop_after_their_sync_and_units_whose_lease_is_lost_stop_at_once() {
        let ownership = Ownership {
            generation: 3,
            held: BTreeSet::from(["a".to_string()]),
            releasing: BTreeSet::from(["b".to_string(), "s".to_string()]),
            ..Default::default()
        };
        let running = names(&["a", "b", "c"]);
        let stopping = names(&["s", "t"]);
        let plan = plan_ownership(&running, &stopping, &ownership);
        assert_eq!(plan.hand_over, names(&["b"]));
        assert_eq!(plan.abort, names(&["c"]));
        assert_eq!(plan.abort_stopping, names(&["t"]), "s is still being released");
    }

    fn applied(applied_once: bool) -> UnitStatus {
        UnitStatus { cache_synced: true, last_sync_ok: Some(applied_once), applied_once, ..Default::default() }
    }

    #[test]
    fn ready_waits_for_every_expected_unit_to_have_applied_once() {
        let two = BTreeMap::from([("a".to_string(), applied(true)), ("b".to_string(), applied(true))]);
        assert!(ready(true, 2, &two));
        assert!(!ready(false, 2, &two), "a replica that does not lead applies nothing");
        assert!(!ready(true, 3, &two), "a unit not started yet has no status");
        assert!(!ready(true, 0, &BTreeMap::new()), "no unit: nothing applied");
        let mut pending = two.clone();
        pending.insert("c".to_string(), UnitStatus::default());
        assert!(!ready(true, 3, &pending), "a unit waiting for a sync slot");
        let mut failing = two;
        failing.insert("c".to_string(), applied(false));
        assert!(!ready(true, 3, &failing), "a unit whose syncs all failed");
    }

    #[test]
    fn a_suspended_unit_counts_as_ready_whatever_it_last_did() {
        let suspended = UnitStatus { suspended: true, ..UnitStatus::default() };
        let units = BTreeMap::from([("a".to_string(), applied(true)), ("b".to_string(), suspended.clone())]);
        assert!(ready(true, 2, &units) && readyz(false, &units), "never applied, suspended from the start");
        let failed = BTreeMap::from([("b".to_string(), UnitStatus { last_sync_ok: Some(false), ..suspended })]);
        assert!(readyz(false, &failed));
        assert_eq!(readyz_lines(&failed), vec!["[+]b suspended: - last applied".to_string()]);
    }

    #[test]
    fn readyz_follows_the_last_sync_and_not_objects_the_server_refused() {
        let refused = UnitStatus { failed_objects: 2, ..applied(true) };
        assert!(readyz(false, &BTreeMap::from([("a".to_string(), refused)])));
        let failed = UnitStatus { applied_once: true, last_sync_ok: Some(false), ..applied(true) };
        assert!(!readyz(false, &BTreeMap::from([("a".to_string(), failed.clone())])));
        assert!(!readyz(false, &BTreeMap::from([("a".to_string(), UnitStatus::default())])), "pending");
        assert!(!readyz(false, &BTreeMap::new()));
        assert!(readyz(true, &BTreeMap::from([("a".to_string(), failed)])), "a standby replica is ready");
    }

    #[test]
    fn the_status_line_gives_state_revision_objects_and_health() {
        let synced = UnitStatus {
            last_revision: Some("3f2a9c1e0b7d5a6b".into()),
            tracked_objects: 12,
            health: Some(Counts { healthy: 2, progressing: 0, degraded: 1 }),
            ..applied(true)
        };
        let waiting = UnitStatus { waiting: true, failed_objects: 1, ..synced.clone() };
        let units = BTreeMap::from([
            ("app".to_string(), synced),
            ("db".to_string(), UnitStatus::default()),
            ("web".to_string(), waiting),
        ]);
        assert_eq!(
            status_line(&units),
            "app: synced 3f2a9c1e0b7d (12 objects; 2 healthy, 0 progressing, 1 degraded); \
             db: pending - (0 objects); web: synced 3f2a9c1e0b7d (12 objects, 1 failed; waiting for health)"
        );
    }

    #[test]
    fn readyz_verbose_gives_each_units_revision_failed_objects_and_the_error_of_a_revision_not_applied() {
        let synced = UnitStatus { last_revision: Some("3f2a9c1e0b7d5a6b".into()), ..applied(true) };
        let kept =
            UnitStatus { last_error: Some(Masked::new("revision 9e1d: b.yaml: document 2: bad")), ..synced.clone() };
        let failed = UnitStatus {
            last_sync_ok: Some(false),
            last_error: Some(Masked::new("git: unreachable")),
            ..synced.clone()
        };
        let units = BTreeMap::from([
            ("a".to_string(), UnitStatus { failed_objects: 2, ..synced }),
            ("b".to_string(), kept),
            ("c".to_string(), failed),
            ("d".to_string(), UnitStatus::default()),
        ]);
        assert_eq!(
            readyz_lines(&units),
            [
                "[+]a ok: 3f2a9c1e0b7d applied, 2 objects failed",
                "[+]b ok: 3f2a9c1e0b7d applied; not applied: revision 9e1d: b.yaml: document 2: bad",
                "[-]c failed: git: unreachable",
                "[-]d pending",
            ]
        );
    }

    #[test]
    fn readyz_verbose_says_a_unit_backs_off_and_until_when() {
        let until = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let hung = UnitStatus {
            last_sync_ok: Some(false),
            last_error: Some(Masked::new("git: timed out")),
            backoff_until: Some(until),
            ..UnitStatus::default()
        };
        assert_eq!(
            readyz_lines(&BTreeMap::from([("hung".to_string(), hung)])),
            ["[-]hung failed: git: timed out; backing off until 2027-01-15T08:00:00Z"]
        );
    }

    #[test]
    fn a_reload_may_not_turn_leader_election_or_sharding_on_or_off() {
        let text = "[[sync]]\nname = \"a\"\nrepo = \"https://example.com/a.git\"\npath = \".\"\n";
        let old = Config::from_toml(text, std::path::Path::new("/"), "test").expect("a config");
        assert!(fixed_at_start(&old, &old.clone()).is_empty());
        let mut new = old.clone();
        new.daemon.leader_election = Some(Default::default());
        assert_eq!(fixed_at_start(&old, &new), ["[daemon.leader_election]"]);
        assert_eq!(fixed_at_start(&new, &old), ["[daemon.leader_election]"]);
    }
}
