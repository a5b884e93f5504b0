//! The members record past one object: a record longer than `record_chunk_bytes` split into
//! pieces beside the ApplySet parent, read whole, pruned from in every piece, and a write that
//! stops between pieces losing no member.

use std::collections::BTreeSet;
use std::time::Duration;

use gitward::changeset::Action;
use gitward::cluster::inventory::{CHUNKS_KEY, MEMBERS_KEY, MEMBERS_OF, record};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common;

/// `count` ConfigMaps named `<prefix>-NNNNN`, `per_file` documents a file.
fn write_config_maps(repo: &common::GitRepo, names: &[String], per_file: usize) {
    for (i, chunk) in names.chunks(per_file).enumerate() {
        let docs: Vec<String> = chunk.iter().map(|n| common::cm(n, "v")).collect();
        repo.write(&format!("cms/{i:04}.yaml"), &docs.join("---\n"));
    }
}

fn refs(namespace: &str, names: &[String]) -> BTreeSet<String> {
    names.iter().map(|n| format!("ConfigMap/{namespace}/{n}")).collect()
}

fn recorded(parent: &gitward::cluster::inventory::Parent) -> BTreeSet<String> {
    parent.contents.members.iter().map(ToString::to_string).collect()
}

/// The names of the pieces labelled with `id` in `namespace` (of the parent's kind `K`).
async fn pieces_on_server<K>(client: &kube::Client, namespace: &str, id: &str) -> BTreeSet<String>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let list = api.list_metadata(&ListParams::default().labels(&format!("{MEMBERS_OF}={id}"))).await.expect("list");
    list.items.into_iter().filter_map(|o| o.metadata.name).collect()
}

#[tokio::test]
async fn a_record_past_one_mib_is_split_read_whole_and_pruned_from() {
    let (env, _, repo) = common::setup_repo("record-mib").await;
    // 4,000 names of 240 characters: a record of about 1.1 MB, past one object's 1 MiB.
    let names: Vec<String> = (0..4000).map(|i| format!("{}-{i:05}", "n".repeat(234))).collect();
    write_config_maps(&repo, &names, 100);
    repo.commit_and_push("4,000 long names");
    let state = tempfile::tempdir().unwrap();
    let config = common::config(state.path(), &common::unit_toml("big", &repo.bare(), "", &env.namespace, ""));
    let mut engine = common::engine(&env.client, &config, "big").await;
    let report = engine.sync().await.expect("sync");
    assert_eq!(report.changes.counts().created, 4000, "{:?}", report.changes.counts());

    let parent = engine.inventory().read(&env.client).await.expect("read parent").expect("a parent");
    assert_eq!(recorded(&parent), refs(&env.namespace, &names), "the record read back is what was written");
    let text: usize =
        parent.contents.members.iter().map(|m| gitward::cluster::inventory::member_line(m).len() + 1).sum();
    assert!(text > 1 << 20, "the record is past 1 MiB: {text} bytes");
    assert!(parent.chunks.len() >= 2, "{:?}", parent.chunks);
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.namespace);
    let raw = secrets.get(&engine.inventory().parent.name).await.expect("parent");
    let data = raw.data.unwrap_or_default();
    assert!(data.contains_key(CHUNKS_KEY) && !data.contains_key(MEMBERS_KEY), "{:?}", data.keys());
    let listed: BTreeSet<String> = parent.chunks.iter().map(|c| c.name.clone()).collect();
    assert_eq!(pieces_on_server::<Secret>(&env.client, &env.namespace, &engine.inventory().id).await, listed);

    // Removing the first object of every piece from git prunes each of them.
    let mut gone = BTreeSet::new();
    for chunk in &parent.chunks {
        let piece = secrets.get(&chunk.name).await.expect("piece");
        let bytes = &piece.data.unwrap_or_default()[MEMBERS_KEY].0;
        let first = std::str::from_utf8(bytes).unwrap().lines().next().unwrap().rsplit('/').next().unwrap().to_string();
        gone.insert(first);
    }
    let kept: Vec<String> = names.iter().filter(|n| !gone.contains(*n)).cloned().collect();
    repo.remove("cms");
    write_config_maps(&repo, &kept, 100);
    repo.commit_and_push("one object of every piece leaves git");
    let report = engine.sync().await.expect("sync");
    let pruned = pruned_names(&report);
    assert_eq!(pruned, gone, "{:?}", report.changes.counts());
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    for name in &gone {
        assert!(cms.get_opt(name).await.unwrap().is_none(), "{name} is still live");
    }
    let fresh = gitward::cluster::inventory::Inventory::new(&config.unit("big").unwrap().inventory);
    let parent = fresh.read(&env.client).await.expect("read parent").expect("a parent");
    assert_eq!(recorded(&parent), refs(&env.namespace, &kept), "the narrowed record is read back whole");
    let listed: BTreeSet<String> = parent.chunks.iter().map(|c| c.name.clone()).collect();
    assert_eq!(pieces_on_server::<Secret>(&env.client, &env.namespace, &fresh.id).await, listed, "old pieces swept");
}

/// Registers a ValidatingAdmissionPolicy that refuses, in `namespace`, any piece of a members
/// record (a ConfigMap labelled [`MEMBERS_OF`]) holding a line with `word`; returns once it is
/// in force (a probe piece is refused).
async fn refuse_pieces_holding(client: &kube::Client, namespace: &str, word: &str) {
    let resource = |kind: &str, plural: &str| {
        kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            plural,
        )
    };
    let policies: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"));
    let bindings: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"),
    );
    let params = PatchParams::apply("record-test").force();
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": namespace},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "objectSelector": {"matchExpressions": [{"key": MEMBERS_OF, "operator": "Exists"}]},
            },
            "validations": [{"expression": format!("!has(object.data) || object.data.all(k, !object.data[k].contains('{word}'))"), "message": "piece refused by the test"}],
        },
    });
    policies.patch(namespace, &params, &Patch::Apply(&policy)).await.expect("policy");
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": namespace},
        "spec": {"policyName": namespace, "validationActions": ["Deny"]},
    });
    bindings.patch(namespace, &params, &Patch::Apply(&binding)).await.expect("binding");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let probe: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "probe", "labels": {MEMBERS_OF: "probe"}}, "data": {"x": word},
    }))
    .unwrap();
    let in_force = common::eventually(Duration::from_secs(30), || async {
        match cms.create(&PostParams { dry_run: true, ..Default::default() }, &probe).await {
            Err(kube::Error::Api(e)) => e.message.contains("piece refused by the test"),
            _ => false,
        }
    })
    .await;
    assert!(in_force, "the admission policy never came into force");
}

async fn allow_pieces(client: &kube::Client, namespace: &str) {
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding"),
        "validatingadmissionpolicybindings",
    );
    let bindings: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    bindings.delete(namespace, &DeleteParams::default()).await.expect("delete binding");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let probe: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "probe", "labels": {MEMBERS_OF: "probe"}}, "data": {"x": "victim"},
    }))
    .unwrap();
    let lifted = common::eventually(Duration::from_secs(30), || async {
        cms.create(&PostParams { dry_run: true, ..Default::default() }, &probe).await.is_ok()
    })
    .await;
    assert!(lifted, "the admission policy stayed in force");
}

#[tokio::test]
async fn a_write_stopped_between_pieces_loses_no_member() {
    let (env, _, repo) = common::setup_repo("record-crash").await;
    let names: Vec<String> = (0..150).map(|i| format!("cm-{i:03}")).collect();
    write_config_maps(&repo, &names, 10);
    repo.commit_and_push("150 objects");
    let state = tempfile::tempdir().unwrap();
    let extra = "[sync.inventory]\nkind = \"ConfigMap\"\nrecord_chunk_bytes = \"1KiB\"\n";
    let config = common::config(state.path(), &common::unit_toml("crash", &repo.bare(), "", &env.namespace, extra));
    let mut engine = common::engine(&env.client, &config, "crash").await;
    engine.sync().await.expect("first sync");
    let inventory = gitward::cluster::inventory::Inventory::new(&config.unit("crash").unwrap().inventory);
    let before = inventory.read(&env.client).await.expect("read").expect("a parent");
    assert_eq!(recorded(&before), refs(&env.namespace, &names));
    assert!(before.chunks.len() >= 3, "{:?}", before.chunks);

    // Two new objects: one in the first piece, one (refused by the policy) in the last. Pieces
    // are written in record order, so the first is written and the write stops at the last.
    refuse_pieces_holding(&env.client, &env.namespace, "victim").await;
    let mut next: Vec<String> = names.clone();
    next.extend(["cm-000a".to_string(), "cm-zz-victim".to_string()]);
    repo.remove("cms");
    write_config_maps(&repo, &next, 10);
    repo.commit_and_push("two new objects");
    let error = engine.sync().await.expect_err("the record cannot be widened");
    let message = gitward::telemetry::error_chain(&error);
    assert!(message.contains("members record piece") && message.contains("piece refused"), "{message}");
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    assert!(cms.get_opt("cm-000a").await.unwrap().is_none(), "nothing is applied before the record names it");
    let stopped = inventory.read(&env.client).await.expect("read").expect("a parent");
    assert_eq!(recorded(&stopped), refs(&env.namespace, &names), "every member still recorded");
    assert_eq!(stopped.chunks, before.chunks, "the parent still lists the pieces it had");
    let on_server = pieces_on_server::<ConfigMap>(&env.client, &env.namespace, &inventory.id).await;
    assert!(on_server.len() > before.chunks.len(), "a new piece was written before the write stopped");

    // A new process (the engine dropped, as after a crash) syncs once the policy is lifted, and
    // the first object of every piece leaves git at the same time: each is pruned.
    drop(engine);
    allow_pieces(&env.client, &env.namespace).await;
    let gone: BTreeSet<String> =
        inventory.read(&env.client).await.unwrap().unwrap().chunks.iter().map(|c| c.name.clone()).collect();
    let mut first_of_each = BTreeSet::new();
    for name in &gone {
        let piece = cms.get(name).await.expect("piece");
        let text = &piece.data.unwrap_or_default()[MEMBERS_KEY];
        first_of_each.insert(text.lines().next().unwrap().rsplit('/').next().unwrap().to_string());
    }
    let last: Vec<String> = next.iter().filter(|n| !first_of_each.contains(*n)).cloned().collect();
    repo.remove("cms");
    write_config_maps(&repo, &last, 10);
    repo.commit_and_push("one object of every piece leaves git");
    let mut engine = common::engine(&env.client, &config, "crash").await;
    let report = engine.sync().await.expect("sync after the crash");
    let actions = common::actions(&report);
    let pruned = pruned_names(&report);
    assert_eq!(pruned, first_of_each, "{actions:#?}");
    assert_eq!(actions[&format!("ConfigMap/{}/cm-000a", env.namespace)], "created");
    assert_eq!(actions[&format!("ConfigMap/{}/cm-zz-victim", env.namespace)], "created");
    let after = inventory.read(&env.client).await.expect("read").expect("a parent");
    assert_eq!(recorded(&after), refs(&env.namespace, &last));
    let listed: BTreeSet<String> = after.chunks.iter().map(|c| c.name.clone()).collect();
    assert_eq!(
        pieces_on_server::<ConfigMap>(&env.client, &env.namespace, &inventory.id).await,
        listed,
        "pieces of the stopped write and of the old record are swept"
    );
    assert_eq!(record::listing(&after.chunks).lines().count(), after.chunks.len());
}

/// The names of the objects `report` pruned.
fn pruned_names(report: &gitward::sync::Report) -> BTreeSet<String> {
    report.changes.entries.iter().filter(|e| e.action == Action::Pruned).map(|e| e.object.name.to_string()).collect()
}

/// Two writers of one chunked record (the daemon and a `gitward sync --allow-prune` beside
/// it): the first switches the parent and is slow to sweep; meanwhile the second reads the
/// parent the first left, writes its own pieces and switches to them. The first one's late
/// sweep deletes none of the second's pieces: the parent never lists a missing piece, and
/// the pieces the second no longer lists are swept by the next write.
#[tokio::test]
async fn a_late_sweep_leaves_the_pieces_a_later_write_lists() {
    use gitward::cluster::inventory::{Contents, Inventory, Parent};
    use gitward::object::{GroupKind, ObjectRef};
    let env = common::setup("record-sweep").await;
    let state = tempfile::tempdir().unwrap();
    let extra = "[sync.inventory]\nkind = \"ConfigMap\"\nrecord_chunk_bytes = \"1KiB\"\n";
    let unit = common::unit_toml("race", std::path::Path::new("/nowhere.git"), "", &env.namespace, extra);
    let config = common::config(state.path(), &unit);
    let inventory = Inventory::new(&config.unit("race").unwrap().inventory);
    let cm = GroupKind::from_api_version("v1", "ConfigMap");
    let contents = |names: &[String]| Contents {
        group_kinds: [cm.clone()].into(),
        namespaces: [gitward::object::Atom::new(&env.namespace)].into(),
        members: names.iter().map(|n| ObjectRef::new(cm.clone(), Some(env.namespace.as_str()), n.as_str())).collect(),
    };
    let names = |prefix: &str| -> Vec<String> { (0..150).map(|i| format!("{prefix}-{i:03}")).collect() };
    let no_extra: std::collections::BTreeMap<String, String> = Default::default();
    let write = |names: Vec<String>, previous: Option<Parent>| {
        let (inventory, client, contents, no_extra) = (&inventory, env.client.clone(), contents(&names), &no_extra);
        async move { inventory.write(&client, &contents, previous.as_ref(), "gitward", no_extra).await.expect("write") }
    };
    let first = write(names("a"), None).await;
    // Writer one switches to a new record, sharing no piece with the next.
    let one = write(names("b"), Some(first)).await;
    assert!(one.chunks.len() >= 3, "{:?}", one.chunks);
    // Writer two reads the parent writer one left and writes a record of its own.
    let read = inventory.read(&env.client).await.expect("read").expect("a parent");
    let two = write(names("c"), Some(read)).await;
    // Writer one's sweep, late: after writer two's switch.
    inventory.sweep(&env.client, &one).await;
    let now = inventory.read(&env.client).await.expect("the parent lists no missing piece").expect("a parent");
    assert_eq!(now.chunks, two.chunks);
    assert_eq!(recorded(&now), refs(&env.namespace, &names("c")));
    // The next write sweeps what no parent lists any more.
    let three = write(names("d"), Some(now)).await;
    let listed: BTreeSet<String> = three.chunks.iter().map(|c| c.name.clone()).collect();
    assert_eq!(pieces_on_server::<ConfigMap>(&env.client, &env.namespace, &inventory.id).await, listed);
}
