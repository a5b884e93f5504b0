//! Cosign-signed OCI sources (`[sync.verify] cosign_public_key_file`): keys made and
//! manifests signed by the real `cosign` CLI (built by scripts/tools) in the real CNCF
//! distribution registry, with key-based signing and no transparency log, synced against the
//! real apiserver. A signed artifact or chart is applied; an unsigned one, one re-pushed to
//! the tag after signing, one signed by another key and one carrying a signature copied from
//! another digest are refused, and the cluster keeps the last good revision.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use crate::common;
use crate::common::charts::{Registry, package, tools_bin};
use crate::sources::render::{chain, config_text};
use crate::sources::signatures::sync_error;

const LIMIT: Duration = Duration::from_secs(120);

/// A cosign key pair made by `cosign generate-key-pair` in a directory of its own, with an
/// empty password.
struct CosignKey {
    dir: PathBuf,
}

impl CosignKey {
    fn new(parent: &Path, name: &str) -> Self {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        cosign(&dir, &["generate-key-pair"]);
        assert!(dir.join("cosign.pub").is_file() && dir.join("cosign.key").is_file());
        Self { dir }
    }

    fn public(&self) -> PathBuf {
        self.dir.join("cosign.pub")
    }

    /// `cosign sign --key` of `image` (`host/repository@sha256:…` or `:tag`) into the
    /// loopback registry: no transparency log, plain HTTP.
    fn sign(&self, image: &str) {
        let key = self.dir.join("cosign.key");
        let key = key.to_str().unwrap();
        cosign(&self.dir, &["sign", "--key", key, "--tlog-upload=false", "--allow-http-registry", "-y", image]);
    }
}

/// Runs the real cosign in `dir` with an empty environment but for its password (empty) and a
/// `HOME` of its own; panics with its stderr when it fails.
fn cosign(dir: &Path, args: &[&str]) -> String {
    let binary = tools_bin().join("cosign");
    assert!(binary.is_file(), "cosign not in {}: run scripts/tools first", binary.display());
    let out = Command::new(binary)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("COSIGN_PASSWORD", "")
        .output()
        .expect("cosign runs");
    assert!(out.status.success(), "cosign {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn client() -> Client {
    Client::new(ClientConfig { protocol: ClientProtocol::Http, ..ClientConfig::default() })
}

/// A tar+gzip holding `app/cm.yaml`, ConfigMap `signed` with `value`.
fn layer(value: &str) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let body = common::cm("signed", value);
    let mut header = tar::Header::new_gnu();
    header.set_path("app/cm.yaml").unwrap();
    header.set_mode(0o644);
    header.set_size(body.len() as u64);
    header.set_cksum();
    builder.append(&header, body.as_bytes()).unwrap();
    builder.into_inner().unwrap().finish().unwrap()
}

/// Pushes a Flux artifact whose ConfigMap holds `value` to `<host>/manifests/app:<tag>`;
/// returns the manifest digest.
async fn push(host: &str, tag: &str, value: &str) -> String {
    let reference = Reference::with_tag(host.to_owned(), "manifests/app".to_owned(), tag.to_owned());
    let layers = [ImageLayer::new(layer(value), "application/vnd.cncf.flux.content.v1.tar+gzip".to_owned(), None)];
    let config = Config::new(b"{}".to_vec(), "application/vnd.cncf.flux.config.v1+json".to_owned(), None);
    let pushed = client().push(&reference, &layers, config, &RegistryAuth::Anonymous, None).await.expect("push");
    pushed.manifest_url.rsplit_once('/').unwrap().1.to_owned()
}

/// Copies the signature manifest of digest `from` to the signature tag of digest `to`, as an
/// attacker with push rights but no key would.
async fn copy_signature(host: &str, from: &str, to: &str) {
    let tag = |digest: &str| format!("{}.sig", digest.replace(':', "-"));
    let client = client();
    let source = Reference::with_tag(host.to_owned(), "manifests/app".to_owned(), tag(from));
    let media = [oci_client::manifest::OCI_IMAGE_MEDIA_TYPE];
    let (body, _) = client.pull_manifest_raw(&source, &RegistryAuth::Anonymous, &media).await.expect("signature");
    let target = Reference::with_tag(host.to_owned(), "manifests/app".to_owned(), tag(to));
    let content_type = http::HeaderValue::from_static(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE);
    client.push_manifest_raw(&target, body.to_vec(), content_type).await.expect("push signature");
}

/// `gitward sync` of an artifact unit with a cosign key: the unsigned artifact is refused
/// (exit 2) and nothing applied; once `cosign sign` signed it, it is applied; the tag
/// re-pushed after signing, a signature by another key and a signature copied from the signed
/// digest are each refused naming the manifest and the reason, the ConfigMap keeping the
/// signed value.
#[tokio::test]
async fn an_oci_artifact_is_applied_only_when_cosign_signed_by_the_key() {
    let env = common::setup("cosign-artifact").await;
    let registry = Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    let trusted = CosignKey::new(dir.path(), "trusted");
    let stranger = CosignKey::new(dir.path(), "stranger");
    let url = format!("oci://{}/manifests/app:v1", registry.host);
    let unit = format!(
        "[[sync]]\nname = \"signed\"\nrepo = \"{url}\"\npath = \"app\"\nnamespace = \"{}\"\n[sync.verify]\n\
         cosign_public_key_file = \"{}\"\n",
        env.namespace,
        trusted.public().display()
    );
    let config = dir.path().join("gitward.toml");
    let listed = crate::sources::charts::listed(&format!("oci://{}", registry.host));
    std::fs::write(&config, config_text(&dir.path().join("state"), &listed, &unit)).unwrap();
    let current = || common::cm_data(&env.client, &env.namespace, "signed", "value");

    let unsigned = push(&registry.host, "v1", "1").await;
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(2), "an unsigned artifact is refused: {}", run.stderr);
    let error = sync_error(&run);
    let tag = format!("{}.sig", unsigned.replace(':', "-"));
    assert!(error.contains(&format!("manifest {unsigned} is not signed: no signature tag {tag}")), "{error}");
    assert!(error.contains(&trusted.public().display().to_string()), "names the key file: {error}");
    assert_eq!(current().await, None, "nothing applied");

    trusted.sign(&format!("{}/manifests/app@{unsigned}", registry.host));
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "the signed artifact is applied: {}", run.stderr);
    assert_eq!(current().await.as_deref(), Some("1"));
    let verified = common::log_events(&run.stderr, "revision verified").next().expect("a `revision verified` event");
    let signer =
        if verified["fields"]["signer"].is_null() { &verified["signer"] } else { &verified["fields"]["signer"] };
    let key = format!("cosign key {} (sha256:", trusted.public().display());
    assert!(signer.as_str().unwrap_or_default().starts_with(&key), "{verified}");
    let good = unsigned;

    let repushed = push(&registry.host, "v1", "2").await;
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(2), "the tag re-pushed after signing is refused: {}", run.stderr);
    assert!(sync_error(&run).contains(&format!("manifest {repushed} is not signed")), "{}", sync_error(&run));
    assert_eq!(current().await.as_deref(), Some("1"), "the last good revision stays applied");

    stranger.sign(&format!("{}/manifests/app@{repushed}", registry.host));
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(2), "another key's signature is refused: {}", run.stderr);
    let error = sync_error(&run);
    assert!(error.contains(&format!("manifest {repushed}: ")) && error.contains("none by the key in"), "{error}");
    assert_eq!(current().await.as_deref(), Some("1"));

    let forged = push(&registry.host, "v1", "3").await;
    copy_signature(&registry.host, &good, &forged).await;
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(2), "a signature of another digest is refused: {}", run.stderr);
    let error = sync_error(&run);
    assert!(error.contains(&format!("manifest {forged}: the signature by the key")), "{error}");
    assert!(error.contains(&format!("signs {good}, not it")), "{error}");
    assert_eq!(current().await.as_deref(), Some("1"));

    // Signed by the trusted key, the re-pushed tag is taken.
    trusted.sign(&format!("{}/manifests/app@{forged}", registry.host));
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(current().await.as_deref(), Some("3"));
}

/// A chart unit on an OCI registry with a cosign key: the chart `helm push`ed unsigned is
/// refused; signed by `cosign sign` (by tag, as a user would), it is installed; a newer
/// version pushed unsigned is refused and the signed version stays installed.
#[tokio::test]
async fn an_oci_chart_is_installed_only_when_cosign_signed_by_the_key() {
    let env = common::setup("cosign-chart").await;
    let registry = Registry::start().await;
    let work = tempfile::tempdir().unwrap();
    let key = CosignKey::new(work.path(), "key");
    let out = work.path().join("out");
    registry.push(work.path(), &package(work.path(), "demo", "0.1.0", &out), "charts");
    let url = format!("oci://{}/charts", registry.host);
    let unit = format!(
        "[[sync]]\nname = \"demo\"\nnamespace = \"{}\"\n[sync.helm]\nrepo_url = \"{url}\"\nchart = \"demo\"\n\
         release = \"shop\"\n[sync.verify]\ncosign_public_key_file = \"{}\"\n",
        env.namespace,
        key.public().display()
    );
    let state = tempfile::tempdir().unwrap();
    let listed = crate::sources::charts::listed(&format!("oci://{}", registry.host));
    let config =
        gitward::config::Config::from_toml(&config_text(state.path(), &listed, &unit), state.path(), "test.toml")
            .expect("valid config");
    let mut engine = common::engine(&env.client, &config, "demo").await;
    let installed = || common::cm_data(&env.client, &env.namespace, "shop-demo", "version");

    let error = chain(&engine.sync().await.expect_err("an unsigned chart is refused"));
    assert!(error.contains("revision demo@0.1.0@sha256:") && error.contains("is not signed"), "{error}");
    assert_eq!(installed().await, None, "nothing applied");

    key.sign(&format!("{}/charts/demo:0.1.0", registry.host));
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(report.revision.0.starts_with("demo@0.1.0@sha256:"), "{}", report.revision);
    assert_eq!(installed().await.as_deref(), Some("0.1.0"));

    registry.push(work.path(), &package(work.path(), "demo", "0.2.0", &out), "charts");
    let error = chain(&engine.sync().await.expect_err("an unsigned newer version is refused"));
    assert!(error.contains("revision demo@0.2.0@sha256:") && error.contains("is not signed"), "{error}");
    assert_eq!(installed().await.as_deref(), Some("0.1.0"), "the signed version stays installed");
}

/// The daemon polling a cosign-verified artifact tag: the signed push is applied; an unsigned
/// re-push of the tag is refused (`revision refused`, `failure="unsigned"`, the signed revision
/// `kept`, counted in `gitward_revisions_refused_total`) and the cluster keeps the signed
/// value; once that push is signed, the next poll applies it.
#[tokio::test]
async fn the_daemon_keeps_the_last_signed_artifact_and_counts_the_refusal() {
    let env = common::setup("cosign-daemon").await;
    let registry = Registry::start().await;
    let work = tempfile::tempdir().unwrap();
    let key = CosignKey::new(work.path(), "key");
    let first = push(&registry.host, "stable", "1").await;
    key.sign(&format!("{}/manifests/app@{first}", registry.host));
    let url = format!("oci://{}/manifests/app:stable", registry.host);
    let unit = format!(
        "[[sync]]\nname = \"art\"\nrepo = \"{url}\"\npath = \"app\"\nnamespace = \"{}\"\n[sync.verify]\n\
         cosign_public_key_file = \"{}\"\n",
        env.namespace,
        key.public().display()
    );
    let render = format!("[render]\n{}", crate::sources::charts::listed(&format!("oci://{}", registry.host)));
    let daemon = common::polling_daemon(work.path(), &render, &unit);
    let at = |want: &'static str| {
        common::cm_data_becomes(&env.client, &env.namespace, "signed", "value", want, Duration::from_secs(60))
    };
    assert!(at("1").await, "the signed artifact applied: {}", daemon.log_text());

    let unsigned = push(&registry.host, "stable", "2").await;
    let revision = format!("stable@{unsigned}");
    let refused = common::eventually(Duration::from_secs(60), || {
        let seen = daemon.logged("revision refused: not signed by a trusted key").iter().any(|e| {
            e["revision"] == revision.as_str() && e["failure"] == "unsigned" && e["kept"] == format!("stable@{first}")
        });
        async move { seen }
    })
    .await;
    assert!(refused, "no refusal of {revision}: {}", daemon.log_text());
    let counted = r#"unit="art",reason="unsigned""#;
    assert!(daemon.metric_sum("gitward_revisions_refused_total", &[counted]) >= 1.0, "{:?}", daemon.get("/metrics"));
    assert_eq!(
        common::cm_data(&env.client, &env.namespace, "signed", "value").await.as_deref(),
        Some("1"),
        "the signed value stays"
    );

    key.sign(&format!("{}/manifests/app@{unsigned}", registry.host));
    assert!(at("2").await, "the push, once signed, applied: {}", daemon.log_text());
}
