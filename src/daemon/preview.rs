//! Pull-request previews under `gitward run` (`[[preview]]`): one task per table, apart from
//! the unit tasks — it takes no sync slot, so a preview never delays a sync of the unit it
//! previews — that finds the open pull requests' heads and posts each new head's report.
//!
//! A round, at each `interval` and at each accepted webhook (a push or a pull-request event:
//! [`Previews::nudge`]):
//! 1. the pull-request heads are fetched into the covered units' mirror, from the refs the
//!    forge keeps for them (`refs/pull/<n>/head` on GitHub, Gitea and Forgejo,
//!    `refs/merge-requests/<n>/head` on GitLab: [`crate::source::Source::fetch_pull_heads`]),
//!    so the commits are there to render;
//! 2. each head not previewed yet is asked of the forge: a closed pull request, a stale ref or
//!    a fork's (unless `allow_forks`) is left alone;
//! 3. the head gets the `pending` status, then the report of [`crate::preview::preview`] at
//!    that commit (rendered with each unit's own sandbox and memory cap, dry-run as each unit's
//!    writer), posted by [`crate::forge::Poster::publish`]: one comment per part, edited in
//!    place on the next head, and the `success` or `failure` status.
//!
//! The heads previewed are kept in `<state_dir>/previews/<index>.json`, so a restart does not
//! post again what was posted. A failed round is logged and tried again at the next one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::cluster::registry::Registry;
use crate::config::{Config, ForgeKind, Preview, SyncUnit};
use crate::forge::{Poster, Published};
use crate::preview::{Request, preview};
use crate::source::Source;

/// The preview tasks of the config in force.
pub(crate) struct Previews {
    /// The `[[preview]]` tables the tasks run, to restart them only when those change.
    tables: Vec<Preview>,
    /// The config each round reads (its units), replaced at each reconcile.
    config: Option<watch::Sender<Arc<Config>>>,
    /// Wakes every task for a round now.
    nudge: Arc<Notify>,
    tasks: Vec<JoinHandle<()>>,
}

impl Previews {
    /// No task yet; `nudge` wakes them (the HTTP server's [`super::http::HttpState::previews`],
    /// notified at each accepted webhook).
    pub(crate) fn new(nudge: Arc<Notify>) -> Self {
        Self { tables: Vec::new(), config: None, nudge, tasks: Vec::new() }
    }

    /// Puts `config`'s `[[preview]]` tables in force: the tasks are started again when the
    /// tables changed, and read the new units either way.
    pub(crate) fn configure(&mut self, config: &Config, clusters: &Registry) {
        let shared = Arc::new(config.clone());
        if self.tables == config.preview
            && let Some(tx) = &self.config
        {
            tx.send_replace(shared);
            return;
        }
        self.stop();
        self.tables = config.preview.clone();
        let (tx, rx) = watch::channel(shared);
        for (index, table) in config.preview.iter().enumerate() {
            let task = Task {
                index,
                table: table.clone(),
                config: rx.clone(),
                clusters: clusters.clone(),
                nudge: self.nudge.clone(),
            };
            self.tasks.push(tokio::spawn(task.run()));
        }
        self.config = Some(tx);
    }

    /// Stops every task now (leadership lost, shutdown, new tables).
    pub(crate) fn stop(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.tables.clear();
        self.config = None;
    }
}

/// One `[[preview]]` table's task.
struct Task {
    index: usize,
    table: Preview,
    config: watch::Receiver<Arc<Config>>,
    clusters: Registry,
    nudge: Arc<Notify>,
}

impl Task {
    async fn run(self) {
        let poster = match Poster::new(&self.table) {
            Ok(p) => p,
            Err(e) => {
                warn!(preview = %self.table.repository, error = %e, "preview cannot start");
                return;
            }
        };
        let state_dir = self.config.borrow().daemon.state_dir.clone();
        let seen_file = state_dir.join("previews").join(format!("{}.json", self.index));
        let mut seen = read_seen(&seen_file);
        loop {
            // Made before the round: a webhook accepted while the round runs (a head pushed
            // after its fetch) wakes the next one at once instead of being lost to the interval.
            let nudged = self.nudge.notified();
            let config = self.config.borrow().clone();
            let before = seen.clone();
            if let Err(e) = self.round(&config, &poster, &mut seen).await {
                warn!(preview = %self.table.repository, error = %e, "preview round failed; trying again at the next");
            }
            // Written only when a head was previewed or left alone: a round that found nothing
            // new writes nothing.
            if seen != before {
                write_seen(&seen_file, &seen);
            }
            tokio::select! {
                () = tokio::time::sleep(self.table.interval) => {}
                () = nudged => {}
            }
        }
    }

    /// One round: the heads fetched, each new one previewed and posted.
    async fn round(&self, config: &Config, poster: &Poster, seen: &mut BTreeMap<u64, String>) -> Result<(), String> {
        let units: Vec<&SyncUnit> = config.units.iter().filter(|u| self.table.covers(&u.name)).collect();
        let Some(first) = units.iter().find(|u| u.is_git()) else {
            return Err("no git unit is covered".into());
        };
        let heads = self.heads(config, first).await?;
        for (pr, sha) in heads {
            if seen.get(&pr) == Some(&sha) {
                continue;
            }
            let head = poster.head_of(pr).await.map_err(|e| e.to_string())?;
            if !head.open || head.sha != sha || (head.fork && !self.table.allow_forks) {
                seen.insert(pr, sha);
                continue;
            }
            poster.pending(pr, &sha).await.map_err(|e| e.to_string())?;
            let request =
                Request { revision: sha.clone(), base: None, units: units.iter().map(|u| u.name.clone()).collect() };
            let report = preview(config, &self.clusters, &request).await.map_err(|e| e.to_string())?;
            let published =
                poster.publish(pr, &sha, &report.markdown(), report.failing()).await.map_err(|e| e.to_string())?;
            if let Published::Posted { comments, created, edited, deleted, .. } = &published {
                info!(preview = %self.table.repository, pr, head = %sha, parts = comments.len(), created, edited, deleted, failing = report.failing(), "preview posted");
            }
            seen.insert(pr, sha);
        }
        Ok(())
    }

    /// The pull requests' heads, fetched into the mirror of `unit` (the first covered git unit).
    async fn heads(&self, config: &Config, unit: &SyncUnit) -> Result<Vec<(u64, String)>, String> {
        let namespace = match self.table.forge {
            ForgeKind::Gitlab => "refs/merge-requests",
            ForgeKind::Github | ForgeKind::Gitea => "refs/pull",
        };
        let spec = crate::sync::repo::source_spec(unit);
        let state_dir = config.daemon.state_dir.clone();
        tokio::task::spawn_blocking(move || {
            let source = Source::open(&state_dir, spec).map_err(|e| e.to_string())?;
            source.fetch_pull_heads(namespace).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }
}

/// The heads previewed, by pull request, as last written; empty when the file is missing or
/// unreadable (every open pull request is then previewed once more).
fn read_seen(path: &Path) -> BTreeMap<u64, String> {
    std::fs::read(path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Writes the heads previewed (through a temporary file, renamed); a failure is logged.
fn write_seen(path: &PathBuf, seen: &BTreeMap<u64, String>) {
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(seen).unwrap_or_default())?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        warn!(file = %path.display(), error = %e, "previewed heads not written");
    }
}
