//! Who signed what was applied, and a signing key kept in the cluster: a unit verifying SSH
//! signatures (`[sync.verify] allowed_signers_file`) syncs a commit signed by a real
//! `ssh-keygen` key, and its attestation names the allowed_signers principal and the key's
//! fingerprint as `ssh-keygen -l` prints it; a unit whose `[provenance] key_secret` names a
//! Secret holding an Ed25519 key signs with it, and a Secret that is missing or holds no
//! `key.pem` stops the sync with an error naming it.

use std::collections::BTreeMap;

use gitward::sync::provenance::key::SigningKey;
use gitward::sync::provenance::statement::Signer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};

use super::{Fixture, LIMIT, Tables, key_file_table, statement};
use crate::common;
use crate::sources::signatures::{self, Sign, SshKey};

#[tokio::test]
async fn the_attestation_names_the_ssh_principal_and_fingerprint_that_signed_the_commit() {
    let unit = "[sync.verify]\nallowed_signers_file = \"allowed_signers\"\n".to_owned();
    let tables = |dir: &std::path::Path, _: &str| Tables { provenance: key_file_table(dir), unit };
    let fixture = Fixture::with("prov-signer", SigningKey::p256_from_seed(31), tables).await;
    let trusted = SshKey::new(fixture.dir.path(), "trusted", "release@example.com");
    let line = format!("# who may release\n{}\n", trusted.line);
    std::fs::write(fixture.dir.path().join("allowed_signers"), line).unwrap();

    let commit = signatures::push(&fixture.repo, "1", Sign::Ssh(&trusted));
    fixture.sync();
    let kept = fixture.kept().await;
    assert_eq!(kept.len(), 1, "the signed commit was applied and attested");
    let source = statement(&kept[0]).predicate.source;
    assert_eq!(source.commit, commit);
    assert_eq!(source.verified_by, ["ssh"]);
    let want = Signer {
        kind: "ssh".into(),
        identity: Some("release@example.com".into()),
        fingerprint: signatures::fingerprint(&trusted),
    };
    assert!(want.fingerprint.starts_with("SHA256:"), "ssh-keygen -l prints {}", want.fingerprint);
    assert_eq!(source.signers, [want], "who signed the commit, as the allowed_signers file names them");

    // As JSON, the predicate names it in camelCase beside the checks configured.
    let journal = std::fs::read_to_string(fixture.journal()).unwrap();
    let envelope = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    let payload: serde_json::Value = serde_json::to_value(statement(&envelope)).unwrap();
    let signer = &payload["predicate"]["source"]["signers"][0];
    assert_eq!(signer["kind"], "ssh", "{payload}");
    assert_eq!(signer["identity"], "release@example.com", "{payload}");
    assert_eq!(signer["fingerprint"], signatures::fingerprint(&trusted).as_str(), "{payload}");
    assert_eq!(fixture.verify(&[fixture.journal().to_str().unwrap()]).0, Some(0));
}

#[tokio::test]
async fn a_key_secret_signs_and_a_missing_or_keyless_secret_stops_the_sync_naming_it() {
    let tables = |_: &std::path::Path, namespace: &str| Tables {
        provenance: format!("[provenance]\nkey_secret = \"{namespace}/provenance-key\"\n"),
        unit: String::new(),
    };
    let fixture = Fixture::with("prov-secret", SigningKey::ed25519_from_seed(32), tables).await;
    let namespace = fixture.env.namespace.clone();
    let named = format!("key_secret Secret/{namespace}/provenance-key");
    fixture.repo.push(&[("a.yaml", &common::cm("a", "1"))], "a is 1");

    let run = common::gitward(&["sync"], &fixture.config, LIMIT);
    assert_ne!(run.code, Some(0), "no Secret, no sync: {}", run.stderr);
    assert!(run.stderr.contains(&format!("{named}: not found")), "{}", run.stderr);
    assert_eq!(common::cm_value(&fixture.env.client, &namespace, "a").await, None, "nothing applied");

    let secrets: Api<Secret> = Api::namespaced(fixture.env.client.clone(), &namespace);
    let secret = |key: &str, pem: String| Secret {
        metadata: ObjectMeta { name: Some("provenance-key".into()), ..Default::default() },
        data: Some(BTreeMap::from([(key.to_owned(), ByteString(pem.into_bytes()))])),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &secret("provenance.key", fixture.key.to_pem())).await.unwrap();
    let run = common::gitward(&["sync"], &fixture.config, LIMIT);
    assert_ne!(run.code, Some(0), "a Secret without key.pem: {}", run.stderr);
    let expected = format!("{named} has no data key key.pem (it holds: provenance.key)");
    assert!(run.stderr.contains(&expected), "{}", run.stderr);

    secrets.delete("provenance-key", &Default::default()).await.unwrap();
    secrets.create(&PostParams::default(), &secret("key.pem", fixture.key.to_pem())).await.unwrap();
    fixture.sync();
    assert_eq!(common::cm_value(&fixture.env.client, &namespace, "a").await.as_deref(), Some("1"));
    let kept = fixture.kept().await;
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].signatures[0].keyid, Some(fixture.key.keyid()), "signed by the Secret's key");
    let (code, out) = fixture.verify(&[fixture.journal().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("verified: 1 attestation"), "{out}");
}
