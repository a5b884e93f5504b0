//! The catalogue of the errors a person meets first, each run for real against the test
//! apiserver, a real web server or a real git repository: `gitward sync` exits 2, prints the
//! unit's line on stdout and logs one `ERROR sync failed` line whose error is the exact
//! sentence below, naming what to check (the server, the kubeconfig user, context and file,
//! the certificate, the reference, the tool) and what to do next.
//!
//! | scenario | the sentence starts |
//! |---|---|
//! | 401: a token the API server does not accept | `discovery of v1: the API server at … did not accept the credentials` |
//! | 403: an identity with no RBAC | `inventory Secret/…: read: secrets "gitward-app" is forbidden: User "limited" cannot get …` |
//! | the kubeconfig trusts another CA | `discovery of v1: the API server at … presented a certificate of an unknown CA` |
//! | the URL names a host the certificate is not for | `… presented a certificate not valid for the address …` |
//! | the server's certificate expired | `… presented a certificate that expired at 2020-01-02T00:00:00Z: renew …` |
//! | the URL is a web server's (404 to `GET /api/v1`) | `the server at … answered 404 to GET /api/v1: not a Kubernetes API server?` |
//! | nothing listens at the URL | `discovery of v1: cannot reach the API server at …` |
//! | a misspelt `ref` | `reference "mian" not found in …; closest: branch main` |
//! | a render tool that is not there | `kustomize not found (no file at …)` |
//!
//! Every scenario's stderr is free of kube's `ServiceError:`/`ApiError:` prefixes, of debug
//! dumps (`Api(Status {`), of hyper's `client error (Connect)` and of Helm's `--debug` hint.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A kubeconfig for the test apiserver's `server` URL, trusting `ca` (PEM), with one context
/// `context` of one user entry `user` holding `token`; written to `dir/<file>`.
fn kubeconfig(dir: &Path, file: &str, server: &str, ca: &[u8], (user, token): (&str, &str), context: &str) -> PathBuf {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let path = dir.join(file);
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: \"{server}\"\n    \
             certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\n\
             contexts:\n- name: {context}\n  context: {{cluster: test, user: {user}}}\ncurrent-context: {context}\n"
        ),
    )
    .unwrap();
    path
}

/// The test apiserver's URL and CA (PEM), from the admin kubeconfig.
fn test_server() -> (String, Vec<u8>) {
    let path = std::env::var_os("KUBECONFIG").expect("KUBECONFIG is set: run under tests/cluster/run");
    let kubeconfig = kube::config::Kubeconfig::read_from(PathBuf::from(path)).expect("the admin kubeconfig");
    let cluster = kubeconfig.clusters[0].cluster.clone().expect("a cluster");
    let ca = cluster.certificate_authority_data.expect("certificate-authority-data");
    use base64::Engine as _;
    let pem = base64::engine::general_purpose::STANDARD.decode(ca).expect("base64 CA");
    (cluster.server.expect("a server").trim_end_matches('/').to_owned(), pem)
}

/// The config file (its path) of the unit `app` of `repo` in `namespace`, with `tables`
/// (`[cluster]`, `[render]`) before it.
fn config(dir: &Path, repo: &common::GitRepo, namespace: &str, tables: &str) -> PathBuf {
    let unit = common::unit_toml("app", &repo.bare(), "", namespace, "");
    common::config_file(dir, &format!("{tables}\n\n{unit}"))
}

/// A repository holding one ConfigMap.
fn repo() -> common::GitRepo {
    let repo = common::GitRepo::new();
    repo.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  k: v\n");
    repo.commit_and_push("one ConfigMap");
    repo
}

/// `[cluster]` naming `kubeconfig`.
fn cluster(kubeconfig: &Path) -> String {
    format!("[cluster]\nkubeconfig = \"{}\"\n", kubeconfig.display())
}

/// Runs `gitward sync --config <config>` with text logs at the default level and asserts what
/// a person reads: exit 2, the unit's `not synced` line on stdout, and one `ERROR` line,
/// `ERROR sync failed unit=app error=<message>` (the message quoted as the text log quotes
/// it), with none of the noise the module doc lists.
fn assert_fails_with(config: &Path, message: &str) {
    let out = Command::new(common::binary())
        .args(["sync", "--config"])
        .arg(config)
        .env_remove("RUST_LOG")
        .env_remove("GITWARD_LOG_FORMAT")
        .output()
        .expect("gitward runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stdout, "app: not synced: nothing was applied or pruned (the error is logged)\n", "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest))
        .filter(|l| l.starts_with("ERROR"))
        .collect();
    assert_eq!(errors, [format!("ERROR sync failed unit=app error={message:?}")], "{stderr}");
    for noise in ["ServiceError", "ApiError", "Api(Status", "client error (Connect)", "--debug"] {
        assert!(!stderr.contains(noise), "{noise} in: {stderr}");
    }
}

/// A token the API server does not accept: the error names the server, the kubeconfig's user
/// entry, context and file, and says to check that user's credentials.
#[tokio::test]
async fn a_401_names_the_server_and_the_user_context_and_file_to_check() {
    let (server, ca) = test_server();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(dir.path(), "kubeconfig", &server, &ca, ("deploy-bot", "not-a-token"), "ci@test");
    let repo = repo();
    let config = config(dir.path(), &repo, "default", &cluster(&kubeconfig));
    assert_fails_with(
        &config,
        &format!(
            "discovery of v1: the API server at {server} did not accept the credentials: check the credentials of \
             user deploy-bot in context ci@test of {} (Unauthorized, 401)",
            kubeconfig.display()
        ),
    );
}

/// An identity with no RBAC bindings: the API server's message names the user and what it may
/// not do; gitward adds the server, the kubeconfig user, context and file, and the next step.
#[tokio::test]
async fn a_403_names_the_server_and_the_user_context_and_file_and_says_to_grant_rbac() {
    let env = common::setup("catalogue-403").await;
    let (server, _) = test_server();
    let limited = PathBuf::from(std::env::var_os("GITWARD_TEST_LIMITED_KUBECONFIG").expect("a limited kubeconfig"));
    let dir = tempfile::tempdir().unwrap();
    let ns = &env.namespace;
    let repo = repo();
    let config = config(dir.path(), &repo, ns, &cluster(&limited));
    assert_fails_with(
        &config,
        &format!(
            "inventory Secret/{ns}/gitward-app: read: secrets \"gitward-app\" is forbidden: User \"limited\" cannot get \
             resource \"secrets\" in API group \"\" in the namespace \"{ns}\"; the API server at {server}, as user \
             limited in context limited@testcluster of {}: grant it RBAC (see deploy/kubernetes/rbac.yaml)",
            limited.display()
        ),
    );
}

/// A kubeconfig whose `certificate-authority-data` is another CA than the one that signed the
/// API server's certificate: one sentence naming the server, the unknown CA and where the
/// kubeconfig sets it, not "cannot reach the API server".
#[tokio::test]
async fn a_certificate_of_another_ca_is_named_unknown_ca_with_the_kubeconfig_to_check() {
    let (server, _) = test_server();
    let dir = tempfile::tempdir().unwrap();
    let (other_ca, _, _) = common::charts::tls_files(dir.path());
    let other_ca = std::fs::read(other_ca).unwrap();
    let kubeconfig = kubeconfig(dir.path(), "kubeconfig", &server, &other_ca, ("admin", "unused"), "other-ca");
    let repo = repo();
    let config = config(dir.path(), &repo, "default", &cluster(&kubeconfig));
    assert_fails_with(
        &config,
        &format!(
            "discovery of v1: the API server at {server} presented a certificate of an unknown CA (not signed by the \
             certificate-authority the client trusts): check certificate-authority-data of the cluster of context \
             other-ca in {}",
            kubeconfig.display()
        ),
    );
}

/// The right CA, but a URL whose host the API server's certificate is not for: the IPv4-mapped
/// IPv6 form of 127.0.0.1 reaches the same apiserver, and its certificate is for 127.0.0.1 and
/// a few DNS names (tests/cluster/main.go), not that address.
#[tokio::test]
async fn a_certificate_for_other_names_names_the_host_and_the_names_it_is_for() {
    let (server, ca) = test_server();
    let port = server.rsplit(':').next().unwrap();
    let mapped = format!("https://[::ffff:127.0.0.1]:{port}");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(dir.path(), "kubeconfig", &mapped, &ca, ("admin", "unused"), "mapped");
    let repo = repo();
    let config = config(dir.path(), &repo, "default", &cluster(&kubeconfig));
    assert_fails_with(
        &config,
        &format!(
            "discovery of v1: the API server at {mapped} presented a certificate not valid for the address \
             ::ffff:127.0.0.1 (it is for localhost, kubernetes, kubernetes.default, kubernetes.default.svc, 127.0.0.1, \
             10.0.0.1): use a name the certificate is for in the server of context mapped in {}",
            kubeconfig.display()
        ),
    );
}

/// A CA and a server certificate for 127.0.0.1 that it signed, valid only on 2020-01-01, made
/// by the `openssl` CLI in `dir` (`openssl ca`, the one of its commands that takes dates in the
/// past): (CA PEM, certificate, key) paths.
fn expired_certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    run(&[&["req", "-x509"][..], &ec, &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test CA"]]
        .concat());
    run(&[&["req"][..], &ec, &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"]].concat());
    std::fs::write(dir.join("index.txt"), "").unwrap();
    std::fs::write(dir.join("serial"), "01\n").unwrap();
    std::fs::write(
        dir.join("ca.cnf"),
        "[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n\
         default_md = sha256\npolicy = any\nx509_extensions = ext\n[any]\ncommonName = supplied\n[ext]\n\
         subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n",
    )
    .unwrap();
    run(&[
        "ca",
        "-batch",
        "-config",
        "ca.cnf",
        "-cert",
        "ca.pem",
        "-keyfile",
        "ca.key",
        "-in",
        "server.csr",
        "-out",
        "server.pem",
        "-startdate",
        "20200101000000Z",
        "-enddate",
        "20200102000000Z",
    ]);
    (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"))
}

/// A server whose certificate expired (a TLS server of the `openssl` CLI stands in for an API
/// server whose serving certificate was not renewed; the kubeconfig trusts its CA): the date
/// it expired and what to renew.
#[tokio::test]
async fn an_expired_certificate_names_when_it_expired() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = expired_certificate(dir.path());
    let server = common::charts::HttpsFiles::start(dir.path(), &cert, &key).await;
    let url = server.url.clone();
    let kubeconfig = kubeconfig(dir.path(), "kubeconfig", &url, &std::fs::read(ca).unwrap(), ("u", "t"), "old");
    let repo = repo();
    let config = config(dir.path(), &repo, "default", &cluster(&kubeconfig));
    assert_fails_with(
        &config,
        &format!(
            "discovery of v1: the API server at {url} presented a certificate that expired at 2020-01-02T00:00:00Z: \
             renew the API server's serving certificate, or correct this machine's clock"
        ),
    );
}

/// A kubeconfig whose server is a web server, not a Kubernetes API server (a wrong port, a
/// dashboard's URL): the error says so and names the context and file to correct, instead of
/// "unknown kind ConfigMap in v1" with the server's HTML page. The loopback server stands in
/// for that misconfigured URL: it answers every request 404 with an HTML page. A core kind,
/// then a kind of a named group only (the check of `/api/v1` still comes first).
#[test]
fn a_server_that_is_no_api_server_is_named_with_its_context_and_file() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let page = "<html><body><h1>404 Not Found</h1></body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let server = format!("http://127.0.0.1:{port}");
    let (_, ca) = test_server();
    let kubeconfig = kubeconfig(dir.path(), "kubeconfig", &server, &ca, ("u", "t"), "staging");
    for manifest in
        ["apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n".to_owned(), common::deployment("web", "nginx", 1)]
    {
        let repo = common::GitRepo::new();
        repo.push(&[("m.yaml", &manifest)], "first");
        let config = config(dir.path(), &repo, "default", &cluster(&kubeconfig));
        assert_fails_with(
            &config,
            &format!(
                "discovery of v1: the server at {server} answered 404 to GET /api/v1: not a Kubernetes API \
                 server? check the server of context staging in {}",
                kubeconfig.display()
            ),
        );
    }
}

/// Nothing listens at the URL: the server is named once, with the OS's cause once, and what to
/// check, without kube's own error lines.
#[test]
fn an_unreachable_server_is_named_once_with_the_context_to_check() {
    let (_, ca) = test_server();
    let server = format!("https://127.0.0.1:{}", common::free_port());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig(dir.path(), "kubeconfig", &server, &ca, ("u", "t"), "x");
    let repo = repo();
    let config = config(dir.path(), &repo, "default", &cluster(&kubeconfig));
    assert_fails_with(
        &config,
        &format!(
            "discovery of v1: cannot reach the API server at {server}: Connection refused (os error 111): check that \
             it is running and that the server of context x in {} points at it",
            kubeconfig.display()
        ),
    );
}

/// A misspelt `ref`: the repository and the branches and tags nearest the typo.
#[test]
fn a_misspelt_ref_names_the_repository_and_the_closest_branch() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo();
    let config = config(dir.path(), &repo, "default", "");
    std::fs::write(&config, std::fs::read_to_string(&config).unwrap().replace("ref = \"main\"", "ref = \"mian\""))
        .unwrap();
    assert_fails_with(
        &config,
        &format!(
            "reference \"mian\" not found in {}: no branch, tag or commit of that name; closest: branch main",
            repo.bare().display()
        ),
    );
}

/// A unit that needs kustomize, configured at a path where there is none: the tool, where it
/// was looked for, and the `[render]` key that takes its path.
#[test]
fn a_missing_render_tool_names_where_it_was_looked_for_and_the_key_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo();
    repo.push(&[("kustomization.yaml", "resources:\n- cm.yaml\n")], "a kustomization");
    let missing = dir.path().join("no-kustomize");
    let render = format!("[render]\nkustomize = \"{}\"\n", missing.display());
    let config = config(dir.path(), &repo, "default", &render);
    assert_fails_with(
        &config,
        &format!(
            "kustomize not found (no file at {}); run scripts/tools to build it, or set [render] kustomize to its path",
            missing.display()
        ),
    );
}
