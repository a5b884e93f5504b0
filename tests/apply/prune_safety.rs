//! Never delete what gitward does not own, each case against the real apiserver:
//! a Namespace leaving git with an object inside that is not a member, a copied object, an
//! operator's child with copied labels, a label removed by hand just before the delete, and
//! an ApplySet parent deleted by hand; the guard against pruning too much at once, and the
//! one-off `gitward sync --allow-prune` past it.

use crate::common;

use std::collections::HashMap;

use gitward::changeset::Action;
use gitward::cluster::inventory::{DESIRED_HASH, PART_OF};
use gitward::object::{GroupKind, ObjectRef};
use gitward::plan::{PruneStep, Stage};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolumeClaim, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

/// A unit over a fresh repository with ConfigMaps `a`..`d` (so that one prune stays under the
/// default max_prune_fraction) plus `files`, synced once.
struct Unit {
    env: common::TestEnv,
    repo: common::GitRepo,
    _state: tempfile::TempDir,
    engine: gitward::sync::Engine,
}

async fn unit(prefix: &str, files: &[(&str, String)]) -> Unit {
    let (env, _, repo) = common::setup_repo(prefix).await;
    for name in ["a", "b", "c", "d"] {
        repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    }
    for (path, content) in files {
        repo.write(path, content);
    }
    repo.commit_and_push("first");
    let (state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, "").await;
    let report = engine.sync().await.expect("first sync");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    Unit { env, repo, _state: state, engine }
}

impl Unit {
    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.env.client.clone(), &self.env.namespace)
    }

    /// Creates a copy of member `a` named `name` as `kubectl get -o yaml` + rename + create
    /// would: same labels and annotations (part-of, desired hash), no uid or resourceVersion;
    /// `owner` adds a controller ownerReference, as an operator's child would have.
    async fn copy_of_a(&self, name: &str, owner: Option<&ConfigMap>) {
        let a = self.configmaps().get("a").await.unwrap();
        let mut copy = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "labels": a.metadata.labels.clone(),
                "annotations": a.metadata.annotations.clone(),
            },
            "data": a.data.clone(),
        });
        if let Some(owner) = owner {
            copy["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
                "controller": true,
            }]);
        }
        let copy: ConfigMap = serde_json::from_value(copy).unwrap();
        assert!(copy.metadata.labels.as_ref().unwrap().contains_key(PART_OF));
        assert!(copy.metadata.annotations.as_ref().unwrap().contains_key(DESIRED_HASH));
        self.configmaps().create(&PostParams::default(), &copy).await.expect("create the copy");
    }

    /// Waits until the unit's cache holds `name` (the watch delivered it), so the next sync
    /// would see it as a labelled object.
    async fn cached(&self, name: &str) {
        let object =
            ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some(self.env.namespace.clone()), name);
        let seen = common::eventually(std::time::Duration::from_secs(10), || async {
            self.engine.cache().snapshot().contains_key(&object)
        })
        .await;
        assert!(seen, "{object} never reached the cache");
    }
}

#[tokio::test]
async fn namespace_leaving_git_with_a_pvc_inside_that_is_not_a_member_is_not_deleted() {
    let held = common::unique("held");
    let ns_yaml = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {held}\n");
    let mut u = unit("ns-cascade", &[("ns.yaml", ns_yaml)]).await;
    // A claim someone else made in that namespace: not a member of the unit.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(u.env.client.clone(), &held);
    let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}});
    pvcs.create(&PostParams::default(), &serde_json::from_value(claim).unwrap()).await.expect("create PVC");

    u.repo.remove("ns.yaml");
    u.repo.commit_and_push("the namespace leaves git");
    let report = u.engine.sync().await.expect("sync");
    let entry = report.changes.entries.iter().find(|e| e.object.name == held).expect("namespace entry");
    assert_eq!(entry.action, Action::Skipped, "{entry:?}");
    let msg = entry.message.as_deref().unwrap();
    assert!(
        msg.starts_with(&format!("not deleted: it holds 1 other object (PersistentVolumeClaim/{held}/data); ")),
        "{msg}"
    );
    assert!(msg.contains("gitward.dev/prune: cascade"), "{msg}");
    let namespaces: Api<Namespace> = Api::all(u.env.client.clone());
    let ns = namespaces.get(&held).await.expect("namespace still there");
    assert!(ns.metadata.deletion_timestamp.is_none(), "the namespace must not be deleted");
    assert!(pvcs.get_opt("data").await.unwrap().is_some());

    // Annotated for cascade by hand: the next sync prunes it.
    let cascade = json!({"metadata": {"annotations": {"gitward.dev/prune": "cascade"}}});
    namespaces.patch(&held, &PatchParams::default(), &Patch::Merge(&cascade)).await.unwrap();
    let report = u.engine.sync().await.expect("sync");
    let entry = report.changes.entries.iter().find(|e| e.object.name == held).expect("namespace entry");
    assert_eq!(entry.action, Action::Pruned, "{entry:?}");
    let gone = namespaces.get_opt(&held).await.unwrap().is_none_or(|n| n.metadata.deletion_timestamp.is_some());
    assert!(gone, "annotated cascade: the namespace is deleted");
}

#[tokio::test]
async fn a_copied_object_with_the_part_of_label_is_not_pruned() {
    let mut u = unit("copy", &[]).await;
    u.copy_of_a("a-copy", None).await;
    u.cached("a-copy").await;
    let report = u.engine.sync().await.expect("sync");
    assert_eq!(report.changes.counts().pruned, 0, "{:#?}", common::actions(&report));
    assert!(u.configmaps().get_opt("a-copy").await.unwrap().is_some(), "the copy must not be pruned");
    let (object, reason) = report.changes.not_members.iter().find(|(o, _)| o.name == "a-copy").expect("reported");
    assert!(reason.contains("not recorded"), "{object}: {reason}");
}

#[tokio::test]
async fn an_operator_child_with_copied_labels_is_not_pruned() {
    let mut u = unit("child", &[]).await;
    let owner = u.configmaps().get("b").await.unwrap();
    u.copy_of_a("a-child", Some(&owner)).await;
    u.cached("a-child").await;
    let report = u.engine.sync().await.expect("sync");
    assert_eq!(report.changes.counts().pruned, 0, "{:#?}", common::actions(&report));
    assert!(u.configmaps().get_opt("a-child").await.unwrap().is_some(), "the child must not be pruned");
    let (_, reason) = report.changes.not_members.iter().find(|(o, _)| o.name == "a-child").expect("reported");
    assert!(reason.contains("controller ownerReference"), "{reason}");
}

#[tokio::test]
async fn a_member_whose_label_was_removed_just_before_the_delete_is_not_deleted() {
    let u = unit("relabel", &[("go.yaml", common::cm("go", "1"))]).await;
    let object = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some(u.env.namespace.clone()), "go");
    // The prune was planned from the cache...
    let uid = u.engine.cache().snapshot()[&object].uid.clone();
    let step = PruneStep { object: object.clone(), uid, stage: Stage::Configuration };
    // ...then someone takes the object over by removing gitward's label, before the delete.
    let unlabel = json!({"metadata": {"labels": {PART_OF: null}}});
    u.configmaps().patch("go", &PatchParams::default(), &Patch::Merge(&unlabel)).await.unwrap();
    let resources =
        HashMap::from([(object.gk.clone(), (std::sync::Arc::new(ApiResource::erase::<ConfigMap>(&())), true))]);
    let ctx = gitward::prune::Context {
        client: &u.env.client,
        resources: &resources,
        cache: u.engine.cache(),
        applyset_id: &u.engine.inventory().id,
        fence: &gitward::cluster::fence::Fence::unfenced(),
    };
    let changes = gitward::prune::prune(&ctx, &[step]).await;
    let entry = changes.get(&object).expect("entry");
    assert_eq!(entry.action, Action::Skipped, "{entry:?}");
    assert!(entry.message.as_deref().unwrap().contains(PART_OF), "{entry:?}");
    assert!(u.configmaps().get_opt("go").await.unwrap().is_some(), "an object no longer labelled must survive");
}

#[tokio::test]
async fn an_applyset_parent_deleted_by_hand_is_recreated_at_the_next_sync() {
    let mut u = unit("parent", &[]).await;
    let parent = u.engine.inventory().parent.clone();
    let secrets: Api<Secret> = Api::namespaced(u.env.client.clone(), parent.namespace.as_deref().unwrap());
    secrets.delete(&parent.name, &DeleteParams::default()).await.expect("delete the parent");
    // The engine learns of it from its watch of the parent (no read on every sync): the next
    // sync after the watch delivered the delete re-creates it. Bounded liveness loop.
    let mut recreated = false;
    for _ in 0..50 {
        let report = u.engine.sync().await.expect("sync");
        assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
        if secrets.get_opt(&parent.name).await.unwrap().is_some() {
            recreated = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(recreated, "the parent is re-created");
    let recreated = secrets.get(&parent.name).await.unwrap();
    let annotations = recreated.metadata.annotations.unwrap();
    assert_eq!(annotations["applyset.kubernetes.io/contains-group-kinds"], "ConfigMap");
    let record = recreated.data.unwrap()["gitward.dev-members"].clone();
    let record = String::from_utf8(record.0).unwrap();
    assert_eq!(record.lines().count(), 4, "{record}");
}

#[tokio::test]
async fn a_manifest_turned_into_a_symbolic_link_blocks_the_prune() {
    let mut u = unit("symlink", &[("e.yaml", common::cm("e", "1"))]).await;
    // e.yaml becomes a link to a file gitward does not read: its object must not be pruned.
    u.repo.write("store/e.txt", &common::cm("e", "1"));
    std::fs::remove_file(u.repo.work().join("e.yaml")).unwrap();
    std::os::unix::fs::symlink("store/e.txt", u.repo.work().join("e.yaml")).unwrap();
    u.repo.commit_and_push("e.yaml is now a symbolic link");
    let report = u.engine.sync().await.expect("sync");
    assert_eq!(report.changes.counts().pruned, 0, "{:#?}", common::actions(&report));
    let refused = report.changes.prune_refused.as_deref().expect("prune refused");
    assert!(refused.contains("e.yaml") && refused.contains("read only in part"), "{refused}");
    assert!(u.configmaps().get_opt("e").await.unwrap().is_some(), "e must not be pruned");
    assert!(report.skipped_files.iter().any(|s| s.file == "e.yaml"), "{:?}", report.skipped_files);
}

fn gadget_crd(group: &str, served: bool) -> serde_json::Value {
    let mut crd = common::crd(group, "Gadget", "gadgets");
    crd["spec"]["versions"][0]["served"] = json!(served);
    crd
}

#[tokio::test]
async fn a_member_of_a_crd_version_no_longer_served_is_kept_and_pruned_once_served_again() {
    let env_probe = common::setup("unserved-crd").await;
    let group = format!("{}.gitward.dev", env_probe.namespace);
    let crd_api = common::install_crd(&env_probe.client, "test-crd-owner", gadget_crd(&group, true)).await;
    let apply = PatchParams::apply("test-crd-owner").force();
    let crd_name = format!("gadgets.{group}");

    let gadget = format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\n");
    let mut u = unit("unserved", &[("g1.yaml", gadget)]).await;
    let gadgets =
        ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let gadget_api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(u.env.client.clone(), &u.env.namespace, &gadgets);
    assert!(gadget_api.get_opt("g1").await.unwrap().is_some());

    // The CRD stops serving its only version, and g1 leaves git: it is not counted pruned and
    // its kind stays in the inventory (else it would never be pruned once served again).
    crd_api.patch(&crd_name, &apply, &Patch::Apply(gadget_crd(&group, false))).await.expect("stop serving");
    let unserved = common::eventually(std::time::Duration::from_secs(20), || async {
        kube::discovery::oneshot::pinned_group(&u.env.client, &format!("{group}/v1").parse().unwrap()).await.is_err()
    })
    .await;
    assert!(unserved, "the version is no longer served");
    u.repo.remove("g1.yaml");
    u.repo.commit_and_push("g1 leaves git");
    let report = u.engine.sync().await.expect("sync");
    assert_eq!(report.changes.counts().pruned, 0, "{:#?}", common::actions(&report));
    let parent = u.engine.inventory().parent.clone();
    let secrets: Api<Secret> = Api::namespaced(u.env.client.clone(), parent.namespace.as_deref().unwrap());
    let kinds = secrets.get(&parent.name).await.unwrap().metadata.annotations.unwrap()
        ["applyset.kubernetes.io/contains-group-kinds"]
        .clone();
    assert!(kinds.contains(&format!("Gadget.{group}")), "{kinds}");

    // Served again: the next sync prunes it.
    crd_api.patch(&crd_name, &apply, &Patch::Apply(gadget_crd(&group, true))).await.expect("serve again");
    let mut pruned = false;
    for _ in 0..50 {
        let report = u.engine.sync().await.expect("sync");
        if report.changes.entries.iter().any(|e| e.object.name == "g1" && e.action == Action::Pruned) {
            pruned = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(pruned, "g1 is pruned once its kind is served again");
    assert!(gadget_api.get_opt("g1").await.unwrap().is_none());
}

#[tokio::test]
async fn an_invalid_apply_mode_on_a_pending_custom_resource_stops_the_revision_before_its_crd_is_applied() {
    let env = common::setup("pending-mode").await;
    let group = format!("{}.gitward.dev", env.namespace);
    let repo = common::GitRepo::new();
    let crd = serde_json::to_string(&gadget_crd(&group, true)).unwrap();
    repo.write("crd.json", &crd);
    repo.write(
        "gadget.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\n  annotations:\n    gitward.dev/apply-mode: replace\n"
        ),
    );
    repo.commit_and_push("a CRD and a custom resource with a bad apply mode");
    let (_state, mut engine) = common::app_engine(&env.client, &repo, &env.namespace, "").await;
    let err = engine.sync().await.expect_err("a bad annotation stops the revision");
    let text = err.to_string();
    assert!(text.contains("gadget.yaml") && text.contains("gitward.dev/apply-mode"), "{text}");
    let crds = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crd_api: Api<kube::api::DynamicObject> = Api::all_with(env.client.clone(), &crds);
    assert!(crd_api.get_opt(&format!("gadgets.{group}")).await.unwrap().is_none(), "nothing was applied");
}

#[tokio::test]
async fn a_tree_deeper_than_the_cap_is_skipped_and_blocks_the_prune() {
    let mut u = unit("deep", &[("e.yaml", common::cm("e", "1"))]).await;
    let deep: String = (0..=gitward::source::MAX_TREE_DEPTH).map(|i| format!("d{i}/")).collect();
    u.repo.write(&format!("{deep}e.yaml"), &common::cm("e", "1"));
    u.repo.remove("e.yaml");
    u.repo.commit_and_push("e moves very deep");
    let report = u.engine.sync().await.expect("sync");
    assert!(report.skipped_files.iter().any(|s| s.reason.contains("directory levels")), "{:?}", report.skipped_files);
    assert_eq!(report.changes.counts().pruned, 0, "{:#?}", common::actions(&report));
    assert!(u.configmaps().get_opt("e").await.unwrap().is_some());
}

#[tokio::test]
async fn two_writers_of_one_applyset_parent_never_narrow_away_each_others_kinds() {
    let env = common::setup("two-writers").await;
    let (repo_a, repo_b) = (common::GitRepo::new(), common::GitRepo::new());
    repo_a.push(&[("a.yaml", &common::cm("a", "1"))], "a");
    repo_b.push(&[("s.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s1\nstringData:\n  k: v\n")], "s1");
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The same unit (same ApplySet parent) run from two places, neither pruning.
    let config_a =
        common::config(state_a.path(), &common::unit_toml("app", &repo_a.bare(), "", &env.namespace, "prune = false"));
    let config_b =
        common::config(state_b.path(), &common::unit_toml("app", &repo_b.bare(), "", &env.namespace, "prune = false"));
    let mut a = common::engine(&env.client, &config_a, "app").await;
    let mut b = common::engine(&env.client, &config_b, "app").await;
    a.sync().await.expect("a syncs");
    b.sync().await.expect("b syncs");
    // a knows the parent as it wrote it; b has written it since. a's next widen must keep b's.
    repo_a.push(&[("e.yaml", &common::cm("e", "1"))], "e");
    let report = a.sync().await.expect("a syncs again");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    let parent = a.inventory().parent.clone();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), parent.namespace.as_deref().unwrap());
    let live = secrets.get(&parent.name).await.unwrap();
    let kinds = live.metadata.annotations.unwrap()["applyset.kubernetes.io/contains-group-kinds"].clone();
    assert_eq!(kinds, "ConfigMap,Secret", "b's kind survives a's write");
    let record = String::from_utf8(live.data.unwrap()["gitward.dev-members"].0.clone()).unwrap();
    let ns = &env.namespace;
    assert_eq!(record, format!("ConfigMap/{ns}/a\nConfigMap/{ns}/e\nSecret/{ns}/s1\n"));
}

#[tokio::test]
async fn no_prune_while_a_watched_kind_has_had_a_watch_error_since_its_last_list() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let env = common::setup("watch-error").await;
    let group = format!("{}.gitward.dev", env.namespace);
    let crd_name = format!("gadgets.{group}");
    let owner = PatchParams::apply("test-crd-owner").force();
    let crd_api = common::install_crd(&env.client, "test-crd-owner", gadget_crd(&group, true)).await;

    // The limited identity may do everything gitward needs with these gadgets and Secrets.
    let name = env.namespace.clone();
    let all = ["get", "list", "watch", "create", "patch", "update", "delete"];
    let role = |verbs: &[&str]| -> ClusterRole {
        serde_json::from_value(json!({"metadata": {"name": name},
            "rules": [{"apiGroups": [group], "resources": ["gadgets"], "verbs": verbs}]}))
        .unwrap()
    };
    let roles: Api<ClusterRole> = Api::all(env.client.clone());
    roles.create(&PostParams::default(), &role(&all)).await.unwrap();
    common::bind_limited(&env.client, &name).await;

    let repo = common::GitRepo::new();
    for i in 1..=5 {
        repo.write(&format!("g{i}.yaml"), &format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g{i}\n"));
    }
    repo.commit_and_push("five gadgets");
    let state = tempfile::tempdir().unwrap();
    let config = common::config(state.path(), &common::unit_toml("app", &repo.bare(), "", &env.namespace, ""));
    let limited = common::limited("gitward-test-limited-watch").await;
    let mut engine = common::engine(&limited, &config, "app").await;
    let first = engine.sync().await.expect("first sync");
    assert_eq!(first.changes.counts().created, 5, "{:#?}", common::actions(&first));

    // List and watch are revoked; a change of the CRD ends its open watches, and the watch,
    // restarting, now fails: the cache can no longer be trusted.
    roles.replace(&name, &PostParams::default(), &role(&["get", "create", "patch", "update", "delete"])).await.unwrap();
    let mut crd = gadget_crd(&group, true);
    crd["spec"]["versions"][0]["additionalPrinterColumns"] =
        json!([{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]);
    crd_api.patch(&crd_name, &owner, &Patch::Apply(crd)).await.expect("change the CRD");
    let stale =
        common::eventually(std::time::Duration::from_secs(30), || async { !engine.cache().stale_kinds().is_empty() })
            .await;
    assert!(stale, "the watch never failed");

    repo.remove("g5.yaml");
    repo.commit_and_push("g5 leaves git");
    let report = engine.sync().await.expect("sync");
    assert_eq!(report.changes.counts().pruned, 0, "{:#?}", common::actions(&report));
    let refused = report.changes.prune_refused.as_deref().expect("prune refused");
    assert!(refused.contains("cannot be trusted"), "{refused}");
    let gadgets =
        ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let admin_gadgets: Api<kube::api::DynamicObject> = Api::namespaced_with(env.client.clone(), &name, &gadgets);
    assert!(admin_gadgets.get_opt("g5").await.unwrap().is_some(), "g5 must not be pruned from a stale cache");
}

#[tokio::test]
async fn a_crd_leaving_git_while_custom_resources_that_are_not_members_exist_is_not_deleted() {
    let env_group = common::unique("crd-cascade");
    let group = format!("{env_group}.gitward.dev");
    let crd = serde_json::to_string(&gadget_crd(&group, true)).unwrap();
    let mut u = unit("crd-cascade", &[("crd.json", crd)]).await;
    // Someone else's custom resource of that kind.
    let gadgets =
        ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(u.env.client.clone(), &u.env.namespace, &gadgets);
    let theirs: kube::api::DynamicObject = serde_json::from_value(
        json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget", "metadata": {"name": "theirs"}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &theirs).await.expect("create their gadget");

    u.repo.remove("crd.json");
    u.repo.commit_and_push("the CRD leaves git");
    let report = u.engine.sync().await.expect("sync");
    let entry = report.changes.entries.iter().find(|e| e.object.gk.kind == "CustomResourceDefinition").expect("entry");
    assert_eq!(entry.action, Action::Skipped, "{entry:?}");
    let msg = entry.message.as_deref().unwrap();
    let theirs = format!("not deleted: it defines 1 other object (Gadget/{}/theirs); ", u.env.namespace);
    assert!(msg.starts_with(&theirs), "{msg}");
    assert!(api.get_opt("theirs").await.unwrap().is_some(), "their custom resource must survive");
}

#[tokio::test]
async fn members_of_a_deleted_crd_leave_the_inventory_once_it_is_confirmed_gone() {
    let env_probe = common::setup("gone-crd").await;
    let group = format!("{}.gitward.dev", env_probe.namespace);
    let crd_name = format!("gadgets.{group}");
    let crd_api = common::install_crd(&env_probe.client, "test-crd-owner", gadget_crd(&group, true)).await;
    let gadget = format!("apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\n");
    let mut u = unit("gone-crd", &[("g1.yaml", gadget)]).await;

    // The CRD is deleted (its custom resources with it) and g1 leaves git.
    crd_api.delete(&crd_name, &DeleteParams::default()).await.expect("delete CRD");
    let deleted = common::eventually(std::time::Duration::from_secs(30), || async {
        crd_api.get_opt(&crd_name).await.unwrap().is_none()
    })
    .await;
    assert!(deleted, "CRD deleted");
    u.repo.remove("g1.yaml");
    u.repo.commit_and_push("g1 leaves git");
    let report = u.engine.sync().await.expect("sync");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    let parent = u.engine.inventory().parent.clone();
    let secrets: Api<Secret> = Api::namespaced(u.env.client.clone(), parent.namespace.as_deref().unwrap());
    let live = secrets.get(&parent.name).await.unwrap();
    let kinds = live.metadata.annotations.unwrap()["applyset.kubernetes.io/contains-group-kinds"].clone();
    assert_eq!(kinds, "ConfigMap", "the kind of a confirmed-gone CRD is narrowed away");
    let record = String::from_utf8(live.data.unwrap()["gitward.dev-members"].0.clone()).unwrap();
    assert!(!record.contains("Gadget"), "{record}");
}

/// The audit events of `agent` that delete a ConfigMap, by name.
fn configmap_deletes(agent: &str) -> Vec<String> {
    common::audit_events(agent)
        .iter()
        .filter(|e| e["verb"] == "delete" && e["objectRef"]["resource"] == "configmaps")
        .map(|e| e["objectRef"]["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Moving objects between units, a rename: unit `shop` renamed `store`. Without
/// `adopt_from`, every object fails with a message naming the unit that owns it, its parent and
/// the key that moves it; with `adopt_from = ["shop"]` they are taken over in place: the same
/// objects (uids), the new ApplySet's label and record, and no DELETE.
#[tokio::test]
async fn a_renamed_unit_takes_its_objects_over_in_place_with_adopt_from() {
    let (env, _, repo) = common::setup_repo("rename").await;
    for name in ["a", "b", "c"] {
        repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    }
    repo.commit_and_push("three ConfigMaps");
    let state = tempfile::tempdir().unwrap();
    let (agent, client) = env.gitward_client().await;
    let old = common::config(state.path(), &common::unit_toml("shop", &repo.bare(), "", &env.namespace, ""));
    let mut shop = common::engine(&client, &old, "shop").await;
    assert!(!shop.sync().await.expect("sync of shop").changes.has_failures());
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let uid = |cm: ConfigMap| cm.metadata.uid.unwrap();
    let before = uid(configmaps.get("a").await.unwrap());
    drop(shop);

    // Renamed without adopt_from: refused, naming the owner.
    let ns = &env.namespace;
    let renamed = common::config(state.path(), &common::unit_toml("store", &repo.bare(), "", ns, ""));
    let mut store = common::engine(&client, &renamed, "store").await;
    let refused = store.sync().await.expect("sync of store");
    let entry = refused.changes.get(&ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some(ns), "a"));
    let entry = entry.expect("an entry for a");
    assert_eq!(entry.action, Action::Failed, "{entry:?}");
    let message = entry.message.as_deref().unwrap();
    assert!(
        message.ends_with(&format!(
            "a.yaml (document 1): belongs to unit `shop` (ApplySet parent Secret/{ns}/gitward-shop); not taken over: \
             to move it to this unit, add adopt_from = [\"shop\"] to this unit's [[sync]]"
        )),
        "{message}"
    );
    drop(store);

    let adopting = common::unit_toml("store", &repo.bare(), "", ns, "adopt_from = [\"shop\"]");
    let mut store = common::engine(&client, &common::config(state.path(), &adopting), "store").await;
    let adopted = store.sync().await.expect("sync of store");
    let actions = common::actions(&adopted);
    assert!(!adopted.changes.has_failures(), "{actions:#?}");
    let note = adopted.changes.entries[0].message.as_deref().unwrap_or_default();
    assert!(note.starts_with("adopted from unit `shop`"), "{note}");
    assert_eq!(uid(configmaps.get("a").await.unwrap()), before, "the same object, not a new one");
    for name in ["a", "b", "c"] {
        let labels = configmaps.get(name).await.unwrap().metadata.labels.unwrap();
        assert_eq!(labels[PART_OF], store.inventory().id, "{name}");
    }
    assert_eq!(common::member_record(&env.client, &store).await.len(), 3);
    let again = store.sync().await.expect("sync of store");
    assert_eq!(again.changes.counts().unchanged, 3, "{:#?}", common::actions(&again));
    assert_eq!(configmap_deletes(&agent), Vec::<String>::new(), "nothing deleted");
}

/// Moving objects between units, a split: `p` and `q` leave unit `shop`'s path for unit
/// `shop-db`'s, which names `shop` in `adopt_from`. `shop` syncs first (the worst order): it
/// prunes nothing while `shop-db` may adopt from it (not a failure), `shop-db` takes `p` and `q`
/// over (in `update` mode: its POST meets them existing), `shop`'s record forgets them at its
/// next clean sync, and once `adopt_from` is removed `shop` prunes normally again — never `p`
/// or `q`, which no request deletes.
#[tokio::test]
async fn a_split_unit_hands_objects_over_and_the_old_unit_never_prunes_them() {
    let (env, _, repo) = common::setup_repo("split").await;
    for name in ["a", "b", "c", "d", "p", "q"] {
        repo.write(&format!("shop/{name}.yaml"), &common::cm(name, "1"));
    }
    repo.commit_and_push("one unit");
    let state = tempfile::tempdir().unwrap();
    let ns = &env.namespace;
    let (agent, client) = env.gitward_client().await;
    let one = common::config(state.path(), &common::unit_toml("shop", &repo.bare(), "shop", ns, ""));
    let mut shop = common::engine(&client, &one, "shop").await;
    assert!(!shop.sync().await.expect("sync").changes.has_failures());
    drop(shop);

    for name in ["p", "q"] {
        repo.write(&format!("db/{name}.yaml"), &common::cm(name, "1"));
        repo.remove(&format!("shop/{name}.yaml"));
    }
    repo.commit_and_push("p and q move to the db unit");
    let units = |adopt: &str| {
        common::unit_toml("shop", &repo.bare(), "shop", ns, "")
            + &common::unit_toml("shop-db", &repo.bare(), "db", ns, adopt)
    };
    // shop-db writes in update mode: its POST finds p and q existing, and adopts them.
    let split = common::config(state.path(), &units("adopt_from = [\"shop\"]\napply_mode = \"update\""));
    assert_eq!(split.unit("shop").unwrap().adopted_by, ["shop-db"]);
    let mut shop = common::engine(&client, &split, "shop").await;
    let mut db = common::engine(&client, &split, "shop-db").await;

    let first = shop.sync().await.expect("sync of shop");
    assert!(!first.changes.has_failures(), "deferring the prune is no failure: {:#?}", common::actions(&first));
    assert_eq!(first.changes.counts().pruned, 0);
    let reason = first.changes.prune_refused.as_deref().expect("the prune is refused");
    assert!(reason.starts_with("unit `shop-db` may take over this unit's objects"), "{reason}");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), ns);
    assert!(configmaps.get_opt("p").await.unwrap().is_some());

    let taken = db.sync().await.expect("sync of shop-db");
    assert!(!taken.changes.has_failures(), "{:#?}", common::actions(&taken));
    // They existed (made by `shop`): adopted, not created.
    assert_eq!(taken.changes.counts().adopted, 2, "{:#?}", common::actions(&taken));
    let note = taken.changes.entries[0].message.as_deref().unwrap_or_default();
    assert!(note.starts_with("adopted from unit `shop`"), "{note}");
    for name in ["p", "q"] {
        let labels = configmaps.get(name).await.unwrap().metadata.labels.unwrap();
        assert_eq!(labels[PART_OF], db.inventory().id, "{name}");
    }
    // shop's watch sees p and q leave its ApplySet; its next sync narrows its record.
    let p = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some(ns), "p");
    let left =
        common::eventually(std::time::Duration::from_secs(10), || async { !shop.cache().snapshot().contains_key(&p) })
            .await;
    assert!(left, "p never left shop's cache");
    let second = shop.sync().await.expect("sync of shop");
    assert!(second.changes.prune_refused.is_none(), "nothing left to prune: {:?}", second.changes.prune_refused);
    let record = common::member_record(&env.client, &shop).await;
    assert_eq!(record.len(), 4, "{record:?}");
    assert_eq!(
        common::member_record(&env.client, &db).await,
        [format!("ConfigMap/{ns}/p"), format!("ConfigMap/{ns}/q")]
    );
    drop((shop, db));

    // The move done, adopt_from removed: shop prunes normally, and only its own.
    repo.remove("shop/d.yaml");
    repo.commit_and_push("d leaves git");
    let done = common::config(state.path(), &units(""));
    let mut shop = common::engine(&client, &done, "shop").await;
    let pruned = shop.sync().await.expect("sync of shop");
    assert_eq!(common::actions(&pruned)[&format!("ConfigMap/{ns}/d")], "pruned");
    assert_eq!(pruned.changes.counts().pruned, 1, "{:#?}", common::actions(&pruned));
    let deletes = common::audit_events_until(&agent, |e| e.iter().any(|e| e["verb"] == "delete")).await;
    let deleted: Vec<&str> = deletes
        .iter()
        .filter(|e| e["verb"] == "delete" && e["objectRef"]["resource"] == "configmaps")
        .filter_map(|e| e["objectRef"]["name"].as_str())
        .collect();
    assert_eq!(deleted, ["d"], "p and q were never deleted");
}

/// Runs `gitward <args> --config <config>` with JSON logs: exit code and its log events.
fn gitward_cli(args: &[&str], config: &std::path::Path) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["--log-format", "json"])
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .expect("gitward runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let events = String::from_utf8_lossy(&out.stderr).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    (out.status.code(), events, text)
}

#[tokio::test]
async fn a_prune_over_the_guard_is_refused_naming_it_and_allow_prune_permits_it_once() {
    let (env, _, repo) = common::setup_repo("allow-prune").await;
    for name in ["a", "b", "c", "d"] {
        repo.write(&format!("{name}.yaml"), &common::cm(name, "1"));
    }
    repo.commit_and_push("four");
    let dir = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "", &env.namespace, "max_prune_fraction = 0.25");
    let config = common::config_file(dir.path(), &unit);
    let (code, _, text) = gitward_cli(&["sync"], &config);
    assert_eq!(code, Some(0), "{text}");

    // Half of them leave git: over the 25% guard.
    repo.remove("c.yaml");
    repo.remove("d.yaml");
    repo.commit_and_push("remove half");
    let (code, events, text) = gitward_cli(&["sync"], &config);
    assert_eq!(code, Some(1), "{text}");
    let refused = events.iter().find(|e| e["message"] == "prune refused").unwrap_or_else(|| panic!("{text}"));
    let reason = refused["reason"].as_str().unwrap();
    for words in ["2 of 4", "max_prune_fraction 25%", "allow_prune_all", "gitward sync --allow-prune"] {
        assert!(reason.contains(words), "{reason}");
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    assert!(configmaps.get_opt("c").await.unwrap().is_some(), "pruned despite the guard");
    // `status` says why the unit is not in the state git says.
    let (code, _, text) = gitward_cli(&["status"], &config);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("  error      prune refused: would prune 2 of 4")), "{text}");
    // Told once, not again beside each member it kept.
    assert_eq!(text.matches("max_prune_fraction 25%").count(), 1, "{text}");
    assert!(
        text.contains(&format!("  skipped    ConfigMap/{}/c: not pruned (the prune was refused)\n", env.namespace))
    );

    // A deliberate one-off prune past the guard.
    let (code, events, text) = gitward_cli(&["sync", "--allow-prune"], &config);
    assert_eq!(code, Some(0), "{text}");
    let summary = events.iter().find(|e| e["message"] == "sync complete").unwrap_or_else(|| panic!("{text}"));
    assert_eq!(summary["pruned"], 2, "{summary}");
    for name in ["c", "d"] {
        assert!(configmaps.get_opt(name).await.unwrap().is_none(), "{name} not pruned");
    }
    let (code, _, text) = gitward_cli(&["status"], &config);
    assert_eq!(code, Some(0), "the error is cleared: {text}");
}
