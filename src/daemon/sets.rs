//! The daemon's `[[sync_set]]`s: one watcher task per set lists the directories its glob
//! matches at the tip of its repository, and the daemon turns each new listing into units.
//!
//! A watcher lists at every `interval`, on a push to a local repository (the shared ref watch,
//! [`super::shared_watch`]) and on a webhook naming the set's repository and ref (its route,
//! [`Sets::routes`]); the mirror is the one the set's units share, so a push is fetched once.
//! A listing that differs from the last one is expanded ([`Config::expand`]); a listing that
//! cannot be expanded (more units than `max_units`, a directory that makes no valid unit, a
//! name another unit has), like one that cannot be listed, is logged as an error and the set
//! keeps its last good units. They outlive a reload (a set of the same name template,
//! repository and ref takes them over, [`Sets::replace`]) and a restart (the last listing that
//! expanded is recorded in the state directory, [`crate::sync::set::record`], and read at
//! start, [`Sets::seed_recorded`]). A unit is retired only when a listing that expanded no
//! longer makes it, or when its set left the config: it is stopped, and its objects are kept —
//! a warning names the unit and how many objects it leaves — unless the set says
//! `prune_removed = true`: then the members its ApplySet parent records are pruned
//! ([`crate::sync::retire`]: no mirror opened, nothing fetched), still under the unit's `max_prune_fraction` and
//! empty-revision guard unless the set says `prune_removed_unguarded = true`.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::route::Followed;
use super::shared_watch::{RepoWatches, Subscription};
use super::trigger::{self, TriggerReceiver, TriggerSender};
use crate::cluster::fence::Fence;
use crate::config::{ClusterConfig, Config, SyncUnit};
use crate::source::Revision;
use crate::sync::retire::Retired;
use crate::sync::set::{self as set_source, SetSource};
use crate::telemetry::error_chain;

/// One listing of a set's directories, as a watcher reports it.
pub(super) struct Listed {
    /// The set's index in [`Config::sets`].
    set: usize,
    /// The config generation the watcher was started for: a listing of a set the config has
    /// since changed is dropped.
    epoch: u64,
    /// The revision and its matched directories, or why the fetch or listing failed.
    result: Result<(Revision, Vec<String>), String>,
}

/// A set's watcher task and what talks to it.
struct Watcher {
    /// The task; aborted when the config changes or the daemon stops.
    task: JoinHandle<()>,
    /// Its trigger channel (pushes, webhooks).
    triggers: TriggerSender,
    /// What webhooks match: the set's repository and ref.
    followed: Followed,
    /// Its share of the watch of its local repository's refs, if any.
    _watch: Option<Subscription>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A unit that left its set: what the daemon does with its objects.
pub(super) struct Removed {
    /// The unit as it ran.
    pub unit: SyncUnit,
    /// The set's name template, for the log.
    pub set: String,
    /// The set's `prune_removed`.
    pub prune: bool,
    /// The set's `prune_removed_unguarded`: the prune may pass the prune guards.
    pub unguarded: bool,
}

impl Removed {
    /// `unit`, which left `set`.
    fn of(set: &crate::config::SyncSet, unit: &SyncUnit) -> Self {
        Self {
            unit: unit.clone(),
            set: set.name.clone(),
            prune: set.prune_removed,
            unguarded: set.prune_removed_unguarded,
        }
    }
}

/// The sets of the config in force, their last good units and their watchers.
pub(super) struct Sets {
    /// The config as loaded: its `[[sync]]` units and its sets.
    base: Config,
    /// Each set's last good units (none before its first good listing).
    generated: Vec<Vec<SyncUnit>>,
    /// Each set's directories of its last good listing.
    dirs: Vec<Option<Vec<String>>>,
    /// One per set whose mirror could be opened, at the set's index.
    watchers: Vec<Option<Watcher>>,
    /// Bumped when the config changes: listings of older watchers are dropped.
    epoch: u64,
    /// Where watchers report.
    tx: mpsc::UnboundedSender<Listed>,
    /// What the daemon's loop reads.
    pub(super) rx: mpsc::UnboundedReceiver<Listed>,
}

impl Sets {
    /// The sets of `base`, none listed yet, no watcher.
    pub(super) fn new(base: Config) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let count = base.sets.len();
        Self {
            base,
            generated: vec![Vec::new(); count],
            dirs: vec![None; count],
            watchers: Vec::new(),
            epoch: 0,
            tx,
            rx,
        }
    }

    /// The config in force: the `[[sync]]` units, then each set's last good units.
    pub(super) fn config(&self) -> Config {
        self.base.with_sets(&self.generated).unwrap_or_else(|_| self.base.clone())
    }

    /// Takes a new config (a SIGHUP): its sets are listed and expanded anew, their watchers
    /// started again. A set of the same identity (name template, repository, ref) as an old
    /// one first takes over the old one's units ([`Sets::carry`]), so a set that does not list
    /// or expand now keeps them. Returns the units of the old sets the new config no longer
    /// has: those a listing that expanded no longer makes, and those of sets removed from it.
    pub(super) async fn replace(&mut self, base: Config, repo_watches: &RepoWatches) -> Vec<Removed> {
        let old: Vec<Removed> = self.removable();
        let epoch = self.epoch + 1;
        let previous = std::mem::replace(self, Self { epoch, ..Self::new(base) });
        self.carry(&previous);
        drop(previous);
        self.start(repo_watches).await;
        let kept = self.config();
        old.into_iter().filter(|r| kept.unit(&r.unit.name).is_none()).collect()
    }

    /// Each set takes over the units of `previous`'s set of the same identity: its last good
    /// directories expanded with the new template, else its units as they were (the new
    /// template does not expand them). Its directories are left unknown, so its next listing
    /// that expands is taken whatever it holds.
    fn carry(&mut self, previous: &Sets) {
        for index in 0..self.base.sets.len() {
            let set = &self.base.sets[index];
            let same = |old: &&crate::config::SyncSet| {
                old.name == set.name
                    && old.source.repo == set.source.repo
                    && old.source.reference == set.source.reference
            };
            let Some(old) = previous.base.sets.iter().position(|old| same(&old)) else { continue };
            let again = previous.dirs[old].as_ref().and_then(|dirs| self.units_of(index, dirs).ok());
            let units = again.or_else(|| self.fits(index, previous.generated[old].clone()).ok());
            match units {
                Some(units) => self.generated[index] = units,
                None => {
                    error!(set = %set.name, "sync set's units not carried through the reload: they clash with other units")
                }
            }
        }
    }

    /// At start: each set takes the units of its recorded listing ([`set_source::recorded`]),
    /// so a set that does not list or expand now still runs its units. Its directories are
    /// left unknown: its first listing that expands is taken, and a unit it no longer makes is
    /// dropped (not retired: it was not started here).
    pub(super) fn seed_recorded(&mut self) {
        for index in 0..self.base.sets.len() {
            let set = &self.base.sets[index];
            let Some((revision, dirs)) = set_source::recorded(&self.base.daemon.state_dir, set) else { continue };
            match self.units_of(index, &dirs) {
                Ok(units) => self.generated[index] = units,
                Err(e) => {
                    let revision = revision.short();
                    warn!(set = %set.name, revision, error = %error_chain(&e), "sync set's recorded listing not expanded");
                }
            }
        }
    }

    /// The units set `index` makes of `dirs`, checked against the `[[sync]]` units and the
    /// other sets' units.
    ///
    /// Errors: as [`Config::expand`] and [`Config::with_sets`].
    fn units_of(&self, index: usize, dirs: &[String]) -> crate::config::Result<Vec<SyncUnit>> {
        self.fits(index, self.base.expand(index, dirs)?)
    }

    /// `units` as set `index`'s, when they take no other unit's name or inventory.
    ///
    /// Errors: as [`Config::with_sets`].
    fn fits(&self, index: usize, units: Vec<SyncUnit>) -> crate::config::Result<Vec<SyncUnit>> {
        let mut generated = self.generated.clone();
        generated[index] = units;
        self.base.with_sets(&generated)?;
        Ok(std::mem::take(&mut generated[index]))
    }

    /// Every generated unit with its set's settings.
    fn removable(&self) -> Vec<Removed> {
        let sets = self.base.sets.iter().zip(&self.generated);
        sets.flat_map(|(set, units)| units.iter().map(|u| Removed::of(set, u))).collect()
    }

    /// Lists every set once now (the units start with the daemon, `READY=1` counts them), then
    /// starts the watchers.
    pub(super) async fn start(&mut self, repo_watches: &RepoWatches) {
        let state_dir = self.base.daemon.state_dir.clone();
        for index in 0..self.base.sets.len() {
            let set = &self.base.sets[index];
            let source = match SetSource::open(&state_dir, set).await {
                Ok(source) => source,
                Err(e) => {
                    error!(set = %set.name, error = %error_chain(&e), "sync set not listed: its mirror cannot be opened; keeping its units");
                    self.watchers.push(None);
                    continue;
                }
            };
            let result = source.list(std::time::Instant::now()).await.map_err(|e| error_chain(&e));
            self.listed(Listed { set: index, epoch: self.epoch, result });
            self.watchers.push(Some(self.watcher(index, source, repo_watches)));
        }
    }

    /// Starts the watcher of set `index`.
    fn watcher(&self, index: usize, source: SetSource, repo_watches: &RepoWatches) -> Watcher {
        let set = &self.base.sets[index];
        let (triggers, rx) = trigger::channel();
        let watch = set.source.local_repo().and_then(|path| match repo_watches.subscribe(&path, triggers.clone(), None) {
            Ok(w) => Some(w),
            Err(e) => {
                warn!(set = %set.name, repo = %path.display(), error = %e, "cannot watch the repository; polling only");
                None
            }
        });
        let (tx, epoch, interval) = (self.tx.clone(), self.epoch, self.base.daemon.interval);
        let task = tokio::spawn(watch_set(Watching { set: index, epoch, source, triggers: rx, interval, tx }));
        Watcher { task, triggers, followed: Followed::of(&set.source), _watch: watch }
    }

    /// A watcher's listing: when it is current and differs from the last good one, the set's
    /// units are made again. Returns the units that left the set when the units changed,
    /// `None` when nothing changed (or the listing failed, or did not expand: logged).
    pub(super) fn listed(&mut self, listed: Listed) -> Option<Vec<Removed>> {
        let Listed { set: index, epoch, result } = listed;
        let set = self.base.sets.get(index).filter(|_| epoch == self.epoch)?;
        let (revision, dirs) = match result {
            Ok(listing) => listing,
            Err(error) => {
                error!(set = %set.name, error, "sync set not listed; keeping its units");
                return None;
            }
        };
        if self.dirs[index].as_ref() == Some(&dirs) {
            return None;
        }
        let generated = match self.units_of(index, &dirs) {
            Ok(units) => {
                let mut generated = self.generated.clone();
                generated[index] = units;
                generated
            }
            Err(e) => {
                let revision = revision.short();
                error!(set = %set.name, revision, error = %error_chain(&e), "sync set not expanded; keeping the last good units");
                return None;
            }
        };
        let removed = self.generated[index]
            .iter()
            .filter(|old| !generated[index].iter().any(|new| new.name == old.name))
            .map(|u| Removed::of(set, u))
            .collect();
        info!(set = %set.name, revision = revision.short(), units = generated[index].len(), "sync set expanded");
        if let Err(e) = set_source::record(&self.base.daemon.state_dir, set, &revision, &dirs) {
            warn!(set = %set.name, error = %e, "sync set listing not recorded: a restart cannot keep its units");
        }
        self.generated = generated;
        self.dirs[index] = Some(dirs);
        Some(removed)
    }

    /// The routes webhooks take to the watchers: the set's name, repository and ref, channel.
    pub(super) fn routes(&self) -> Vec<super::http::UnitRoute> {
        let sets = self.base.sets.iter().zip(&self.watchers);
        let watched = sets.filter_map(|(set, w)| w.as_ref().map(|w| (set, w)));
        watched.map(|(set, w)| (set.name.clone(), w.followed.clone(), w.triggers.clone(), None)).collect()
    }
}

/// What a watcher task holds.
struct Watching {
    set: usize,
    epoch: u64,
    source: SetSource,
    triggers: TriggerReceiver,
    interval: Duration,
    tx: mpsc::UnboundedSender<Listed>,
}

/// A watcher: lists at every interval and trigger, until the daemon stops listening.
async fn watch_set(mut w: Watching) {
    let mut tick = tokio::time::interval(w.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        let not_before = tokio::select! {
            trigger = w.triggers.recv() => match trigger {
                Some(trigger) => trigger.at,
                None => return,
            },
            _ = tick.tick() => std::time::Instant::now(),
        };
        let result = w.source.list(not_before).await.map_err(|e| error_chain(&e));
        if w.tx.send(Listed { set: w.set, epoch: w.epoch, result }).is_err() {
            return;
        }
    }
}

/// What a removed unit's objects need: a client fenced as the unit was, and its cluster.
pub(super) struct Retiring {
    /// The removed unit.
    pub removed: Removed,
    /// Its cluster's client, fenced as its writes were.
    pub client: kube::Client,
    /// Its cluster's settings.
    pub cluster: ClusterConfig,
    /// The fence of its writes.
    pub fence: Fence,
}

/// A unit that left its set ([`crate::sync::retire`]): its objects are kept and counted (a
/// warning), or with `prune_removed` pruned — a prune the unit's guards (`max_prune_fraction`,
/// the empty revision) refuse unless it says `allow_prune_all` or the set
/// `prune_removed_unguarded`. Runs in a task of its own.
pub(super) async fn retire(r: Retiring) {
    let Removed { unit, set, prune, unguarded } = r.removed;
    let agent = crate::cluster::agent::user_agent(&crate::cluster::agent::process_identity());
    let how = crate::sync::retire::Retiring { prune, unguarded };
    match crate::sync::retire::retire(r.client, &r.cluster, &unit, &r.fence, &agent, how).await {
        Ok(Retired::Kept { members }) => {
            warn!(unit = %unit.name, set, objects = members, "unit left its sync set; its objects are kept");
        }
        Ok(Retired::Pruned(changes)) => match changes.prune_refused.as_deref() {
            Some(reason) => {
                warn!(unit = %unit.name, set, reason, "unit left its sync set; its objects are kept: the prune was refused")
            }
            None => {
                let pruned = changes.counts().pruned;
                info!(unit = %unit.name, set, pruned, "unit left its sync set; its objects are pruned");
            }
        },
        Err(e) if !prune => {
            warn!(unit = %unit.name, set, error = %error_chain(&e), "unit left its sync set; its objects are kept (not counted)");
        }
        Err(e) => {
            error!(unit = %unit.name, set, error = %error_chain(&e), "unit left its sync set; pruning its objects failed")
        }
    }
}
