//! `gitward preview` against the real apiserver, real git and the real kustomize and sops: what a revision would do to the live cluster, the change's effect apart from drift, the prune guards' verdict secrets never shown, and the units a `[[sync_set]]` directory adds or removes.

pub(crate) mod effect;
pub(crate) mod merge;
pub(crate) mod sets;
