//! `[[sync_set]]` at the tip of its repository: the set's mirror fetched, the directories its
//! glob matches listed ([`SetSource`]), and a config's sets expanded into units for the one-shot
//! commands ([`expand_at_tip`]). The daemon keeps a [`SetSource`] per set and lists again on
//! each of its triggers.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::Result;
use super::repo::Repo;
use crate::config::{Config, SyncSet};
use crate::source::Revision;

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

/// `config` with every set's units added, each set listed at the tip of its `ref` now: what
/// `gitward sync`, `validate`, `diff` and `status` read, so generated units are named and
/// synced like the others. A set's mirror is the one under `state_dir`; with `scratch`
/// (`gitward validate`, which writes nothing to the state directory), a set whose mirror is
/// not there yet is cloned under `scratch` instead.
///
/// Errors: [`super::Error::Source`] when a set's repository cannot be fetched or listed;
/// [`super::Error::Set`] when a set makes more units than its `max_units`, a unit that does
/// not resolve, or a name or inventory another unit has.
pub async fn expand_at_tip(config: Config, state_dir: &Path, scratch: Option<&Path>) -> Result<Config> {
    if config.sets.is_empty() {
        return Ok(config);
    }
    let mut generated = Vec::with_capacity(config.sets.len());
    for (index, set) in config.sets.iter().enumerate() {
        let dir = match scratch {
            Some(scratch) if !super::repo::mirror_exists(state_dir, &set.source) => scratch,
            _ => state_dir,
        };
        let (_, dirs) = SetSource::open(dir, set).await?.list(Instant::now()).await?;
        generated.push(config.expand(index, &dirs)?);
    }
    Ok(config.with_sets(&generated)?)
}

/// The config file at `path` ([`Config::load`]) with its sets expanded at the tip
/// ([`expand_at_tip`], mirrors under its `state_dir`, or `scratch`): how the one-shot
/// commands read the config.
///
/// Errors: [`super::Error::Set`] when the file cannot be loaded or a set not expanded;
/// [`super::Error::Source`] when a set's repository cannot be fetched or listed.
pub async fn load(path: &Path, scratch: Option<&Path>) -> Result<Config> {
    let config = Config::load(path)?;
    let state_dir = config.daemon.state_dir.clone();
    expand_at_tip(config, &state_dir, scratch).await
}
