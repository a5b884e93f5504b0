//! `gitward attest verify --config`: the kept attestations and the live members against the
//! last, a hand edit named as drift; and a resync that changes nothing adds no attestation and
//! writes nothing to the attestations' ConfigMap.

use gitward::sync::provenance::dsse;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::Fixture;
use crate::common;

#[tokio::test]
async fn a_member_edited_by_hand_is_drift_since_the_last_attestation() {
    let fixture = Fixture::new("prov-drift", 13).await;
    fixture.push_and_sync(&[("a.yaml", &common::cm("a", "1")), ("b.yaml", &common::cm("b", "1"))], "a, b");
    let config = fixture.config.to_str().unwrap();
    let (code, out) = fixture.verify(&["--config", config]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("app: verified"), "{out}");

    let api: Api<ConfigMap> = Api::namespaced(fixture.env.client.clone(), &fixture.env.namespace);
    let params = PatchParams { field_manager: Some("by-hand".into()), ..Default::default() };
    api.patch("b", &params, &Patch::Merge(json!({"data": {"value": "edited"}}))).await.unwrap();
    let (code, out) = fixture.verify(&["--config", config, "--sync", "app"]);
    assert_eq!(code, Some(1), "{out}");
    let digest = dsse::digest(fixture.kept().await.last().unwrap());
    let want = format!("drift since attestation sha256:{digest}: ConfigMap/{}/b changed", fixture.env.namespace);
    assert!(out.contains(&want), "expected {want:?} in {out}");
}

#[tokio::test]
async fn a_resync_that_changes_nothing_adds_no_attestation_and_no_write() {
    let fixture = Fixture::new("prov-noop", 14).await;
    fixture.push_and_sync(&[("a.yaml", &common::cm("a", "1"))], "a");
    assert_eq!(fixture.kept().await.len(), 1);
    let namespace = fixture.env.namespace.clone();
    let writes = || {
        common::audit_writes(&namespace)
            .into_iter()
            .filter(|e| e["objectRef"]["name"] == "gitward-app-attestations")
            .count()
    };
    assert!(common::eventually(std::time::Duration::from_secs(10), || async { writes() == 1 }).await);
    fixture.sync();
    assert_eq!(fixture.kept().await.len(), 1, "a no-op resync attests nothing");
    let journal = std::fs::read_to_string(fixture.journal()).unwrap();
    assert_eq!(journal.lines().count(), 1);
    // The audit log is written as requests complete; a second write would be there by now.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(writes(), 1, "the attestations' ConfigMap is written once, by the first sync");
}
