//! The one line per unit that `gitward sync` prints on stdout, as an observer: the line of
//! [`crate::summary`] for what the sync did, or that it applied nothing.

use super::Observer;
use crate::sync::{Ended, Outcome};

/// The observer that prints the one line per unit of `gitward sync` on stdout (secrets
/// masked, [`crate::telemetry::mask`]): what the sync did ([`crate::summary::sync`]), or that
/// it applied nothing ([`crate::summary::not_synced`]).
pub struct Stdout;

impl Observer for Stdout {
    fn finished(&mut self, outcome: &Outcome) {
        let line = match &outcome.ended {
            Ended::Applied(report) => {
                crate::summary::sync(report, outcome.health.result, &outcome.not_ready, outcome.timings.wait)
            }
            Ended::Failed(failure) => crate::summary::not_synced(&failure.unit),
        };
        println!("{}", crate::telemetry::mask::mask(&line));
    }
}
