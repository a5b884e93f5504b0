//! `gitward diff`: what a sync would change, without changing anything.
//!
//! Each desired object is sent as a server-side dry-run apply (`dryRun=All`) and its result
//! compared with the live object; the difference is a unified diff of YAML with Secret `data`
//! and `stringData` masked (DESIGN.md decision 10). Members a sync would prune are listed.
//! Like `kubectl diff`, this reads full objects: it is a tool for people, not the sync path.
//! Objects in `update` mode are dry-run with server-side apply too: for fields the manifest
//! declares the result is the same; fields `update` mode would leave alone may show as removed.

use kube::api::{Patch, PatchParams};
use serde_json::Value;
use similar::TextDiff;

use super::desired::{Defaults, Resolution};
use super::{Engine, Result};
use crate::apply::server_side::api_for;
use crate::cluster::api_message;
use crate::object::ObjectRef;
use crate::plan;
use crate::source::Revision;

/// One object that would change.
#[derive(Debug, Clone)]
pub struct ObjectDiff {
    /// The object.
    pub object: ObjectRef,
    /// Unified diff (`--- live`, `+++ merged`), or a note for objects that cannot be dry-run.
    pub diff: String,
}

/// The result of a diff.
#[derive(Debug, Clone)]
pub struct DiffReport {
    /// The revision compared.
    pub revision: Revision,
    /// Objects that would be created or changed.
    pub changed: Vec<ObjectDiff>,
    /// Members that would be pruned.
    pub prunes: Vec<ObjectRef>,
    /// Objects the API server rejected in the dry run, with its message.
    pub failed: Vec<(ObjectRef, String)>,
}

impl DiffReport {
    /// True when a sync would change anything.
    pub fn has_changes(&self) -> bool {
        !self.changed.is_empty() || !self.prunes.is_empty()
    }
}

/// kubectl's client-side apply annotation: for a Secret it holds the Secret's data.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Fields that change on every write and say nothing about what git asks for.
const VOLATILE: [&str; 5] = ["managedFields", "resourceVersion", "generation", "creationTimestamp", "uid"];

/// Strips volatile metadata and masks Secret values, so the YAML shows only meaningful change.
/// `before` is the live object when `v` is the merged one: a value that differs from it is
/// shown as `*** (changed)`; with `None` every value is `***`.
pub fn normalize(mut v: Value, before: Option<&Value>) -> Value {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in VOLATILE {
            meta.remove(key);
        }
    }
    let is_secret = v.get("kind").and_then(Value::as_str) == Some("Secret")
        && v.get("apiVersion").and_then(Value::as_str) == Some("v1");
    if is_secret {
        // kubectl's client-side apply leaves the whole Secret, data included, in an annotation.
        if let Some(annotations) = v.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut)
            && let Some(last) = annotations.get_mut(LAST_APPLIED)
        {
            *last = Value::String("***".into());
        }
        for field in ["data", "stringData"] {
            let theirs = before.and_then(|o| o.get(field)).and_then(Value::as_object).cloned().unwrap_or_default();
            if let Some(map) = v.get_mut(field).and_then(Value::as_object_mut) {
                for (k, val) in map.iter_mut() {
                    let changed = before.is_some() && theirs.get(k) != Some(val);
                    *val = Value::String(if changed { "*** (changed)".into() } else { "***".into() });
                }
            }
        }
    }
    v
}

fn to_yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|_| serde_json::to_string_pretty(v).unwrap_or_default())
}

impl Engine {
    /// Computes what [`Engine::sync`] would do at the current revision, by dry run.
    pub async fn diff(&mut self) -> Result<DiffReport> {
        let revision = self.repo.fetch().await?;
        let loaded = self.load(&revision).await?;
        let defaults = Defaults {
            namespace: self.unit.namespace.as_str().into(),
            applyset_id: self.inventory.id.as_str().into(),
            recreate: self.unit.recreate_on_immutable,
            apply_mode: self.unit.apply_mode,
        };
        let Resolution { desired, pending } =
            super::desired::resolve(&self.client, &mut self.discovery, loaded.manifests, &defaults, &[]).await?;
        let contents = self.inventory.read(&self.client).await?.map(|p| p.contents).unwrap_or_default();
        self.watch_kinds(&desired, &contents).await?;
        let mut report = DiffReport { revision, changed: Vec::new(), prunes: Vec::new(), failed: Vec::new() };
        let mut params = PatchParams::apply(&self.apply.field_manager).dry_run();
        params.force = self.apply.force;
        for d in &desired {
            let api = api_for(&self.client, d);
            let live = match api.get_opt(&d.object.name).await {
                Ok(live) => live.map(|o| serde_json::to_value(o).unwrap_or_default()),
                Err(e) => {
                    report.failed.push((d.object.clone(), api_message(&e)));
                    continue;
                }
            };
            let merged = match api.patch(&d.object.name, &params, &Patch::Apply(&d.body())).await {
                Ok(o) => serde_json::to_value(o).unwrap_or_default(),
                Err(e) => {
                    report.failed.push((d.object.clone(), format!("{}: {}", d.origin, api_message(&e))));
                    continue;
                }
            };
            let before = live.clone().map(|l| to_yaml(&normalize(l, None))).unwrap_or_default();
            let after = to_yaml(&normalize(merged, live.as_ref()));
            if before != after {
                let name = d.object.to_string();
                let text = TextDiff::from_lines(&before, &after)
                    .unified_diff()
                    .header(&format!("live/{name}"), &format!("merged/{name}"))
                    .to_string();
                report.changed.push(ObjectDiff { object: d.object.clone(), diff: text });
            }
        }
        for m in pending {
            let object = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
            let diff =
                format!("{object}: would be created once its CustomResourceDefinition (in this revision) is applied\n");
            report.changed.push(ObjectDiff { object, diff });
        }
        report.prunes = plan::prune_plan(&desired, &self.cache.snapshot(), &contents.members)
            .steps
            .into_iter()
            .map(|s| s.object)
            .collect();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_values_are_masked_and_changes_marked() {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "b2xk", "same": "eA=="}});
        let merged = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "bmV3", "same": "eA=="}});
        let after = normalize(merged.clone(), Some(&live));
        assert_eq!(after["data"]["a"], "*** (changed)");
        assert_eq!(after["data"]["same"], "***");
        let text = to_yaml(&after);
        assert!(!text.contains("bmV3") && !text.contains("eA=="), "{text}");
    }

    #[test]
    fn last_applied_annotation_of_a_secret_is_masked() {
        let live = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"annotations": {LAST_APPLIED: "{\"data\":{\"a\":\"c2VjcmV0\"}}"}}});
        let text = to_yaml(&normalize(live, None));
        assert!(!text.contains("c2VjcmV0"), "{text}");
    }

    #[test]
    fn volatile_metadata_is_dropped() {
        let v = json!({"metadata": {"name": "x", "resourceVersion": "5", "managedFields": [], "uid": "u"}});
        assert_eq!(normalize(v, None), json!({"metadata": {"name": "x"}}));
    }
}
