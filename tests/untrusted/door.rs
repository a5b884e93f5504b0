//! The door between repository bytes and the file system, attacked as a user with push rights
//! would: git trees built with `git hash-object -t tree --literally` (names git itself never
//! writes: `../../…/pwned`, nested `..` directories) pushed with plain `git push` to a bare
//! repository, and an OCI artifact whose tar stream passes the cap, each read by the real
//! `gitward validate` and `gitward sync` against the real apiserver. Each revision is refused
//! with exit 2 naming the entry, nothing is written outside the scratch tree, no host byte
//! reaches the cluster, and the last good revision stays applied.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::common::{self, GitRepo, gitward};
use crate::sources::render::config_text;

/// A git object as the test writes it: any name, any nesting.
pub(super) enum Node {
    File(String),
    Link(&'static str),
    Dir(Vec<(String, Node)>),
    /// An object already written: its mode and id.
    Written(&'static str, String),
}

/// `git <args>` in `cwd` with `input` on stdin; its stdout, trimmed.
pub(super) fn git_stdin(cwd: &Path, args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Writes `node` into `repo`'s object database as it is (trees with
/// `hash-object -t tree --literally`, entries in git's order); returns (mode, object id).
pub(super) fn write(repo: &GitRepo, node: &Node) -> (&'static str, String) {
    let work = repo.work();
    match node {
        Node::File(text) => ("100644", git_stdin(&work, &["hash-object", "-w", "--stdin"], text.as_bytes())),
        Node::Link(target) => ("120000", git_stdin(&work, &["hash-object", "-w", "--stdin"], target.as_bytes())),
        Node::Written(mode, id) => (mode, id.clone()),
        Node::Dir(entries) => {
            let mut written: Vec<(String, &str, String)> = entries
                .iter()
                .map(|(name, node)| {
                    let (mode, id) = write(repo, node);
                    (name.clone(), mode, id)
                })
                .collect();
            // git sorts a tree's entries by name, a directory's as if it ended in `/`.
            written.sort_by_key(|(name, mode, _)| format!("{name}{}", if *mode == "40000" { "/" } else { "" }));
            let mut bytes = Vec::new();
            for (name, mode, id) in written {
                bytes.extend_from_slice(format!("{mode} {name}\0").as_bytes());
                bytes.extend_from_slice(&hex::decode(id).unwrap());
            }
            ("40000", git_stdin(&work, &["hash-object", "-w", "-t", "tree", "--literally", "--stdin"], &bytes))
        }
    }
}

/// Commits `root` on top of `main` and pushes it with plain `git push`; returns the commit.
pub(super) fn push_crafted(repo: &GitRepo, root: &Node) -> String {
    let (_, tree) = write(repo, root);
    let work = repo.work();
    let commit = repo.git(&["commit-tree", &tree, "-p", "HEAD", "-m", "crafted"], &work);
    repo.git(&["push", "-q", "origin", &format!("{commit}:refs/heads/main")], &work);
    commit
}

pub(super) fn dir(entries: Vec<(&str, Node)>) -> Node {
    Node::Dir(entries.into_iter().map(|(name, node)| (name.to_owned(), node)).collect())
}

/// A chart `app` whose one template is a ConfigMap `door-app` with `value`.
fn chart(value: &str, extra: Vec<(&str, Node)>) -> Node {
    let mut entries = vec![
        ("Chart.yaml", Node::File("apiVersion: v2\nname: app\nversion: 0.1.0\n".into())),
        ("templates", dir(vec![("cm.yaml", Node::File(common::cm("door-app", value)))])),
    ];
    entries.extend(extra);
    dir(entries)
}

/// The config file of one unit `name` at `path` of `repo`, with the render tools.
fn config_file(dir: &Path, name: &str, repo: &GitRepo, path: &str, ns: &str, extra: &str) -> std::path::PathBuf {
    let file = dir.join("gitward.toml");
    let unit = common::unit_toml(name, &repo.bare(), path, ns, extra);
    std::fs::write(&file, config_text(&dir.join("state"), "", &unit)).unwrap();
    file
}

/// Asserts `run` failed with exit 2 naming `entry` as refused.
pub(super) fn assert_refused(run: &common::Run, entry: &str) {
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let refusal = run.stderr.lines().find(|l| l.contains("refused")).unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(refusal.contains(entry), "the error names the entry {entry:?}: {refusal}");
    assert!(!refusal.contains("gitward-render-"), "a scratch path leaks into the message: {refusal}");
}

/// A chart directory holding a blob entry named `../../…/<outside>/pwned`: before the door,
/// `validate` wrote the attacker's bytes to `<outside>/pwned` and said `valid`.
#[tokio::test]
async fn a_tree_entry_named_as_a_path_out_of_the_tree_is_refused_and_writes_nothing() {
    let env = common::setup("door-name").await;
    let outside = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    repo.write("charts/app/Chart.yaml", "apiVersion: v2\nname: app\nversion: 0.1.0\n");
    repo.push(&[("charts/app/templates/cm.yaml", &common::cm("door-app", "1"))], "a good chart");
    let work = tempfile::tempdir().unwrap();
    let config =
        config_file(work.path(), "door", &repo, "charts/app", &env.namespace, "[sync.helm]\nrelease = \"app\"\n");
    let good = gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(good.code, Some(0), "{}", good.stderr);
    assert_eq!(common::cm_value(&env.client, &env.namespace, "door-app").await.as_deref(), Some("1"));

    let name = format!("{}{}/pwned", "../".repeat(16), outside.path().display().to_string().trim_start_matches('/'));
    let crafted = dir(vec![("charts", dir(vec![("app", chart("2", vec![(&name, Node::File("pwned".into()))]))]))]);
    push_crafted(&repo, &crafted);
    let entry = format!("charts/app/{name}");
    for command in ["validate", "sync"] {
        let run = gitward(&[command], &config, Duration::from_secs(120));
        assert!(!outside.path().join("pwned").exists(), "{command} wrote a file outside the scratch tree");
        assert_refused(&run, &entry);
    }
    assert_eq!(
        common::cm_value(&env.client, &env.namespace, "door-app").await.as_deref(),
        Some("1"),
        "the last good revision"
    );
}

/// The daemon meets the same tree on a poll: it logs the refusal naming the entry, writes
/// nothing outside, keeps the last good revision applied, and applies the next good push.
#[tokio::test]
async fn the_daemon_refuses_the_crafted_tree_keeps_the_last_good_revision_and_applies_the_next() {
    let env = common::setup("door-daemon").await;
    let outside = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    repo.write("charts/app/Chart.yaml", "apiVersion: v2\nname: app\nversion: 0.1.0\n");
    repo.push(&[("charts/app/templates/cm.yaml", &common::cm("door-app", "1"))], "a good chart");
    let work = tempfile::tempdir().unwrap();
    let tools = format!("[render]\nhelm = \"{}\"\n", common::charts::tools_bin().join("helm").display());
    let helm = "[sync.helm]\nrelease = \"app\"\n";
    let unit = common::unit_toml("door", &repo.bare(), "charts/app", &env.namespace, helm);
    let daemon = common::polling_daemon(work.path(), &tools, &unit);
    let at = |want: &'static str| {
        common::cm_data_becomes(&env.client, &env.namespace, "door-app", "value", want, Duration::from_secs(60))
    };
    assert!(at("1").await, "the good chart applied: {}", daemon.log_text());

    let name = format!("{}{}/pwned", "../".repeat(16), outside.path().display().to_string().trim_start_matches('/'));
    let crafted = dir(vec![("charts", dir(vec![("app", chart("2", vec![(&name, Node::File("pwned".into()))]))]))]);
    let commit = push_crafted(&repo, &crafted);
    let entry = format!("charts/app/{name}");
    let refused = common::eventually(Duration::from_secs(60), || {
        let hit = daemon.logged("sync failed").iter().any(|e| e.to_string().contains(&entry));
        async move { hit }
    })
    .await;
    assert!(refused, "the daemon logs the refusal naming the entry: {}", daemon.log_text());
    assert!(!outside.path().join("pwned").exists(), "the daemon wrote a file outside the scratch tree");
    assert_eq!(
        common::cm_value(&env.client, &env.namespace, "door-app").await.as_deref(),
        Some("1"),
        "the last good revision"
    );

    // The next good push, on top of the crafted commit, is applied.
    repo.git(&["reset", "-q", "--soft", &commit], &repo.work());
    repo.push(&[("charts/app/templates/cm.yaml", &common::cm("door-app", "3"))], "a good chart again");
    assert!(at("3").await, "the next good revision applied: {}", daemon.log_text());
}

/// A kustomization directory holding nested trees named `..` down to `<outside>/pwned`.
#[tokio::test]
async fn nested_tree_entries_named_dotdot_are_refused_and_write_nothing() {
    let env = common::setup("door-dotdot").await;
    let outside = tempfile::tempdir().unwrap();
    let repo = GitRepo::new();
    let kustomization = "resources:\n- cm.yaml\n";
    repo.write("app/kustomization.yaml", kustomization);
    repo.push(&[("app/cm.yaml", &common::cm("door-kust", "1"))], "a good kustomization");
    let work = tempfile::tempdir().unwrap();
    let config = config_file(work.path(), "door", &repo, "app", &env.namespace, "");
    let good = gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(good.code, Some(0), "{}", good.stderr);

    // `<outside>/pwned` as trees from `/`, below 16 trees named `..`.
    let mut entry = ("pwned".to_owned(), Node::File("pwned".into()));
    for part in outside.path().iter().skip(1).collect::<Vec<_>>().into_iter().rev() {
        entry = (part.to_string_lossy().into_owned(), Node::Dir(vec![entry]));
    }
    for _ in 0..16 {
        entry = ("..".to_owned(), Node::Dir(vec![entry]));
    }
    let mut app = vec![
        ("kustomization.yaml".to_owned(), Node::File(kustomization.into())),
        ("cm.yaml".to_owned(), Node::File(common::cm("door-kust", "2"))),
    ];
    app.push(entry);
    push_crafted(&repo, &dir(vec![("app", Node::Dir(app))]));
    for command in ["validate", "sync"] {
        let run = gitward(&[command], &config, Duration::from_secs(120));
        assert!(!outside.path().join("pwned").exists(), "{command} wrote a file outside the scratch tree");
        assert_refused(&run, "app/..");
    }
    assert_eq!(
        common::cm_value(&env.client, &env.namespace, "door-kust").await.as_deref(),
        Some("1"),
        "the last good revision"
    );
}

/// A chart with directories `a/b/c`, `c` holding trees named `..` back up to the chart and a
/// link `w` there to `../../../../../../etc/os-release`: read lexically the link stays in the
/// tree (six `..` below eight components); written, `w` sits in the chart and names the
/// host's file, which `.Files.Get` put in a ConfigMap.
#[tokio::test]
async fn a_dotdot_entry_with_a_link_below_it_cannot_read_a_host_file_into_the_cluster() {
    let (env, _, repo) = common::setup_repo("door-link").await;
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: door-leak\ndata:\n  value: {{ .Files.Get \"w\" | quote }}\n";
    repo.write("charts/leak/Chart.yaml", "apiVersion: v2\nname: leak\nversion: 0.1.0\n");
    repo.push(&[("charts/leak/templates/cm.yaml", template)], "a good chart");
    let work = tempfile::tempdir().unwrap();
    let config =
        config_file(work.path(), "door", &repo, "charts/leak", &env.namespace, "[sync.helm]\nrelease = \"leak\"\n");
    let good = gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(good.code, Some(0), "{}", good.stderr);
    assert_eq!(common::cm_value(&env.client, &env.namespace, "door-leak").await.as_deref(), Some(""));

    let link = dir(vec![("w", Node::Link("../../../../../../etc/os-release"))]);
    let up = dir(vec![("..", dir(vec![("..", dir(vec![("..", link)]))]))]);
    let leak = dir(vec![
        ("Chart.yaml", Node::File("apiVersion: v2\nname: leak\nversion: 0.1.0\n".into())),
        ("templates", dir(vec![("cm.yaml", Node::File(template.into()))])),
        ("a", dir(vec![("b", dir(vec![("c", up)]))])),
    ]);
    push_crafted(&repo, &dir(vec![("charts", dir(vec![("leak", leak)]))]));
    let run = gitward(&["sync"], &config, Duration::from_secs(120));
    let host = std::fs::read_to_string("/etc/os-release").unwrap();
    let first = host.lines().next().unwrap();
    let live = common::cm_value(&env.client, &env.namespace, "door-leak").await.unwrap_or_default();
    assert!(!live.contains(first), "a host file reached the cluster: {live:?}");
    assert_refused(&run, "charts/leak/a/b/c/..");
    assert_eq!(live, "", "the last good revision stays");
}

/// An artifact whose tar stream inflates past the cap (a PAX header of ~1 MiB of one byte,
/// ~1 KiB compressed, before its two files): before, the stream was cut at the cap, `b.yaml`
/// fell off the end, the sync said exit 0 and pruned `b`.
#[tokio::test]
async fn an_artifact_past_the_cap_is_refused_not_cut_short() {
    use crate::sources::artifacts::{Item, layer, push, unit};
    let env = common::setup("door-cap").await;
    let registry = common::charts::Registry::start().await;
    let files =
        |v: &str| vec![Item::File("app/a.yaml", common::cm("a", v)), Item::File("app/b.yaml", common::cm("b", v))];
    push(&registry.host, "v1", layer(&files("1"))).await;
    let url = format!("oci://{}/manifests/app:v1", registry.host);
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("gitward.toml");
    let max: u64 = 4096;
    let render =
        format!("max_tree_bytes = {max}\n{}", crate::sources::charts::listed(&format!("oci://{}", registry.host)));
    std::fs::write(
        &config,
        config_text(&work.path().join("state"), &render, &unit("door", &url, "app", &env.namespace)),
    )
    .unwrap();
    let good = gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(good.code, Some(0), "{}", good.stderr);

    // The cap of the inflated stream: twice max_tree_bytes and 1 MiB. A PAX header whose data
    // ends where b.yaml's header starts exactly at it.
    let cap = max * 2 + (1 << 20);
    let mut tar = tar::Builder::new(Vec::new());
    let pax_len = usize::try_from(cap - 3 * 512).unwrap();
    let mut record = String::new();
    for digits in 1..10 {
        let body = pax_len - digits - " comment=\n".len();
        let candidate = format!("{} comment={}\n", pax_len, "a".repeat(body));
        if candidate.len() == pax_len {
            record = candidate;
            break;
        }
    }
    assert_eq!(record.len(), pax_len);
    let mut pax = tar::Header::new_ustar();
    pax.set_path("PaxHeaders/a.yaml").unwrap();
    pax.set_entry_type(tar::EntryType::XHeader);
    pax.set_size(record.len() as u64);
    pax.set_cksum();
    tar.append(&pax, record.as_bytes()).unwrap();
    for (path, body) in [("app/a.yaml", common::cm("a", "2")), ("app/b.yaml", common::cm("b", "2"))] {
        let mut header = tar::Header::new_ustar();
        header.set_path(path).unwrap();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append(&header, body.as_bytes()).unwrap();
    }
    let stream = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&stream).unwrap();
    let layer_bytes = gz.finish().unwrap();
    assert!((layer_bytes.len() as u64) < max, "the layer itself is under the cap: {}", layer_bytes.len());
    push(&registry.host, "v1", layer_bytes).await;

    let run = gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("inflates to more than"), "{}", run.stderr);
    let a = common::cm_value(&env.client, &env.namespace, "a").await;
    let b = common::cm_value(&env.client, &env.namespace, "b").await;
    assert_eq!((a.as_deref(), b.as_deref()), (Some("1"), Some("1")), "the last good revision stays, nothing pruned");
}

/// A chart unit's archive is read through the door before Helm gets it: a chart repository
/// serving an archive with a hard link entry (Helm itself would read it as an empty file) is
/// refused naming the archive's entry, and the last good version stays.
#[tokio::test]
async fn a_chart_archive_with_an_entry_the_door_refuses_is_refused_before_helm_runs() {
    use crate::common::charts::{ChartServer, sha256_hex};
    use std::io::Read as _;
    let env = common::setup("door-chart").await;
    let work = tempfile::tempdir().unwrap();
    let (server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let state = tempfile::tempdir().unwrap();
    let unit = crate::common::charts::chart_unit("demo", &env.namespace, &server.url, ">=0.1.0");
    let listed = crate::sources::charts::listed(&server.url);
    let config = gitward::config::Config::from_toml(&config_text(state.path(), &listed, &unit), state.path(), "t.toml")
        .expect("valid config");
    let mut engine = common::engine(&env.client, &config, "demo").await;
    engine.sync().await.unwrap_or_else(|e| panic!("{}", crate::sources::render::chain(&e)));
    let version = || async {
        let api = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace);
        api.get_opt("shop-demo").await.unwrap().and_then(|c| c.data?.get("version").cloned())
    };
    assert_eq!(version().await.as_deref(), Some("0.1.0"));

    // 0.2.0 as `helm package` made it, plus a hard link entry; the index gives its digest.
    let archive = server.publish(work.path(), "demo", "0.2.0");
    let honest = sha256_hex(&archive);
    let mut stream = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap()).read_to_end(&mut stream).unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    for entry in tar::Archive::new(&stream[..]).entries().unwrap() {
        let mut entry = entry.unwrap();
        let mut header = entry.header().clone();
        let mut body = Vec::new();
        entry.read_to_end(&mut body).unwrap();
        builder.append_data(&mut header, entry.path().unwrap(), &body[..]).unwrap();
    }
    let mut link = tar::Header::new_ustar();
    link.set_entry_type(tar::EntryType::Link);
    link.set_size(0);
    builder.append_link(&mut link, "demo/templates/passwd.yaml", "/etc/passwd").unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&builder.into_inner().unwrap()).unwrap();
    std::fs::write(&archive, gz.finish().unwrap()).unwrap();
    let index = server.dir.join("index.yaml");
    let text = std::fs::read_to_string(&index).unwrap().replace(&honest, &sha256_hex(&archive));
    std::fs::write(&index, text).unwrap();

    let error = crate::sources::render::chain(&engine.sync().await.expect_err("the archive is refused"));
    assert!(error.contains("entry demo/templates/passwd.yaml: refused") && error.contains("hard link"), "{error}");
    assert!(error.contains("demo@0.2.0"), "the error names the archive: {error}");
    assert_eq!(version().await.as_deref(), Some("0.1.0"), "the last good version stays");
}
