//! `gitward_git_fetches_total`: the fetches of git mirrors this process ran, read from the
//! source module's counters at each scrape ([`crate::source::fetches_total`]).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

/// The collector of `gitward_git_fetches_total{result}`: `updated` (a branch or tag moved),
/// `unchanged`, `failed`, each once it is not 0. One fetch of a mirror shared by several units counts once.
#[derive(Debug)]
pub(super) struct GitFetches;

impl Collector for GitFetches {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (updated, unchanged, failed) = crate::source::fetches_total();
        // As every family here: a series appears once something was counted.
        if updated + unchanged + failed == 0 {
            return Ok(());
        }
        let help = "Fetches of git mirrors (one per repository and credentials, shared by its units), by whether a \
                    branch or tag moved";
        let mut family = encoder.encode_descriptor("git_fetches", help, None, MetricType::Counter)?;
        for (result, count) in [("updated", updated), ("unchanged", unchanged), ("failed", failed)] {
            if count == 0 {
                continue;
            }
            let labels = [("result", result)];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
