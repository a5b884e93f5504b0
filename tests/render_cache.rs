//! When a render may be served from the render cache, end to end: the real `kustomize` and
//! `helm`, real git repositories (and a real git remote for remote bases) and the real
//! apiserver. Every case is one where a stale render would be applied: a tool binary replaced
//! in place, a remote base changed upstream.

use crate::common;
use crate::render::{chain, config, config_text, tools_bin};

use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// A shell script at `path` that runs the real kustomize, piping `build` output through
/// `sed -e <edit>` (`None`: runs it unchanged). Written over the old file in place (same inode).
fn kustomize_wrapper(path: &Path, edit: Option<&str>) {
    let real = tools_bin().join("kustomize");
    let real = real.display();
    let script = match edit {
        None => format!("#!/bin/sh\nexec {real} \"$@\"\n"),
        Some(edit) => format!(
            "#!/bin/sh\nif [ \"$1\" = build ]; then\n  {real} \"$@\" | /bin/sed -e '{edit}'\nelse\n  exec {real} \"$@\"\nfi\n"
        ),
    };
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
    let env = common::setup("tool-swap").await;
    let ns = env.namespace.clone();
    let bin = tempfile::tempdir().unwrap();
    let wrapper = bin.path().join("kustomize");
    kustomize_wrapper(&wrapper, None);

    let repo = common::GitRepo::new();
    repo.write("app/kustomization.yaml", "resources: [cm.yaml]\n");
    repo.write("app/cm.yaml", &common::cm("tool", "before"));
    repo.commit_and_push("app");
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
    kustomize_wrapper(&wrapper, Some("s/value: before/value: after/"));
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2, "a replaced tool binary must render again");
    assert_eq!(configmap_value(&env.client, &ns, "tool", "value").await.as_deref(), Some("after"));

    // Unchanged binary, unchanged inputs: served from the cache.
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2);
}

#[tokio::test]
async fn a_remote_base_changed_upstream_is_picked_up_by_the_next_sync() {
    let env = common::setup("remote-base").await;
    let ns = env.namespace.clone();
    // The remote base: a git repository kustomize clones itself (`file://…//base?ref=main`,
    // the git CLI's own transport), committed to between syncs.
    let upstream = common::GitRepo::new();
    upstream.write("base/kustomization.yaml", "resources: [cm.yaml]\n");
    upstream.write("base/cm.yaml", &common::cm("remote", "one"));
    upstream.commit_and_push("base");
    let remote = format!("file://{}//base?ref=main", upstream.bare().display());

    let repo = common::GitRepo::new();
    repo.write("app/kustomization.yaml", &format!("resources:\n- {remote}\n"));
    repo.commit_and_push("app");
    let state = tempfile::tempdir().unwrap();
    let units = common::unit_toml("app", &repo.bare(), "app", &ns, "allow_remote_bases = true");
    let mut engine = common::engine(&env.client, &config(state.path(), "", &units), "app").await;

    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let object = format!("ConfigMap/{ns}/remote");
    assert_eq!(common::actions(&report).get(&object).map(String::as_str), Some("created"));
    assert_eq!(configmap_value(&env.client, &ns, "remote", "value").await.as_deref(), Some("one"));

    // Upstream moves; the unit's own repository does not. The next sync (a resync: same
    // revision) fetches the base again and applies what it holds now.
    upstream.write("base/cm.yaml", &common::cm("remote", "two"));
    upstream.commit_and_push("base moves");
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
    let env = common::setup("plugins").await;
    let ns = env.namespace.clone();
    let repo = common::GitRepo::new();
    repo.write(
        "apps/prod/kustomization.yaml",
        "resources: [cm.yaml]\ngenerators: [../../shared/gen]\ntransformers: [../../shared/labels]\n\
         validators: [../../shared/check]\n",
    );
    repo.write("apps/prod/cm.yaml", &common::cm("own", "x"));
    repo.write("shared/gen/kustomization.yaml", "resources: [gen.yaml]\n");
    repo.write(
        "shared/gen/gen.yaml",
        "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: generated}\n\
         literals: [from=shared-generator]\noptions: {disableNameSuffixHash: true}\n",
    );
    repo.write("shared/labels/kustomization.yaml", "resources: [labels.yaml]\n");
    repo.write("shared/labels/labels.yaml", &label_transformer("platform"));
    repo.write("shared/check/kustomization.yaml", "resources: []\n");
    repo.commit_and_push("plugins outside the overlay");
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
    assert_eq!(generated.data.clone().unwrap_or_default().get("from").map(String::as_str), Some("shared-generator"));
    assert_eq!(team(generated).as_deref(), Some("platform"));

    // The transformer's directory is an input of the render: a change there renders again.
    repo.write("shared/labels/labels.yaml", &label_transformer("payments"));
    repo.commit_and_push("another team");
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(engine.repo().renders(), 2);
    assert_eq!(team(api.get("own").await.unwrap()).as_deref(), Some("payments"));
}
