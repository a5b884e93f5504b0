//! gitward keeps a Kubernetes cluster equal to a git repository of manifests.
//!
//! One sync of a sync unit flows through these modules, in order (see ARCHITECTURE.md):
//!
//! - [`config`] — the TOML config file: raw (what the file says) resolved into [`config::Config`].
//! - [`source`] — the git side: a bare mirror per repository and credentials, shared by its
//!   units and fetched with git2; a ref resolved to a revision; the files under the unit's path
//!   listed and read from the object database.
//! - [`render`] — between source and manifest: plain files, `kustomize build` or `helm
//!   template` run as child processes on a scratch tree from git, SOPS decryption, and a
//!   render cache keyed by the content read.
//! - [`manifest`] — YAML/JSON documents parsed as kubectl reads them into desired objects; the
//!   desired hash; a parse cache keyed by blob id.
//! - [`object`] — object identity: [`object::ObjectRef`] and [`object::GroupKind`].
//! - [`cluster`] — the cluster side: discovery (kind → resource and scope), the metadata-only
//!   cache of inventory members, and the ApplySet inventory (KEP-3659).
//! - [`plan`] — a pure function of desired objects and live metadata: create / configure /
//!   unchanged / prune, in apply stages.
//! - [`apply`] — executes a plan stage by stage, one request per desired object in the common
//!   case, with server-side apply or `update` mode (Get-Modify-Update with optimistic
//!   locking) per object; takes over fields of `kubectl apply`; returns a change set.
//! - [`health`] — the kstatus rules (a pure function of one object's status) and the bounded,
//!   event-driven wait for what a sync changed; the last result recorded on the ApplySet parent.
//! - [`prune`] — deletes inventory members that git no longer holds, in reverse stage order,
//!   only after re-checking each is still a member and that no Namespace or CRD takes others.
//! - [`changeset`] — the result of a sync: one entry per object with its action.
//! - [`sync`] — the engine that runs one sync of one unit through all of the above.
//! - [`lease`] — replicas coordinated over Leases: leader election, sharding's membership,
//!   assignment of units and their hand-over.
//! - [`daemon`] — `gitward run`: one task per unit, triggers (poll, push, webhook, drift, resync,
//!   SIGHUP), HTTP (webhook, health, metrics), sd_notify; wires in [`lease`].
//! - [`observe`] — whatever tells of a sync, behind one `Observer` trait, told each sync's
//!   outcome by `gitward sync` and the daemon: the log events (`object`, `health`, `sync
//!   complete`), the stdout line, Kubernetes Events (through a writer task of their own),
//!   notifications, the daemon's metrics and readiness, and the dashboard's board.
//! - [`notify`] — notifications of syncs (`[[notify]]`): a signed webhook, Slack, commit
//!   statuses on GitHub, GitLab and Gitea, sent from a bounded queue.
//! - [`forge`] — preview reports on pull requests (`[[preview]]`): comments on GitHub, GitLab
//!   and Gitea kept in place, split under each forge's limit, and a `gitward/preview` status.
//! - [`telemetry`] — logging set-up (text or JSON on stderr) and `error_chain`.
//! - [`summary`] — the one line per unit that `sync` and `validate` print on stdout.
//! - [`cli`] — the command line as clap parses it, the `--help` texts of the commands (output,
//!   exit codes, an example), and the completions, man pages and version text made from them.
//! - [`validate`] — `gitward validate`: parse and check without a cluster.
//! - [`import`] — `gitward import`: Flux's and Argo CD's objects, from files or the cluster,
//!   made into a config, each field with no equivalent a warning.
//! - [`status`] — `gitward status`: what each unit applied, when, with what result, and the
//!   health of its members, read from the cluster.
//! - [`control`] — `gitward suspend`, `resume` and `reconcile`: controls on a unit's ApplySet
//!   parent that the running daemon acts on.
//! - [`preview`] — `gitward preview`: what a revision (a pull request's head) would do to the
//!   live cluster, per unit whose render it changes, secrets changed but never shown.
#![deny(missing_docs)]
// The map above and the modules' own maps name the crate-internal modules on purpose: they are
// the reading order. `cargo doc --document-private-items` renders them as links.
#![allow(rustdoc::private_intra_doc_links)]

pub(crate) mod apply;
pub mod changeset;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod control;
pub mod daemon;
pub mod forge;
pub mod health;
pub mod import;
pub mod lease;
pub mod manifest;
pub mod notify;
pub mod object;
pub mod observe;
pub mod plan;
pub mod preview;
pub mod prune;
pub(crate) mod render;
pub mod source;
pub mod status;
pub mod summary;
pub mod sync;
pub mod telemetry;
pub mod validate;

#[cfg(test)]
mod layering;

// The entry points, in the order of the map above: the config a run starts from, the engine
// that syncs one unit and what it reports, and the commands' own entries.
pub use changeset::ChangeSet;
pub use config::Config;
pub use daemon::run::run;
pub use object::ObjectRef;
/// `gitward sandbox-check`: the attacks on the render sandbox, made where gitward runs.
pub use render::sandbox_check;
pub use status::unit_state;
pub use sync::{Engine, Report};
pub use validate::validate_units;

pub use cluster::agent::TOOLING;
