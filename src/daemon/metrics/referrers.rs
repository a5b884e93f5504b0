//! `gitward_attestation_referrers_total`: the attestations this process pushed to OCI
//! registries as referrers (`[provenance] oci_referrers`), read from the provenance module's
//! counters at each scrape ([`crate::sync::provenance::referrer::referrers_total`]).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

/// The collector of `gitward_attestation_referrers_total{result}`: `pushed`, `failed`, each
/// once it is not 0.
#[derive(Debug)]
pub(super) struct Referrers;

impl Collector for Referrers {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (pushed, failed) = crate::sync::provenance::referrer::referrers_total();
        // As every family here: a series appears once something was counted.
        if pushed + failed == 0 {
            return Ok(());
        }
        let help = "Attestations pushed to an OCI artifact or OCI chart unit's registry as referrers of the manifest applied, by \
                    whether the push succeeded";
        let mut family = encoder.encode_descriptor("attestation_referrers", help, None, MetricType::Counter)?;
        for (result, count) in [("pushed", pushed), ("failed", failed)] {
            if count == 0 {
                continue;
            }
            ConstCounter::new(count).encode(family.encode_family(&[("result", result)])?)?;
        }
        Ok(())
    }
}
