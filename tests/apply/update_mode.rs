//! `apply_mode = "update"` (hash-gated Get-Modify-Update with optimistic locking) and the
//! field-manager takeover, against the real apiserver and real git repositories.
//!
//! What each request was is checked twice: in the change set (`Entry::sent`, which knows the
//! patch type) and in the apiserver's audit log (which knows only the verb: Metadata-level
//! audit events do not record the request's content type).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use gitward::changeset::{Action, Request};
use gitward::config::Config;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

const PART_OF: &str = "applyset.kubernetes.io/part-of";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn cm(name: &str, data: &[(&str, &str)]) -> String {
    let mut s =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    app: demo\ndata:\n");
    for (k, v) in data {
        s.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    s
}

fn widget(group: &str, name: &str, size: u32) -> String {
    format!("apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  size: {size}\n  colour: blue\n")
}

/// Creates a namespaced CRD `widgets.<group>` (kind Widget, `spec` free-form) and waits until
/// it is Established. Returns the resource.
async fn widget_crd(client: &kube::Client, group: &str) -> ApiResource {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.expect("create CRD");
    let name = format!("widgets.{group}");
    let established = await_condition(crds, &name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(30), established).await.expect("CRD Established in time").unwrap();
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", "Widget"), "widgets")
}

fn entry<'a>(report: &'a gitward::sync::Report, name: &str) -> &'a gitward::changeset::Entry {
    report.changes.entries.iter().find(|e| e.object.name == name).unwrap_or_else(|| panic!("{name} not in change set"))
}

/// Audit events of `agent` after the first `skip`, counted by (verb, object name).
fn by_object(events: &[Value], skip: usize) -> BTreeMap<(String, String), usize> {
    let mut m = BTreeMap::new();
    for e in &events[skip..] {
        let key =
            (e["verb"].as_str().unwrap_or("").to_string(), e["objectRef"]["name"].as_str().unwrap_or("").to_string());
        *m.entry(key).or_default() += 1;
    }
    m
}

fn config_with(state: &std::path::Path, units: &[String]) -> Config {
    common::config(state, &units.concat())
}

/// What must be equal across apply modes: labels without gitward's ApplySet id and the
/// object's content (Service cluster IPs are allocated per object). The desired hash differs
/// with the namespace, which is part of the desired object.
fn comparable(mut v: Value) -> Value {
    let meta = v["metadata"].take();
    let mut labels = meta["labels"].clone();
    labels.as_object_mut().map(|l| l.remove(PART_OF));
    let obj = v.as_object_mut().unwrap();
    obj.remove("status");
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    json!({"labels": labels, "content": v})
}

async fn live(client: &kube::Client, ns: &str, widgets: &ApiResource) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let d: Api<Deployment> = Api::namespaced(client.clone(), ns);
    out.insert("deployment".into(), serde_json::to_value(d.get("guestbook-ui").await.unwrap()).unwrap());
    let s: Api<Service> = Api::namespaced(client.clone(), ns);
    out.insert("service".into(), serde_json::to_value(s.get("guestbook-ui").await.unwrap()).unwrap());
    let c: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in ["one", "two"] {
        out.insert(name.into(), serde_json::to_value(c.get(name).await.unwrap()).unwrap());
    }
    let w: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, widgets);
    out.insert("widget".into(), serde_json::to_value(w.get("w1").await.unwrap()).unwrap());
    out.into_iter().map(|(k, v)| (k, comparable(v))).collect()
}

async fn uids(client: &kube::Client, ns: &str) -> Vec<Option<String>> {
    let c: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let d: Api<Deployment> = Api::namespaced(client.clone(), ns);
    vec![
        c.get("one").await.unwrap().metadata.uid,
        c.get("two").await.unwrap().metadata.uid,
        d.get("guestbook-ui").await.unwrap().metadata.uid,
    ]
}

#[tokio::test]
async fn each_mode_gives_the_same_objects_and_switching_modes_keeps_them_and_orphans_nothing() {
    let env = common::setup("modes").await;
    let upd_ns = common::unique("modes-upd");
    common::create_namespace(&env.client, &upd_ns).await;
    let group = format!("{}.gitward.dev", env.namespace);
    let widgets = widget_crd(&env.client, &group).await;
    let repo = common::GitRepo::new();
    repo.copy_dir(&common::fixtures().join("argocd-example-apps/guestbook"), "guestbook");
    repo.write("config/one.yaml", &cm("one", &[("a", "1"), ("b", "2")]));
    repo.write("config/two.yaml", &cm("two", &[("c", "3")]));
    repo.push(&[("widget.yaml", &widget(&group, "w1", 3))], "guestbook, config, a widget");

    let state = tempfile::tempdir().unwrap();
    let ssa_unit = common::unit_toml("ssa", &repo.bare(), "", &env.namespace, "");
    let upd_unit =
        |mode: &str| common::unit_toml("upd", &repo.bare(), "", &upd_ns, &format!("apply_mode = \"{mode}\""));
    let config = config_with(state.path(), &[ssa_unit.clone(), upd_unit("update")]);
    let client = common::admin(&format!("{}-gitward", env.user_agent)).await;
    let mut ssa = common::engine(&client, &config, "ssa").await;
    let mut upd = common::engine(&client, &config, "upd").await;

    let r_ssa = ssa.sync().await.expect("ssa sync");
    let r_upd = upd.sync().await.expect("update sync");
    for r in [&r_ssa, &r_upd] {
        assert!(!r.changes.has_failures(), "{:#?}", common::actions(r));
        assert_eq!(r.changes.counts().created, 5, "{:#?}", common::actions(r));
    }
    assert!(r_upd.changes.entries.iter().all(|e| e.sent == [Request::Create]), "{:#?}", r_upd.changes.entries);
    assert!(r_ssa.changes.entries.iter().all(|e| e.sent == [Request::Apply]), "{:#?}", r_ssa.changes.entries);
    let (a, b) = (live(&env.client, &env.namespace, &widgets).await, live(&env.client, &upd_ns, &widgets).await);
    for (name, value) in &a {
        let mut other = b[name].clone();
        // The namespace is the one difference by construction.
        let ns_path = |v: &mut Value| v["content"].as_object_mut().map(|o| o.remove("metadata"));
        ns_path(&mut other);
        let mut mine = value.clone();
        ns_path(&mut mine);
        assert_eq!(mine, other, "{name} differs between server-side apply and update mode");
    }
    assert_eq!(a["one"]["content"]["data"], json!({"a": "1", "b": "2"}));

    // In update mode, a change to `one` adds a key (GET + PUT, owned by gitward as Update).
    let uids_before = uids(&env.client, &upd_ns).await;
    repo.push(&[("config/one.yaml", &cm("one", &[("a", "1"), ("b", "2"), ("extra", "x")]))], "one: extra");
    let r = upd.sync().await.expect("update sync");
    assert_eq!(entry(&r, "one").action, Action::Configured);
    assert_eq!(entry(&r, "one").sent, [Request::Get, Request::Update]);

    // Switch the unit to server-side apply while git drops `extra` and `b`: the objects stay
    // (same uids) and the fields written in update mode are taken over, so they really go.
    repo.push(&[("config/one.yaml", &cm("one", &[("a", "1")]))], "one: only a");
    drop(upd);
    let switched = config_with(state.path(), &[ssa_unit.clone(), upd_unit("server-side-apply")]);
    let mut upd = common::engine(&client, &switched, "upd").await;
    let r = upd.sync().await.expect("sync after switching to server-side apply");
    assert!(!r.changes.has_failures(), "{:#?}", common::actions(&r));
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &upd_ns);
    let data = configmaps.get("one").await.unwrap().data.unwrap();
    assert_eq!(data, BTreeMap::from([("a".into(), "1".into())]), "fields written in update mode are not orphaned");
    let one = entry(&r, "one");
    assert_eq!(one.action, Action::Configured);
    assert_eq!(one.sent, [Request::Apply, Request::JsonPatch, Request::Apply], "{one:?}");
    assert!(one.message.as_deref().unwrap_or("").contains("gitward (Update)"), "{one:?}");
    assert_eq!(uids(&env.client, &upd_ns).await, uids_before, "switching modes re-creates nothing");
    let again = upd.sync().await.expect("second server-side apply sync");
    assert_eq!(again.changes.counts().unchanged, 5, "{:#?}", common::actions(&again));
    assert!(again.changes.entries.iter().all(|e| e.sent == [Request::Apply]), "takeover happens once");

    // And the other way: the server-side applied unit switched to update mode keeps its objects.
    let uids_before = uids(&env.client, &env.namespace).await;
    drop(ssa);
    let to_update = common::unit_toml("ssa", &repo.bare(), "", &env.namespace, "apply_mode = \"update\"");
    let mut ssa = common::engine(&client, &config_with(state.path(), &[to_update]), "ssa").await;
    let r = ssa.sync().await.expect("sync after switching to update mode");
    assert!(!r.changes.has_failures(), "{:#?}", common::actions(&r));
    assert_eq!(entry(&r, "one").action, Action::Configured, "git changed it meanwhile");
    assert_eq!(entry(&r, "two").sent, [Request::StrategicMergePatch]);
    assert_eq!(entry(&r, "w1").sent, [Request::MergePatch]);
    assert_eq!(uids(&env.client, &env.namespace).await, uids_before);
}

#[tokio::test]
async fn a_one_file_change_reads_and_replaces_only_that_object() {
    let (env, _, repo) = common::setup_repo("one-file").await;
    repo.copy_dir(&common::fixtures().join("argocd-example-apps/guestbook"), "guestbook");
    for i in 0..5 {
        repo.write(&format!("config/cm{i}.yaml"), &cm(&format!("cm{i}"), &[("value", "1")]));
    }
    repo.commit_and_push("guestbook and five ConfigMaps");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "apply_mode = \"update\"");
    let (agent, client) = env.gitward_client().await;
    let mut engine = common::engine(&client, &common::config(state.path(), &unit), "app").await;
    let first = engine.sync().await.expect("first sync");
    assert_eq!(first.changes.counts().created, 7, "{:#?}", common::actions(&first));
    // The Deployment controller writes guestbook-ui after the first sync (its revision
    // annotation, then its status as the Pod comes up). Wait until it has done so and the
    // engine's watch has seen its last write, as a daemon's would between syncs: otherwise the
    // hash-gated patch's resourceVersion precondition meets that write and is read again.
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    let ui = gitward::object::ObjectRef::new(
        gitward::object::GroupKind::new("apps", "Deployment"),
        Some(env.namespace.as_str()),
        "guestbook-ui",
    );
    let settled = common::eventually(Duration::from_secs(120), || async {
        let live = deployments.get("guestbook-ui").await.unwrap();
        let status = live.status.clone().unwrap_or_default();
        let wanted = live.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let done = status.observed_generation == live.metadata.generation
            && status.available_replicas == Some(wanted)
            && status.updated_replicas == Some(wanted);
        let cached = engine.cache().get(&ui).map(|m| m.resource_version.clone());
        done && cached.is_some() && cached == live.metadata.resource_version
    })
    .await;
    assert!(settled, "the Deployment controller never finished with guestbook-ui, or the cache never saw it");

    repo.push(&[("config/cm3.yaml", &cm("cm3", &[("value", "2")]))], "cm3: value 2");
    let before = common::audit_events(&agent).len();
    let r = engine.sync().await.expect("sync");
    assert!(!r.changes.has_failures(), "{:#?}", common::actions(&r));
    assert_eq!(entry(&r, "cm3").action, Action::Configured);
    assert_eq!(entry(&r, "cm3").sent, [Request::Get, Request::Update]);
    for e in r.changes.entries.iter().filter(|e| e.object.name != "cm3") {
        assert_eq!(e.action, Action::Unchanged, "{e:?}");
        assert_eq!(e.sent, [Request::StrategicMergePatch], "{e:?}");
    }
    assert_eq!(r.changes.requests, 2 + 6);
    let events = common::audit_events_until(&agent, |e| e.len() >= before + 8).await;
    let counts = by_object(&events, before);
    let mut expected = BTreeMap::from([
        (("get".to_string(), "cm3".to_string()), 1),
        (("update".to_string(), "cm3".to_string()), 1),
        (("patch".to_string(), "guestbook-ui".to_string()), 2),
    ]);
    for i in [0, 1, 2, 4] {
        expected.insert(("patch".to_string(), format!("cm{i}")), 1);
    }
    assert_eq!(counts, expected, "requests of a one-file change in update mode");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    assert_eq!(configmaps.get("cm3").await.unwrap().data.unwrap()["value"], "2");
}

#[tokio::test]
async fn a_concurrent_change_is_a_conflict_that_loses_nothing_and_the_next_sync_converges() {
    let (env, _, repo) = common::setup_repo("conflict").await;
    for name in ["a", "b", "c", "d"] {
        repo.write(&format!("{name}.yaml"), &cm(name, &[("value", "1")]));
    }
    repo.commit_and_push("four ConfigMaps");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "apply_mode = \"update\"");
    let client = common::admin(&format!("{}-gitward", env.user_agent)).await;
    let mut engine = common::engine(&client, &common::config(state.path(), &unit), "app").await;
    engine.sync().await.expect("first sync");
    let a_ref = engine.cache().snapshot().keys().find(|k| k.name == "a").unwrap().clone();
    let stale = engine.cache().snapshot()[&a_ref].clone();

    // git drops d (a prune is due); another writer changes a; the cache has not seen it yet
    // (simulated: the watch is fast, so the stale entry is put back once it has).
    repo.remove("d.yaml");
    repo.commit_and_push("remove d");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let edit = json!({"data": {"theirs": "kept"}});
    let theirs = configmaps.patch("a", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    let their_rv = theirs.metadata.resource_version.unwrap();
    let seen = common::eventually(Duration::from_secs(10), || async {
        engine.cache().snapshot()[&a_ref].resource_version == their_rv
    })
    .await;
    assert!(seen, "the watch delivers the other writer's change");
    engine.cache().observe(a_ref.clone(), stale.clone());

    let r = engine.sync().await.expect("sync");
    let a = entry(&r, "a");
    assert_eq!(a.action, Action::Conflict, "{a:?}");
    let message = a.message.as_deref().unwrap();
    assert!(message.contains(&stale.resource_version) && message.contains(&their_rv), "{message}");
    assert_eq!(a.sent, [Request::StrategicMergePatch, Request::GetMetadata], "no write is retried");
    assert_eq!(entry(&r, "b").action, Action::Unchanged, "the rest of the sync goes on");
    assert!(r.changes.has_failures());
    assert_eq!(r.changes.counts().conflict, 1);
    assert_eq!(r.changes.counts().pruned, 0, "no prune after a conflict");
    assert!(configmaps.get_opt("d").await.unwrap().is_some(), "d was not pruned");
    assert_eq!(configmaps.get("a").await.unwrap().data.unwrap()["theirs"], "kept");

    let next = engine.sync().await.expect("next sync");
    assert!(!next.changes.has_failures(), "{:#?}", common::actions(&next));
    assert_eq!(entry(&next, "a").action, Action::Unchanged);
    assert_eq!(entry(&next, "d").action, Action::Pruned);
    let a_live = configmaps.get("a").await.unwrap();
    assert_eq!(a_live.data.unwrap()["theirs"], "kept", "the other writer's change is not lost");
    assert!(configmaps.get_opt("d").await.unwrap().is_none());
}

#[tokio::test]
async fn objects_first_applied_by_kubectl_are_taken_over_so_removed_fields_go() {
    let env = common::setup("takeover").await;
    let control_ns = common::unique("takeover-off");
    common::create_namespace(&env.client, &control_ns).await;
    let legacy = |data: &[(&str, &str)], extra_label: bool| {
        let mut s = cm("legacy", data);
        if extra_label {
            s = s.replace("    app: demo\n", "    app: demo\n    old: \"yes\"\n");
        }
        s
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("legacy.yaml");
    std::fs::write(&file, legacy(&[("a", "1"), ("b", "2")], true)).unwrap();
    for ns in [&env.namespace, &control_ns] {
        let out = common::kubectl(&["apply", "-n", ns, "-f", file.to_str().unwrap()]);
        assert!(out.status.success(), "kubectl apply: {}", String::from_utf8_lossy(&out.stderr));
    }

    let repo = common::GitRepo::new();
    repo.push(&[("legacy.yaml", &legacy(&[("a", "1"), ("b", "2")], true))], "the same ConfigMap, now in git");
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("on", &repo.bare(), "", &env.namespace, "")
        + &common::unit_toml("off", &repo.bare(), "", &control_ns, "takeover_managers = []");
    let config = common::config(state.path(), &units);
    let client = common::admin(&format!("{}-gitward", env.user_agent)).await;
    let mut on = common::engine(&client, &config, "on").await;
    let mut off = common::engine(&client, &config, "off").await;

    let r = on.sync().await.expect("sync");
    let e = entry(&r, "legacy");
    assert_eq!(e.action, Action::Adopted, "{e:?}");
    assert_eq!(e.sent, [Request::Apply, Request::JsonPatch, Request::Apply]);
    assert!(e.message.as_deref().unwrap().contains("kubectl-client-side-apply (Update)"), "{e:?}");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let live = configmaps.get("legacy").await.unwrap();
    assert!(!live.metadata.annotations.unwrap_or_default().contains_key(LAST_APPLIED), "last-applied dropped");
    let managers: Vec<_> = live.metadata.managed_fields.unwrap().into_iter().filter_map(|m| m.manager).collect();
    assert!(!managers.iter().any(|m| m == "kubectl-client-side-apply"), "{managers:?}");
    off.sync().await.expect("control sync");

    // git drops data.b and the label `old`: gone where gitward took over, orphaned where not.
    repo.push(&[("legacy.yaml", &legacy(&[("a", "1")], false))], "drop b and the old label");
    let r = on.sync().await.expect("sync");
    assert_eq!(entry(&r, "legacy").action, Action::Configured);
    assert_eq!(entry(&r, "legacy").sent, [Request::Apply]);
    let live = configmaps.get("legacy").await.unwrap();
    assert_eq!(live.data.unwrap(), BTreeMap::from([("a".into(), "1".into())]));
    assert!(!live.metadata.labels.unwrap().contains_key("old"));

    off.sync().await.expect("control sync");
    let control: Api<ConfigMap> = Api::namespaced(env.client.clone(), &control_ns);
    let orphaned = control.get("legacy").await.unwrap();
    assert_eq!(orphaned.data.unwrap().get("b").map(String::as_str), Some("2"), "without takeover b stays");
}

#[tokio::test]
async fn custom_resources_get_merge_patch_and_built_in_kinds_strategic_merge_patch() {
    let env = common::setup("patch-types").await;
    let group = format!("{}.gitward.dev", env.namespace);
    let widgets = widget_crd(&env.client, &group).await;
    let repo = common::GitRepo::new();
    repo.copy_dir(&common::fixtures().join("argocd-example-apps/guestbook"), "guestbook");
    repo.write("widget.yaml", &widget(&group, "w1", 3));
    repo.write(
        "applied.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  annotations:\n    gitward.dev/apply-mode: server-side-apply\ndata:\n  a: \"1\"\n",
    );
    repo.commit_and_push("a Deployment, a Service, a Widget, one object opting out of update mode");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "apply_mode = \"update\"");
    let (agent, client) = env.gitward_client().await;
    let mut engine = common::engine(&client, &common::config(state.path(), &unit), "app").await;
    let first = engine.sync().await.expect("first sync");
    assert_eq!(first.changes.counts().created, 4, "{:#?}", common::actions(&first));
    assert_eq!(entry(&first, "applied").sent, [Request::Apply], "the annotation opts one object out");

    let before = common::audit_events(&agent).len();
    let r = engine.sync().await.expect("sync");
    assert_eq!(r.changes.counts().unchanged, 4, "{:#?}", common::actions(&r));
    let w1 = entry(&r, "w1");
    assert_eq!(w1.sent, [Request::MergePatch]);
    assert_eq!(w1.sent[0].patch_type(), Some("application/merge-patch+json"));
    let deployment = r.changes.entries.iter().find(|e| e.object.gk.kind == "Deployment").unwrap();
    assert_eq!(deployment.sent, [Request::StrategicMergePatch]);
    assert_eq!(deployment.sent[0].patch_type(), Some("application/strategic-merge-patch+json"));
    assert_eq!(entry(&r, "applied").sent, [Request::Apply]);

    let events = common::audit_events_until(&agent, |e| e.len() >= before + 4).await;
    let counts = by_object(&events, before);
    let expected = BTreeMap::from([
        (("patch".to_string(), "applied".to_string()), 1),
        (("patch".to_string(), "guestbook-ui".to_string()), 2),
        (("patch".to_string(), "w1".to_string()), 1),
    ]);
    assert_eq!(counts, expected, "one patch per unchanged object, nothing else");
    let resources: Vec<_> = events[before..].iter().map(|e| e["objectRef"]["resource"].as_str().unwrap()).collect();
    assert!(resources.contains(&"widgets") && resources.contains(&"deployments"), "{resources:?}");

    // Why the custom resource needs merge patch: the apiserver refuses strategic merge patch
    // for CRD-defined kinds (415), and accepts it for the Deployment.
    let w: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &env.namespace, &widgets);
    let smp = json!({"metadata": {"labels": {"probe": "1"}}});
    let refused = w.patch("w1", &PatchParams::default(), &Patch::Strategic(&smp)).await.unwrap_err();
    assert!(matches!(&refused, kube::Error::Api(s) if s.code == 415), "{refused:?}");
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    deployments
        .patch("guestbook-ui", &PatchParams::default(), &Patch::Strategic(&smp))
        .await
        .expect("SMP on a Deployment");
}

fn pvc(label: &str, class: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  labels:\n    rev: \"{label}\"\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: {class}\n  resources:\n    requests:\n      storage: 1Gi\n"
    )
}

#[tokio::test]
async fn a_bound_pvc_in_update_mode_with_recreate_keeps_its_volume_and_is_never_deleted() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let (env, _, repo) = common::setup_repo("bound-pvc").await;
    repo.push(&[("pvc.yaml", &pvc("1", "fast"))], "a claim");
    let state = tempfile::tempdir().unwrap();
    let extra = "apply_mode = \"update\"\nrecreate_on_immutable = true";
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, extra);
    let mut engine = common::engine(&env.client, &common::config(state.path(), &unit), "app").await;
    let first = engine.sync().await.expect("first sync");
    assert_eq!(entry(&first, "data").action, Action::Created);

    // Bound as the PV controller would bind it: spec.volumeName, then status (by hand: the test
    // cluster runs no PersistentVolume controller, and its Nodes have no storage).
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), &env.namespace);
    let controller = PatchParams { field_manager: Some("pv-controller".into()), ..Default::default() };
    let bind = json!({"spec": {"volumeName": "pv-data"}});
    claims.patch("data", &controller, &Patch::Merge(&bind)).await.expect("bind");
    let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    claims.patch_status("data", &controller, &Patch::Merge(&bound)).await.expect("status");
    let uid = claims.get("data").await.unwrap().metadata.uid;

    // git changes a label: the claim is configured, its volume kept, never re-created.
    repo.push(&[("pvc.yaml", &pvc("2", "fast"))], "a label changes");
    let r = engine.sync().await.expect("sync");
    assert_eq!(entry(&r, "data").action, Action::Configured, "{:#?}", common::actions(&r));
    let live = claims.get("data").await.unwrap();
    assert_eq!(live.metadata.uid, uid, "the claim was not re-created");
    assert_eq!(live.spec.unwrap().volume_name.as_deref(), Some("pv-data"), "spec.volumeName kept");
    assert_eq!(live.metadata.labels.unwrap()["rev"], "2");

    // git changes an immutable field: refused, and with recreate on still never deleted.
    repo.push(&[("pvc.yaml", &pvc("3", "slow"))], "the storage class changes");
    let r = engine.sync().await.expect("sync");
    let e = entry(&r, "data");
    assert_eq!(e.action, Action::Failed, "{e:?}");
    assert!(e.message.as_deref().unwrap().contains("never re-created"), "{e:?}");
    assert!(!e.sent.contains(&Request::Delete), "{e:?}");
    let live = claims.get("data").await.unwrap();
    assert_eq!(live.metadata.uid, uid, "the claim was not re-created");
    assert_eq!(live.spec.unwrap().volume_name.as_deref(), Some("pv-data"));
}

#[tokio::test]
async fn a_post_that_finds_a_controllers_child_does_not_adopt_it() {
    let env = common::setup("no-adopt").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let owner = configmaps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap())
        .await
        .unwrap();
    let child = json!({"metadata": {"name": "child", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner", "uid": owner.metadata.uid, "controller": true}]}, "data": {"theirs": "1"}});
    configmaps.create(&PostParams::default(), &serde_json::from_value(child).unwrap()).await.unwrap();

    let repo = common::GitRepo::new();
    repo.write("child.yaml", &cm("child", &[("ours", "1")]));
    repo.commit_and_push("a ConfigMap of the same name as a controller's child");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "apply_mode = \"update\"");
    let mut engine = common::engine(&env.client, &common::config(state.path(), &unit), "app").await;
    let r = engine.sync().await.expect("sync");
    let e = entry(&r, "child");
    assert_eq!(e.action, Action::Failed, "{e:?}");
    assert!(e.message.as_deref().unwrap().contains("controller ownerReference"), "{e:?}");
    let live = configmaps.get("child").await.unwrap();
    assert_eq!(live.data.unwrap(), BTreeMap::from([("theirs".into(), "1".into())]), "left as the controller wrote it");
    assert!(!live.metadata.labels.unwrap_or_default().contains_key(PART_OF));
}

/// A 409 in `update` mode for a write the cache had not seen yet: a status write (the
/// Deployment controller's routine) is told from a change by one metadata read — the
/// generation and gitward's label and hash did not move — and the patch is sent again with the
/// fresh resourceVersion; a spec change (the generation moved) stays a conflict. It runs on
/// an apiserver of its own with no controllers (`--apiserver-only`): the status write must
/// come at a moment the test chooses, and the deployment controller's own writes, landing
/// after the stale cache entries are put back, would refresh them and end the scenario early.
#[tokio::test]
async fn a_status_write_the_cache_missed_is_sent_again_but_a_spec_change_stays_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_dir = dir.path().join("cluster");
    let _cluster = common::OwnCluster::start(&cluster_dir, common::free_port());
    let client = common::OwnCluster::client(&cluster_dir.join("kubeconfig")).await;
    let namespace = common::unique("status-409");
    common::create_namespace(&client, &namespace).await;
    let repo = common::GitRepo::new();
    for name in ["web", "api"] {
        repo.write(&format!("{name}.yaml"), &common::deployment(name, "nginx:1.0", 1));
    }
    repo.commit_and_push("two Deployments");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &namespace, "apply_mode = \"update\"");
    let mut engine = common::engine(&client, &common::config(state.path(), &unit), "app").await;
    engine.sync().await.expect("first sync");
    let member = |name: &str| engine.cache().snapshot().keys().find(|k| k.name == name).unwrap().clone();
    let (web, api) = (member("web"), member("api"));
    let stale_web = engine.cache().snapshot()[&web].clone();
    let stale_api = engine.cache().snapshot()[&api].clone();

    // Someone writes web's status and api's spec; the cache has not seen either yet (simulated:
    // the watch is fast, so the stale entries are put back once it has). By hand, as the
    // deployment controller would write it.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let params = PatchParams { field_manager: Some("controller".into()), ..Default::default() };
    let status = json!({"status": {"collisionCount": 1}});
    let web_rv =
        deployments.patch_status("web", &params, &Patch::Merge(&status)).await.unwrap().metadata.resource_version;
    let scale = json!({"spec": {"replicas": 3}});
    let api_rv = deployments.patch("api", &params, &Patch::Merge(&scale)).await.unwrap().metadata.resource_version;
    let seen = common::eventually(Duration::from_secs(10), || async {
        let now = engine.cache().snapshot();
        Some(&now[&web].resource_version) == web_rv.as_ref() && Some(&now[&api].resource_version) == api_rv.as_ref()
    })
    .await;
    assert!(seen, "the watch delivers both writes");
    engine.cache().observe(web.clone(), stale_web.clone());
    engine.cache().observe(api.clone(), stale_api.clone());

    let r = engine.sync().await.expect("sync");
    let w = entry(&r, "web");
    assert_eq!(w.action, Action::Unchanged, "{w:?}");
    let resent = [Request::StrategicMergePatch, Request::GetMetadata, Request::StrategicMergePatch];
    assert_eq!(w.sent, resent, "sent again after one read");
    let a = entry(&r, "api");
    assert_eq!(a.action, Action::Conflict, "{a:?}");
    assert_eq!(a.sent, [Request::StrategicMergePatch, Request::GetMetadata], "a spec change is not sent again");
    let message = a.message.as_deref().unwrap();
    assert!(message.contains(&stale_api.resource_version) && message.contains(api_rv.as_deref().unwrap()), "{message}");
    assert_eq!(r.changes.counts().conflict, 1);
    let live = deployments.get("web").await.unwrap();
    assert_eq!(live.status.unwrap().collision_count, Some(1), "the status write stays");
    assert_eq!(deployments.get("api").await.unwrap().spec.unwrap().replicas, Some(3), "nothing overwritten");
}
