//! `gitward import flux|argocd`: Flux's and Argo CD's objects made into gitward's config.
//!
//! The objects are read from YAML files and directories ([`read_paths`], with the manifest
//! reader, [`crate::manifest::documents`]) or listed from the live cluster ([`from_cluster`]),
//! and [`import`] makes one `[[sync]]` table per Flux `Kustomization` and `HelmRelease`, per
//! Argo CD `Application` and per element of an `ApplicationSet` list generator, and one
//! `[[sync_set]]` per `ApplicationSet` git directory generator. The sources they name
//! (`GitRepository`, `OCIRepository`, `HelmRepository`, `HelmChart`, an `ExternalArtifact` of
//! an `ArtifactGenerator`) and Argo CD's `AppProject` give the units' `repo`, `ref`,
//! `[sync.helm]`, `[sync.verify]`, `service_account` and a set's `namespaces`.
//!
//! Every field is walked ([`fields::Fields`]): a field read is mapped, and every field left
//! over becomes a [`Warning`] naming the object and the field's path (`Kustomization
//! flux-system/apps: spec.healthChecks: no equivalent`), so nothing is dropped unsaid. Files
//! by role: `read` (files and directories into [`Object`]s), `live` (the same from the
//! cluster), `fields` (the walk and its warnings), `output` (the TOML written, with
//! `toml_edit`), `flux` and `argo` (the two mappings).

mod argo;
mod fields;
mod flux;
mod live;
mod output;
mod read;

use std::fmt;

pub use live::from_cluster;
pub use read::{Object, read_paths};

/// The tool whose objects are imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tool {
    /// Flux: `source.toolkit.fluxcd.io`, `kustomize.toolkit.fluxcd.io`, `helm.toolkit.fluxcd.io`.
    Flux,
    /// Argo CD: `argoproj.io` `Application`, `ApplicationSet` and `AppProject`.
    Argocd,
}

/// A field that has no equivalent in gitward, or was mapped only in part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The object, `Kind namespace/name` (or a file for what could not be read).
    pub object: String,
    /// The field's path in the object, `spec.healthChecks`; empty for the whole object.
    pub field: String,
    /// What became of it: `no equivalent`, or what to do instead.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{}: {}: {}", self.object, self.field, self.message)
        }
    }
}

/// What an import made.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The config file's text: `[[sync]]` and `[[sync_set]]` tables, each after a comment
    /// naming the object it came from, and `[daemon]` when an interval was mapped.
    pub config: String,
    /// The fields with no equivalent, in the order of the objects.
    pub warnings: Vec<Warning>,
    /// How many `[[sync]]` tables were written.
    pub units: usize,
    /// How many `[[sync_set]]` tables were written.
    pub sets: usize,
}

/// Why objects could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory named could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A file named does not parse as YAML or JSON.
    #[error(transparent)]
    Parse(#[from] crate::manifest::Error),
    /// The cluster could not be reached or listed.
    #[error("{what}: {source}")]
    Cluster {
        /// What was asked.
        what: String,
        /// The error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The config that does what `objects` (of `tool`; other objects are passed over) do, and the
/// fields that have no equivalent. `warnings` are prepended to the import's own (those of
/// reading, [`read_paths`]).
pub fn import(tool: Tool, objects: &[Object], warnings: Vec<Warning>) -> Imported {
    let mut notes = fields::Notes(warnings);
    let mut out = output::Output::default();
    match tool {
        Tool::Flux => flux::import(objects, &mut out, &mut notes),
        Tool::Argocd => argo::import(objects, &mut out, &mut notes),
    }
    // A template's field is warned of once, not once per element it makes.
    let mut seen = std::collections::HashSet::new();
    let warnings = notes.0.into_iter().filter(|w| seen.insert(w.to_string())).collect();
    Imported { units: out.units.len(), sets: out.sets.len(), config: out.render(tool), warnings }
}

/// A path as Flux and Argo CD write one (`./apps/staging`, `.`, `apps/`) as a repository path
/// (`apps/staging`, ``).
fn repo_path(path: &str) -> String {
    path.split('/').filter(|c| !c.is_empty() && *c != ".").collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests;
