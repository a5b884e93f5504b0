//! A repository is untrusted input: the one door from git bytes to disk, the render sandbox, hostile manifests, secrets kept out of logs and state.

pub(crate) mod door;
pub(crate) mod door_bounds;
pub(crate) mod hostile_input;
pub(crate) mod masked_errors;
pub(crate) mod masking;
pub(crate) mod remote_bases;
pub(crate) mod sandbox;
pub(crate) mod sandbox_calls;
pub(crate) mod secret_scan;
