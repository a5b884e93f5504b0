//! One phase of Helm hooks as it runs (see the module doc of [`super`]): each hook's kind
//! resolved, its previous instance replaced, the hook applied, waited for when a Job or Pod,
//! and deleted by its policy — every write through the sync's seam ([`crate::sync::writes`]).

use std::time::Duration;

use kube::api::DynamicObject;
use serde_json::Value;

use super::{DEFAULT_TIMEOUT, HOOK_OF, Unit};
use crate::apply::hook::HookApi;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::PART_OF;
use crate::health::{Health, Status};
use crate::manifest::Manifest;
use crate::object::{Atom, ObjectRef};
use crate::render::{Hook, HookEvent};
use crate::sync::Result;

/// How one hook ended.
struct Ran {
    object: ObjectRef,
    action: Action,
    message: String,
    failed: bool,
    /// Succeeded with `hook-succeeded`: deleted once every hook of the phase succeeded.
    delete_later: Option<(HookApi, DynamicObject)>,
}

/// One phase of hooks as it runs: the unit's, and the kinds the revision's CRDs define.
pub(super) struct HookPhase<'a, 'u> {
    unit: Unit<'u>,
    crd_kinds: &'a std::collections::BTreeSet<crate::object::GroupKind>,
}

impl<'a, 'u> HookPhase<'a, 'u> {
    /// The phase of `unit`'s hooks, whose revision's CRDs define `crd_kinds`.
    pub(super) fn new(unit: Unit<'u>, crd_kinds: &'a std::collections::BTreeSet<crate::object::GroupKind>) -> Self {
        Self { unit, crd_kinds }
    }

    /// Runs the hooks of `hooks` that name `event`, one at a time in ascending weight, then
    /// name; stops at the first that fails and returns why.
    pub(super) async fn run(
        &mut self,
        hooks: &[Manifest],
        event: HookEvent,
        changes: &mut ChangeSet,
    ) -> Result<Option<String>> {
        let mut due: Vec<(&Manifest, Hook)> = hooks
            .iter()
            .filter_map(|m| Some((m, Hook::of(m).ok()??)))
            .filter(|(_, h)| h.events.contains(&event))
            .collect();
        due.sort_by(|(a, x), (b, y)| x.weight.cmp(&y.weight).then_with(|| a.name.cmp(&b.name)));
        let mut ran_all = Vec::with_capacity(due.len());
        for (m, hook) in due {
            let ran = self.run_hook(m, &hook, event).await?;
            if ran.failed {
                let refused = format!("{event} hook {} failed: {}", ran.object, ran.message);
                ran_all.push(ran);
                for ran in ran_all {
                    changes.push(ran.object, ran.action, Some(ran.message));
                }
                return Ok(Some(refused));
            }
            ran_all.push(ran);
        }
        // As Helm does: `hook-succeeded` objects are deleted once the whole phase succeeded, last
        // first, so a Job's ServiceAccount hook outlives the Job.
        let timeout = self.timeout();
        for ran in ran_all.iter_mut().rev() {
            if let Some((api, applied)) = ran.delete_later.take() {
                match self.unit.view.writes().delete_hook(&api, &ran.object, &applied, timeout).await {
                    Ok(()) => ran.message.push_str("; deleted (hook-succeeded)"),
                    Err(e) => ran.message.push_str(&format!("; not deleted (hook-succeeded): {e}")),
                }
            }
        }
        for ran in ran_all {
            changes.push(ran.object, ran.action, Some(ran.message));
        }
        Ok(None)
    }

    /// How long one hook is waited for: `health_timeout`, or [`DEFAULT_TIMEOUT`] when it is 0.
    fn timeout(&self) -> Duration {
        let timeout = self.unit.health_timeout;
        if timeout.is_zero() { DEFAULT_TIMEOUT } else { timeout }
    }

    /// One hook: the previous instance deleted (`before-hook-creation`), the hook applied
    /// (server-side apply, the unit's field manager, without the ApplySet label), waited for
    /// when a Job or Pod, then deleted by its policy.
    async fn run_hook(&mut self, m: &Manifest, hook: &Hook, event: HookEvent) -> Result<Ran> {
        let (object, namespace, api) = match self.hook_api(m, event).await? {
            Ok(found) => found,
            Err(unknown) => return Ok(unknown),
        };
        let timeout = self.timeout();
        let failed = |action: Action, message: String| Ran {
            object: object.clone(),
            action,
            message,
            failed: true,
            delete_later: None,
        };
        let mut body: Value = m.body.to_value();
        if let Some(ns) = &namespace {
            body["metadata"]["namespace"] = Value::from(ns.as_str());
        }
        body["metadata"]["annotations"][HOOK_OF] = Value::from(self.unit.applyset_id);

        let existing = match api.get(&m.name).await {
            Ok(existing) => existing,
            Err(e) => return Ok(failed(Action::Failed, format!("{event} hook: {}", crate::cluster::api_message(&e)))),
        };
        let mut action = Action::Configured;
        match existing {
            None => action = Action::Created,
            // Helm's create would fail on it too; never written over nor deleted.
            Some(live) if !self.made_by_unit(&live) => {
                let message = format!("{event} hook: {object} exists and is no hook of this unit; not replaced");
                return Ok(failed(Action::Failed, message));
            }
            Some(live) if hook.before_hook_creation => {
                if let Err(message) = self.unit.view.writes().delete_hook(&api, &object, &live, timeout).await {
                    return Ok(failed(Action::Failed, format!("{event} hook: previous instance: {message}")));
                }
                action = Action::Created;
            }
            Some(_) => {}
        }
        let applied = match self.unit.view.writes().apply_hook(&api, &object, &body, self.unit.field_manager).await {
            Ok(applied) => applied,
            Err(e) => {
                return Ok(failed(Action::Failed, format!("{event} hook: {}", crate::telemetry::error_chain(&e))));
            }
        };
        let (ok, mut message) = outcome(&api, m, hook, event, timeout).await;
        if !ok && hook.delete_failed {
            match self.unit.view.writes().delete_hook(&api, &object, &applied, timeout).await {
                Ok(()) => message.push_str("; deleted (hook-failed)"),
                Err(e) => message.push_str(&format!("; not deleted (hook-failed): {e}")),
            }
        }
        let action = if ok { action } else { Action::Failed };
        let delete_later = (ok && hook.delete_succeeded).then(|| (api.clone(), applied));
        Ok(Ran { object, action, message, failed: !ok, delete_later })
    }

    /// The hook `m`'s ref, namespace and API, its kind resolved by discovery (again when its
    /// CRD was applied this sync); `Ok(Err)`: the hook's failed result, the kind unknown.
    async fn hook_api(
        &mut self,
        m: &Manifest,
        event: HookEvent,
    ) -> Result<std::result::Result<(ObjectRef, Option<Atom>, HookApi), Ran>> {
        let mut resolved = self.unit.view.resolve(&m.api_version, &m.gk.kind).await?;
        if resolved.is_none() && self.crd_kinds.contains(&m.gk) {
            // Its CRD was applied this sync: the answer cached may be from before it was served.
            self.unit.view.discovery_mut().forget(&m.api_version);
            resolved = self.unit.view.resolve_new(&m.api_version, &m.gk.kind).await?;
        }
        let Some(resolved) = resolved else {
            // Scope unknown: named as a namespaced object would be, as the desired objects are.
            let namespace = m.namespace.clone().unwrap_or_else(|| self.unit.namespace.into());
            let object = ObjectRef::new(m.gk.clone(), Some(namespace), &m.name);
            let message = format!("{event} hook: unknown kind {} in {}", m.gk.kind, m.api_version);
            return Ok(Err(Ran { object, action: Action::Failed, message, failed: true, delete_later: None }));
        };
        let namespace: Option<Atom> =
            resolved.namespaced.then(|| m.namespace.clone().unwrap_or_else(|| self.unit.namespace.into()));
        let object = ObjectRef::new(m.gk.clone(), namespace.clone(), &m.name);
        let api = HookApi::new(self.unit.view.writer(), namespace.as_deref(), &resolved.resource);
        Ok(Ok((object, namespace, api)))
    }

    /// Whether `live` carries this unit's [`HOOK_OF`], or its ApplySet label: a member, as
    /// gitward applied hooks before it ran them as phases, taken back as a hook.
    fn made_by_unit(&self, live: &DynamicObject) -> bool {
        let id = Some(self.unit.applyset_id);
        live.metadata.annotations.as_ref().and_then(|a| a.get(HOOK_OF)).map(String::as_str) == id
            || live.metadata.labels.as_ref().and_then(|l| l.get(PART_OF)).map(String::as_str) == id
    }
}

/// Waits until the Job or Pod `name` (of `type_meta`: apiVersion and kind) has run to its end,
/// at most `timeout`; returns its last status ([`hook_end`]).
async fn ended(
    api: &HookApi,
    type_meta: (&str, &str),
    name: &str,
    timeout: Duration,
) -> std::result::Result<Option<Status>, String> {
    // Items of a list carry no apiVersion and kind, and the health rules go by kind.
    let judge = |o: &DynamicObject| {
        let mut value = serde_json::to_value(o).unwrap_or(Value::Null);
        value["apiVersion"] = Value::from(type_meta.0);
        value["kind"] = Value::from(type_meta.1);
        hook_end(&value)
    };
    api.wait_until(name, timeout, |o| judge(o).is_some()).await.map(|o| judge(&o))
}

/// How a Job or Pod hook ended, as Helm waits for one: a Job when the Job controller set its
/// `Complete` (`Current`) or `Failed` condition, a Pod when its phase is `Succeeded` (`Current`)
/// or `Failed`; `None` while it runs. Not the health rules' verdict: to kstatus a Job that has
/// started is `Current` and a Pod that failed is `Current` (its owner carries the verdict), and
/// a hook that is running has not succeeded.
fn hook_end(value: &Value) -> Option<Status> {
    let condition = |kind: &str| {
        value["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == kind && c["status"] == "True")
    };
    match (value["kind"].as_str(), value["status"]["phase"].as_str()) {
        (Some("Job"), _) if condition("Complete") || condition("Failed") => Some(crate::health::status(value)),
        (Some("Pod"), Some("Succeeded")) => Some(Status::current("Pod has completed successfully")),
        (Some("Pod"), Some("Failed")) => {
            let message = value["status"]["message"].as_str().unwrap_or("Pod has completed, but not successfully");
            Some(Status::failed("PodFailed", message))
        }
        _ => None,
    }
}

/// Waits for a Job or Pod hook to end (at most `timeout`): whether it succeeded, and its
/// message.
async fn outcome(api: &HookApi, m: &Manifest, hook: &Hook, event: HookEvent, timeout: Duration) -> (bool, String) {
    let waits = matches!((m.gk.group.as_str(), m.gk.kind.as_str()), ("batch", "Job") | ("", "Pod"));
    let status =
        if waits { ended(api, (m.api_version.as_str(), m.gk.kind.as_str()), &m.name, timeout).await } else { Ok(None) };
    match status {
        Ok(None) => (true, format!("{event} hook, weight {}", hook.weight)),
        Ok(Some(s)) if s.health == Health::Current => {
            (true, format!("{event} hook, weight {}: succeeded", hook.weight))
        }
        Ok(Some(s)) => (false, format!("{event} hook: {}: {}", s.reason, s.message)),
        Err(message) => (false, format!("{event} hook: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_that_runs_has_not_ended_and_a_failed_pod_is_a_failed_hook() {
        let job = |status: Value| serde_json::json!({"apiVersion": "batch/v1", "kind": "Job", "status": status});
        let started = job(serde_json::json!({"startTime": "2026-12-02T00:00:00Z", "active": 1}));
        assert_eq!(hook_end(&started), None, "a started Job is Current to kstatus, and still running");
        let complete = job(serde_json::json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}));
        assert_eq!(hook_end(&complete).map(|s| s.health), Some(Health::Current));
        let failed = job(serde_json::json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True",
            "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}));
        let failed = hook_end(&failed).expect("ended");
        assert_eq!((failed.health, failed.reason.as_str()), (Health::Failed, "JobFailed"));
        assert!(failed.message.contains("Job has reached the specified backoff limit"), "{}", failed.message);
        let pod = |phase: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": phase,
            "conditions": [{"type": "Ready", "status": "True"}]}})
        };
        assert_eq!(hook_end(&pod("Running")), None, "a ready Pod is Current to kstatus, and still running");
        assert_eq!(hook_end(&pod("Succeeded")).map(|s| s.health), Some(Health::Current));
        assert_eq!(hook_end(&pod("Failed")).map(|s| s.health), Some(Health::Failed), "kstatus: Current");
    }
}
