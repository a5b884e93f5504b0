//! `[sync.substitute]` against the real apiserver and real git: `${var}` filled from inline
//! vars, a default, a ConfigMap and a Secret of the cluster, in plain and kustomize units; an
//! escape and a disabled object left; an undefined variable refusing the revision; a Secret's
//! value kept out of gitward's output even where the API server quotes it.

use crate::common;
use crate::sources::render::{config, config_text, gitward};

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};

/// Creates ConfigMap `name` in `ns` with `data`.
async fn configmap(client: &kube::Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let data: BTreeMap<String, String> = data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some(data),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.unwrap();
}

/// `data` of the live ConfigMap `name`.
async fn data_of(client: &kube::Client, ns: &str, name: &str) -> BTreeMap<String, String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns).get(name).await.unwrap().data.unwrap_or_default()
}

const TEMPLATED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf-${env}\ndata:\n  \
    cluster: ${cluster}\n  region: ${region:=eu-west-1}\n  color: ${color}\n  script: echo $${HOME}\n";

const DISABLED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  annotations:\n    \
    gitward.dev/substitute: disabled\ndata:\n  x: ${nothing_defines_this}\n";

fn substitute_table(ns: &str) -> String {
    format!(
        "[sync.substitute]\nvars = {{ cluster = \"prod-eu\", env = \"prod\" }}\n\
         from = [\"ConfigMap/{ns}/vars\"]\n"
    )
}

/// A plain unit and a kustomize unit of the same objects: names, values, a default, an inline
/// variable over the ConfigMap's, the ConfigMap's own, an escape and a disabled object.
#[tokio::test]
async fn variables_default_escape_and_disabled_objects_in_plain_and_kustomize_units() {
    let (env, ns) = common::setup_ns("subst").await;
    let other = format!("{ns}-k");
    common::create_namespace(&env.client, &other).await;
    // `cluster` here loses to the inline one; `color` is the ConfigMap's alone; a key that is
    // no variable name is left out.
    configmap(&env.client, &ns, "vars", &[("cluster", "from-configmap"), ("color", "blue"), ("not.a.name", "x")]).await;
    let repo = common::GitRepo::new();
    repo.write("plain/conf.yaml", &format!("{TEMPLATED}---\n{DISABLED}"));
    repo.write("kust/conf.yaml", &format!("{TEMPLATED}---\n{DISABLED}"));
    repo.push(&[("kust/kustomization.yaml", "resources:\n- conf.yaml\n")], "templated objects");
    let table = substitute_table(&ns);
    let units = format!(
        "{}{}",
        common::unit_toml("plain", &repo.bare(), "plain", &ns, &format!("render = \"plain\"\n{table}")),
        common::unit_toml("kust", &repo.bare(), "kust", &other, &format!("render = \"kustomize\"\n{table}")),
    );
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &units);
    for (unit, namespace) in [("plain", &ns), ("kust", &other)] {
        let mut engine = common::engine(&env.client, &config, unit).await;
        let report = engine.sync().await.unwrap_or_else(|e| panic!("{unit}: {e}"));
        assert!(!report.changes.has_failures(), "{unit}: {:?}", common::actions(&report));
        let data = data_of(&env.client, namespace, "conf-prod").await;
        let expected = [("cluster", "prod-eu"), ("color", "blue"), ("region", "eu-west-1"), ("script", "echo ${HOME}")];
        let expected: BTreeMap<String, String> = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(data, expected, "{unit}");
        let raw = data_of(&env.client, namespace, "raw").await;
        assert_eq!(raw["x"], "${nothing_defines_this}", "{unit}: a disabled object is left as written");
    }
}

/// A revision referencing a variable nothing defines is refused whole, naming the file, the
/// document and the variable; the objects of the revision before stay as they were, and the
/// refused revision's other objects are not created.
#[tokio::test]
async fn an_undefined_variable_refuses_the_revision_and_the_last_one_stays() {
    let (env, ns, repo) = common::setup_repo("subst-undef").await;
    repo.write("app/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  v: ${version}\n");
    repo.commit_and_push("v1");
    let table = "[sync.substitute]\nvars = { version = \"1\" }\n";
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), "", &common::unit_toml("app", &repo.bare(), "app", &ns, table));
    let mut engine = common::engine(&env.client, &config, "app").await;
    engine.sync().await.unwrap();
    assert_eq!(data_of(&env.client, &ns, "a").await["v"], "1");

    repo.write("app/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  v: \"2\"\n");
    repo.write(
        "app/b.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b0\n---\napiVersion: v1\nkind: ConfigMap\n\
         metadata:\n  name: b\ndata:\n  v: ${versoin}\n",
    );
    repo.commit_and_push("a misspelt variable");
    let err = engine.sync().await.expect_err("the revision is refused").to_string();
    assert!(err.contains("app/b.yaml: document 2") && err.contains("variable `versoin`"), "{err}");
    let configmaps = Api::<ConfigMap>::namespaced(env.client.clone(), &ns);
    assert_eq!(data_of(&env.client, &ns, "a").await["v"], "1", "the last good revision stays");
    assert!(configmaps.get_opt("b0").await.unwrap().is_none(), "nothing of the refused revision is applied");
}

/// Values from a Secret go into the objects, and never into what gitward writes: not in the
/// log of a sync, not even where the API server quotes one in a refusal (a Service whose
/// `type` is the Secret's value: `Unsupported value: "…"`).
#[tokio::test]
async fn a_secret_value_is_substituted_and_masked_where_the_api_server_quotes_it() {
    let (env, ns) = common::setup_ns("subst-secret").await;
    let token = format!("{}{}", common::CANARY_PREFIX, common::unique("tok"));
    let quoted = format!("{}{}", common::CANARY_PREFIX, common::unique("type"));
    common::register_canary(&token);
    common::register_canary(&quoted);
    let secret = Secret {
        metadata: kube::api::ObjectMeta { name: Some("vars".into()), ..Default::default() },
        string_data: Some([("token".to_string(), token.clone()), ("svc_type".to_string(), quoted.clone())].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), &ns).create(&PostParams::default(), &secret).await.unwrap();
    let repo = common::GitRepo::new();
    repo.write(
        "app/token.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-token\nstringData:\n  token: ${token}\n",
    );
    repo.write(
        "app/svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: ${svc_type}\n  ports:\n  - port: 80\n",
    );
    repo.commit_and_push("objects holding Secret values");
    let dir = tempfile::tempdir().unwrap();
    let table = format!("[sync.substitute]\nfrom = [\"Secret/{ns}/vars\"]\n");
    let text = config_text(&dir.path().join("state"), "", &common::unit_toml("app", &repo.bare(), "app", &ns, &table));
    let file = dir.path().join("gitward.toml");
    std::fs::write(&file, text).unwrap();
    let (code, log) = gitward(&["sync", "--config", file.to_str().unwrap()]);
    assert_ne!(code, 0, "the Service is refused: {}", log.len());
    let live = Api::<Secret>::namespaced(env.client.clone(), &ns).get("app-token").await.unwrap();
    assert_eq!(live.data.unwrap()["token"].0, token.as_bytes(), "the Secret's value is applied");
    assert!(log.contains("Unsupported value") && log.contains("***"), "the refusal is logged, masked");
    common::assert_no_secret(&log, &token);
    common::assert_no_secret(&log, &quoted);
}
