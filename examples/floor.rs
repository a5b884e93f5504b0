//! The benchmark's floor (benches/run): server-side applies every object of a directory of
//! YAML files with kube and gitward's default concurrency (32 requests in flight), and nothing
//! else: no plan, no hashing, no cache, no status. Objects of the previous run's inventory
//! (INVENTORY, one `apiVersion kind namespace name` per line) that are gone are deleted.
//!
//! Usage: `floor DIR INVENTORY [PASSES [PART_OF]]` (KUBECONFIG as for kubectl). Field manager
//! `floor`. PASSES (default 1) applies every object that many times in a row with the same
//! client, so that the last pass is a warm resync: discovery done, connections open (the
//! benchmark's "warm resync" scenario times it from the audit log). With PART_OF, each body is
//! the one gitward sends: the label `applyset.kubernetes.io/part-of: PART_OF` and the
//! annotation `gitward.dev/desired-hash` (gitward's own hash of the manifest, 64 hex) added,
//! once before the first pass, so the floor's requests cost the API server what gitward's do.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{ApiResource, Scope, pinned_kind};

type Key = (String, String, String, String);

fn read_dir(dir: &Path, out: &mut Vec<serde_json::Value>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            read_dir(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path)?;
            for doc in text.split("\n---\n") {
                let value: serde_json::Value = serde_saphyr::from_str(doc)?;
                if value.is_object() {
                    out.push(value);
                }
            }
        }
    }
    Ok(())
}

fn key(v: &serde_json::Value) -> Key {
    let s = |p: &str| v.pointer(p).and_then(|x| x.as_str()).unwrap_or_default().to_string();
    (s("/apiVersion"), s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

async fn resolve(
    client: &kube::Client,
    cache: &mut HashMap<(String, String), (ApiResource, bool)>,
    api_version: &str,
    kind: &str,
) -> anyhow::Result<(ApiResource, bool)> {
    let k = (api_version.to_string(), kind.to_string());
    if let Some(found) = cache.get(&k) {
        return Ok(found.clone());
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (ar, caps) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await?;
    let found = (ar, caps.scope == Scope::Namespaced);
    cache.insert(k, found.clone());
    Ok(found)
}

fn api(client: &kube::Client, ar: &ApiResource, namespaced: bool, ns: &str) -> Api<DynamicObject> {
    if namespaced { Api::namespaced_with(client.clone(), ns, ar) } else { Api::all_with(client.clone(), ar) }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, inventory) = (Path::new(&args[1]), Path::new(&args[2]));
    let client = kube::Client::try_default().await?;
    let mut objects = Vec::new();
    read_dir(dir, &mut objects)?;
    let mut cache = HashMap::new();
    let mut resolved = Vec::with_capacity(objects.len());
    for o in &objects {
        let (v, k, _, _) = key(o);
        resolved.push(resolve(&client, &mut cache, &v, &k).await?);
    }
    let passes: usize = args.get(3).map(|p| p.parse()).transpose()?.unwrap_or(1);
    if let Some(part_of) = args.get(4) {
        for o in &mut objects {
            let hash = gitward::manifest::desired_hash(o);
            let meta = o["metadata"].as_object_mut().expect("manifests have metadata");
            let labels = meta.entry("labels").or_insert_with(|| serde_json::json!({}));
            labels[gitward::cluster::inventory::PART_OF] = serde_json::json!(part_of);
            let annotations = meta.entry("annotations").or_insert_with(|| serde_json::json!({}));
            annotations[gitward::cluster::inventory::DESIRED_HASH] = serde_json::json!(hash);
        }
    }
    let params = PatchParams::apply("floor").force();
    for _ in 0..passes {
        let results: Vec<_> = futures::stream::iter(objects.iter().zip(&resolved))
            .map(|(o, (ar, namespaced))| {
                let (_, _, ns, name) = key(o);
                let api = api(&client, ar, *namespaced, &ns);
                let params = &params;
                async move { api.patch_metadata(&name, params, &Patch::Apply(o)).await }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        for r in results {
            r?;
        }
    }
    let now: BTreeSet<Key> = objects.iter().map(key).collect();
    let old = std::fs::read_to_string(inventory).unwrap_or_default();
    for line in old.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let k: Key = (f[0].into(), f[1].into(), f[2].into(), f[3].into());
        if !now.contains(&k) {
            let (ar, namespaced) = resolve(&client, &mut cache, &k.0, &k.1).await?;
            api(&client, &ar, namespaced, &k.2).delete(&k.3, &DeleteParams::default()).await?;
        }
    }
    let lines: Vec<String> = now.iter().map(|(a, b, c, d)| format!("{a}\t{b}\t{c}\t{d}")).collect();
    std::fs::write(inventory, lines.join("\n"))?;
    Ok(())
}
