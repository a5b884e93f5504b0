//! Isolation of units from each other's faults: hung, trickling and resetting remotes, chart repositories and registries, renders that run to their timeout, beside a healthy unit whose pushes are timed from outside.

pub(crate) mod faults;
