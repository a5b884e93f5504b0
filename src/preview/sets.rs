//! The units a revision adds or removes through `[[sync_set]]` directories: each set's
//! `path_glob` listed at the revision and at the base (`--base`, else the listing the set last
//! expanded, recorded in the state directory: [`crate::sync::set::recorded`]), and the units
//! each listing makes ([`Config::expand`]) compared by name. A unit the revision adds is then
//! previewed whole, as every object created; one it removes is named with what becomes of its
//! objects (`prune_removed`).

use std::time::Instant;

use serde::Serialize;

use super::Request;
use crate::config::{Config, SyncSet, SyncUnit};
use crate::sync::set::{SetSource, recorded};

/// What a revision does to the units of one `[[sync_set]]`.
#[derive(Debug, Clone, Serialize)]
pub struct SetChange {
    /// The set's name template (`name`).
    pub set: String,
    /// The units the revision's directories make and the base's do not, by name; each is
    /// previewed as a unit of the report.
    pub added: Vec<String>,
    /// The units the base's directories make and the revision's do not, by name.
    pub removed: Vec<String>,
    /// Whether the objects of a removed unit would be pruned (`prune_removed`); kept otherwise.
    pub prune_removed: bool,
    /// Why the set could not be listed or expanded at the revision or the base, if so (then
    /// `added` and `removed` are empty).
    pub error: Option<String>,
}

/// The set changes of `request` over `config`'s sets (only those with a change or an error),
/// and the units the revision adds, to be previewed.
pub(super) async fn set_changes(config: &Config, request: &Request) -> (Vec<SetChange>, Vec<SyncUnit>) {
    let (mut changes, mut added) = (Vec::new(), Vec::new());
    for (index, set) in config.sets.iter().enumerate() {
        let mut change = SetChange {
            set: set.name.clone(),
            added: Vec::new(),
            removed: Vec::new(),
            prune_removed: set.prune_removed,
            error: None,
        };
        match compare(config, index, set, request).await {
            Ok((before, after)) => {
                let names = |units: &[SyncUnit]| units.iter().map(|u| u.name.clone()).collect::<Vec<_>>();
                let (was, now) = (names(&before), names(&after));
                change.removed = was.iter().filter(|n| !now.contains(n)).cloned().collect();
                for unit in after.into_iter().filter(|u| !was.contains(&u.name)) {
                    change.added.push(unit.name.clone());
                    added.push(unit);
                }
            }
            Err(message) => change.error = Some(message),
        }
        if change.error.is_some() || !change.added.is_empty() || !change.removed.is_empty() {
            changes.push(change);
        }
    }
    (changes, added)
}

/// The units set `index` makes at the base and at the revision.
async fn compare(
    config: &Config,
    index: usize,
    set: &SyncSet,
    request: &Request,
) -> Result<(Vec<SyncUnit>, Vec<SyncUnit>), String> {
    let state_dir = &config.daemon.state_dir;
    let after = listed(config, set, &request.revision).await?;
    let before = match &request.base {
        Some(base) => listed(config, set, base).await?,
        None => recorded(state_dir, set).map(|(_, dirs)| dirs).unwrap_or_default(),
    };
    let expand = |dirs: &[String]| config.expand(index, dirs).map_err(|e| e.to_string());
    Ok((expand(&before)?, expand(&after)?))
}

/// The directories `set`'s glob matches at `reference`.
async fn listed(config: &Config, set: &SyncSet, reference: &str) -> Result<Vec<String>, String> {
    let mut at = set.clone();
    at.source.reference = reference.to_owned();
    let source = SetSource::open(&config.daemon.state_dir, &at).await.map_err(|e| e.to_string())?;
    let (_, dirs) = source.list(Instant::now()).await.map_err(|e| e.to_string())?;
    Ok(dirs)
}
