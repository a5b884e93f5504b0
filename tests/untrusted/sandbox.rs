//! The render sandbox against repositories and tools that try to leave it, through the real
//! `gitward sync` CLI, real git, the real kustomize and the real apiserver: a render tool that
//! reads a host file, writes outside its directory and connects to a loopback port; the ways a
//! kustomization can name a URL past the scans; a SOPS file whose metadata hides a Vault key.
//! Each attack ends with a loopback listener that got no connection and no host or fetched
//! bytes in the cluster.

use crate::common;
use crate::sources::render::{config_text, tools_bin};

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// Long enough for a cold `gitward sync` on a loaded machine: a liveness bound only.
const LIMIT: Duration = Duration::from_secs(120);

/// A loopback endpoint that answers every request with `host-secret` and counts connections.
pub(crate) struct Listener {
    /// The port it listens on.
    pub(crate) port: u16,
    connections: Arc<AtomicUsize>,
}

impl Listener {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nhost-secret");
            }
        });
        Self { port, connections }
    }

    pub(crate) fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// `gitward sync` of `units` with `[render]` plus `render_extra`, in `dir`.
fn sync(dir: &Path, render_extra: &str, units: &str) -> common::Run {
    let config = dir.join("gitward.toml");
    std::fs::write(&config, config_text(&dir.join("state"), render_extra, units)).unwrap();
    common::gitward(&["sync"], &config, LIMIT)
}

/// A "kustomize" that tries all three ways out on every run (its version too): it reads
/// `/etc/hostname` into the ConfigMap it prints, writes a file into `outside`, and sends a line
/// to the loopback `port`. Sandboxed, the render succeeds with none of them done; with
/// `sandbox = "off"` all three happen, so the test can fail.
#[tokio::test]
async fn a_render_tool_that_reads_the_host_writes_outside_and_connects_is_denied_all_three() {
    let (env, ns) = common::setup_ns("sandbox-tool").await;
    let listener = Listener::start();
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let tool = dir.path().join("evil-kustomize");
    std::fs::write(
        &tool,
        format!(
            "#!/bin/bash\n\
             host=$(cat /etc/hostname 2>/dev/null)\n\
             echo pwned > {outside}/pwned 2>/dev/null\n\
             echo hello 2>/dev/null > /dev/tcp/127.0.0.1/{port}\n\
             if [ \"$1\" = version ]; then echo v5.0.0-evil; exit 0; fi\n\
             printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: leak\\n  namespace: {ns}\\ndata:\\n  ran: \"yes\"\\n  host: \"%s\"\\n' \"$host\"\n",
            outside = outside.path().display(),
            port = listener.port,
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let repo = common::GitRepo::new();
    repo.push(&[("app/kustomization.yaml", "resources: []\n")], "a kustomization");
    let unit = common::unit_toml("evil", &repo.bare(), "app", &ns, "render = \"kustomize\"");
    // The tools of config_text, with kustomize replaced by the script.
    let render = |extra: &str| {
        let bin = tools_bin();
        config_text(&dir.path().join("state"), extra, &unit).replace(
            &format!("kustomize = \"{}\"", bin.join("kustomize").display()),
            &format!("kustomize = \"{}\"", tool.display()),
        )
    };
    let config = dir.path().join("gitward.toml");
    std::fs::write(&config, render("")).unwrap();
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let data = configmaps.get("leak").await.unwrap().data.unwrap_or_default();
    assert_eq!(data.get("ran").map(String::as_str), Some("yes"), "the tool ran: {data:?}");
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    assert_eq!(data.get("host").map(String::as_str), Some(""), "host bytes reached the cluster ({hostname:?})");
    assert!(!outside.path().join("pwned").exists(), "the tool wrote outside its directory");
    assert_eq!(listener.connections(), 0, "the tool reached the loopback listener");

    // Unconfined, the same tool does all three: the assertions above can fail.
    std::fs::write(&config, render("sandbox = \"off\"")).unwrap();
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stderr.contains("render sandbox off"), "the warning is logged: {}", run.stderr);
    let data = configmaps.get("leak").await.unwrap().data.unwrap_or_default();
    assert_eq!(data.get("host").map(String::as_str), Some(hostname.trim()));
    assert!(outside.path().join("pwned").exists());
    assert!(listener.connections() > 0);
}

/// Six kustomizations that name a URL where the scan before the render cannot see it (an
/// inline generator, the kustomization as a link, a duplicated key, a generator config file,
/// a transformer config file, a multi-line entry), built by the real kustomize: the loopback
/// endpoint is never reached and its bytes never reach the cluster, whether the scan refuses
/// the revision or kustomize fails inside the sandbox (Landlock: `connect: permission denied`).
/// Each is run once more with `sandbox = "off"`, where kustomize does fetch the URL.
#[tokio::test]
async fn kustomize_reaches_no_url_past_the_scans() {
    let (env, ns) = common::setup_ns("sandbox-urls").await;
    let listener = Listener::start();
    let url = format!("http://127.0.0.1:{}/creds", listener.port);
    let generator = |name: &str| {
        format!(
            "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
             options:\n  disableNameSuffixHash: true\nfiles:\n- k={url}\n"
        )
    };
    let head = format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\n");
    let cm_generator = |name: &str, entry: &str| {
        format!(
            "configMapGenerator:\n- name: {name}\n  options: {{disableNameSuffixHash: true}}\n  files:\n  - {entry}\n"
        )
    };
    let inline = generator("inline").lines().map(|l| format!("  {l}\n")).collect::<String>();
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        ("inline", vec![("app/kustomization.yaml", format!("{head}generators:\n- |-\n{inline}"))]),
        ("link", vec![("app/real.yaml", format!("{head}{}", cm_generator("link", &format!("k={url}"))))]),
        (
            "duplicate",
            vec![(
                "app/kustomization.yaml",
                format!("{head}configMapGenerator: []\n{}", cm_generator("duplicate", &format!("k={url}"))),
            )],
        ),
        (
            "generator-file",
            vec![
                ("app/kustomization.yaml", format!("{head}generators:\n- gen.yaml\n")),
                ("app/gen.yaml", generator("generator-file")),
            ],
        ),
        (
            "transformer-file",
            vec![
                ("app/kustomization.yaml", format!("{head}resources:\n- cm.yaml\ntransformers:\n- t.yaml\n")),
                ("app/cm.yaml", common::cm("transformer-file", "plain")),
                (
                    "app/t.yaml",
                    format!(
                        "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: {url}\n\
                         target:\n  kind: ConfigMap\n"
                    ),
                ),
            ],
        ),
        (
            "multi-line",
            vec![(
                "app/kustomization.yaml",
                format!("{head}{}", cm_generator("multi-line", &format!("\"k={url}\\n\""))),
            )],
        ),
    ];
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    for (name, files) in cases {
        let repo = common::GitRepo::new();
        for (path, content) in &files {
            repo.write(path, content);
        }
        if name == "link" {
            std::os::unix::fs::symlink("real.yaml", repo.work().join("app/kustomization.yaml")).unwrap();
        }
        repo.commit_and_push(name);
        let dir = tempfile::tempdir().unwrap();
        let unit = common::unit_toml(name, &repo.bare(), "app", &ns, "");
        let before = listener.connections();
        let run = sync(dir.path(), "", &unit);
        assert_eq!(listener.connections(), before, "{name}: kustomize reached the endpoint: {}", run.stderr);
        let fetched = configmaps.get_opt(name).await.unwrap().and_then(|c| c.data).unwrap_or_default();
        assert!(
            !fetched.values().any(|v| v.contains("host-secret")),
            "{name}: the endpoint's bytes reached the cluster: {fetched:?}"
        );
        assert_ne!(run.code, Some(0), "{name}: a render that needs the URL cannot succeed: {}", run.stderr);
        let error = common::log_events(&run.stderr, "sync failed").next().map(|e| e.to_string()).unwrap_or_default();
        eprintln!("{name}: exit {:?}: {error}", run.code);
        // Unconfined, kustomize fetches the URL (all but the multi-line entry, which it reads
        // as a local path): the assertions above can fail.
        if name != "multi-line" {
            let run = sync(dir.path(), "sandbox = \"off\"", &unit);
            assert!(listener.connections() > before, "{name}: unconfined, the URL is fetched: {}", run.stderr);
        }
    }
}

/// A SOPS file nested 70 levels deep whose metadata names only a Vault key at a loopback
/// address: the pre-check cannot read its metadata in full, so the file is refused naming it,
/// and sops never contacts the address.
#[tokio::test]
async fn a_sops_file_whose_metadata_hides_a_vault_key_is_refused_and_vault_never_asked() {
    let (_, ns) = common::setup_ns("sandbox-sops").await;
    let listener = Listener::start();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("age.key");
    let keygen = std::process::Command::new(tools_bin().join("age-keygen")).arg("-o").arg(&key).output().unwrap();
    assert!(keygen.status.success());
    let mut nested = String::from("apiVersion: v1\nkind: Secret\nmetadata:\n  name: deep\nstringData:\n");
    for depth in 1..=70 {
        nested.push_str(&format!("{}k:\n", "  ".repeat(depth)));
    }
    nested.push_str(&format!("{}v: ENC[AES256_GCM,data:abc,iv:x,tag:y,type:str]\n", "  ".repeat(71)));
    nested.push_str(&format!(
        "sops:\n  hc_vault:\n  - vault_address: http://127.0.0.1:{}\n    engine_path: transit\n    key_name: k\n    \
         created_at: \"2026-01-01T00:00:00Z\"\n    enc: vault:v1:abc\n  lastmodified: \"2026-01-01T00:00:00Z\"\n  \
         mac: ENC[AES256_GCM,data:m,iv:i,tag:t,type:str]\n  version: 3.9.0\n",
        listener.port
    ));
    let repo = common::GitRepo::new();
    repo.push(&[("app/secret.yaml", &nested)], "a deep SOPS file");
    let decryption = format!("[sync.decryption]\nage_key_file = \"{}\"\n", key.display());
    let run = sync(dir.path(), "", &common::unit_toml("deep", &repo.bare(), "app", &ns, &decryption));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("app/secret.yaml") && run.stderr.contains("refused"), "{}", run.stderr);
    assert_eq!(listener.connections(), 0, "sops contacted the Vault address");
}

/// A unit with `allow_remote_bases` reaches the hosts of its remote bases through gitward's
/// `CONNECT` proxy, and nothing else: `git` (run by kustomize) clones the base at
/// `https://127.0.0.1:<base>/…` through the proxy (the base's host and port listed in `[render]
/// remote_base_hosts`; unlisted, it is refused), so that listener gets a connection; a
/// generator file at `http://127.0.0.1:<other>/creds` — a URL, not a base — is fetched by
/// kustomize directly (Go sends loopback requests past any proxy), and Landlock, which lets the
/// tool connect to the proxy's port alone, denies it. Without the sandbox (`sandbox = "off"`)
/// the same generator file is fetched.
#[tokio::test]
async fn a_remote_bases_unit_reaches_its_bases_through_the_proxy_and_nothing_else() {
    let (env, ns) = common::setup_ns("sandbox-remote").await;
    let base = Listener::start();
    let other = Listener::start();
    let head = format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\n");
    let remote = "allow_remote_bases = true";

    let repo = common::GitRepo::new();
    repo.write(
        "app/kustomization.yaml",
        &format!("{head}resources:\n- https://127.0.0.1:{}/org/repo//base?ref=main\n", base.port),
    );
    repo.commit_and_push("a remote base");
    let dir = tempfile::tempdir().unwrap();
    // A loopback host is a remote base only when the operator lists it with its port.
    let listed = format!("remote_base_hosts = [\"127.0.0.1:{}\"]", base.port);
    let unit = common::unit_toml("base", &repo.bare(), "app", &ns, remote);
    let run = sync(dir.path(), "", &unit);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("remote_base_hosts"), "an unlisted loopback base is refused: {}", run.stderr);
    assert_eq!(base.connections(), 0, "an unlisted base was reached");
    let run = sync(dir.path(), &listed, &unit);
    assert_ne!(run.code, Some(0), "the listener is no git server: {}", run.stderr);
    assert!(base.connections() > 0, "the remote base was not reached through the proxy: {}", run.stderr);

    let repo = common::GitRepo::new();
    repo.write(
        "app/kustomization.yaml",
        &format!(
            "{head}configMapGenerator:\n- name: creds\n  options: {{disableNameSuffixHash: true}}\n  files:\n  \
             - k=http://127.0.0.1:{}/creds\n",
            other.port
        ),
    );
    repo.commit_and_push("a URL that is no base");
    let unit = common::unit_toml("creds", &repo.bare(), "app", &ns, remote);
    let dir = tempfile::tempdir().unwrap();
    let run = sync(dir.path(), "", &unit);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("permission denied"), "Landlock refused the connect: {}", run.stderr);
    assert_eq!(other.connections(), 0, "a host that is no remote base was reached");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(configmaps.get_opt("creds").await.unwrap().is_none());

    let run = sync(dir.path(), "sandbox = \"off\"", &unit);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(other.connections() > 0);
}
