//! The daemon: `gitward run`.
//!
//! - [`trigger`] — why a unit syncs, and the per-unit status the HTTP server reads.
//! - [`http`] — `/hooks/git` (signed webhooks), `/healthz`, `/readyz`, `/metrics`.
//! - [`webhook`] — signature checks (GitHub, Gitea, GitLab) and ref matching.
//! - [`metrics`] — Prometheus metrics.
//! - [`heal`] — self-heal: which drifted objects to re-apply when, per-object backoff of field fights.
//!
//! Leader election and sharding live in [`crate::lease`]; [`run`] wires them in.

pub(crate) mod backoff;
pub(crate) mod heal;
pub mod http;
pub mod metrics;
pub(crate) mod repo_watch;
pub mod run;
pub mod trigger;
pub(crate) mod unit;
pub(crate) mod webhook;
