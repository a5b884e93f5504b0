//! What the dashboard shows of each unit, kept in memory: the units of the config (name,
//! cluster, ref) and, per unit, what its last sync left and a bounded ring of its recent syncs.
//! One observer of the sync's [`Outcome`] ([`Recorder`]) feeds it; the dashboard's pages and
//! its live stream read it ([`Board::snapshot`], [`Board::subscribe`]). It holds nothing of the
//! daemon's: the daemon makes one and hands it to the dashboard and to each unit's observers.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use super::Observer;
use crate::config::SyncUnit;
use crate::health::Counts;
use crate::sync::{Ended, Outcome};
use crate::telemetry::Masked;

/// Recent syncs kept per unit: 20. Enough to see a flapping unit's pattern on one screen; at
/// a few hundred bytes each, a fleet of 1,000 units keeps a few MiB.
pub const RECENT_SYNCS: usize = 20;

/// Unhealthy or failed objects kept per unit: 100. A sync that leaves more says how many
/// more ([`UnitRecord::unhealthy_total`]); the rest are in `gitward status`.
pub const UNHEALTHY_SHOWN: usize = 100;

/// Longest message kept per object or error, in characters: 500 (an admission webhook can
/// answer with a page).
const MESSAGE_CHARS: usize = 500;

/// Longest drift diff kept per object, in characters: 4,000 (about 80 lines).
pub const DIFF_CHARS: usize = 4000;

/// A unit as the config names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitInfo {
    /// The unit's name.
    pub name: String,
    /// The `[[cluster]]` it applies to.
    pub cluster: String,
    /// The git ref it follows (empty for a chart or artifact unit).
    pub reference: String,
}

/// One object a sync left failed or not healthy, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// `Kind/ns/name`.
    pub object: String,
    /// `failed` or `conflict` (not applied), else the health verdict (`InProgress`, `Failed`,
    /// `Unknown`, `unread`).
    pub state: String,
    /// The reason and message (the API server's refusal, the health rule's words), masked.
    pub reason: Masked,
}

/// One sync in a unit's ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncEntry {
    /// When it ended.
    pub at: jiff::Timestamp,
    /// What asked for it (`startup`, `push`, `poll`, `resync`, `drift`, …).
    pub trigger: &'static str,
    /// The revision applied or attempted, short ([`crate::source::Revision::short`]).
    pub revision: String,
    /// Apply plus health wait.
    pub duration: Duration,
    /// Objects created, configured (adopted included), drift-corrected, unchanged, pruned,
    /// failed (conflicts and skips included).
    pub counts: [usize; 6],
    /// The result recorded (`healthy`, `applied`, `degraded`, `failed`, …).
    pub result: &'static str,
    /// The error of a sync that failed as a whole (its masked message, clipped).
    pub error: Option<Masked>,
    /// Of a self-heal: what it changed of each drifted object (`Kind/ns/name`, the masked
    /// unified diff, at most [`DIFF_CHARS`] characters), as
    /// [`crate::changeset::ChangeSet::drift_diffs`] holds them.
    pub drift: Vec<(String, Masked)>,
}

/// What a unit's syncs left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitRecord {
    /// The revision last applied whole, short; `None` before the first.
    pub revision: Option<String>,
    /// The result of the last sync.
    pub result: Option<&'static str>,
    /// The members by health, as the unit last judged them (counted as `gitward status` counts
    /// them; zero until a wait has judged the unit).
    pub health: Counts,
    /// When a revision was last applied.
    pub applied_at: Option<jiff::Timestamp>,
    /// Objects the last sync left failed or unhealthy, at most [`UNHEALTHY_SHOWN`].
    pub unhealthy: Vec<Unhealthy>,
    /// How many there were in all.
    pub unhealthy_total: usize,
    /// The error of the last sync, when it failed as a whole (its masked message, clipped).
    pub error: Option<Masked>,
    /// Recent syncs, newest first, at most [`RECENT_SYNCS`].
    pub syncs: VecDeque<SyncEntry>,
}

#[derive(Debug, Default)]
struct Inner {
    units: Vec<UnitInfo>,
    records: BTreeMap<String, UnitRecord>,
}

/// The dashboard's memory of every unit. Cheap to clone (shared); [`Board::subscribe`] tells
/// of each change.
#[derive(Debug, Clone)]
pub struct Board {
    inner: Arc<RwLock<Inner>>,
    changed: Arc<watch::Sender<u64>>,
}

impl Default for Board {
    fn default() -> Self {
        Self { inner: Arc::default(), changed: Arc::new(watch::channel(0).0) }
    }
}

impl Board {
    /// Replaces the units shown (those this replica runs, in config order: at start, after a
    /// reload, a `[[sync_set]]` listing or a change of ownership); forgets the records of units
    /// no longer there.
    pub fn set_units<'a>(&self, units: impl IntoIterator<Item = &'a SyncUnit>) {
        let mut inner = self.inner.write().expect("board lock");
        inner.units = units
            .into_iter()
            .map(|u| UnitInfo { name: u.name.clone(), cluster: u.cluster.clone(), reference: u.reference.clone() })
            .collect();
        let Inner { units, records } = &mut *inner;
        records.retain(|name, _| units.iter().any(|u| &u.name == name));
        drop(inner);
        self.bump();
    }

    /// The units and their records, as of now.
    pub fn snapshot(&self) -> (Vec<UnitInfo>, BTreeMap<String, UnitRecord>) {
        let inner = self.inner.read().expect("board lock");
        (inner.units.clone(), inner.records.clone())
    }

    /// A receiver that sees a new value after each change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Folds `outcome` into its unit's record.
    pub fn record(&self, outcome: &Outcome) {
        let unit = outcome.unit().to_owned();
        {
            let mut inner = self.inner.write().expect("board lock");
            fold(inner.records.entry(unit).or_default(), outcome, jiff::Timestamp::now());
        }
        self.bump();
    }

    /// Folds members judged again between syncs into their unit's record: its result and
    /// health counts follow them, and its objects not healthy are those read now (or, when the
    /// read covered every member, only those).
    pub fn followed(&self, followed: &crate::sync::follow::Followed) {
        {
            let mut inner = self.inner.write().expect("board lock");
            let record = inner.records.entry(followed.unit.clone()).or_default();
            fold_followed(record, followed);
        }
        self.bump();
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// `text` masked, then cut to [`MESSAGE_CHARS`] characters.
fn clip(text: &str) -> Masked {
    Masked::new(text).clipped(MESSAGE_CHARS)
}

/// The record after `outcome`, which ended `now`.
fn fold(record: &mut UnitRecord, outcome: &Outcome, now: jiff::Timestamp) {
    let error = outcome.failure().map(|f| f.message.clipped(MESSAGE_CHARS));
    let mut counts = [0; 6];
    let mut drift = Vec::new();
    if let Ended::Applied(report) = &outcome.ended {
        drift = report
            .changes
            .drift_diffs
            .iter()
            .map(|(o, d)| (o.to_string(), Masked::new(d).clipped(DIFF_CHARS)))
            .collect();
        let c = report.changes.counts();
        counts = [
            c.created,
            c.configured + c.adopted,
            c.drift_corrected,
            c.unchanged,
            c.pruned,
            c.failed + c.conflict + c.skipped,
        ];
        if !report.heal && !report.yielded {
            record.revision = Some(report.revision.short().to_owned());
            record.applied_at = Some(now);
        }
        if let Some(members) = outcome.live.health {
            record.health = members;
        }
        let unhealthy = unhealthy(outcome);
        record.unhealthy_total = unhealthy.len();
        record.unhealthy = unhealthy.into_iter().take(UNHEALTHY_SHOWN).collect();
    }
    record.result = Some(outcome.health.result.as_str());
    record.error = error.clone();
    let entry = SyncEntry {
        at: now,
        trigger: outcome.cause.name,
        revision: outcome.revision().map(|r| r.short().to_owned()).unwrap_or_default(),
        duration: outcome.timings.apply + outcome.timings.wait,
        counts,
        result: outcome.health.result.as_str(),
        error,
        drift,
    };
    record.syncs.push_front(entry);
    record.syncs.truncate(RECENT_SYNCS);
}

/// The record after members were judged again between syncs: the result (unless the last sync
/// failed: only a sync ends that), the counts, and the objects not healthy.
fn fold_followed(record: &mut UnitRecord, followed: &crate::sync::follow::Followed) {
    use crate::health::record::SyncResult;
    if record.result != Some(SyncResult::Failed.as_str()) {
        record.result = Some(followed.result.as_str());
    }
    record.health = followed.counts;
    let applied = ["failed", "conflict"];
    let read: Vec<String> = followed.read.iter().map(|(o, _)| o.to_string()).collect();
    record.unhealthy.retain(|u| applied.contains(&u.state.as_str()) || !(followed.whole || read.contains(&u.object)));
    for (object, status) in &followed.read {
        if let Some(s) = status.as_ref().filter(|s| s.health != crate::health::Health::Current) {
            let reason = clip(&format!("{}: {}", s.reason, s.message));
            record.unhealthy.push(Unhealthy { object: object.to_string(), state: format!("{:?}", s.health), reason });
        }
    }
    record.unhealthy_total = record.unhealthy.len();
    record.unhealthy.truncate(UNHEALTHY_SHOWN);
}

/// The objects `outcome` left failed (not applied) or not healthy, with why.
fn unhealthy(outcome: &Outcome) -> Vec<Unhealthy> {
    use crate::changeset::Action;
    let mut out = Vec::new();
    if let Some(report) = outcome.report() {
        for e in report.changes.entries.iter().filter(|e| matches!(e.action, Action::Failed | Action::Conflict)) {
            let reason = clip(e.message.as_deref().unwrap_or(""));
            out.push(Unhealthy { object: e.object.to_string(), state: e.action.as_str().to_owned(), reason });
        }
    }
    for (object, status) in &outcome.not_ready {
        let (state, reason) = match status {
            Some(s) => (format!("{:?}", s.health), clip(&format!("{}: {}", s.reason, s.message))),
            None => ("unread".to_owned(), Masked::new("its status was never read")),
        };
        out.push(Unhealthy { object: object.to_string(), state, reason });
    }
    out
}

/// The one observer that feeds the [`Board`]: each sync's end, folded into its unit's record.
pub struct Recorder(pub Board);

impl Observer for Recorder {
    fn finished(&mut self, outcome: &Outcome) {
        self.0.record(outcome);
    }

    fn followed(&mut self, followed: &crate::sync::follow::Followed) {
        self.0.followed(followed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_clipped_on_a_character_boundary() {
        let long = "é".repeat(MESSAGE_CHARS + 10);
        let clipped = clip(&long);
        assert_eq!(clipped.chars().count(), MESSAGE_CHARS + 1, "the cut plus an ellipsis");
        assert!(clipped.ends_with('…'));
        assert_eq!(clip("short").as_str(), "short");
    }
}
