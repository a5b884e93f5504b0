//! The last applied revision, time and result of a unit, kept as annotations on its ApplySet
//! parent so that any tool (`kubectl get secret -o yaml`, `gitward status`) reads them from the
//! cluster, not from gitward's memory.
//!
//! | annotation | value |
//! |---|---|
//! | `gitward.dev/last-revision` | the commit SHA last applied |
//! | `gitward.dev/last-applied-at` | when that revision was first applied, RFC 3339 UTC |
//! | `gitward.dev/last-result` | [`SyncResult::as_str`]: `healthy`, `progressing`, `degraded`, `applied`, `failed` |
//! | `gitward.dev/last-path-tree` | the git tree id of the unit's path at that revision, when its objects came from that path's plain files alone |
//! | `gitward.dev/waiting-since` | while a health wait of that revision runs: when it began ([`Waiting`]) |
//! | `gitward.dev/waiting-for` | while it runs: what it waits for, `Deployment/shop/web, … and 2 more` |
//! | `gitward.dev/last-attempted-revision` | the commit SHA last tried, applied or not ([`Attempt`]) |
//! | `gitward.dev/last-attempted-ref` | instead of a revision: the ref last tried that resolved to none |
//! | `gitward.dev/last-error` | why that attempt did not apply cleanly, one sentence; absent after a clean sync |
//! | `gitward.dev/last-failed` | the objects that failed or were skipped, JSON `[{"object", "action", "reason"}]` |
//! | `gitward.dev/retry-at` | after a sync that failed as a whole, when the daemon tries again (RFC 3339 UTC); absent after a clean sync |
//!
//! A sync whose health is waited on writes the record twice: with the apply (the revision,
//! its apply time, `progressing`, the wait and the attempt), and after the wait (the result,
//! the wait gone). Otherwise the record is rewritten only when the revision, the result or the
//! attempt changes, so a resync that changes nothing sends no extra request; every inventory
//! write carries it (server-side apply would otherwise drop annotations its field manager
//! stops declaring).

use std::collections::BTreeMap;
use std::fmt;

use crate::telemetry::Masked;

/// Annotation: the revision last applied.
pub const LAST_REVISION: &str = "gitward.dev/last-revision";
/// Annotation: when the revision reached the recorded result (RFC 3339, UTC).
pub const LAST_APPLIED_AT: &str = "gitward.dev/last-applied-at";
/// Annotation: the recorded result.
pub const LAST_RESULT: &str = "gitward.dev/last-result";
/// Annotation: the id of the git tree at the unit's path at the recorded revision, written
/// when the unit's objects came from the plain files of that path alone
/// (the sync report's `path_tree`): any revision with that tree there brings the objects
/// recorded as applied ([`super::ready::judge`] counts it as applied for a dependent unit).
pub const LAST_PATH_TREE: &str = "gitward.dev/last-path-tree";
/// Annotation: when the health wait of the recorded revision began (RFC 3339, UTC); present
/// only while it runs.
pub const WAITING_SINCE: &str = "gitward.dev/waiting-since";
/// Annotation: what that wait waits for (at most [`WAITING_NAMED`] objects named, the rest
/// counted); present only while it runs.
pub const WAITING_FOR: &str = "gitward.dev/waiting-for";
/// Annotation: the revision last attempted, whether it applied or not.
pub const LAST_ATTEMPTED_REVISION: &str = "gitward.dev/last-attempted-revision";
/// Annotation: the ref last attempted when it resolved to no revision (not found, the fetch
/// failed); in place of [`LAST_ATTEMPTED_REVISION`].
pub const LAST_ATTEMPTED_REF: &str = "gitward.dev/last-attempted-ref";
/// Annotation: why the last attempt did not apply cleanly (absent after a clean sync).
pub const LAST_ERROR: &str = "gitward.dev/last-error";
/// Annotation: the objects the last attempt failed or skipped, as JSON.
pub const LAST_FAILED: &str = "gitward.dev/last-failed";
/// Annotation: when the daemon, backing off after a sync that failed as a whole, tries again
/// (RFC 3339, UTC, whole seconds); written with the failure, absent after a clean sync and
/// never written by a one-shot `gitward sync`.
pub const RETRY_AT: &str = "gitward.dev/retry-at";

/// Longest `gitward.dev/last-error`, in bytes: the parent's annotations share 256 KiB with
/// everything else on it, and one sentence that long is already more than a person reads.
pub const MAX_ERROR_BYTES: usize = 1024;
/// Most objects listed in `gitward.dev/last-failed`; the sentence still counts them all.
pub const MAX_FAILED_OBJECTS: usize = 20;
/// Longest reason of one object in `gitward.dev/last-failed`, in bytes.
pub const MAX_REASON_BYTES: usize = 512;
/// Objects named in `gitward.dev/waiting-for`; the others are counted (`and 6 more`).
pub const WAITING_NAMED: usize = 3;

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
    /// When that revision was first applied (the apply's time, not the wait's end), RFC 3339
    /// UTC, to the second.
    pub applied_at: String,
    /// The result: `progressing` while its health wait runs (`waiting`), then the wait's.
    pub result: SyncResult,
    /// The health wait of `revision` in progress, written with the apply and removed with the
    /// result; `None` when no wait runs. A daemon killed during the wait leaves it until the
    /// unit's next sync.
    pub waiting: Option<Waiting>,
    /// The id of the git tree at the unit's path at `revision` ([`LAST_PATH_TREE`]), when its
    /// objects came from that path's plain files alone; `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_tree: Option<String>,
}

/// A health wait in progress, as the parent records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    /// When it began, RFC 3339 UTC (`gitward.dev/waiting-since`).
    pub since: String,
    /// What it waits for: `Deployment/shop/web, StatefulSet/shop/db and 2 more`
    /// (`gitward.dev/waiting-for`, [`Waiting::describe`]).
    #[serde(rename = "for")]
    pub objects: String,
}

impl Waiting {
    /// A wait for `objects` (printed `Kind/ns/name`) beginning now.
    pub fn now<T: fmt::Display>(objects: &[T]) -> Self {
        Self { since: timestamp(jiff::Timestamp::now()), objects: Self::describe(objects) }
    }

    /// The first [`WAITING_NAMED`] of `objects` joined by `, `, then `and N more`; `nothing`
    /// for none.
    pub fn describe<T: fmt::Display>(objects: &[T]) -> String {
        let named: Vec<String> = objects.iter().take(WAITING_NAMED).map(ToString::to_string).collect();
        let mut text = if named.is_empty() { "nothing".to_string() } else { named.join(", ") };
        if objects.len() > WAITING_NAMED {
            text.push_str(&format!(" and {} more", objects.len() - WAITING_NAMED));
        }
        bounded(&text, MAX_REASON_BYTES)
    }
}

impl fmt::Display for Waiting {
    /// `waiting (since <time>, for <objects>)`, as `gitward status` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "waiting (since {}, for {})", self.since, self.objects)
    }
}

/// `t` in RFC 3339 UTC, to the second.
fn timestamp(t: jiff::Timestamp) -> String {
    jiff::Timestamp::from_second(t.as_second()).unwrap_or(t).to_string()
}

impl Record {
    /// A record of `revision` with `result`, stamped now, no wait in progress.
    pub fn now(revision: impl Into<String>, result: SyncResult) -> Self {
        Self::applied(revision, std::time::Duration::ZERO, result)
    }

    /// A record of `revision` applied `ago` (a duration before now) with `result`, no wait in
    /// progress.
    pub fn applied(revision: impl Into<String>, ago: std::time::Duration, result: SyncResult) -> Self {
        let now = jiff::Timestamp::now();
        let at = jiff::SignedDuration::try_from(ago).ok().and_then(|d| now.checked_sub(d).ok()).unwrap_or(now);
        Self { revision: revision.into(), applied_at: timestamp(at), result, waiting: None, path_tree: None }
    }

    /// True when `other` records the same revision, result, wait and path tree (the apply's
    /// time does not count: a record is rewritten only when what it says changes).
    pub fn same_outcome(&self, other: &Record) -> bool {
        self.revision == other.revision
            && self.result == other.result
            && self.waiting == other.waiting
            && self.path_tree == other.path_tree
    }

    /// The annotations that carry it.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::from([
            (LAST_REVISION.to_string(), self.revision.clone()),
            (LAST_APPLIED_AT.to_string(), self.applied_at.clone()),
            (LAST_RESULT.to_string(), self.result.as_str().to_string()),
        ]);
        if let Some(w) = &self.waiting {
            out.insert(WAITING_SINCE.to_string(), w.since.clone());
            out.insert(WAITING_FOR.to_string(), w.objects.clone());
        }
        if let Some(tree) = &self.path_tree {
            out.insert(LAST_PATH_TREE.to_string(), tree.clone());
        }
        out
    }

    /// Reads a record from a parent's annotations; `None` when any of the three is missing or
    /// the result is not one gitward writes. The wait is read when both its annotations are.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<Self> {
        let waiting = match (annotations.get(WAITING_SINCE), annotations.get(WAITING_FOR)) {
            (Some(since), Some(objects)) => Some(Waiting { since: since.clone(), objects: objects.clone() }),
            _ => None,
        };
        Some(Self {
            revision: annotations.get(LAST_REVISION)?.clone(),
            applied_at: annotations.get(LAST_APPLIED_AT)?.clone(),
            result: SyncResult::parse(annotations.get(LAST_RESULT)?)?,
            waiting,
            path_tree: annotations.get(LAST_PATH_TREE).cloned(),
        })
    }
}

/// One object the last attempt did not apply: failed, skipped or in conflict.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NotApplied {
    /// `Kind/ns/name`.
    pub object: String,
    /// The change-set action: `failed`, `skipped` or `conflict`.
    pub action: String,
    /// Why (the API server's message, the dependency that failed, the refused prune), cut to
    /// [`MAX_REASON_BYTES`].
    pub reason: String,
}

/// What the parent records of the last attempt to sync, applied or not: the revision tried,
/// and why it did not apply cleanly. Written with the [`Record`] when it changes; a clean sync
/// clears the error.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Attempt {
    /// The revision last attempted (`gitward.dev/last-attempted-revision`); `None` before the
    /// first attempt, or when the ref resolved to no revision (`reference`).
    pub revision: Option<String>,
    /// The ref last attempted when it resolved to no revision — not found, or the fetch
    /// failed (`gitward.dev/last-attempted-ref`); `None` when `revision` says what was tried.
    pub reference: Option<String>,
    /// Why it did not apply cleanly (`gitward.dev/last-error`), at most [`MAX_ERROR_BYTES`];
    /// `None` after a clean sync.
    pub error: Option<String>,
    /// The objects that failed or were skipped (`gitward.dev/last-failed`), at most
    /// [`MAX_FAILED_OBJECTS`].
    pub failed: Vec<NotApplied>,
    /// When the daemon tries again after this failed attempt (`gitward.dev/retry-at`, RFC 3339
    /// UTC); `None` when no retry is scheduled (a clean sync, a one-shot `gitward sync`), or
    /// when the annotation is not a timestamp.
    pub retry_at: Option<String>,
}

impl Attempt {
    /// A clean sync of `revision`: no error, nothing failed.
    pub fn clean(revision: impl Into<String>) -> Self {
        Self { revision: Some(revision.into()), ..Self::default() }
    }

    /// An attempt of `revision` that failed as a whole with `error` (a parse or render error,
    /// an unknown kind, a refused signature), masked before it is cut to [`MAX_ERROR_BYTES`].
    pub fn failed(revision: impl Into<String>, error: &Masked) -> Self {
        Self {
            revision: Some(revision.into()),
            reference: None,
            error: Some(bounded(error, MAX_ERROR_BYTES)),
            ..Self::default()
        }
    }

    /// An attempt of `reference` that resolved to no revision (not found, the fetch failed),
    /// with `error` (masked, then cut): no revision is named, least of all the one applied.
    pub fn unresolved(reference: impl Into<String>, error: &Masked) -> Self {
        Self {
            revision: None,
            reference: Some(reference.into()),
            error: Some(bounded(error, MAX_ERROR_BYTES)),
            ..Self::default()
        }
    }

    /// This attempt, with the daemon's next try due at `at` (written as [`RETRY_AT`]).
    pub fn retrying_at(self, at: std::time::SystemTime) -> Self {
        let retry_at = jiff::Timestamp::try_from(at).ok().map(timestamp);
        Self { retry_at, ..self }
    }

    /// What was attempted, as `gitward status` prints it: the revision, or
    /// `ref <name> (not resolved)`; `None` before the first attempt.
    pub fn attempted(&self) -> Option<String> {
        match (&self.revision, &self.reference) {
            (Some(r), _) => Some(r.clone()),
            (None, Some(name)) => Some(format!("ref {name} (not resolved)")),
            (None, None) => None,
        }
    }

    /// An attempt of `revision` that applied, except `objects` (failed, skipped or in
    /// conflict), and with `prune_refused` when the prune was refused. The error sentence
    /// names the refused prune, counts the objects and lists the first of them with their
    /// reasons; `failed` keeps the first [`MAX_FAILED_OBJECTS`].
    pub fn partial(revision: impl Into<String>, objects: Vec<NotApplied>, prune_refused: Option<&str>) -> Self {
        let mut parts = Vec::new();
        if let Some(reason) = prune_refused {
            parts.push(format!("prune refused: {reason}"));
        }
        // Objects skipped only because the prune was refused are told by that sentence.
        let listed: Vec<&NotApplied> =
            objects.iter().filter(|o| prune_refused.is_none() || !o.reason.starts_with("prune refused")).collect();
        if !listed.is_empty() {
            let n = listed.len();
            let noun = if n == 1 { "object" } else { "objects" };
            let each: Vec<String> = listed.iter().map(|o| format!("{} {}: {}", o.object, o.action, o.reason)).collect();
            parts.push(format!("{n} {noun} not applied: {}", each.join("; ")));
        }
        // Masked before it is cut: a cut through a value would leave a part no mask matches.
        let error = (!parts.is_empty()).then(|| bounded(&Masked::new(parts.join("; ")), MAX_ERROR_BYTES));
        let failed = objects
            .into_iter()
            .take(MAX_FAILED_OBJECTS)
            .map(|o| NotApplied { reason: bounded(&Masked::new(&o.reason), MAX_REASON_BYTES), ..o })
            .collect();
        Self { revision: Some(revision.into()), error, failed, ..Self::default() }
    }

    /// The annotations that carry it (none for an empty attempt). The error and the reasons
    /// are masked ([`crate::telemetry::mask`]): an API server's message may quote a decrypted
    /// value, and the parent is readable by whoever may read the unit's namespace.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        use crate::telemetry::mask::mask;
        let mut out = BTreeMap::new();
        if let Some(r) = &self.revision {
            out.insert(LAST_ATTEMPTED_REVISION.to_string(), r.clone());
        }
        if let Some(r) = &self.reference {
            out.insert(LAST_ATTEMPTED_REF.to_string(), r.clone());
        }
        if let Some(e) = &self.error {
            out.insert(LAST_ERROR.to_string(), mask(e).into_owned());
        }
        if !self.failed.is_empty() {
            let failed = serde_json::to_string(&self.failed).unwrap_or_default();
            out.insert(LAST_FAILED.to_string(), mask(&failed).into_owned());
        }
        if let Some(at) = &self.retry_at {
            out.insert(RETRY_AT.to_string(), at.clone());
        }
        out
    }

    /// Reads an attempt from a parent's annotations; an unreadable `last-failed` reads as none,
    /// a `retry-at` that is no RFC 3339 timestamp as no retry.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Self {
        Self {
            revision: annotations.get(LAST_ATTEMPTED_REVISION).cloned(),
            reference: annotations.get(LAST_ATTEMPTED_REF).cloned(),
            error: annotations.get(LAST_ERROR).cloned(),
            failed: annotations.get(LAST_FAILED).and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default(),
            retry_at: annotations.get(RETRY_AT).and_then(|t| t.parse::<jiff::Timestamp>().ok()).map(timestamp),
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary, ending in `…` when cut.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_applied(object: &str, action: &str, reason: &str) -> NotApplied {
        NotApplied { object: object.into(), action: action.into(), reason: reason.into() }
    }

    #[test]
    fn an_attempt_reads_back_from_its_annotations() {
        let a = Attempt::partial("3f2a", vec![not_applied("ConfigMap/a/x", "failed", "denied")], None);
        assert_eq!(a.error.as_deref(), Some("1 object not applied: ConfigMap/a/x failed: denied"));
        assert_eq!(Attempt::from_annotations(&a.annotations()), a);
        assert!(Attempt::clean("3f2a").annotations().keys().eq([LAST_ATTEMPTED_REVISION]));
        assert_eq!(Attempt::from_annotations(&BTreeMap::new()), Attempt::default());
    }

    #[test]
    fn the_retry_time_is_written_with_the_failure_and_read_back_in_whole_seconds() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_795_000_000_750);
        let a = Attempt::unresolved("main", &Masked::new("fetch from /srv/git failed")).retrying_at(at);
        assert_eq!(a.retry_at.as_deref(), Some("2026-11-18T11:06:40Z"));
        assert_eq!(a.annotations().get(RETRY_AT).map(String::as_str), Some("2026-11-18T11:06:40Z"));
        assert_eq!(Attempt::from_annotations(&a.annotations()), a);
        assert!(!Attempt::clean("3f2a").annotations().contains_key(RETRY_AT), "a clean sync clears it");
    }

    #[test]
    fn a_retry_time_that_is_no_timestamp_reads_as_no_retry() {
        for bad in ["", "soon", "2026-13-40T00:00:00Z", "1795000000"] {
            let annotations = BTreeMap::from([(RETRY_AT.to_string(), bad.to_string())]);
            assert_eq!(Attempt::from_annotations(&annotations).retry_at, None, "{bad:?}");
        }
        let offset = BTreeMap::from([(RETRY_AT.to_string(), "2026-11-18T12:06:40+01:00".to_string())]);
        assert_eq!(Attempt::from_annotations(&offset).retry_at.as_deref(), Some("2026-11-18T11:06:40Z"));
    }

    #[test]
    fn a_refused_prune_is_one_sentence_and_its_skipped_members_are_kept_apart() {
        let skipped = not_applied("ConfigMap/a/old", "skipped", "prune refused: over max_prune_fraction");
        let a = Attempt::partial("3f2a", vec![skipped.clone()], Some("over max_prune_fraction"));
        assert_eq!(a.error.as_deref(), Some("prune refused: over max_prune_fraction"));
        assert_eq!(a.failed, [skipped]);
    }

    #[test]
    fn the_error_and_the_object_list_are_bounded() {
        let many: Vec<NotApplied> =
            (0..100).map(|i| not_applied(&format!("ConfigMap/a/x{i}"), "failed", &"é".repeat(400))).collect();
        let a = Attempt::partial("3f2a", many, None);
        let error = a.error.unwrap();
        assert!(error.len() <= MAX_ERROR_BYTES && error.starts_with("100 objects not applied: "), "{error}");
        assert!(error.ends_with('…'));
        assert_eq!(a.failed.len(), MAX_FAILED_OBJECTS);
        assert!(a.failed.iter().all(|o| o.reason.len() <= MAX_REASON_BYTES));
        assert_eq!(bounded("short", 10), "short");
    }

    #[test]
    fn a_record_reads_back_from_its_annotations() {
        let r = Record::now("3f2a", SyncResult::Degraded);
        assert_eq!(Record::from_annotations(&r.annotations()), Some(r.clone()));
        assert!(r.applied_at.ends_with('Z'), "{}", r.applied_at);
    }

    #[test]
    fn only_revision_and_result_make_a_record_new() {
        let a = Record {
            revision: "a".into(),
            applied_at: "t1".into(),
            result: SyncResult::Healthy,
            waiting: None,
            path_tree: None,
        };
        let later = Record { applied_at: "t2".into(), ..a.clone() };
        assert!(a.same_outcome(&later));
        assert!(!a.same_outcome(&Record { result: SyncResult::Degraded, ..a.clone() }));
        assert!(!a.same_outcome(&Record { revision: "b".into(), ..a.clone() }));
        let waiting = Some(Waiting { since: "t1".into(), objects: "Deployment/a/web".into() });
        assert!(!a.same_outcome(&Record { waiting, ..a.clone() }), "a wait begun is news");
        let tree = Record { path_tree: Some("4b82".into()), ..a.clone() };
        assert!(!a.same_outcome(&tree), "a path tree first recorded is news");
        assert_eq!(Record::from_annotations(&tree.annotations()), Some(tree));
    }

    #[test]
    fn a_wait_reads_back_and_names_its_first_objects() {
        let mut r = Record::applied("3f2a", std::time::Duration::from_secs(3), SyncResult::Progressing);
        r.waiting = Some(Waiting::now(&["Deployment/a/web"]));
        assert_eq!(Record::from_annotations(&r.annotations()), Some(r.clone()));
        let w = r.waiting.unwrap();
        assert!(w.to_string().starts_with("waiting (since 20") && w.to_string().ends_with(", for Deployment/a/web)"));
        let five = ["A/a/1", "A/a/2", "A/a/3", "A/a/4", "A/a/5"];
        assert_eq!(Waiting::describe(&five), "A/a/1, A/a/2, A/a/3 and 2 more");
        assert!(Record::now("3f2a", SyncResult::Healthy).annotations().keys().all(|k| !k.contains("waiting")));
    }

    #[test]
    fn a_ref_that_resolved_to_nothing_names_no_revision() {
        let a = Attempt::unresolved("v9.9.9", &Masked::new("ref v9.9.9 not found"));
        assert_eq!(a.attempted().as_deref(), Some("ref v9.9.9 (not resolved)"));
        assert!(!a.annotations().contains_key(LAST_ATTEMPTED_REVISION));
        assert_eq!(Attempt::from_annotations(&a.annotations()), a);
        assert_eq!(Attempt::clean("3f2a").attempted().as_deref(), Some("3f2a"));
    }

    #[test]
    fn an_unknown_result_is_no_record() {
        let mut ann = Record::now("a", SyncResult::Healthy).annotations();
        ann.insert(LAST_RESULT.into(), "excellent".into());
        assert_eq!(Record::from_annotations(&ann), None);
    }
}
