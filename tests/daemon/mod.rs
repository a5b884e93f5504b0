//! `gitward run`: pushes, webhooks and their routes, the HTTP server, leader election, sharding, fencing, shared mirrors, the order of sync slots, load, suspend, resume and reconcile, the order of units by `depends_on`, and the Kubernetes Events of syncs (also `gitward sync`'s).

pub(crate) mod depends;
pub(crate) mod events;
pub(crate) mod fencing;
pub(crate) mod http;
pub(crate) mod ignore_heal;
pub(crate) mod leader;
pub(crate) mod load;
pub(crate) mod mirrors;
pub(crate) mod push;
pub(crate) mod run;
pub(crate) mod sharding;
pub(crate) mod slots;
pub(crate) mod suspend;
pub(crate) mod variables;
pub(crate) mod webhook_routes;
