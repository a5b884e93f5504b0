//! Self-heal bookkeeping of one unit: which drifted objects to re-apply and when, with a
//! per-object backoff so that a field fight (git's `replicas: 2` against an HPA, an operator
//! reconciling the same field) does not become a sync loop at debounce speed.
//!
//! A drifted object is re-applied [`DRIFT_DEBOUNCE`] after its event the first time; each
//! correction of the same object within [`FIGHT_MEMORY`] doubles that delay, up to
//! [`MAX_DRIFT_DELAY`]. From the second correction on it is a fight, reported once with the
//! other manager's name. Each self-heal of an object counts towards its delay as well, whatever
//! it found ([`Heal::healed`]): another writer that keeps changing fields git does not declare
//! (or, in `update` mode, makes gitward's writes meet 409 Conflict) makes every heal find
//! nothing to correct, and without this the object would be re-applied at debounce speed for
//! as long as that writer writes (the 409 storm of the book's "Faults and hostile input": 24 heals a second for 20 objects). Pure apart from the clock the caller passes in; tested with plain
//! instants.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::changeset::Action;
use crate::cluster::drift::Drift;
use crate::object::ObjectRef;

/// How long drift events are gathered before the first self-heal of an object.
pub const DRIFT_DEBOUNCE: Duration = Duration::from_millis(500);
/// The longest an object's self-heal waits after its drift (5 min, below the default 10 min
/// resync, which re-applies everything anyway).
pub const MAX_DRIFT_DELAY: Duration = Duration::from_secs(300);
/// How long a correction counts towards an object's backoff.
pub const FIGHT_MEMORY: Duration = Duration::from_secs(600);

/// One object's corrections.
#[derive(Debug, Clone)]
struct Fight {
    corrections: u32,
    /// Self-heals of the object within [`FIGHT_MEMORY`], whatever they found.
    heals: u32,
    last: Instant,
    manager: Option<String>,
    reported: bool,
}

/// A field fight to report (once per object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FightReport {
    /// The object fought over.
    pub object: ObjectRef,
    /// The other field manager, when the watch event named one.
    pub manager: Option<String>,
    /// Corrections so far within [`FIGHT_MEMORY`].
    pub corrections: u32,
}

/// What the unit's task knows of drift.
#[derive(Debug, Default)]
pub struct Heal {
    due: BTreeMap<ObjectRef, Instant>,
    fights: HashMap<ObjectRef, Fight>,
}

impl Heal {
    /// The delay before re-applying `object` after a drift event: doubles per recent correction.
    pub fn delay(&self, object: &ObjectRef, now: Instant) -> Duration {
        let n = self
            .fights
            .get(object)
            .filter(|f| now.saturating_duration_since(f.last) < FIGHT_MEMORY)
            .map_or(0, |f| f.corrections.max(f.heals).min(12));
        (DRIFT_DEBOUNCE * 2u32.pow(n)).min(MAX_DRIFT_DELAY)
    }

    /// Records a change by someone else.
    pub fn drifted(&mut self, drift: &Drift, now: Instant) {
        if let Some(manager) = &drift.manager
            && let Some(f) = self.fights.get_mut(&drift.object)
        {
            f.manager = Some(manager.clone());
        } else if drift.manager.is_some() {
            let fight = Fight { corrections: 0, heals: 0, last: now, manager: drift.manager.clone(), reported: false };
            self.fights.insert(drift.object.clone(), fight);
        }
        let at = now + self.delay(&drift.object, now);
        self.due.entry(drift.object.clone()).and_modify(|t| *t = (*t).min(at)).or_insert(at);
    }

    /// When the next self-heal is due.
    pub fn next(&self) -> Option<Instant> {
        self.due.values().copied().min()
    }

    /// Takes the objects due for re-applying at `now`.
    pub fn take_due(&mut self, now: Instant) -> BTreeSet<ObjectRef> {
        let due: BTreeSet<ObjectRef> = self.due.iter().filter(|(_, t)| **t <= now).map(|(o, _)| o.clone()).collect();
        self.due.retain(|o, _| !due.contains(o));
        due
    }

    /// Counts the `drift-corrected` entries of a sync; returns the fights to report now (an
    /// object corrected twice within [`FIGHT_MEMORY`], reported once).
    pub fn corrected(&mut self, entries: &[crate::changeset::Entry], now: Instant) -> Vec<FightReport> {
        let mut reports = Vec::new();
        for e in entries.iter().filter(|e| e.action == Action::DriftCorrected) {
            let f = self.fight(&e.object, now);
            f.corrections += 1;
            f.last = now;
            if f.corrections >= 2 && !f.reported {
                f.reported = true;
                reports.push(FightReport {
                    object: e.object.clone(),
                    manager: f.manager.clone(),
                    corrections: f.corrections,
                });
            }
        }
        reports
    }

    /// The fight record of `object`, new or forgotten when its last event is older than
    /// [`FIGHT_MEMORY`].
    fn fight(&mut self, object: &ObjectRef, now: Instant) -> &mut Fight {
        let f = self.fights.entry(object.clone()).or_insert(Fight {
            corrections: 0,
            heals: 0,
            last: now,
            manager: None,
            reported: false,
        });
        if now.saturating_duration_since(f.last) >= FIGHT_MEMORY {
            f.corrections = 0;
            f.heals = 0;
            f.reported = false;
        }
        f
    }

    /// Counts one self-heal of each of `objects`, whatever it found (`unchanged`,
    /// `drift-corrected`, `conflict`, `failed`): the next heal of an object healed `n` times
    /// within [`FIGHT_MEMORY`] waits [`DRIFT_DEBOUNCE`] × 2ⁿ (at most [`MAX_DRIFT_DELAY`]). The
    /// periodic resync still re-applies every object regardless.
    pub fn healed<'a>(&mut self, objects: impl IntoIterator<Item = &'a ObjectRef>, now: Instant) {
        for object in objects {
            let f = self.fight(object, now);
            f.heals += 1;
            f.last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changeset::Entry;
    use crate::object::GroupKind;

    fn deployment() -> ObjectRef {
        ObjectRef::new(GroupKind::from_api_version("apps/v1", "Deployment"), Some("a"), "web")
    }

    fn drift(manager: &str) -> Drift {
        Drift { object: deployment(), resource_version: "5".into(), manager: Some(manager.into()) }
    }

    fn corrected() -> Vec<Entry> {
        vec![Entry { object: deployment(), action: Action::DriftCorrected, message: None, sent: vec![] }]
    }

    #[test]
    fn repeated_drift_of_one_object_backs_off_and_the_fight_is_reported_once() {
        let mut heal = Heal::default();
        let mut now = Instant::now();
        let mut delays = Vec::new();
        let mut reports = Vec::new();
        for _ in 0..6 {
            heal.drifted(&drift("hpa"), now);
            let due = heal.next().unwrap();
            delays.push(due - now);
            now = due;
            let objects = heal.take_due(now);
            assert_eq!(objects, BTreeSet::from([deployment()]));
            reports.extend(heal.corrected(&corrected(), now));
        }
        let ms: Vec<u128> = delays.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, vec![500, 1000, 2000, 4000, 8000, 16000]);
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].manager.as_deref(), Some("hpa"));
    }

    #[test]
    fn heals_that_find_nothing_to_correct_back_off_too_and_are_not_a_fight() {
        let mut heal = Heal::default();
        let mut now = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..6 {
            heal.drifted(&drift("other-writer"), now);
            let due = heal.next().unwrap();
            delays.push((due - now).as_millis());
            now = due;
            let objects = heal.take_due(now);
            heal.healed(&objects, now);
            let unchanged =
                vec![Entry { object: deployment(), action: Action::Unchanged, message: None, sent: vec![] }];
            assert!(heal.corrected(&unchanged, now).is_empty(), "nothing corrected: no fight reported");
        }
        assert_eq!(delays, vec![500, 1000, 2000, 4000, 8000, 16000]);
        assert_eq!(heal.delay(&deployment(), now + FIGHT_MEMORY), DRIFT_DEBOUNCE, "forgotten after a quiet period");
    }

    #[test]
    fn the_delay_is_capped_and_forgotten_after_a_quiet_period() {
        let mut heal = Heal::default();
        let now = Instant::now();
        for _ in 0..20 {
            heal.corrected(&corrected(), now);
        }
        assert_eq!(heal.delay(&deployment(), now), MAX_DRIFT_DELAY);
        assert_eq!(heal.delay(&deployment(), now + FIGHT_MEMORY), DRIFT_DEBOUNCE);
    }
}
