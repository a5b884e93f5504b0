//! Prometheus metrics of the daemon, served on `GET /metrics` in the OpenMetrics text format.
//!
//! [`Metrics`] owns one registry and every metric family; the unit tasks and the HTTP server
//! update it through `&self` (each family is internally synchronised). Every name starts with
//! `gitward_`; label values are the lowercase names used in logs ([`Action::as_str`],
//! [`TriggerKind::as_str`], [`error_kind`]), so a log line and a series read alike.
//!
//! | series | type | labels |
//! |---|---|---|
//! | `gitward_sync_duration_seconds` | histogram, 5 ms … 328 s | `unit` |
//! | `gitward_objects_total` | counter | `unit`, `action` |
//! | `gitward_api_requests_total` | counter | `unit`, `verb` (`patch`, `delete`), `result` (`ok`, `error`) |
//! | `gitward_sync_errors_total` | counter | `unit`, `kind` |
//! | `gitward_revisions_refused_total` | counter | `unit`, `reason` (`unsigned`, `unknown-key`, `bad-signature`, `key-file`): revisions `[sync.verify]` refused |
//! | `gitward_last_applied_revision` | gauge, always 1 | `unit`, `revision` |
//! | `gitward_tracked_objects` | gauge | `unit` |
//! | `gitward_triggers_total` | counter | `unit`, `kind` |
//! | `gitward_objects_health` | gauge | `unit`, `health` (`healthy`, `progressing`, `degraded`): the unit's members by health as its last judgement left them, counted as `gitward status` counts them |
//! | `gitward_time_to_healthy_seconds` | histogram, 5 ms … 328 s | `unit`: from the end of the apply until every changed object was `Current` |
//! | `gitward_unit_cluster` | gauge, always 1 | `unit`, `cluster`: which cluster a running unit applies to (join on `unit`) |
//! | `gitward_shard_units_held` | gauge | `identity`: units whose Lease this replica holds (sharding) |
//! | `gitward_shard_units_unrenewed` | gauge | `identity`: units some live replica runs whose Lease nobody renews (missing, released or expired), as this replica sees it; above 0 for longer than the lease duration means units are applied by nobody |
//! | `gitward_shard_handovers_total` | counter | `identity`, `direction` (`acquired`, `released`): units taken and handed over with their bucket's Lease |
//! | `gitward_git_fetches_total` | counter | `result` (`updated`, `unchanged`, `failed`): fetches of git mirrors, one per fetch of a mirror however many units share it |
//! | `gitward_attestation_referrers_total` | counter | `result` (`pushed`, `failed`): attestations pushed to an OCI artifact or OCI chart unit's registry as referrers (`[provenance] oci_referrers`) |
//! | `gitward_unit_ready` | gauge, 0 or 1 | `unit`, `reason` (`healthy`, `failed`, `degraded`, `progressing`, `unknown`, `suspended`, `never_synced`): 1 when the last sync applied whole and every member is `Current`; one series per unit ([`unit`]) |
//! | `gitward_unit_failing_since_seconds` | gauge, unix time | `unit`: the first failed sync of the current run of failures; absent when the last sync did not fail |
//! | `gitward_unit_backoff_until_seconds` | gauge, unix time | `unit`: while a unit backs off after a failed sync (its source unreachable, its apply failed), when its next attempt is due; 0 when it is not backing off |
//! | `gitward_unit_objects` | gauge | `unit`: members the unit's cache tracks after its last sync |
//! | `gitward_unit_cache_bytes` | gauge | `unit`: estimated bytes of its metadata cache ([`crate::cluster::cache::MetadataCache::estimated_bytes`]) |
//! | `gitward_unit_render_seconds`, `gitward_unit_apply_seconds` | gauge | `unit`: the last sync's load (read, render, parse) and the rest of it |
//! | `gitward_notify_sent_total`, `gitward_notify_failures_total`, `gitward_notify_dropped_total` | counter | `notifier` (`notify[0]`, its `[[notify]]` table), `kind`: notifications sent, not sent after their retries, dropped by a full queue |
//! | `gitward_shard_failover_seconds` | histogram, 5 ms … 328 s | `identity`, `cluster`: from a dead replica's membership Lease expiring to the first completed sync here of a unit it held |
//! | `gitward_sandbox_layer` | gauge, 0 or 1 | `layer` (`landlock`, `seccomp`, `namespaces`): whether that layer of the render sandbox confines the tools this daemon runs ([`crate::render::sandbox::layers`]); all 0 with `[render] sandbox = "off"` |

mod fleet;
mod gates;
mod git;
mod health;
mod referrers;
mod sandbox;
mod syncs;
pub mod unit;

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use self::fleet::Fleet;
use self::gates::Gates;
use self::health::HealthSeries;
use self::sandbox::SandboxLayers;
use self::syncs::Syncs;
use self::unit::Units;
use crate::changeset::Action;
use crate::daemon::trigger::TriggerKind;
use crate::health::record::SyncResult;
use crate::source::VerifyFailure;
use crate::sync::{Error, Report};

/// The `Content-Type` of [`Metrics::encode`]'s output: prometheus-client's text encoder writes
/// the OpenMetrics 1.0 text format (ending in `# EOF`), which Prometheus scrapes natively.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Bucket upper bounds of the sync duration histogram, in seconds: 5 ms doubling 17 times, up
/// to 327.68 s (about 5.5 min), so a one-object sync and a ten-thousand-object sync both land
/// in a bucket of their own.
fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.005, 2.0, 17)
}

fn duration_histogram() -> Histogram {
    Histogram::new(duration_buckets())
}

/// A family of [`duration_histogram`]s by unit.
fn histograms() -> Family<UnitLabels, Histogram, fn() -> Histogram> {
    Family::new_with_constructor(duration_histogram as fn() -> Histogram)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitLabels {
    unit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    unit: String,
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    unit: String,
    verb: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    unit: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    unit: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HealthLabels {
    unit: String,
    health: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabels {
    unit: String,
    revision: String,
}

/// The daemon's metrics: a registry and handles to its families. Shared as `Arc<Metrics>`.
pub struct Metrics {
    /// Holds every family below, for [`Metrics::encode`]; never changed after [`Metrics::new`].
    registry: Registry,
    /// What completed and failed syncs did, and the revision each unit applied.
    syncs: Syncs,
    /// What asked each unit to sync, and what holds its syncs back.
    gates: Gates,
    /// Each unit's members by health, and the time to healthy.
    health: HealthSeries,
    /// Which cluster each unit applies to, and the sharding metrics.
    fleet: Fleet,
    /// `gitward_sandbox_layer`.
    sandbox: SandboxLayers,
    /// The per-unit gauges to alert on: readiness with its reason, the failure streak,
    /// members, cache size and the last sync's timings.
    units: Units,
    /// The notifiers' counters (`gitward_notify_*`), handed to them by the daemon.
    notify: crate::notify::NotifyMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with prefix `gitward` and every family registered, all empty: a series
    /// appears once its unit first reports it.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gitward");
        let syncs = Syncs::register(&mut registry);
        let gates = Gates::register(&mut registry);
        let health = HealthSeries::register(&mut registry);
        let units = Units::register(&mut registry);
        registry.register_collector(Box::new(git::GitFetches));
        registry.register_collector(Box::new(referrers::Referrers));
        Self {
            fleet: Fleet::register(&mut registry),
            sandbox: SandboxLayers::register(&mut registry),
            notify: crate::notify::NotifyMetrics::registered(&mut registry),
            registry,
            units,
            syncs,
            gates,
            health,
        }
    }

    /// Sets `gitward_sandbox_layer{layer}` to 1 for each layer of `layers` that holds, else 0
    /// (at start and after a reload).
    pub fn set_sandbox_layers(&self, layers: &[(&'static str, bool)]) {
        self.sandbox.set(layers);
    }

    /// The notifiers' counters ([`crate::notify::NotifyMetrics`]), registered here.
    pub fn notify(&self) -> &crate::notify::NotifyMetrics {
        &self.notify
    }

    /// Records a completed sync: its duration, one count per object entry by action, the API
    /// requests they stand for, the revision (replacing the unit's previous revision series)
    /// and `tracked`, the number of inventory members after the sync.
    ///
    /// Requests are derived from the entries' actions, since the change set does not record
    /// verbs: `created`, `configured`, `unchanged`, `drift-corrected` → `patch`/`ok`; `pruned`
    /// → `delete`/`ok`; `failed`, `conflict` → `patch`/`error`; `skipped` → none. This is approximate for
    /// failures: a failed prune delete, an object refused before any request (another
    /// ApplySet's member) and a CRD that was applied but not Established in time all count as
    /// a failed patch. A report with failed objects still sets the revision: the rest of it
    /// was applied.
    pub fn observe_sync(&self, report: &Report, tracked: usize) {
        let unit = &report.unit;
        self.syncs
            .sync_duration
            .get_or_create(&UnitLabels { unit: unit.clone() })
            .observe(report.took.apply.as_secs_f64());
        for entry in &report.changes.entries {
            let action = entry.action.as_str();
            self.syncs.objects.get_or_create(&ObjectLabels { unit: unit.clone(), action }).inc();
            if let Some((verb, result)) = request_of(entry.action) {
                self.syncs.api_requests.get_or_create(&RequestLabels { unit: unit.clone(), verb, result }).inc();
            }
        }
        self.set_revision(unit, &report.revision.0);
        self.fleet.synced(unit);
        let tracked = i64::try_from(tracked).unwrap_or(i64::MAX);
        self.syncs.tracked.get_or_create(&UnitLabels { unit: unit.clone() }).set(tracked);
    }

    /// Records the end of a sync: the unit's members by health bucket (`counts`, as the engine
    /// last judged them: what `gitward status` counts), and, when a wait ended with all it
    /// waited on `Current`, how long that took.
    pub fn observe_health(&self, unit: &str, counts: &crate::health::Counts, time_to_healthy: Option<Duration>) {
        for (health, n) in
            [("healthy", counts.healthy), ("progressing", counts.progressing), ("degraded", counts.degraded)]
        {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            self.health.objects_health.get_or_create(&HealthLabels { unit: unit.to_owned(), health }).set(n);
        }
        if let Some(t) = time_to_healthy {
            self.health.time_to_healthy.get_or_create(&UnitLabels { unit: unit.to_owned() }).observe(t.as_secs_f64());
        }
    }

    /// Records the unit's members judged again between syncs: `gitward_objects_health` by
    /// `counts`, and `gitward_unit_ready`'s reason by `result` ([`unit`]).
    pub fn observe_followed(&self, unit: &str, result: SyncResult, counts: &crate::health::Counts) {
        self.observe_health(unit, counts, None);
        self.units.followed(unit, result);
    }

    /// Counts a sync of `unit` that failed as a whole, under `kind` = [`error_kind`]`(err)`.
    pub fn observe_error(&self, unit: &str, err: &Error) {
        self.syncs.errors.get_or_create(&KindLabels { unit: unit.to_owned(), kind: error_kind(err) }).inc();
    }

    /// Counts a revision of `unit` refused by `[sync.verify]`, under `reason` =
    /// [`VerifyFailure::as_str`].
    pub fn observe_refused(&self, unit: &str, reason: VerifyFailure) {
        self.syncs.refused.get_or_create(&ReasonLabels { unit: unit.to_owned(), reason: reason.as_str() }).inc();
    }

    /// Counts one sync request of `kind` for `unit` (also one that coalesced into a sync
    /// already queued).
    pub fn observe_trigger(&self, unit: &str, kind: TriggerKind) {
        self.gates.triggers.get_or_create(&KindLabels { unit: unit.to_owned(), kind: kind.as_str() }).inc();
    }

    /// Counts one sync request of `kind` that `unit`, suspended, did not act on.
    pub fn observe_suspended_trigger(&self, unit: &str, kind: TriggerKind) {
        self.gates.suspended_triggers.get_or_create(&KindLabels { unit: unit.to_owned(), kind: kind.as_str() }).inc();
    }

    /// Sets `gitward_unit_suspended{unit}`: 1 while `unit` is suspended, else 0; and its
    /// `gitward_unit_ready` reason (`suspended`, or back to its last sync's; the first call,
    /// as its task starts, makes the series: `never_synced`).
    pub fn set_suspended(&self, unit: &str, suspended: bool) {
        self.gates.suspended.get_or_create(&UnitLabels { unit: unit.to_owned() }).set(i64::from(suspended));
        self.units.set_suspended(unit, suspended);
    }

    /// Records how a sync of `unit` ended ([`unit`]): `gitward_unit_ready` and its reason,
    /// `gitward_unit_failing_since_seconds` (with `now`, unix seconds), the unit's members,
    /// cache size and timings.
    pub fn observe_outcome(&self, unit: &str, outcome: &crate::sync::outcome::Outcome, now: i64) {
        self.units.finished(unit, outcome, now);
    }

    /// Sets `gitward_unit_waiting_for_dependencies{unit}`: 1 while a new revision of `unit`
    /// waits for its `depends_on`, else 0.
    pub fn set_blocked(&self, unit: &str, blocked: bool) {
        self.gates.blocked.get_or_create(&UnitLabels { unit: unit.to_owned() }).set(i64::from(blocked));
    }

    /// Sets `gitward_unit_backoff_until_seconds{unit}`: when the next attempt of `unit`, backing
    /// off, is due (unix seconds), or 0 (`None`) when it is not backing off.
    pub fn set_backoff(&self, unit: &str, until: Option<i64>) {
        self.gates.backoff.get_or_create(&UnitLabels { unit: unit.to_owned() }).set(until.unwrap_or(0));
    }

    /// Drops the gauges of a unit that left the config (its revision and tracked objects), so
    /// they stop being exported after a reload. Counters and the histogram are kept: they are
    /// cumulative, and Prometheus handles a series that stops.
    pub fn forget_unit(&self, unit: &str) {
        let mut revisions = self.syncs.revisions.lock().expect("revisions lock");
        if let Some(revision) = revisions.remove(unit) {
            self.syncs.last_revision.remove(&RevisionLabels { unit: unit.to_owned(), revision });
        }
        self.syncs.tracked.remove(&UnitLabels { unit: unit.to_owned() });
        self.gates.suspended.remove(&UnitLabels { unit: unit.to_owned() });
        self.gates.blocked.remove(&UnitLabels { unit: unit.to_owned() });
        self.gates.backoff.remove(&UnitLabels { unit: unit.to_owned() });
        for health in ["healthy", "progressing", "degraded"] {
            self.health.objects_health.remove(&HealthLabels { unit: unit.to_owned(), health });
        }
        self.fleet.forget(unit);
        self.units.forget(unit);
    }

    /// Sets `gitward_unit_cluster{unit, cluster} 1` for a unit that started.
    pub fn set_unit_cluster(&self, unit: &str, cluster: &str) {
        self.fleet.set_cluster(unit, cluster);
    }

    /// Every series, in the OpenMetrics text format (see [`CONTENT_TYPE`]), ending in `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    fn set_revision(&self, unit: &str, revision: &str) {
        let mut revisions = self.syncs.revisions.lock().expect("revisions lock");
        let previous = revisions.insert(unit.to_owned(), revision.to_owned());
        if let Some(previous) = previous.filter(|p| p != revision) {
            self.syncs.last_revision.remove(&RevisionLabels { unit: unit.to_owned(), revision: previous });
        }
        self.syncs
            .last_revision
            .get_or_create(&RevisionLabels { unit: unit.to_owned(), revision: revision.to_owned() })
            .set(1);
    }
}

/// The (verb, result) an entry with `action` stands for, if it sent a request (see
/// [`Metrics::observe_sync`]).
fn request_of(action: Action) -> Option<(&'static str, &'static str)> {
    match action {
        Action::Created | Action::Adopted | Action::Configured | Action::Unchanged | Action::DriftCorrected => {
            Some(("patch", "ok"))
        }
        Action::Pruned => Some(("delete", "ok")),
        Action::Failed | Action::Conflict => Some(("patch", "error")),
        Action::Skipped => None,
    }
}

/// The short name of a sync error's variant, the `kind` label of `gitward_sync_errors_total`:
/// `source`, `manifest`, `duplicate`, `unknown-kind`, `cluster`, `invalid-annotation`, `task`, `sync-set`, `provenance`.
pub fn error_kind(err: &Error) -> &'static str {
    match err {
        Error::Source(_) => "source",
        Error::Manifest(_) => "manifest",
        Error::Render(_) => "render",
        Error::Duplicate { .. } => "duplicate",
        Error::UnknownKind { .. } => "unknown-kind",
        Error::Cluster(_) => "cluster",
        Error::InvalidAnnotation { .. } => "invalid-annotation",
        Error::SubstituteKey { .. } => "substitute-key",
        Error::Task(_) => "task",
        Error::Set(_) => "sync-set",
        Error::Provenance(_) => "provenance",
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn report(unit: &str, revision: &str, actions: &[Action], duration: Duration) -> Report {
        let took = crate::sync::Timings { apply: duration, ..Default::default() };
        Report { took, ..crate::sync::build::report_numbered(unit, revision, actions) }
    }

    fn lines(m: &Metrics) -> Vec<String> {
        m.encode().lines().map(str::to_owned).collect()
    }

    fn has(m: &Metrics, line: &str) -> bool {
        lines(m).iter().any(|l| l == line)
    }

    #[test]
    fn series_appear_only_once_reported() {
        let m = Metrics::new();
        assert_eq!(m.encode(), "# EOF\n");
        m.observe_trigger("shop", TriggerKind::Startup);
        let text = m.encode();
        assert!(text.contains("# TYPE gitward_triggers counter\n"), "{text}");
        assert!(!text.contains("gitward_sync_duration_seconds"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn sync_counts_objects_by_action_and_requests_by_verb() {
        let m = Metrics::new();
        let actions =
            [Action::Created, Action::Unchanged, Action::Unchanged, Action::Pruned, Action::Failed, Action::Skipped];
        m.observe_sync(&report("shop", "aaa", &actions, Duration::from_millis(20)), 7);
        for line in [
            r#"gitward_objects_total{unit="shop",action="created"} 1"#,
            r#"gitward_objects_total{unit="shop",action="unchanged"} 2"#,
            r#"gitward_objects_total{unit="shop",action="pruned"} 1"#,
            r#"gitward_objects_total{unit="shop",action="failed"} 1"#,
            r#"gitward_objects_total{unit="shop",action="skipped"} 1"#,
            r#"gitward_api_requests_total{unit="shop",verb="patch",result="ok"} 3"#,
            r#"gitward_api_requests_total{unit="shop",verb="delete",result="ok"} 1"#,
            r#"gitward_api_requests_total{unit="shop",verb="patch",result="error"} 1"#,
            r#"gitward_tracked_objects{unit="shop"} 7"#,
            r#"gitward_last_applied_revision{unit="shop",revision="aaa"} 1"#,
        ] {
            assert!(has(&m, line), "missing {line}\n{}", m.encode());
        }
    }

    #[test]
    fn sync_duration_lands_in_second_buckets() {
        let m = Metrics::new();
        m.observe_sync(&report("shop", "aaa", &[], Duration::from_millis(30)), 0);
        assert!(has(&m, r#"gitward_sync_duration_seconds_bucket{le="0.02",unit="shop"} 0"#), "{}", m.encode());
        assert!(has(&m, r#"gitward_sync_duration_seconds_bucket{le="0.04",unit="shop"} 1"#), "{}", m.encode());
        assert!(has(&m, r#"gitward_sync_duration_seconds_count{unit="shop"} 1"#), "{}", m.encode());
        let last = duration_buckets().last().unwrap();
        assert!((300.0..=330.0).contains(&last), "{last}");
    }

    #[test]
    fn new_revision_replaces_the_previous_series() {
        let m = Metrics::new();
        m.observe_sync(&report("shop", "aaa", &[], Duration::ZERO), 0);
        m.observe_sync(&report("shop", "aaa", &[], Duration::ZERO), 0);
        m.observe_sync(&report("shop", "bbb", &[], Duration::ZERO), 0);
        m.observe_sync(&report("blog", "ccc", &[], Duration::ZERO), 0);
        let mut series: Vec<String> =
            lines(&m).into_iter().filter(|l| l.starts_with("gitward_last_applied_revision{")).collect();
        series.sort();
        let expected = [
            r#"gitward_last_applied_revision{unit="blog",revision="ccc"} 1"#,
            r#"gitward_last_applied_revision{unit="shop",revision="bbb"} 1"#,
        ];
        assert_eq!(series, expected);
    }

    #[test]
    fn forgotten_unit_loses_its_gauges() {
        let m = Metrics::new();
        m.observe_sync(&report("shop", "aaa", &[Action::Created], Duration::ZERO), 3);
        m.forget_unit("shop");
        let text = m.encode();
        assert!(!text.contains("gitward_last_applied_revision{"), "{text}");
        assert!(!text.contains("gitward_tracked_objects{"), "{text}");
        assert!(text.contains(r#"gitward_objects_total{unit="shop",action="created"} 1"#), "{text}");
    }

    #[test]
    fn errors_are_counted_by_variant_name() {
        let m = Metrics::new();
        let duplicate = Error::Duplicate {
            object: "ConfigMap/ns/a".into(),
            first: "a.yaml#0".into(),
            second: "b.yaml#0".into(),
            hint: String::new(),
        };
        m.observe_error("shop", &duplicate);
        m.observe_error("shop", &duplicate);
        m.observe_error("shop", &Error::Task("cancelled".into()));
        assert!(has(&m, r#"gitward_sync_errors_total{unit="shop",kind="duplicate"} 2"#), "{}", m.encode());
        assert!(has(&m, r#"gitward_sync_errors_total{unit="shop",kind="task"} 1"#), "{}", m.encode());
        let unknown = Error::UnknownKind { origin: "a.yaml#0".into(), api_version: "x/v1".into(), kind: "X".into() };
        assert_eq!(error_kind(&unknown), "unknown-kind");
        let annotation =
            Error::InvalidAnnotation { origin: "a.yaml#0".into(), annotation: "a".into(), message: "m".into() };
        assert_eq!(error_kind(&annotation), "invalid-annotation");
    }

    #[test]
    fn refused_revisions_are_counted_by_reason() {
        let m = Metrics::new();
        m.observe_refused("shop", VerifyFailure::Unsigned);
        m.observe_refused("shop", VerifyFailure::Unsigned);
        m.observe_refused("shop", VerifyFailure::UnknownKey);
        assert!(has(&m, r#"gitward_revisions_refused_total{unit="shop",reason="unsigned"} 2"#), "{}", m.encode());
        assert!(has(&m, r#"gitward_revisions_refused_total{unit="shop",reason="unknown-key"} 1"#), "{}", m.encode());
    }

    #[test]
    fn a_suspended_unit_has_its_gauge_and_its_ignored_triggers_counted() {
        let m = Metrics::new();
        m.set_suspended("app", true);
        m.observe_suspended_trigger("app", TriggerKind::Push);
        assert!(has(&m, r#"gitward_unit_suspended{unit="app"} 1"#), "{:?}", lines(&m));
        assert!(has(&m, r#"gitward_suspended_triggers_total{unit="app",kind="push"} 1"#), "{:?}", lines(&m));
        m.set_suspended("app", false);
        assert!(has(&m, r#"gitward_unit_suspended{unit="app"} 0"#));
        m.forget_unit("app");
        assert!(!has(&m, "gitward_unit_suspended{"));
    }

    #[test]
    fn triggers_are_counted_by_kind() {
        let m = Metrics::new();
        m.observe_trigger("shop", TriggerKind::Webhook);
        m.observe_trigger("shop", TriggerKind::Webhook);
        m.observe_trigger("shop", TriggerKind::Poll);
        assert!(has(&m, r#"gitward_triggers_total{unit="shop",kind="webhook"} 2"#), "{}", m.encode());
        assert!(has(&m, r#"gitward_triggers_total{unit="shop",kind="poll"} 1"#), "{}", m.encode());
    }
}
