//! The daemon: `gitward run`.
//!
//! - [`run`] — set-up, and the daemon's event loop: one method per event (signals, config
//!   reload, leadership and unit ownership changes, units stopped, restarts, sd_notify).
//! - [`decide`] — its decisions, pure: which units to start, restart and stop; when `READY=1`
//!   and `/readyz` say ready; the `STATUS=` line.
//! - [`units`] — the set of running unit tasks, started and stopped as decided.
//! - [`unit`](mod@unit) — one unit's task: one loop over its phases (idle, backing off, syncing, waiting
//!   for health).
//! - [`trigger`] — why a unit syncs, and the per-unit status the HTTP server reads.
//! - [`http`] — `/hooks/git` (signed webhooks), `/healthz`, `/readyz`, `/metrics`.
//! - [`ui`] — the read-only web dashboard (`[daemon.ui]`): pages, live updates, access.
//! - [`webhook`] — signature checks (GitHub, Gitea, GitLab) and ref matching.
//! - [`route`] — which units a webhook triggers: the repository and ref it names against
//!   what each unit follows.
//! - [`metrics`] — Prometheus metrics.
//! - [`heal`] — self-heal: which drifted objects to re-apply when, per-object backoff of field fights.
//! - [`backoff`] — exponential backoff with jitter.
//! - [`repo_watch`] — the watch of a local repository's refs; [`shared_watch`] shares one
//!   per repository among the units that follow it, and [`quiet`] answers a push for the units
//!   it leaves alone without waking them.
//! - [`sets`] — the `[[sync_set]]`s: their directories listed at the tip by a watcher per
//!   set, their units made anew when those change, the objects of units that left kept or
//!   pruned.
//! - [`preview`](mod@preview) — the `[[preview]]` tasks: open pull requests' heads previewed and the
//!   reports posted to the forge, apart from the sync slots.
//! - [`vars_watch`] — the watch of a unit's `[sync.substitute] from` ConfigMaps and Secrets.
//!
//! Leader election and sharding live in [`crate::lease`]; [`run`] wires them in.

pub(crate) mod backoff;
pub(crate) mod decide;
pub(crate) mod heal;
pub mod http;
pub mod metrics;
pub(crate) mod preview;
pub mod quiet;
pub(crate) mod repo_watch;
pub mod route;
pub mod run;
pub(crate) mod sets;
pub(crate) mod shared_watch;
pub(crate) mod slots;
pub mod trigger;
pub mod ui;
pub(crate) mod unit;
pub(crate) mod units;
pub(crate) mod vars_watch;
pub(crate) mod webhook;
