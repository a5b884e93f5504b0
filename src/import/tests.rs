//! The mappings on small objects: each field mapped to its key, the rest warned of.

use super::*;

fn objects(yaml: &str) -> Vec<Object> {
    crate::manifest::documents("test.yaml", yaml.as_bytes())
        .unwrap()
        .into_iter()
        .filter_map(|(i, v)| Object::from_value(v, format!("test.yaml (document {})", i + 1)))
        .collect()
}

fn run(tool: Tool, yaml: &str) -> (toml::Table, Vec<String>) {
    let imported = import(tool, &objects(yaml), Vec::new());
    let table: toml::Table = imported.config.parse().unwrap_or_else(|e| panic!("{e}\n{}", imported.config));
    (table, imported.warnings.iter().map(ToString::to_string).collect())
}

fn has(warnings: &[String], text: &str) -> bool {
    warnings.iter().any(|w| w == text)
}

const GIT_SOURCE: &str = "apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: repo, namespace: flux-system}
spec:
  url: https://git.example.com/fleet.git
  interval: 5m
  ref: {tag: v1.2.0}
  verify: {mode: HEAD, secretRef: {name: pgp-keys}}
";

#[test]
fn a_kustomization_maps_each_field_and_warns_of_the_rest() {
    let yaml = format!(
        "{GIT_SOURCE}---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: base, namespace: flux-system}}
spec: {{sourceRef: {{kind: GitRepository, name: repo}}, path: ./base, prune: true}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: apps, namespace: flux-system}}
spec:
  sourceRef: {{kind: GitRepository, name: repo}}
  path: ./apps/prod
  prune: false
  targetNamespace: shop
  serviceAccountName: deployer
  suspend: true
  force: true
  timeout: 2m30s
  interval: 1h
  dependsOn: [{{name: base}}]
  healthChecks: [{{kind: Deployment, name: web, namespace: shop}}]
  images: [{{name: web, newTag: '2'}}]
  postBuild:
    substitute: {{region: eu, replicas: '3'}}
    substituteFrom: [{{kind: Secret, name: vars}}]
  decryption: {{provider: sops, secretRef: {{name: sops-age}}}}
"
    );
    let (config, warnings) = run(Tool::Flux, &yaml);
    let apps = &config["sync"][1];
    assert_eq!(apps["name"].as_str(), Some("apps"));
    assert_eq!(apps["repo"].as_str(), Some("https://git.example.com/fleet.git"));
    assert_eq!(apps["ref"].as_str(), Some("v1.2.0"), "the tag");
    assert_eq!(apps["path"].as_str(), Some("apps/prod"));
    assert_eq!(apps["prune"].as_bool(), Some(false));
    assert_eq!(apps["namespace"].as_str(), Some("shop"));
    assert_eq!(apps["service_account"].as_str(), Some("deployer"));
    assert_eq!(apps["suspend"].as_bool(), Some(true));
    assert_eq!(apps["recreate_on_immutable"].as_bool(), Some(true));
    assert_eq!(apps["health_timeout"].as_str(), Some("2m 30s"));
    assert_eq!(apps["depends_on"].as_array().unwrap()[0].as_str(), Some("base"));
    assert_eq!(apps["substitute"]["vars"]["replicas"].as_str(), Some("3"));
    assert_eq!(apps["substitute"]["from"][0].as_str(), Some("Secret/flux-system/vars"), "a reference, not a value");
    assert_eq!(apps["decryption"]["age_key_file"].as_str(), Some("keys/sops-age.agekey"));
    assert_eq!(apps["verify"]["openpgp_keys_file"].as_str(), Some("keys/pgp-keys.asc"));
    assert_eq!(config["daemon"]["interval"].as_str(), Some("5m"), "the source's interval is the poll");
    assert_eq!(config["daemon"]["resync_interval"].as_str(), Some("1h"));
    assert!(has(&warnings, "Kustomization flux-system/apps: spec.healthChecks: no equivalent"), "{warnings:#?}");
    assert!(has(&warnings, "Kustomization flux-system/apps: spec.images: no equivalent"), "{warnings:#?}");
    assert!(
        warnings.iter().any(|w| w.starts_with("GitRepository flux-system/repo: spec.verify.mode: ")),
        "{warnings:#?}"
    );
}

#[test]
fn a_helm_release_from_git_takes_its_path_values_files_and_ignore_rules() {
    let yaml = format!(
        "{GIT_SOURCE}---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: web, namespace: apps}}
spec:
  targetNamespace: shop
  install: {{createNamespace: true, remediation: {{retries: 3}}}}
  chart:
    spec:
      chart: ./charts/web
      sourceRef: {{kind: GitRepository, name: repo, namespace: flux-system}}
      valuesFiles: [./charts/web/values-prod.yaml]
  values: {{replicas: 2, image: {{tag: v1}}, empty: null}}
  valuesFrom: [{{kind: ConfigMap, name: web-values}}]
  driftDetection:
    mode: enabled
    ignore:
      - paths: [/spec/replicas]
        target: {{kind: Deployment, labelSelector: 'app=web'}}
"
    );
    let (config, warnings) = run(Tool::Flux, &yaml);
    let web = &config["sync"][0];
    assert_eq!(web["repo"].as_str(), Some("https://git.example.com/fleet.git"));
    assert_eq!(web["path"].as_str(), Some("charts/web"));
    assert_eq!(web["namespace"].as_str(), Some("shop"));
    assert_eq!(web["create_namespace"].as_bool(), Some(true));
    assert_eq!(web["helm"]["release"].as_str(), Some("shop-web"), "Flux's default release name, written out");
    assert_eq!(web["helm"]["values_files"][0].as_str(), Some("charts/web/values-prod.yaml"));
    assert_eq!(web["helm"]["values"]["image"]["tag"].as_str(), Some("v1"));
    assert_eq!(web["ignore"][0]["kind"].as_str(), Some("Deployment"));
    assert_eq!(web["ignore"][0]["paths"][0].as_str(), Some("/spec/replicas"));
    assert_eq!(web["ignore"][0]["label_selector"]["match_labels"]["app"].as_str(), Some("web"));
    assert!(has(&warnings, "HelmRelease apps/web: spec.values.empty: null has no TOML equivalent: left out"));
    assert!(has(&warnings, "HelmRelease apps/web: spec.install.remediation: no equivalent"), "{warnings:#?}");
    assert!(
        warnings.iter().any(|w| w.starts_with("HelmRelease apps/web: spec.valuesFrom[0].name: ConfigMap web-values"))
    );
}

#[test]
fn an_oci_repository_is_a_unit_repo_by_tag_and_a_chart_by_semver() {
    let yaml = "apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: manifests, namespace: flux-system}
spec: {url: oci://ghcr.io/acme/manifests, ref: {tag: '1.0'}, verify: {provider: cosign, secretRef: {name: cosign-pub}}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: podinfo, namespace: flux-system}
spec: {url: oci://ghcr.io/stefanprodan/charts/podinfo, ref: {semver: '>=6.0.0'}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: app, namespace: flux-system}
spec: {sourceRef: {kind: OCIRepository, name: manifests}, path: ./, prune: true}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: podinfo, namespace: flux-system}
spec: {chartRef: {kind: OCIRepository, name: podinfo}}
";
    let (config, _) = run(Tool::Flux, yaml);
    assert_eq!(config["sync"][0]["repo"].as_str(), Some("oci://ghcr.io/acme/manifests:1.0"));
    assert_eq!(config["sync"][0]["verify"]["cosign_public_key_file"].as_str(), Some("keys/cosign-pub.pub"));
    assert!(config["sync"][0].get("path").is_none(), "the root");
    let helm = &config["sync"][1]["helm"];
    assert_eq!(helm["repo_url"].as_str(), Some("oci://ghcr.io/stefanprodan/charts"));
    assert_eq!(helm["chart"].as_str(), Some("podinfo"));
    assert_eq!(helm["version"].as_str(), Some(">=6.0.0"));
}

#[test]
fn an_application_maps_its_source_destination_policy_and_ignore_differences() {
    let yaml = "apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: cert-manager, namespace: argocd}
spec:
  project: platform
  source:
    repoURL: https://charts.jetstack.io
    chart: cert-manager
    targetRevision: v1.16.2
    helm:
      releaseName: cm
      valuesObject: {crds: {enabled: true}}
      parameters: [{name: replicas, value: '2'}]
  destination: {name: east, namespace: cert-manager}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
    syncOptions: [CreateNamespace=true, ServerSideApply=true, PruneLast=true]
  ignoreDifferences:
    - {group: apps, kind: Deployment, jsonPointers: [/spec/replicas], jqPathExpressions: ['.x']}
";
    let (config, warnings) = run(Tool::Argocd, yaml);
    let unit = &config["sync"][0];
    assert_eq!(unit["name"].as_str(), Some("cert-manager"));
    assert_eq!(unit["helm"]["repo_url"].as_str(), Some("https://charts.jetstack.io"));
    assert_eq!(unit["helm"]["version"].as_str(), Some("v1.16.2"));
    assert_eq!(unit["helm"]["release"].as_str(), Some("cm"));
    assert_eq!(unit["helm"]["values"]["crds"]["enabled"].as_bool(), Some(true));
    assert_eq!(unit["namespace"].as_str(), Some("cert-manager"));
    assert_eq!(unit["cluster"].as_str(), Some("east"));
    assert_eq!(unit["prune"].as_bool(), Some(true));
    assert_eq!(unit["create_namespace"].as_bool(), Some(true));
    assert_eq!(unit["ignore"][0]["group"].as_str(), Some("apps"));
    assert_eq!(config["daemon"]["self_heal"].as_bool(), Some(true));
    assert!(has(
        &warnings,
        "Application argocd/cert-manager: spec.syncPolicy.syncOptions[2]: PruneLast=true: no equivalent"
    ));
    assert!(
        has(&warnings, "Application argocd/cert-manager: spec.source.helm.parameters: no equivalent"),
        "{warnings:#?}"
    );
    assert!(warnings.iter().any(|w| w.contains("spec.ignoreDifferences[0].jqPathExpressions")), "{warnings:#?}");
}

#[test]
fn a_directory_generator_with_a_parameter_a_set_has_not_is_left_out_with_a_warning() {
    let yaml = "apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: addons, namespace: argocd}
spec:
  generators:
    - git: {repoURL: https://git.example.com/a.git, revision: main, directories: [{path: 'addons/*'}]}
  template:
    metadata: {name: '{{path[1]}}'}
    spec:
      source: {repoURL: https://git.example.com/a.git, targetRevision: main, path: '{{path}}'}
      destination: {server: https://kubernetes.default.svc, namespace: addons}
";
    let imported = import(Tool::Argocd, &objects(yaml), Vec::new());
    assert_eq!(imported.sets, 0);
    let text: Vec<String> = imported.warnings.iter().map(ToString::to_string).collect();
    assert!(
        text.iter().any(|w| w.starts_with("ApplicationSet argocd/addons: spec.template: {{path[1]}}: no equivalent")),
        "{text:#?}"
    );
}

#[test]
fn go_durations_are_written_as_gitward_reads_them() {
    assert_eq!(fields::duration("1m0s").as_deref(), Some("1m"));
    assert_eq!(fields::duration("1h30m").as_deref(), Some("1h 30m"));
    assert_eq!(fields::duration("0s").as_deref(), Some("0s"));
    assert_eq!(fields::duration("soon"), None);
    assert_eq!(fields::seconds("2m30s"), Some(150.0));
}
