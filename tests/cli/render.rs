//! `gitward render` run as a user runs it, on real git repositories and the real render tools:
//! a kustomize overlay prints what the real `kustomize build` prints plus gitward's label and
//! annotation, with the cluster out of reach; SOPS-decrypted values masked unless
//! `--show-secrets`; variables substituted and ignored paths left out; `--revision` an older
//! commit; a document that does not parse named, exit 2.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common;
use crate::sources::render::{age_key, config_text, tool};

/// What one `gitward render` printed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// A temporary directory with a config `gitward.toml` of these `[[sync]]` tables (the render
/// tools of the tests, state under `state/`) and a kubeconfig `unreachable.kubeconfig` whose
/// server nobody listens on.
struct Workspace {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Workspace {
    fn new(units: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("gitward.toml");
        std::fs::write(&config, config_text(&dir.path().join("state"), "", units)).unwrap();
        let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: \
                          https://127.0.0.1:9\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: gone\n  \
                          context:\n    cluster: gone\n    user: u\ncurrent-context: gone\n";
        std::fs::write(dir.path().join("unreachable.kubeconfig"), kubeconfig).unwrap();
        Self { dir, config }
    }

    /// Runs `gitward render --config <config> <args>` with text logs, the cluster unreachable
    /// (`KUBECONFIG` names a server nobody listens on) and `TMPDIR` in the workspace.
    fn render(&self, args: &[&str]) -> Run {
        let tmp = self.dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
            .args(["render", "--config"])
            .arg(&self.config)
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("GITWARD_LOG_FORMAT")
            .env("KUBECONFIG", self.dir.path().join("unreachable.kubeconfig"))
            .env("TMPDIR", &tmp)
            .output()
            .expect("gitward runs");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Run { code: out.status.code(), stdout: text(&out.stdout), stderr: text(&out.stderr) }
    }

    /// The ApplySet id of `unit`, as the engine takes it from the config.
    fn applyset_id(&self, unit: &str) -> String {
        let config = gitward::config::Config::load(&self.config).unwrap();
        gitward::cluster::inventory::Inventory::new(&config.unit(unit).unwrap().inventory).id
    }
}

/// The documents of a YAML stream.
fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml).unwrap_or_else(|e| panic!("not a YAML stream: {e}\n{yaml}"))
}

/// The document of `kind` named `name` among `docs`.
fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {docs:?}"))
}

/// `doc` without the label and annotation gitward adds, and what they were; a map left empty
/// is dropped, as `kustomize build` prints none.
fn split_gitward(mut doc: Value) -> (Value, Option<String>, Option<String>) {
    let meta = doc["metadata"].as_object_mut().unwrap();
    let mut take = |field: &str, key: &str| {
        let map = meta.get_mut(field)?.as_object_mut()?;
        let value = map.remove(key).and_then(|v| v.as_str().map(str::to_owned));
        if map.is_empty() {
            meta.remove(field);
        }
        value
    };
    let label = take("labels", "applyset.kubernetes.io/part-of");
    let annotation = take("annotations", "gitward.dev/desired-hash");
    (doc, label, annotation)
}

/// The repository with the kustomize fixture's overlay under `apps/`, its namespace `prod`.
fn kustomize_repo() -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.copy_dir(&common::fixtures().join("render/kustomize/apps"), "apps");
    repo.commit_and_push("the kustomize overlay");
    repo
}

#[test]
fn a_kustomize_overlay_renders_as_kustomize_builds_it_plus_gitwards_label_and_hash_without_a_cluster() {
    let repo = kustomize_repo();
    let ws = Workspace::new(&common::unit_toml("shop", &repo.bare(), "apps/overlays/prod", "shop", ""));
    let run = ws.render(&["--sync", "shop"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let rendered = documents(&run.stdout);
    let built = documents(&tool("kustomize", &["build", "apps/overlays/prod"], &repo.work()));
    assert_eq!(built.len(), 3, "the overlay builds a Deployment, a Service and a ConfigMap");
    assert_eq!(rendered.len(), built.len(), "{}", run.stdout);
    let id = ws.applyset_id("shop");
    for expected in &built {
        let (kind, name) = (expected["kind"].as_str().unwrap(), expected["metadata"]["name"].as_str().unwrap());
        let (body, label, annotation) = split_gitward(find(&rendered, kind, name).clone());
        assert_eq!(&body, expected, "{kind} {name}: kustomize build's object, nothing else changed");
        assert_eq!(label.as_deref(), Some(id.as_str()), "{kind} {name}: the ApplySet part-of label");
        assert_eq!(annotation, Some(gitward::manifest::desired_hash(expected)), "{kind} {name}: the desired hash");
    }
    assert!(run.stdout.contains("\n---\n"), "documents separated by ---:\n{}", run.stdout);
}

#[test]
fn plain_and_kustomize_units_render_with_the_cluster_unreachable_and_a_from_unit_says_it_needs_it() {
    let repo = kustomize_repo();
    let revision = repo.push(&[("plain/cm.yaml", &common::cm("plain", "1"))], "a plain unit beside the overlay");
    let from = "[sync.substitute]\nfrom = [\"ConfigMap/shop/cluster-vars\"]\n";
    let units = common::unit_toml("plain", &repo.bare(), "plain", "shop", "")
        + &common::unit_toml("overlay", &repo.bare(), "apps/overlays/prod", "shop", "")
        + &common::unit_toml("vars", &repo.bare(), "plain", "shop", from);
    let ws = Workspace::new(&units);
    let run = ws.render(&["--sync", "plain"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let docs = documents(&run.stdout);
    assert_eq!(docs.len(), 1);
    let cm = find(&docs, "ConfigMap", "plain");
    assert_eq!((&cm["metadata"]["namespace"], &cm["data"]["value"]), (&Value::from("shop"), &Value::from("1")));
    assert_eq!(cm["metadata"]["labels"]["applyset.kubernetes.io/part-of"], ws.applyset_id("plain").as_str());
    assert!(run.stderr.contains(&format!("revision={revision}")), "{}", run.stderr);

    let run = ws.render(&["--sync", "overlay"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(documents(&run.stdout).len(), 3, "{}", run.stdout);

    let run = ws.render(&["--sync", "vars"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "nothing printed: {}", run.stdout);
    assert!(
        run.stderr.contains("unit vars: [sync.substitute] from reads ConfigMap/shop/cluster-vars from the cluster"),
        "{}",
        run.stderr
    );
}

/// A Secret `db` whose `stringData.password` is `password`, encrypted by the real sops for
/// `recipient`.
fn sealed_secret(dir: &Path, recipient: &str, password: &str) -> String {
    let plain = dir.join("plain.yaml");
    std::fs::write(&plain, common::secret_yaml("db", password)).unwrap();
    let text = tool(
        "sops",
        &["encrypt", "--age", recipient, "--encrypted-regex", "^stringData$", plain.to_str().unwrap()],
        dir,
    );
    std::fs::remove_file(plain).unwrap();
    assert!(!text.contains(password) && text.contains("ENC[AES256_GCM"), "sops encrypted nothing");
    text
}

#[test]
fn a_sops_secret_is_decrypted_and_masked_and_shown_only_with_show_secrets() {
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = age_key(keys.path(), "key");
    let password = format!("{}render-{}", common::CANARY_PREFIX, common::unique("pw"));
    let repo = common::GitRepo::new();
    repo.write("app/db.enc.yaml", &sealed_secret(keys.path(), &public, &password));
    repo.push(&[("app/cm.yaml", &common::cm("plain", "1"))], "an encrypted Secret");
    let decryption = format!("[sync.decryption]\nage_key_file = \"{}\"\n", key.display());
    let ws = Workspace::new(&common::unit_toml("vault", &repo.bare(), "app", "shop", &decryption));

    let run = ws.render(&["--sync", "vault"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stdout.contains(&password) && !run.stderr.contains(&password), "the decrypted value printed");
    let docs = documents(&run.stdout);
    let secret = find(&docs, "Secret", "db");
    assert_eq!(secret["stringData"]["password"], "***", "masked");
    assert!(secret.get("sops").is_none(), "decrypted: no sops metadata left");
    assert_eq!(secret["metadata"]["labels"]["applyset.kubernetes.io/part-of"], ws.applyset_id("vault").as_str());
    assert_eq!(find(&docs, "ConfigMap", "plain")["data"]["value"], "1", "other objects as they are");

    let run = ws.render(&["--sync", "vault", "--show-secrets"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let docs = documents(&run.stdout);
    assert!(find(&docs, "Secret", "db")["stringData"]["password"] == password.as_str(), "shown when asked for");
}

#[test]
fn variables_are_substituted_and_ignored_paths_shown_as_a_create_sends_them() {
    let repo = common::GitRepo::new();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  greeting: hello ${place}\n  \
              region: ${region:=eu}\n  replicas: managed elsewhere\n";
    repo.push(&[("app/web.yaml", cm), ("app/other.yaml", &common::cm("other", "kept"))], "a ConfigMap with variables");
    let extra = "[sync.substitute]\nvars = { place = \"world\" }\n\n[[sync.ignore]]\nkind = \"ConfigMap\"\nname = \
                 \"web\"\npaths = [\"/data/replicas\"]\n";
    let ws = Workspace::new(&common::unit_toml("web", &repo.bare(), "app", "shop", extra));
    let run = ws.render(&["--sync", "web"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let docs = documents(&run.stdout);
    let web = find(&docs, "ConfigMap", "web");
    let data: Vec<(&str, &str)> =
        web["data"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
    // An ignore rule leaves a field to another writer once the object exists; a create sends
    // git's value, and render shows what a create sends.
    let expected = [("greeting", "hello world"), ("region", "eu"), ("replicas", "managed elsewhere")];
    assert_eq!(data, expected, "substituted, /data/replicas kept");
    assert_eq!(find(&docs, "ConfigMap", "other")["data"]["value"], "kept");
}

#[test]
fn revision_renders_an_older_commit() {
    let repo = common::GitRepo::new();
    let old = repo.push(&[("app/cm.yaml", &common::cm("web", "old"))], "old");
    repo.git(&["tag", "v1"], &repo.work());
    repo.git(&["push", "origin", "v1"], &repo.work());
    repo.push(&[("app/cm.yaml", &common::cm("web", "new")), ("app/added.yaml", &common::cm("added", "new"))], "new");
    let ws = Workspace::new(&common::unit_toml("web", &repo.bare(), "app", "shop", ""));
    let value = |args: &[&str]| {
        let run = ws.render(args);
        assert_eq!(run.code, Some(0), "{args:?}: {}", run.stderr);
        let docs = documents(&run.stdout);
        (find(&docs, "ConfigMap", "web")["data"]["value"].as_str().unwrap().to_owned(), docs.len())
    };
    assert_eq!(value(&["--sync", "web"]), ("new".to_owned(), 2), "the ref's tip");
    assert_eq!(value(&["--sync", "web", "--revision", &old]), ("old".to_owned(), 1), "the commit asked for");
    assert_eq!(value(&["--sync", "web", "--revision", &old[..10]]), ("old".to_owned(), 1), "an abbreviated SHA");
    assert_eq!(value(&["--sync", "web", "--revision", "v1"]), ("old".to_owned(), 1), "a tag");
    let run = ws.render(&["--sync", "web", "--revision", "no-such-ref"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("no-such-ref"), "{}", run.stderr);
}

#[test]
fn a_document_that_does_not_parse_is_named_with_its_file_and_exits_2() {
    let repo = common::GitRepo::new();
    repo.write("app/good.yaml", &common::cm("good", "1"));
    let bad = common::cm("first", "1") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n";
    repo.push(&[("app/bad.yaml", &bad)], "a broken second document");
    let ws = Workspace::new(&common::unit_toml("web", &repo.bare(), "app", "shop", ""));
    let run = ws.render(&["--sync", "web"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "nothing printed: {}", run.stdout);
    assert!(run.stderr.contains("app/bad.yaml: document 2: unclosed bracket"), "{}", run.stderr);

    let run = ws.render(&["--sync", "nope"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("no sync unit named nope"), "{}", run.stderr);
}
