//! OCI artifacts as a source (`repo = "oci://host/path:tag"`) end to end: a tar+gzip of
//! manifests pushed in `flux push artifact`'s format by oci-client from the test to the real
//! CNCF distribution registry, unpacked, rendered (plain and kustomize) and applied to the real
//! apiserver.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use crate::common;
use crate::common::charts::Registry;
use crate::sources::render::{chain, config_text};

/// Flux's artifact media types (`flux push artifact`).
const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const FLUX_CONFIG: &str = "application/vnd.cncf.flux.config.v1+json";

/// What a tar entry is: a file with content, or a symbolic link to a target.
pub(crate) enum Item<'a> {
    File(&'a str, String),
    Link(&'a str, &'a str),
}

/// A tar+gzip of `items`, headers written raw so that paths like `../x` stay as given.
pub(crate) fn layer(items: &[Item<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for item in items {
        let mut header = tar::Header::new_gnu();
        let (path, kind, body, link) = match item {
            Item::File(path, body) => (*path, tar::EntryType::Regular, body.as_bytes(), ""),
            Item::Link(path, target) => (*path, tar::EntryType::Symlink, &b""[..], *target),
        };
        header.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
        header.as_gnu_mut().unwrap().linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(kind);
        header.set_mode(0o644);
        header.set_size(body.len() as u64);
        header.set_cksum();
        builder.append(&header, body).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// Pushes `layer` as a Flux artifact to `<host>/manifests/app:<tag>`; returns the manifest digest.
pub(crate) async fn push(host: &str, tag: &str, layer: Vec<u8>) -> String {
    let client = Client::new(ClientConfig { protocol: ClientProtocol::Http, ..ClientConfig::default() });
    let reference = Reference::with_tag(host.to_owned(), "manifests/app".to_owned(), tag.to_owned());
    let layers = [ImageLayer::new(layer, FLUX_LAYER.to_owned(), None)];
    let config = Config::new(b"{}".to_vec(), FLUX_CONFIG.to_owned(), None);
    let pushed = client.push(&reference, &layers, config, &RegistryAuth::Anonymous, None).await.expect("push");
    pushed.manifest_url.rsplit_once('/').unwrap().1.to_owned()
}

/// Manifests for a plain unit (`app/`) and a kustomize overlay (`overlay/` on `base/`), with
/// `value` in each ConfigMap.
fn manifests(value: &str) -> Vec<u8> {
    layer(&[
        Item::File("app/cm.yaml", common::cm("art-plain", value)),
        Item::File("base/cm.yaml", common::cm("art-kust", value)),
        Item::File("base/kustomization.yaml", "resources:\n- cm.yaml\n".into()),
        Item::File("overlay/kustomization.yaml", "namePrefix: k-\nresources:\n- ../base\n".into()),
    ])
}

pub(crate) fn unit(name: &str, url: &str, path: &str, namespace: &str) -> String {
    format!("[[sync]]\nname = \"{name}\"\nrepo = \"{url}\"\npath = \"{path}\"\nnamespace = \"{namespace}\"\n\n")
}

#[tokio::test]
async fn an_artifact_syncs_plain_and_kustomize_a_new_push_is_applied_and_an_outage_keeps_the_last_revision() {
    let env = common::setup("artifact").await;
    let registry = Registry::start().await;
    push(&registry.host, "v1", manifests("1")).await;
    let url = format!("oci://{}/manifests/app:v1", registry.host);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let units = unit("art-plain", &url, "app", &env.namespace) + &unit("art-kust", &url, "overlay", &env.namespace);
    let allowed = crate::sources::charts::listed(&format!("oci://{}/manifests", registry.host));
    std::fs::write(&config, config_text(&dir.path().join("state"), &allowed, &units)).unwrap();

    let first = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(common::cm_value(&env.client, &env.namespace, "art-plain").await.as_deref(), Some("1"));
    assert_eq!(
        common::cm_value(&env.client, &env.namespace, "k-art-kust").await.as_deref(),
        Some("1"),
        "the overlay rendered"
    );

    let digest = push(&registry.host, "v1", manifests("2")).await;
    let second = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(second.stderr.contains(&format!("v1@{digest}")), "the revision is the manifest digest: {}", second.stderr);
    assert_eq!(
        common::cm_value(&env.client, &env.namespace, "art-plain").await.as_deref(),
        Some("2"),
        "the new push applied"
    );
    assert_eq!(common::cm_value(&env.client, &env.namespace, "k-art-kust").await.as_deref(), Some("2"));

    drop(registry);
    let down = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(down.code, Some(2), "an unreachable registry fails the sync: {}", down.stderr);
    assert!(down.stderr.contains(&url), "the error names the URL: {}", down.stderr);
    assert_eq!(
        common::cm_value(&env.client, &env.namespace, "art-plain").await.as_deref(),
        Some("2"),
        "nothing changed"
    );
}

#[tokio::test]
async fn the_daemon_polls_an_artifact_tag_and_applies_a_new_push() {
    let env = common::setup("artifact-poll").await;
    let registry = Registry::start().await;
    push(&registry.host, "stable", manifests("1")).await;
    let url = format!("oci://{}/manifests/app:stable", registry.host);
    let work = tempfile::tempdir().unwrap();
    let allowed =
        format!("[render]\n{}", crate::sources::charts::listed(&format!("oci://{}/manifests", registry.host)));
    let daemon = common::polling_daemon(work.path(), &allowed, &unit("art", &url, "app", &env.namespace));
    let at = |want: &'static str| {
        common::cm_data_becomes(&env.client, &env.namespace, "art-plain", "value", want, Duration::from_secs(60))
    };
    assert!(at("1").await, "the artifact applied: {}", daemon.log_text());

    let digest = push(&registry.host, "stable", manifests("2")).await;
    assert!(at("2").await, "the poll found the new push: {}", daemon.log_text());
    // `sync complete` follows the apply by the record's write: the object can be live first.
    let named = || daemon.logged("sync complete").iter().any(|e| e.to_string().contains(&format!("stable@{digest}")));
    let logged = common::eventually(Duration::from_secs(30), || async { named() }).await;
    assert!(logged, "the sync names the new revision: {:?}", daemon.logged("sync complete"));
}

#[tokio::test]
async fn an_artifact_entry_leaving_the_tree_is_refused_by_name_and_nothing_is_applied() {
    let env = common::setup("artifact-escape").await;
    let registry = Registry::start().await;
    let state = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<Item<'_>>, &str); 2] = [
        ("dotdot", vec![Item::File("app/../../evil.yaml", common::cm("evil", "1"))], "app/../../evil.yaml"),
        ("link", vec![Item::Link("app/evil.yaml", "../../../etc/passwd")], "app/evil.yaml"),
    ];
    for (tag, mut items, named) in cases {
        items.insert(0, Item::File("app/cm.yaml", common::cm("art-plain", tag)));
        push(&registry.host, tag, layer(&items)).await;
        let url = format!("oci://{}/manifests/app:{tag}", registry.host);
        let name = format!("art-{tag}");
        let allowed = crate::sources::charts::listed(&format!("oci://{}", registry.host));
        let text = config_text(state.path(), &allowed, &unit(&name, &url, "app", &env.namespace));
        let config = gitward::config::Config::from_toml(&text, state.path(), "test.toml").expect("valid config");
        let mut engine = common::engine(&env.client, &config, &name).await;
        let error = chain(&engine.sync().await.expect_err("the artifact is refused"));
        assert!(error.contains(&format!("tar entry {named:?}")), "names the entry: {error}");
        assert!(error.contains(&url), "names the URL: {error}");
        assert_eq!(common::cm_value(&env.client, &env.namespace, "art-plain").await, None, "nothing applied");
    }
}

/// The `refs/artifacts/*` refs of a mirror, each the hex of a manifest digest.
fn artifact_refs(mirror: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["for-each-ref", "--format=%(refname)", "refs/artifacts/"])
        .current_dir(mirror)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut refs: Vec<String> = text.lines().map(|l| l.trim_start_matches("refs/artifacts/").to_owned()).collect();
    refs.sort();
    refs
}

/// A CI pushing a new artifact to one tag again and again, each synced: the mirror keeps the
/// refs of the last two revisions only, and the last one is applied.
#[tokio::test]
async fn fifty_pushed_artifacts_leave_the_refs_of_the_last_two() {
    let env = common::setup("artifact-gc").await;
    let registry = Registry::start().await;
    let state = tempfile::tempdir().unwrap();
    let url = format!("oci://{}/manifests/app:ci", registry.host);
    let allowed = crate::sources::charts::listed(&format!("oci://{}/manifests", registry.host));
    let text = config_text(state.path(), &allowed, &unit("art-gc", &url, "app", &env.namespace));
    let config = gitward::config::Config::from_toml(&text, state.path(), "test.toml").expect("valid config");
    let mut engine = common::engine(&env.client, &config, "art-gc").await;
    let mut digests = Vec::new();
    for build in 1..=50 {
        let value = build.to_string();
        digests.push(
            push(&registry.host, "ci", layer(&[Item::File("app/cm.yaml", common::cm("art-plain", &value))])).await,
        );
        let report = engine.sync().await.unwrap_or_else(|e| panic!("build {build}: {}", chain(&e)));
        assert!(report.revision.0.ends_with(digests.last().unwrap()), "build {build}: {}", report.revision.0);
    }
    assert_eq!(common::cm_value(&env.client, &env.namespace, "art-plain").await.as_deref(), Some("50"));
    let hex = |digest: &String| digest.trim_start_matches("sha256:").to_owned();
    let mut last_two = vec![hex(&digests[48]), hex(&digests[49])];
    last_two.sort();
    assert_eq!(artifact_refs(&state.path().join("mirrors/art-gc")), last_two, "only the last two revisions stay");
}
