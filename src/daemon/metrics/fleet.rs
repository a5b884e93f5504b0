//! The metrics of many clusters and of sharding, kept apart from the per-sync ones:
//! `gitward_unit_cluster`, `gitward_shard_units_held`, `gitward_shard_units_unrenewed`, `gitward_shard_handovers_total`,
//! `gitward_shard_failover_seconds` (see the table in [`super`]).

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::{Metrics, duration_histogram};
use crate::lease::shard::{Handover, ShardEvents};

/// The sharding loop's reports become `gitward_shard_units_held`,
/// `gitward_shard_handovers_total` and, with the next completed sync of a unit taken over
/// from a dead replica, `gitward_shard_failover_seconds`.
impl ShardEvents for Metrics {
    fn units_held(&self, identity: &str, held: usize) {
        let held = i64::try_from(held).unwrap_or(i64::MAX);
        self.fleet.units_held.get_or_create(&IdentityLabels { identity: identity.to_owned() }).set(held);
    }

    fn handover(&self, identity: &str, direction: Handover) {
        let labels = HandoverLabels { identity: identity.to_owned(), direction: direction.as_str() };
        self.fleet.handovers.get_or_create(&labels).inc();
    }

    fn failover_started(&self, unit: &str, identity: &str, died: std::time::Instant) {
        let mut pending = self.fleet.failovers.lock().expect("failovers lock");
        pending.insert(unit.to_owned(), (identity.to_owned(), died));
    }

    fn units_unrenewed(&self, identity: &str, unrenewed: usize) {
        let unrenewed = i64::try_from(unrenewed).unwrap_or(i64::MAX);
        self.fleet.units_unrenewed.get_or_create(&IdentityLabels { identity: identity.to_owned() }).set(unrenewed);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitClusterLabels {
    unit: String,
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IdentityLabels {
    identity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandoverLabels {
    identity: String,
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailoverLabels {
    identity: String,
    cluster: String,
}

/// Metrics of many clusters and of sharding, kept apart from the per-sync ones.
pub(super) struct Fleet {
    /// `gitward_unit_cluster`.
    unit_cluster: Family<UnitClusterLabels, Gauge>,
    /// The cluster each unit's `gitward_unit_cluster` series names.
    clusters: Mutex<HashMap<String, String>>,
    /// `gitward_shard_units_held`.
    units_held: Family<IdentityLabels, Gauge>,
    /// `gitward_shard_units_unrenewed`.
    units_unrenewed: Family<IdentityLabels, Gauge>,
    /// `gitward_shard_handovers_total`.
    handovers: Family<HandoverLabels, Counter>,
    /// `gitward_shard_failover_seconds`.
    failover: Family<FailoverLabels, Histogram, fn() -> Histogram>,
    /// Units taken over from a dead replica and not yet synced here: the new holder and when
    /// the old one died.
    failovers: Mutex<HashMap<String, (String, std::time::Instant)>>,
}

impl Fleet {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let fleet = Self {
            unit_cluster: Family::default(),
            clusters: Mutex::default(),
            units_held: Family::default(),
            units_unrenewed: Family::default(),
            handovers: Family::default(),
            failover: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            failovers: Mutex::default(),
        };
        registry.register(
            "unit_cluster",
            "The cluster a unit applies to (always 1; the cluster is the label)",
            fleet.unit_cluster.clone(),
        );
        registry.register("shard_units_held", "Units whose Lease this replica holds", fleet.units_held.clone());
        registry.register(
            "shard_units_unrenewed",
            "Units some live replica runs whose Lease nobody renews (missing, released or expired)",
            fleet.units_unrenewed.clone(),
        );
        registry.register(
            "shard_handovers",
            "Unit Leases this replica acquired or handed over",
            fleet.handovers.clone(),
        );
        registry.register_with_unit(
            "shard_failover",
            "From a dead replica's membership Lease expiring to the first sync here of a unit it held",
            Unit::Seconds,
            fleet.failover.clone(),
        );
        fleet
    }

    /// Sets `gitward_unit_cluster{unit, cluster} 1` for a unit that started, replacing the
    /// series of the cluster it applied to before.
    pub(super) fn set_cluster(&self, unit: &str, cluster: &str) {
        let mut clusters = self.clusters.lock().expect("clusters lock");
        if let Some(previous) = clusters.insert(unit.to_owned(), cluster.to_owned()) {
            self.unit_cluster.remove(&UnitClusterLabels { unit: unit.to_owned(), cluster: previous });
        }
        self.unit_cluster
            .get_or_create(&UnitClusterLabels { unit: unit.to_owned(), cluster: cluster.to_owned() })
            .set(1);
    }

    /// A sync of `unit` completed: ends its failover time, if one is running.
    pub(super) fn synced(&self, unit: &str) {
        let Some((identity, died)) = self.failovers.lock().expect("failovers lock").remove(unit) else { return };
        let cluster = self.clusters.lock().expect("clusters lock").get(unit).cloned().unwrap_or_default();
        self.failover.get_or_create(&FailoverLabels { identity, cluster }).observe(died.elapsed().as_secs_f64());
    }

    /// `unit` stopped here: drop its cluster series and any failover time.
    pub(super) fn forget(&self, unit: &str) {
        if let Some(cluster) = self.clusters.lock().expect("clusters lock").remove(unit) {
            self.unit_cluster.remove(&UnitClusterLabels { unit: unit.to_owned(), cluster });
        }
        self.failovers.lock().expect("failovers lock").remove(unit);
    }
}
