//! The chain checks over envelopes made here: each failure named, the good chain passed.

use super::*;
use crate::sync::provenance::dsse::{self, PAYLOAD_TYPE};
use crate::sync::provenance::key::SigningKey;
use crate::sync::provenance::statement::{
    Changes, ClusterId, MembersRecord, Predicate, Renderer, Sha256Digest, Source, Statement, Target,
};

fn predicate(unit: &str, uid: &str, previous: Option<String>) -> Predicate {
    Predicate {
        unit: unit.into(),
        source: Source {
            repository: "https://git.example/repo".into(),
            reference: "main".into(),
            commit: "abc".into(),
            path: ".".into(),
            verified_by: Vec::new(),
            signers: Vec::new(),
            digest: None,
        },
        renderer: Renderer { gitward: "0.1.0".into(), tools: String::new(), sandbox: "off".into() },
        target: Target {
            cluster: ClusterId { kube_system_uid: uid.into(), ca_sha256: "ca".into() },
            service_account: None,
            field_manager: "gitward".into(),
            replica: "host".into(),
        },
        changes: Changes { created: vec!["ConfigMap/default/a".into()], ..Changes::default() },
        members: MembersRecord { count: 0, sha256: "e3b0".into() },
        health: "healthy".into(),
        started_on: "2026-12-02T10:00:00Z".into(),
        finished_on: "2026-12-02T10:00:01Z".into(),
        previous: previous.map(|sha256| Sha256Digest { sha256 }),
    }
}

fn seal(predicate: Predicate, key: &SigningKey) -> Envelope {
    let statement = Statement::new("applyset-x-v1", "ab".repeat(32), predicate);
    dsse::sign(PAYLOAD_TYPE, &serde_json::to_vec(&statement).unwrap(), key)
}

/// Three attestations of unit `a`, chained.
fn three(key: &SigningKey) -> Vec<Envelope> {
    let mut out: Vec<Envelope> = Vec::new();
    for _ in 0..3 {
        let previous = out.last().map(dsse::digest);
        out.push(seal(predicate("a", "uid-1", previous), key));
    }
    out
}

#[test]
fn a_chain_verifies_from_its_start_and_a_kept_suffix_from_anywhere() {
    let key = SigningKey::p256_from_seed(9);
    let chain = three(&key);
    let checked = check(&chain, &key.verifying(), None, Start::Genesis).unwrap();
    assert_eq!(checked.len(), 3);
    assert_eq!(checked[1].statement.predicate.previous.as_ref().unwrap().sha256, dsse::digest(&chain[0]));
    check(&chain[1..], &key.verifying(), Some("a"), Start::Any).unwrap();
    let error = check(&chain[1..], &key.verifying(), None, Start::Genesis).unwrap_err();
    assert!(error.starts_with("chain gap: attestation #1"), "{error}");
}

#[test]
fn a_missing_middle_a_reorder_and_a_restart_are_named() {
    let key = SigningKey::ed25519_from_seed(9);
    let chain = three(&key);
    let gap = check(&[chain[0].clone(), chain[2].clone()], &key.verifying(), None, Start::Genesis).unwrap_err();
    assert!(gap.starts_with("chain gap: attestation #2"), "{gap}");
    let swapped = [chain[0].clone(), chain[2].clone(), chain[1].clone()];
    let reordered = check(&swapped, &key.verifying(), None, Start::Genesis).unwrap_err();
    assert!(reordered.starts_with("reordered: attestation #2"), "{reordered}");
    let two = check(&[chain[1].clone(), chain[0].clone()], &key.verifying(), None, Start::Genesis).unwrap_err();
    assert!(two.starts_with("reordered: attestation #1"), "{two}");
    let restart = [chain[0].clone(), seal(predicate("a", "uid-1", None), &key)];
    let error = check(&restart, &key.verifying(), None, Start::Genesis).unwrap_err();
    assert!(error.contains("starts a new chain"), "{error}");
}

#[test]
fn another_cluster_key_or_type_fails_and_units_chain_apart() {
    let key = SigningKey::p256_from_seed(4);
    let first = seal(predicate("a", "uid-1", None), &key);
    let moved = seal(predicate("a", "uid-2", Some(dsse::digest(&first))), &key);
    let error = check(&[first.clone(), moved], &key.verifying(), None, Start::Genesis).unwrap_err();
    assert!(error.starts_with("cluster id changed: attestation #2"), "{error}");
    let other = SigningKey::p256_from_seed(5);
    let error = check(std::slice::from_ref(&first), &other.verifying(), None, Start::Genesis).unwrap_err();
    assert!(error.ends_with("no signature verifies with the key"), "{error}");
    // Two units interleaved: each its own chain.
    let b = seal(predicate("b", "uid-1", None), &key);
    let second = seal(predicate("a", "uid-1", Some(dsse::digest(&first))), &key);
    assert_eq!(check(&[first.clone(), b.clone(), second], &key.verifying(), None, Start::Genesis).unwrap().len(), 3);
    assert_eq!(check(&[first, b], &key.verifying(), Some("b"), Start::Genesis).unwrap().len(), 1);
    let statement = serde_json::json!({"_type": STATEMENT_TYPE, "predicateType": "https://slsa.dev/provenance/v1"});
    let slsa = dsse::sign(PAYLOAD_TYPE, statement.to_string().as_bytes(), &key);
    let error = check(&[slsa], &key.verifying(), None, Start::Genesis).unwrap_err();
    assert!(error.contains("predicateType is Some(\"https://slsa.dev/provenance/v1\")"), "{error}");
}

#[test]
fn files_hold_one_envelope_or_lines() {
    let key = SigningKey::ed25519_from_seed(1);
    let chain = three(&key);
    let pretty = serde_json::to_string_pretty(&chain[0]).unwrap();
    assert_eq!(parse(&pretty).unwrap(), [chain[0].clone()]);
    let lines: String = chain.iter().map(|e| format!("{}\n", dsse::to_line(e))).collect();
    assert_eq!(parse(&lines).unwrap(), chain);
    assert!(parse("{}\n").unwrap_err().starts_with("line 1:"));
}
