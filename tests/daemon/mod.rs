//! `gitward run`: pushes, webhooks and their routes, the HTTP server and its dashboard, leader election, sharding, fencing, shared mirrors, the order of sync slots, load, suspend, resume and reconcile, units generated from directories (`[[sync_set]]`), the Kubernetes Events of syncs and their notifications (also `gitward sync`'s), units ordered by `depends_on`, the per-unit metrics (readiness with its reason, failure streak, health counts as `gitward status` gives them), and the requests a unit's sync costs (audit log).

pub(crate) mod backoff;
pub(crate) mod dashboard;
pub(crate) mod depends;
pub(crate) mod events;
pub(crate) mod fencing;
pub(crate) mod follow_health;
pub(crate) mod http;
pub(crate) mod ignore_heal;
pub(crate) mod leader;
pub(crate) mod load;
pub(crate) mod metrics;
pub(crate) mod mirrors;
pub(crate) mod notify;
pub(crate) mod push;
pub(crate) mod requests;
pub(crate) mod run;
pub(crate) mod sharding;
pub(crate) mod slots;
pub(crate) mod suspend;
pub(crate) mod sync_set;
pub(crate) mod variables;
pub(crate) mod webhook_routes;
