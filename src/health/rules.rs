//! The kstatus rules, one function per kind (sigs.k8s.io/cli-utils `pkg/kstatus/status`,
//! `generic.go` and `core.go`), over the object's JSON. Pure: they read fields, nothing else.
//!
//! Replica rules compare the spec's wish with the controller's counts in a fixed order and
//! report the first shortfall (`Replicas: 1/3`, then `Updated`, `Available`, `Ready`), so the
//! message says what the rollout waits for.

use serde_json::Value;

use super::Status;
use crate::object::GroupKind;

/// A per-kind rule.
pub type Rule = fn(&Value) -> Status;

/// The rule of a kind that has one, by group and kind (any version).
pub fn for_kind(gk: &GroupKind) -> Option<Rule> {
    let rule: Rule = match (gk.group.as_str(), gk.kind.as_str()) {
        ("apps" | "extensions", "Deployment") => deployment,
        ("apps", "StatefulSet") => stateful_set,
        ("apps" | "extensions", "DaemonSet") => daemon_set,
        ("apps" | "extensions", "ReplicaSet") => replica_set,
        ("", "Pod") => pod,
        ("", "PersistentVolumeClaim") => pvc,
        ("", "Service") => service,
        ("batch", "Job") => job,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd,
        ("policy", "PodDisruptionBudget") => |_| Status::current("AllowedDisruptions has been computed."),
        _ => return None,
    };
    Some(rule)
}

/// One entry of `status.conditions`.
struct Condition<'a> {
    kind: &'a str,
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

fn conditions(object: &Value) -> impl Iterator<Item = Condition<'_>> {
    object["status"]["conditions"].as_array().into_iter().flatten().map(|c| Condition {
        kind: c["type"].as_str().unwrap_or_default(),
        status: c["status"].as_str().unwrap_or_default(),
        reason: c["reason"].as_str().unwrap_or_default(),
        message: c["message"].as_str().unwrap_or_default(),
    })
}

/// An integer at `path` (`/status/readyReplicas`), else `default`.
fn int(object: &Value, path: &str, default: i64) -> i64 {
    object.pointer(path).and_then(Value::as_i64).unwrap_or(default)
}

fn string<'a>(object: &'a Value, path: &str) -> &'a str {
    object.pointer(path).and_then(Value::as_str).unwrap_or_default()
}

fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

/// The rules every kind shares: deletion, observed generation, `Reconciling` and `Stalled`.
/// `None` when they decide nothing.
pub fn generic(object: &Value) -> Option<Status> {
    if !string(object, "/metadata/deletionTimestamp").is_empty() {
        return Some(Status::new(super::Health::Terminating, "Terminating", "Resource scheduled for deletion"));
    }
    if let (Some(generation), Some(observed)) = (
        object.pointer("/metadata/generation").and_then(Value::as_i64),
        object.pointer("/status/observedGeneration").and_then(Value::as_i64),
    ) && generation != observed
    {
        let message =
            format!("{} generation is {generation}, but latest observed generation is {observed}", kind(object));
        return Some(Status::in_progress("LatestGenerationNotObserved", message));
    }
    for c in conditions(object) {
        if c.kind == "Reconciling" && c.status == "True" {
            return Some(Status::in_progress(c.reason, c.message));
        }
        if c.kind == "Stalled" && c.status == "True" {
            return Some(Status::failed(c.reason, c.message));
        }
    }
    None
}

/// The `Ready` condition of a kind without its own rule: `True` → Current, otherwise
/// InProgress with the condition's reason. `None` when there is no `Ready` condition.
pub fn ready_condition(object: &Value) -> Option<Status> {
    let c = conditions(object).find(|c| c.kind == "Ready")?;
    Some(match c.status {
        "True" => Status::current(if c.message.is_empty() { "Ready" } else { c.message }),
        _ => {
            let reason = if c.reason.is_empty() { "NotReady" } else { c.reason };
            Status::in_progress(reason, c.message)
        }
    })
}

/// kstatus checks that a DaemonSet's controller has acted at all: both generations set.
fn generation_set(object: &Value) -> Option<Status> {
    if object.pointer("/metadata/generation").is_none() {
        return Some(Status::in_progress("NoGeneration", format!("{} metadata.generation not found", kind(object))));
    }
    if object.pointer("/status/observedGeneration").is_none() {
        let message = format!("{} status.observedGeneration not found", kind(object));
        return Some(Status::in_progress("NoObservedGeneration", message));
    }
    None
}

/// Returns the first `(reason, message)` whose shortfall holds.
fn first_shortfall(checks: &[(bool, &str, String)]) -> Option<Status> {
    checks.iter().find(|(short, _, _)| *short).map(|(_, reason, message)| Status::in_progress(*reason, message.clone()))
}

fn deployment(o: &Value) -> Status {
    // Without progressDeadlineSeconds (or at MaxInt32) the controller sets no Progressing
    // condition, so progress cannot be judged from it.
    let deadline = int(o, "/spec/progressDeadlineSeconds", i64::from(i32::MAX));
    let mut progressing = deadline == i64::from(i32::MAX);
    let mut available = false;
    for c in conditions(o) {
        match c.kind {
            "Progressing" if c.reason == "ProgressDeadlineExceeded" => {
                return Status::failed(c.reason, c.message);
            }
            "Progressing" if c.status == "True" && c.reason == "NewReplicaSetAvailable" => progressing = true,
            "Available" if c.status == "True" => available = true,
            _ => {}
        }
    }
    let spec = int(o, "/spec/replicas", 1);
    let replicas = int(o, "/status/replicas", 0);
    let updated = int(o, "/status/updatedReplicas", 0);
    let ready = int(o, "/status/readyReplicas", 0);
    let avail = int(o, "/status/availableReplicas", 0);
    first_shortfall(&[
        (spec > replicas, "LessReplicas", format!("Replicas: {replicas}/{spec}")),
        (spec > updated, "LessUpdated", format!("Updated: {updated}/{spec}")),
        (replicas > spec, "ExtraPods", format!("Pending termination: {}", replicas - spec)),
        (updated > avail, "LessAvailable", format!("Available: {avail}/{updated}")),
        (spec > ready, "LessReady", format!("Ready: {ready}/{spec}")),
        (!progressing, "ReplicaSetNotAvailable", "ReplicaSet not Available".into()),
        (!available, "DeploymentNotAvailable", "Deployment not Available".into()),
    ])
    .unwrap_or_else(|| Status::current(format!("Deployment is available. Replicas: {replicas}")))
}

fn stateful_set(o: &Value) -> Status {
    if string(o, "/spec/updateStrategy/type") == "OnDelete" {
        return Status::current("StatefulSet is using the ondelete update strategy");
    }
    let spec = int(o, "/spec/replicas", 1);
    let ready = int(o, "/status/readyReplicas", 0);
    let current = int(o, "/status/currentReplicas", 0);
    let updated = int(o, "/status/updatedReplicas", 0);
    let replicas = int(o, "/status/replicas", 0);
    let partition = int(o, "/spec/updateStrategy/rollingUpdate/partition", -1);
    if let Some(s) = first_shortfall(&[
        (spec > replicas, "LessReplicas", format!("Replicas: {replicas}/{spec}")),
        (spec > ready, "LessReady", format!("Ready: {ready}/{spec}")),
        (replicas > spec, "ExtraPods", format!("Pending termination: {}", replicas - spec)),
    ]) {
        return s;
    }
    if partition != -1 {
        if updated < spec - partition {
            return Status::in_progress("PartitionRollout", format!("updated: {updated}/{}", spec - partition));
        }
        return Status::current(format!("Partition rollout complete. updated: {updated}"));
    }
    if spec > current {
        return Status::in_progress("LessCurrent", format!("current: {current}/{spec}"));
    }
    if string(o, "/status/currentRevision") != string(o, "/status/updateRevision") {
        return Status::in_progress("RevisionMismatch", "Waiting for updated revision to match current");
    }
    Status::current(format!("All replicas scheduled as expected. Replicas: {replicas}"))
}

fn daemon_set(o: &Value) -> Status {
    if let Some(s) = generation_set(o) {
        return s;
    }
    let desired = int(o, "/status/desiredNumberScheduled", -1);
    if desired == -1 {
        return Status::in_progress("NoDesiredNumber", "Missing .status.desiredNumberScheduled");
    }
    let current = int(o, "/status/currentNumberScheduled", 0);
    let updated = int(o, "/status/updatedNumberScheduled", 0);
    let available = int(o, "/status/numberAvailable", 0);
    let ready = int(o, "/status/numberReady", 0);
    first_shortfall(&[
        (desired > current, "LessCurrent", format!("Current: {current}/{desired}")),
        (desired > updated, "LessUpdated", format!("Updated: {updated}/{desired}")),
        (desired > available, "LessAvailable", format!("Available: {available}/{desired}")),
        (desired > ready, "LessReady", format!("Ready: {ready}/{desired}")),
    ])
    .unwrap_or_else(|| Status::current(format!("All replicas scheduled as expected. Replicas: {desired}")))
}

fn replica_set(o: &Value) -> Status {
    if conditions(o).any(|c| c.kind == "ReplicaFailure" && c.status == "True") {
        return Status::in_progress("ReplicaFailure", "Replica Failure condition. Check Pods");
    }
    let spec = int(o, "/spec/replicas", 1);
    let replicas = int(o, "/status/replicas", 0);
    let ready = int(o, "/status/readyReplicas", 0);
    let available = int(o, "/status/availableReplicas", 0);
    let labelled = int(o, "/status/fullyLabeledReplicas", 0);
    first_shortfall(&[
        (spec > labelled, "LessLabelled", format!("Labelled: {labelled}/{spec}")),
        (spec > available, "LessAvailable", format!("Available: {available}/{spec}")),
        (spec > ready, "LessReady", format!("Ready: {ready}/{spec}")),
        (replicas > spec, "ExtraPods", format!("Pending termination: {}", replicas - spec)),
    ])
    .unwrap_or_else(|| Status::current(format!("ReplicaSet is available. Replicas: {replicas}")))
}

fn pod(o: &Value) -> Status {
    match string(o, "/status/phase") {
        "Succeeded" => Status::current("Pod has completed successfully"),
        // kstatus: a finished pod is what it will be; its owner (a Job) carries the verdict.
        "Failed" => Status::current("Pod has completed, but not successfully"),
        "Running" => {
            if conditions(o).any(|c| c.kind == "Ready" && c.status == "True") {
                return Status::current("Pod is Ready");
            }
            let looping: Vec<&str> = o["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|cs| cs["state"]["waiting"]["reason"] == "CrashLoopBackOff")
                .filter_map(|cs| cs["name"].as_str())
                .collect();
            if !looping.is_empty() {
                let message = format!("Containers in CrashLoop state: {}", looping.join(","));
                return Status::failed("ContainerCrashLooping", message);
            }
            Status::in_progress("PodRunningNotReady", "Pod is running but is not Ready")
        }
        "Pending" => {
            if conditions(o).any(|c| c.kind == "PodScheduled" && c.status == "False" && c.reason == "Unschedulable") {
                return Status::in_progress("PodNotScheduled", "Pod has not been scheduled");
            }
            Status::in_progress("PodPending", "Pod is in the Pending phase")
        }
        "" => Status::in_progress("PodNotObserved", "Pod phase not available"),
        other => Status::new(super::Health::Unknown, "UnknownPhase", format!("unknown phase {other}")),
    }
}

fn pvc(o: &Value) -> Status {
    match o.pointer("/status/phase").and_then(Value::as_str).unwrap_or("unknown") {
        "Bound" => Status::current("PVC is Bound"),
        phase => Status::in_progress("NotBound", format!("PVC is not Bound. phase: {phase}")),
    }
}

fn service(o: &Value) -> Status {
    let kind = o.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP");
    if kind == "LoadBalancer" && string(o, "/spec/clusterIP").is_empty() {
        return Status::in_progress("NoIPAssigned", "ClusterIP not set. Service type: LoadBalancer");
    }
    Status::current("Service is ready")
}

/// kstatus: a Job is InProgress until it starts, then Current while it runs and after it
/// completes; Failed when its `Failed` condition is true.
fn job(o: &Value) -> Status {
    let parallelism = int(o, "/spec/parallelism", 1);
    let completions = int(o, "/spec/completions", parallelism);
    let succeeded = int(o, "/status/succeeded", 0);
    let active = int(o, "/status/active", 0);
    let failed = int(o, "/status/failed", 0);
    for c in conditions(o) {
        match (c.kind, c.status) {
            ("Complete", "True") => {
                return Status::current(format!("Job Completed. succeeded: {succeeded}/{completions}"));
            }
            ("Failed", "True") => {
                let detail = if c.message.is_empty() { String::new() } else { format!(": {}", c.message) };
                return Status::failed("JobFailed", format!("Job Failed. failed: {failed}/{completions}{detail}"));
            }
            ("Suspended", "True") => return Status::current("Job is suspended"),
            _ => {}
        }
    }
    if string(o, "/status/startTime").is_empty() {
        return Status::in_progress("JobNotStarted", "Job not started");
    }
    Status::current(format!("Job in progress. success:{succeeded}, active: {active}, failed: {failed}"))
}

fn crd(o: &Value) -> Status {
    for c in conditions(o) {
        if c.kind == "NamesAccepted" && c.status == "False" {
            return Status::failed(c.reason, c.message);
        }
        if c.kind == "Established" {
            if c.status == "False" && c.reason != "Installing" {
                return Status::failed(c.reason, c.message);
            }
            if c.status == "True" {
                return Status::current("CRD is established");
            }
        }
    }
    Status::in_progress("Installing", "Install in progress")
}
