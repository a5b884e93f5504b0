//! Shared fixture for integration tests: a client of the real test apiserver per test, a fresh
//! namespace per test, the apiserver's audit log, and real git repositories.
//!
//! Tests run under `tests/cluster/run`, which exports `KUBECONFIG`,
//! `GITWARD_TEST_LIMITED_KUBECONFIG` and `GITWARD_TEST_AUDIT_LOG`. Without a reachable cluster
//! every test panics with a message saying how to start one: it never skips.
#![allow(dead_code)]

pub mod charts;
pub mod git_remote;
pub mod gitea;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const HOW: &str =
    "run the tests through tests/cluster/run (e.g. `tests/cluster/run cargo test`), which starts a real kube-apiserver";

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A name unique in this test run: `<prefix>-<pid>-<n>`.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst))
}

fn env_path(var: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(v) => PathBuf::from(v),
        None => panic!("{var} is not set: no test cluster; {HOW}"),
    }
}

/// A client for the kubeconfig in `var`, sending `user_agent` (so the audit log can tell this
/// test's requests apart). Panics when the cluster is unreachable.
pub async fn client_from(var: &str, user_agent: &str) -> kube::Client {
    let path = env_path(var);
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("{var}={}: unreadable kubeconfig: {e}; {HOW}", path.display()));
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{}: bad kubeconfig: {e}", path.display()));
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(user_agent).expect("user agent is a header value"),
    ));
    let client = kube::Client::try_from(config).expect("client from kubeconfig");
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("test cluster at {} unreachable: {e}; {HOW}", path.display()),
        Err(_) => panic!("test cluster at {} did not answer within 10s; {HOW}", path.display()),
    }
}

/// The admin client (group system:masters).
pub async fn admin(user_agent: &str) -> kube::Client {
    client_from("KUBECONFIG", user_agent).await
}

/// A client of the limited identity, which has no RBAC bindings.
pub async fn limited(user_agent: &str) -> kube::Client {
    client_from("GITWARD_TEST_LIMITED_KUBECONFIG", user_agent).await
}

/// One test's environment: its own client (with its own user agent) and namespace.
pub struct TestEnv {
    /// Admin client.
    pub client: kube::Client,
    /// A namespace created for this test.
    pub namespace: String,
    /// The user agent the client sends, to pick this test's lines from the audit log.
    pub user_agent: String,
}

impl TestEnv {
    /// An admin client for gitward's own requests, and its user agent: the test's with
    /// `-gitward` added, so the audit log tells its requests from the test's.
    pub async fn gitward_client(&self) -> (String, kube::Client) {
        let agent = format!("{}-gitward", self.user_agent);
        let client = admin(&agent).await;
        (agent, client)
    }
}

/// Creates a client and a fresh namespace named after `prefix`.
pub async fn setup(prefix: &str) -> TestEnv {
    let namespace = unique(prefix);
    let user_agent = format!("gitward-test/{namespace}");
    let client = admin(&user_agent).await;
    create_namespace(&client, &namespace).await;
    TestEnv { client, namespace, user_agent }
}

/// [`setup`], and the name of the test's namespace (most tests pass it around as `&str`).
pub async fn setup_ns(prefix: &str) -> (TestEnv, String) {
    let env = setup(prefix).await;
    let namespace = env.namespace.clone();
    (env, namespace)
}

/// [`setup_ns`] and an empty [`GitRepo`] for the test to push to.
pub async fn setup_repo(prefix: &str) -> (TestEnv, String, GitRepo) {
    let (env, namespace) = setup_ns(prefix).await;
    (env, namespace, GitRepo::new())
}

/// Creates a namespace.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.expect("create namespace");
}

/// The apiserver's audit log (JSON lines, one per request at Metadata level).
pub fn audit_log() -> PathBuf {
    env_path("GITWARD_TEST_AUDIT_LOG")
}

/// True when the audit `event` is of a dry run (`dryRun=All` in its request URI): the API
/// server persists nothing, and a fence lets it through.
pub fn is_dry_run(event: &Value) -> bool {
    event["requestURI"].as_str().is_some_and(|u| u.contains("dryRun="))
}

/// Audit events sent with `user_agent`, in order.
pub fn audit_events(user_agent: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(audit_log()).expect("read audit log");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["userAgent"] == user_agent)
        .collect()
}

/// The audit events of completed writes (create, update, patch, delete; dry runs too) of
/// ConfigMaps and Secrets in `namespace`, by any client, in log order.
pub fn audit_writes(namespace: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(audit_log()).expect("read audit log");
    let quoted = format!("\"{namespace}\"");
    text.lines()
        .filter(|l| l.contains(&quoted) && l.contains("ResponseComplete"))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["objectRef"]["namespace"] == namespace)
        .filter(|e| matches!(e["verb"].as_str(), Some("create" | "update" | "patch" | "delete")))
        .filter(|e| e["objectRef"]["resource"] == "configmaps" || e["objectRef"]["resource"] == "secrets")
        .collect()
}

/// Counts audit events of `user_agent` by verb, after `skip` earlier events.
pub fn verbs(events: &[Value]) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for e in events {
        *m.entry(e["verb"].as_str().unwrap_or_default().to_string()).or_default() += 1;
    }
    m
}

/// Runs the kubectl on PATH (the one `tests/cluster/run` puts first) and returns its output.
pub fn kubectl(args: &[&str]) -> std::process::Output {
    Command::new("kubectl").args(args).output().unwrap_or_else(|e| panic!("kubectl not runnable: {e}; {HOW}"))
}

/// A real git repository: a bare repo in a temp dir, pushed to from a work tree with the
/// `git` CLI, as a user would.
pub struct GitRepo {
    dir: tempfile::TempDir,
}

impl GitRepo {
    /// An empty bare repository and a clone of it with branch `main`.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = Self { dir };
        repo.git(&["init", "--bare", "--initial-branch=main", repo.bare().to_str().unwrap()], repo.dir.path());
        repo.git(&["init", "--initial-branch=main", repo.work().to_str().unwrap()], repo.dir.path());
        repo.git(&["remote", "add", "origin", repo.bare().to_str().unwrap()], &repo.work());
        repo
    }

    /// The bare repository (what gitward's config points at).
    pub fn bare(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    /// The work tree pushed from.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Runs git in `cwd` with a fixed identity; panics on failure.
    pub fn git(&self, args: &[&str], cwd: &Path) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=gitward-test", "-c", "user.email=test@gitward.dev", "-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Writes a file in the work tree (creating directories).
    pub fn write(&self, path: &str, content: &str) {
        let p = self.work().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    /// Copies a directory tree into the work tree at `dest`.
    pub fn copy_dir(&self, from: &Path, dest: &str) {
        let status = Command::new("cp").arg("-r").arg(from).arg(self.work().join(dest)).status().unwrap();
        assert!(status.success());
    }

    /// Removes a path from the work tree.
    pub fn remove(&self, path: &str) {
        self.git(&["rm", "-r", "-q", path], &self.work());
    }

    /// Writes `files` (path, content) in the work tree, then [`GitRepo::commit_and_push`]es
    /// everything the work tree holds (earlier writes and removals too); returns the commit SHA.
    pub fn push(&self, files: &[(&str, &str)], message: &str) -> String {
        for (path, content) in files {
            self.write(path, content);
        }
        self.commit_and_push(message)
    }

    /// Commits everything and pushes to the bare repository; returns the commit SHA.
    pub fn commit_and_push(&self, message: &str) -> String {
        let work = self.work();
        self.git(&["add", "-A"], &work);
        self.git(&["commit", "-q", "--allow-empty", "-m", message], &work);
        self.git(&["push", "-q", "origin", "main"], &work);
        self.git(&["rev-parse", "HEAD"], &work)
    }
}

/// The fixtures directory, `tests/fixtures` (see its SOURCE.md).
pub fn fixtures() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    assert!(p.is_dir(), "{} missing", p.display());
    p
}

/// Audit events of `user_agent`, read again until `done` holds for them or 10 s pass (the
/// apiserver writes an event when the response completes, which can be just after the
/// client has it). Returns the last read.
pub async fn audit_events_until(user_agent: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events = audit_events(user_agent);
        if done(&events) || std::time::Instant::now() > deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `[[sync]]` table for a unit of `repo` at `path`, namespace `namespace`, plus `extra`
/// TOML lines (e.g. `recreate_on_immutable = true`). The inventory parent goes in `namespace`.
pub fn unit_toml(name: &str, repo: &Path, path: &str, namespace: &str, extra: &str) -> String {
    format!(
        "[[sync]]\nname = \"{name}\"\nrepo = \"{}\"\nref = \"main\"\npath = \"{path}\"\nnamespace = \"{namespace}\"\n{extra}\n",
        repo.display()
    )
}

/// A resolved config with these `[[sync]]` tables and its state under `state_dir`.
pub fn config(state_dir: &Path, units: &str) -> gitward::config::Config {
    let text = format!("[daemon]\nstate_dir = \"{}\"\n\n{units}", state_dir.display());
    gitward::config::Config::from_toml(&text, state_dir, "test.toml").expect("test config is valid")
}

/// An engine for unit `name` of `config`, using `client`.
pub async fn engine(client: &kube::Client, config: &gitward::config::Config, name: &str) -> gitward::sync::Engine {
    let unit = config.unit(name).expect("unit in config");
    gitward::sync::Engine::new(client.clone(), config.cluster_of(unit), &config.daemon.state_dir, unit)
        .await
        .expect("engine opens its mirror")
}

/// An engine ([`engine`]) of unit `app` over the whole of `repo`, applied into `namespace`, with
/// `extra` lines in its table ([`unit_toml`]); and the state directory, to keep while it runs.
pub async fn app_engine(
    client: &kube::Client,
    repo: &GitRepo,
    namespace: &str,
    extra: &str,
) -> (tempfile::TempDir, gitward::sync::Engine) {
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), &unit_toml("app", &repo.bare(), "", namespace, extra));
    let engine = engine(client, &config, "app").await;
    (state, engine)
}

/// Actions of a change set, by `Kind/ns/name`.
pub fn actions(report: &gitward::sync::Report) -> std::collections::BTreeMap<String, String> {
    report.changes.entries.iter().map(|e| (e.object.to_string(), e.action.to_string())).collect()
}

/// A free loopback port (bound and released; fine for tests on one machine).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// POSTs `body` to the daemon's `/hooks/git` on `port`, signed as GitHub signs it
/// (`X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body under secret>`); the status and
/// reply.
pub fn signed_webhook(port: u16, secret: &str, body: &[u8]) -> (u16, String) {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    http(port, "POST", "/hooks/git", &[("X-Hub-Signature-256", &signature)], body).unwrap()
}

/// One HTTP/1.1 request over a real socket; returns status and body. `None` when nothing
/// listens (yet).
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// Polls `check` every 100 ms until it returns true or `timeout` passes; returns whether it did.
/// A liveness bound for asynchronous effects, not a speed measurement.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A [`Daemon`] of the config [`daemon_config`] writes in `dir` (`tables`, then `units`),
/// polling its sources every second (`interval = "1s"`): for sources no push reaches, such as
/// chart repositories and registries.
pub fn polling_daemon(dir: &Path, tables: &str, units: &str) -> Daemon {
    let (path, port) = daemon_config(dir, tables, "", units);
    let text = std::fs::read_to_string(&path).unwrap().replace("interval = \"1h\"\n", "interval = \"1s\"\n");
    std::fs::write(&path, text).unwrap();
    Daemon::start(&path, port, &[])
}

/// A `gitward run` process with JSON logs captured to a file.
pub struct Daemon {
    /// The child process.
    pub child: std::process::Child,
    /// Its HTTP port.
    pub port: u16,
    log: PathBuf,
    /// How it was started, for [`Daemon::restart`]: wrapper, config, environment.
    wrapper: Vec<String>,
    config: PathBuf,
    env: Vec<(String, String)>,
}

impl Daemon {
    /// Starts `gitward run --config <config>` with extra environment variables.
    pub fn start(config: &Path, port: u16, env: &[(&str, &str)]) -> Self {
        Self::start_in(&[], config, port, env)
    }

    /// [`Daemon::start`] with no extra environment, then waits until it is ready
    /// ([`Daemon::wait_ready`]); panics with its log when it is not within `timeout`.
    pub async fn ready(config: &Path, port: u16, timeout: Duration) -> Self {
        let daemon = Self::start(config, port, &[]);
        assert!(daemon.wait_ready(timeout).await, "not ready within {timeout:?}: {}", daemon.log_text());
        daemon
    }

    /// [`Daemon::start`] run by the command prefix `wrapper`, which must end by exec'ing its
    /// arguments (so the child's pid is gitward's); empty for none.
    pub fn start_in(wrapper: &[&str], config: &Path, port: u16, env: &[(&str, &str)]) -> Self {
        let log = config.with_extension(format!("{port}.log"));
        let wrapper: Vec<String> = wrapper.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let child = Self::spawn(&wrapper, config, &env, &log);
        Self { child, port, log, wrapper, config: config.to_path_buf(), env }
    }

    fn spawn(wrapper: &[String], config: &Path, env: &[(String, String)], log: &Path) -> std::process::Child {
        let file = std::fs::File::create(log).unwrap();
        wrapped(wrapper)
            .args(["--log-format", "json", "run", "--config"])
            .arg(config)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "info,gitward=debug")
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .expect("gitward run starts")
    }

    /// Kills the process with SIGKILL (no chance to release anything) and waits for it; its
    /// log is kept for the whole-suite Secret scan.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        keep_log(&self.log);
    }

    /// [`Daemon::kill`], then the same command again (same config, port, state directory and
    /// log file), as a supervisor restarting a crashed daemon would.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Self::spawn(&self.wrapper, &self.config, &self.env, &self.log);
    }

    /// Log events so far.
    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Log events so far whose message is `message`.
    pub fn logged(&self, message: &str) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["message"] == message).collect()
    }

    /// The raw log text (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET a path on the daemon's listener.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http(self.port, "GET", path, &[], b"")
    }

    /// Waits until /readyz answers 200.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        eventually(timeout, || async { self.get("/readyz").map(|(s, _)| s) == Some(200) }).await
    }

    /// Asserts that the process still runs, `/healthz` answers 200 and `/readyz` 503: alive
    /// through a fault, and honest that it cannot sync.
    pub fn assert_up_but_not_ready(&mut self) {
        assert!(self.child.try_wait().unwrap().is_none(), "the daemon exited: {}", self.log_text());
        assert_eq!(self.get("/healthz").map(|(s, _)| s), Some(200), "{}", self.log_text());
        assert_eq!(
            self.get("/readyz").map(|(s, _)| s),
            Some(503),
            "not ready while it cannot sync: {}",
            self.log_text()
        );
    }

    /// The `(object, resourceVersion)` of every watch event that the daemon took for drift
    /// (its debug event [`DRIFT_EVENT`] with `own: false`), in log order.
    pub fn drift_seen(&self) -> Vec<(String, String)> {
        self.logged(DRIFT_EVENT)
            .iter()
            .filter(|e| e["own"] == false)
            .filter_map(|e| Some((e["object"].as_str()?.to_string(), e["resource_version"].as_str()?.to_string())))
            .collect()
    }

    /// The sum of a counter family's samples in /metrics whose line contains all of `filters`.
    pub fn metric_sum(&self, name: &str, filters: &[&str]) -> f64 {
        let Some((_, body)) = self.get("/metrics") else { return 0.0 };
        body.lines()
            .filter(|l| l.starts_with(name) && filters.iter().all(|f| l.contains(f)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Sends a signal to the process.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill").args([&format!("-{sig}"), &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The message of the daemon's debug event for each watch event of a member that its unit
/// takes in (fields `unit`, `object`, `resource_version`, and `own`: whether it reports
/// gitward's own write, which starts nothing, or drift, which a self-heal answers). A watch
/// delivers the events of a kind in order: once a later event is logged, every earlier one of
/// that kind was handled.
pub const DRIFT_EVENT: &str = "drift event";

/// The message of the daemon's debug event for a poll or ref-watch trigger that found the
/// revision already applied (fields `unit`, `trigger`, `revision`).
pub const NO_NEW_REVISION: &str = "no new revision";

/// Writes `dir/gitward.toml` for `gitward run` and returns its path and port: `tables` first (a
/// `[cluster]` table, say; may be empty), then `[daemon]` with the state under `dir/state`, a free
/// loopback port to listen on, the poll and the resync an hour away (so each sync of a test has
/// a cause the test made) and the `daemon_extra` lines, then `units` (`[[sync]]` tables, see
/// [`unit_toml`]). A one-shot `gitward sync` reads the same file.
pub fn daemon_config(dir: &Path, tables: &str, daemon_extra: &str, units: &str) -> (PathBuf, u16) {
    let port = free_port();
    let path = dir.join("gitward.toml");
    write_daemon_config(&path, port, tables, daemon_extra, units);
    (path, port)
}

/// [`daemon_config`] with one unit, `app`, over the whole of `repo` in `namespace`, with
/// `unit_extra` lines in its `[[sync]]` table.
pub fn app_daemon_config(
    dir: &Path,
    repo: &Path,
    namespace: &str,
    daemon_extra: &str,
    unit_extra: &str,
) -> (PathBuf, u16) {
    daemon_config(dir, "", daemon_extra, &unit_toml("app", repo, "", namespace, unit_extra))
}

/// Writes the config at `path` (in the directory [`daemon_config`] wrote it to) again, on the
/// same `port`: for a SIGHUP.
pub fn write_daemon_config(path: &Path, port: u16, tables: &str, daemon_extra: &str, units: &str) {
    let state = path.parent().expect("config in a directory").join("state");
    let text = format!(
        "{tables}\n[daemon]\nstate_dir = \"{}\"\nlisten = \"127.0.0.1:{port}\"\ninterval = \"1h\"\nresync_interval = \"1h\"\n{daemon_extra}\n\n{units}",
        state.display()
    );
    std::fs::write(path, text).unwrap();
}

/// A ConfigMap manifest named `name` with `data.value: "<value>"`.
pub fn cm(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n")
}

/// `data[key]` of ConfigMap `ns/name`; `None` when the ConfigMap or the key is missing. Panics
/// on any other error of the API server.
pub async fn cm_data(client: &kube::Client, ns: &str, name: &str, key: &str) -> Option<String> {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.expect("read a ConfigMap")?.data?.remove(key)
}

/// [`cm_data`] of key `value`, the key [`cm`] writes.
pub async fn cm_value(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    cm_data(client, ns, name, "value").await
}

/// [`cm_value`] for a poll that may run while the API server does not answer: `None` also when
/// the read fails.
pub async fn cm_value_or_none(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.ok()??.data?.remove("value")
}

/// Asserts that each ConfigMap of `names` in `ns` holds `want` ([`cm_value`]); the message
/// names the first that does not (changed, or pruned when missing).
pub async fn assert_cm_values(client: &kube::Client, ns: &str, names: &[&str], want: &str) {
    for name in names {
        let value = cm_value(client, ns, name).await;
        assert_eq!(value.as_deref(), Some(want), "ConfigMap {ns}/{name} was changed or pruned");
    }
}

/// Waits up to `timeout` until `data[key]` of ConfigMap `ns/name` is `want` ([`cm_data`]);
/// whether it was.
pub async fn cm_data_becomes(
    client: &kube::Client,
    ns: &str,
    name: &str,
    key: &str,
    want: &str,
    timeout: Duration,
) -> bool {
    eventually(timeout, || async { cm_data(client, ns, name, key).await.as_deref() == Some(want) }).await
}

/// A Deployment manifest named `name` of `replicas` Pods of one container running `image`. The
/// test cluster's deployment controller rolls it out: its Pods run on kwok's simulated Nodes
/// and are ready at once, or never when the image name contains `fail` (they crash-loop, and
/// the rollout stays in progress for the 600 s progress deadline).
pub fn deployment(name: &str, image: &str, replicas: u32) -> String {
    deployment_with(name, image, replicas, 600, "0s")
}

/// [`deployment`] whose rollout the deployment controller gives up on (`Progressing` false,
/// `ProgressDeadlineExceeded`) after `deadline` seconds without progress, and whose Pods kwok
/// keeps Pending for `ready_after` (a Go duration, "3s") before they run: the annotation
/// `gitward.test/ready-after` of tests/cluster/stages.yaml.
pub fn deployment_with(name: &str, image: &str, replicas: u32, deadline: u32, ready_after: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  \
         progressDeadlineSeconds: {deadline}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      \
         labels: {{app: {name}}}\n      annotations: {{gitward.test/ready-after: \"{ready_after}\"}}\n    spec:\n      \
         containers:\n      - name: app\n        image: {image}\n"
    )
}

/// A namespaced CustomResourceDefinition (as JSON) of `kind` in `group`, plural `plural`, one
/// version `v1` that is served and stored, with a schema that keeps any field.
pub fn crd(group: &str, kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

/// A ConfigMap manifest named `name` labelled `guarded: "yes"`: what [`down_webhook`] guards.
pub fn guarded_cm(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    guarded: \"yes\"\n")
}

/// Registers a validating admission webhook that is down (`failurePolicy: Fail`, its URL a
/// loopback port nothing listens on) for ConfigMaps labelled `guarded: "yes"` in `namespace`
/// (named after it): the API server refuses to create or update them with `failed calling
/// webhook`. Returns the API of webhooks, to delete it (named `namespace`) later.
pub async fn down_webhook(
    client: &kube::Client,
    namespace: &str,
) -> Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> {
    let closed = free_port();
    let webhook = serde_json::from_value(json!({
        "metadata": {"name": namespace},
        "webhooks": [{
            "name": format!("deny.{namespace}.gitward.dev"),
            "clientConfig": {"url": format!("https://127.0.0.1:{closed}/validate")},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 2,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "objectSelector": {"matchLabels": {"guarded": "yes"}},
        }],
    }))
    .expect("a webhook configuration");
    let webhooks = Api::all(client.clone());
    webhooks.create(&PostParams::default(), &webhook).await.expect("register the webhook");
    webhooks
}

/// Installs `crd` (a CustomResourceDefinition as JSON) by server-side apply as `field_manager`
/// and waits up to 20 s until it is Established; returns the API of CRDs for later changes.
/// Panics when it is not Established in time.
pub async fn install_crd(client: &kube::Client, field_manager: &str, crd: Value) -> Api<kube::api::DynamicObject> {
    use kube::api::{Patch, PatchParams};
    let crds = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &crds);
    let name = crd["metadata"]["name"].as_str().expect("CRD has a name").to_string();
    api.patch(&name, &PatchParams::apply(field_manager).force(), &Patch::Apply(crd)).await.expect("install CRD");
    let established = eventually(Duration::from_secs(20), || async {
        let crd = api.get(&name).await.unwrap();
        crd.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
    })
    .await;
    assert!(established, "{name} not Established within 20 s");
    api
}

/// Binds the limited identity ([`limited`], user `limited`) to ClusterRole `name`, which the
/// test makes, and lets it do anything with the Secrets of namespace `name` (where a unit's
/// ApplySet parent goes): a Role and two bindings, each named `name`.
pub async fn bind_limited(client: &kube::Client, name: &str) {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
    let binding = |kind: &str| {
        json!({"metadata": {"name": name, "namespace": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
            "kind": kind, "name": name}, "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "limited"}]})
    };
    let crbs: Api<ClusterRoleBinding> = Api::all(client.clone());
    crbs.create(&PostParams::default(), &serde_json::from_value(binding("ClusterRole")).unwrap()).await.unwrap();
    let all = ["get", "list", "watch", "create", "patch", "update", "delete"];
    let secrets: Role = serde_json::from_value(json!({"metadata": {"name": name, "namespace": name},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": all}]}))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), name).create(&PostParams::default(), &secrets).await.unwrap();
    let rb: RoleBinding = serde_json::from_value(binding("Role")).unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), name).create(&PostParams::default(), &rb).await.unwrap();
}

/// What one bounded run of the `gitward` binary left.
pub struct Run {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Everything it wrote to stderr (its JSON log lines).
    pub stderr: String,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Peak resident set of the child itself, in KiB: the last `VmHWM` read before it exited
    /// (a high-water mark, so at most the last 20 ms of growth can be missed). Not `ru_maxrss`:
    /// the child is spawned with vfork, and Linux folds the parent's high-water mark into it.
    pub peak_kib: i64,
}

/// Runs `gitward <args> --config <config>` with JSON logs at debug level; kills it and panics
/// if it is still running after `limit` (a liveness bound, not a speed assertion).
pub fn gitward(args: &[&str], config: &Path, limit: Duration) -> Run {
    gitward_in(&[], args, config, limit)
}

/// [`gitward`] run by the command prefix `wrapper` (e.g. `unshare … sh -c '…; exec "$@"'`),
/// which must end by exec'ing its arguments so that the child's pid is gitward's.
pub fn gitward_in(wrapper: &[&str], args: &[&str], config: &Path, limit: Duration) -> Run {
    use std::process::Stdio;
    use std::time::Instant;
    let dir = config.parent().unwrap();
    let (out, err) = (dir.join("stdout.log"), dir.join("stderr.log"));
    let mut child = wrapped(wrapper)
        .args(["--log-format", "json"])
        .args(args)
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err).unwrap()))
        .spawn()
        .expect("gitward runs");
    let pid = child.id();
    let deadline = Instant::now() + limit;
    let mut peak_kib = 0;
    let status = loop {
        if let Some(hwm) = vm_hwm_kib(pid) {
            peak_kib = peak_kib.max(hwm);
        }
        if let Some(status) = child.try_wait().expect("wait for gitward") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gitward {args:?} still running after {limit:?}: {}", std::fs::read_to_string(&err).unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = status.code();
    eprintln!("gitward {args:?}: exit {code:?}, peak RSS {peak_kib} KiB");
    keep_log(&err);
    keep_log(&out);
    Run {
        code,
        stderr: std::fs::read_to_string(&err).unwrap(),
        stdout: std::fs::read_to_string(&out).unwrap(),
        peak_kib,
    }
}

/// A command running the [`binary`] under the command prefix `wrapper` (its program and
/// arguments, the binary appended as the last one); the binary itself when `wrapper` is empty.
fn wrapped(wrapper: &[impl AsRef<std::ffi::OsStr>]) -> Command {
    match wrapper.split_first() {
        Some((program, rest)) => {
            let mut command = Command::new(program);
            command.args(rest).arg(binary());
            command
        }
        None => Command::new(binary()),
    }
}

/// The `gitward` binary the runs of [`gitward`] and the [`Daemon`]s start: `$GITWARD_TEST_BIN` when set (a build's
/// own `target/debug/deps/gitward-<hash>`, which a build of another checkout sharing the target
/// directory does not replace, as it replaces `target/debug/gitward`), else cargo's.
pub fn binary() -> PathBuf {
    std::env::var_os("GITWARD_TEST_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gitward")), PathBuf::from)
}

/// `VmHWM` of a live process, in KiB; `None` once it has exited.
pub fn vm_hwm_kib(pid: u32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A config file `gitward.toml` in `dir` with state under `dir/state` and these `[[sync]]`
/// tables; returns its path.
pub fn config_file(dir: &Path, units: &str) -> PathBuf {
    let config = dir.join("gitward.toml");
    let text = format!("[daemon]\nstate_dir = \"{}\"\n\n{units}", dir.join("state").display());
    std::fs::write(&config, text).unwrap();
    config
}

/// The JSON log lines of a run whose `fields.message` (or top-level `message`) is `message`.
pub fn log_events<'a>(log: &'a str, message: &'a str) -> impl Iterator<Item = Value> + 'a {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(move |e| e["fields"]["message"] == message || e["message"] == message)
}

/// Every canary Secret value a test uses starts with this prefix, so that `scripts/secret-scan`
/// can find any of them, plain or base64, in the whole suite's output. 15 characters, a
/// multiple of 3: the base64 of any value starting with it starts with the prefix's own base64.
pub const CANARY_PREFIX: &str = "gitward-canary-";

/// Adds `value` to the run's list of canary Secret values (`$GITWARD_TEST_OUTPUT/canaries.txt`,
/// set by `scripts/test`), which `scripts/secret-scan` looks for at the end. A no-op outside
/// `scripts/test`.
pub fn register_canary(value: &str) {
    use std::io::Write;
    let Some(dir) = std::env::var_os("GITWARD_TEST_OUTPUT") else { return };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Path::new(&dir).join("canaries.txt"))
        .expect("open the canary list");
    // One write of one line: O_APPEND keeps lines of parallel tests whole.
    file.write_all(format!("{value}\n").as_bytes()).expect("register a canary");
}

/// Keeps a copy of a gitward log (gzip) under `$GITWARD_TEST_OUTPUT/logs/`, for the whole-suite
/// Secret scan; a no-op outside `scripts/test` or when the log is missing.
pub fn keep_log(log: &Path) {
    let Some(dir) = std::env::var_os("GITWARD_TEST_OUTPUT") else { return };
    let Ok(input) = std::fs::File::open(log) else { return };
    let name = format!("{}.gz", unique("gitward"));
    let Ok(output) = std::fs::File::create(Path::new(&dir).join("logs").join(name)) else { return };
    let _ = Command::new("gzip").arg("-c").stdin(input).stdout(output).status();
}

/// A Secret manifest named `name` whose `stringData` holds `value`, a canary: it must start
/// with [`CANARY_PREFIX`] (panics otherwise) and is registered for the whole-suite scan.
pub fn secret_yaml(name: &str, value: &str) -> String {
    assert!(value.starts_with(CANARY_PREFIX), "a test Secret value starts with {CANARY_PREFIX:?}: {value:?}");
    register_canary(value);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\ntype: Opaque\nstringData:\n  password: \"{value}\"\n"
    )
}

/// Panics when `value`, or its base64 form (as the API server stores it), appears in `output`.
pub fn assert_no_secret(output: &str, value: &str) {
    use base64::Engine as _;
    register_canary(value);
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    for form in [value, encoded.as_str()] {
        assert!(!output.contains(form), "Secret data printed: {form:?} appears in the captured output");
    }
}

/// A second, private cluster that this test can stop and bring back (same state dir and port,
/// so the same credentials and etcd data), without disturbing the shared one: its
/// kube-apiserver alone (`--apiserver-only`), no controllers or Nodes, since these tests are
/// about the apiserver going away and coming back.
pub struct OwnCluster {
    child: std::process::Child,
    dir: PathBuf,
    port: u16,
}

/// An [`OwnCluster`] stopped or killed: what starts it again, with the same state and port.
pub struct StoppedCluster {
    dir: PathBuf,
    port: u16,
}

impl StoppedCluster {
    /// Starts the cluster again ([`OwnCluster::start`] of the same directory and port).
    pub fn start(self) -> OwnCluster {
        OwnCluster::start(&self.dir, self.port)
    }
}

impl OwnCluster {
    pub fn start(dir: &Path, port: u16) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new("testcluster")
            .args(["serve", "--apiserver-only", "--dir"])
            .arg(dir)
            .args(["--port", &port.to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(dir.with_extension(format!("{port}.log"))).unwrap())
            .spawn()
            .expect("testcluster on PATH (tests/cluster/run puts it there)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("testcluster ready"), "own cluster did not start: {line:?}");
        Self { child, dir: dir.to_path_buf(), port }
    }

    /// Its admin kubeconfig, `<dir>/kubeconfig`.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// An admin client of it ([`OwnCluster::client`] of its kubeconfig).
    pub async fn admin(&self) -> kube::Client {
        Self::client(&self.kubeconfig()).await
    }

    /// An admin client of the cluster whose kubeconfig is `kubeconfig` (`<dir>/kubeconfig`).
    pub async fn client(kubeconfig: &Path) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// Stops the apiserver (closing stdin ends `testcluster serve`) and waits for it. A
    /// graceful stop: the apiserver drains in-flight requests first, which under load took up
    /// to 20 s, so it is not the moment an outage begins.
    pub fn stop(mut self) -> StoppedCluster {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
        StoppedCluster { dir: self.dir.clone(), port: self.port }
    }

    /// Kills the apiserver and its etcd (SIGKILL to `testcluster serve`, which runs both
    /// in-process) and waits for it: an outage that begins at once, as a crash or a lost node
    /// does. etcd's data survives (written, unsynced, to the page cache) for a restart.
    pub fn kill(mut self) -> StoppedCluster {
        let _ = self.child.kill();
        let _ = self.child.wait();
        StoppedCluster { dir: self.dir.clone(), port: self.port }
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The member record (`gitward.dev-members`) of `engine`'s ApplySet parent Secret: one
/// `Kind.group/namespace/name` line per member; empty when the parent does not exist.
pub async fn member_record(client: &kube::Client, engine: &gitward::sync::Engine) -> Vec<String> {
    let parent = &engine.inventory().parent;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), parent.namespace.as_deref().unwrap_or_default());
    let Some(secret) = secrets.get_opt(&parent.name).await.expect("read the ApplySet parent") else {
        return Vec::new();
    };
    let record = secret.data.unwrap_or_default().remove("gitward.dev-members").map(|b| b.0).unwrap_or_default();
    String::from_utf8(record).expect("UTF-8 record").lines().map(String::from).collect()
}

/// The labels of Namespace `name` (empty when it has none); panics when it does not exist.
pub async fn namespace_labels(client: &kube::Client, name: &str) -> std::collections::BTreeMap<String, String> {
    let ns = Api::<Namespace>::all(client.clone()).get(name).await.expect("the namespace exists");
    ns.metadata.labels.unwrap_or_default()
}

/// Waits (at most 120 s) until the test cluster's deployment controller has rolled Deployment
/// `web` in `ns` out: its status is of the current generation and every replica is available.
pub async fn rolled_out(client: &kube::Client, ns: &str) {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), ns);
    let done = eventually(Duration::from_secs(120), || async {
        let Some(web) = api.get_opt("web").await.ok().flatten() else { return false };
        let wanted = web.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = web.status.unwrap_or_default();
        status.observed_generation == web.metadata.generation && status.available_replicas.unwrap_or(0) == wanted
    })
    .await;
    assert!(done, "the deployment controller did not roll Deployment/{ns}/web out");
}
