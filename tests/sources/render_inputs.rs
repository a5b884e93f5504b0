//! What a render reads besides the revision's files, end to end: the real `kustomize` and
//! `helm`, real git repositories (and a git remote for remote bases) and the real apiserver.
//! Every case is one where a stale or failed render would be applied or block the unit: a
//! tool binary replaced in place, a remote base changed upstream, generator and transformer
//! directories outside the unit's path, an aggregated API that is down while Helm asks for
//! the cluster's capabilities.

use crate::common;
use crate::sources::render::{chain, config, config_text, tools_bin};

use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// A shell script at `path` standing in for kustomize: `version` prints a fixed line, `build
/// <dir>` prints `<dir>/cm.yaml` through `sed -e <edit>` (`None`: unchanged). Written over the
/// old file in place (same inode). It does not run the real kustomize: the render sandbox grants
/// a tool its own binary and the system directories, not another binary beside it.
fn kustomize_wrapper(path: &Path, edit: Option<&str>) {
    let edit = edit.unwrap_or("");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = build ]; then\n  /bin/sed -e '{edit}' \"$2/cm.yaml\"\nelse\n  echo v5.8.1\nfi\n"
    );
    std::fs::write(path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

async fn configmap_value(client: &kube::Client, ns: &str, name: &str, key: &str) -> Option<String> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns).get(name).await.unwrap();
    cm.data.unwrap_or_default().get(key).cloned()
}

#[tokio::test]
async fn a_tool_binary_replaced_in_place_renders_again() {
    let (env, ns) = common::setup_ns("tool-swap").await;
    let bin = tempfile::tempdir().unwrap();
    let wrapper = bin.path().join("kustomize");
    kustomize_wrapper(&wrapper, None);

    let repo = common::GitRepo::new();
    repo.write("app/kustomization.yaml", "resources: [cm.yaml]\n");
    repo.push(&[("app/cm.yaml", &common::cm("tool", "before"))], "app");
    let state = tempfile::tempdir().unwrap();
    let render = format!("kustomize = \"{}\"", wrapper.display());
    let units = common::unit_toml("app", &repo.bare(), "app", &ns, "");
    // `[render] kustomize` twice would be refused: the wrapper replaces the default line.
    let text = config_text(state.path(), "", &units)
        .lines()
        .map(|l| if l.starts_with("kustomize = ") { render.clone() } else { l.to_owned() })
        .collect::<Vec<_>>()
        .join("\n");
    let config = gitward::config::Config::from_toml(&text, state.path(), "test.toml").unwrap();
    let mut engine = common::engine(&env.client, &config, "app").await;

    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 1);
    assert_eq!(configmap_value(&env.client, &ns, "tool", "value").await.as_deref(), Some("before"));

    // The same version line, another binary: its output must be rendered, not the cached one.
    kustomize_wrapper(&wrapper, Some("s/before/after/"));
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2, "a replaced tool binary must render again");
    assert_eq!(configmap_value(&env.client, &ns, "tool", "value").await.as_deref(), Some("after"));

    // Unchanged binary, unchanged inputs: served from the cache.
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2);
}

#[tokio::test]
async fn a_remote_base_changed_upstream_is_picked_up_by_the_next_sync() {
    let (env, ns) = common::setup_ns("remote-base").await;
    // The remote base: a git repository kustomize clones itself over HTTPS (the real
    // `git http-backend` on a loopback port, listed with its port in `remote_base_hosts`, its
    // self-signed certificate given as `remote_base_ca_file`), committed to between syncs.
    let upstream = common::GitRepo::new();
    upstream.write("base/kustomization.yaml", "resources: [cm.yaml]\n");
    upstream.push(&[("base/cm.yaml", &common::cm("remote", "one"))], "base");
    let bare = upstream.bare();
    let server = crate::common::git_remote::GitHttps::serve(bare.parent().unwrap());
    let remote = format!("{}//base?ref=main", server.url(&bare.file_name().unwrap().to_string_lossy()));
    let port = remote.split(':').nth(2).and_then(|p| p.split('/').next()).unwrap().to_owned();
    let render =
        format!("remote_base_hosts = [\"127.0.0.1:{port}\"]\nremote_base_ca_file = \"{}\"", server.cert.display());

    let repo = common::GitRepo::new();
    repo.push(&[("app/kustomization.yaml", &format!("resources:\n- {remote}\n"))], "app");
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("app", &repo.bare(), "app", &ns, "allow_remote_bases = true");
    let mut engine = common::engine(&env.client, &config(state.path(), &render, &units), "app").await;

    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let object = format!("ConfigMap/{ns}/remote");
    assert_eq!(common::actions(&report).get(&object).map(String::as_str), Some("created"));
    assert_eq!(configmap_value(&env.client, &ns, "remote", "value").await.as_deref(), Some("one"));

    // Upstream moves; the unit's own repository does not. The next sync (a resync: same
    // revision) fetches the base again and applies what it holds now.
    upstream.push(&[("base/cm.yaml", &common::cm("remote", "two"))], "base moves");
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2, "a render that read a remote base must not be served from the cache");
    assert_eq!(common::actions(&report).get(&object).map(String::as_str), Some("configured"));
    assert_eq!(configmap_value(&env.client, &ns, "remote", "value").await.as_deref(), Some("two"));
}

/// A `builtin` LabelTransformer config setting `team: <team>` on every object.
fn label_transformer(team: &str) -> String {
    format!(
        "apiVersion: builtin\nkind: LabelTransformer\nmetadata: {{name: team}}\nlabels: {{team: {team}}}\n\
         fieldSpecs:\n- path: metadata/labels\n  create: true\n"
    )
}

#[tokio::test]
async fn generators_transformers_and_validators_outside_the_units_path_render_and_key_the_cache() {
    let (env, ns, repo) = common::setup_repo("plugins").await;
    repo.write(
        "apps/prod/kustomization.yaml",
        "resources: [cm.yaml]\ngenerators: [../../org/gen]\ntransformers: [../../org/labels]\n\
         validators: [../../org/check]\n",
    );
    repo.write("apps/prod/cm.yaml", &common::cm("own", "x"));
    repo.write("org/gen/kustomization.yaml", "resources: [gen.yaml]\n");
    repo.write(
        "org/gen/gen.yaml",
        "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: generated}\n\
         literals: [from=org-generator]\noptions: {disableNameSuffixHash: true}\n",
    );
    repo.write("org/labels/kustomization.yaml", "resources: [labels.yaml]\n");
    repo.write("org/labels/labels.yaml", &label_transformer("platform"));
    repo.push(&[("org/check/kustomization.yaml", "resources: []\n")], "plugins outside the overlay");
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("prod", &repo.bare(), "apps/prod", &ns, "");
    let mut engine = common::engine(&env.client, &config(state.path(), "", &units), "prod").await;

    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let actions = common::actions(&report);
    for name in ["own", "generated"] {
        assert_eq!(actions.get(&format!("ConfigMap/{ns}/{name}")).map(String::as_str), Some("created"), "{actions:?}");
    }
    let api = Api::<ConfigMap>::namespaced(env.client.clone(), &ns);
    let team = |cm: ConfigMap| cm.metadata.labels.unwrap_or_default().get("team").cloned();
    assert_eq!(team(api.get("own").await.unwrap()).as_deref(), Some("platform"));
    let generated = api.get("generated").await.unwrap();
    assert_eq!(generated.data.clone().unwrap_or_default().get("from").map(String::as_str), Some("org-generator"));
    assert_eq!(team(generated).as_deref(), Some("platform"));

    // The transformer's directory is an input of the render: a change there renders again.
    repo.push(&[("org/labels/labels.yaml", &label_transformer("payments"))], "another team");
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2);
    assert_eq!(team(api.get("own").await.unwrap()).as_deref(), Some("payments"));
}

/// A Service with no endpoints, and an APIService of a fresh group `<unique>.gitward.dev`
/// served by it: the aggregator marks it not Available and answers its group version with
/// 503, as it does for a metrics-server whose pods are down. Returns the group version; the
/// APIService is deleted by [`DownApi`]'s drop.
struct DownApi {
    name: String,
    group_version: String,
}

impl DownApi {
    async fn register(client: &kube::Client, ns: &str) -> Self {
        use kube::api::{DynamicObject, PostParams};
        use kube::core::{ApiResource, GroupVersionKind};
        let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), ns);
        let service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "nobody"},
            "spec": {"ports": [{"port": 443, "targetPort": 443}]}
        }))
        .unwrap();
        services.create(&PostParams::default(), &service).await.unwrap();
        let group = format!("{}.gitward.dev", common::unique("down"));
        let name = format!("v1beta1.{group}");
        let gvk = GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService");
        let api: Api<DynamicObject> =
            Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "apiservices"));
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": group, "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": true, "service": {"namespace": ns, "name": "nobody", "port": 443}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
        // Positive signal: the aggregator says it is not Available (a GET of its group version
        // would answer 503, which the test client retries for minutes).
        let down = common::eventually(std::time::Duration::from_secs(30), || async {
            let status = api.get(&name).await.unwrap().data.get("status").cloned().unwrap_or_default();
            status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Available" && c["status"] == "False")
        })
        .await;
        assert!(down, "APIService {name} never became unavailable");
        Self { name, group_version: format!("{group}/v1beta1") }
    }
}

impl Drop for DownApi {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Other tests share the apiserver: leave no unavailable APIService behind. A client of
        // its own: the test's client is driven by the test's runtime, blocked in this drop.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let client = common::admin("gitward-test/cleanup").await;
                use kube::api::{DeleteParams, DynamicObject};
                use kube::core::{ApiResource, GroupVersionKind};
                let gvk = GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService");
                let api: Api<DynamicObject> =
                    Api::all_with(client, &ApiResource::from_gvk_with_plural(&gvk, "apiservices"));
                let _ = api.delete(&name, &DeleteParams::default()).await;
            })
        })
        .join();
    }
}

#[tokio::test]
async fn a_helm_unit_syncs_while_an_aggregated_api_is_unavailable_and_is_told_it_is_not_served() {
    let (env, ns) = common::setup_ns("helm-down-api").await;
    let down = DownApi::register(&env.client, &ns).await;
    let repo = common::GitRepo::new();
    repo.write("chart/Chart.yaml", "apiVersion: v2\nname: caps\nversion: 0.1.0\n");
    repo.write(
        "chart/templates/caps.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n  \
             deployments: {{{{ .Capabilities.APIVersions.Has \"apps/v1/Deployment\" | quote }}}}\n  \
             down: {{{{ .Capabilities.APIVersions.Has \"{}\" | quote }}}}\n",
            down.group_version
        ),
    );
    repo.commit_and_push("chart");
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("caps", &repo.bare(), "chart", &ns, "");
    let config = config(state.path(), "", &units);
    // gitward's own client (its retry policy included), as the daemon connects.
    let client = gitward::cluster::connect(config.cluster_of(config.unit("caps").unwrap())).await.unwrap();
    let mut engine = common::engine(&client, &config, "caps").await;

    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(common::actions(&report).get(&format!("ConfigMap/{ns}/caps")).map(String::as_str), Some("created"));
    assert_eq!(configmap_value(&env.client, &ns, "caps", "deployments").await.as_deref(), Some("true"));
    assert_eq!(
        configmap_value(&env.client, &ns, "caps", "down").await.as_deref(),
        Some("false"),
        "an unavailable group version is not in .Capabilities.APIVersions, as under helm install"
    );
}

#[tokio::test]
async fn the_daemon_logs_an_unavailable_group_version_once_for_all_its_helm_units() {
    const WAIT: std::time::Duration = std::time::Duration::from_secs(60);
    let (env, ns) = common::setup_ns("helm-down-daemon").await;
    let down = DownApi::register(&env.client, &ns).await;
    let repo = common::GitRepo::new();
    repo.write("chart/Chart.yaml", "apiVersion: v2\nname: caps\nversion: 0.1.0\n");
    repo.write(
        "chart/templates/caps.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-caps\ndata:\n  value: rendered\n",
    );
    repo.commit_and_push("chart");
    let dir = tempfile::tempdir().unwrap();
    let units: String = ["one", "two"].iter().map(|u| common::unit_toml(u, &repo.bare(), "chart", &ns, "")).collect();
    let tools = tools_bin();
    let tables = format!("[render]\nhelm = \"{}\"\n", tools.join("helm").display());
    let (config, port) = common::daemon_config(dir.path(), &tables, "", &units);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;

    for unit in ["one", "two"] {
        let value = configmap_value(&env.client, &ns, &format!("{unit}-caps"), "value").await;
        assert_eq!(value.as_deref(), Some("rendered"), "unit {unit}: {}", daemon.log_text());
    }
    let warnings: Vec<_> = daemon
        .events()
        .into_iter()
        .filter(|e| e["group_version"] == down.group_version.as_str() && e["level"] == "WARN")
        .collect();
    assert_eq!(warnings.len(), 1, "logged once for both units: {warnings:?}");
    let message = warnings[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("left out of the Helm capabilities"), "{message}");
}
