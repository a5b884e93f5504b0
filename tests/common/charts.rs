//! Chart sources for the tests, real parts only: charts packaged and indexed by the real
//! `helm package` and `helm repo index`, served by an HTTP chart repository on loopback
//! ([`ChartServer`]), or pushed by `helm push` to the CNCF distribution registry
//! ([`Registry`], built by scripts/tools).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where the tools are: `$GITWARD_TOOLS_BIN` or `target/tools/bin`.
pub fn tools_bin() -> PathBuf {
    let dir = std::env::var_os("GITWARD_TOOLS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin"));
    for tool in ["helm", "registry"] {
        assert!(dir.join(tool).is_file(), "{tool} not in {}: run scripts/tools first", dir.display());
    }
    dir
}

/// Runs the real helm with its homes in `home`; panics with its stderr when it fails.
pub fn helm(home: &Path, args: &[&str], cwd: &Path) -> String {
    let out = Command::new(tools_bin().join("helm"))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("helm runs");
    assert!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A chart `name` at `version`: one ConfigMap `<release>-<name>` whose `data.version` is the
/// chart version, packaged by `helm package` into `out`; returns the archive's path.
pub fn package(work: &Path, name: &str, version: &str, out: &Path) -> PathBuf {
    package_with(work, name, version, out, &[])
}

/// [`package`] with `templates` (file name, text) added to the chart's `templates/`.
pub fn package_with(work: &Path, name: &str, version: &str, out: &Path, templates: &[(&str, &str)]) -> PathBuf {
    let dir = work.join(format!("src-{name}-{version}"));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("Chart.yaml"), format!("apiVersion: v2\nname: {name}\nversion: {version}\n")).unwrap();
    std::fs::write(dir.join("values.yaml"), "greeting: hello\n").unwrap();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\n\
              data:\n  version: {{ .Chart.Version | quote }}\n  greeting: {{ .Values.greeting | quote }}\n";
    std::fs::write(dir.join("templates/cm.yaml"), cm).unwrap();
    for (file, text) in templates {
        std::fs::write(dir.join("templates").join(file), text).unwrap();
    }
    std::fs::create_dir_all(out).unwrap();
    helm(&work.join("helm-home"), &["package", dir.to_str().unwrap(), "-d", out.to_str().unwrap()], work);
    out.join(format!("{name}-{version}.tgz"))
}

/// A chart unit `name` in `namespace` taking chart `demo` from `repo_url` within `version`,
/// released as `shop`.
pub fn chart_unit(name: &str, namespace: &str, repo_url: &str, version: &str) -> String {
    format!(
        "[[sync]]\nname = \"{name}\"\nnamespace = \"{namespace}\"\n[sync.helm]\nrepo_url = \"{repo_url}\"\n\
         chart = \"demo\"\nversion = \"{version}\"\nrelease = \"shop\"\n"
    )
}

/// The hex SHA-256 of a file.
pub fn sha256_hex(path: &Path) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// An HTTP chart repository on loopback serving the files of a directory (GET only), with
/// `index.yaml` written by `helm repo index` ([`ChartServer::publish`]). Stopped on drop or by
/// [`ChartServer::stop`], after which its port refuses connections.
pub struct ChartServer {
    /// The served directory.
    pub dir: PathBuf,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The path of every request served since the server (re)started, in order.
    pub requests: Arc<std::sync::Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    port: u16,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ChartServer {
    /// Serves `dir` (created if missing).
    pub fn start(dir: &Path) -> Self {
        Self::start_with_auth(dir, None)
    }

    /// Serves `work/served` with chart `demo` at `version` published in it
    /// ([`ChartServer::publish`]); and the chart archive's path.
    pub fn with_demo(work: &Path, version: &str) -> (Self, PathBuf) {
        let server = Self::start(&work.join("served"));
        let archive = server.publish(work, "demo", version);
        (server, archive)
    }

    /// Serves `dir`, answering 401 to a request without `Authorization: Basic` for `user` and
    /// `password` when they are given.
    pub fn start_with_auth(dir: &Path, user_password: Option<(&str, &str)>) -> Self {
        Self::serve(dir, user_password, 0)
    }

    /// After [`ChartServer::stop`]: serves its directory again on the same port (so the same
    /// URL), without authentication.
    pub fn restart(&mut self) {
        *self = Self::serve(&self.dir.clone(), None, self.port);
    }

    fn serve(dir: &Path, user_password: Option<(&str, &str)>, port: u16) -> Self {
        use base64::Engine as _;
        let expected = user_password
            .map(|(u, p)| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))));
        std::fs::create_dir_all(dir).unwrap();
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let (root, flag) = (dir.to_owned(), stop.clone());
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = requests.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut authorized = expected.is_none();
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).map_or(true, |n| n == 0) || header == "\r\n" {
                        break;
                    }
                    let (name, value) = header.trim_end().split_once(':').unwrap_or(("", ""));
                    authorized |=
                        name.eq_ignore_ascii_case("authorization") && Some(value.trim()) == expected.as_deref();
                }
                if !authorized {
                    let _ = stream
                        .write_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/').to_owned();
                log.lock().unwrap().push(format!("/{path}"));
                let file = root.join(&path);
                let response = match std::fs::read(&file).ok().filter(|_| !path.contains("..")) {
                    Some(body) => {
                        let mut r =
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())
                                .into_bytes();
                        r.extend(body);
                        r
                    }
                    None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                };
                let _ = stream.write_all(&response);
            }
        });
        Self {
            dir: dir.to_owned(),
            url: format!("http://127.0.0.1:{port}"),
            requests,
            stop,
            port,
            thread: Some(thread),
        }
    }

    /// Packages chart `name` at `version` into the served directory and indexes it again
    /// (`helm repo index`, relative URLs); returns the archive's path.
    pub fn publish(&self, work: &Path, name: &str, version: &str) -> PathBuf {
        self.publish_with(work, name, version, &[])
    }

    /// [`ChartServer::publish`] of a chart with `templates` (file name, text) added.
    pub fn publish_with(&self, work: &Path, name: &str, version: &str, templates: &[(&str, &str)]) -> PathBuf {
        let archive = package_with(work, name, version, &self.dir, templates);
        helm(&work.join("helm-home"), &["repo", "index", self.dir.to_str().unwrap()], work);
        archive
    }

    /// The paths asked for so far (`/index.yaml`, `/demo-0.1.0.tgz`), in order; a restart starts
    /// a new list.
    pub fn requested(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Stops serving: the port refuses connections from now on.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for ChartServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The CNCF distribution registry (`registry serve`) on a loopback port, storage in a
/// temporary directory; killed on drop.
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub host: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts it and waits until `GET /v2/` answers 200.
    pub async fn start() -> Self {
        Self::start_with_auth(None).await
    }

    /// Starts it with htpasswd authentication of `user` and `password` (a bcrypt entry, the
    /// only kind the registry accepts, made by Python's `crypt`) when given; waits until
    /// `GET /v2/` answers (200, or 401 with authentication).
    pub async fn start_with_auth(user_password: Option<(&str, &str)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = super::free_port();
        let mut config = format!(
            "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: gitward-tests\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = user_password {
            let script = format!(
                "import crypt; print('{user}:' + crypt.crypt('{password}', crypt.mksalt(crypt.METHOD_BLOWFISH)))"
            );
            let out = Command::new("python3").args(["-W", "ignore", "-c", &script]).output().expect("python3 runs");
            assert!(out.status.success(), "htpasswd entry: {}", String::from_utf8_lossy(&out.stderr));
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, out.stdout).unwrap();
            config.push_str(&format!("auth:\n  htpasswd: {{realm: gitward-tests, path: {}}}\n", htpasswd.display()));
        }
        let expected = if user_password.is_some() { 401 } else { 200 };
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let child = Command::new(tools_bin().join("registry"))
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(dir.path().join("registry.log")).unwrap()))
            .spawn()
            .expect("the registry starts");
        let up = super::eventually(Duration::from_secs(30), || async move {
            super::http(port, "GET", "/v2/", &[], b"").is_some_and(|(status, _)| status == expected)
        })
        .await;
        assert!(up, "registry on port {port} never answered /v2/");
        Self { host: format!("127.0.0.1:{port}"), child, _dir: dir }
    }

    /// `helm push` of `archive` to `oci://<host>/<path>` over plain HTTP.
    pub fn push(&self, work: &Path, archive: &Path, path: &str) {
        self.push_as(work, archive, path, None);
    }

    /// [`Registry::push`] with `--username` and `--password` when given.
    pub fn push_as(&self, work: &Path, archive: &Path, path: &str, user_password: Option<(&str, &str)>) {
        let target = format!("oci://{}/{path}", self.host);
        let mut args = vec!["push", archive.to_str().unwrap(), &target, "--plain-http"];
        if let Some((user, password)) = user_password {
            args.extend(["--username", user, "--password", password]);
        }
        helm(&work.join("helm-home"), &args, work);
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA and a server certificate for `127.0.0.1` it signed, made by the `openssl` CLI in
/// `dir`: returns (CA PEM, server certificate, server key) paths.
pub fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=gitward test CA"],
    ]
    .concat());
    run(&[&["req"][..], &ec, &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"]].concat());
    let ext = "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n";
    std::fs::write(dir.join("server.ext"), ext).unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"))
}

/// `openssl s_server -WWW`: serves the files of `dir` over HTTPS on a loopback port with the
/// certificate `cert` and key `key`; killed on drop.
pub struct HttpsFiles {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    child: Child,
}

impl HttpsFiles {
    /// Starts it and waits until the port accepts connections.
    pub async fn start(dir: &Path, cert: &Path, key: &Path) -> Self {
        let port = super::free_port();
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-WWW", "-accept", &format!("127.0.0.1:{port}")])
            .arg("-cert")
            .arg(cert)
            .arg("-key")
            .arg(key)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server starts");
        let up = super::eventually(Duration::from_secs(30), || async move {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await;
        assert!(up, "openssl s_server on port {port} never accepted");
        Self { url: format!("https://127.0.0.1:{port}"), child }
    }
}

impl Drop for HttpsFiles {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
