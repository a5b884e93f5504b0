//! Health: did what a sync changed roll out? The kstatus rules and the bounded wait.
//!
//! - [`status`] — a pure function of one full object (as the API server returns it, with
//!   `status`) to its [`Status`]: [`Health`] plus a reason and message, following the rules
//!   of sigs.k8s.io/cli-utils `pkg/kstatus` (generic rules first — deletion, observed
//!   generation, the `Reconciling`/`Stalled` conditions — then per-kind rules in [`rules`]).
//! - [`wait`] — after an apply, watches only the objects a sync created or configured (full
//!   objects, those only, for the duration of the wait) until every one is `Current`, one is
//!   `Failed` (fail fast), the unit's `health_timeout` passes, or the caller cancels.
//! - [`record`] — the last applied revision, its apply time and result, the health wait in
//!   progress, and the last attempt (its revision or unresolved ref, error and the objects not
//!   applied), as annotations on the unit's ApplySet parent, so any tool can read them.
//! - [`ready`] — whether a unit is ready for the units that depend on it (`depends_on`),
//!   judged from its record: synced, its revision applied, healthy or its `ready_expr` true.
//! - [`survey`] — one paged, label-selected read of a unit's health-bearing members, judged:
//!   whether every member is `Current`, not only what the last sync changed.

pub mod ready;
pub mod record;
pub(crate) mod rules;
pub(crate) mod survey;
pub mod wait;

#[cfg(test)]
mod tests;

use std::fmt;

use serde_json::Value;

use crate::object::GroupKind;

/// The health of one object, as kstatus names it (cli-utils `pkg/kstatus/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Health {
    /// The object's controller has acted on its latest spec and the result is what it asked
    /// for (a Deployment's new pods available, a Job started or complete, a PVC bound).
    Current,
    /// The controller is still working on it (or has not observed the latest generation).
    InProgress,
    /// The controller says it cannot get there (`ProgressDeadlineExceeded`, a failed Job,
    /// `Stalled=True`, a crash-looping Pod).
    Failed,
    /// The object has a `deletionTimestamp`: it is being deleted.
    Terminating,
    /// The status cannot be read (a phase or field kstatus does not know, or the object
    /// vanished during a wait).
    Unknown,
}

impl Health {
    /// The name used in logs, metrics labels and `gitward status`: `Current`, `InProgress`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Current => "Current",
            Health::InProgress => "InProgress",
            Health::Failed => "Failed",
            Health::Terminating => "Terminating",
            Health::Unknown => "Unknown",
        }
    }

    /// The `sync complete` bucket: `healthy` (Current), `degraded` (Failed), `progressing`
    /// (everything else: still moving, or not readable yet).
    pub fn bucket(self) -> &'static str {
        match self {
            Health::Current => "healthy",
            Health::Failed => "degraded",
            _ => "progressing",
        }
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of [`status`]: the health, a CamelCase reason and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    /// The verdict.
    pub health: Health,
    /// Why, in one CamelCase word (`LessReady`, `ProgressDeadlineExceeded`, `JobFailed`); empty
    /// for `Current`.
    pub reason: String,
    /// What the controller or the rule says (`Ready: 1/3`, the condition's message).
    pub message: String,
}

impl Status {
    /// A status with this health, reason and message.
    pub fn new(health: Health, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { health, reason: reason.into(), message: message.into() }
    }

    /// `Current` with a message.
    pub fn current(message: impl Into<String>) -> Self {
        Self::new(Health::Current, "", message)
    }

    /// `InProgress` with a reason and message.
    pub fn in_progress(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Health::InProgress, reason, message)
    }

    /// `Failed` with a reason and message.
    pub fn failed(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Health::Failed, reason, message)
    }
}

/// The health of `object`, a full object as the API server returns it (`apiVersion`, `kind`,
/// `metadata`, `spec`, `status`), by the kstatus rules:
///
/// 1. a `metadata.deletionTimestamp` → `Terminating`;
/// 2. `status.observedGeneration` present and not `metadata.generation` → `InProgress`
///    (`LatestGenerationNotObserved`);
/// 3. a condition `Reconciling=True` → `InProgress`; `Stalled=True` → `Failed`;
/// 4. the rules of the object's kind ([`rules::for_kind`]): Deployment, StatefulSet,
///    DaemonSet, ReplicaSet, Pod, PersistentVolumeClaim, Service, Job,
///    CustomResourceDefinition, PodDisruptionBudget;
/// 5. any other kind with a `Ready` condition: `True` → `Current`, `False` or `Unknown` →
///    `InProgress` with the condition's reason (kstatus's newer generic rule);
/// 6. anything else → `Current` (a kind without status is what it was applied as).
///
/// Pure: no clock, no I/O. Where kstatus looks at the clock (a Pod unschedulable for 15 s),
/// this reports `InProgress`; the wait's timeout bounds it instead.
pub fn status(object: &Value) -> Status {
    if let Some(s) = rules::generic(object) {
        return s;
    }
    let gk = group_kind(object);
    if let Some(rule) = rules::for_kind(&gk) {
        return rule(object);
    }
    rules::ready_condition(object).unwrap_or_else(|| Status::current("Resource is current"))
}

/// The group-kind of a full object, from its `apiVersion` and `kind`.
pub fn group_kind(object: &Value) -> GroupKind {
    GroupKind::from_api_version(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    )
}

/// True for kinds whose health can be other than `Current` while they exist: the kinds with
/// kstatus rules, and every kind gitward does not know to be status-less (custom resources
/// may carry `Ready`, `Reconciling` or `Stalled` conditions). Objects of other kinds
/// (ConfigMap, Secret, RBAC, ServiceAccount, the admission and class kinds, …) are `Current`
/// once applied: neither the wait nor `gitward status` reads them in full.
pub fn bears_health(gk: &GroupKind) -> bool {
    const STATUSLESS: &[(&str, &str)] = &[
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "ServiceAccount"),
        ("", "Endpoints"),
        ("", "LimitRange"),
        ("", "Namespace"),
        ("batch", "CronJob"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("networking.k8s.io", "NetworkPolicy"),
        ("networking.k8s.io", "IngressClass"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "StorageClass"),
        ("node.k8s.io", "RuntimeClass"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("coordination.k8s.io", "Lease"),
    ];
    !STATUSLESS.iter().any(|(g, k)| gk.group == *g && gk.kind == *k)
}

/// Counts of objects by [`Health::bucket`]: the `healthy`, `progressing` and `degraded`
/// fields of `sync complete`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Objects `Current`.
    pub healthy: usize,
    /// Objects `InProgress`, `Terminating` or `Unknown`.
    pub progressing: usize,
    /// Objects `Failed`.
    pub degraded: usize,
}

impl Counts {
    /// Counts these healths.
    pub fn of<'a>(healths: impl IntoIterator<Item = &'a Health>) -> Self {
        let mut c = Self::default();
        for h in healths {
            match h {
                Health::Current => c.healthy += 1,
                Health::Failed => c.degraded += 1,
                _ => c.progressing += 1,
            }
        }
        c
    }
}
