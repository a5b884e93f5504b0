//! A healthy unit on a local repository beside units whose sources or renders misbehave, in one
//! `gitward run` (`interval = "5s"`): a loopback listener that accepts and never answers, one
//! that answers a byte a second, one that resets every connection, a chart repository and an
//! OCI registry that never answer, a Helm template that loops until the render timeout, and 50
//! failing units. The listeners are the faults themselves (real TCP, real libgit2 and HTTP
//! clients on the other end). Each asserts, reading the ConfigMap from the API server (not
//! gitward's log), that the healthy unit's first sync lands within 10 s of the start and each
//! of three pushes within 2 s. Before fetches left the sync slots, six hung remotes held every
//! slot for libgit2's 60 s timeout and the healthy unit waited behind them.

use crate::common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// What a [`faulty_server`] does to each connection.
#[derive(Clone, Copy)]
enum Fault {
    /// Accepts and never answers (a hung server, a stuck proxy).
    Hang,
    /// Answers an HTTP 200 one byte a second, forever.
    Trickle,
    /// Resets the connection (RST) at once.
    Reset,
}

/// A loopback listener doing `fault` to every connection, for the life of the test binary;
/// its port.
fn faulty_server(fault: Fault) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("local address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().filter_map(Result::ok) {
            match fault {
                Fault::Hang => held.push(stream),
                Fault::Trickle => drop(std::thread::spawn(move || trickle(stream))),
                Fault::Reset => reset(stream),
            }
        }
    });
    port
}

/// Writes an HTTP 200 with a long body one byte a second until the peer goes.
fn trickle(mut stream: TcpStream) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n";
    for byte in head.bytes().chain(std::iter::repeat(b'a')) {
        if stream.write_all(&[byte]).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Closes `stream` with an RST (SO_LINGER of zero).
fn reset(stream: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor and a `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// A `[[sync]]` table of unit `name` following the git remote `url`.
fn git_unit(name: &str, url: &str, namespace: &str) -> String {
    format!("[[sync]]\nname = \"{name}\"\nrepo = \"{url}\"\nref = \"main\"\nnamespace = \"{namespace}\"\n\n")
}

/// A `[[sync]]` table of unit `name` following the OCI artifact `reference` (`oci://…:tag`).
fn oci_unit(name: &str, reference: &str, namespace: &str) -> String {
    format!("[[sync]]\nname = \"{name}\"\nrepo = \"{reference}\"\nnamespace = \"{namespace}\"\n\n")
}

/// A `[[sync]]` table of chart unit `name` from the chart repository `url`.
fn chart_unit(name: &str, url: &str, namespace: &str) -> String {
    format!(
        "[[sync]]\nname = \"{name}\"\nnamespace = \"{namespace}\"\n[sync.helm]\nrepo_url = \"{url}\"\nchart = \"demo\"\n\
         version = \"*\"\nrelease = \"{name}\"\n\n"
    )
}

async fn value(client: &kube::Client, namespace: &str) -> Option<String> {
    common::cm_value_or_none(client, namespace, "healthy").await
}

/// Waits up to `within` for the healthy ConfigMap to hold `want`, read from the API server;
/// how long it took, or `None`.
async fn applied(client: &kube::Client, namespace: &str, want: &str, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < within {
        if value(client, namespace).await.as_deref() == Some(want) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (value(client, namespace).await.as_deref() == Some(want)).then(|| start.elapsed())
}

/// What the healthy unit's repository holds at `app/`.
#[derive(Clone, Copy)]
enum Healthy {
    /// The ConfigMap as a plain manifest.
    Plain,
    /// A Helm chart rendering the ConfigMap from its `values.yaml`.
    Chart,
}

impl Healthy {
    /// Writes `app/` so that the unit applies the ConfigMap `healthy` holding `value`.
    fn write(self, repo: &common::GitRepo, value: &str) {
        match self {
            Healthy::Plain => repo.write("app/cm.yaml", &common::cm("healthy", value)),
            Healthy::Chart => {
                repo.write("app/Chart.yaml", "apiVersion: v2\nname: healthy\nversion: 0.1.0\n");
                repo.write(
                    "app/templates/cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: healthy\ndata:\n  value: {{ .Values.value | quote }}\n",
                );
                repo.write("app/values.yaml", &format!("value: {value}\n"));
            }
        }
    }
}

/// Runs the daemon with the healthy unit beside `others` (`[[sync]]` tables) and `render`
/// lines in `[render]`; asserts its first sync within 10 s and three pushes within 2 s each;
/// returns the daemon (for more checks) and the push latencies.
async fn healthy_beside(
    env: &common::TestEnv,
    dir: &Path,
    others: &str,
    render: &str,
) -> (common::Daemon, Vec<Duration>) {
    healthy_of(Healthy::Plain, env, dir, others, render).await
}

/// [`healthy_beside`] with the healthy unit's repository holding `healthy`.
async fn healthy_of(
    healthy: Healthy,
    env: &common::TestEnv,
    dir: &Path,
    others: &str,
    render: &str,
) -> (common::Daemon, Vec<Duration>) {
    let repo = common::GitRepo::new();
    healthy.write(&repo, "v0");
    repo.commit_and_push("v0");
    let port = common::free_port();
    let path = dir.join("gitward.toml");
    let bin = common::charts::tools_bin();
    let unit = common::unit_toml("healthy", &repo.bare(), "app", &env.namespace, "");
    let text = format!(
        "[daemon]\nstate_dir = \"{}\"\nlisten = \"127.0.0.1:{port}\"\ninterval = \"5s\"\nresync_interval = \"1h\"\n\
         self_heal = false\n\n[render]\nhelm = \"{}\"\nkustomize = \"{}\"\n{render}\n\n{unit}{others}",
        dir.join("state").display(),
        bin.join("helm").display(),
        bin.join("kustomize").display(),
    );
    std::fs::write(&path, text).unwrap();
    let start = Instant::now();
    let daemon = common::Daemon::start(&path, port, &[]);
    let first = applied(&env.client, &env.namespace, "v0", Duration::from_secs(10)).await;
    assert!(first.is_some(), "the healthy unit's first sync took over 10 s: {}", daemon.log_text());
    eprintln!("first sync applied {:?} after start", start.elapsed());
    let mut pushes = Vec::new();
    for k in 1..=3 {
        // Long enough for the failing units' polls and retries to come round between pushes.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let want = format!("v{k}");
        healthy.write(&repo, &want);
        repo.commit_and_push(&want);
        let took = applied(&env.client, &env.namespace, &want, Duration::from_secs(2)).await;
        let took = took.unwrap_or_else(|| panic!("push {k} not applied within 2 s: {}", daemon.log_text()));
        eprintln!("push {k} applied after {took:?}");
        pushes.push(took);
    }
    (daemon, pushes)
}

#[tokio::test]
async fn six_hung_git_remotes_delay_no_push_of_a_healthy_unit() {
    let env = common::setup("iso-hung").await;
    let dir = tempfile::tempdir().unwrap();
    let port = faulty_server(Fault::Hang);
    let others: String = (0..6)
        .map(|i| git_unit(&format!("hung{i}"), &format!("http://127.0.0.1:{port}/r{i}.git"), &env.namespace))
        .collect();
    healthy_beside(&env, dir.path(), &others, "").await;
}

#[tokio::test]
async fn trickling_git_and_chart_repositories_delay_no_push_of_a_healthy_unit() {
    let env = common::setup("iso-trickle").await;
    let dir = tempfile::tempdir().unwrap();
    let port = faulty_server(Fault::Trickle);
    let url = format!("http://127.0.0.1:{port}");
    let mut others: String =
        (0..3).map(|i| git_unit(&format!("slow{i}"), &format!("{url}/r{i}.git"), &env.namespace)).collect();
    others.extend((0..3).map(|i| chart_unit(&format!("slowchart{i}"), &format!("{url}/charts{i}"), &env.namespace)));
    healthy_beside(&env, dir.path(), &others, &format!("chart_repositories = [\"{url}\"]")).await;
}

/// Three chart units on a chart repository and three OCI artifact units on a registry, both
/// a listener that never answers: their `[[sync]]` tables and the `[render]` line listing them.
fn hung_chart_sources(namespace: &str) -> (String, String) {
    let port = faulty_server(Fault::Hang);
    let url = format!("http://127.0.0.1:{port}");
    let mut others: String =
        (0..3).map(|i| chart_unit(&format!("chart{i}"), &format!("{url}/charts{i}"), namespace)).collect();
    others.extend(
        (0..3).map(|i| oci_unit(&format!("oci{i}"), &format!("oci://127.0.0.1:{port}/app{i}:latest"), namespace)),
    );
    (others, format!("chart_repositories = [\"{url}\", \"oci://127.0.0.1:{port}\"]"))
}

#[tokio::test]
async fn a_hung_chart_repository_and_registry_delay_no_push_of_a_healthy_unit() {
    let env = common::setup("iso-registry").await;
    let dir = tempfile::tempdir().unwrap();
    let (others, listed) = hung_chart_sources(&env.namespace);
    healthy_beside(&env, dir.path(), &others, &listed).await;
}

/// The same faults beside a healthy unit that is itself a Helm chart (rendered by helm from
/// its git repository at each push).
#[tokio::test]
async fn a_hung_chart_repository_and_registry_delay_no_push_of_a_healthy_chart_unit() {
    let env = common::setup("iso-registry-chart").await;
    let dir = tempfile::tempdir().unwrap();
    let (others, listed) = hung_chart_sources(&env.namespace);
    healthy_of(Healthy::Chart, &env, dir.path(), &others, &listed).await;
}

#[tokio::test]
async fn renders_that_run_to_their_timeout_delay_no_push_of_a_healthy_unit() {
    let env = common::setup("iso-render").await;
    let dir = tempfile::tempdir().unwrap();
    let slow = common::GitRepo::new();
    slow.copy_dir(&common::fixtures().join("render/helm/charts/slow"), "slow");
    slow.commit_and_push("a template that loops for minutes");
    let others: String =
        (0..6).map(|i| common::unit_toml(&format!("render{i}"), &slow.bare(), "slow", &env.namespace, "")).collect();
    healthy_beside(&env, dir.path(), &others, "timeout = \"3s\"").await;
}

#[tokio::test]
async fn fifty_failing_units_delay_no_push_and_say_they_back_off() {
    let env = common::setup("iso-fifty").await;
    let dir = tempfile::tempdir().unwrap();
    let (hung, refusing) = (faulty_server(Fault::Hang), faulty_server(Fault::Reset));
    let mut others = String::new();
    for i in 0..25 {
        others.push_str(&git_unit(
            &format!("down{i}"),
            &format!("http://127.0.0.1:{refusing}/r{i}.git"),
            &env.namespace,
        ));
        others.push_str(&git_unit(&format!("hung{i}"), &format!("http://127.0.0.1:{hung}/r{i}.git"), &env.namespace));
    }
    let (daemon, _) = healthy_beside(&env, dir.path(), &others, "").await;
    // A unit whose remote resets every connection says it backs off, with its error and until
    // when (between its attempts: read again until one falls between them).
    let line = || {
        let (_, verbose) = daemon.get("/readyz?verbose").unwrap_or_default();
        verbose.lines().find(|l| l.starts_with("[-]down0 ")).map(str::to_owned).unwrap_or(verbose)
    };
    let said = common::eventually(Duration::from_secs(30), || async {
        let line = line();
        line.contains("failed: ") && line.contains("; backing off until 20")
    })
    .await;
    assert!(said, "{}", line());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let metric = common::eventually(Duration::from_secs(30), || async {
        daemon.metric_sum("gitward_unit_backoff_until_seconds", &["unit=\"down0\""]) > now - 1.0
    })
    .await;
    assert!(metric, "no gitward_unit_backoff_until_seconds of down0 after {now}");
}
