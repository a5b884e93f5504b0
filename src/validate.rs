//! `gitward validate`: fetch, render and parse each unit's manifests and check them without a
//! cluster: the render succeeds (kustomize, Helm and SOPS run as in a sync; Helm with its own
//! default capabilities, since there is no cluster to ask), every document parses, every
//! object has apiVersion, kind and name, no object is defined twice. Kinds and scopes are not checked (that needs discovery); an object that names no
//! namespace is taken to be in the unit's namespace for the duplicate check.

use std::collections::HashMap;
use std::path::Path;

use crate::config::SyncUnit;
use crate::object::ObjectRef;
use crate::source::Revision;
use crate::sync::desired::origin;
use crate::sync::{Error, Result};

/// What a valid unit holds.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The revision checked.
    pub revision: Revision,
    /// Objects found.
    pub objects: usize,
}

/// Fetches the unit's repository into `state_dir` and checks its manifests.
///
/// Errors: [`Error::Source`], [`Error::Render`], [`Error::Manifest`] or [`Error::Duplicate`],
/// naming the file and document (or the unit, path and tool).
pub async fn validate_unit(state_dir: &Path, unit: &SyncUnit) -> Result<Summary> {
    let repo = crate::sync::repo::Repo::open(state_dir, unit).await?;
    let revision = repo.fetch().await?;
    let loaded = repo.load(&revision).await?;
    let mut seen: HashMap<ObjectRef, crate::manifest::Origin> = HashMap::new();
    for m in &loaded.manifests {
        let ns = m.namespace.clone().unwrap_or_else(|| unit.namespace.as_str().into());
        let object = ObjectRef::new(m.gk.clone(), Some(ns), &m.name);
        if let Some(first) = seen.insert(object.clone(), origin(m)) {
            return Err(Error::Duplicate {
                object: object.to_string(),
                first: first.to_string(),
                second: origin(m).to_string(),
            });
        }
    }
    Ok(Summary { revision, objects: loaded.manifests.len() })
}
