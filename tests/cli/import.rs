//! `gitward import` on real Flux and Argo CD repositories (tests/fixtures/
//! flux2-kustomize-helm-example, argocd-applicationset): the config it writes passes `gitward
//! validate`, the fields with no equivalent are warnings naming object and field, and the
//! imported units render what the tools render from the original objects — `kustomize build`
//! of a Kustomization's path, `helm template` of a HelmRelease's chart with its values.
//!
//! The fixtures point at the internet (github.com, the podinfo chart repository): each test
//! copies its fixture into a local git repository and rewrites those URLs in the copy, to the
//! local bare repository and to a chart repository on loopback serving a chart named
//! `podinfo` (packaged by the real helm, templates that print the values given), before the
//! import reads it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;
use crate::common::charts::ChartServer;
use crate::sources::render::{config_text, tool};

/// What one gitward command printed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs gitward with `args`, text logs, `TMPDIR` under `dir`.
fn gitward(args: &[&str], dir: &Path) -> Run {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GITWARD_LOG_FORMAT")
        .env("TMPDIR", &tmp)
        .output()
        .expect("gitward runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Run { code: out.status.code(), stdout: text(&out.stdout), stderr: text(&out.stderr) }
}

/// A git repository holding a copy of fixture `name` at its root, with each (from, to) of
/// `rewrites` replaced in `files` (each found in one of them at least), committed and pushed.
fn fixture_repo(name: &str, files: &[&str], rewrites: &[(&str, &str)]) -> common::GitRepo {
    let repo = common::GitRepo::new();
    let from = common::fixtures().join(name);
    let status = Command::new("cp").arg("-rT").arg(&from).arg(repo.work()).status().unwrap();
    assert!(status.success());
    let mut found = vec![false; rewrites.len()];
    for file in files {
        let path = repo.work().join(file);
        let mut text = std::fs::read_to_string(&path).unwrap();
        for (i, (from, to)) in rewrites.iter().enumerate() {
            found[i] |= text.contains(from);
            text = text.replace(from, to);
        }
        std::fs::write(path, text).unwrap();
    }
    assert!(found.iter().all(|f| *f), "every URL rewritten is in the fixture: {rewrites:?}");
    repo.commit_and_push("the fixture, its URLs made local");
    repo
}

/// Runs `gitward import <tool> -f <each of paths>` into `dir/imported.toml`, then writes
/// `dir/gitward.toml`: the import with the tests' `[daemon] state_dir` and `[render]` tools
/// (and `render_extra`) added. Returns the import's run and the final config.
fn import(tool_name: &str, paths: &[PathBuf], dir: &Path, render_extra: &str) -> (Run, PathBuf) {
    let out = dir.join("imported.toml");
    let mut args = vec!["import".to_owned(), tool_name.to_owned(), "-o".into(), out.display().to_string()];
    for path in paths {
        args.extend(["-f".to_owned(), path.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = gitward(&args, dir);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let imported: toml::Table = std::fs::read_to_string(&out).unwrap().parse().expect("the import is TOML");
    let ours: toml::Table = config_text(&dir.join("state"), render_extra, "").parse().unwrap();
    let mut merged = imported.clone();
    for (table, values) in ours {
        let into = merged.entry(table).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let into = into.as_table_mut().unwrap();
        into.extend(values.as_table().unwrap().clone());
    }
    let config = dir.join("gitward.toml");
    std::fs::write(&config, toml::to_string(&merged).unwrap()).unwrap();
    (run, config)
}

/// The documents of a YAML stream.
fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml).unwrap_or_else(|e| panic!("not a YAML stream: {e}\n{yaml}"))
}

/// `doc` without the label and annotation gitward adds (a map left empty dropped).
fn without_gitward(mut doc: Value) -> Value {
    let meta = doc["metadata"].as_object_mut().unwrap();
    for (field, key) in [("labels", "applyset.kubernetes.io/part-of"), ("annotations", "gitward.dev/desired-hash")] {
        if let Some(map) = meta.get_mut(field).and_then(Value::as_object_mut) {
            map.remove(key);
            if map.is_empty() {
                meta.remove(field);
            }
        }
    }
    doc
}

/// Sorted by kind and name, for comparing two renders.
fn sorted(mut docs: Vec<Value>) -> Vec<Value> {
    docs.sort_by_key(|d| (d["kind"].to_string(), d["metadata"]["name"].to_string()));
    docs
}

/// `gitward render --sync <unit>` of `config`, gitward's own label and annotation left out.
fn rendered(config: &Path, unit: &str, dir: &Path) -> Vec<Value> {
    let run = gitward(&["render", "--config", config.to_str().unwrap(), "--sync", unit], dir);
    assert_eq!(run.code, Some(0), "render {unit}: {}", run.stderr);
    sorted(documents(&run.stdout).into_iter().map(without_gitward).collect())
}

/// Whether `stderr` holds the warning line `text`.
fn warned(stderr: &str, text: &str) -> bool {
    stderr.lines().any(|l| l == format!("warning: {text}"))
}

/// A chart template printing the values a HelmRelease of the fixture sets.
const VALUES_TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-values\n\
    data:\n  redis: {{ .Values.redis | toJson | quote }}\n  httpRoute: {{ .Values.httpRoute | toJson | quote }}\n";

#[test]
fn flux_kustomizations_and_helm_releases_import_into_units_that_render_as_flux_would() {
    let work = tempfile::tempdir().unwrap();
    let server = ChartServer::start(&work.path().join("served"));
    let archive = server.publish_with(work.path(), "podinfo", "6.0.0", &[("values.yaml", VALUES_TEMPLATE)]);
    let upstream = "https://github.com/fluxcd/flux2-kustomize-helm-example";
    let bare = common::GitRepo::new();
    let repo = fixture_repo(
        "flux2-kustomize-helm-example",
        &["local/flux-system.yaml", "apps/base/podinfo/repository.yaml"],
        &[(upstream, bare.bare().to_str().unwrap()), ("https://stefanprodan.github.io/podinfo", &server.url)],
    );
    // The repository the GitRepository names is the one the fixture was pushed to.
    std::fs::remove_dir_all(bare.bare()).unwrap();
    let status = Command::new("cp").arg("-r").arg(repo.bare()).arg(bare.bare()).status().unwrap();
    assert!(status.success());

    let dir = tempfile::tempdir().unwrap();
    let w = repo.work();
    // clusters/staging/infrastructure.yaml is left out: its units apply cert-manager's and
    // Envoy Gateway's custom resources, whose CRDs come with charts from the internet.
    let staging = w.join("clusters/staging");
    let paths = [staging.join("apps.yaml"), staging.join("artifacts.yaml"), w.join("apps/base"), w.join("local")];
    let (run, config) = import("flux", &paths, dir.path(), &format!("chart_repositories = [\"{}\"]\n", server.url));
    assert!(
        warned(
            &run.stderr,
            "Kustomization flux-system/apps: spec.retryInterval: no equivalent: a failed sync is retried with gitward's backoff"
        ),
        "{}",
        run.stderr
    );
    assert!(
        warned(
            &run.stderr,
            "Kustomization flux-system/apps: spec.dependsOn[0].name: Kustomization flux-system/infra-configs was not among the objects read"
        ),
        "{}",
        run.stderr
    );
    assert!(
        warned(
            &run.stderr,
            "Kustomization flux-system/apps-settings: spec.postBuild.substituteFrom[1].optional: no equivalent: every \
             `from` object must exist, or the sync fails"
        ),
        "{}",
        run.stderr
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("depends_on = [\"apps\"]"), "{text}");
    assert!(text.contains("path = \"apps/staging\""), "the ExternalArtifact's path in the repository: {text}");
    assert!(text.contains("\"Secret/flux-system/cluster-secrets\""), "a Secret stays a reference: {text}");

    let validate = gitward(&["validate", "--config", config.to_str().unwrap()], dir.path());
    assert_eq!(validate.code, Some(0), "{}\n{text}", validate.stderr);

    let built = sorted(documents(&tool("kustomize", &["build", "apps/staging"], &w)));
    assert!(!built.is_empty());
    assert_eq!(rendered(&config, "apps", dir.path()), built, "the apps Kustomization's path, as kustomize builds it");

    let release: Value =
        documents(&std::fs::read_to_string(w.join("apps/base/podinfo/release.yaml")).unwrap()).remove(0);
    let values = dir.path().join("values.json");
    std::fs::write(&values, release["spec"]["values"].to_string()).unwrap();
    let home = work.path().join("helm-home");
    let args =
        ["template", "podinfo", archive.to_str().unwrap(), "--namespace", "podinfo", "-f", values.to_str().unwrap()];
    let mut templated = documents(&common::charts::helm(&home, &args, work.path()));
    // helm template leaves namespaced objects without a namespace; a sync gives them the
    // unit's, as `kubectl apply -n` would.
    for doc in &mut templated {
        doc["metadata"].as_object_mut().unwrap().entry("namespace").or_insert(Value::from("podinfo"));
    }
    let templated = sorted(templated);
    let mine = rendered(&config, "podinfo", dir.path());
    assert_eq!(mine, templated, "the HelmRelease's chart with its values, as helm templates it");
    assert!(mine.iter().any(|d| d["data"]["redis"].as_str().is_some_and(|r| r.contains("8.6.2"))), "{mine:?}");
}

#[test]
fn argocd_application_sets_import_into_a_sync_set_and_units_that_render_as_argo_would() {
    let upstream = "https://github.com/argoproj/applicationset.git";
    let bare = common::GitRepo::new();
    let set_files =
        ["examples/git-generator-directory/git-directories-example.yaml", "examples/list-generator/list-example.yaml"];
    // Upstream sends both list elements to namespace guestbook of one cluster: one object in two
    // units, which validate refuses (Argo CD warns of it as a shared resource). Each element
    // gets its own namespace here.
    let bare_path = bare.bare().display().to_string();
    let rewrites = [(upstream, bare_path.as_str()), ("namespace: guestbook", "namespace: '{{cluster}}'")];
    let repo = fixture_repo("argocd-applicationset", &set_files, &rewrites);
    // Upstream's argo-workflows install holds apiextensions.k8s.io/v1beta1 CRDs, removed in
    // Kubernetes 1.22: validate refuses them as the API server would. They are taken out here.
    let install =
        repo.work().join("examples/git-generator-directory/cluster-addons/argo-workflows/namespace-install.yaml");
    let text = std::fs::read_to_string(&install).unwrap();
    let kept: Vec<&str> = text.split("\n---\n").filter(|d| !d.contains("kind: CustomResourceDefinition")).collect();
    assert!(kept.len() < text.split("\n---\n").count(), "the v1beta1 CRDs are there");
    std::fs::write(&install, kept.join("\n---\n")).unwrap();
    repo.commit_and_push("without the v1beta1 CRDs");
    std::fs::remove_dir_all(bare.bare()).unwrap();
    let status = Command::new("cp").arg("-r").arg(repo.bare()).arg(bare.bare()).status().unwrap();
    assert!(status.success());

    let dir = tempfile::tempdir().unwrap();
    let w = repo.work();
    let (run, config) = import("argocd", &[w.join("examples"), w.join("local")], dir.path(), "");
    assert!(
        warned(
            &run.stderr,
            "AppProject argocd/default: spec.sourceRepos: no equivalent: gitward bounds a unit by the RBAC of its \
             service_account"
        ),
        "{}",
        run.stderr
    );
    assert!(
        warned(
            &run.stderr,
            "ApplicationSet guestbook: spec.template.spec.syncPolicy: not set: Argo CD syncs this Application only \
             when asked; gitward syncs every unit on its own"
        ),
        "{}",
        run.stderr
    );
    let text = std::fs::read_to_string(&config).unwrap();
    let parsed: toml::Table = text.parse().unwrap();
    let set = &parsed["sync_set"][0];
    assert_eq!(set["path_glob"].as_str(), Some("examples/git-generator-directory/cluster-addons/*"), "{text}");
    assert_eq!(set["name"].as_str(), Some("{dir}"), "{text}");
    let units: Vec<&str> = parsed["sync"].as_array().unwrap().iter().map(|u| u["name"].as_str().unwrap()).collect();
    assert_eq!(units, ["engineering-dev-guestbook", "engineering-prod-guestbook"], "one unit per list element");
    assert_eq!(parsed["sync"][0]["service_account"].as_str(), Some("guestbook-deployer"), "the project's account");

    let validate = gitward(&["validate", "--config", config.to_str().unwrap()], dir.path());
    assert_eq!(validate.code, Some(0), "{}\n{text}", validate.stderr);

    let addons = "examples/git-generator-directory/cluster-addons/argo-workflows";
    let mut built = documents(&tool("kustomize", &["build", addons], &w));
    // The install names no namespace: the destination's, `{{path.basename}}`, is given to
    // each object, by Argo CD as by gitward.
    for doc in &mut built {
        doc["metadata"].as_object_mut().unwrap().entry("namespace").or_insert(Value::from("argo-workflows"));
    }
    assert_eq!(
        rendered(&config, "argo-workflows", dir.path()),
        sorted(built),
        "the set's unit, as kustomize builds its directory"
    );
    let guestbook = "examples/list-generator/guestbook/engineering-dev";
    let mut plain = Vec::new();
    for file in ["guestbook-ui-deployment.yaml", "guestbook-ui-svc.yaml"] {
        let mut doc = documents(&std::fs::read_to_string(w.join(guestbook).join(file)).unwrap()).remove(0);
        doc["metadata"]["namespace"] = Value::from("engineering-dev");
        plain.push(doc);
    }
    assert_eq!(rendered(&config, "engineering-dev-guestbook", dir.path()), sorted(plain), "the list element's path");
}

/// Runs `kubectl` with `args` and `stdin`; panics when it fails.
fn kubectl_in(args: &[&str], stdin: &str) {
    use std::io::Write as _;
    let mut child = Command::new("kubectl")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn from_the_cluster_the_live_helm_release_and_its_repository_import_as_a_chart_unit() {
    let (_env, namespace) = common::setup_ns("import-live").await;
    let fixture = common::fixtures().join("flux2-kustomize-helm-example");
    let crds = std::fs::read_to_string(fixture.join("local/crds/flux-crds.yaml")).unwrap();
    kubectl_in(&["apply", "--server-side", "-f", "-"], &crds);
    let established = common::kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/helmreleases.helm.toolkit.fluxcd.io",
        "crd/helmrepositories.source.toolkit.fluxcd.io",
    ]);
    assert!(established.status.success(), "{}", String::from_utf8_lossy(&established.stderr));
    let objects = ["apps/base/podinfo/repository.yaml", "apps/base/podinfo/release.yaml"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(fixture.join(f))
                .unwrap()
                .replace("namespace: podinfo", &format!("namespace: {namespace}"))
        })
        .collect::<Vec<_>>()
        .join("---\n");
    kubectl_in(&["apply", "--server-side", "-f", "-"], &objects);

    let dir = tempfile::tempdir().unwrap();
    let run = gitward(&["import", "flux", "--from-cluster"], dir.path());
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        warned(&run.stderr, "GitRepository.source.toolkit.fluxcd.io: not served by the cluster: none read"),
        "{}",
        run.stderr
    );
    let config: toml::Table = run.stdout.parse().expect("TOML on stdout");
    let unit = config["sync"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["namespace"].as_str() == Some(namespace.as_str()))
        .unwrap_or_else(|| panic!("no unit of {namespace}: {}", run.stdout));
    assert_eq!(unit["helm"]["repo_url"].as_str(), Some("https://stefanprodan.github.io/podinfo"));
    assert_eq!(unit["helm"]["chart"].as_str(), Some("podinfo"));
    assert_eq!(unit["helm"]["release"].as_str(), Some("podinfo"));
    assert_eq!(unit["helm"]["values"]["redis"]["tag"].as_str(), Some("8.6.2"), "the live object's values");
}
