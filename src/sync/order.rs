//! The order of a sync's steps once it is planned, apart from what each step does, so that the
//! order is tested without an API server: what git changed first (when nothing waits for the
//! Foundations stage), the stages in [`Stage::ALL`]'s order, Helm's pre hooks once the
//! Foundations stage is applied (a failed one skips the later stages), the custom resources
//! that waited for their CRD planned into the stages left, and the prune only after an apply
//! with no failure that was not yielded. [`super::run`] runs it over the engine; the test below
//! over the recording writes ([`super::writes::Recording`]).

use std::collections::BTreeMap;

use super::Result;
use crate::plan::{self, Stage, Step};

/// The steps of one sync that [`run`] calls in order.
pub(super) trait Steps {
    /// Whether the sync was asked to yield: no new stage begins, nothing is pruned.
    fn yielded(&self) -> bool;

    /// Whether an object of the sync failed, was skipped or met a conflict so far.
    fn failed(&self) -> bool;

    /// Sends `steps` of `stage`.
    async fn apply(&mut self, stage: Stage, steps: &[Step]);

    /// Runs the pre hooks if due (once): why the objects left are refused when one failed.
    ///
    /// Errors: the sync's, when the hooks cannot be run or recorded.
    async fn pre_hooks(&mut self) -> Result<Option<String>>;

    /// Marks `steps`, not sent, as skipped for `reason`.
    fn refuse(&mut self, steps: Vec<Step>, reason: &str);

    /// Resolves (once) the objects that waited for the Foundations stage: their steps by stage.
    ///
    /// Errors: the sync's, when they cannot be resolved or recorded.
    async fn resolve_waiting(&mut self) -> Result<BTreeMap<Stage, Vec<Step>>>;

    /// Called once the apply is over, before the prune is decided.
    fn applied(&mut self);

    /// Prunes what git no longer holds and narrows the parent.
    ///
    /// Errors: the sync's, when the parent cannot be narrowed.
    async fn prune(&mut self) -> Result<()>;
}

/// What the order starts from: the planned stages and what decides its shortcuts.
pub(super) struct Plan {
    /// The steps of each stage.
    pub(super) todo: BTreeMap<Stage, Vec<Step>>,
    /// Something waits for the Foundations stage (custom resources for their CRD, due pre
    /// hooks): nothing is sent before it.
    pub(super) waits_for_foundations: bool,
    /// The unit prunes, and the live state of each of its kinds can be read.
    pub(super) may_prune: bool,
}

/// How the order ended: whether it yielded, and the prune's result (`Ok` when none ran).
pub(super) struct Ended {
    /// The yield signal was raised during the apply: nothing was pruned.
    pub(super) yielded: bool,
    /// The prune's error, which is the sync's once its report is kept.
    pub(super) pruned: Result<()>,
}

/// Runs `plan`'s steps in order through `steps`.
///
/// Errors: those of [`Steps::pre_hooks`] and [`Steps::resolve_waiting`], which stop the sync
/// before its prune.
pub(super) async fn run(steps: &mut impl Steps, plan: Plan) -> Result<Ended> {
    let Plan { mut todo, waits_for_foundations, may_prune } = plan;
    if !waits_for_foundations && let Some((stage, head)) = plan::changes_first(&mut todo) {
        steps.apply(stage, &head).await;
    }
    for stage in Stage::ALL {
        if steps.yielded() {
            break;
        }
        if stage != Stage::Foundations {
            if let Some(refused) = steps.pre_hooks().await? {
                steps.refuse(std::mem::take(&mut todo).into_values().flatten().collect(), &refused);
                break;
            }
            for (s, added) in steps.resolve_waiting().await? {
                todo.entry(s).or_default().extend(added);
            }
        }
        let Some(stage_steps) = todo.remove(&stage) else { continue };
        steps.apply(stage, &stage_steps).await;
    }
    steps.applied();
    let yielded = steps.yielded();
    let pruned = if may_prune && !yielded && !steps.failed() { steps.prune().await } else { Ok(()) };
    Ok(Ended { yielded, pruned })
}

#[cfg(test)]
#[path = "order_tests.rs"]
mod tests;
