//! The series of completed syncs: duration, objects by action, API requests, failures,
//! refused revisions, the revision applied and the members tracked (see the table in
//! [`super`]).

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::{KindLabels, ObjectLabels, ReasonLabels, RequestLabels, RevisionLabels, UnitLabels, histograms};

/// The families a completed or failed sync updates.
pub(super) struct Syncs {
    /// `gitward_sync_duration_seconds`.
    pub(super) sync_duration: Family<UnitLabels, Histogram, fn() -> Histogram>,
    /// `gitward_objects_total`.
    pub(super) objects: Family<ObjectLabels, Counter>,
    /// `gitward_api_requests_total`.
    pub(super) api_requests: Family<RequestLabels, Counter>,
    /// `gitward_sync_errors_total`.
    pub(super) errors: Family<KindLabels, Counter>,
    /// `gitward_revisions_refused_total`.
    pub(super) refused: Family<ReasonLabels, Counter>,
    /// `gitward_last_applied_revision`.
    pub(super) last_revision: Family<RevisionLabels, Gauge>,
    /// `gitward_tracked_objects`.
    pub(super) tracked: Family<UnitLabels, Gauge>,
    /// The revision each unit's `gitward_last_applied_revision` series names, so the previous
    /// series is removed when the revision moves. Held across the swap so two updates of one
    /// unit cannot leave two series.
    pub(super) revisions: Mutex<HashMap<String, String>>,
}

impl Syncs {
    /// The families, registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let syncs = Self {
            sync_duration: histograms(),
            objects: Family::default(),
            api_requests: Family::default(),
            errors: Family::default(),
            refused: Family::default(),
            last_revision: Family::default(),
            tracked: Family::default(),
            revisions: Mutex::default(),
        };
        registry.register_with_unit(
            "sync_duration",
            "Wall time of a completed sync, from fetch to prune",
            Unit::Seconds,
            syncs.sync_duration.clone(),
        );
        registry.register("objects", "Objects handled by syncs, by what the sync did to them", syncs.objects.clone());
        registry.register(
            "api_requests",
            "Object requests sent to the API server: patch (server-side apply) and delete (prune)",
            syncs.api_requests.clone(),
        );
        registry.register("sync_errors", "Syncs that failed as a whole, by error kind", syncs.errors.clone());
        registry.register(
            "revisions_refused",
            "Revisions refused because they are not signed by a key [sync.verify] trusts, by reason",
            syncs.refused.clone(),
        );
        registry.register(
            "last_applied_revision",
            "The git revision a unit last applied (always 1; the revision is the label)",
            syncs.last_revision.clone(),
        );
        registry.register("tracked_objects", "Members of a unit's ApplySet inventory", syncs.tracked.clone());
        syncs
    }
}
