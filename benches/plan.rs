//! Parse + hash + plan of 10,000 objects, the part of a sync that is gitward's own CPU before any
//! request is sent (the target: < 100 ms for a revision that changes one file).
//!
//! The workload is 100 files of 100 documents (ConfigMaps and Deployments over 10 namespaces).
//! - `cold`: an empty parse cache; every file read, every object built and hashed, planned
//!   against an empty cluster: a one-shot sync's first revision.
//! - `one file changed`: the daemon's next revision: the parse cache holds the previous tree,
//!   the previous desired objects are reused where their manifest came out of the cache
//!   unchanged, and the plan runs against live metadata that matches every desired hash.
//!
//! - `request bodies`: the 10,000 request bodies of a resync, spliced (`Desired::body`) and
//!   parsed and serialized (`Desired::parsed_body`, what each request did before 2026-11-26).
//!
//! Run: `cargo bench --bench plan` (criterion; its report goes to `target/criterion/`).
//! `cargo test --all-targets` runs each benchmark once, as a check that it still works.

use std::collections::{BTreeMap, HashMap};

use criterion::{Criterion, criterion_group, criterion_main};
use gitward::cluster::LiveMeta;
use gitward::config::ApplyMode;
use gitward::manifest::{Loaded, ParseCache};
use gitward::object::{GroupKind, ObjectRef};
use gitward::plan::{Desired, plan};
use gitward::source::TreeFile;
use gitward::sync::desired::{Built, Defaults, Resolved};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::discovery::ApiResource;
use sha2::{Digest, Sha256};

const FILES: usize = 100;
const PER_FILE: usize = 100;

fn document(file: usize, doc: usize, revision: usize) -> String {
    let ns = format!("bench-{}", (file * PER_FILE + doc) % 10);
    if doc.is_multiple_of(4) {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-{file}-{doc}\n  namespace: {ns}\n  labels: {{app: web-{file}-{doc}, tier: front}}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: web-{file}-{doc}}}\n  template:\n    metadata:\n      labels: {{app: web-{file}-{doc}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27.{revision}\n        ports: [{{containerPort: 8080}}]\n        resources: {{requests: {{cpu: 10m, memory: 16Mi}}}}\n"
        )
    } else {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf-{file}-{doc}\n  namespace: {ns}\ndata:\n  revision: \"{revision}\"\n  settings.yaml: |\n    level: info\n    replicas: 3\n    endpoint: http://svc-{file}.{ns}.svc:8080\n"
        )
    }
}

/// The tree's files: path, blob id (sha256 of the text, as git names blobs by content), text.
fn tree(changed: Option<usize>) -> Vec<(TreeFile, String)> {
    (0..FILES)
        .map(|f| {
            let revision = if changed == Some(f) { 1 } else { 0 };
            let text: String = (0..PER_FILE).map(|d| document(f, d, revision)).collect::<Vec<_>>().join("---\n");
            let oid = hex::encode(Sha256::digest(text.as_bytes()));
            (TreeFile { path: format!("apps/file-{f:03}.yaml"), oid, size: text.len() as u64 }, text)
        })
        .collect()
}

fn load(cache: &mut ParseCache, tree: &[(TreeFile, String)]) -> Loaded {
    let files: Vec<TreeFile> = tree.iter().map(|(f, _)| f.clone()).collect();
    let text: HashMap<&str, &str> = tree.iter().map(|(f, t)| (f.oid.as_str(), t.as_str())).collect();
    cache.load(&files, |f| Ok(text[f.oid.as_str()].as_bytes().to_vec())).expect("the workload parses")
}

/// What discovery would answer, without a cluster: both kinds are namespaced.
fn build_all(loaded: Loaded, previous: &[Desired], defaults: &Defaults) -> Vec<Desired> {
    let built = Built::new(previous);
    let configmap = std::sync::Arc::new(ApiResource::erase::<ConfigMap>(&()));
    let deployment = std::sync::Arc::new(ApiResource::erase::<Deployment>(&()));
    loaded
        .manifests
        .into_iter()
        .map(|m| {
            let resource = if m.gk.kind == "Deployment" { deployment.clone() } else { configmap.clone() };
            let object = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
            built.reuse_or_build(m, object, Resolved { resource, namespaced: true }, defaults).expect("builds")
        })
        .collect()
}

fn live(desired: &[Desired]) -> BTreeMap<ObjectRef, LiveMeta> {
    desired
        .iter()
        .map(|d| {
            let meta = LiveMeta {
                uid: "00000000-0000-0000-0000-000000000000".into(),
                resource_version: "1".into(),
                desired_hash: Some(d.hash.clone()),
                ..Default::default()
            };
            (d.object.clone(), meta)
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let defaults = Defaults {
        namespace: "default".into(),
        applyset_id: "applyset-bench-v1".into(),
        recreate: false,
        apply_mode: ApplyMode::ServerSideApply,
        ignore: std::sync::Arc::new([]),
    };
    let base = tree(None);
    let changed = tree(Some(0));
    let none = HashMap::new();
    assert_eq!(GroupKind::from_api_version("apps/v1", "Deployment").group, "apps");

    let mut group = c.benchmark_group("parse + hash + plan, 10,000 objects");
    group.sample_size(10);
    group.bench_function("cold", |b| {
        b.iter(|| {
            let mut cache = ParseCache::new();
            let desired = build_all(load(&mut cache, &base), &[], &defaults);
            let p = plan(&desired, &BTreeMap::new(), &none);
            assert_eq!(desired.len(), FILES * PER_FILE);
            p
        })
    });

    let mut cache = ParseCache::new();
    let previous = build_all(load(&mut cache, &base), &[], &defaults);
    let live = live(&previous);
    let mut flip = false;
    group.bench_function("one file changed", |b| {
        b.iter(|| {
            // Alternate between the two trees, so every iteration sees one changed file.
            flip = !flip;
            let loaded = load(&mut cache, if flip { &changed } else { &base });
            assert_eq!(cache.parsed_last_load(), 1);
            let desired = build_all(loaded, &previous, &defaults);
            plan(&desired, &live, &none)
        })
    });
    group.finish();

    // The bodies of one warm resync: spliced at offsets found when the objects were built, and
    // (what every request did before 2026-11-26) parsed and serialized.
    let mut bodies = c.benchmark_group("request bodies, 10,000 objects");
    bodies.sample_size(10);
    assert!(previous.iter().all(|d| d.splice.is_some()));
    assert!(previous.iter().all(|d| d.body().to_value() == d.parsed_body().to_value()));
    bodies.bench_function("spliced", |b| b.iter(|| previous.iter().map(|d| d.body().as_str().len()).sum::<usize>()));
    bodies.bench_function("parsed", |b| {
        b.iter(|| previous.iter().map(|d| d.parsed_body().as_str().len()).sum::<usize>())
    });
    bodies.finish();
}

criterion_group!(plan_benches, benches);
criterion_main!(plan_benches);
