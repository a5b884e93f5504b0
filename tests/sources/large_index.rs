//! A chart repository the size of the large public ones (prometheus-community, Bitnami):
//! an `index.yaml` of 20,000 entries, about 15 MiB, one YAML document, served on loopback by
//! the test's chart repository. The real `gitward sync` reads it, takes the one chart it
//! wants, templates it with the real helm and applies it to the real apiserver; its peak
//! resident set while doing so (`VmHWM`) is printed and held under a sanity bound.

use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::common::charts::{ChartServer, sha256_hex};
use crate::common::{self, gitward};
use crate::sources::render::config_text;

/// Entries in the generated index, of which `DEMO_VERSIONS` are versions of `demo`.
const ENTRIES: usize = 20_000;
const DEMO_VERSIONS: usize = 400;

/// One index entry as `helm repo index` writes it (description, maintainers, annotations,
/// digest, dates), about 750 bytes.
fn entry(text: &mut String, name: &str, version: &str, digest: &str, url: &str) {
    write!(
        text,
        "  - annotations:\n      artifacthub.io/changes: |\n        - kind: changed\n          description: \
         Bump the image of {name} to {version}\n      artifacthub.io/license: Apache-2.0\n    apiVersion: v2\n    \
         appVersion: {version}\n    created: \"2024-05-01T12:00:00.000000000Z\"\n    description: The {name} chart of a generated repository index as large as a public one\n    \
         digest: {digest}\n    home: https://example.com/charts/{name}\n    icon: https://example.com/{name}.svg\n    \
         keywords:\n    - {name}\n    - monitoring\n    - generated\n    maintainers:\n    - email: \
         maintainers@example.com\n      name: maintainers\n      url: https://example.com\n    name: {name}\n    \
         sources:\n    - https://example.com/src/{name}\n    type: application\n    urls:\n    - {url}\n    \
         version: {version}\n"
    )
    .unwrap();
}

#[tokio::test]
async fn a_chart_from_an_index_of_twenty_thousand_entries_syncs() {
    let env = common::setup("large-index").await;
    let work = tempfile::tempdir().unwrap();
    let (server, archive) = ChartServer::with_demo(work.path(), "1.0.0");

    // The index helm wrote for the one archive, replaced by one of ENTRIES entries: the real
    // demo 1.0.0, DEMO_VERSIONS - 1 older demo versions and thousands of other charts (whose
    // archives are not served: only the chosen version's archive is downloaded).
    let mut text = String::from("apiVersion: v1\nentries:\n");
    text.push_str("  demo:\n");
    entry(&mut text, "demo", "1.0.0", &sha256_hex(&archive), "demo-1.0.0.tgz");
    for v in 1..DEMO_VERSIONS {
        entry(&mut text, "demo", &format!("0.{}.{}", v / 20, v % 20), &format!("{v:064x}"), "gone.tgz");
    }
    let others = ENTRIES - DEMO_VERSIONS;
    for c in 0..others / 20 {
        writeln!(text, "  chart-{c}:").unwrap();
        for v in 0..20 {
            let name = format!("chart-{c}");
            entry(&mut text, &name, &format!("1.{v}.0"), &format!("{:064x}", c * 100 + v), "gone.tgz");
        }
    }
    text.push_str("generated: \"2024-05-01T12:00:00.000000000Z\"\n");
    assert!(text.len() > 14 << 20, "the index is {} bytes", text.len());
    std::fs::write(server.dir.join("index.yaml"), &text).unwrap();
    eprintln!("index.yaml: {ENTRIES} entries, {} bytes", text.len());
    drop(text);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let unit = crate::common::charts::chart_unit("demo", &env.namespace, &server.url, "1.0.0");
    let allowed = crate::sources::charts::listed(&server.url);
    std::fs::write(&config, config_text(&dir.path().join("state"), &allowed, &unit)).unwrap();

    let run = gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stderr.contains("budget"), "{}", run.stderr);
    let cm = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace).get("shop-demo").await.unwrap();
    assert_eq!(cm.data.unwrap()["version"], "1.0.0", "the chart from the large index is applied");
    assert!(
        run.stderr.contains(&format!("demo@1.0.0@sha256:{}", sha256_hex(&archive))),
        "the revision names the archive's digest: {}",
        run.stderr
    );
    eprintln!("gitward sync of a {ENTRIES}-entry index: peak RSS {} KiB", run.peak_kib);
    // A sanity bound, not a measurement: the index's bytes are held once and the other
    // charts' entries are skipped, not collected.
    assert!(run.peak_kib < 256 * 1024, "peak RSS {} KiB", run.peak_kib);
}
