//! Each `depends_on` unit of a unit judged from its own ApplySet parent's record, as
//! `gitward status` shows it and `gitward sync` gates on it.

use serde::Serialize;

use super::Result;
use crate::cluster::inventory::Inventory;
use crate::cluster::registry::Registry;
use crate::config::SyncUnit;

/// One dependency of a unit, as `gitward status` and `gitward sync` judge it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DependencyState {
    /// The dependency's unit name.
    pub unit: String,
    /// It is ready ([`crate::health::ready::judge`]): a new revision of the unit may sync.
    pub ready: bool,
    /// Why not (`not yet synced`, `revision not applied (…)`, `not healthy (progressing)`,
    /// `ready_expr false`); `None` when ready.
    pub reason: Option<String>,
}

/// Judges each `depends_on` entry of `unit` from its dependency's ApplySet parent (one
/// metadata GET each, on the dependency's cluster in `clusters`), in file order. The revision
/// `unit` would sync is not known here, so a dependency on the same source is judged by its
/// own record alone (synced, its last attempt applied, healthy or its `ready_expr` true).
///
/// Errors: [`Error::Cluster`](super::Error::Cluster) when a parent cannot be read.
pub async fn dependencies(clusters: &Registry, unit: &SyncUnit) -> Result<Vec<DependencyState>> {
    let mut out = Vec::new();
    for dep in &unit.depends_on {
        let client = clusters.client(&dep.cluster).expect("every dependency names a configured cluster");
        let recorded = Inventory::new(&dep.inventory).recorded(client).await?.unwrap_or_default();
        let why = crate::health::ready::judge(Some(&recorded), dep.ready_expr.as_deref(), None);
        out.push(DependencyState { unit: dep.unit.clone(), ready: why.is_none(), reason: why.map(|w| w.to_string()) });
    }
    let unmade = crate::health::ready::Unmet::NotSynced.to_string();
    out.extend(unit.depends_on_unmade.iter().map(|name| DependencyState {
        unit: name.clone(),
        ready: false,
        reason: Some(unmade.clone()),
    }));
    Ok(out)
}

/// The `dependencies` that are not ready, as one text: `base: not healthy (progressing);
/// crds: not yet synced`; `None` when all are.
pub fn unmet(dependencies: &[DependencyState]) -> Option<String> {
    let unmet: Vec<String> = dependencies
        .iter()
        .filter(|d| !d.ready)
        .map(|d| format!("{}: {}", d.unit, d.reason.as_deref().unwrap_or_default()))
        .collect();
    (!unmet.is_empty()).then(|| unmet.join("; "))
}
