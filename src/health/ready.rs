//! Whether a unit is ready for the units that depend on it (`depends_on`, Flux's `dependsOn`),
//! judged from what its ApplySet parent records ([`super::record`]) — never from a replica's
//! memory, so the judgement is the same on every replica and under sharding.
//!
//! A dependency is ready when, in this order:
//! 1. it has synced: its parent records a revision ([`Unmet::NotSynced`] otherwise);
//! 2. it applied its current revision: its last attempt is the revision it records (no failed
//!    or unresolved attempt after it), and, when it follows the same git repository and ref as
//!    the dependent unit, that revision is the one the dependent is about to sync, or one
//!    whose tree at the dependency's path is the one recorded in `gitward.dev/last-path-tree`
//!    (the dependency's objects came from that path's plain files alone, so the dependent's
//!    revision brings the very objects it applied: a push to another path of the repository
//!    leaves it ready) ([`Unmet::RevisionNotApplied`]);
//! 3. it is healthy: no health wait is recorded in progress and the recorded result is
//!    `healthy` — every member `Current` ([`Unmet::NotHealthy`]) — or, when the entry gives a
//!    `ready_expr`, that CEL expression evaluates to `true` over [`ExprInput`]
//!    ([`Unmet::ExprFalse`]; an expression that fails or is not a bool is [`Unmet::ExprError`]).
//!
//! The expression sees one variable, `status`, a map with the keys of [`ExprInput`]
//! (`status.health == 'healthy' && !status.waiting`). Pure: the callers read the annotations.

use std::collections::BTreeMap;
use std::fmt;

use super::record::{Attempt, LAST_APPLIED_AT, LAST_PATH_TREE, LAST_RESULT, LAST_REVISION, WAITING_FOR, WAITING_SINCE};

/// What a `ready_expr` sees as `status`: the dependency's record on its ApplySet parent, each
/// key present (an empty string, `false` or 0 when the parent records nothing of it).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExprInput {
    /// The parent records a sync (`gitward.dev/last-revision` is set).
    pub synced: bool,
    /// The revision last applied (`gitward.dev/last-revision`), a commit SHA, OCI digest or
    /// chart version.
    pub revision: String,
    /// The recorded result (`gitward.dev/last-result`): `healthy`, `progressing`, `degraded`,
    /// `applied` (no health wait ran) or `failed`; `progressing` while a wait runs.
    pub health: String,
    /// A health wait of `revision` is in progress (`gitward.dev/waiting-since` is set).
    pub waiting: bool,
    /// What that wait waits for (`gitward.dev/waiting-for`), `Kind/ns/name, … and N more`.
    pub waiting_for: String,
    /// When `revision` was first applied (`gitward.dev/last-applied-at`), RFC 3339 UTC.
    pub applied_at: String,
    /// The revision last attempted, applied or not (`gitward.dev/last-attempted-revision`;
    /// `ref <name> (not resolved)` when the ref resolved to none).
    pub attempted: String,
    /// Why the last attempt did not apply cleanly (`gitward.dev/last-error`).
    pub error: String,
    /// How many objects the last attempt failed or skipped (`gitward.dev/last-failed`, at most
    /// 20 listed).
    pub failed: i64,
}

impl ExprInput {
    /// The status recorded in a parent's `gitward.dev/` annotations.
    pub fn of(annotations: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| annotations.get(k).cloned().unwrap_or_default();
        let attempt = Attempt::from_annotations(annotations);
        Self {
            synced: annotations.contains_key(LAST_REVISION),
            revision: get(LAST_REVISION),
            health: get(LAST_RESULT),
            waiting: annotations.contains_key(WAITING_SINCE),
            waiting_for: get(WAITING_FOR),
            applied_at: get(LAST_APPLIED_AT),
            attempted: attempt.attempted().unwrap_or_default(),
            error: attempt.error.unwrap_or_default(),
            failed: i64::try_from(attempt.failed.len()).unwrap_or(i64::MAX),
        }
    }
}

/// Why a dependency is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmet {
    /// Its parent has not been read yet (the watch has not listed): not known ready.
    NotRead,
    /// Its parent records no sync.
    NotSynced,
    /// It has not applied the revision it should have: its last attempt (`attempted`) is not
    /// the revision it records, or it records `recorded` where the dependent syncs `wanted`.
    RevisionNotApplied {
        /// The revision it records as applied (empty: none).
        recorded: String,
        /// The revision it should have applied: its last attempt, or the dependent's.
        wanted: String,
    },
    /// Its recorded result is not `healthy`, or a health wait is in progress: the result, or
    /// `waiting for <objects>`.
    NotHealthy(String),
    /// Its `ready_expr` evaluated to `false`.
    ExprFalse,
    /// Its `ready_expr` failed or did not give a bool: the error.
    ExprError(String),
}

impl Unmet {
    /// A short label for metrics and JSON: `not-read`, `not-synced`, `revision-not-applied`,
    /// `not-healthy`, `ready-expr-false`, `ready-expr-error`.
    pub fn label(&self) -> &'static str {
        match self {
            Unmet::NotRead => "not-read",
            Unmet::NotSynced => "not-synced",
            Unmet::RevisionNotApplied { .. } => "revision-not-applied",
            Unmet::NotHealthy(_) => "not-healthy",
            Unmet::ExprFalse => "ready-expr-false",
            Unmet::ExprError(_) => "ready-expr-error",
        }
    }
}

impl fmt::Display for Unmet {
    /// `not yet synced`, `revision not applied (records 3f2a9c1, not 9c1e0b7)`, `not healthy
    /// (progressing)`, `ready_expr false`, `ready_expr failed: …`, `record not read yet`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unmet::NotRead => f.write_str("record not read yet"),
            Unmet::NotSynced => f.write_str("not yet synced"),
            Unmet::RevisionNotApplied { recorded, wanted } => {
                // A commit SHA shortened as `/readyz` does; a ref or chart version kept whole.
                let short = |r: &str| match r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit()) {
                    true => r[..12].to_owned(),
                    false => r.to_owned(),
                };
                let recorded = if recorded.is_empty() { "none".to_owned() } else { short(recorded) };
                write!(f, "revision not applied (records {recorded}, not {})", short(wanted))
            }
            Unmet::NotHealthy(what) => write!(f, "not healthy ({what})"),
            Unmet::ExprFalse => f.write_str("ready_expr false"),
            Unmet::ExprError(e) => write!(f, "ready_expr failed: {e}"),
        }
    }
}

/// One dependency that is not ready, and why: printed `base (not healthy (progressing))`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    /// The dependency's unit name.
    pub unit: String,
    /// Why it is not ready.
    pub why: Unmet,
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.unit, self.why)
    }
}

/// The revision a dependent unit on the same source (git repository and ref) is about to
/// sync, and what it holds at the dependency's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted<'a> {
    /// The revision (commit SHA).
    pub revision: &'a str,
    /// The id of the git tree at the dependency's path at `revision`; `None` when not read
    /// (then only that very revision recorded will do).
    pub path_tree: Option<&'a str>,
}

impl Wanted<'_> {
    /// True when the dependency records a revision with the same tree at its path as this one
    /// ([`LAST_PATH_TREE`]), and its last attempt is that recorded revision: its objects are
    /// this revision's.
    fn same_tree(&self, annotations: &BTreeMap<String, String>, attempted: Option<&str>, recorded: &str) -> bool {
        let tree = annotations.get(LAST_PATH_TREE).map(String::as_str);
        tree.is_some() && tree == self.path_tree && attempted.is_none_or(|a| a == recorded)
    }
}

/// Judges one dependency from its parent's `gitward.dev/` annotations (`None`: not read yet;
/// an empty map: no parent, or one that records nothing): `None` when it is ready, else why
/// not. `wanted`: what the dependent unit is about to sync, when both follow the same git
/// repository and ref; `ready_expr`: the entry's CEL expression, compiled here (the config
/// checked it compiles).
pub fn judge(
    annotations: Option<&BTreeMap<String, String>>,
    ready_expr: Option<&str>,
    wanted: Option<Wanted<'_>>,
) -> Option<Unmet> {
    let Some(annotations) = annotations else { return Some(Unmet::NotRead) };
    let status = ExprInput::of(annotations);
    if !status.synced {
        return Some(Unmet::NotSynced);
    }
    let attempt = Attempt::from_annotations(annotations);
    let attempted = match (&attempt.revision, &attempt.reference) {
        (Some(r), _) => Some(r.clone()),
        (None, Some(_)) => Some(status.attempted.clone()),
        (None, None) => None,
    };
    let behind = match wanted {
        Some(w) if w.same_tree(annotations, attempted.as_deref(), &status.revision) => None,
        Some(w) => Some(w.revision.to_owned()),
        None => attempted,
    };
    if let Some(wanted) = behind
        && wanted != status.revision
    {
        return Some(Unmet::RevisionNotApplied { recorded: status.revision, wanted });
    }
    match ready_expr {
        Some(expr) => evaluate(expr, &status).err(),
        None if status.waiting => Some(Unmet::NotHealthy(format!("waiting for {}", status.waiting_for))),
        None if status.health != "healthy" => Some(Unmet::NotHealthy(status.health)),
        None => None,
    }
}

/// Checks a `ready_expr` before any unit runs (`gitward validate`, `gitward run`): it must
/// compile, read only keys [`ExprInput`] has, and give a bool — evaluated over three statuses (one
/// that records nothing, one synced and healthy, one synced with a wait in progress), so a key
/// behind `&&` or `||` is read in at least one. A typo such as `status.helth` would otherwise
/// keep the dependent unit waiting, each judgement an [`Unmet::ExprError`].
///
/// Errors: the CEL error (`No such key: helth`) or `gave …, not a bool`.
pub fn check(expr: &str) -> Result<(), String> {
    let synced = ExprInput { synced: true, health: "healthy".into(), ..ExprInput::default() };
    let waiting = ExprInput { waiting: true, ..synced.clone() };
    for status in [ExprInput::default(), synced, waiting] {
        match evaluate(expr, &status) {
            Ok(()) | Err(Unmet::ExprFalse) => {}
            Err(Unmet::ExprError(e)) => return Err(e),
            Err(other) => return Err(other.to_string()),
        }
    }
    Ok(())
}

/// Evaluates `expr` with `status` bound: `Ok` when it gives `true`.
fn evaluate(expr: &str, status: &ExprInput) -> Result<(), Unmet> {
    let program = cel::Program::compile(expr).map_err(|e| Unmet::ExprError(e.to_string()))?;
    let mut context = cel::Context::default();
    context.add_variable("status", status).map_err(|e| Unmet::ExprError(e.to_string()))?;
    match program.execute(&context) {
        Ok(cel::Value::Bool(true)) => Ok(()),
        Ok(cel::Value::Bool(false)) => Err(Unmet::ExprFalse),
        Ok(other) => Err(Unmet::ExprError(format!("gave {other:?}, not a bool"))),
        Err(e) => Err(Unmet::ExprError(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::record::{Attempt, Record, SyncResult, Waiting};

    fn recorded(result: SyncResult) -> BTreeMap<String, String> {
        let mut a = Record::now("aaa", result).annotations();
        a.extend(Attempt::clean("aaa").annotations());
        a
    }

    fn wanted<'a>(revision: &'a str, path_tree: Option<&'a str>) -> Wanted<'a> {
        Wanted { revision, path_tree }
    }

    #[test]
    fn a_revision_with_the_recorded_tree_at_the_dependency_path_counts_as_applied() {
        let mut a = Record { path_tree: Some("t1".into()), ..Record::now("aaa", SyncResult::Healthy) }.annotations();
        a.extend(Attempt::clean("aaa").annotations());
        assert_eq!(judge(Some(&a), None, Some(wanted("bbb", Some("t1")))), None, "the same tree: ready");
        let other = judge(Some(&a), None, Some(wanted("bbb", Some("t2"))));
        assert_eq!(other, Some(Unmet::RevisionNotApplied { recorded: "aaa".into(), wanted: "bbb".into() }));
        assert!(judge(Some(&a), None, Some(wanted("bbb", None))).is_some(), "a tree not read proves nothing");
        let untreed = recorded(SyncResult::Healthy);
        assert!(judge(Some(&untreed), None, Some(wanted("bbb", Some("t1")))).is_some(), "no tree recorded");
        let mut failed = a.clone();
        failed.extend(Attempt::failed("ccc", &crate::telemetry::Masked::new("broken")).annotations());
        assert!(judge(Some(&failed), None, Some(wanted("bbb", Some("t1")))).is_some(), "a later attempt failed");
        let mut progressing = a.clone();
        progressing.extend(
            Record { path_tree: Some("t1".into()), ..Record::now("aaa", SyncResult::Progressing) }.annotations(),
        );
        assert_eq!(
            judge(Some(&progressing), None, Some(wanted("bbb", Some("t1")))),
            Some(Unmet::NotHealthy("progressing".into())),
            "the same tree is still judged for health"
        );
    }

    #[test]
    fn a_healthy_record_of_the_attempted_revision_is_ready() {
        assert_eq!(judge(Some(&recorded(SyncResult::Healthy)), None, None), None);
        assert_eq!(judge(Some(&recorded(SyncResult::Healthy)), None, Some(wanted("aaa", None))), None);
    }

    #[test]
    fn each_reason_in_order() {
        assert_eq!(judge(None, None, None), Some(Unmet::NotRead));
        assert_eq!(judge(Some(&BTreeMap::new()), None, None), Some(Unmet::NotSynced));
        let mut failed = recorded(SyncResult::Healthy);
        failed.extend(Attempt::failed("bbb", &crate::telemetry::Masked::new("broken")).annotations());
        let why = judge(Some(&failed), None, None).unwrap();
        assert_eq!(why, Unmet::RevisionNotApplied { recorded: "aaa".into(), wanted: "bbb".into() });
        assert_eq!(why.to_string(), "revision not applied (records aaa, not bbb)");
        let behind = judge(Some(&recorded(SyncResult::Healthy)), None, Some(wanted("ccc", None))).unwrap();
        assert_eq!(behind.label(), "revision-not-applied");
        assert_eq!(
            judge(Some(&recorded(SyncResult::Progressing)), None, None),
            Some(Unmet::NotHealthy("progressing".into()))
        );
        let mut waiting = recorded(SyncResult::Progressing);
        waiting.extend(
            Record {
                waiting: Some(Waiting::now(&["Deployment/base/web"])),
                ..Record::now("aaa", SyncResult::Progressing)
            }
            .annotations(),
        );
        assert_eq!(
            judge(Some(&waiting), None, None).unwrap().to_string(),
            "not healthy (waiting for Deployment/base/web)"
        );
    }

    #[test]
    fn a_ready_expr_reading_a_key_status_lacks_is_refused_by_the_check() {
        assert_eq!(check("status.health == 'healthy' && !status.waiting"), Ok(()));
        assert_eq!(check("status.failed == 0"), Ok(()));
        let typo = check("status.helth == 'healthy'").unwrap_err();
        assert!(typo.contains("helth"), "{typo}");
        // Behind `&&`, read once `synced` is true.
        assert!(check("status.synced && status.revison != ''").unwrap_err().contains("revison"));
        assert!(check("status.revision").unwrap_err().contains("not a bool"));
        assert!(check("status.health ==").is_err());
    }

    #[test]
    fn a_ready_expr_replaces_the_health_test_only() {
        let progressing = recorded(SyncResult::Progressing);
        assert_eq!(judge(Some(&progressing), Some("status.health == 'progressing'"), None), None);
        assert_eq!(judge(Some(&progressing), Some("status.health == 'healthy'"), None), Some(Unmet::ExprFalse));
        assert_eq!(judge(Some(&progressing), Some("status.revision == 'aaa' && status.failed == 0"), None), None);
        assert_eq!(judge(Some(&BTreeMap::new()), Some("true"), None), Some(Unmet::NotSynced));
        assert!(matches!(judge(Some(&progressing), Some("status.revision"), None), Some(Unmet::ExprError(_))));
        assert!(matches!(judge(Some(&progressing), Some("status.nope == 1"), None), Some(Unmet::ExprError(_))));
    }
}
