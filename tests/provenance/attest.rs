//! Two pushes, two `gitward sync` runs: two attestations kept and journaled, the second chained
//! to the first, verified by `gitward attest verify` and by cosign; and every tampering named.

use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gitward::sync::provenance::dsse::{self, Envelope, PAYLOAD_TYPE};
use gitward::sync::provenance::key::SigningKey;
use gitward::sync::provenance::members;
use gitward::sync::provenance::statement::PREDICATE_TYPE;
use gitward::sync::sealed;

use super::{Fixture, statement, write_lines};
use crate::common;

/// Two syncs of two pushes; the envelopes the ConfigMap keeps.
async fn two_syncs(fixture: &Fixture) -> Vec<Envelope> {
    fixture.push_and_sync(&[("a.yaml", &common::cm("a", "1"))], "a is 1");
    fixture.push_and_sync(&[("a.yaml", &common::cm("a", "2")), ("b.yaml", &common::cm("b", "1"))], "a is 2, b");
    fixture.kept().await
}

#[tokio::test]
async fn two_syncs_leave_two_chained_attestations_that_gitward_and_cosign_verify() {
    let fixture = Fixture::new("prov-chain", 11).await;
    let kept = two_syncs(&fixture).await;
    assert_eq!(kept.len(), 2, "one attestation per sync that changed something");
    let (first, second) = (statement(&kept[0]), statement(&kept[1]));
    assert_eq!(first.predicate.previous, None, "the unit's first attestation");
    assert_eq!(second.predicate.previous.as_ref().map(|d| d.sha256.clone()), Some(dsse::digest(&kept[0])));
    assert_eq!(first.predicate.changes.created, [format!("ConfigMap/{}/a", fixture.env.namespace)]);
    assert_eq!(second.predicate.changes.configured, [format!("ConfigMap/{}/a", fixture.env.namespace)]);
    assert_eq!(second.predicate.members.count, 2);
    assert_eq!(second.predicate_type, PREDICATE_TYPE);
    assert!(second.subject[0].name.starts_with("applyset:applyset-"), "{:?}", second.subject);
    assert_eq!(first.predicate.target.cluster, second.predicate.target.cluster);
    assert!(!second.predicate.target.cluster.kube_system_uid.is_empty());
    assert_eq!(second.predicate.source.commit.len(), 40, "the commit applied");

    let journal = std::fs::read_to_string(fixture.journal()).unwrap();
    let lines: Vec<&str> = journal.lines().collect();
    assert_eq!(lines, [dsse::to_line(&kept[0]), dsse::to_line(&kept[1])], "the journal holds what the cluster keeps");
    let (code, out) = fixture.verify(&[fixture.journal().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("verified: 2 attestations"), "{out}");
    let show = Command::new(common::binary()).args(["attest", "show"]).arg(fixture.journal()).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert_eq!(show.status.code(), Some(0), "{shown}");
    assert!(shown.contains(&format!("envelope 2: sha256:{}", dsse::digest(&kept[1]))), "{shown}");
    assert!(shown.contains("payloadType: application/vnd.in-toto+json"), "{shown}");
    assert!(shown.contains(&format!("\"predicateType\": \"{PREDICATE_TYPE}\"")), "{shown}");

    // The subject is the render's digest, what `gitward diff` prints for the revision applied.
    let subject = &second.subject[0].digest.sha256;
    let diff = common::gitward(&["diff"], &fixture.config, super::LIMIT);
    assert_eq!(diff.code, Some(0), "nothing to do: {}{}", diff.stdout, diff.stderr);
    assert!(diff.stdout.contains(&format!("(render sha256:{subject})")), "{}", diff.stdout);

    // The ConfigMap keeps the newest members record, bound by its digest; its lines, as the
    // render digest's, are the blob whose sha256 is the subject.
    let record = fixture.members().await.expect("the newest members record is kept");
    assert_eq!(members::digest(&record), second.predicate.members.sha256);
    let parsed = members::parse(&record).unwrap();
    assert_eq!(parsed.len(), 2);
    assert_eq!(&members::render_digest(&parsed), subject);
    let mut blob: Vec<String> = parsed.iter().map(|m| format!("{}\n", sealed::line(&m.object(), &m.digest))).collect();
    blob.sort();
    let blob_file = fixture.dir.path().join("subject.txt");
    std::fs::write(&blob_file, blob.concat()).unwrap();

    // The real cosign accepts each envelope with the public key; given the subject's canonical
    // form as the blob, it checks the subject digest too.
    for (n, envelope) in kept.iter().enumerate() {
        let file = fixture.dir.path().join(format!("envelope-{n}.json"));
        std::fs::write(&file, dsse::to_line(envelope)).unwrap();
        cosign(&fixture, &file, None);
    }
    cosign(&fixture, &fixture.dir.path().join("envelope-1.json"), Some(&blob_file));
}

/// `cosign verify-blob-attestation` of `envelope` with the fixture's public key, with `blob`
/// (claims checked) or without (`--check-claims=false`); must succeed.
fn cosign(fixture: &Fixture, envelope: &std::path::Path, blob: Option<&std::path::Path>) {
    let binary = common::charts::tools_bin().join("cosign");
    let mut command = Command::new(&binary);
    command
        .args(["verify-blob-attestation", "--insecure-ignore-tlog", "--type", PREDICATE_TYPE, "--key"])
        .arg(fixture.public())
        .arg("--signature")
        .arg(envelope)
        .env_clear()
        .env("HOME", fixture.dir.path());
    match blob {
        Some(blob) => command.arg(blob),
        None => command.arg("--check-claims=false"),
    };
    let out = command.output().expect("cosign runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("Verified OK"), "cosign {blob:?}: {stderr}");
}

/// `envelope` with its Statement changed by `change` and signed again with `key`.
fn resigned(envelope: &Envelope, key: &SigningKey, change: impl Fn(&mut serde_json::Value)) -> Envelope {
    let mut value: serde_json::Value = serde_json::from_slice(&STANDARD.decode(&envelope.payload).unwrap()).unwrap();
    change(&mut value);
    dsse::sign(PAYLOAD_TYPE, &serde_json::to_vec(&value).unwrap(), key)
}

#[tokio::test]
async fn each_tampering_fails_verification_naming_why() {
    let fixture = Fixture::new("prov-tamper", 12).await;
    let kept = two_syncs(&fixture).await;
    assert_eq!(kept.len(), 2);
    let (first, second) = (kept[0].clone(), kept[1].clone());
    let file = fixture.dir.path().join("tampered.jsonl");
    let expect = |envelopes: &[Envelope], reason: &str| {
        write_lines(&file, envelopes);
        let (code, out) = fixture.verify(&[file.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{reason}: {out}");
        assert!(out.contains(reason), "expected {reason:?} in {out}");
    };
    write_lines(&file, &kept);
    assert_eq!(fixture.verify(&[file.to_str().unwrap()]).0, Some(0), "untouched, it verifies");

    let mut payload = STANDARD.decode(&second.payload).unwrap();
    let at = payload.iter().position(|b| *b == b'"').unwrap();
    payload[at + 1] ^= 1;
    let flipped = Envelope { payload: STANDARD.encode(&payload), ..second.clone() };
    expect(&[first.clone(), flipped], "no signature verifies with the key");

    let retyped = Envelope { payload_type: "application/json".into(), ..second.clone() };
    expect(&[first.clone(), retyped], "payloadType is \"application/json\"");

    let other = resigned(&second, &SigningKey::p256_from_seed(99), |_| {});
    expect(&[first.clone(), other], "no signature verifies with the key");

    expect(std::slice::from_ref(&second), "chain gap: attestation #1");
    expect(&[second.clone(), first.clone()], "reordered: attestation #1");
    let third =
        resigned(&second, &fixture.key, |v| v["predicate"]["previous"]["sha256"] = dsse::digest(&second).into());
    expect(&[first.clone(), third.clone(), second.clone()], "reordered: attestation #2");

    let moved = resigned(&second, &fixture.key, |v| {
        v["predicate"]["target"]["cluster"]["kubeSystemUid"] = "another-cluster".into();
    });
    expect(&[first, moved], "cluster id changed: attestation #2");
}

/// A sync whose one object the API server rejects still attests what it applied: the Statement
/// names the ConfigMap created and the rejected one failed, and its health is `failed`.
#[tokio::test]
async fn a_sync_with_a_rejected_object_attests_what_it_did_apply() {
    let fixture = Fixture::new("prov-partial", 13).await;
    let ns = &fixture.env.namespace;
    let rejected =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  labels:\n    team: \"not a valid label value!\"\n";
    fixture
        .repo
        .push(&[("a.yaml", &common::cm("a", "1")), ("bad.yaml", rejected)], "a, and one the API server rejects");
    let run = common::gitward(&["sync"], &fixture.config, super::LIMIT);
    assert_eq!(run.code, Some(1), "an object failed: {}", run.stderr);
    let kept = fixture.kept().await;
    assert_eq!(kept.len(), 1, "the sync applied a: one attestation");
    let predicate = statement(&kept[0]).predicate;
    assert_eq!(predicate.changes.created, [format!("ConfigMap/{ns}/a")]);
    assert_eq!(predicate.changes.failed, [format!("ConfigMap/{ns}/bad")]);
    assert_eq!(predicate.health, "failed");
    assert_eq!(fixture.verify(&[fixture.journal().to_str().unwrap()]).0, Some(0));
}

/// A sync that creates every member again (they were deleted by hand) takes itself for the
/// unit's first and writes its attestation without reading the ConfigMap first; the ConfigMap
/// is there, so the write meets it (409), reads it and chains to the last attestation kept.
#[tokio::test]
async fn a_sync_that_recreates_every_member_still_chains_to_the_kept_attestations() {
    let fixture = Fixture::new("prov-again", 14).await;
    let kept = two_syncs(&fixture).await;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(fixture.env.client.clone(), &fixture.env.namespace);
    for name in ["a", "b"] {
        api.delete(name, &Default::default()).await.unwrap();
    }
    let gone = common::eventually(super::LIMIT, || async { api.get_opt("a").await.unwrap().is_none() }).await;
    assert!(gone, "a deleted");
    fixture.sync();
    let now = fixture.kept().await;
    assert_eq!(now.len(), 3, "a third attestation, kept beside the two");
    let third = statement(&now[2]).predicate;
    assert_eq!(third.changes.created.len(), 2, "{:?}", third.changes);
    assert_eq!(third.previous.map(|d| d.sha256), Some(dsse::digest(&kept[1])), "chained to the last one kept");
    let (code, out) = fixture.verify(&[fixture.journal().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
}
