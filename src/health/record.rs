//! The last applied revision, time and result of a unit, kept as annotations on its ApplySet
//! parent so that any tool (`kubectl get secret -o yaml`, `gitward status`) reads them from the
//! cluster, not from gitward's memory.
//!
//! | annotation | value |
//! |---|---|
//! | `gitward.dev/last-revision` | the commit SHA last applied |
//! | `gitward.dev/last-applied-at` | when that revision first reached this result, RFC 3339 UTC |
//! | `gitward.dev/last-result` | [`SyncResult::as_str`]: `healthy`, `progressing`, `degraded`, `applied`, `failed` |
//!
//! The record is rewritten only when the revision or the result changes, so a resync that
//! changes nothing sends no extra request; every inventory write carries it (server-side apply
//! would otherwise drop annotations its field manager stops declaring).

use std::collections::BTreeMap;
use std::fmt;

/// Annotation: the revision last applied.
pub const LAST_REVISION: &str = "gitward.dev/last-revision";
/// Annotation: when the revision reached the recorded result (RFC 3339, UTC).
pub const LAST_APPLIED_AT: &str = "gitward.dev/last-applied-at";
/// Annotation: the recorded result.
pub const LAST_RESULT: &str = "gitward.dev/last-result";

/// The outcome of one sync and its health wait, as recorded on the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncResult {
    /// Applied, and every object the sync changed became `Current`.
    Healthy,
    /// Applied; the health wait ended (timeout) with objects still in progress, or was
    /// cancelled (SIGHUP, shutdown) before it could judge them.
    Progressing,
    /// Applied; an object the sync changed is `Failed`.
    Degraded,
    /// Applied; no health wait ran (`health_timeout = 0`, or `gitward sync` without `--wait`).
    Applied,
    /// An object failed, was skipped or met a conflict: the revision is not fully applied.
    Failed,
}

impl SyncResult {
    /// The lowercase value written to `gitward.dev/last-result`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncResult::Healthy => "healthy",
            SyncResult::Progressing => "progressing",
            SyncResult::Degraded => "degraded",
            SyncResult::Applied => "applied",
            SyncResult::Failed => "failed",
        }
    }

    /// Reads a recorded value; `None` for one gitward does not know.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Healthy, Self::Progressing, Self::Degraded, Self::Applied, Self::Failed]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

impl fmt::Display for SyncResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the parent records of the last sync.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Record {
    /// The revision (commit SHA).
    pub revision: String,
    /// When it reached `result`, RFC 3339 UTC.
    pub applied_at: String,
    /// The result.
    pub result: SyncResult,
}

impl Record {
    /// A record of `revision` with `result`, stamped now.
    pub fn now(revision: impl Into<String>, result: SyncResult) -> Self {
        let now = jiff::Timestamp::now();
        let applied_at = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now).to_string();
        Self { revision: revision.into(), applied_at, result }
    }

    /// True when `other` records the same revision and result (the time does not count: a
    /// record is rewritten only when what it says changes).
    pub fn same_outcome(&self, other: &Record) -> bool {
        self.revision == other.revision && self.result == other.result
    }

    /// The annotations that carry it.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LAST_REVISION.to_string(), self.revision.clone()),
            (LAST_APPLIED_AT.to_string(), self.applied_at.clone()),
            (LAST_RESULT.to_string(), self.result.as_str().to_string()),
        ])
    }

    /// Reads a record from a parent's annotations; `None` when any of the three is missing or
    /// the result is not one gitward writes.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<Self> {
        Some(Self {
            revision: annotations.get(LAST_REVISION)?.clone(),
            applied_at: annotations.get(LAST_APPLIED_AT)?.clone(),
            result: SyncResult::parse(annotations.get(LAST_RESULT)?)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_from_its_annotations() {
        let r = Record::now("3f2a", SyncResult::Degraded);
        assert_eq!(Record::from_annotations(&r.annotations()), Some(r.clone()));
        assert!(r.applied_at.ends_with('Z'), "{}", r.applied_at);
    }

    #[test]
    fn only_revision_and_result_make_a_record_new() {
        let a = Record { revision: "a".into(), applied_at: "t1".into(), result: SyncResult::Healthy };
        let later = Record { applied_at: "t2".into(), ..a.clone() };
        assert!(a.same_outcome(&later));
        assert!(!a.same_outcome(&Record { result: SyncResult::Degraded, ..a.clone() }));
        assert!(!a.same_outcome(&Record { revision: "b".into(), ..a.clone() }));
    }

    #[test]
    fn an_unknown_result_is_no_record() {
        let mut ann = Record::now("a", SyncResult::Healthy).annotations();
        ann.insert(LAST_RESULT.into(), "excellent".into());
        assert_eq!(Record::from_annotations(&ann), None);
    }
}
