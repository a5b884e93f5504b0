//! The cases kstatus's own tests cover (cli-utils `status_compute_test.go`, `generic` rules),
//! written anew as objects and the verdict gitward must reach, plus gitward's additions.

use serde_json::Value;

use super::{Health, bears_health, status};
use crate::object::GroupKind;

fn object(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).expect("test object is YAML")
}

/// Asserts the health and reason of `yaml`.
fn check(yaml: &str, health: Health, reason: &str) {
    let s = status(&object(yaml));
    assert_eq!((s.health, s.reason.as_str()), (health, reason), "{yaml}\n→ {s:?}");
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, generation: 1}\n";

#[test]
fn deployment_without_status_is_in_progress_for_lack_of_replicas() {
    check(DEPLOYMENT, Health::InProgress, "LessReplicas");
}

#[test]
fn deployment_available_with_new_replica_set_is_current() {
    let yaml = format!(
        "{DEPLOYMENT}status:\n  observedGeneration: 1\n  replicas: 1\n  updatedReplicas: 1\n  readyReplicas: 1\n  availableReplicas: 1\n  conditions:\n  - {{type: Progressing, status: 'True', reason: NewReplicaSetAvailable}}\n  - {{type: Available, status: 'True'}}\n"
    );
    check(&yaml, Health::Current, "");
}

#[test]
fn deployment_with_a_deadline_and_progressing_false_is_not_yet_current() {
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, generation: 1}\nspec: {progressDeadlineSeconds: 45}\nstatus:\n  observedGeneration: 1\n  replicas: 1\n  updatedReplicas: 1\n  readyReplicas: 1\n  availableReplicas: 1\n  conditions:\n  - {type: Progressing, status: 'False', reason: Some reason}\n  - {type: Available, status: 'True'}\n";
    check(yaml, Health::InProgress, "ReplicaSetNotAvailable");
}

#[test]
fn deployment_without_progress_deadline_needs_only_available() {
    let yaml = format!(
        "{DEPLOYMENT}status:\n  observedGeneration: 1\n  replicas: 1\n  updatedReplicas: 1\n  readyReplicas: 1\n  availableReplicas: 1\n  conditions:\n  - {{type: Available, status: 'True'}}\n"
    );
    check(&yaml, Health::Current, "");
}

#[test]
fn deployment_not_available_is_in_progress() {
    let yaml = format!(
        "{DEPLOYMENT}status:\n  observedGeneration: 1\n  replicas: 1\n  updatedReplicas: 1\n  readyReplicas: 1\n  availableReplicas: 1\n  conditions:\n  - {{type: Progressing, status: 'True', reason: NewReplicaSetAvailable}}\n  - {{type: Available, status: 'False'}}\n"
    );
    check(&yaml, Health::InProgress, "DeploymentNotAvailable");
}

#[test]
fn deployment_past_its_progress_deadline_has_failed() {
    let yaml = format!(
        "{DEPLOYMENT}status:\n  observedGeneration: 1\n  replicas: 2\n  updatedReplicas: 1\n  conditions:\n  - {{type: Progressing, status: 'False', reason: ProgressDeadlineExceeded, message: timed out}}\n"
    );
    let s = status(&object(&yaml));
    assert_eq!(
        (s.health, s.reason.as_str(), s.message.as_str()),
        (Health::Failed, "ProgressDeadlineExceeded", "timed out")
    );
}

#[test]
fn deployment_reports_the_first_shortfall() {
    let base = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, generation: 1}\nspec: {replicas: 3}\nstatus:\n  observedGeneration: 1\n";
    check(&format!("{base}  replicas: 3\n  updatedReplicas: 1\n"), Health::InProgress, "LessUpdated");
    check(&format!("{base}  replicas: 4\n  updatedReplicas: 3\n"), Health::InProgress, "ExtraPods");
    check(
        &format!("{base}  replicas: 3\n  updatedReplicas: 3\n  availableReplicas: 2\n"),
        Health::InProgress,
        "LessAvailable",
    );
    check(
        &format!("{base}  replicas: 3\n  updatedReplicas: 3\n  availableReplicas: 3\n  readyReplicas: 2\n"),
        Health::InProgress,
        "LessReady",
    );
}

#[test]
fn unobserved_generation_is_in_progress_for_any_kind() {
    let yaml = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, generation: 2}\nstatus: {desiredNumberScheduled: 4, currentNumberScheduled: 4, updatedNumberScheduled: 4, numberAvailable: 4, numberReady: 4, observedGeneration: 1}\n";
    check(yaml, Health::InProgress, "LatestGenerationNotObserved");
    let cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, generation: 2}\nstatus: {observedGeneration: 1}\n";
    check(cr, Health::InProgress, "LatestGenerationNotObserved");
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p, generation: 2}\nstatus: {observedGeneration: 1}\n";
    check(pdb, Health::InProgress, "LatestGenerationNotObserved");
}

#[test]
fn pod_disruption_budget_observed_is_current() {
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p, generation: 1}\nstatus: {observedGeneration: 1}\n";
    check(pdb, Health::Current, "");
}

#[test]
fn deletion_timestamp_means_terminating() {
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, deletionTimestamp: '2026-11-22T10:00:00Z'}\n";
    check(yaml, Health::Terminating, "Terminating");
}

#[test]
fn reconciling_and_stalled_conditions_decide_for_any_kind() {
    let base = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, generation: 1}\nstatus:\n  conditions:\n";
    check(
        &format!("{base}  - {{type: Reconciling, status: 'True', reason: Working}}\n"),
        Health::InProgress,
        "Working",
    );
    check(&format!("{base}  - {{type: Stalled, status: 'True', reason: Stuck}}\n"), Health::Failed, "Stuck");
}

#[test]
fn stateful_set_cases() {
    let head = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s, generation: 1}\n";
    check(head, Health::InProgress, "LessReplicas");
    check(
        &format!("{head}status: {{observedGeneration: 1, currentReplicas: 1}}\n"),
        Health::InProgress,
        "LessReplicas",
    );
    let spec = format!("{head}spec: {{replicas: 4}}\n");
    check(
        &format!("{spec}status: {{observedGeneration: 1, currentReplicas: 4, readyReplicas: 4, replicas: 4}}\n"),
        Health::Current,
        "",
    );
    check(
        &format!("{spec}status: {{observedGeneration: 1, currentReplicas: 4, readyReplicas: 2, replicas: 4}}\n"),
        Health::InProgress,
        "LessReady",
    );
    check(
        &format!("{spec}status: {{observedGeneration: 1, currentReplicas: 2, readyReplicas: 4, replicas: 4}}\n"),
        Health::InProgress,
        "LessCurrent",
    );
    check(
        &format!("{spec}status: {{observedGeneration: 1, currentReplicas: 4, readyReplicas: 4, replicas: 8}}\n"),
        Health::InProgress,
        "ExtraPods",
    );
    let on_delete = format!("{head}spec: {{updateStrategy: {{type: OnDelete}}}}\n");
    check(&on_delete, Health::Current, "");
    let partition = format!("{head}spec: {{replicas: 4, updateStrategy: {{rollingUpdate: {{partition: 2}}}}}}\n");
    check(
        &format!("{partition}status: {{replicas: 4, readyReplicas: 4, updatedReplicas: 1}}\n"),
        Health::InProgress,
        "PartitionRollout",
    );
    check(&format!("{partition}status: {{replicas: 4, readyReplicas: 4, updatedReplicas: 2}}\n"), Health::Current, "");
    check(
        &format!(
            "{spec}status: {{currentReplicas: 4, readyReplicas: 4, replicas: 4, currentRevision: a, updateRevision: b}}\n"
        ),
        Health::InProgress,
        "RevisionMismatch",
    );
}

#[test]
fn daemon_set_cases() {
    let head = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, generation: 1}\n";
    check(head, Health::InProgress, "NoObservedGeneration");
    check(
        &format!("{head}status: {{observedGeneration: 1, currentReplicas: 1}}\n"),
        Health::InProgress,
        "NoDesiredNumber",
    );
    let full = "desiredNumberScheduled: 4, currentNumberScheduled: 4, updatedNumberScheduled: 4, observedGeneration: 1";
    check(&format!("{head}status: {{{full}, numberAvailable: 4, numberReady: 4}}\n"), Health::Current, "");
    check(&format!("{head}status: {{{full}, numberAvailable: 4, numberReady: 2}}\n"), Health::InProgress, "LessReady");
    check(
        &format!("{head}status: {{{full}, numberAvailable: 2, numberReady: 4}}\n"),
        Health::InProgress,
        "LessAvailable",
    );
}

#[test]
fn replica_set_cases() {
    let head = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: r, generation: 1}\n";
    check(head, Health::InProgress, "LessLabelled");
    let two = format!(
        "{head}spec: {{replicas: 2}}\nstatus:\n  observedGeneration: 1\n  replicas: 2\n  readyReplicas: 2\n  availableReplicas: 2\n  fullyLabeledReplicas: 2\n"
    );
    check(&two, Health::Current, "");
    check(&format!("{two}  conditions:\n  - {{type: ReplicaFailure, status: 'False'}}\n"), Health::Current, "");
    check(
        &format!("{two}  conditions:\n  - {{type: ReplicaFailure, status: 'True'}}\n"),
        Health::InProgress,
        "ReplicaFailure",
    );
    let four = format!(
        "{head}spec: {{replicas: 4}}\nstatus:\n  observedGeneration: 1\n  replicas: 4\n  fullyLabeledReplicas: 4\n"
    );
    check(&format!("{four}  readyReplicas: 2\n  availableReplicas: 4\n"), Health::InProgress, "LessReady");
    check(&format!("{four}  readyReplicas: 4\n  availableReplicas: 2\n"), Health::InProgress, "LessAvailable");
}

#[test]
fn pod_cases() {
    let head = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, generation: 1}\n";
    check(head, Health::InProgress, "PodNotObserved");
    check(
        &format!("{head}status:\n  phase: Running\n  conditions:\n  - {{type: Ready, status: 'True'}}\n"),
        Health::Current,
        "",
    );
    check(&format!("{head}status: {{phase: Succeeded}}\n"), Health::Current, "");
    check(&format!("{head}status: {{phase: Failed}}\n"), Health::Current, "");
    check(
        &format!(
            "{head}status:\n  phase: Pending\n  conditions:\n  - {{type: PodScheduled, status: 'False', reason: Unschedulable}}\n"
        ),
        Health::InProgress,
        "PodNotScheduled",
    );
    check(
        &format!(
            "{head}status:\n  phase: Running\n  containerStatuses:\n  - {{name: nginx, state: {{waiting: {{reason: CrashLoopBackOff}}}}}}\n"
        ),
        Health::Failed,
        "ContainerCrashLooping",
    );
    check(&format!("{head}status: {{phase: Running}}\n"), Health::InProgress, "PodRunningNotReady");
    check(&format!("{head}status: {{phase: Strange}}\n"), Health::Unknown, "UnknownPhase");
}

#[test]
fn pvc_is_current_only_when_bound() {
    let head = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c, generation: 1}\n";
    check(head, Health::InProgress, "NotBound");
    check(&format!("{head}status: {{phase: Bound}}\n"), Health::Current, "");
}

#[test]
fn job_cases() {
    let head = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, generation: 1}\n";
    check(head, Health::InProgress, "JobNotStarted");
    check(
        &format!("{head}status:\n  succeeded: 1\n  conditions:\n  - {{type: Complete, status: 'True'}}\n"),
        Health::Current,
        "",
    );
    check(
        &format!(
            "{head}spec: {{completions: 4}}\nstatus:\n  succeeded: 3\n  failed: 1\n  conditions:\n  - {{type: Failed, status: 'True', reason: BackoffLimitExceeded}}\n"
        ),
        Health::Failed,
        "JobFailed",
    );
    check(
        &format!(
            "{head}status:\n  startTime: '2019-06-04T01:17:13Z'\n  active: 2\n  conditions:\n  - {{type: Failed, status: 'False'}}\n  - {{type: Complete, status: 'False'}}\n"
        ),
        Health::Current,
        "",
    );
    check(&format!("{head}status:\n  conditions:\n  - {{type: Suspended, status: 'True'}}\n"), Health::Current, "");
}

#[test]
fn service_cases() {
    let head = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n";
    check(head, Health::Current, "");
    check(&format!("{head}spec: {{type: NodePort}}\n"), Health::Current, "");
    check(&format!("{head}spec: {{type: LoadBalancer}}\n"), Health::InProgress, "NoIPAssigned");
    check(&format!("{head}spec: {{type: LoadBalancer, clusterIP: 1.2.3.4}}\n"), Health::Current, "");
}

#[test]
fn crd_cases() {
    let head =
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x, generation: 1}\n";
    check(head, Health::InProgress, "Installing");
    let conds = format!("{head}status:\n  conditions:\n");
    check(
        &format!(
            "{conds}  - {{type: NamesAccepted, status: 'True'}}\n  - {{type: Established, status: 'False', reason: Installing}}\n"
        ),
        Health::InProgress,
        "Installing",
    );
    check(
        &format!("{conds}  - {{type: NamesAccepted, status: 'False', reason: SomeReason}}\n"),
        Health::Failed,
        "SomeReason",
    );
    check(
        &format!("{conds}  - {{type: NamesAccepted, status: 'True'}}\n  - {{type: Established, status: 'True'}}\n"),
        Health::Current,
        "",
    );
}

#[test]
fn custom_resources_follow_their_ready_condition() {
    let head = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, generation: 1}\n";
    check(head, Health::Current, "");
    check(
        &format!("{head}status:\n  conditions:\n  - {{type: Ready, status: 'True', reason: AllOk}}\n"),
        Health::Current,
        "",
    );
    check(
        &format!(
            "{head}status:\n  observedGeneration: 1\n  conditions:\n  - {{type: Ready, status: 'False', reason: NotReadyYet}}\n"
        ),
        Health::InProgress,
        "NotReadyYet",
    );
    check(
        &format!("{head}status:\n  conditions:\n  - {{type: SomeCondition, status: 'False'}}\n"),
        Health::Current,
        "",
    );
}

#[test]
fn kinds_without_status_are_current_and_bear_no_health() {
    check("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", Health::Current, "");
    check("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c, generation: 1}\n", Health::Current, "");
    assert!(!bears_health(&GroupKind::from_api_version("v1", "ConfigMap")));
    assert!(bears_health(&GroupKind::from_api_version("apps/v1", "Deployment")));
    assert!(bears_health(&GroupKind::from_api_version("example.com/v1", "Widget")));
}
