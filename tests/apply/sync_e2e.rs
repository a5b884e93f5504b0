//! End-to-end: real manifests nobody here wrote (tests/fixtures), pushed to a bare git
//! repository with the git CLI, synced to the real apiserver, step by step as a user would.
//!
//! One test, because ingress-nginx holds cluster-scoped objects (ClusterRoles, an IngressClass,
//! a Namespace, a validating webhook) that only one ApplySet can own in a cluster.
//!
//! Layout of the user's repository: `platform/` (ingress-nginx, guestbook) is one unit and
//! `shop/` (sock-shop) another. ingress-nginx's admission webhook has no endpoints here (the
//! test apiserver runs no pods), so once it exists it rejects every Ingress: the shop unit's
//! Ingress is expected to be `failed` with the webhook's message from then on, and the shop
//! unit is kept apart so that the platform unit can show pruning.

use crate::common;

use std::collections::BTreeMap;

use gitward::changeset::Action;
use gitward::cluster::inventory::PART_OF;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, Patch, PatchParams};

fn count(report: &gitward::sync::Report, action: Action) -> usize {
    report.changes.entries.iter().filter(|e| e.action == action).count()
}

fn position(report: &gitward::sync::Report, object: &str) -> usize {
    report
        .changes
        .entries
        .iter()
        .position(|e| e.object.to_string() == object)
        .unwrap_or_else(|| panic!("{object} not in change set"))
}

#[tokio::test]
async fn fixtures_sync_upgrade_prune_resync_drift_and_applyset() {
    let env = common::setup("e2e").await;
    let fixtures = common::fixtures();
    let repo = common::GitRepo::new();
    std::fs::create_dir_all(repo.work().join("platform/ingress-nginx")).unwrap();
    std::fs::create_dir_all(repo.work().join("shop")).unwrap();
    std::fs::copy(
        fixtures.join("ingress-nginx/v1.14.0/deploy.yaml"),
        repo.work().join("platform/ingress-nginx/deploy.yaml"),
    )
    .unwrap();
    repo.copy_dir(&fixtures.join("argocd-example-apps/guestbook"), "platform/guestbook");
    repo.copy_dir(&fixtures.join("argocd-example-apps/sock-shop"), "shop/sock-shop");
    repo.commit_and_push("ingress-nginx v1.14.0, guestbook, sock-shop");

    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("platform", &repo.bare(), "platform", &env.namespace, "")
        + &common::unit_toml("shop", &repo.bare(), "shop", &env.namespace, "");
    let config = common::config(state.path(), &units);
    let (agent, client) = env.gitward_client().await;
    let mut platform = common::engine(&client, &config, "platform").await;
    let mut shop = common::engine(&client, &config, "shop").await;

    // 1. Everything created; Namespaces before their contents; kustomization.yaml skipped.
    let shop1 = shop.sync().await.expect("shop sync");
    assert_eq!(count(&shop1, Action::Created), 29, "{:#?}", common::actions(&shop1));
    assert!(
        shop1.skipped_files.iter().any(|s| s.file.ends_with("sock-shop/kustomization.yaml")),
        "{:?}",
        shop1.skipped_files
    );
    let p1 = platform.sync().await.expect("platform sync");
    assert_eq!(count(&p1, Action::Created), 19 + 2, "{:#?}", common::actions(&p1));
    assert!(!p1.changes.has_failures());
    let ns_at = position(&p1, "Namespace/ingress-nginx");
    for (i, e) in p1.changes.entries.iter().enumerate() {
        if e.object.namespace.as_deref() == Some("ingress-nginx") {
            assert!(i > ns_at, "{} applied before its Namespace", e.object);
        }
    }
    let webhook = position(&p1, "ValidatingWebhookConfiguration/ingress-nginx-admission");
    assert_eq!(webhook, p1.changes.entries.len() - 1, "admission webhooks go last");
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    assert!(deployments.get_opt("guestbook-ui").await.unwrap().is_some());
    assert!(deployments.get_opt("front-end").await.unwrap().is_some());

    // 2. Upgrade to v1.15.1: changed objects configured; the Jobs' pod templates are
    //    immutable: an error without recreate, re-created with it.
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "ingress-nginx");
    let job_uid = jobs.get("ingress-nginx-admission-create").await.unwrap().metadata.uid;
    std::fs::copy(
        fixtures.join("ingress-nginx/v1.15.1/deploy.yaml"),
        repo.work().join("platform/ingress-nginx/deploy.yaml"),
    )
    .unwrap();
    repo.commit_and_push("ingress-nginx v1.15.1");
    let p2 = platform.sync().await.expect("platform sync");
    let a2 = common::actions(&p2);
    assert_eq!(a2["Deployment/ingress-nginx/ingress-nginx-controller"], "configured", "{a2:#?}");
    for job in ["Job/ingress-nginx/ingress-nginx-admission-create", "Job/ingress-nginx/ingress-nginx-admission-patch"] {
        assert_eq!(a2[job], "failed", "{a2:#?}");
        let entry = p2.changes.entries.iter().find(|e| e.object.to_string() == job).unwrap();
        let msg = entry.message.as_deref().unwrap();
        assert!(msg.contains("immutable") && msg.contains("recreate"), "{msg}");
    }
    assert_eq!(count(&p2, Action::Pruned), 0, "no prune after a failure");
    let recreating = common::config(
        state.path(),
        &common::unit_toml("platform", &repo.bare(), "platform", &env.namespace, "recreate_on_immutable = true"),
    );
    let mut platform_recreate = common::engine(&client, &recreating, "platform").await;
    let p2b = platform_recreate.sync().await.expect("platform sync with recreate");
    let a2b = common::actions(&p2b);
    assert_eq!(a2b["Job/ingress-nginx/ingress-nginx-admission-create"], "configured", "{a2b:#?}");
    assert!(!p2b.changes.has_failures(), "{a2b:#?}");
    let new_uid = jobs.get("ingress-nginx-admission-create").await.unwrap().metadata.uid;
    assert_ne!(job_uid, new_uid, "the Job was re-created");
    drop(platform_recreate);

    // 3. guestbook removed: exactly its objects pruned.
    repo.remove("platform/guestbook");
    repo.commit_and_push("remove guestbook");
    let p3 = platform.sync().await.expect("platform sync");
    let pruned: Vec<String> =
        p3.changes.entries.iter().filter(|e| e.action == Action::Pruned).map(|e| e.object.to_string()).collect();
    let ns = &env.namespace;
    assert_eq!(pruned, vec![format!("Deployment/{ns}/guestbook-ui"), format!("Service/{ns}/guestbook-ui")]);
    assert!(deployments.get_opt("guestbook-ui").await.unwrap().is_none());

    // 4. A second sync with no new commit: every object unchanged, exactly one apply request
    //    per object and no GET, as the audit log counts them.
    let before = common::audit_events(&agent).len();
    let p4 = platform.sync().await.expect("platform sync");
    assert_eq!(count(&p4, Action::Unchanged), 19, "{:#?}", common::actions(&p4));
    assert_eq!(p4.changes.entries.len(), 19);
    assert_eq!(p4.changes.requests, 19);
    let events = common::audit_events_until(&agent, |e| e.len() >= before + 19).await;
    let verbs = common::verbs(&events[before..]);
    for e in events[before..].iter().filter(|e| e["verb"] != "patch") {
        eprintln!("unexpected request: {}", e);
    }
    assert_eq!(verbs, BTreeMap::from([("patch".to_string(), 19)]), "requests of an unchanged sync");

    // The shop unit: its Ingress is now rejected by ingress-nginx's webhook (no endpoints),
    // reported with the webhook's message; everything else is still applied.
    let s2 = shop.sync().await.expect("shop sync");
    let ingress = s2.changes.entries.iter().find(|e| e.object.gk.kind == "Ingress").unwrap();
    assert_eq!(ingress.action, Action::Failed);
    assert!(
        ingress.message.as_deref().unwrap().contains("validate.nginx.ingress.kubernetes.io"),
        "{:?}",
        ingress.message
    );
    assert_eq!(count(&s2, Action::Unchanged), 28);

    // 5. A hand edit of a field gitward owns is reported drift-corrected and restored.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "ingress-nginx");
    let version = "app.kubernetes.io/version";
    let edit = serde_json::json!({"metadata": {"labels": {version: "hand-edited"}}});
    configmaps.patch("ingress-nginx-controller", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    let p5 = platform.sync().await.expect("platform sync");
    assert_eq!(common::actions(&p5)["ConfigMap/ingress-nginx/ingress-nginx-controller"], "drift-corrected");
    assert_eq!(count(&p5, Action::DriftCorrected), 1);
    let restored = configmaps.get("ingress-nginx-controller").await.unwrap().metadata.labels.unwrap();
    assert_eq!(restored[version], "1.15.1");

    // 6. The inventory is the ApplySet kubectl would write.
    applyset_matches_kubectl(&env, &platform).await;
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    assert!(namespaces.get_opt("ingress-nginx").await.unwrap().is_some());
}

async fn applyset_matches_kubectl(env: &common::TestEnv, engine: &gitward::sync::Engine) {
    let inventory = engine.inventory();
    // kubectl's id for a scratch parent of the same kind, name and namespace in another namespace.
    let scratch_ns = common::unique("scratch");
    common::create_namespace(&env.client, &scratch_ns).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cm.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: scratch\ndata:\n  a: b\n").unwrap();
    let parent = &inventory.parent.name;
    let out = std::process::Command::new("kubectl")
        .env("KUBECTL_APPLYSET", "true")
        .args(["apply", "--prune", &format!("--applyset=secret/{parent}"), "-n", &scratch_ns, "-f"])
        .arg(&file)
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "kubectl apply --applyset: {}", String::from_utf8_lossy(&out.stderr));
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(env.client.clone(), &scratch_ns);
    let kubectl_id = secrets.get(parent).await.unwrap().metadata.labels.unwrap()["applyset.kubernetes.io/id"].clone();
    let ours = gitward::cluster::inventory::applyset_id(parent, &scratch_ns, "Secret", "");
    assert_eq!(ours, kubectl_id, "gitward computes the ApplySet id kubectl writes");

    // kubectl lists exactly the members by the part-of label.
    let selector = format!("applyset.kubernetes.io/part-of={}", inventory.id);
    let out = common::kubectl(&[
        "get",
        "deployments,services,configmaps,jobs,serviceaccounts,roles,rolebindings",
        "-A",
        "-l",
        &selector,
        "-o",
        "name",
    ]);
    assert!(out.status.success());
    let listed = String::from_utf8_lossy(&out.stdout).lines().count();
    let members = engine.cache().snapshot().keys().filter(|k| k.namespace.is_some()).count();
    assert_eq!(listed, members, "kubectl lists the namespaced members");
    let deployments: Api<Deployment> = Api::all(env.client.clone());
    let labelled = deployments.list(&ListParams::default().labels(&selector)).await.unwrap();
    assert_eq!(labelled.items.len(), 1, "only ingress-nginx-controller remains after the prune");

    // kubectl, seeing tooling gitward/<version>, refuses to modify the set.
    let ns = inventory.parent.namespace.clone().unwrap();
    let out = std::process::Command::new("kubectl")
        .env("KUBECTL_APPLYSET", "true")
        .args(["apply", "--prune", &format!("--applyset=secret/{parent}"), "-n", &ns, "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success(), "kubectl must refuse a gitward ApplySet");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("managed by tooling \"gitward\""), "kubectl names the other tooling: {err}");
}

/// The early apply: a push's changed object is applied before the revision is loaded
/// whole, with exactly one request in the sync; a push that also breaks another file, or that
/// names an object twice, applies nothing of its revision.
#[tokio::test]
async fn early_apply_sends_a_pushed_change_once_and_nothing_of_a_refused_revision() {
    let (env, _, repo) = common::setup_repo("early").await;
    let config_map = |name: &str, value: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n---\n")
    };
    repo.push(&[("app/a.yaml", &config_map("a", "1")), ("app/b.yaml", &config_map("b", "1"))], "a and b");
    let state = tempfile::tempdir().unwrap();
    let config = common::config(state.path(), &common::unit_toml("app", &repo.bare(), "app", &env.namespace, ""));
    let (agent, client) = env.gitward_client().await;
    let mut engine = common::engine(&client, &config, "app").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let value = |cm: ConfigMap| cm.data.unwrap_or_default().get("value").cloned().unwrap_or_default();

    let first = engine.sync().await.expect("first sync");
    assert_eq!(count(&first, Action::Created), 2, "{:#?}", common::actions(&first));
    assert_eq!(first.sent.applied_early, 0, "nothing is early on a first sync");

    // 1. One object changed: applied early, and sent once in the sync.
    repo.push(&[("app/a.yaml", &config_map("a", "2"))], "a = 2");
    let before = common::audit_events(&agent).len();
    let changed = engine.sync().await.expect("sync of a = 2");
    assert_eq!(changed.sent.applied_early, 1);
    let a = common::actions(&changed);
    let ns = &env.namespace;
    assert_eq!(a[&format!("ConfigMap/{ns}/a")], "configured", "{a:#?}");
    assert_eq!(a[&format!("ConfigMap/{ns}/b")], "unchanged", "{a:#?}");
    assert_eq!(changed.changes.entries.len(), 2, "{a:#?}");
    assert_eq!(value(configmaps.get("a").await.unwrap()), "2");
    // A marker request of the same client after the sync returned: once the audit log holds
    // it, it holds every request the sync sent before.
    let marker: Api<ConfigMap> = Api::namespaced(client.clone(), &env.namespace);
    marker.get_metadata("b").await.expect("the marker request");
    let is_marker = |e: &serde_json::Value| e["verb"] == "get" && e["objectRef"]["name"] == "b";
    let events = common::audit_events_until(&agent, |e| e[before..].iter().any(is_marker)).await;
    let sent: Vec<&serde_json::Value> = events[before..].iter().filter(|e| !is_marker(e)).collect();
    assert_eq!(events.len() - sent.len() - before, 1, "the marker is in the audit log: {:#?}", &events[before..]);
    let patches_of =
        |name: &str| sent.iter().filter(|e| e["verb"] == "patch" && e["objectRef"]["name"] == name).count();
    assert_eq!((patches_of("a"), patches_of("b")), (1, 1), "one request per object: {sent:#?}");
    assert_eq!(sent.len(), 2, "{sent:#?}");

    // 2. a changed again, but b.yaml no longer parses: the revision is refused whole and a keeps
    //    its last good value.
    repo.write("app/a.yaml", &config_map("a", "3"));
    repo.write("app/b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n data: [\n");
    repo.commit_and_push("a = 3, b broken");
    let err = engine.sync().await.expect_err("a malformed file refuses the revision");
    assert!(err.to_string().contains("app/b.yaml"), "{err}");
    assert_eq!(value(configmaps.get("a").await.unwrap()), "2", "nothing of a refused revision is applied");

    // 3. b.yaml repaired as it was, a changed again and a.yaml also defines b (still in b.yaml):
    //    a duplicate, refused whole.
    repo.write("app/b.yaml", &config_map("b", "1"));
    repo.push(&[("app/a.yaml", &(config_map("a", "4") + &config_map("b", "4")))], "a = 4, b twice");
    let err = engine.sync().await.expect_err("an object named twice refuses the revision");
    assert!(err.to_string().contains("ConfigMap") && err.to_string().contains("b.yaml"), "{err}");
    assert_eq!(value(configmaps.get("a").await.unwrap()), "2");
    assert_eq!(value(configmaps.get("b").await.unwrap()), "1");

    // 4. The duplicate removed: applied early again.
    repo.push(&[("app/a.yaml", &config_map("a", "4"))], "a = 4");
    let fixed = engine.sync().await.expect("sync of a = 4");
    assert_eq!(fixed.sent.applied_early, 1, "{:#?}", common::actions(&fixed));
    assert_eq!(value(configmaps.get("a").await.unwrap()), "4");
}

/// The most natural first repository: a Namespace and a ConfigMap in it, the unit's
/// `namespace` (and so its ApplySet parent) being that Namespace. The first sync makes the
/// namespace bare before the parent's first write, then applies it as the member it is. A unit
/// whose namespace nothing makes fails in one readable sentence, printed once.
#[tokio::test]
async fn a_repository_that_creates_its_units_namespace_syncs_first_time() {
    let env = common::setup("first-ns").await;
    let shop = common::unique("shop");
    let repo = common::GitRepo::new();
    repo.write("shop/namespace.yaml", &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {shop}\n"));
    repo.write("shop/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n");
    repo.write("lost/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n");
    repo.commit_and_push("a namespace and a ConfigMap in it");
    let nowhere = common::unique("nowhere");
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("shop", &repo.bare(), "shop", &shop, "")
        + &common::unit_toml("lost", &repo.bare(), "lost", &nowhere, "");
    let config = common::config(state.path(), &units);
    let mut engine = common::engine(&env.client, &config, "shop").await;

    let first = engine.sync().await.unwrap_or_else(|e| panic!("{}", gitward::telemetry::error_chain(&e)));
    let actions = common::actions(&first);
    assert!(!first.changes.has_failures(), "{actions:#?}");
    assert_eq!(actions[&format!("Namespace/{shop}")], "created", "{actions:#?}");
    assert_eq!(actions[&format!("ConfigMap/{shop}/settings")], "created", "{actions:#?}");
    let labels = common::namespace_labels(&env.client, &shop).await;
    assert_eq!(labels.get(PART_OF), Some(&engine.inventory().id), "the Namespace is a member: {labels:?}");
    let record = common::member_record(&env.client, &engine).await;
    assert_eq!(record, [format!("ConfigMap/{shop}/settings"), format!("Namespace//{shop}")], "{record:?}");
    let again = engine.sync().await.expect("second sync");
    assert_eq!(count(&again, Action::Unchanged), 2, "{:#?}", common::actions(&again));

    let mut lost = common::engine(&env.client, &config, "lost").await;
    let err = lost.sync().await.expect_err("no namespace for the parent");
    let printed = gitward::telemetry::error_chain(&err);
    assert_eq!(
        printed,
        format!(
            "inventory Secret/{nowhere}/gitward-lost: namespace {nowhere} does not exist: add a Namespace manifest \
             for it to the repository, set create_namespace = true, or create it"
        ),
        "one sentence, printed once"
    );
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    assert!(namespaces.get_opt(&nowhere).await.unwrap().is_none(), "nothing makes a namespace nobody asked for");
}

/// `create_namespace` makes a namespace that several units share: two units of one namespace, each with
/// `create_namespace = true`, sync cleanly three times each; the Namespace is a member of
/// neither, and what others declared on it stays: a third unit that holds the Namespace as a
/// member (its ApplySet label, a Pod Security label) and a label set by hand. The two units
/// send it nothing but a GET and one create.
#[tokio::test]
async fn units_sharing_a_create_namespace_namespace_sync_cleanly_and_keep_what_others_declared() {
    let env = common::setup("joint-ns").await;
    let joint = common::unique("joint");
    let repo = common::GitRepo::new();
    repo.write("a/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n");
    repo.write("b/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  k: v\n");
    repo.write(
        "owner/namespace.yaml",
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {joint}\n  labels:\n    \
             pod-security.kubernetes.io/enforce: baseline\n"
        ),
    );
    repo.commit_and_push("two apps in one namespace, and its owner");
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("a", &repo.bare(), "a", &joint, "create_namespace = true")
        + &common::unit_toml("b", &repo.bare(), "b", &joint, "create_namespace = true")
        + &common::unit_toml("owner", &repo.bare(), "owner", &env.namespace, "");
    let config = common::config(state.path(), &units);
    let agent = format!("{}-apps", env.user_agent);
    let apps = common::admin(&agent).await;
    let mut a = common::engine(&apps, &config, "a").await;
    let mut b = common::engine(&apps, &config, "b").await;
    let mut owner = common::engine(&env.client, &config, "owner").await;

    let first = a.sync().await.unwrap_or_else(|e| panic!("{}", gitward::telemetry::error_chain(&e)));
    assert!(!first.changes.has_failures(), "{:#?}", common::actions(&first));
    assert!(first.changes.entries.iter().all(|e| e.object.gk.kind != "Namespace"), "not a member of a");
    let labels = common::namespace_labels(&env.client, &joint).await;
    assert!(!labels.contains_key(PART_OF), "a joint namespace is nobody's member: {labels:?}");
    // The owner takes the Namespace into its ApplySet; someone labels it by hand.
    let owned = owner.sync().await.expect("owner sync");
    assert!(!owned.changes.has_failures(), "{:#?}", common::actions(&owned));
    let hand = serde_json::json!({"metadata": {"labels": {"team": "shop"}}});
    Api::<Namespace>::all(env.client.clone())
        .patch(&joint, &PatchParams::default(), &Patch::Merge(&hand))
        .await
        .unwrap();

    for round in 0..3 {
        for engine in [&mut a, &mut b] {
            let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", gitward::telemetry::error_chain(&e)));
            assert!(!report.changes.has_failures(), "round {round}: {:#?}", common::actions(&report));
            assert_eq!(report.changes.counts().pruned, 0);
        }
    }
    let again = owner.sync().await.expect("owner sync");
    assert_eq!(common::actions(&again)[&format!("Namespace/{joint}")], "unchanged");
    let labels = common::namespace_labels(&env.client, &joint).await;
    assert_eq!(labels.get(PART_OF), Some(&owner.inventory().id), "{labels:?}");
    assert_eq!(labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("baseline"), "{labels:?}");
    assert_eq!(labels.get("team").map(String::as_str), Some("shop"), "{labels:?}");
    for engine in [&a, &b] {
        let record = common::member_record(&env.client, engine).await;
        assert!(record.iter().all(|r| !r.starts_with("Namespace")), "{record:?}");
    }
    let events = common::audit_events_until(&agent, |e| {
        e.iter().any(|e| e["objectRef"]["resource"] == "namespaces" && e["verb"] == "create")
    })
    .await;
    let verbs: Vec<&str> = events
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "namespaces" && e["objectRef"]["name"] == joint.as_str())
        .filter_map(|e| e["verb"].as_str())
        .collect();
    assert_eq!(verbs.iter().filter(|v| **v == "create").count(), 1, "{verbs:?}");
    assert!(verbs.iter().all(|v| matches!(*v, "get" | "create")), "the joint namespace is never written: {verbs:?}");
}

/// A Namespace that an earlier gitward made a member for `create_namespace` (labelled, hashed,
/// recorded, annotated `gitward.dev/prune: disabled`) is released, not deleted: its ApplySet
/// label and hash go, its other labels and annotations stay, and the member record forgets it.
#[tokio::test]
async fn a_namespace_an_earlier_version_made_a_member_is_released_and_never_deleted() {
    let env = common::setup("legacy-ns").await;
    let legacy = common::unique("legacy");
    let repo = common::GitRepo::new();
    // What earlier versions added for create_namespace, word for word, plus a label of the user's.
    repo.write(
        "namespace.yaml",
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {legacy}\n  annotations:\n    \
             gitward.dev/prune: disabled\n"
        ),
    );
    repo.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: v\n");
    repo.commit_and_push("as an earlier version left it");
    let state = tempfile::tempdir().unwrap();
    let config =
        common::config(state.path(), &common::unit_toml("app", &repo.bare(), "", &legacy, "create_namespace = true"));
    let (agent, client) = env.gitward_client().await;
    let mut engine = common::engine(&client, &config, "app").await;
    engine.sync().await.unwrap_or_else(|e| panic!("{}", gitward::telemetry::error_chain(&e)));
    assert_eq!(common::namespace_labels(&env.client, &legacy).await.get(PART_OF), Some(&engine.inventory().id));
    assert!(common::member_record(&env.client, &engine).await.contains(&format!("Namespace//{legacy}")));

    repo.remove("namespace.yaml");
    repo.commit_and_push("create_namespace alone now");
    let report = engine.sync().await.expect("sync");
    assert!(!report.changes.has_failures(), "{:#?}", common::actions(&report));
    assert_eq!(report.changes.counts().pruned, 0);
    let ns = Api::<Namespace>::all(env.client.clone()).get(&legacy).await.unwrap();
    assert!(ns.metadata.deletion_timestamp.is_none(), "never deleted");
    let labels = ns.metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key(PART_OF), "released from the ApplySet: {labels:?}");
    let annotations = ns.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key("gitward.dev/desired-hash"), "{annotations:?}");
    let record = common::member_record(&env.client, &engine).await;
    assert_eq!(record, [format!("ConfigMap/{legacy}/app")], "{record:?}");
    let again = engine.sync().await.expect("sync");
    assert!(!again.changes.has_failures(), "{:#?}", common::actions(&again));
    let deletes = common::audit_events(&agent).iter().filter(|e| e["verb"] == "delete").count();
    assert_eq!(deletes, 0);
}
