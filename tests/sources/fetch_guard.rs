//! gitward's own fetches, attacked: a `Chart.yaml` naming an unlisted repository, an
//! `index.yaml` sending the archive download (and with it the credentials) to another host, a
//! poisoned download cache, credentials written into `repo_url`, and registries that answer
//! with more bytes than any cap allows. The honest sides are the real helm, the real registry
//! and the real apiserver; the attacker's side is a loopback HTTP server written here
//! ([`Listener`]), which records every request it gets.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use crate::common;
use crate::common::charts::{ChartServer, helm, package, sha256_hex};
use crate::sources::charts::listed;
use crate::sources::render::config_text;

/// One request a [`Listener`] got: its request line and header lines.
pub(crate) type Request = Vec<String>;

/// What a [`Listener`] answers to a request (its path and head): the whole HTTP response.
pub(crate) type Answer = Box<dyn Fn(&str, &[String]) -> Vec<u8> + Send + Sync>;

/// A loopback HTTP server that records each request's head and answers with `answer`;
/// stopped on drop.
pub(crate) struct Listener {
    pub(crate) port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    pub(crate) fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (requests, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (seen, flag) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).map_or(true, |n| n == 0) || line == "\r\n" {
                        break;
                    }
                    head.push(line.trim_end().to_owned());
                }
                let path = head.first().and_then(|l| l.split_whitespace().nth(1)).unwrap_or("/").to_owned();
                let _ = stream.write_all(&answer(&path, &head));
                seen.lock().unwrap().push(head);
            }
        });
        Self { port, requests, stop }
    }

    /// A listener that answers everything with 404.
    fn refusing() -> Self {
        Self::start(Box::new(|_, _| response("404 Not Found", "text/plain", b"")))
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// An HTTP/1.1 response with `Content-Length`, closing the connection.
pub(crate) fn response(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A git repository with an umbrella chart at `charts/umbrella` depending on `demo` from
/// `repository`, its version pinned by a `Chart.lock`.
fn umbrella(repository: &str) -> common::GitRepo {
    let repo = common::GitRepo::new();
    let chart = format!(
        "apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n- name: demo\n  version: \"0.1.0\"\n  repository: \"{repository}\"\n"
    );
    repo.write("charts/umbrella/Chart.yaml", &chart);
    repo.write(
        "charts/umbrella/Chart.lock",
        &format!("dependencies:\n- name: demo\n  version: 0.1.0\n  repository: \"{repository}\"\n"),
    );
    repo.write("charts/umbrella/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-umbrella\ndata:\n  umbrella: \"yes\"\n");
    repo.commit_and_push("umbrella chart");
    repo
}

/// Unit `umbrella` of `repo`'s chart `charts/umbrella` ([`umbrella`]), release `shop`, in
/// `namespace`.
pub(crate) fn umbrella_unit(repo: &common::GitRepo, namespace: &str) -> String {
    common::unit_toml("umbrella", &repo.bare(), "charts/umbrella", namespace, "[sync.helm]\nrelease = \"shop\"\n")
}

pub(crate) fn write_config(dir: &Path, render_extra: &str, units: &str) -> std::path::PathBuf {
    let path = dir.join("gitward.toml");
    std::fs::write(&path, config_text(&dir.join("state"), render_extra, units)).unwrap();
    path
}

#[tokio::test]
async fn a_dependency_on_an_unlisted_repository_is_refused_before_any_request() {
    let env = common::setup("fetch-unlisted").await;
    let attacker = Listener::refusing();
    let url = format!("http://127.0.0.1:{}/any/path?", attacker.port);
    let repo = umbrella(&url);
    let dir = tempfile::tempdir().unwrap();
    let unit = umbrella_unit(&repo, &env.namespace);
    // Listing another loopback port does not list this one.
    let config = write_config(dir.path(), &listed(&format!("http://127.0.0.1:{}", attacker.port + 1)), &unit);

    for command in ["validate", "sync"] {
        let run = common::gitward(&[command], &config, Duration::from_secs(120));
        assert_eq!(run.code, Some(2), "{command}: {}", run.stderr);
        assert!(run.stderr.contains("charts/umbrella/Chart.yaml"), "{command} names the Chart.yaml: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("http://127.0.0.1:{}", attacker.port)),
            "{command} names the URL: {}",
            run.stderr
        );
        assert!(run.stderr.contains("loopback address"), "{command}: {}", run.stderr);
    }
    assert_eq!(attacker.requests(), Vec::<Request>::new(), "gitward sent nothing to the unlisted repository");
    let cms = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace);
    assert!(cms.get_opt("shop-umbrella").await.unwrap().is_none(), "the refused revision applied nothing");
}

#[tokio::test]
async fn an_index_pointing_at_another_host_gets_no_credentials() {
    let env = common::setup("fetch-creds").await;
    let work = tempfile::tempdir().unwrap();
    let server = ChartServer::start_with_auth(&work.path().join("served"), Some(("reader", "s3cret-pw")));
    let archive = server.publish(work.path(), "demo", "0.1.0");
    let bytes = std::fs::read(&archive).unwrap();
    let elsewhere = Listener::start(Box::new(move |_, _| response("200 OK", "application/gzip", &bytes)));
    // The index sends the download to another origin (another port of the same host).
    let index = server.dir.join("index.yaml");
    let text = std::fs::read_to_string(&index).unwrap();
    let moved = text.replace("- demo-0.1.0.tgz", &format!("- http://127.0.0.1:{}/demo-0.1.0.tgz", elsewhere.port));
    assert_ne!(moved, text, "the index names the archive relatively: {text}");
    std::fs::write(&index, moved).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret-pw\n").unwrap();
    let unit = format!(
        "[[sync]]\nname = \"demo\"\nnamespace = \"{}\"\n[sync.helm]\nrepo_url = \"{}\"\nchart = \"demo\"\nrelease = \"shop\"\n\
         username = \"reader\"\npassword_file = \"{}\"\n",
        env.namespace,
        server.url,
        password.display()
    );
    // Both origins listed: the allow-list is not what keeps the credentials back here.
    let allowed = format!("chart_repositories = [\"{}\", \"http://127.0.0.1:{}\"]\n", server.url, elsewhere.port);
    let config = write_config(dir.path(), &allowed, &unit);

    let run = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let requests = elsewhere.requests();
    assert_eq!(requests.len(), 1, "the archive was downloaded from the other origin: {requests:?}");
    let authorization = requests[0].iter().find(|h| h.to_ascii_lowercase().starts_with("authorization:"));
    assert_eq!(authorization, None, "no credentials to another origin: {:?}", requests[0]);
    let cm = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace).get("shop-demo").await.unwrap();
    assert_eq!(cm.data.unwrap()["version"], "0.1.0");
}

#[tokio::test]
async fn a_poisoned_dependency_cache_is_refused_and_downloaded_again() {
    let env = common::setup("fetch-poison").await;
    let work = tempfile::tempdir().unwrap();
    let (server, honest) = ChartServer::with_demo(work.path(), "0.1.0");
    let repo = umbrella(&format!("{}/", server.url));
    let dir = tempfile::tempdir().unwrap();
    let unit = umbrella_unit(&repo, &env.namespace);
    let config = write_config(dir.path(), &listed(&server.url), &unit);
    let first = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(first.code, Some(0), "{}", first.stderr);

    // Another tenant's write replaces the cached archive with a chart of the same name and
    // version that makes its own ConfigMap.
    let domains: Vec<_> = std::fs::read_dir(dir.path().join("state/charts/dependencies")).unwrap().flatten().collect();
    assert_eq!(domains.len(), 1, "{domains:?}");
    let cached = domains[0].path().join(format!("{}.tgz", sha256_hex(&honest)));
    assert!(cached.is_file(), "the dependency is cached by its digest");
    let evil_src = work.path().join("evil/demo");
    std::fs::create_dir_all(evil_src.join("templates")).unwrap();
    std::fs::write(evil_src.join("Chart.yaml"), "apiVersion: v2\nname: demo\nversion: 0.1.0\n").unwrap();
    std::fs::write(evil_src.join("templates/cm.yaml"), common::cm("attacker", "planted")).unwrap();
    let out = work.path().join("evil-out");
    helm(
        &work.path().join("helm-home"),
        &["package", evil_src.to_str().unwrap(), "-d", out.to_str().unwrap()],
        work.path(),
    );
    std::fs::copy(out.join("demo-0.1.0.tgz"), &cached).unwrap();

    let second = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(second.stderr.contains("does not match its digest"), "the poisoned file is reported: {}", second.stderr);
    let cms = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace);
    assert!(cms.get_opt("attacker").await.unwrap().is_none(), "the poisoned archive never reached the cluster");
    assert_eq!(cms.get("shop-demo").await.unwrap().data.unwrap()["version"], "0.1.0");
    assert_eq!(std::fs::read(&cached).unwrap(), std::fs::read(&honest).unwrap(), "downloaded again");
}

#[tokio::test]
async fn credentials_in_a_repo_url_reach_neither_the_logs_nor_the_parent() {
    let env = common::setup("fetch-userinfo").await;
    let work = tempfile::tempdir().unwrap();
    let secret = "pw-in-the-url-4711";
    let mut server = ChartServer::start_with_auth(&work.path().join("served"), Some(("reader", secret)));
    server.publish(work.path(), "demo", "0.1.0");
    let with_userinfo = server.url.replacen("http://", &format!("http://reader:{secret}@"), 1);
    let dir = tempfile::tempdir().unwrap();
    let unit = format!(
        "[[sync]]\nname = \"demo\"\nnamespace = \"{}\"\n[sync.helm]\nrepo_url = \"{with_userinfo}\"\nchart = \"demo\"\nrelease = \"shop\"\n",
        env.namespace
    );
    // No kept index answer stands in for the repository once it is down (`0s`): the failure
    // is what this checks.
    let config = write_config(dir.path(), &(listed(&server.url) + "max_index_age = \"0s\"\n"), &unit);
    let good = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(good.code, Some(0), "the userinfo authenticates: {}", good.stderr);

    server.stop();
    let failed = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(failed.code, Some(2), "{}", failed.stderr);
    let shown = server.url.replacen("http://", "http://***@", 1);
    assert!(failed.stderr.contains(&shown), "the error names the URL redacted: {}", failed.stderr);
    let status = common::gitward(&["status"], &config, Duration::from_secs(60));
    let parent = Api::<Secret>::namespaced(env.client.clone(), &env.namespace).get("gitward-demo").await.unwrap();
    let parent = serde_json::to_string(&parent).unwrap();
    assert!(parent.contains(&shown), "the failure is recorded on the parent: {parent}");
    for (what, text) in
        [("sync", &good.stderr), ("failed sync", &failed.stderr), ("status", &status.stdout), ("parent", &parent)]
    {
        assert!(!text.contains(secret), "{what} holds the password: {text}");
    }
}

/// A registry of one repository `x/app` answering `/v2/`, its tag list, any manifest and any
/// layer with the bodies given; the layer and the tag list are sent without `Content-Length`,
/// so only a cap on the bytes read stops them.
fn fake_registry(tags: Vec<u8>, manifest: Vec<u8>, layer: Vec<u8>) -> Listener {
    Listener::start(Box::new(move |path, _| {
        let streamed = |content_type: &str, body: &[u8]| {
            let mut out =
                format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n").into_bytes();
            out.extend_from_slice(body);
            out
        };
        match path {
            "/v2/" => response("200 OK", "application/json", b"{}"),
            p if p.starts_with("/v2/x/app/tags/list") => streamed("application/json", &tags),
            p if p.starts_with("/v2/x/app/manifests/") => {
                response("200 OK", "application/vnd.oci.image.manifest.v1+json", &manifest)
            }
            p if p.starts_with("/v2/x/app/blobs/") => streamed("application/octet-stream", &layer),
            _ => response("404 Not Found", "text/plain", b""),
        }
    }))
}

fn layer_manifest(media_type: &str, digest: &str, size: usize, padding: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": format!("sha256:{}", "4".repeat(64)), "size": 2},
        "layers": [{"mediaType": media_type, "digest": digest, "size": size}],
        "annotations": {"padding": " ".repeat(padding)},
    }))
    .unwrap()
}

#[tokio::test]
async fn over_cap_manifests_layers_and_tag_lists_are_errors_not_truncated_reads() {
    let env = common::setup("fetch-caps").await;
    let dir = tempfile::tempdir().unwrap();
    let flux = "application/vnd.cncf.flux.content.v1.tar+gzip";
    let helm_layer = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
    let big = vec![b'x'; 2 << 20];
    let digest = |bytes: &[u8]| {
        use sha2::Digest as _;
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
    };
    let cases = [
        // A manifest over 4 MiB.
        (
            "artifact",
            Vec::new(),
            layer_manifest(flux, &digest(b"x"), 1, 5 << 20),
            Vec::new(),
            "over the limit of 4194304 bytes",
        ),
        // A layer that claims 100 bytes and streams 2 MiB past a 1 MiB cap.
        (
            "artifact",
            Vec::new(),
            layer_manifest(flux, &digest(&big), 100, 0),
            big.clone(),
            "over the limit of 1048576 bytes",
        ),
        // A tag list of 17 MiB.
        (
            "chart",
            format!("{{\"name\":\"x/app\",\"tags\":[\"{}\"]}}", "1".repeat(17 << 20)).into_bytes(),
            Vec::new(),
            Vec::new(),
            "over the limit of 16777216 bytes",
        ),
        // A chart layer streaming 2 MiB past a 1 MiB cap.
        (
            "chart",
            br#"{"name":"x/app","tags":["1.0.0"]}"#.to_vec(),
            layer_manifest(helm_layer, &digest(&big), 100, 0),
            big.clone(),
            "over the limit of 1048576 bytes",
        ),
    ];
    for (index, (kind, tags, manifest, layer, expected)) in cases.into_iter().enumerate() {
        let registry = fake_registry(tags, manifest, layer);
        let host = format!("127.0.0.1:{}", registry.port);
        let unit = match kind {
            "artifact" => format!(
                "[[sync]]\nname = \"caps\"\nrepo = \"oci://{host}/x/app:v1\"\npath = \"app\"\nnamespace = \"{}\"\n",
                env.namespace
            ),
            _ => format!(
                "[[sync]]\nname = \"caps\"\nnamespace = \"{}\"\n[sync.helm]\nrepo_url = \"oci://{host}/x\"\nchart = \"app\"\nversion = \"*\"\n",
                env.namespace
            ),
        };
        let case = dir.path().join(index.to_string());
        std::fs::create_dir_all(&case).unwrap();
        let config =
            write_config(&case, &format!("max_tree_bytes = \"1MiB\"\n{}", listed(&format!("oci://{host}"))), &unit);
        let run = common::gitward(&["validate"], &config, Duration::from_secs(120));
        assert_eq!(run.code, Some(2), "case {index}: {}", run.stderr);
        assert!(run.stderr.contains(expected), "case {index}: {expected}: {}", run.stderr);
        assert!(run.stderr.contains(&format!("http://{host}/v2/x/app/")), "case {index} names the URL: {}", run.stderr);
        assert!(!registry.requests().is_empty(), "case {index}: the registry was asked");
    }
}

#[tokio::test]
async fn an_unlisted_loopback_registry_or_repository_is_a_config_error() {
    let listener = Listener::refusing();
    let dir = tempfile::tempdir().unwrap();
    let host = format!("127.0.0.1:{}", listener.port);
    let units = [
        (format!("[[sync]]\nname = \"art\"\nrepo = \"oci://{host}/x/app:v1\"\npath = \"app\"\n"), "sync[0].repo"),
        (
            format!("[[sync]]\nname = \"c\"\n[sync.helm]\nrepo_url = \"http://{host}/charts\"\nchart = \"demo\"\n"),
            "sync[0].helm.repo_url",
        ),
    ];
    for (unit, key) in units {
        let config = write_config(dir.path(), "", &unit);
        let run = common::gitward(&["validate"], &config, Duration::from_secs(60));
        assert_eq!(run.code, Some(2), "{}", run.stderr);
        assert!(run.stderr.contains(key) && run.stderr.contains("loopback address"), "{key}: {}", run.stderr);
    }
    assert_eq!(listener.requests(), Vec::<Request>::new(), "nothing was asked");
}

/// The value of header `name` in a request head, if any.
pub(crate) fn header<'a>(head: &'a [String], name: &str) -> Option<&'a str> {
    head.iter().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[tokio::test]
async fn a_registry_token_service_gets_the_credentials_only_when_listed() {
    let dir = tempfile::tempdir().unwrap();
    let token_service =
        Arc::new(Listener::start(Box::new(|_, _| response("200 OK", "application/json", br#"{"token":"t0k"}"#))));
    let realm = format!("http://127.0.0.1:{}/token", token_service.port);
    let registry = Listener::start(Box::new(move |_, head| match header(head, "authorization") {
        Some("Bearer t0k") => response("404 Not Found", "application/json", b"{}"),
        _ => {
            let challenge = format!("Bearer realm=\"{realm}\",service=\"fake\",scope=\"repository:x/app:pull\"");
            let mut out = response("401 Unauthorized", "application/json", b"{}");
            let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
            out.splice(at..at, format!("\r\nWWW-Authenticate: {challenge}").into_bytes());
            out
        }
    }));
    let token = dir.path().join("token");
    std::fs::write(&token, "registry-pw\n").unwrap();
    let host = format!("127.0.0.1:{}", registry.port);
    let unit = format!(
        "[[sync]]\nname = \"art\"\nrepo = \"oci://{host}/x/app:v1\"\npath = \"app\"\n[sync.git]\nusername = \"puller\"\ntoken_file = \"{}\"\n",
        token.display()
    );

    // The realm is another loopback origin, unlisted: refused, asked nothing.
    let config = write_config(dir.path(), &listed(&format!("oci://{host}")), &unit);
    let run = common::gitward(&["validate"], &config, Duration::from_secs(60));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("token realm") && run.stderr.contains("loopback address"), "{}", run.stderr);
    assert_eq!(token_service.requests(), Vec::<Request>::new(), "the unlisted token service was not asked");

    // Listed: it gets the registry's credentials, and the registry the token it gave.
    let allowed = format!("chart_repositories = [\"oci://{host}\", \"http://127.0.0.1:{}\"]\n", token_service.port);
    let config = write_config(dir.path(), &allowed, &unit);
    let run = common::gitward(&["validate"], &config, Duration::from_secs(60));
    assert_eq!(run.code, Some(2), "the manifest is not there: {}", run.stderr);
    assert!(run.stderr.contains("answered 404 Not Found"), "{}", run.stderr);
    let asked = token_service.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    use base64::Engine as _;
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("puller:registry-pw"));
    assert_eq!(header(&asked[0], "authorization"), Some(basic.as_str()), "{asked:?}");
    assert!(asked[0][0].contains("scope=repository%3Ax%2Fapp%3Apull"), "{asked:?}");
    let bearer = registry.requests().iter().filter(|h| header(h, "authorization") == Some("Bearer t0k")).count();
    assert_eq!(bearer, 1, "the token went to the registry: {:?}", registry.requests());
}

#[tokio::test]
async fn a_redirect_carries_no_credentials_and_reaches_loopback_only_when_listed() {
    let env = common::setup("fetch-redirect").await;
    let work = tempfile::tempdir().unwrap();
    let served = work.path().join("served");
    let archive = package(work.path(), "demo", "0.1.0", &served);
    helm(&work.path().join("helm-home"), &["repo", "index", served.to_str().unwrap()], work.path());
    let (index, bytes) = (std::fs::read(served.join("index.yaml")).unwrap(), std::fs::read(&archive).unwrap());
    let elsewhere = Arc::new(Listener::start(Box::new(move |_, _| response("200 OK", "application/gzip", &bytes))));
    let target = format!("http://127.0.0.1:{}/moved/demo-0.1.0.tgz", elsewhere.port);
    use base64::Engine as _;
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("reader:redirect-pw"));
    // The repository asks for the credentials and answers the archive with a redirect.
    let repository = Listener::start(Box::new(move |path, head| match (path, header(head, "authorization")) {
        (_, Some(auth)) if auth != basic => response("401 Unauthorized", "text/plain", b""),
        (_, None) => response("401 Unauthorized", "text/plain", b""),
        ("/index.yaml", _) => response("200 OK", "application/yaml", &index),
        _ => format!("HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .into_bytes(),
    }));
    let url = format!("http://127.0.0.1:{}", repository.port);
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "redirect-pw\n").unwrap();
    let unit = format!(
        "[[sync]]\nname = \"demo\"\nnamespace = \"{}\"\n[sync.helm]\nrepo_url = \"{url}\"\nchart = \"demo\"\nrelease = \"shop\"\n\
         username = \"reader\"\npassword_file = \"{}\"\n",
        env.namespace,
        password.display()
    );

    let config = write_config(dir.path(), &listed(&url), &unit);
    let refused = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("redirected to") && refused.stderr.contains("loopback address"),
        "{}",
        refused.stderr
    );
    assert_eq!(elsewhere.requests(), Vec::<Request>::new(), "an unlisted loopback target is never reached");

    let allowed = format!("chart_repositories = [\"{url}\", \"http://127.0.0.1:{}\"]\n", elsewhere.port);
    let config = write_config(dir.path(), &allowed, &unit);
    let followed = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(followed.code, Some(0), "{}", followed.stderr);
    let requests = elsewhere.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(header(&requests[0], "authorization"), None, "the redirect dropped the credentials: {requests:?}");
    let cm = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace).get("shop-demo").await.unwrap();
    assert_eq!(cm.data.unwrap()["version"], "0.1.0");
}

#[tokio::test]
async fn units_of_different_service_accounts_never_share_a_dependency_cache() {
    let work = tempfile::tempdir().unwrap();
    let (server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let repo = umbrella(&format!("{}/", server.url));
    let dir = tempfile::tempdir().unwrap();
    let extra = "[sync.helm]\nrelease = \"shop\"\n";
    let units = common::unit_toml("own", &repo.bare(), "charts/umbrella", "a", extra)
        + &common::unit_toml("own-too", &repo.bare(), "charts/umbrella", "b", extra)
        + &common::unit_toml(
            "tenant",
            &repo.bare(),
            "charts/umbrella",
            "c",
            &format!("service_account = \"deployer\"\n{extra}"),
        );
    let config = write_config(dir.path(), &listed(&server.url), &units);
    // The units' mirror is in the state directory already (validate reads a unit without one
    // in a temporary directory): the dependency caches are made beside it.
    let spec = gitward::source::SourceSpec {
        unit: "own".into(),
        repo: repo.bare().display().to_string(),
        reference: "main".into(),
        path: Default::default(),
        credentials: Default::default(),
        max_file_bytes: 1 << 20,
        verify: None,
    };
    gitward::source::Source::open(&dir.path().join("state"), spec).expect("mirror opens");
    let run = common::gitward(&["validate"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut domains: Vec<usize> = std::fs::read_dir(dir.path().join("state/charts/dependencies"))
        .unwrap()
        .flatten()
        .map(|d| {
            let files = std::fs::read_dir(d.path()).unwrap().flatten();
            files.filter(|f| f.file_name().to_string_lossy().ends_with(".tgz")).count()
        })
        .collect();
    domains.sort();
    assert_eq!(domains, [1, 1], "gitward's own units share one cache, the tenant has its own, each with the archive");
}
