//! The series of a unit's members' health: by health bucket, and the time to healthy (see
//! the table in [`super`]).

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::{HealthLabels, UnitLabels, histograms};

/// The families a health judgement updates.
pub(super) struct HealthSeries {
    /// `gitward_objects_health`.
    pub(super) objects_health: Family<HealthLabels, Gauge>,
    /// `gitward_time_to_healthy_seconds`.
    pub(super) time_to_healthy: Family<UnitLabels, Histogram, fn() -> Histogram>,
}

impl HealthSeries {
    /// The families, registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let health = Self { objects_health: Family::default(), time_to_healthy: histograms() };
        registry.register(
            "objects_health",
            "The unit's members by health as its last health judgement left them (as gitward status counts them)",
            health.objects_health.clone(),
        );
        registry.register_with_unit(
            "time_to_healthy",
            "From the end of an apply until every object it changed was Current",
            Unit::Seconds,
            health.time_to_healthy.clone(),
        );
        health
    }
}
