//! What a revision is made of: git sources and fetches, chart repositories and their outages, OCI artifacts, signatures, rendering with kustomize, Helm and SOPS.

pub(crate) mod artifacts;
pub(crate) mod chart_outage;
pub(crate) mod charts;
pub(crate) mod cosign;
pub(crate) mod fetch_guard;
pub(crate) mod fetch_private;
pub(crate) mod https;
pub(crate) mod large_index;
pub(crate) mod render;
pub(crate) mod render_inputs;
pub(crate) mod signatures;
pub(crate) mod source;
