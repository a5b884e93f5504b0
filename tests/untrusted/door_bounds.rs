//! The door's bounds, attacked with trees a user with push rights can make: a link target of
//! 4 MiB, one of 200,000 components, a directory named with 60,000 bytes holding 40,000 files,
//! a daemon busy with such a unit when SIGTERM comes, and a chart whose `charts` directory is a
//! link. Each is refused naming the entry, quickly and in bounded memory (`gitward validate`
//! and `gitward run` run for real; their times are liveness bounds, their peak memory is
//! measured), and no dependency archive is written through a link.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use super::door::{Node, assert_refused, dir, git_stdin, push_crafted};
use crate::common::{self, GitRepo, gitward};
use crate::sources::render::config_text;

/// A kustomization `app/` of one ConfigMap `bounds`, pushed as a good revision; the config
/// file of a unit following it into `ns`.
fn good_kustomization(work: &Path, ns: &str, repo: &GitRepo) -> std::path::PathBuf {
    repo.write("app/kustomization.yaml", "resources:\n- cm.yaml\n");
    repo.push(&[("app/cm.yaml", &common::cm("bounds", "1"))], "a good kustomization");
    let config = work.join("gitward.toml");
    let unit = common::unit_toml("bounds", &repo.bare(), "app", ns, "");
    std::fs::write(&config, config_text(&work.join("state"), "", &unit)).unwrap();
    config
}

/// `app/` with the good kustomization and `extra` beside it.
fn app_with(extra: Vec<(String, Node)>) -> Node {
    let mut app = vec![
        ("kustomization.yaml".to_owned(), Node::File("resources:\n- cm.yaml\n".into())),
        ("cm.yaml".to_owned(), Node::File(common::cm("bounds", "2"))),
    ];
    app.extend(extra);
    dir(vec![("app", Node::Dir(app))])
}

/// A blob of `bytes` written into `repo`: its id.
fn blob(repo: &GitRepo, bytes: &[u8]) -> String {
    git_stdin(&repo.work(), &["hash-object", "-w", "--stdin"], bytes)
}

/// `validate` of `config`, which must be refused naming `entry` within 10 s (a liveness
/// bound); the run, its time printed.
fn refused_by_validate(config: &Path, entry: &str) -> common::Run {
    let started = Instant::now();
    let run = gitward(&["validate"], config, Duration::from_secs(10));
    eprintln!("validate refused in {:?}, peak {} KiB", started.elapsed(), run.peak_kib);
    assert_refused(&run, entry);
    let longest = run.stderr.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 16 * 1024, "a log line of {longest} bytes: the entry is shown cut");
    run
}

/// A link whose target is 4 MiB (`a/` two million times, within the unit's 4 MiB file cap):
/// refused when added, as longer than `PATH_MAX`.
#[tokio::test]
async fn a_link_target_of_4_mib_is_refused_naming_the_link() {
    let work = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    let config = good_kustomization(work.path(), "default", &repo);
    let target = blob(&repo, "a/".repeat(2 << 20).as_bytes());
    push_crafted(&repo, &app_with(vec![("l".into(), Node::Written("120000", target))]));
    let run = refused_by_validate(&config, "app/l");
    assert!(run.stderr.contains("PATH_MAX"), "{}", &run.stderr[..run.stderr.len().min(4000)]);
}

/// A link whose target is `a/` 200,000 times: the walk that joined the whole path at every
/// component took minutes on it; now it is refused when added.
#[tokio::test]
async fn a_link_of_200000_components_is_refused_naming_the_link() {
    let work = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    let config = good_kustomization(work.path(), "default", &repo);
    let target = blob(&repo, "a/".repeat(200_000).as_bytes());
    push_crafted(&repo, &app_with(vec![("l".into(), Node::Written("120000", target))]));
    refused_by_validate(&config, "app/l");
}

/// A directory named with 60,000 bytes holding 40,000 one-byte files (a 256 KiB repository
/// that took 2.5 GB when every entry's whole path was kept): refused at the directory's name,
/// nothing below it read, the peak memory of the whole run under 100 MiB.
#[tokio::test]
async fn a_directory_with_a_60000_byte_name_and_40000_files_is_refused_in_bounded_memory() {
    let work = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    let config = good_kustomization(work.path(), "default", &repo);
    let one = hex::decode(blob(&repo, b"x")).unwrap();
    let mut names: Vec<String> = (0..40_000).map(|i| i.to_string()).collect();
    names.sort();
    let mut tree = Vec::new();
    for name in &names {
        tree.extend_from_slice(format!("100644 {name}\0").as_bytes());
        tree.extend_from_slice(&one);
    }
    let big = git_stdin(&repo.work(), &["hash-object", "-w", "-t", "tree", "--literally", "--stdin"], &tree);
    let name = "n".repeat(60_000);
    push_crafted(&repo, &app_with(vec![(name.clone(), Node::Written("40000", big))]));
    let run = refused_by_validate(&config, &format!("app/{}", &name[..100]));
    assert!(run.stderr.contains("NAME_MAX"), "{}", &run.stderr[..run.stderr.len().min(4000)]);
    assert!(run.peak_kib < 100 * 1024, "peak memory {} KiB", run.peak_kib);
}

/// A daemon whose unit holds the link of 200,000 components gets SIGTERM while it syncs: it
/// exits within 15 s (before, the door held a core for minutes and the process waited for it
/// after logging `shutting down`).
#[tokio::test]
async fn a_daemon_syncing_a_unit_with_a_runaway_link_exits_on_sigterm() {
    let env = common::setup("door-term").await;
    let work = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    good_kustomization(work.path(), &env.namespace, &repo);
    let target = blob(&repo, "a/".repeat(200_000).as_bytes());
    push_crafted(&repo, &app_with(vec![("l".into(), Node::Written("120000", target))]));
    let tools = config_text(Path::new("/unused"), "", "");
    let render = &tools[tools.find("[render]").unwrap()..];
    let unit = common::unit_toml("bounds", &repo.bare(), "app", &env.namespace, "");
    let (path, port) = common::daemon_config(work.path(), render, "", &unit);
    let mut daemon = syncing(&path, port).await;
    std::thread::sleep(Duration::from_millis(500));
    exits_on_sigterm_within_15_s(&mut daemon);
}

/// An umbrella chart whose `charts` is a link to an (empty) directory of the chart: its
/// dependency archive was written through the link (and Helm read it there). Now the
/// dependency goes through the door with the tree: the render is refused naming the link, and
/// nothing is written through it.
#[tokio::test]
async fn a_chart_whose_charts_directory_is_a_link_gets_no_archive_written_through_it() {
    use crate::common::charts::ChartServer;
    let env = common::setup("door-charts").await;
    let work = tempfile::tempdir().unwrap();
    let (server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let repo = GitRepo::new();
    repo.push(&[("README", "crafted below\n")], "start");
    let chart = format!(
        "apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n- name: demo\n  version: \"0.1.0\"\n  repository: \"{}/\"\n",
        server.url
    );
    let lock = format!("dependencies:\n- name: demo\n  version: 0.1.0\n  repository: \"{}/\"\n", server.url);
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-umbrella\ndata:\n  umbrella: \"yes\"\n";
    let umbrella = dir(vec![
        ("Chart.yaml", Node::File(chart)),
        ("Chart.lock", Node::File(lock)),
        ("templates", dir(vec![("cm.yaml", Node::File(template.into()))])),
        ("vendor", dir(vec![])),
        ("charts", Node::Link("vendor")),
    ]);
    push_crafted(&repo, &dir(vec![("charts", dir(vec![("umbrella", umbrella)]))]));
    let state = tempfile::tempdir().unwrap();
    let unit = crate::sources::fetch_guard::umbrella_unit(&repo, &env.namespace);
    let text = config_text(state.path(), &crate::sources::charts::listed(&server.url), &unit);
    let config = gitward::config::Config::from_toml(&text, state.path(), "test.toml").expect("valid config");
    let mut engine = common::engine(&env.client, &config, "umbrella").await;
    let error = crate::sources::render::chain(&engine.sync().await.expect_err("the chart is refused"));
    assert!(error.contains("charts/umbrella/charts") && error.contains("not a directory of the tree"), "{error}");
    let applied =
        Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace).get_opt("shop-umbrella").await.unwrap();
    assert!(applied.is_none(), "nothing of the refused revision is applied");
}

/// A daemon whose render waits on a tool that does not end (a `kustomize` that sleeps, under a
/// `[render] timeout` of 5 minutes) gets SIGTERM: it exits within 15 s, not when the render
/// ends (the runtime waited for every blocking task when the process returned).
#[tokio::test]
async fn a_daemon_waiting_on_a_render_exits_on_sigterm() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = common::setup("door-term-tool").await;
    let work = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    good_kustomization(work.path(), &env.namespace, &repo);
    let tool = work.path().join("kustomize");
    std::fs::write(&tool, "#!/bin/sh\n[ \"$1\" = version ] && { echo v5.8.1; exit 0; }\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let render = format!("[render]\nkustomize = \"{}\"\ntimeout = \"5m\"\n", tool.display());
    let unit = common::unit_toml("bounds", &repo.bare(), "app", &env.namespace, "");
    let (path, port) = common::daemon_config(work.path(), &render, "", &unit);
    let mut daemon = syncing(&path, port).await;
    std::thread::sleep(Duration::from_secs(1));
    assert!(daemon.child.try_wait().unwrap().is_none(), "the daemon runs: {}", daemon.log_text());
    exits_on_sigterm_within_15_s(&mut daemon);
}

/// Starts the daemon of config `path` and waits (at most 30 s) until its first sync starts.
async fn syncing(path: &Path, port: u16) -> common::Daemon {
    let daemon = common::Daemon::start(path, port, &[]);
    let triggered = common::eventually(Duration::from_secs(30), || {
        let hit = !daemon.logged("sync triggered").is_empty();
        async move { hit }
    })
    .await;
    assert!(triggered, "the unit's first sync starts: {}", daemon.log_text());
    daemon
}

/// Sends `daemon` SIGTERM and asserts it exits 0 within 15 s.
fn exits_on_sigterm_within_15_s(daemon: &mut common::Daemon) {
    daemon.signal("TERM");
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            break status;
        }
        assert!(asked.elapsed() < Duration::from_secs(15), "still running 15 s after SIGTERM: {}", daemon.log_text());
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("exited {status:?} {:?} after SIGTERM", asked.elapsed());
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
}
