//! One sync after its early apply, as a [`Run`]: the state its steps build, and one short
//! method per step — begin (load, resolve, widen the inventory, watch, plan), the stages (with
//! Helm's pre hooks and the custom resources that waited for their CRD), prune and narrow, and
//! the report. Their order after the plan is [`super::order::run`]'s, over [`Syncing`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::discovery::ApiResource;

use super::Engine;
use crate::apply::Blocked;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::Contents;
use crate::manifest::{Manifest, Skipped};
use crate::object::GroupKind;
use crate::plan::{Desired, Stage, Step};
use crate::source::Revision;
use crate::sync::desired::{self, Defaults, Resolution};
use crate::sync::early::{Early, EarlyApply};
use crate::sync::health::health_targets;
use crate::sync::hooks;
use crate::sync::pending::{self, pending_contents};
use crate::sync::prune_step::PruneInputs;
use crate::sync::{Report, Result, order};

/// One sync's state after its early apply, as the steps of [`Engine::sync_rest`] build it.
pub(super) struct Run {
    revision: Revision,
    /// The objects to apply, in the order resolved; custom resources resolved late are appended.
    desired: Vec<Desired>,
    changes: ChangeSet,
    /// What the revision's read gave besides its objects.
    read: Read,
    /// What waits for the Foundations stage.
    later: Later,
    /// The kinds and members the apply and the prune work over.
    kinds: Kinds,
    /// The stages still to apply and what failed objects block.
    stages: Stages,
    /// When the sync began, and the time from then to each step's end.
    clock: Clock,
}

/// What a revision's read gave besides its objects.
struct Read {
    defaults: Defaults,
    skipped_files: Vec<Skipped>,
    /// Paths the listing did not follow ([`crate::manifest::Loaded::partial`]).
    partial: Vec<String>,
    /// Objects the early apply sent.
    applied_early: usize,
    /// [`crate::manifest::Loaded::path_only`].
    path_only: bool,
    /// [`crate::sync::Report::path_tree`].
    path_tree: Option<String>,
}

/// What waits for the Foundations stage: custom resources for their CRD, Helm's pre hooks.
struct Later {
    /// Custom resources waiting for their CRD; `None` once resolved.
    pending: Option<Vec<Manifest>>,
    /// Helm hooks of the render, run as the pre phase; `None` once run.
    hooks: Option<Vec<Manifest>>,
    /// Whether the pre hooks are due (not yet run for this revision and release digest).
    hooks_due: bool,
    /// The release's digest, for the hooks' record.
    digest: String,
}

/// The kinds and members a sync's apply and prune work over.
struct Kinds {
    /// The inventory as widened before the apply.
    widened: Contents,
    /// The kinds watched, with their API resource and scope.
    resources: HashMap<GroupKind, (Arc<ApiResource>, bool)>,
    /// Kinds whose live state cannot be read, with the reason: their objects fail, nothing is pruned.
    unwatchable: BTreeMap<GroupKind, String>,
    /// Members in the cache before the apply (the prune guard's denominator).
    members_before: usize,
}

/// The stages still to apply.
struct Stages {
    todo: BTreeMap<Stage, Vec<Step>>,
    blocked: Blocked,
}

/// When a sync began, how long its first steps took, and when what git changed was applied.
struct Clock {
    started: Instant,
    times: Times,
    /// When the last object git changed was applied, else when the apply ended; set once the
    /// apply is over.
    applied_at: Option<Instant>,
}

/// Offsets from a sync's start to the end of its first steps (debug log `sync phases`).
#[derive(Debug, Clone, Copy, Default)]
struct Times {
    early: Duration,
    loaded: Duration,
    resolved: Duration,
    planned: Duration,
}

impl Engine {
    /// The rest of the sync that `early` began: load, resolve, widen the inventory, plan, apply
    /// stage by stage, prune, narrow the inventory. The daemon runs [`Engine::early`] before it
    /// holds a sync slot and this once it holds one.
    ///
    /// When [`Engine::yield_signal`] is raised during the apply, no new request is sent: those
    /// in flight are answered, prune and narrow are skipped (as after a crash: the parent was
    /// widened first), and the report says [`Report::yielded`]. The next sync sends the rest.
    pub async fn sync_rest(&mut self, early: EarlyApply) -> Result<Report> {
        let mut run = self.begin(early).await?;
        let waits = run.later.pending.as_ref().is_some_and(|p| !p.is_empty()) || run.later.hooks_due;
        let may_prune = self.unit.prune && run.kinds.unwatchable.is_empty();
        let todo = std::mem::take(&mut run.stages.todo);
        let plan = order::Plan { todo, waits_for_foundations: waits, may_prune };
        let ended = order::run(&mut Syncing { engine: self, run: &mut run }, plan).await?;
        let applied_at = run.clock.applied_at.unwrap_or_else(Instant::now);
        self.end(run, applied_at, ended.yielded, ended.pruned)
    }

    /// Loads and resolves the revision, widens the inventory, watches the kinds and plans the
    /// stages, less what the early apply sent.
    async fn begin(&mut self, early: EarlyApply) -> Result<Run> {
        let EarlyApply { early, revision, started, early_at } = early;
        let defaults = self.defaults();
        let mut loaded = self.loader.load(self.view.client(), &revision).await?;
        let loaded_at = started.elapsed();
        let path_tree = match loaded.path_only {
            true => self.loader.path_tree(&revision).await,
            false => None,
        };
        let hooks = std::mem::take(&mut loaded.hooks);
        // Read only for a render with hooks: it reads every body of the release.
        let digest = if hooks.is_empty() { String::new() } else { hooks::release_digest(&loaded.manifests, &hooks) };
        let previous = self.last.desired.as_ref().map(|(_, d)| d.as_slice()).unwrap_or_default();
        let resolved = self.view.resolve_desired(loaded.manifests, &defaults, previous).await;
        let Resolution { desired, pending } = resolved.map_err(|e| desired::hinted(e, &loaded.skipped))?;
        let resolved_at = started.elapsed();
        let wanted = Contents::of(desired.iter().map(|d| &d.object)).union(&pending_contents(&pending, &defaults));
        let widened = self.parent.widen(&self.view, &mut self.hooks, &wanted).await?;
        let (resources, unwatchable) = self.watch_kinds(&desired, &widened).await?;
        let hooks_due = !hooks.is_empty() && self.hooks.due(&revision, &digest);
        let mut run = Run {
            revision,
            desired,
            changes: ChangeSet::default(),
            read: Read {
                defaults,
                skipped_files: loaded.skipped,
                partial: loaded.partial,
                applied_early: 0,
                path_only: loaded.path_only,
                path_tree,
            },
            later: Later { pending: Some(pending), hooks: Some(hooks), hooks_due, digest },
            kinds: Kinds { widened, resources, unwatchable, members_before: self.view.cache().len() },
            stages: Stages { todo: BTreeMap::new(), blocked: Blocked::default() },
            clock: Clock {
                started,
                times: Times { early: early_at, loaded: loaded_at, resolved: resolved_at, planned: Duration::ZERO },
                applied_at: None,
            },
        };
        self.plan_run(&mut run, early).await?;
        Ok(run)
    }

    /// Plans `run`'s stages: the objects of kinds whose live state cannot be read fail alone
    /// (and nothing is pruned); what `early` sent is not sent again.
    async fn plan_run(&mut self, run: &mut Run, early: Early) -> Result<()> {
        let unwatchable = &run.kinds.unwatchable;
        let changes = &mut run.changes;
        run.desired.retain(|d| match unwatchable.get(&d.object.gk) {
            Some(reason) => {
                changes.push(d.object.clone(), Action::Failed, Some(format!("{}: {reason}", d.origin)));
                false
            }
            None => true,
        });
        if !unwatchable.is_empty() {
            let kinds: Vec<String> = unwatchable.keys().map(ToString::to_string).collect();
            changes.prune_refused = Some(format!("the live state of {} cannot be read", kinds.join(", ")));
        }
        run.stages.todo = self.plan_stages(&run.desired, &mut run.changes).await?;
        if !early.sent.is_empty() {
            // Sent once per sync: what went early is not sent again (the same revision, so the
            // same desired hash; checked all the same).
            let desired = &run.desired;
            for steps in run.stages.todo.values_mut() {
                steps.retain(|s| early.sent.get(&desired[s.index].object) != Some(&desired[s.index].hash));
            }
        }
        run.read.applied_early = early.sent.len();
        run.changes.extend(early.changes);
        run.clock.times.planned = run.clock.started.elapsed();
        Ok(())
    }

    /// Applies `steps` of `stage` ([`crate::apply::apply_stage`], through [`super::writes::Writes::apply`]) into `run`'s change set.
    async fn apply_steps(&self, run: &mut Run, stage: Stage, steps: &[Step]) {
        let (desired, blocked) = (&run.desired, &mut run.stages.blocked);
        let applied = self.view.apply(stage, steps, desired, blocked, &self.options.apply).await;
        run.changes.extend(applied);
    }

    /// Runs the pre hooks once, at the first stage after Foundations: the refusal when one failed.
    async fn run_pre_hooks(&mut self, run: &mut Run) -> Result<Option<String>> {
        let Some(hooks) = run.later.hooks.take() else { return Ok(None) };
        let digest = std::mem::take(&mut run.later.digest);
        let rendered = hooks::RevisionHooks::new(&run.revision, digest, hooks, &run.desired);
        let unit = hooks::Unit::new(
            &mut self.view,
            &self.parent.inventory().id,
            &self.options.apply.field_manager,
            &self.unit,
        );
        match self.hooks.pre(unit, rendered, run.kinds.members_before, &mut run.changes).await? {
            hooks::Pre::NotDue => Ok(None),
            hooks::Pre::Failed(refused) => Ok(Some(refused)),
            hooks::Pre::Ran => {
                // Recorded at once: a process that stops before the sync's record does not run
                // them again.
                self.parent
                    .write(&self.view, &mut self.hooks, None, |existing| {
                        existing.map(|p| p.contents.clone()).unwrap_or_default()
                    })
                    .await?;
                Ok(None)
            }
        }
    }

    /// Resolves, once, the custom resources that waited for their CRD, widens the inventory
    /// and the watches for them and plans them into the stages still to apply.
    async fn resolve_waiting(&mut self, run: &mut Run) -> Result<BTreeMap<Stage, Vec<Step>>> {
        let Some(pending) = run.later.pending.take().filter(|p| !p.is_empty()) else { return Ok(BTreeMap::new()) };
        let start = run.desired.len();
        let (defaults, blocked) = (&run.read.defaults, &run.stages.blocked);
        pending::resolve_pending(&mut self.view, pending, defaults, blocked, &mut run.desired, &mut run.changes)
            .await?;
        self.widen_resolved(&run.desired[start..], &mut run.kinds.widened, &mut run.kinds.resources).await?;
        self.plan_stages_from(&run.desired, start, &mut run.changes).await
    }

    /// After [`pending::resolve_pending`]: the kinds of the `resolved` custom resources join
    /// `resources` (watched now, so prune and narrow see them as served), and the refs they
    /// resolved to that `widened` lacks — a cluster-scoped kind, recorded under a namespace
    /// before its CRD was served — are recorded by widening the ApplySet parent again, before
    /// they are applied (DESIGN.md decision 6). Without it such an object is never recorded,
    /// so never pruned: a later sync sees it as "not recorded … (a copy?)". The guessed ref is
    /// dropped by the narrow after a clean prune (served, not live, not wanted).
    ///
    /// Errors: [`super::Error::Cluster`] when the parent cannot be written.
    pub(super) async fn widen_resolved(
        &mut self,
        resolved: &[Desired],
        widened: &mut Contents,
        resources: &mut HashMap<GroupKind, (Arc<ApiResource>, bool)>,
    ) -> Result<()> {
        for d in resolved {
            resources.entry(d.object.gk.clone()).or_insert_with(|| (d.resource.clone(), d.object.namespace.is_some()));
        }
        let wanted = widened.union(&Contents::of(resolved.iter().map(|d| &d.object)));
        if &wanted != widened {
            *widened = self.parent.widen(&self.view, &mut self.hooks, &wanted).await?;
        }
        Ok(())
    }

    /// The report of `run`; the desired objects kept for the next sync and self-heal (even
    /// when the prune failed: drift is healed to this revision). `pruned`'s error is the sync's.
    fn end(&mut self, run: Run, applied_at: Instant, yielded: bool, pruned: Result<()>) -> Result<Report> {
        let Run { revision, mut desired, changes, read, clock, .. } = run;
        let Read { skipped_files, applied_early, path_only, path_tree, .. } = read;
        let started = clock.started;
        if changes.has_failures() {
            self.parent.recheck_namespace();
        }
        let health_targets = health_targets(&desired, &changes);
        desired.shrink_to_fit();
        let signers = self.loader.signers(&revision);
        self.last.desired = Some((revision.clone(), desired));
        pruned?;
        Ok(Report {
            unit: self.unit.name.clone(),
            revision,
            changes,
            skipped_files,
            took: crate::sync::Timings {
                apply: started.elapsed(),
                render: clock.times.loaded.saturating_sub(clock.times.early),
                wait: Duration::ZERO,
            },
            sent: crate::sync::Sent { applied_at, health_targets, applied_early },
            heal: false,
            yielded,
            path_only,
            path_tree,
            signers,
        })
    }
}

/// The engine's steps of one [`Run`], in the order [`order::run`] calls them.
struct Syncing<'a> {
    engine: &'a mut Engine,
    run: &'a mut Run,
}

impl order::Steps for Syncing<'_> {
    fn yielded(&self) -> bool {
        self.engine.options.apply.yield_to.is_raised()
    }

    fn failed(&self) -> bool {
        self.run.changes.has_failures()
    }

    async fn apply(&mut self, stage: Stage, steps: &[Step]) {
        self.engine.apply_steps(self.run, stage, steps).await;
    }

    async fn pre_hooks(&mut self) -> Result<Option<String>> {
        self.engine.run_pre_hooks(self.run).await
    }

    fn refuse(&mut self, steps: Vec<Step>, reason: &str) {
        for step in steps {
            let object = self.run.desired[step.index].object.clone();
            self.run.changes.push(object, Action::Skipped, Some(reason.to_string()));
        }
    }

    async fn resolve_waiting(&mut self) -> Result<BTreeMap<Stage, Vec<Step>>> {
        self.engine.resolve_waiting(self.run).await
    }

    fn applied(&mut self) {
        self.engine.note_adoptions(&mut self.run.changes);
        // A push waits for what it changed; unchanged objects re-sent after that do not count.
        let applied_at = self.run.changes.changes_applied_at.unwrap_or_else(Instant::now);
        log_times(&self.engine.unit.name, self.run, applied_at);
        self.run.clock.applied_at = Some(applied_at);
    }

    async fn prune(&mut self) -> Result<()> {
        let run = &mut *self.run;
        let inputs = PruneInputs {
            desired: &run.desired,
            resources: &run.kinds.resources,
            members_before: run.kinds.members_before,
            partial: &run.read.partial,
        };
        self.engine.prune_and_narrow(inputs, &run.kinds.widened, &mut run.changes).await
    }
}

/// Where the time before the first request went (RUST_LOG=gitward=debug), e.g. to see what a
/// push's latency is made of.
fn log_times(unit: &str, run: &Run, applied_at: Instant) {
    let t = run.clock.times;
    tracing::debug!(
        unit,
        early_ms = t.early.as_millis() as u64,
        applied_early = run.read.applied_early,
        load_ms = (t.loaded - t.early).as_millis() as u64,
        resolve_ms = (t.resolved - t.loaded).as_millis() as u64,
        inventory_watch_plan_ms = t.planned.saturating_sub(t.resolved).as_millis() as u64,
        planned_ms = t.planned.as_millis() as u64,
        changes_applied_ms = applied_at.saturating_duration_since(run.clock.started).as_millis() as u64,
        "sync phases"
    );
}
