//! `[provenance] oci_referrers`: an OCI artifact unit's attestations pushed to the real CNCF
//! distribution registry as referrers of the manifest each sync applied — read back over plain
//! HTTP (the referrers API, else the `sha256-<hex>` tag's index the distribution spec falls
//! back to), the layer byte-equal to the journal's line, and verified by `gitward attest
//! verify` from the registry's copy.

use std::process::Command;
use std::time::Duration;

use gitward::sync::provenance::referrer::{ARTIFACT_TYPE, LAYER_MEDIA_TYPE};

use crate::common;
use crate::common::charts::Registry;
use crate::sources::artifacts::{Item, layer, push, unit};
use crate::sources::render::config_text;

/// GET `url` with `accept`: the body of a 200, `None` for a 404.
async fn get(url: &str, accept: &str) -> Option<Vec<u8>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let response = client.get(url).header("Accept", accept).send().await.expect("the registry answers");
    match response.status() {
        reqwest::StatusCode::NOT_FOUND => None,
        status if status.is_success() => Some(response.bytes().await.unwrap().to_vec()),
        status => panic!("GET {url}: {status}"),
    }
}

/// The referrers of `digest` in `manifests/app`: the referrers API's index, else the
/// referrers tag's.
async fn referrers(host: &str, digest: &str) -> Vec<serde_json::Value> {
    let index = "application/vnd.oci.image.index.v1+json";
    let api = get(&format!("http://{host}/v2/manifests/app/referrers/{digest}"), index).await;
    let tag = digest.replacen(':', "-", 1);
    let body = match api {
        Some(body) => body,
        None => get(&format!("http://{host}/v2/manifests/app/manifests/{tag}"), index).await.unwrap_or_default(),
    };
    if body.is_empty() {
        return Vec::new();
    }
    let index: serde_json::Value = serde_json::from_slice(&body).unwrap();
    index["manifests"].as_array().cloned().unwrap_or_default()
}

/// The one referrer of `digest`: its manifest checked (artifactType, subject, empty config,
/// one DSSE layer); returns the layer's bytes.
async fn the_referrer(host: &str, digest: &str) -> Vec<u8> {
    let found = referrers(host, digest).await;
    assert_eq!(found.len(), 1, "one referrer of {digest}: {found:?}");
    assert_eq!(found[0]["artifactType"], ARTIFACT_TYPE, "{found:?}");
    let manifest_type = "application/vnd.oci.image.manifest.v1+json";
    let url = format!("http://{host}/v2/manifests/app/manifests/{}", found[0]["digest"].as_str().unwrap());
    let manifest: serde_json::Value = serde_json::from_slice(&get(&url, manifest_type).await.unwrap()).unwrap();
    assert_eq!(manifest["artifactType"], ARTIFACT_TYPE, "{manifest}");
    assert_eq!(manifest["subject"]["digest"], digest, "{manifest}");
    assert_eq!(manifest["subject"]["mediaType"], manifest_type, "{manifest}");
    let subject = get(&format!("http://{host}/v2/manifests/app/manifests/{digest}"), manifest_type).await.unwrap();
    assert_eq!(manifest["subject"]["size"].as_u64(), Some(subject.len() as u64), "the subject's size as held");
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.oci.empty.v1+json", "{manifest}");
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], LAYER_MEDIA_TYPE, "{manifest}");
    let blob = format!("http://{host}/v2/manifests/app/blobs/{}", layers[0]["digest"].as_str().unwrap());
    get(&blob, "*/*").await.unwrap()
}

fn manifests(value: &str) -> Vec<u8> {
    layer(&[Item::File("app/cm.yaml", common::cm("art-attested", value))])
}

#[tokio::test]
async fn each_attestation_of_an_artifact_unit_is_pushed_as_a_referrer_of_the_manifest_applied() {
    let env = common::setup("prov-referrers").await;
    let registry = Registry::start().await;
    let first = push(&registry.host, "v1", manifests("1")).await;
    let url = format!("oci://{}/manifests/app:v1", registry.host);
    let dir = tempfile::tempdir().unwrap();
    let key = gitward::sync::provenance::key::SigningKey::p256_from_seed(31);
    std::fs::write(dir.path().join("provenance.key"), key.to_pem()).unwrap();
    std::fs::write(dir.path().join("provenance.pub"), key.verifying().to_pem()).unwrap();
    let provenance = format!(
        "[provenance]\nkey_file = \"{}\"\noci_referrers = true\n\n",
        dir.path().join("provenance.key").display()
    );
    let allowed = crate::sources::charts::listed(&format!("oci://{}/manifests", registry.host));
    let units = provenance + &unit("art", &url, "app", &env.namespace);
    let config = dir.path().join("gitward.toml");
    std::fs::write(&config, config_text(&dir.path().join("state"), &allowed, &units)).unwrap();
    let journal = dir.path().join("state/attestations/art.jsonl");
    let sync = || {
        let run = common::gitward(&["sync"], &config, Duration::from_secs(120));
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(!run.stderr.contains("could not push the attestation"), "{}", run.stderr);
    };

    sync();
    assert_eq!(common::cm_value(&env.client, &env.namespace, "art-attested").await.as_deref(), Some("1"));
    let lines = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 1, "one attestation");
    let pulled = the_referrer(&registry.host, &first).await;
    assert_eq!(pulled, lines[0].as_bytes(), "the layer is the journal's line, byte for byte");
    let file = dir.path().join("pulled.json");
    std::fs::write(&file, &pulled).unwrap();
    let verify = Command::new(common::binary())
        .args(["attest", "verify", "--key"])
        .arg(dir.path().join("provenance.pub"))
        .arg(&file)
        .output()
        .expect("gitward runs");
    let out = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(verify.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&verify.stderr));

    let second = push(&registry.host, "v1", manifests("2")).await;
    sync();
    assert_eq!(common::cm_value(&env.client, &env.namespace, "art-attested").await.as_deref(), Some("2"));
    let lines = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 2, "two attestations");
    assert_eq!(the_referrer(&registry.host, &second).await, lines[1].as_bytes(), "the new push's referrer");
    assert_eq!(referrers(&registry.host, &first).await.len(), 1, "the first manifest keeps its one referrer");
}
