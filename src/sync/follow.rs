//! Following the unit's health between syncs. A health wait judges what a sync changed; after
//! it, a Deployment can still fail (`ProgressDeadlineExceeded`) or recover without any sync.
//! The metadata watches note every member of a kind with health whose resourceVersion moved
//! ([`crate::cluster::cache::MetadataCache::touched`]: a controller's status update moves it);
//! [`crate::sync::Engine::follow_health`] reads those members again (one GET each, or one survey of the
//! unit's kinds when many moved), folds their health into the unit's judgement (the members
//! not `Current`, which the next wait covers too) and, when the unit's result changes, rewrites
//! `gitward.dev/last-result` on the ApplySet parent, so `depends_on` and any reader of the
//! record see the unit as it is. A sync's health wait, while it runs, is the only judge: the
//! caller follows only between syncs, and a wait takes the members touched before it as
//! targets of its own ([`crate::sync::Engine::health_wait`]).

use crate::health::record::{Record, SyncResult};
use crate::health::{Counts, Status};
use crate::object::ObjectRef;

/// Members read one by one, at most; past this many touched at once, one survey of the unit's
/// kinds (a paged list per kind) reads them all for less.
pub const FOLLOW_GETS: usize = 32;

/// What following the unit's health found ([`crate::sync::Engine::follow_health`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed {
    /// The unit's name.
    pub unit: String,
    /// The unit's health as now judged: `healthy` (every member with health `Current`),
    /// `degraded` (one is `Failed`) or `progressing`.
    pub result: SyncResult,
    /// The result judged before this read.
    pub before: SyncResult,
    /// The members by health bucket, counted as `gitward status` counts them
    /// ([`Engine::members_health`](crate::sync::Engine::members_health)).
    pub counts: Counts,
    /// The members read, with their status (`None`: no longer in the cluster).
    pub read: Vec<(ObjectRef, Option<Status>)>,
    /// True when `read` holds every member not `Current` (a survey read them all), not only
    /// those touched.
    pub whole: bool,
}

impl Followed {
    /// True when the unit's result changed with this read.
    pub fn changed(&self) -> bool {
        self.result != self.before
    }
}

/// The unit's result from its members not `Current`: `degraded` when one is `Failed`,
/// `progressing` when any other is not `Current`, else `healthy`.
pub fn result_of(unhealthy: usize, failed: usize) -> SyncResult {
    if failed > 0 {
        SyncResult::Degraded
    } else if unhealthy > 0 {
        SyncResult::Progressing
    } else {
        SyncResult::Healthy
    }
}

/// The result a followed judgement writes over the parent's `recorded` one: `Some(result)` when
/// they differ and the recorded one is a judgement of health that may be replaced — not
/// `failed` (objects did not apply: only a sync ends that) and not while a wait is recorded in
/// progress (the wait judges).
pub fn rewrite(recorded: Option<&Record>, result: SyncResult) -> Option<SyncResult> {
    let recorded = recorded?;
    let replaceable = matches!(
        recorded.result,
        SyncResult::Healthy | SyncResult::Progressing | SyncResult::Degraded | SyncResult::Applied
    );
    (replaceable && recorded.waiting.is_none() && recorded.result != result).then_some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(result: SyncResult, waiting: bool) -> Record {
        let waiting = waiting.then(|| crate::health::record::Waiting::now::<&ObjectRef>(&[]));
        Record { revision: "3f2a".into(), applied_at: "2026-12-02T00:00:00Z".into(), result, waiting, path_tree: None }
    }

    #[test]
    fn a_failed_member_degrades_and_any_other_not_current_is_progressing() {
        assert_eq!(result_of(0, 0), SyncResult::Healthy);
        assert_eq!(result_of(2, 0), SyncResult::Progressing);
        assert_eq!(result_of(2, 1), SyncResult::Degraded);
    }

    #[test]
    fn the_record_follows_health_but_never_over_a_failure_or_a_wait_in_progress() {
        let healthy = record(SyncResult::Healthy, false);
        assert_eq!(rewrite(Some(&healthy), SyncResult::Degraded), Some(SyncResult::Degraded));
        assert_eq!(rewrite(Some(&healthy), SyncResult::Healthy), None, "nothing changed: nothing written");
        let degraded = record(SyncResult::Degraded, false);
        assert_eq!(rewrite(Some(&degraded), SyncResult::Healthy), Some(SyncResult::Healthy), "recovered");
        assert_eq!(rewrite(Some(&record(SyncResult::Failed, false)), SyncResult::Healthy), None);
        assert_eq!(rewrite(Some(&record(SyncResult::Progressing, true)), SyncResult::Degraded), None);
        assert_eq!(rewrite(None, SyncResult::Degraded), None, "a unit never recorded");
    }
}
