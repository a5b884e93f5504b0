//! One sync against the real apiserver: stages and their order, prune and its guards, namespaces, the records on the ApplySet parent, health, Helm hooks, watches, and the test cluster's own behaviours gitward relies on.

pub(crate) mod cert_manager;
pub(crate) mod chart_hooks;
pub(crate) mod cluster;
pub(crate) mod controllers;
pub(crate) mod early_order;
pub(crate) mod health;
pub(crate) mod hooks;
pub(crate) mod ignore_rules;
pub(crate) mod large_crds;
pub(crate) mod manifest_parity;
pub(crate) mod namespace_sharing;
pub(crate) mod plain_kustomization;
pub(crate) mod prune_safety;
pub(crate) mod record;
pub(crate) mod status_live;
pub(crate) mod status_writes;
pub(crate) mod substitute;
pub(crate) mod sync_e2e;
pub(crate) mod sync_stages;
pub(crate) mod tenancy;
pub(crate) mod update_mode;
pub(crate) mod watches;
