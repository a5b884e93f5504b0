//! The per-unit gauges to alert on and to account with: `gitward_unit_ready{unit,reason}`,
//! `gitward_unit_failing_since_seconds`, `gitward_unit_objects`, `gitward_unit_cache_bytes`,
//! `gitward_unit_render_seconds` and `gitward_unit_apply_seconds` (see the table in
//! [`super`]). Which reason a unit is in is a pure function of its last outcome
//! ([`Reason::of`]) and of its suspension ([`UnitState::reason`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::UnitLabels;
use crate::health::record::SyncResult;
use crate::sync::outcome::Outcome;

/// Why a unit is or is not ready: the `reason` label of `gitward_unit_ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The last sync applied its revision whole and every member is `Current`: ready (1).
    Healthy,
    /// The last sync failed as a whole (git, render, parse, the cluster), or objects of it
    /// failed to apply.
    Failed,
    /// A member is `Failed` (kstatus).
    Degraded,
    /// A member is not yet `Current`: the health wait timed out or was cancelled, or the sync
    /// yielded to a newer revision before it sent everything.
    Progressing,
    /// Applied, but no health wait has judged the members (`health_timeout = 0`).
    Unknown,
    /// Suspended (`gitward suspend`, `suspend = true`): it applies nothing.
    Suspended,
    /// Started, not synced yet.
    NeverSynced,
}

impl Reason {
    /// The label value: `healthy`, `failed`, `degraded`, `progressing`, `unknown`,
    /// `suspended`, `never_synced`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Healthy => "healthy",
            Reason::Failed => "failed",
            Reason::Degraded => "degraded",
            Reason::Progressing => "progressing",
            Reason::Unknown => "unknown",
            Reason::Suspended => "suspended",
            Reason::NeverSynced => "never_synced",
        }
    }

    /// The reason `outcome` leaves its unit in: `failed` for a failure as a whole or objects
    /// that failed to apply, `progressing` for a sync that yielded, else the result its health
    /// step recorded (`healthy`, `degraded`, `progressing`); a sync with no wait (`applied`)
    /// takes the members' health as last judged ([`crate::sync::outcome::Live::health`]), or
    /// `unknown` when nothing judged them.
    pub fn of(outcome: &Outcome) -> Self {
        let Some(report) = outcome.report() else { return Reason::Failed };
        if report.changes.has_failures() {
            return Reason::Failed;
        }
        if report.yielded {
            return Reason::Progressing;
        }
        match outcome.health.result {
            SyncResult::Healthy => Reason::Healthy,
            SyncResult::Failed => Reason::Failed,
            SyncResult::Degraded => Reason::Degraded,
            SyncResult::Progressing => Reason::Progressing,
            SyncResult::Applied => match outcome.live.health {
                None => Reason::Unknown,
                Some(h) if h.degraded > 0 => Reason::Degraded,
                Some(h) if h.progressing > 0 => Reason::Progressing,
                Some(_) => Reason::Healthy,
            },
        }
    }
}

/// What the gauges of one unit derive from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitState {
    /// The reason of the last sync's outcome; `None` before the first.
    pub last: Option<Reason>,
    /// The unit is suspended now.
    pub suspended: bool,
    /// Unix time (seconds) of the first failed sync of the failures in a row the last sync
    /// belongs to; `None` when the last sync did not fail.
    pub failing_since: Option<i64>,
}

impl UnitState {
    /// The reason exported now: `suspended` while suspended, else the last sync's, else
    /// `never_synced`.
    pub fn reason(&self) -> Reason {
        if self.suspended { Reason::Suspended } else { self.last.unwrap_or(Reason::NeverSynced) }
    }

    /// A sync ended in `reason` at unix time `now`: a failure starts a streak (or continues
    /// it, keeping its start), anything else ends it.
    pub fn finished(&mut self, reason: Reason, now: i64) {
        self.last = Some(reason);
        if reason == Reason::Failed {
            self.failing_since.get_or_insert(now);
        } else {
            self.failing_since = None;
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    unit: String,
    reason: &'static str,
}

type Seconds = Gauge<f64, AtomicU64>;

/// The per-unit gauges and the state they derive from.
pub(super) struct Units {
    /// `gitward_unit_ready`: one series per unit, its current reason's.
    ready: Family<ReadyLabels, Gauge>,
    /// `gitward_unit_failing_since_seconds`: present only while the unit fails.
    failing_since: Family<UnitLabels, Gauge>,
    /// `gitward_unit_objects`.
    objects: Family<UnitLabels, Gauge>,
    /// `gitward_unit_cache_bytes`.
    cache_bytes: Family<UnitLabels, Gauge>,
    /// `gitward_unit_render_seconds`.
    render: Family<UnitLabels, Seconds>,
    /// `gitward_unit_apply_seconds`.
    apply: Family<UnitLabels, Seconds>,
    /// Each unit's state; held across the swap of its series, so two updates of one unit
    /// cannot leave two `gitward_unit_ready` series.
    states: Mutex<HashMap<String, UnitState>>,
}

impl Units {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let units = Self {
            ready: Family::default(),
            failing_since: Family::default(),
            objects: Family::default(),
            cache_bytes: Family::default(),
            render: Family::default(),
            apply: Family::default(),
            states: Mutex::default(),
        };
        registry.register(
            "unit_ready",
            "1 when the unit's last sync applied its revision whole and every member is Current, else 0; the reason \
             says why (one series per unit)",
            units.ready.clone(),
        );
        registry.register_with_unit(
            "unit_failing_since",
            "Unix time of the first failed sync of the unit's current run of failed syncs; absent when its last sync \
             did not fail",
            Unit::Seconds,
            units.failing_since.clone(),
        );
        registry.register(
            "unit_objects",
            "Members the unit's metadata cache tracks after its last sync",
            units.objects.clone(),
        );
        registry.register_with_unit(
            "unit_cache",
            "Estimated bytes the unit's metadata cache holds (members' keys, metadata and own strings)",
            Unit::Bytes,
            units.cache_bytes.clone(),
        );
        registry.register_with_unit(
            "unit_render",
            "Time the unit's last sync spent reading, rendering and parsing its revision",
            Unit::Seconds,
            units.render.clone(),
        );
        registry.register_with_unit(
            "unit_apply",
            "Wall time of the unit's last sync less its render: fetch, plan, apply and prune",
            Unit::Seconds,
            units.apply.clone(),
        );
        units
    }

    /// A sync of the unit ended with `outcome` at unix time `now`: its reason, failure streak,
    /// members, cache size and (for a sync that loaded its revision) its timings.
    pub(super) fn finished(&self, unit: &str, outcome: &Outcome, now: i64) {
        self.update(unit, |s| s.finished(Reason::of(outcome), now));
        let labels = UnitLabels { unit: unit.to_owned() };
        self.objects.get_or_create(&labels).set(saturating(outcome.live.tracked));
        self.cache_bytes.get_or_create(&labels).set(saturating(outcome.live.cache_bytes));
        if outcome.report().is_some_and(|r| !r.heal) {
            let timings = outcome.timings;
            self.render.get_or_create(&labels).set(timings.render.as_secs_f64());
            self.apply.get_or_create(&labels).set(timings.apply.saturating_sub(timings.render).as_secs_f64());
        }
    }

    /// Between syncs the unit's members were judged `result` (`healthy`, `degraded`,
    /// `progressing`): the reason follows it when the last sync left a judgement of health
    /// (`healthy`, `degraded`, `progressing`); a failed sync's stays until a sync ends it.
    pub(super) fn followed(&self, unit: &str, result: SyncResult) {
        let now = match result {
            SyncResult::Healthy => Reason::Healthy,
            SyncResult::Degraded => Reason::Degraded,
            SyncResult::Progressing => Reason::Progressing,
            SyncResult::Applied | SyncResult::Failed => return,
        };
        self.update(unit, |s| {
            if matches!(s.last, Some(Reason::Healthy | Reason::Degraded | Reason::Progressing)) {
                s.last = Some(now);
            }
        });
    }

    /// The unit is (or is no longer) suspended; its first call makes its series
    /// (`never_synced` until it syncs).
    pub(super) fn set_suspended(&self, unit: &str, suspended: bool) {
        self.update(unit, |s| s.suspended = suspended);
    }

    /// The unit stopped here: drop its series.
    pub(super) fn forget(&self, unit: &str) {
        let labels = UnitLabels { unit: unit.to_owned() };
        if let Some(state) = self.states.lock().expect("unit states lock").remove(unit) {
            self.ready.remove(&ReadyLabels { unit: unit.to_owned(), reason: state.reason().as_str() });
        }
        self.failing_since.remove(&labels);
        self.objects.remove(&labels);
        self.cache_bytes.remove(&labels);
        self.render.remove(&labels);
        self.apply.remove(&labels);
    }

    /// Applies `change` to the unit's state and brings its `gitward_unit_ready` and
    /// `gitward_unit_failing_since_seconds` series in line, removing the series of the reason
    /// it leaves.
    fn update(&self, unit: &str, change: impl FnOnce(&mut UnitState)) {
        let mut states = self.states.lock().expect("unit states lock");
        let state = states.entry(unit.to_owned()).or_default();
        let before = state.reason();
        change(state);
        let after = state.reason();
        if before != after {
            self.ready.remove(&ReadyLabels { unit: unit.to_owned(), reason: before.as_str() });
        }
        let ready = ReadyLabels { unit: unit.to_owned(), reason: after.as_str() };
        self.ready.get_or_create(&ready).set(i64::from(after == Reason::Healthy));
        let labels = UnitLabels { unit: unit.to_owned() };
        match state.failing_since {
            Some(since) => {
                self.failing_since.get_or_create(&labels).set(since);
            }
            None => {
                self.failing_since.remove(&labels);
            }
        }
    }
}

fn saturating(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::changeset::Action;
    use crate::health::Counts;
    use crate::sync::outcome::{Live, Wait};
    use crate::sync::{Error, Report};

    fn report(actions: &[Action]) -> Report {
        let took = crate::sync::Timings {
            apply: Duration::from_millis(300),
            render: Duration::from_millis(100),
            wait: Duration::ZERO,
        };
        Report { took, ..crate::sync::build::report_numbered("shop", "aaa", actions) }
    }

    fn outcome(report: Option<Report>, wait: Wait, result: SyncResult, health: Option<Counts>) -> Outcome {
        let outcome = match report {
            Some(report) => Outcome::applied(report, wait, result),
            None => Outcome::failed("shop", Error::Task("cancelled".into())),
        };
        Outcome { live: Live { answered: true, tracked: 4, health, cache_bytes: 1000 }, ..outcome }
    }

    fn applied(result: SyncResult) -> Outcome {
        outcome(Some(report(&[Action::Created])), Wait::Healthy, result, None)
    }

    fn failed() -> Outcome {
        outcome(None, Wait::Skipped, SyncResult::Failed, None)
    }

    fn counts(healthy: usize, progressing: usize, degraded: usize) -> Option<Counts> {
        Some(Counts { healthy, progressing, degraded })
    }

    #[test]
    fn each_outcome_names_its_reason() {
        assert_eq!(Reason::of(&applied(SyncResult::Healthy)), Reason::Healthy);
        assert_eq!(Reason::of(&applied(SyncResult::Degraded)), Reason::Degraded);
        assert_eq!(Reason::of(&applied(SyncResult::Progressing)), Reason::Progressing);
        assert_eq!(Reason::of(&failed()), Reason::Failed, "failed as a whole");
        let objects_failed = outcome(Some(report(&[Action::Failed])), Wait::Skipped, SyncResult::Failed, None);
        assert_eq!(Reason::of(&objects_failed), Reason::Failed);
        let mut yielded = applied(SyncResult::Healthy);
        yielded.report_mut().yielded = true;
        assert_eq!(Reason::of(&yielded), Reason::Progressing, "not applied whole");
    }

    #[test]
    fn a_sync_without_a_wait_takes_the_members_health_as_last_judged() {
        let unjudged = |health| outcome(Some(report(&[])), Wait::Disabled, SyncResult::Applied, health);
        assert_eq!(Reason::of(&unjudged(None)), Reason::Unknown);
        assert_eq!(Reason::of(&unjudged(counts(3, 0, 0))), Reason::Healthy);
        assert_eq!(Reason::of(&unjudged(counts(3, 1, 0))), Reason::Progressing);
        assert_eq!(Reason::of(&unjudged(counts(3, 1, 1))), Reason::Degraded);
    }

    #[test]
    fn suspension_wins_over_the_last_sync_and_resuming_restores_it() {
        let mut state = UnitState::default();
        assert_eq!(state.reason(), Reason::NeverSynced);
        state.finished(Reason::Healthy, 100);
        assert_eq!(state.reason(), Reason::Healthy);
        state.suspended = true;
        assert_eq!(state.reason(), Reason::Suspended);
        state.suspended = false;
        assert_eq!(state.reason(), Reason::Healthy);
    }

    #[test]
    fn a_failure_streak_keeps_its_first_time_until_a_sync_does_not_fail() {
        let mut state = UnitState::default();
        state.finished(Reason::Failed, 100);
        state.finished(Reason::Failed, 160);
        assert_eq!(state.failing_since, Some(100));
        state.finished(Reason::Progressing, 200);
        assert_eq!(state.failing_since, None, "applied, even if not healthy yet");
        state.finished(Reason::Failed, 300);
        assert_eq!(state.failing_since, Some(300), "a new streak");
    }

    fn series(registry: &Registry, prefix: &str) -> Vec<String> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out.lines().filter(|l| l.starts_with(prefix)).map(str::to_owned).collect()
    }

    #[test]
    fn a_unit_has_one_ready_series_whose_reason_follows_its_syncs() {
        let mut registry = Registry::with_prefix("gitward");
        let units = Units::register(&mut registry);
        let ready = |r: &Registry| series(r, "gitward_unit_ready{");
        units.set_suspended("shop", false);
        assert_eq!(ready(&registry), [r#"gitward_unit_ready{unit="shop",reason="never_synced"} 0"#]);
        units.finished("shop", &applied(SyncResult::Healthy), 100);
        assert_eq!(ready(&registry), [r#"gitward_unit_ready{unit="shop",reason="healthy"} 1"#]);
        units.finished("shop", &failed(), 200);
        assert_eq!(ready(&registry), [r#"gitward_unit_ready{unit="shop",reason="failed"} 0"#]);
        units.finished("shop", &failed(), 260);
        let failing = series(&registry, "gitward_unit_failing_since_seconds{");
        assert_eq!(failing, [r#"gitward_unit_failing_since_seconds{unit="shop"} 200"#]);
        units.set_suspended("shop", true);
        assert_eq!(ready(&registry), [r#"gitward_unit_ready{unit="shop",reason="suspended"} 0"#]);
        units.set_suspended("shop", false);
        units.finished("shop", &applied(SyncResult::Degraded), 300);
        assert_eq!(ready(&registry), [r#"gitward_unit_ready{unit="shop",reason="degraded"} 0"#]);
        assert!(series(&registry, "gitward_unit_failing_since_seconds{").is_empty());
        units.forget("shop");
        assert!(ready(&registry).is_empty());
    }

    #[test]
    fn a_sync_sets_the_units_members_cache_and_timings() {
        let mut registry = Registry::with_prefix("gitward");
        let units = Units::register(&mut registry);
        units.finished("shop", &applied(SyncResult::Healthy), 100);
        let lines = series(&registry, "gitward_unit_");
        for line in [
            r#"gitward_unit_objects{unit="shop"} 4"#,
            r#"gitward_unit_cache_bytes{unit="shop"} 1000"#,
            r#"gitward_unit_render_seconds{unit="shop"} 0.1"#,
            r#"gitward_unit_apply_seconds{unit="shop"} 0.2"#,
        ] {
            assert!(lines.iter().any(|l| l == line), "missing {line}: {lines:?}");
        }
    }
}
