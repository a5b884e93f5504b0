//! `gitward status`: what each unit applied, when, with what result, and the health of what it
//! manages — read from the cluster alone, so it needs no running daemon.
//!
//! Per unit: one metadata GET of the ApplySet parent (its `gitward.dev/last-*` record,
//! [`crate::health::record`], and its group-kinds), then one list per group-kind selected by
//! `applyset.kubernetes.io/part-of=<id>`: metadata only for kinds without health, full objects
//! for health-bearing kinds ([`crate::health::bears_health`]), judged by
//! [`crate::health::status`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;
use serde::Serialize;

use crate::cluster::discovery::Discovery;
use crate::cluster::inventory::{Inventory, PART_OF};
use crate::config::SyncUnit;
use crate::health::record::{Record, SyncResult};
use crate::health::{self, Counts, Health};
use crate::object::{GroupKind, ObjectRef};

/// Errors reading a unit's state. Worth retrying: they come from the API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The parent could not be read, or discovery of a member kind failed.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::Error),
    /// Listing the members of one group-kind failed (RBAC, API server down).
    #[error("{group_kind}: listing members failed")]
    ListFailed {
        /// `Kind.group` being listed.
        group_kind: String,
        /// What the API server said.
        source: kube::Error,
    },
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// One member that is not `Current`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unhealthy {
    /// `Kind/ns/name`.
    pub object: String,
    /// Its health.
    pub health: Health,
    /// The rule's reason (`ProgressDeadlineExceeded`, `JobFailed`, a condition's reason).
    pub reason: String,
    /// The rule's or the controller's message.
    pub message: String,
}

/// What `gitward status` reports of one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitState {
    /// The unit's name.
    pub unit: String,
    /// The ApplySet parent, `Kind/ns/name`.
    pub parent: String,
    /// The last recorded sync; `None` when the parent does not exist or records none.
    pub last: Option<Record>,
    /// Members by kind (`Deployment` → 2).
    pub objects: BTreeMap<String, usize>,
    /// Members by health bucket (members of kinds without health count as healthy).
    pub health: Counts,
    /// Members that are not `Current`, with their reason.
    pub unhealthy: Vec<Unhealthy>,
}

impl UnitState {
    /// True when a revision was applied without failed objects and every member is
    /// `Current` now (exit 0 of `gitward status`).
    pub fn healthy(&self) -> bool {
        self.last.as_ref().is_some_and(|r| r.result != SyncResult::Failed) && self.unhealthy.is_empty()
    }
}

/// Reads the state of `unit` from the cluster.
///
/// Errors: [`Error::Cluster`] when the parent or discovery fails, [`Error::ListFailed`] when
/// a member kind cannot be listed.
pub async fn unit_state(client: &kube::Client, unit: &SyncUnit) -> Result<UnitState> {
    let inventory = Inventory::new(&unit.inventory);
    let mut state = UnitState {
        unit: unit.name.clone(),
        parent: inventory.parent.to_string(),
        last: None,
        objects: BTreeMap::new(),
        health: Counts::default(),
        unhealthy: Vec::new(),
    };
    let Some(parent) = inventory.read(client).await? else { return Ok(state) };
    state.last = Record::from_annotations(&parent.annotations);
    let contents = parent.contents;
    let selector = ListParams::default().labels(&format!("{PART_OF}={}", inventory.id));
    let mut discovery = Discovery::new();
    let mut healths = Vec::new();
    for gk in &contents.group_kinds {
        let Some(resolved) = discovery.resolve_group_kind(client, gk).await? else { continue };
        let failed = |source| Error::ListFailed { group_kind: gk.to_string(), source };
        let namespace = |ns: Option<String>| if resolved.namespaced { ns } else { None };
        if !health::bears_health(gk) {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), resolved.resource.as_ref());
            let n = api.list_metadata(&selector).await.map_err(failed)?.items.len();
            add(&mut state.objects, gk, n);
            healths.extend(std::iter::repeat_n(Health::Current, n));
            continue;
        }
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resolved.resource.as_ref());
        let list = api.list(&selector).await.map_err(failed)?;
        add(&mut state.objects, gk, list.items.len());
        for item in list.items {
            let object = ObjectRef::new(
                gk.clone(),
                namespace(item.metadata.namespace.clone()),
                item.metadata.name.clone().unwrap_or_default(),
            );
            let mut value = serde_json::to_value(&item).unwrap_or_default();
            value["kind"] = resolved.resource.kind.clone().into();
            value["apiVersion"] = resolved.resource.api_version.clone().into();
            let s = health::status(&value);
            healths.push(s.health);
            if s.health != Health::Current {
                state.unhealthy.push(Unhealthy {
                    object: object.to_string(),
                    health: s.health,
                    reason: s.reason,
                    message: s.message,
                });
            }
        }
    }
    state.health = Counts::of(&healths);
    state.unhealthy.sort_by(|a, b| a.object.cmp(&b.object));
    Ok(state)
}

fn add(objects: &mut BTreeMap<String, usize>, gk: &GroupKind, n: usize) {
    if n > 0 {
        *objects.entry(gk.kind.to_string()).or_default() += n;
    }
}

/// The human-readable report of `units`, one block per unit, headed by its line of
/// [`crate::summary::status`]:
///
/// ```text
/// app: degraded 3f2a9c1, applied 2026-11-22T22:41:07Z (2 objects: 1 healthy, 1 degraded)
///   parent     Secret/shop/gitward-app
///   revision   3f2a9c1e0b7d5a6c8e9f0a1b2c3d4e5f60718293
///   applied    2026-11-22T22:41:07Z
///   result     degraded
///   objects    ConfigMap 1, Deployment 1
///   health     1 healthy, 0 progressing, 1 degraded
///   unhealthy  Deployment/shop/web Failed ProgressDeadlineExceeded: ReplicaSet "web-5d9c" has timed out progressing.
/// ```
pub fn render_text(units: &[UnitState]) -> String {
    let mut out = String::new();
    for u in units {
        let _ = writeln!(out, "{}", crate::summary::status(u));
        let _ = writeln!(out, "  parent     {}", u.parent);
        match &u.last {
            Some(r) => {
                let _ = writeln!(out, "  revision   {}", r.revision);
                let _ = writeln!(out, "  applied    {}", r.applied_at);
                let _ = writeln!(out, "  result     {}", r.result);
            }
            None => {
                let _ = writeln!(out, "  revision   - (never applied)");
            }
        }
        let objects: Vec<String> = u.objects.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let objects = if objects.is_empty() { "-".to_string() } else { objects.join(", ") };
        let _ = writeln!(out, "  objects    {objects}");
        let h = u.health;
        let _ =
            writeln!(out, "  health     {} healthy, {} progressing, {} degraded", h.healthy, h.progressing, h.degraded);
        for x in &u.unhealthy {
            let detail = match (x.reason.is_empty(), x.message.is_empty()) {
                (false, false) => format!("{}: {}", x.reason, x.message),
                (false, true) => x.reason.clone(),
                _ => x.message.clone(),
            };
            let _ = writeln!(out, "  unhealthy  {} {} {detail}", x.object, x.health);
        }
    }
    out
}

/// The JSON report of `units`: `{"units": [{"unit", "parent", "last": {"revision",
/// "applied_at", "result"} | null, "objects": {Kind: n}, "health": {"healthy", "progressing",
/// "degraded"}, "unhealthy": [{"object", "health", "reason", "message"}]}]}`.
pub fn render_json(units: &[UnitState]) -> String {
    serde_json::to_string_pretty(&serde_json::json!({ "units": units })).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(last: Option<SyncResult>, unhealthy: bool) -> UnitState {
        UnitState {
            unit: "app".into(),
            parent: "Secret/default/gitward-app".into(),
            last: last.map(|r| Record {
                revision: "3f2a".into(),
                applied_at: "2026-11-22T22:41:07Z".into(),
                result: r,
            }),
            objects: BTreeMap::from([("Deployment".to_string(), 1)]),
            health: Counts { healthy: usize::from(!unhealthy), progressing: 0, degraded: usize::from(unhealthy) },
            unhealthy: if unhealthy {
                vec![Unhealthy {
                    object: "Deployment/default/web".into(),
                    health: Health::Failed,
                    reason: "ProgressDeadlineExceeded".into(),
                    message: "timed out".into(),
                }]
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn healthy_needs_an_applied_revision_and_every_member_current() {
        assert!(state(Some(SyncResult::Healthy), false).healthy());
        assert!(state(Some(SyncResult::Progressing), false).healthy(), "live health wins over the record");
        assert!(!state(Some(SyncResult::Healthy), true).healthy());
        assert!(!state(Some(SyncResult::Failed), false).healthy());
        assert!(!state(None, false).healthy());
    }

    #[test]
    fn text_names_each_unhealthy_object_with_its_reason() {
        let text = render_text(&[state(Some(SyncResult::Degraded), true)]);
        assert!(text.contains("  result     degraded\n"), "{text}");
        assert!(
            text.contains("  unhealthy  Deployment/default/web Failed ProgressDeadlineExceeded: timed out\n"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&render_json(&[state(None, false)])).unwrap();
        assert_eq!(json["units"][0]["last"], serde_json::Value::Null);
        assert_eq!(json["units"][0]["objects"]["Deployment"], 1);
    }
}
