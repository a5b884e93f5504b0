//! `[provenance] oci_referrers`: an OCI artifact unit's, and an OCI chart unit's, attestations
//! pushed to the real CNCF distribution registry as referrers of the manifest each sync applied
//! (the artifact's; the chart version tag's) — read back over plain HTTP (the referrers API,
//! else the `sha256-<hex>` tag's index the distribution spec falls back to), the layer
//! byte-equal to the journal's line, and verified by `gitward attest verify` from the
//! registry's copy.

use std::process::Command;
use std::time::Duration;

use gitward::sync::provenance::referrer::{ARTIFACT_TYPE, LAYER_MEDIA_TYPE};

use crate::common;
use crate::common::charts::{Registry, chart_unit, package, package_with, sha256_hex};
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

/// The artifact units' repository.
const APP: &str = "manifests/app";

/// The manifest media type of an artifact, a chart and a referrer.
const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// The referrers of `digest` in `repository`: the referrers API's index, else the referrers
/// tag's.
async fn referrers(host: &str, repository: &str, digest: &str) -> Vec<serde_json::Value> {
    let index = "application/vnd.oci.image.index.v1+json";
    let api = get(&format!("http://{host}/v2/{repository}/referrers/{digest}"), index).await;
    let tag = digest.replacen(':', "-", 1);
    let body = match api {
        Some(body) => body,
        None => get(&format!("http://{host}/v2/{repository}/manifests/{tag}"), index).await.unwrap_or_default(),
    };
    if body.is_empty() {
        return Vec::new();
    }
    let index: serde_json::Value = serde_json::from_slice(&body).unwrap();
    index["manifests"].as_array().cloned().unwrap_or_default()
}

/// The one referrer of `digest` in `repository`: its manifest checked (artifactType, subject,
/// empty config, one DSSE layer); returns the layer's bytes.
async fn the_referrer(host: &str, repository: &str, digest: &str) -> Vec<u8> {
    let found = referrers(host, repository, digest).await;
    assert_eq!(found.len(), 1, "one referrer of {digest}: {found:?}");
    assert_eq!(found[0]["artifactType"], ARTIFACT_TYPE, "{found:?}");
    let manifest_type = MANIFEST_TYPE;
    let url = format!("http://{host}/v2/{repository}/manifests/{}", found[0]["digest"].as_str().unwrap());
    let manifest: serde_json::Value = serde_json::from_slice(&get(&url, manifest_type).await.unwrap()).unwrap();
    assert_eq!(manifest["artifactType"], ARTIFACT_TYPE, "{manifest}");
    assert_eq!(manifest["subject"]["digest"], digest, "{manifest}");
    assert_eq!(manifest["subject"]["mediaType"], manifest_type, "{manifest}");
    let subject = get(&format!("http://{host}/v2/{repository}/manifests/{digest}"), manifest_type).await.unwrap();
    assert_eq!(manifest["subject"]["size"].as_u64(), Some(subject.len() as u64), "the subject's size as held");
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.oci.empty.v1+json", "{manifest}");
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], LAYER_MEDIA_TYPE, "{manifest}");
    let blob = format!("http://{host}/v2/{repository}/blobs/{}", layers[0]["digest"].as_str().unwrap());
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
    let pulled = the_referrer(&registry.host, APP, &first).await;
    assert_eq!(pulled, lines[0].as_bytes(), "the layer is the journal's line, byte for byte");
    let (code, out) = verify(dir.path(), &pulled);
    assert_eq!(code, Some(0), "{out}");

    let second = push(&registry.host, "v1", manifests("2")).await;
    sync();
    assert_eq!(common::cm_value(&env.client, &env.namespace, "art-attested").await.as_deref(), Some("2"));
    let lines = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 2, "two attestations");
    assert_eq!(the_referrer(&registry.host, APP, &second).await, lines[1].as_bytes(), "the new push's referrer");
    assert_eq!(referrers(&registry.host, APP, &first).await.len(), 1, "the first manifest keeps its one referrer");
}

/// `gitward attest verify --key <dir>/provenance.pub` of `envelope` written to a file: its
/// exit code and output.
fn verify(dir: &std::path::Path, envelope: &[u8]) -> (Option<i32>, String) {
    let file = dir.join("pulled.json");
    std::fs::write(&file, envelope).unwrap();
    let verify = Command::new(common::binary())
        .args(["attest", "verify", "--key"])
        .arg(dir.join("provenance.pub"))
        .arg(&file)
        .output()
        .expect("gitward runs");
    let out = format!("{}{}", String::from_utf8_lossy(&verify.stdout), String::from_utf8_lossy(&verify.stderr));
    (verify.status.code(), out)
}

/// A chart unit installing a chart `helm push`ed to the registry: its attestation is pushed as
/// a referrer of the manifest of the version's tag (the chart layer's manifest, not the
/// revision's layer digest), the layer is the journal's line and verifies with the key.
#[tokio::test]
async fn the_attestation_of_an_oci_chart_unit_is_pushed_as_a_referrer_of_the_chart_manifest() {
    let env = common::setup("prov-chart-referrers").await;
    let registry = Registry::start().await;
    let work = tempfile::tempdir().unwrap();
    let archive = package(work.path(), "demo", "0.1.0", &work.path().join("out"));
    registry.push(work.path(), &archive, "charts");
    let dir = tempfile::tempdir().unwrap();
    let key = gitward::sync::provenance::key::SigningKey::p256_from_seed(37);
    std::fs::write(dir.path().join("provenance.key"), key.to_pem()).unwrap();
    std::fs::write(dir.path().join("provenance.pub"), key.verifying().to_pem()).unwrap();
    let provenance = format!(
        "[provenance]\nkey_file = \"{}\"\noci_referrers = true\n\n",
        dir.path().join("provenance.key").display()
    );
    let url = format!("oci://{}/charts", registry.host);
    let allowed = crate::sources::charts::listed(&url);
    let units = provenance + &chart_unit("chart", &env.namespace, &url, "0.1.0");
    let config = dir.path().join("gitward.toml");
    std::fs::write(&config, config_text(&dir.path().join("state"), &allowed, &units)).unwrap();

    let run = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stderr.contains("could not push the attestation"), "{}", run.stderr);
    let installed = common::cm_data(&env.client, &env.namespace, "shop-demo", "version").await;
    assert_eq!(installed.as_deref(), Some("0.1.0"));
    let lines = std::fs::read_to_string(dir.path().join("state/attestations/chart.jsonl")).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 1, "one attestation");

    let held = get(&format!("http://{}/v2/charts/demo/manifests/0.1.0", registry.host), MANIFEST_TYPE).await;
    let held = held.expect("the chart's tag");
    let manifest: serde_json::Value = serde_json::from_slice(&held).unwrap();
    let layer = format!("sha256:{}", sha256_hex(&archive));
    assert!(manifest["layers"].as_array().unwrap().iter().any(|l| l["digest"] == layer.as_str()), "{manifest}");
    let digest = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&held)));
    assert_ne!(digest, layer);
    assert!(referrers(&registry.host, "charts/demo", &layer).await.is_empty(), "nothing refers to the layer digest");
    let pulled = the_referrer(&registry.host, "charts/demo", &digest).await;
    assert_eq!(pulled, lines[0].as_bytes(), "the layer is the journal's line, byte for byte");
    let (code, out) = verify(dir.path(), &pulled);
    assert_eq!(code, Some(0), "{out}");

    // The tag pushed over with other bytes: the applied revision's referrer is refused, naming
    // both chart layers, and nothing is attached to the manifest the tag names now.
    let other = package_with(work.path(), "demo", "0.1.0", &work.path().join("other"), &[("x.yaml", "# x\n")]);
    registry.push(work.path(), &other, "charts");
    let text = std::fs::read_to_string(&config).unwrap();
    let parsed = gitward::config::Config::from_toml(&text, dir.path(), "gitward.toml").expect("valid config");
    let unit = &parsed.units[0];
    let spec = gitward::source::chart::ChartSpec {
        unit: unit.name.clone(),
        source: unit.helm.chart.clone().expect("a chart unit"),
        max_bytes: 1 << 20,
        timeout: Duration::from_secs(30),
        cosign_public_key_file: None,
        chart_repositories: unit.render_tools.chart_repositories.clone(),
    };
    let referrer = gitward::source::chart::Referrer {
        artifact_type: ARTIFACT_TYPE,
        media_type: LAYER_MEDIA_TYPE,
        content: b"{}",
        annotations: Default::default(),
    };
    let error = spec.attach(&format!("demo@0.1.0@{layer}"), referrer).await.expect_err("the tag moved");
    let error = error.to_string();
    let moved = format!("sha256:{}", sha256_hex(&other));
    assert!(error.contains(&layer) && error.contains(&moved), "both chart layers named: {error}");
    let held = get(&format!("http://{}/v2/charts/demo/manifests/0.1.0", registry.host), MANIFEST_TYPE).await;
    let now = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(held.unwrap())));
    assert!(error.contains(&now), "the manifest the tag names now: {error}");
    assert!(referrers(&registry.host, "charts/demo", &now).await.is_empty(), "nothing attached to it");
    assert_eq!(referrers(&registry.host, "charts/demo", &digest).await.len(), 1, "the applied manifest keeps its one");
}
