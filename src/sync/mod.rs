//! The engine: one sync of one sync unit, from git fetch to prune (DESIGN.md, Data flow).
//!
//! [`Engine`] owns what lives across syncs of a unit — the git mirror, the parse cache, the
//! discovery cache and the metadata-only cache — so a daemon keeps them warm and the CLI's
//! one-shot `sync` builds them once. [`Engine::sync`] returns a [`Report`] and logs nothing.
//!
//! Nothing is lost on bad input (DESIGN.md decision 8): a revision that fails to read, parse
//! or resolve is not applied at all and nothing is pruned; the error names the file and
//! document or the object.
//!
//! The engine ([`engine`]) orchestrates parts that own their state and requests; the other
//! files are those parts and the steps' own logic: `repo` (the mirror, render and parse cache
//! off the runtime), `loader` (a revision fetched, loaded and its variables substituted),
//! `state` (the cluster view: discovery, the metadata cache, and `writes`, the one seam every
//! write of a sync goes through: to the API server, or recorded), `parent` (the ApplySet
//! parent, its record, the namespaces made for it), `health` (what a wait covers; the unit's
//! health as last judged), `hooks` (Helm hooks as phases), `order` (the order of a sync's
//! steps once planned, tested over the recorded writes), `early` (which of a push's changed
//! objects may go first), `desired` (resolve, default namespace, label), `pending` (custom
//! resources whose CRD the revision brings), `ownership` (objects another ApplySet owns:
//! refused or adopted), `prune_step` (the prune guards), `outcome` (a sync's end: applied or
//! failed), `follow` (health followed between syncs), `diff` (`gitward diff`'s report), `set`
//! (a `[[sync_set]]`'s directories listed at the tip, and its units), `substitute`
//! (`[sync.substitute]`'s variables read and substituted into each load).

#[cfg(test)]
pub(crate) mod build;
pub mod desired;
pub(crate) mod diff;
pub(crate) mod early;
mod engine;
pub mod follow;
mod health;
pub mod hooks;
mod loader;
mod order;
pub mod outcome;
mod ownership;
mod parent;
pub(crate) use parent::namespaces;
mod pending;
pub mod provenance;
mod prune_step;
pub(crate) mod repo;
pub mod retire;
pub mod sealed;
pub mod set;
mod state;
pub mod substitute;
pub mod writes;

use std::time::Instant;

use crate::changeset::ChangeSet;
use crate::health::wait::Target;
use crate::manifest::Skipped;
use crate::source::Revision;
pub use early::EarlyApply;
pub use engine::Engine;
pub use outcome::{Cause, Ended, HealthStep, Outcome, Timings};

/// Errors of one sync. Source errors are worth retrying with backoff; manifest, duplicate and
/// unknown-kind errors are bad input that only a new revision fixes; cluster errors are worth
/// retrying.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Fetching or reading the repository failed.
    #[error(transparent)]
    Source(#[from] crate::source::Error),
    /// A manifest could not be parsed or is not a valid object.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::Error),
    /// Rendering the unit's path (kustomize, Helm, SOPS) failed: bad input, like a parse
    /// error; the message names the unit, the path and the tool.
    #[error(transparent)]
    Render(#[from] crate::render::Error),
    /// Two documents describe the same object.
    #[error("{object}: defined twice, in {first} and in {second}{hint}")]
    Duplicate {
        /// `Kind/ns/name`.
        object: String,
        /// Where it was first defined.
        first: String,
        /// Where it was defined again.
        second: String,
        /// Empty, or `; ` and the likely cause: a kustomization read as plain manifests ([`desired::hinted`]).
        hint: String,
    },
    /// A kind that the API server does not serve and that no CRD of the revision defines.
    #[error("{origin}: unknown kind {kind} in {api_version}: the API server does not serve it")]
    UnknownKind {
        /// File and document.
        origin: String,
        /// The manifest's `apiVersion`.
        api_version: String,
        /// The manifest's `kind`.
        kind: String,
    },
    /// Discovery, the metadata cache or the inventory failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::Error),
    /// A gitward annotation in a manifest has a value gitward does not know (e.g.
    /// `gitward.dev/apply-mode: replace`): bad input, like a parse error.
    #[error("{origin}: annotation {annotation}: {message}")]
    InvalidAnnotation {
        /// File and document.
        origin: String,
        /// The annotation's key.
        annotation: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// The key that hashes objects holding a Secret's value (`[sync.substitute]`,
    /// [`substitute::KEY_FILE`] under `state_dir`) can be neither read nor made.
    #[error("{path}: {message}")]
    SubstituteKey {
        /// The key file.
        path: String,
        /// What the file system said.
        message: String,
    },
    /// A blocking task (git, parsing) panicked or was cancelled.
    #[error("background task failed: {0}")]
    Task(String),
    /// `[provenance]`: the key cannot be read, or a sync's attestation made or kept.
    #[error("provenance: {0}")]
    Provenance(String),
    /// A `[[sync_set]]`'s directories made units that cannot be: more than its `max_units`,
    /// a name that is not a unit name, a name or inventory of another unit ([`set`]). Bad
    /// input: not worth retrying before the repository or the config changes.
    #[error(transparent)]
    Set(#[from] crate::config::Error),
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// The outcome of one sync of one unit.
#[derive(Debug, Clone)]
pub struct Report {
    /// The unit's name.
    pub unit: String,
    /// The revision applied.
    pub revision: Revision,
    /// One entry per object.
    pub changes: ChangeSet,
    /// Files and documents that were skipped (kustomization files, symlinks), with the reason.
    pub skipped_files: Vec<Skipped>,
    /// How long the sync took, in all and rendering (its `wait` zero: the health wait runs
    /// after the report).
    pub took: Timings,
    /// What was sent: when, how much of it early, what the health wait watches.
    pub sent: Sent,
    /// True for [`Engine::heal`]'s report: a few drifted objects re-applied, not a sync of the
    /// revision, so it leaves the recorded attempt (and its error) as it is.
    pub heal: bool,
    /// The sync stopped sending when [`Engine::yield_signal`] was raised: `changes` holds what
    /// was sent, nothing was pruned, and the revision is not applied whole.
    pub yielded: bool,
    /// The objects came from the plain files of the unit's path alone
    /// ([`crate::manifest::Loaded::path_only`]): a later revision whose tree at that path is the
    /// same object brings the same objects. False for a self-heal.
    pub path_only: bool,
    /// With `path_only`: the id of the git tree at the unit's path at `revision`
    /// ([`crate::source::Source::path_tree`]), recorded on the parent so that a unit depending
    /// on this one takes a later revision with the same tree there as applied
    /// ([`crate::health::record::LAST_PATH_TREE`]). `None` otherwise, and for a self-heal.
    pub path_tree: Option<String>,
    /// Who signed `revision`, as `[sync.verify]` found them when it was fetched
    /// (`Repo::signers`); empty when the unit verifies nothing.
    pub signers: Vec<crate::source::Signer>,
}

/// What a sync sent, for the health wait and the push-to-applied figure.
#[derive(Debug, Clone)]
pub struct Sent {
    /// When the last object that git changed was applied (else when the apply ended), for
    /// `trigger_to_applied_ms`.
    pub applied_at: Instant,
    /// The objects this sync created, configured or drift-corrected: what the health wait
    /// watches ([`crate::health::wait`]).
    pub health_targets: Vec<Target>,
    /// How many of the objects git changed were applied early, before the revision was loaded
    /// whole ([`early`]); included in the report's `changes`.
    pub applied_early: usize,
}

#[cfg(test)]
#[path = "shape_tests.rs"]
mod shape_tests;
