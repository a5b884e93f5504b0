//! What goes wrong and what gitward says: cluster faults, conflicts, git and kill faults, outages, readiness, lost state, bad input and the catalogue of first errors.

pub(crate) mod bad_input;
pub(crate) mod cluster;
pub(crate) mod conflict;
pub(crate) mod error_catalogue;
pub(crate) mod git;
pub(crate) mod kill;
pub(crate) mod outage;
pub(crate) mod readiness;
pub(crate) mod state;
