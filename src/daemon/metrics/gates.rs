//! The series of what asks a unit to sync and what holds it back: triggers, suspension, the
//! wait for its dependencies and its backoff (see the table in [`super`]).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{KindLabels, UnitLabels};

/// The families of a unit's triggers and of the states that hold its syncs back.
pub(super) struct Gates {
    /// `gitward_triggers_total`.
    pub(super) triggers: Family<KindLabels, Counter>,
    /// `gitward_suspended_triggers_total`.
    pub(super) suspended_triggers: Family<KindLabels, Counter>,
    /// `gitward_unit_suspended`.
    pub(super) suspended: Family<UnitLabels, Gauge>,
    /// `gitward_unit_waiting_for_dependencies`.
    pub(super) blocked: Family<UnitLabels, Gauge>,
    /// `gitward_unit_backoff_until_seconds`.
    pub(super) backoff: Family<UnitLabels, Gauge>,
}

impl Gates {
    /// The families, registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let gates = Self {
            triggers: Family::default(),
            suspended_triggers: Family::default(),
            suspended: Family::default(),
            blocked: Family::default(),
            backoff: Family::default(),
        };
        registry.register("triggers", "Sync requests received, by what asked", gates.triggers.clone());
        registry.register(
            "suspended_triggers",
            "Sync requests a suspended unit did not act on, by what asked",
            gates.suspended_triggers.clone(),
        );
        let help = "While a unit backs off after a failed sync, when its next attempt is due (unix seconds); else 0";
        registry.register("unit_backoff_until_seconds", help, gates.backoff.clone());
        registry.register("unit_suspended", "1 while a unit is suspended, else 0", gates.suspended.clone());
        let help = "1 while a unit's new revision waits for the units it depends on (depends_on), else 0";
        registry.register("unit_waiting_for_dependencies", help, gates.blocked.clone());
        gates
    }
}
