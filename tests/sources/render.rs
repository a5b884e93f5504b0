//! Rendering what real repositories hold, end to end: the real `kustomize`, `helm` and `sops`
//! binaries (built by scripts/tools), real git repositories and the real apiserver.
//!
//! The tools are found in `$GITWARD_TOOLS_BIN` (exported by scripts/test) or
//! `target/tools/bin`; a test without them fails with a message saying to run scripts/tools.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Where the render tools are.
pub(crate) fn tools_bin() -> PathBuf {
    let dir = std::env::var_os("GITWARD_TOOLS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin"));
    for tool in ["kustomize", "helm", "sops", "age-keygen"] {
        assert!(dir.join(tool).is_file(), "{tool} not in {}: run scripts/tools first", dir.display());
    }
    dir
}

/// Config text: state dir, `[render]` with the tools plus `render_extra`, then `units`.
pub(crate) fn config_text(state: &Path, render_extra: &str, units: &str) -> String {
    let bin = tools_bin();
    format!(
        "[daemon]\nstate_dir = \"{}\"\n\n[render]\nkustomize = \"{k}\"\nhelm = \"{h}\"\nsops = \"{s}\"\n{render_extra}\n\n{units}",
        state.display(),
        k = bin.join("kustomize").display(),
        h = bin.join("helm").display(),
        s = bin.join("sops").display(),
    )
}

/// A config file `gitward.toml` in `dir` (state directory `dir/state`) for one unit `name`
/// following `repo`'s `app/` into `ns` and decrypting SOPS files with the age key file `key`:
/// (the unit's TOML, the file's path).
pub(crate) fn decrypting_config(
    dir: &Path,
    name: &str,
    repo: &common::GitRepo,
    ns: &str,
    key: &Path,
) -> (String, std::path::PathBuf) {
    let decryption = format!("[sync.decryption]\nage_key_file = \"{}\"\n", key.display());
    let unit = common::unit_toml(name, &repo.bare(), "app", ns, &decryption);
    let file = dir.join("gitward.toml");
    std::fs::write(&file, config_text(&dir.join("state"), "", &unit)).unwrap();
    (unit, file)
}

pub(crate) fn config(state: &Path, render_extra: &str, units: &str) -> gitward::config::Config {
    gitward::config::Config::from_toml(&config_text(state, render_extra, units), state, "test.toml")
        .unwrap_or_else(|e| panic!("test config: {e}"))
}

pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    gitward::telemetry::error_chain(e)
}

/// The overlay's kustomization with `namespace` and these `resources`.
fn overlay(namespace: &str, resources: &[&str]) -> String {
    let resources: String = resources.iter().map(|r| format!("  - {r}\n")).collect();
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {namespace}\n\
         namePrefix: prod-\nresources:\n{resources}components:\n  - ../../components/probes\n"
    )
}

const GOOD: [&str; 2] = ["../../base", "settings.yaml"];

/// A repository with the kustomize fixture under `apps/`, the overlay in `namespace`.
fn kustomize_repo(namespace: &str) -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.copy_dir(&common::fixtures().join("render/kustomize/apps"), "apps");
    repo.write("apps/overlays/prod/kustomization.yaml", &overlay(namespace, &GOOD));
    repo.push(&[("other/notes.yaml", "# not part of the overlay\n")], "kustomize overlay");
    repo
}

#[tokio::test]
async fn kustomize_overlay_with_outside_base_and_component_syncs_and_rerenders_only_on_its_inputs() {
    let (env, ns) = common::setup_ns("kustomize").await;
    let repo = kustomize_repo(&ns);
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &common::unit_toml("shop", &repo.bare(), "apps/overlays/prod", &ns, ""));
    let mut engine = common::engine(&env.client, &config, "shop").await;

    // 1. The overlay renders: base outside the unit's path, component patch, prefix, namespace.
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let deployment = format!("Deployment/{ns}/prod-kustomize-guestbook-ui");
    let service = format!("Service/{ns}/prod-kustomize-guestbook-ui");
    let settings = format!("ConfigMap/{ns}/prod-settings");
    let actions = common::actions(&report);
    for object in [&deployment, &service, &settings] {
        assert_eq!(actions.get(object).map(String::as_str), Some("created"), "{actions:?}");
    }
    assert_eq!(actions.len(), 3, "{actions:?}");
    let live = Api::<Deployment>::namespaced(env.client.clone(), &ns).get("prod-kustomize-guestbook-ui").await.unwrap();
    assert_eq!(live.metadata.labels.unwrap_or_default().get("probes").map(String::as_str), Some("enabled"));
    let container = &live.spec.unwrap().template.spec.unwrap().containers[0];
    assert!(container.readiness_probe.is_some(), "the component's patch is applied");
    assert_eq!(engine.repo().renders(), 1);

    // 2. A commit elsewhere in the repository renders nothing, and changes nothing.
    repo.push(&[("other/notes.yaml", "# still not part of the overlay\n")], "elsewhere");
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 1, "a commit outside the overlay's inputs must not render");
    assert!(common::actions(&report).values().all(|a| a == "unchanged"), "{:?}", common::actions(&report));

    // 3. A change in the base re-renders and configures exactly the changed object.
    let base = repo.work().join("apps/base/guestbook-ui-deployment.yaml");
    let text = std::fs::read_to_string(&base).unwrap().replace("replicas: 1", "replicas: 3");
    repo.push(&[("apps/base/guestbook-ui-deployment.yaml", &text)], "three replicas");
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2);
    let actions = common::actions(&report);
    assert_eq!(actions[&deployment], "configured", "{actions:?}");
    assert_eq!(actions[&service], "unchanged", "{actions:?}");
    assert_eq!(actions[&settings], "unchanged", "{actions:?}");
    let live = Api::<Deployment>::namespaced(env.client.clone(), &ns).get("prod-kustomize-guestbook-ui").await.unwrap();
    assert_eq!(live.spec.unwrap().replicas, Some(3));
}

/// Installs a CRD serving `render.gitward.dev/v1` `Widget` and waits until it is Established.
async fn install_widget_crd(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.render.gitward.dev"},
        "spec": {
            "group": "render.gitward.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    if let Err(kube::Error::Api(status)) = api.create(&PostParams::default(), &crd).await {
        assert_eq!(status.code, 409, "create CRD: {status:?}");
    }
    let established = common::eventually(Duration::from_secs(30), || async {
        let crd = api.get("widgets.render.gitward.dev").await.unwrap();
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "Established" && c.status == "True")
    })
    .await;
    assert!(established, "the Widget CRD did not become Established");
}

#[tokio::test]
async fn helm_chart_renders_with_values_capabilities_and_without_test_hooks() {
    let env = common::setup("helm").await;
    // A namespace nobody made: `create_namespace` makes it, inventory parent and all.
    let ns = common::unique("helm-created");
    install_widget_crd(&env.client).await;
    let repo = common::GitRepo::new();
    repo.copy_dir(&common::fixtures().join("render/helm/charts"), "charts");
    repo.copy_dir(&common::fixtures().join("render/helm/values"), "values");
    repo.commit_and_push("guestbook chart");
    let state = tempfile::tempdir().unwrap();
    let helm = "create_namespace = true\n[sync.helm]\nrelease = \"shop\"\nvalues_files = [\"values/prod.yaml\"]\n\
                [sync.helm.values]\ncolor = \"blue\"\n";
    let config = config(state.path(), "", &common::unit_toml("chart", &repo.bare(), "charts/guestbook", &ns, helm));
    let mut engine = common::engine(&env.client, &config, "chart").await;
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let actions = common::actions(&report);

    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let settings = configmaps.get("shop-guestbook-settings").await.unwrap().data.unwrap();
    assert_eq!(settings["greeting"], "from values/prod.yaml", "the values file applies");
    assert_eq!(settings["color"], "blue", "inline values apply last");
    let version = env.client.apiserver_version().await.unwrap().git_version;
    assert_eq!(settings["kubeVersion"], version, "--kube-version comes from the cluster");
    // Only a chart told the cluster's API versions takes this branch.
    assert!(configmaps.get_opt("shop-guestbook-widgets").await.unwrap().is_some(), "{actions:?}");
    // Hooks other than tests run as a phase before the chart's objects (tests/apply/hooks.rs).
    assert!(configmaps.get_opt("shop-guestbook-hook").await.unwrap().is_some(), "{actions:?}");
    let live = Api::<Deployment>::namespaced(env.client.clone(), &ns).get("shop-guestbook").await.unwrap();
    assert_eq!(live.spec.unwrap().replicas, Some(2));
    // Test hooks are skipped, and said so.
    assert!(!actions.keys().any(|k| k.starts_with("Pod/")), "{actions:?}");
    assert!(
        Api::<Pod>::namespaced(env.client.clone(), &ns)
            .get_opt("shop-guestbook-test-connection")
            .await
            .unwrap()
            .is_none()
    );
    assert!(report.skipped_files.iter().any(|s| s.reason.contains("Helm test hook")), "{:?}", report.skipped_files);
    assert_eq!(engine.repo().renders(), 1);
    let namespace = Api::<Namespace>::all(env.client.clone()).get(&ns).await.unwrap();
    let labels = namespace.metadata.labels.unwrap_or_default();
    assert!(
        !labels.contains_key("applyset.kubernetes.io/part-of"),
        "a created namespace is shared, no member: {labels:?}"
    );
}

/// A chain of in-repository links, each inside the repository when read lexically, that the
/// kernel follows out of the scratch tree (`l0 -> .`, `l1 -> l0/..`, …): a chart's
/// `.Files.Get` of the last one read the host's `/etc/os-release` into a ConfigMap. The render
/// is refused naming a link of the chain, and nothing reaches the cluster.
#[tokio::test]
async fn a_link_chain_that_climbs_out_of_the_scratch_tree_is_refused_before_helm_runs() {
    let (env, ns, repo) = common::setup_repo("helm-links").await;
    repo.write("charts/leak/Chart.yaml", "apiVersion: v2\nname: leak\nversion: 0.1.0\n");
    // The links of the chain are hidden from Helm's own walk; `w` is not.
    repo.write("charts/leak/.helmignore", "l[0-9]*\n");
    repo.write(
        "charts/leak/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  host: {{ .Files.Get \"w\" | quote }}\n",
    );
    let chart = repo.work().join("charts/leak");
    std::os::unix::fs::symlink(".", chart.join("l0")).unwrap();
    for i in 1..=12 {
        std::os::unix::fs::symlink(format!("l{}/..", i - 1), chart.join(format!("l{i}"))).unwrap();
    }
    std::os::unix::fs::symlink("l12/etc/os-release", chart.join("w")).unwrap();
    repo.commit_and_push("a chart with a link chain");
    let state = tempfile::tempdir().unwrap();
    let helm = "[sync.helm]\nrelease = \"leak\"\n";
    let config = config(state.path(), "", &common::unit_toml("leak", &repo.bare(), "charts/leak", &ns, helm));
    let mut engine = common::engine(&env.client, &config, "leak").await;
    let outcome = engine.sync().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let leaked = configmaps.get_opt("leak").await.unwrap().and_then(|c| c.data).unwrap_or_default();
    assert!(leaked.is_empty(), "a host file reached the cluster: {leaked:?}");
    let err = chain(&outcome.expect_err("the link chain is refused"));
    assert!(err.contains("charts/leak/l") && err.contains("leaves the repository"), "{err}");
    assert!(!err.contains("gitward-render-"), "scratch paths leak into the message: {err}");
}

/// A `configMapGenerator` whose `files` names a URL: kustomize fetches it over HTTP, so a
/// repository could copy what a host endpoint serves (cloud metadata, a local admin port) into a
/// ConfigMap. Without `allow_remote_bases` the revision is refused naming the file and the
/// field, the endpoint is never asked, and nothing reaches the cluster.
#[tokio::test]
async fn a_kustomization_that_loads_a_file_from_a_url_is_refused_and_the_url_never_fetched() {
    use std::io::{Read as _, Write as _};
    let (env, ns) = common::setup_ns("kustomize-url").await;
    // The endpoint: answers any request with a credential, and counts the requests.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nhost-secret");
        }
    });
    let repo = common::GitRepo::new();
    repo.write(
        "app/kustomization.yaml",
        &format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\n\
             configMapGenerator:\n- name: creds\n  options: {{disableNameSuffixHash: true}}\n  \
             files:\n  - c=http://127.0.0.1:{port}/creds\n"
        ),
    );
    repo.commit_and_push("a generator that reads a URL");
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &common::unit_toml("url", &repo.bare(), "app", &ns, ""));
    let mut engine = common::engine(&env.client, &config, "url").await;
    let outcome = engine.sync().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let applied = configmaps.get_opt("creds").await.unwrap().and_then(|c| c.data).unwrap_or_default();
    assert!(applied.is_empty(), "the endpoint's answer reached the cluster: {applied:?}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 0, "the URL was fetched");
    let err = chain(&outcome.expect_err("a URL in files: is refused"));
    assert!(
        err.contains("app/kustomization.yaml: configMapGenerator[0].files[0]")
            && err.contains(&format!("http://127.0.0.1:{port}/creds"))
            && err.contains("allow_remote_bases"),
        "{err}"
    );
}

/// A tree over `[render] max_tree_bytes` is refused before any tool runs, naming the file that
/// crossed the limit; nothing is applied. In the cluster `/tmp` is a 64 MiB memory emptyDir:
/// without the cap a large tree would get the pod evicted rather than the revision refused.
#[tokio::test]
async fn a_tree_over_max_tree_bytes_is_refused_naming_the_file() {
    let (env, ns, repo) = common::setup_repo("tree-cap").await;
    repo.write(
        "app/kustomization.yaml",
        &format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\n\
             resources:\n- small.yaml\nconfigMapGenerator:\n- name: big\n  files:\n  - blob.txt\n"
        ),
    );
    repo.write("app/small.yaml", &common::cm("small", "1"));
    repo.push(&[("app/blob.txt", &"x".repeat(64 * 1024))], "a 64 KiB file");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("big", &repo.bare(), "app", &ns, "");
    let capped = config(state.path(), "max_tree_bytes = \"32KiB\"", &unit);
    let mut engine = common::engine(&env.client, &capped, "big").await;
    let err = chain(&engine.sync().await.expect_err("a tree over the cap is refused"));
    assert!(err.contains("app/blob.txt") && err.contains("max_tree_bytes") && err.contains("32768"), "{err}");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(configmaps.get_opt("small").await.unwrap().is_none(), "the refused revision was applied");

    // Under the default the same tree renders.
    let default = config(state.path(), "", &unit);
    let mut engine = common::engine(&env.client, &default, "big").await;
    engine.sync().await.expect("under the default cap");
    assert!(configmaps.get_opt("small").await.unwrap().is_some());
}

/// A render killed mid-way leaves its scratch directory, decrypted plaintext and all: the next
/// gitward process's first render removes those of dead processes, and only those.
#[tokio::test]
async fn scratch_directories_of_dead_processes_are_removed_by_the_next_render() {
    let env = common::setup("scratch-sweep").await;
    let repo = kustomize_repo(&env.namespace);
    let tmp = tempfile::tempdir().unwrap();
    let dead_pid = {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let left = |name: String| {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        std::fs::write(dir.join("repo/secret.yaml"), "password: plain\n").unwrap();
        dir
    };
    let dead = left(format!("gitward-render-{dead_pid}-abc123"));
    let live = left(format!("gitward-render-{}-def456", std::process::id()));
    let unknown = left("gitward-render-ghi789".to_owned());
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("sweep", &repo.bare(), "apps/overlays/prod", &env.namespace, "");
    let config = state.path().join("config.toml");
    std::fs::write(&config, config_text(state.path(), "", &units)).unwrap();
    let tmpdir = format!("TMPDIR={}", tmp.path().display());
    let run = common::gitward_in(&["env", &tmpdir], &["sync"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!dead.exists(), "the dead process's scratch directory is still there");
    assert!(live.exists() && unknown.exists(), "a live process's, or an unknown, directory was removed");
    let own: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gitward-render-") && n != "gitward-render-ghi789" && !n.ends_with("-def456"))
        .collect();
    assert!(own.is_empty(), "the sync's own scratch directories outlived it: {own:?}");
}

/// Runs a tool binary with an empty environment (and HOME) in `cwd`; returns stdout.
pub(crate) fn tool(name: &str, args: &[&str], cwd: &Path) -> String {
    let out = Command::new(tools_bin().join(name))
        .args(args)
        .env_clear()
        .env("HOME", cwd)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(out.status.success(), "{name} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Makes an age identity in `dir/<name>.txt`; returns (file, public key).
pub(crate) fn age_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let file = dir.join(format!("{name}.txt"));
    tool("age-keygen", &["-o", file.to_str().unwrap()], dir);
    let text = std::fs::read_to_string(&file).unwrap();
    let public = text.lines().find_map(|l| l.strip_prefix("# public key: ")).expect("public key line").to_owned();
    (file, public)
}

/// A Secret with `password` in stringData, encrypted by the real sops for `recipient`.
fn encrypted_secret(dir: &Path, recipient: &str, password: &str) -> String {
    encrypted(dir, recipient, "Secret", "stringData", password)
}

/// A `kind` named `db` whose `field` holds `password`, encrypted by the real sops for
/// `recipient` (`data` and `stringData` encrypted).
fn encrypted(dir: &Path, recipient: &str, kind: &str, field: &str, password: &str) -> String {
    let plain = dir.join("plain.yaml");
    std::fs::write(
        &plain,
        format!("apiVersion: v1\nkind: {kind}\nmetadata:\n  name: db\n{field}:\n  password: {password}\n"),
    )
    .unwrap();
    let text = tool(
        "sops",
        &["encrypt", "--age", recipient, "--encrypted-regex", "^(data|stringData)$", plain.to_str().unwrap()],
        dir,
    );
    std::fs::remove_file(plain).unwrap();
    assert!(!text.contains(password) && text.contains("ENC[AES256_GCM"), "{text}");
    text
}

/// A committer can name the key service sops decrypts with: a file whose metadata names a
/// HashiCorp Vault at a loopback address (Go sends loopback requests past the dead proxy) made
/// `sops decrypt` PUT to it. Only an age key is configured, so a file naming any other key
/// source is refused before sops runs, naming the file and the key source; nothing is applied
/// and nothing connects.
#[tokio::test]
async fn a_sops_file_naming_a_vault_address_is_refused_before_sops_contacts_it() {
    let (env, ns) = common::setup_ns("sops-vault").await;
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let vault = format!("http://{}", listener.local_addr().unwrap());
    let sealed = encrypted(keys.path(), &public, "ConfigMap", "data", "pw-vault-hunter2");
    let entry = format!(
        "    hc_vault:\n        - vault_address: {vault}\n          engine_path: transit\n          key_name: k\n          \
         created_at: \"2026-11-25T00:00:00Z\"\n          enc: vault:v1:abcd\n"
    );
    // Only the Vault key: sops would have to ask it.
    let start = sealed.find("    age:\n").unwrap();
    let end = sealed.find("    encrypted_regex").unwrap();
    let vault_only = format!("{}{entry}{}", &sealed[..start], &sealed[end..]);
    let repo = common::GitRepo::new();
    repo.write("app/db.enc.yaml", &vault_only);
    repo.push(&[("app/settings.yaml", &common::cm("settings", "1"))], "a file for a Vault key");
    let state = tempfile::tempdir().unwrap();
    let (_, config_file) = decrypting_config(state.path(), "vault", &repo, &ns, &key);
    let (code, log) = gitward(&["sync", "--config", config_file.to_str().unwrap()]);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("app/db.enc.yaml") && log.contains(&format!("hc_vault ({vault})")), "{log}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "sops connected to the Vault address the file named"
    );
    let configmaps = Api::<ConfigMap>::namespaced(env.client.clone(), &ns);
    assert!(configmaps.get_opt("settings").await.unwrap().is_none(), "the refused revision was applied");

    // Next to the age recipient it is refused too: the file asks for a service.
    let both = format!("{}{entry}{}", &sealed[..start], &sealed[start..]);
    repo.push(&[("app/db.enc.yaml", &both)], "age and Vault");
    let (code, log) = gitward(&["sync", "--config", config_file.to_str().unwrap()]);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("only an age key is configured"), "{log}");
    assert!(configmaps.get_opt("db").await.unwrap().is_none(), "the refused revision was applied");
}

/// Runs the gitward CLI; returns (exit code, stdout + stderr).
pub(crate) fn gitward(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["--log-format", "json"])
        .args(args)
        .env("RUST_LOG", "trace")
        .output()
        .expect("gitward runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn sops_secret_is_decrypted_with_the_age_key_and_refused_without_it() {
    let (env, ns) = common::setup_ns("sops").await;
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let (wrong_key, _) = age_key(keys.path(), "wrong");
    let password = format!("pw-{}-hunter2", common::unique("s"));
    let repo = common::GitRepo::new();
    repo.write("app/secret.enc.yaml", &encrypted_secret(keys.path(), &public, &password));
    repo.push(&[("app/settings.yaml", &common::cm("settings", "1"))], "encrypted secret");

    let state = tempfile::tempdir().unwrap();
    let unit = |decryption: &str| common::unit_toml("vault", &repo.bare(), "app", &ns, decryption);
    let with_key = unit(&format!("[sync.decryption]\nage_key_file = \"{}\"\n", key.display()));
    let config_file = state.path().join("gitward.toml");
    std::fs::write(&config_file, config_text(&state.path().join("state"), "", &with_key)).unwrap();
    let config_arg = config_file.to_str().unwrap();
    let secrets = |text: &str, password: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(password);
        text.contains(password) || text.contains(&b64)
    };

    // 1. The Secret is applied with the right data; the log shows no plaintext.
    let (code, log) = gitward(&["sync", "--config", config_arg]);
    assert_eq!(code, 0, "{log}");
    assert!(!secrets(&log, &password), "plaintext in the sync log");
    let live = Api::<Secret>::namespaced(env.client.clone(), &ns).get("db").await.unwrap();
    assert_eq!(live.data.unwrap()["password"].0, password.as_bytes());
    // The desired hash is keyed: not the plain hash of the decrypted object.
    let plain_body = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": ns}, "stringData": {"password": password}});
    let hash = live.metadata.annotations.unwrap()["gitward.dev/desired-hash"].clone();
    assert_eq!(hash.len(), 64);
    assert_ne!(hash, gitward::manifest::desired_hash(&plain_body));

    // 2. A new secret value: `gitward diff` shows the change without any plaintext.
    let new_password = format!("pw-{}-correcthorse", common::unique("s"));
    repo.write("app/secret.enc.yaml", &encrypted_secret(keys.path(), &public, &new_password));
    repo.push(&[("app/settings.yaml", &common::cm("settings", "2"))], "new password");
    let (code, diff) = gitward(&["diff", "--config", config_arg]);
    assert_eq!(code, 1, "{diff}");
    assert!(diff.contains("Secret") && diff.contains("settings"), "{diff}");
    assert!(!secrets(&diff, &password) && !secrets(&diff, &new_password), "plaintext in diff output");

    // 3. Without a key, or with the wrong one, the revision is refused and nothing changes.
    for (name, decryption, expected) in [
        ("no key", String::new(), "SOPS-encrypted, and unit vault has no [sync.decryption]"),
        (
            "wrong key",
            format!("[sync.decryption]\nage_key_file = \"{}\"\n", wrong_key.display()),
            "SOPS decryption failed",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), "", &unit(&decryption));
        let mut engine = common::engine(&env.client, &config, "vault").await;
        let err = chain(&engine.sync().await.expect_err(name));
        assert!(err.contains("app/secret.enc.yaml") && err.contains(expected), "{name}: {err}");
        assert!(!secrets(&err, &new_password), "{name}: plaintext in the error");
        let settings = Api::<ConfigMap>::namespaced(env.client.clone(), &ns).get("settings").await.unwrap();
        assert_eq!(settings.data.unwrap()["value"], "1", "{name}: the refused revision was applied");
        let live = Api::<Secret>::namespaced(env.client.clone(), &ns).get("db").await.unwrap();
        assert_eq!(live.data.unwrap()["password"].0, password.as_bytes(), "{name}");
    }

    // 4. With the key again, the new revision applies; still no plaintext in the log.
    let (code, log) = gitward(&["sync", "--config", config_arg]);
    assert_eq!(code, 0, "{log}");
    assert!(!secrets(&log, &new_password), "plaintext in the sync log");
    let live = Api::<Secret>::namespaced(env.client.clone(), &ns).get("db").await.unwrap();
    assert_eq!(live.data.unwrap()["password"].0, new_password.as_bytes());
}

#[tokio::test]
async fn kustomize_reads_sops_encrypted_resources_and_generator_envs_decrypted_in_the_scratch_tree() {
    let (env, ns) = common::setup_ns("sops-kustomize").await;
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let password = format!("pw-{}-generated", common::unique("s"));
    let repo = common::GitRepo::new();
    repo.write("app/secret.enc.yaml", &encrypted_secret(keys.path(), &public, &password));
    // A dotenv file for a secretGenerator, encrypted as such.
    let token = format!("tok-{}-generated", common::unique("t"));
    std::fs::write(keys.path().join("creds.env"), format!("TOKEN={token}\n")).unwrap();
    let args = ["encrypt", "--age", &public, "--input-type", "dotenv", "--output-type", "dotenv", "creds.env"];
    let env_file = tool("sops", &args, keys.path());
    assert!(!env_file.contains(&token), "{env_file}");
    repo.write("app/creds.enc.env", &env_file);
    repo.write(
        "app/kustomization.yaml",
        &format!(
            "namespace: {ns}\nresources:\n  - secret.enc.yaml\n  - settings.yaml\n\
             secretGenerator:\n  - name: creds\n    envs: [creds.enc.env]\n\
             generatorOptions:\n  disableNameSuffixHash: true\n"
        ),
    );
    repo.push(&[("app/settings.yaml", &common::cm("settings", "1"))], "kustomize with an encrypted secret");
    let state = tempfile::tempdir().unwrap();
    let decryption = format!("[sync.decryption]\nage_key_file = \"{}\"\n", key.display());
    let config = config(state.path(), "", &common::unit_toml("kvault", &repo.bare(), "app", &ns, &decryption));
    let mut engine = common::engine(&env.client, &config, "kvault").await;
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(common::actions(&report)[&format!("Secret/{ns}/db")], "created");
    let live = Api::<Secret>::namespaced(env.client.clone(), &ns).get("db").await.unwrap();
    assert_eq!(live.data.unwrap()["password"].0, password.as_bytes());
    let creds = Api::<Secret>::namespaced(env.client.clone(), &ns).get("creds").await.unwrap();
    assert_eq!(creds.data.unwrap()["TOKEN"].0, token.as_bytes());
}

#[tokio::test]
async fn bad_renders_are_clear_errors_and_the_last_good_revision_stays() {
    let (env, ns) = common::setup_ns("render-bad").await;
    let repo = kustomize_repo(&ns);
    repo.copy_dir(&common::fixtures().join("render/helm/charts"), "charts");
    repo.commit_and_push("and charts");
    let state = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "apps/overlays/prod", &ns, "");
    let mut engine = common::engine(&env.client, &config(state.path(), "", &unit), "app").await;
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let settings =
        || async { configmaps.get_opt("prod-settings").await.unwrap().map(|c| c.data.unwrap()["greeting"].clone()) };
    assert_eq!(settings().await.as_deref(), Some("hello from prod"));

    let kustomization = "apps/overlays/prod/kustomization.yaml";
    let cases = [
        ("syntax error", "resources: [../../base\n".to_owned(), "kustomize failed"),
        ("missing base", overlay(&ns, &["../../nothere", "settings.yaml"]), "lstat apps/nothere: no such file"),
        (
            "remote base",
            overlay(&ns, &["github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.0.0", "settings.yaml"]),
            "remote resource",
        ),
    ];
    for (name, text, expected) in cases {
        repo.write(kustomization, &text);
        // The same commit also changes and drops objects: none of that may happen.
        repo.push(&[("apps/overlays/prod/settings.yaml", &common::cm("settings", "bad"))], name);
        let err = chain(&engine.sync().await.expect_err(name));
        assert!(err.contains(expected) && err.contains("apps/overlays/prod"), "{name}: {err}");
        assert!(!err.contains("gitward-render-"), "{name}: scratch paths leak into the message: {err}");
        assert_eq!(settings().await.as_deref(), Some("hello from prod"), "{name}: the bad revision was applied");
        let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
        assert!(deployments.get_opt("prod-kustomize-guestbook-ui").await.unwrap().is_some(), "{name}: pruned");
    }
    // A symbolic link that leaves the repository is refused before any tool runs.
    repo.write(kustomization, &overlay(&ns, &GOOD));
    std::os::unix::fs::symlink("/etc/passwd", repo.work().join("apps/base/passwd.yaml")).unwrap();
    repo.commit_and_push("a link out of the repository");
    let err = chain(&engine.sync().await.expect_err("symlink"));
    assert!(err.contains("apps/base/passwd.yaml: symbolic link to \"/etc/passwd\" leaves the repository"), "{err}");
    assert_eq!(settings().await.as_deref(), Some("hello from prod"));
    std::fs::remove_file(repo.work().join("apps/base/passwd.yaml")).unwrap();

    repo.write(
        "apps/overlays/prod/settings.yaml",
        &std::fs::read_to_string(common::fixtures().join("render/kustomize/apps/overlays/prod/settings.yaml")).unwrap(),
    );
    repo.commit_and_push("fixed");
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(common::actions(&report).values().all(|a| a == "unchanged"), "{:?}", common::actions(&report));

    // A tool that is not there is named, with the unit.
    let missing = tempfile::tempdir().unwrap();
    let text = config_text(missing.path(), "", &unit)
        .replace(tools_bin().join("kustomize").to_str().unwrap(), "/nonexistent/kustomize");
    let broken = gitward::config::Config::from_toml(&text, missing.path(), "test.toml").unwrap();
    let mut engine = common::engine(&env.client, &broken, "app").await;
    let err = chain(&engine.sync().await.expect_err("missing kustomize"));
    assert_eq!(
        err,
        "app: kustomize not found (no file at /nonexistent/kustomize); run scripts/tools to build it, or set \
         [render] kustomize to its path"
    );

    // Output over the cap.
    let small = tempfile::tempdir().unwrap();
    let mut engine =
        common::engine(&env.client, &config(small.path(), "max_output_bytes = \"200B\"", &unit), "app").await;
    let err = chain(&engine.sync().await.expect_err("output over the cap"));
    assert!(err.contains("kustomize output is over the limit of 200 bytes"), "{err}");
    assert!(err.starts_with("app: apps/overlays/prod: "), "{err}");

    // A template that loops for minutes is killed at the timeout.
    let slow = tempfile::tempdir().unwrap();
    let unit = common::unit_toml("app", &repo.bare(), "charts/slow", &ns, "");
    let mut engine = common::engine(&env.client, &config(slow.path(), "timeout = \"2s\"", &unit), "app").await;
    let err = chain(&engine.sync().await.expect_err("render timeout"));
    assert!(err.contains("app: charts/slow: helm did not finish within 2s"), "{err}");
    assert_eq!(settings().await.as_deref(), Some("hello from prod"));
}

#[tokio::test]
async fn validate_renders_the_overlay() {
    let env = common::setup("render-validate").await;
    let repo = kustomize_repo(&env.namespace);
    let state = tempfile::tempdir().unwrap();
    let config_file = state.path().join("gitward.toml");
    let unit = common::unit_toml("app", &repo.bare(), "apps/overlays/prod", &env.namespace, "");
    std::fs::write(&config_file, config_text(&state.path().join("state"), "", &unit)).unwrap();
    let (code, log) = gitward(&["validate", "--config", config_file.to_str().unwrap()]);
    assert_eq!(code, 0, "{log}");
    let valid = log.lines().find(|l| l.contains("\"valid\"")).unwrap_or_else(|| panic!("{log}"));
    assert!(valid.contains("\"objects\":3"), "{valid}");

    repo.push(&[("apps/overlays/prod/kustomization.yaml", "resources: [../../base\n")], "broken");
    let (code, log) = gitward(&["validate", "--config", config_file.to_str().unwrap()]);
    assert_eq!(code, 2, "{log}");
    let invalid = log.lines().find(|l| l.contains("\"message\":\"invalid\"")).unwrap_or_else(|| panic!("{log}"));
    assert!(
        invalid.contains("\"unit\":\"app\"") && invalid.contains("apps/overlays/prod: kustomize failed"),
        "{invalid}"
    );
    assert!(log.contains("app: invalid: its manifests could not be read"), "{log}");
}

#[tokio::test]
async fn daemon_logs_tool_versions_and_applies_a_push_to_the_overlays_base() {
    const WAIT: Duration = Duration::from_secs(30);
    let (env, ns) = common::setup_ns("render-daemon").await;
    let repo = kustomize_repo(&ns);
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let unit = common::unit_toml("app", &repo.bare(), "apps/overlays/prod", &ns, "");
    let text = config_text(&dir.path().join("state"), "", &unit).replacen(
        "\n\n[render]",
        &format!("\nlisten = \"127.0.0.1:{port}\"\ninterval = \"1h\"\nresync_interval = \"1h\"\n\n[render]"),
        1,
    );
    let config = dir.path().join("config.toml");
    std::fs::write(&config, text).unwrap();
    let daemon = common::Daemon::ready(&config, port, WAIT).await;

    let logged = |tool: &str, version: &str| {
        daemon.events().iter().any(|e| e["message"] == "render tool" && e["tool"] == tool && e["version"] == version)
    };
    assert!(logged("kustomize", "v5.8.1") && logged("helm", "v3.22.0"), "{}", daemon.log_text());

    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    let replicas = || async {
        deployments.get_opt("prod-kustomize-guestbook-ui").await.ok().flatten().and_then(|d| d.spec?.replicas)
    };
    assert_eq!(replicas().await, Some(1));
    let base = repo.work().join("apps/base/guestbook-ui-deployment.yaml");
    let text = std::fs::read_to_string(&base).unwrap().replace("replicas: 1", "replicas: 4");
    repo.push(&[("apps/base/guestbook-ui-deployment.yaml", &text)], "four replicas");
    let applied = common::eventually(WAIT, || async { replicas().await == Some(4) }).await;
    assert!(applied, "the push to the base was not rendered and applied: {}", daemon.log_text());
}

/// Runs `gitward <args>` with text logs; returns (exit code, stdout, stderr).
fn gitward_text(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GITWARD_LOG_FORMAT")
        .output()
        .expect("gitward runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The shipped config.toml, copied unchanged next to what it expects to find relative to
/// itself: the example repository (made from examples/repo as scripts/demo makes it) at
/// target/example-repo.git and the render tools at target/tools/bin.
fn shipped_config(dir: &Path) -> (PathBuf, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir.join("target/tools")).unwrap();
    std::os::unix::fs::symlink(tools_bin(), dir.join("target/tools/bin")).unwrap();
    let repo = common::GitRepo::new();
    repo.copy_dir(&root.join("examples/repo/."), ".");
    let revision = repo.commit_and_push("example manifests");
    let bare = dir.join("target/example-repo.git");
    let out = Command::new("git").args(["clone", "-q", "--bare"]).arg(repo.bare()).arg(&bare).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = dir.join("config.toml");
    std::fs::copy(root.join("config.toml"), &config).unwrap();
    (config, revision)
}

#[test]
fn validate_passes_on_the_shipped_config_and_renders_helm_for_a_recent_kubernetes() {
    let dir = tempfile::tempdir().unwrap();
    let (config, revision) = shipped_config(dir.path());
    let config = config.to_str().unwrap();
    let (code, stdout, stderr) = gitward_text(&["validate", "--config", config]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let short = &revision[..7];
    let lines: Vec<&str> = stdout.lines().collect();
    // The three [[sync]] units, then the [[sync_set]]'s, one per directory of teams/.
    let units = ["example", "example-kustomize", "example-helm", "team-blue", "team-green"];
    assert_eq!(lines.len(), units.len(), "one line per unit: {stdout}");
    for (line, unit) in lines.iter().zip(units) {
        assert!(line.starts_with(&format!("{unit}: valid {short} (")), "{stdout}");
    }
    assert!(!stderr.contains("ERROR") && !stderr.contains("WARN"), "{stderr}");

    // The chart asks for Kubernetes >= 1.28: an older --kube-version is refused by Helm itself.
    let (code, stdout, stderr) =
        gitward_text(&["validate", "--config", config, "--sync", "example-helm", "--kube-version", "v1.27.3"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("helm failed") && stderr.contains("v1.27.3"), "{stderr}");
    assert!(!stderr.contains("gitward-render-"), "scratch paths leak: {stderr}");
    let (code, _, stderr) = gitward_text(&["validate", "--config", config, "--kube-version", "latest"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("`latest` is not a Kubernetes version"), "{stderr}");
}

/// Runs `gitward validate` of unit `app`, the chart at `chart/` of `repo`, which must refuse it
/// (exit 2); its stderr.
fn chart_refused_by_validate(repo: &common::GitRepo) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gitward.toml");
    let unit = common::unit_toml("app", &repo.bare(), "chart", "default", "");
    std::fs::write(&file, config_text(&dir.path().join("state"), "", &unit)).unwrap();
    let (code, stdout, stderr) = gitward_text(&["validate", "--config", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    stderr
}

#[test]
fn missing_local_chart_dependencies_say_to_vendor_them() {
    let repo = common::GitRepo::new();
    repo.copy_dir(&common::fixtures().join("render/helm/charts/guestbook"), "chart");
    let chart = std::fs::read_to_string(repo.work().join("chart/Chart.yaml")).unwrap();
    repo.write(
        "chart/Chart.yaml",
        &format!("{chart}dependencies:\n  - name: mylib\n    version: 1.0.0\n    repository: file://../mylib\n"),
    );
    repo.commit_and_push("a dependency that is not vendored");
    let stderr = chart_refused_by_validate(&repo);
    assert!(stderr.contains("chart: chart dependencies not in chart/charts/: mylib"), "{stderr}");
    assert!(
        stderr.contains(
            "gitward fetches only those with an https, http or oci repository: vendor the others with \
                         `helm dependency build chart`"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("commit the charts/ directory"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line per error: {stderr}");
}

/// A template that renders invalid YAML is Helm's parse error, without the hint to pass
/// `--debug` (gitward runs `helm template`; its users have no command line to add it to).
#[test]
fn a_chart_rendering_invalid_yaml_is_named_without_helms_debug_hint() {
    let repo = common::GitRepo::new();
    repo.copy_dir(&common::fixtures().join("render/helm/charts/guestbook"), "chart");
    repo.write(
        "chart/templates/broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata:\n  a: [\n",
    );
    repo.commit_and_push("a template that is not YAML");
    let stderr = chart_refused_by_validate(&repo);
    assert!(stderr.contains("helm failed") && stderr.contains("YAML parse error on"), "{stderr}");
    assert!(stderr.contains("templates/broken.yaml"), "{stderr}");
    assert!(!stderr.contains("--debug"), "a hint users cannot follow: {stderr}");
}
