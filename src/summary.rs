//! One line per unit on stdout: what `gitward sync` and `validate` found, for a person at a
//! terminal or a script that reads stdout (logs go to stderr). `gitward status` writes its own
//! line in the same form (`status::line`).
//!
//! ```text
//! apps: applied 82edb11 (1 configured, 1 pruned, 2 unchanged)
//! apps: progressing 82edb11 (1 configured); not ready after 5m: Deployment/shop/web InProgress (Replicas: 0/2)
//! apps: failed 82edb11 (1 failed, 3 unchanged): ConfigMap/shop/Bad_Name
//! apps: not synced: nothing was applied or pruned (the error is logged)
//! apps: valid 82edb11 (4 objects)
//! apps: valid 82edb11 (4 objects, 1 warning)
//! apps: healthy 82edb11, applied 2026-11-22T22:33:29Z (4 objects: 4 healthy)
//! ```
//!
//! A line starts with the unit's name and a result word (`applied`, `healthy`, `progressing`,
//! `degraded`, `failed`, `not synced`, `valid`, `invalid`, `never applied`); revisions are
//! shortened to 7 digits, as git prints them, a chart's to `<chart>@<version>`
//! ([`crate::source::short_revision`]).

use std::time::Duration;

use crate::changeset::Action;
use crate::health::Health;
use crate::health::record::SyncResult;
use crate::sync::Report;

/// How many objects a line names before it says "and N more".
const NAMED: usize = 3;

pub use crate::sync::outcome::NotReady;

/// The line of one `gitward sync` of a unit that was applied: the result recorded, the revision,
/// the counts by action (zeros left out); the objects that failed or were skipped; after a
/// `--wait` that ended unhealthy (timed out, or an object `Failed`), what is not ready and after
/// how long the wait ended (`waited`, in whole seconds).
pub fn sync(report: &Report, result: SyncResult, not_ready: &NotReady, waited: Duration) -> String {
    let c = report.changes.counts();
    let counts = [
        (c.created, "created"),
        (c.adopted, "adopted"),
        (c.configured, "configured"),
        (c.drift_corrected, "drift-corrected"),
        (c.pruned, "pruned"),
        (c.failed, "failed"),
        (c.conflict, "conflict"),
        (c.skipped, "skipped"),
        (c.unchanged, "unchanged"),
    ];
    let counts: Vec<String> = counts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
    let counts = if counts.is_empty() { "no objects".to_owned() } else { counts.join(", ") };
    let mut line = format!("{}: {result} {} ({counts})", report.unit, short(&report.revision.0));
    let refused: Vec<String> = report
        .changes
        .entries
        .iter()
        .filter(|e| matches!(e.action, Action::Failed | Action::Skipped | Action::Conflict))
        .map(|e| e.object.to_string())
        .collect();
    if !refused.is_empty() {
        line.push_str(": ");
        line.push_str(&named(&refused));
    }
    if let Some(reason) = &report.changes.prune_refused {
        line.push_str("; prune refused: ");
        line.push_str(reason);
    }
    if !not_ready.is_empty() {
        let objects: Vec<String> = not_ready
            .iter()
            .map(|(object, status)| match status {
                Some(s) if !s.message.is_empty() => format!("{object} {} ({})", s.health, s.message),
                Some(s) => format!("{object} {}", s.health),
                None => format!("{object} {}", Health::Unknown),
            })
            .collect();
        let after = duration(waited);
        line.push_str(&format!("; not ready after {after}: {}", named(&objects)));
    }
    line
}

/// The line of a unit `gitward sync` refused to sync because a unit of its `depends_on` is not
/// ready (`waiting`: each one and why, `base: not healthy (progressing)`).
pub fn blocked(unit: &str, waiting: &str) -> String {
    format!("{unit}: not synced: waiting for dependencies: {waiting}")
}

/// `1 object`, `2 objects`.
fn objects(n: usize) -> String {
    if n == 1 { "1 object".to_owned() } else { format!("{n} objects") }
}

/// The line of a suspended unit that `gitward sync` skipped.
pub fn suspended(unit: &str) -> String {
    format!("{unit}: not synced: suspended (gitward resume, or --include-suspended to sync it once)")
}

/// The line of a unit whose sync stopped before anything was applied (the error itself is
/// logged once, on stderr).
pub fn not_synced(unit: &str) -> String {
    format!("{unit}: not synced: nothing was applied or pruned (the error is logged)")
}

/// The line of `gitward validate` for a unit that could be read: `valid` or `invalid`, the
/// revision, how many objects, problems and warnings (`1 warning` only when there are any).
pub fn validate(unit: &str, summary: &crate::validate::Summary) -> String {
    let revision = short(&summary.revision.0);
    let warnings = match summary.warnings.len() {
        0 => String::new(),
        1 => ", 1 warning".to_owned(),
        n => format!(", {n} warnings"),
    };
    match summary.problems.len() {
        0 => format!("{unit}: valid {revision} ({}{warnings})", objects(summary.objects)),
        n => format!("{unit}: invalid {revision} ({}, {n} refused{warnings})", objects(summary.objects)),
    }
}

/// The line of `gitward validate` for a unit whose manifests could not be read at all.
pub fn unreadable(unit: &str) -> String {
    format!("{unit}: invalid: its manifests could not be read (the error is logged)")
}

/// Whole seconds as humantime writes them in the config: `90s`, `5m`, `1m 30s`.
fn duration(d: Duration) -> String {
    let (m, s) = (d.as_secs() / 60, d.as_secs() % 60);
    match (m, s) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m {s}s"),
    }
}

/// A revision's short form ([`crate::source::short_revision`]).
fn short(revision: &str) -> String {
    crate::source::short_revision(revision)
}

/// The first [`NAMED`] items, then "and N more".
fn named(items: &[String]) -> String {
    let mut text = items.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > NAMED {
        text.push_str(&format!(" and {} more", items.len() - NAMED));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::Status;
    use crate::object::GroupKind;
    use crate::object::ObjectRef;
    use crate::source::Revision;

    fn report(actions: &[(&str, Action)]) -> Report {
        crate::sync::build::report("apps", "82edb11c0ffee", actions)
    }

    #[test]
    fn a_chart_revision_is_printed_as_chart_at_version() {
        let mut r = report(&[("a", Action::Created)]);
        r.revision = Revision(format!("webapp@1.2.0@sha256:{}", "ab".repeat(32)));
        assert_eq!(
            sync(&r, SyncResult::Applied, &Vec::new(), Duration::ZERO),
            "apps: applied webapp@1.2.0 (1 created)"
        );
        let digest = format!("sha256:{}", "c0ffee".repeat(10));
        assert_eq!(crate::source::short_revision(&digest), "sha256:c0ffeec");
        assert_eq!(crate::source::short_revision(&format!("v1.4@{digest}")), "v1.4@sha256:c0ffeec");
        assert_eq!(crate::source::short_revision("82edb11c0ffee"), "82edb11");
    }

    #[test]
    fn a_sync_line_counts_actions_without_zeros() {
        let r = report(&[
            ("a", Action::Configured),
            ("b", Action::Pruned),
            ("c", Action::Unchanged),
            ("d", Action::Unchanged),
        ]);
        assert_eq!(
            sync(&r, SyncResult::Applied, &Vec::new(), Duration::ZERO),
            "apps: applied 82edb11 (1 configured, 1 pruned, 2 unchanged)"
        );
    }

    #[test]
    fn a_failed_sync_names_the_failed_objects_and_a_timeout_what_is_not_ready() {
        let r = report(&[("Bad_Name", Action::Failed), ("c", Action::Unchanged)]);
        assert_eq!(
            sync(&r, SyncResult::Failed, &Vec::new(), Duration::ZERO),
            "apps: failed 82edb11 (1 failed, 1 unchanged): ConfigMap/shop/Bad_Name"
        );
        let web = ObjectRef::new(GroupKind::new("apps", "Deployment"), Some("shop"), "web");
        let not_ready = vec![(web, Some(Status::in_progress("LessReplicas", "Replicas: 0/2")))];
        let line =
            sync(&report(&[("a", Action::Configured)]), SyncResult::Progressing, &not_ready, Duration::from_secs(300));
        assert_eq!(
            line,
            "apps: progressing 82edb11 (1 configured); not ready after 5m: Deployment/shop/web InProgress (Replicas: 0/2)"
        );
    }

    #[test]
    fn a_validate_line_counts_refused_objects_and_warnings() {
        use crate::validate::{Problem, Severity, Summary};
        let problem = |severity| Problem {
            origin: "a.yaml (document 1)".into(),
            object: Some("ConfigMap/shop/a".into()),
            message: "m".into(),
            severity,
        };
        let mut summary = Summary {
            revision: Revision("82edb11c0ffee".into()),
            objects: 4,
            problems: Vec::new(),
            warnings: Vec::new(),
        };
        assert_eq!(validate("apps", &summary), "apps: valid 82edb11 (4 objects)");
        summary.warnings.push(problem(Severity::Warning));
        assert_eq!(validate("apps", &summary), "apps: valid 82edb11 (4 objects, 1 warning)");
        summary.warnings.push(problem(Severity::Warning));
        summary.problems.push(problem(Severity::Error));
        assert_eq!(validate("apps", &summary), "apps: invalid 82edb11 (4 objects, 1 refused, 2 warnings)");
    }
}
