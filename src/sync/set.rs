//! `[[sync_set]]` at the tip of its repository: the set's mirror fetched, the directories its
//! glob matches listed ([`SetSource`]), the last listing that expanded recorded in the state
//! directory ([`record`], [`recorded`]), and a config's sets expanded into units for the
//! one-shot commands ([`expand_at_tip`]). The daemon keeps a [`SetSource`] per set and lists
//! again on each of its triggers.
//!
//! The record is what a set that does not expand now (its listing fails, makes more units than
//! `max_units`, or a directory makes no valid unit) keeps its units by: in every command and
//! in a daemon started again in that state. It lives beside the set's mirror, under
//! `<state_dir>/sets/`, one JSON file per set named by a hash of the set's name template,
//! repository and ref (a set of another identity never reads it), holding the revision and
//! its directories — never the repository URL, which may carry a token. A state directory
//! without it (a fresh one, another machine) gives such a set no units, with a warning; no
//! unit is ever retired for it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};
use tracing::warn;

use super::Result;
use super::repo::Repo;
use crate::config::{Config, SyncSet, SyncUnit};
use crate::source::Revision;
use crate::telemetry::error_chain;

/// A set's repository: the shared mirror of its `repo` and credentials (the units of the set
/// share it too), and the glob to list.
#[derive(Clone)]
pub struct SetSource {
    /// The mirror, opened for the set's stand-in unit ([`SyncSet::source`]).
    repo: Repo,
    /// `path_glob`.
    glob: String,
}

impl SetSource {
    /// Opens (or creates) the set's mirror under `state_dir`; nothing is fetched.
    ///
    /// Errors: [`super::Error::Source`] when the mirror cannot be opened.
    pub async fn open(state_dir: &Path, set: &SyncSet) -> Result<Self> {
        let repo = Repo::open(state_dir, &Arc::new(set.source.clone())).await?;
        Ok(Self { repo, glob: set.path_glob.clone() })
    }

    /// Fetches the set's `ref` (a fetch of the shared mirror that began at or after
    /// `not_before` is taken instead, as [`Repo::fetch_since`]) and lists the directories its
    /// glob matches at that revision, sorted.
    ///
    /// Errors: [`super::Error::Source`]: the fetch, the ref, a directory that cannot be read.
    pub async fn list(&self, not_before: Instant) -> Result<(Revision, Vec<String>)> {
        let revision = self.repo.fetch_since(not_before).await?;
        let dirs = self.repo.directories(&revision, &self.glob).await?;
        Ok((revision, dirs))
    }
}

/// What [`record`] writes.
#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    /// The set's name template, for a reader of the file.
    set: String,
    /// The revision listed.
    revision: String,
    /// The directories it matched, as [`SetSource::list`] gave them.
    dirs: Vec<String>,
}

/// `<state_dir>/sets/<hash of the set's identity>.json`.
fn record_path(state_dir: &Path, set: &SyncSet) -> PathBuf {
    let mut hash = Sha256::new();
    for part in [&set.name, &set.source.repo, &set.source.reference] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    state_dir.join("sets").join(format!("{}.json", hex::encode(&hash.finalize()[..16])))
}

/// Records `dirs`, listed at `revision`, as the last listing of `set` that expanded; written
/// to a temporary file and renamed over the old record, so a reader sees one or the other.
///
/// Errors: the I/O error of creating the directory, writing or renaming.
pub fn record(state_dir: &Path, set: &SyncSet, revision: &Revision, dirs: &[String]) -> std::io::Result<()> {
    let path = record_path(state_dir, set);
    let dir = path.parent().expect("a record is in a directory");
    std::fs::create_dir_all(dir)?;
    let record = Record { set: set.name.clone(), revision: revision.0.clone(), dirs: dirs.to_vec() };
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    serde_json::to_writer(&mut file, &record)?;
    file.persist(&path).map_err(|e| e.error)?;
    Ok(())
}

/// The directories [`record`] last recorded for `set`, with their revision; `None` when
/// there is no record (or it cannot be read: the set then has no units to keep).
pub fn recorded(state_dir: &Path, set: &SyncSet) -> Option<(Revision, Vec<String>)> {
    let text = std::fs::read(record_path(state_dir, set)).ok()?;
    let record: Record = serde_json::from_slice(&text).ok()?;
    Some((Revision(record.revision), record.dirs))
}

/// The units set `index` of `config` makes of `dirs`, when they resolve and, added to
/// `generated` (the units of the sets before it), take no other unit's name or inventory.
///
/// Errors: as [`Config::expand`] and [`Config::with_sets`].
pub fn units_of(config: &Config, index: usize, dirs: &[String], generated: &[Vec<SyncUnit>]) -> Result<Vec<SyncUnit>> {
    let units = config.expand(index, dirs)?;
    let mut with = generated[..index.min(generated.len())].to_vec();
    with.push(units);
    config.with_sets(&with)?;
    Ok(with.pop().unwrap_or_default())
}

/// `config` with every set's units added, each set listed at the tip of its `ref` now: what
/// `gitward sync`, `validate`, `diff` and `status` read, so generated units are named and
/// synced like the others. A set's mirror is the one under `state_dir`; with `scratch`
/// (`gitward validate`, which writes nothing to the state directory), a set whose mirror is
/// not there yet is cloned under `scratch` instead. Without `scratch`, a set that expands is
/// recorded ([`record`]).
///
/// A set that cannot be listed or expanded (its repository, more units than `max_units`, a
/// directory that makes no valid unit, a name or inventory another unit has) does not stop
/// the others: it keeps the units of its [`recorded`] listing, or makes none, and a warning
/// names it and the error.
pub async fn expand_at_tip(config: Config, state_dir: &Path, scratch: Option<&Path>) -> Config {
    let mut generated: Vec<Vec<SyncUnit>> = Vec::with_capacity(config.sets.len());
    for (index, set) in config.sets.iter().enumerate() {
        let dir = match scratch {
            Some(scratch) if !super::repo::mirror_exists(state_dir, &set.source) => scratch,
            _ => state_dir,
        };
        let listed = async { SetSource::open(dir, set).await?.list(Instant::now()).await };
        let fresh = match listed.await {
            Ok((revision, dirs)) => units_of(&config, index, &dirs, &generated).map(|units| (revision, dirs, units)),
            Err(e) => Err(e),
        };
        let units = match fresh {
            Ok((revision, dirs, units)) => {
                if scratch.is_none()
                    && let Err(e) = record(state_dir, set, &revision, &dirs)
                {
                    warn!(set = %set.name, error = %e, "sync set listing not recorded");
                }
                units
            }
            Err(e) => last_recorded(&config, index, &generated, state_dir, &e),
        };
        generated.push(units);
    }
    config.with_sets(&generated).unwrap_or(config)
}

/// The units of set `index`'s recorded listing, for a set that did not expand now because of
/// `error`; none when there is no record or it does not expand either. Warns, naming the set.
fn last_recorded(
    config: &Config,
    index: usize,
    generated: &[Vec<SyncUnit>],
    state_dir: &Path,
    error: &super::Error,
) -> Vec<SyncUnit> {
    let set = &config.sets[index];
    let error = error_chain(error);
    let Some((revision, dirs)) = recorded(state_dir, set) else {
        warn!(set = %set.name, error, "sync set not expanded and no listing recorded; it makes no units");
        return Vec::new();
    };
    match units_of(config, index, &dirs, generated) {
        Ok(units) => {
            let (revision, count) = (revision.short(), units.len());
            warn!(set = %set.name, error, revision, units = count, "sync set not expanded; keeping its last recorded units");
            units
        }
        Err(e) => {
            let recorded = error_chain(&e);
            warn!(set = %set.name, error, recorded, "sync set not expanded, nor its recorded listing; it makes no units");
            Vec::new()
        }
    }
}

/// The config file at `path` ([`Config::load`]) with its sets expanded at the tip
/// ([`expand_at_tip`], mirrors under its `state_dir`, or `scratch`): how the one-shot
/// commands read the config.
///
/// Errors: [`super::Error::Set`] when the file cannot be loaded.
pub async fn load(path: &Path, scratch: Option<&Path>) -> Result<Config> {
    let config = Config::load(path)?;
    let state_dir = config.daemon.state_dir.clone();
    Ok(expand_at_tip(config, &state_dir, scratch).await)
}
