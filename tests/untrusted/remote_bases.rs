//! Units with `allow_remote_bases` against a tenant who writes their kustomizations: a `?ref=`
//! that is a git option, a `file://` base into another repository, a render tool that leaves
//! a detached process behind, and a tool that reads the state directory or another unit's
//! scratch tree. Real `gitward sync`, real git and kustomize, the real apiserver; each attack
//! ends in cluster state, outputs and `/proc` that show it did not happen.

use crate::common;
use crate::sources::render::{config_text, tools_bin};
use crate::untrusted::sandbox::Listener;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, ListParams};

/// Long enough for a cold `gitward sync` on a loaded machine: a liveness bound only.
const LIMIT: Duration = Duration::from_secs(120);

/// `gitward sync` of `units` with `[render]` plus `render_extra` (and kustomize replaced by
/// `kustomize` when given), in `dir`.
fn sync(dir: &Path, render_extra: &str, units: &str, kustomize: Option<&Path>) -> common::Run {
    let config = dir.join("gitward.toml");
    let mut text = config_text(&dir.join("state"), render_extra, units);
    if let Some(tool) = kustomize {
        let pinned = format!("kustomize = \"{}\"", tools_bin().join("kustomize").display());
        text = text.replace(&pinned, &format!("kustomize = \"{}\"", tool.display()));
    }
    std::fs::write(&config, text).unwrap();
    common::gitward(&["sync"], &config, LIMIT)
}

/// Writes an executable shell script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// The pid and command line of every process on the host whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// `kustomize` passes a remote base's `?ref=` to `git fetch`, where `--upload-pack=<cmd>` runs
/// a command: here one that prints another unit's age key. Through a `file://` base (where git
/// runs upload-pack locally) and an allowed `https://` host alike, the base is refused before
/// kustomize runs, naming the file and the base; the key's bytes appear in no output, no
/// `status -o json` and no Event, and the listed host gets no connection. A plain `file://` base
/// into another repository is refused too, and its objects never reach the cluster.
#[tokio::test]
async fn an_option_as_a_ref_and_file_bases_are_refused_before_kustomize_runs() {
    let (env, ns) = common::setup_ns("remote-inject").await;
    let base = Listener::start();
    let dir = tempfile::tempdir().unwrap();
    let canary = format!("AGE-SECRET-KEY-1CANARY{}", std::process::id());
    let key = dir.path().join("other-unit-age.key");
    std::fs::write(&key, &canary).unwrap();
    let other = common::GitRepo::new();
    other.write("app/kustomization.yaml", &format!("namespace: {ns}\nresources: [cm.yaml]\n"));
    other.push(&[("app/cm.yaml", &common::cm("stolen", "another tenant's"))], "another tenant's app");
    let inject = format!("--upload-pack=cat%20{}%3E%262%3Bfalse", key.display());
    let listed = format!("remote_base_hosts = [\"127.0.0.1:{}\"]", base.port);
    let cases = [
        ("file-inject", format!("file://{}//app?ref={inject}", other.bare().display()), "only https://"),
        ("https-inject", format!("https://127.0.0.1:{}/o/r.git//app?ref={inject}", base.port), "not a plain git ref"),
        ("file-mirror", format!("file://{}//app?ref=main", other.bare().display()), "only https://"),
    ];
    for (name, resource, why) in cases {
        let repo = common::GitRepo::new();
        repo.push(&[("app/kustomization.yaml", &format!("namespace: {ns}\nresources:\n- \"{resource}\"\n"))], name);
        let unit = common::unit_toml(name, &repo.bare(), "app", &ns, "allow_remote_bases = true");
        let run = sync(dir.path(), &listed, &unit, None);
        assert_eq!(run.code, Some(2), "{name}: {}", run.stderr);
        let event = common::log_events(&run.stderr, "sync failed").next().unwrap_or_default();
        let error = event["error"].as_str().or(event["fields"]["error"].as_str()).unwrap_or_default().to_owned();
        let refused = format!("app/kustomization.yaml: remote base {resource:?} refused");
        assert!(error.starts_with(&refused) && error.contains(why), "{name}: {error}\n{}", run.stderr);
        let status = common::gitward(&["status", "-o", "json"], &dir.path().join("gitward.toml"), LIMIT);
        for (what, text) in [("stdout", &run.stdout), ("stderr", &run.stderr), ("status", &status.stdout)] {
            assert!(!text.contains(&canary), "{name}: the key is in {what}: {text}");
        }
    }
    assert_eq!(base.connections(), 0, "the listed host was contacted for a refused base");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    assert!(configmaps.get_opt("stolen").await.unwrap().is_none(), "another tenant's repository was rendered");
    let events: Api<Event> = Api::namespaced(env.client.clone(), &ns);
    for event in events.list(&ListParams::default()).await.unwrap() {
        let message = event.message.unwrap_or_default();
        assert!(!message.contains(&canary), "the key is in an Event: {message}");
    }
}

/// A render tool that starts a process in a new session (`setsid`, out of its process group)
/// and then exits, or hangs until `[render] timeout`: when `gitward sync` returns, no such
/// process is left on the host, for the version run and the build alike.
#[tokio::test]
async fn a_render_that_detaches_a_process_leaves_none_behind() {
    let (_, ns, repo) = common::setup_repo("remote-detach").await;
    repo.push(&[("app/kustomization.yaml", "resources: []\n")], "a kustomization");
    for (case, tail, extra) in [
        ("exits", "printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: detached\\n'\n", ""),
        ("hangs", "exec sleep 100\n", "timeout = \"3s\""),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("{}.{}", 400 + std::process::id() % 1000, case.len());
        let tool = script(
            dir.path(),
            "detaching-kustomize",
            &format!(
                "setsid sh -c 'exec sleep {marker}' </dev/null >/dev/null 2>&1 &\nsleep 0.3\n\
                 if [ \"$1\" = version ]; then echo v5.0.0-detaching; exit 0; fi\n{tail}"
            ),
        );
        let unit = common::unit_toml(case, &repo.bare(), "app", &ns, "render = \"kustomize\"");
        let run = sync(dir.path(), extra, &unit, Some(&tool));
        let left = processes_with(&format!("sleep {marker}"));
        for (pid, _) in &left {
            // SAFETY: kill on a pid read from /proc; cleans up after a failing run.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        assert!(left.is_empty(), "{case}: detached processes outlived the render: {left:?}\n{}", run.stderr);
        match case {
            "exits" => assert_eq!(run.code, Some(0), "{}", run.stderr),
            _ => assert!(run.code == Some(2) && run.stderr.contains("did not finish within 3s"), "{}", run.stderr),
        }
    }
}

/// The tool of a unit with `allow_remote_bases` (a script in kustomize's place) tries to read a
/// file in gitward's state directory and one in another unit's scratch tree, and prints what
/// it got into the ConfigMap it renders: sandboxed, both reads fail and the render succeeds
/// with empty values; with `sandbox = "off"` both files' bytes arrive, so the test can fail.
#[tokio::test]
async fn a_remote_bases_units_tool_reads_neither_the_state_dir_nor_another_units_tree() {
    let (env, ns) = common::setup_ns("remote-reads").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("planted.key"), "state-bytes").unwrap();
    let other = tempfile::Builder::new().prefix("gitward-other-").tempdir().unwrap();
    std::fs::create_dir_all(other.path().join("repo/app")).unwrap();
    std::fs::write(other.path().join("repo/app/secret.yaml"), "scratch-bytes").unwrap();
    let tool = script(
        dir.path(),
        "reading-kustomize",
        &format!(
            "if [ \"$1\" = version ]; then echo v5.0.0-reading; exit 0; fi\n\
             s=$(cat {state}/planted.key 2>/dev/null); o=$(cat {other}/repo/app/secret.yaml 2>/dev/null)\n\
             printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: reads\\ndata:\\n  state: \"%s\"\\n  other: \"%s\"\\n' \"$s\" \"$o\"\n",
            state = state.display(),
            other = other.path().display(),
        ),
    );
    let repo = common::GitRepo::new();
    repo.push(&[("app/kustomization.yaml", "resources: []\n")], "a kustomization");
    let unit =
        common::unit_toml("reads", &repo.bare(), "app", &ns, "render = \"kustomize\"\nallow_remote_bases = true");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let run = sync(dir.path(), "", &unit, Some(&tool));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let data = configmaps.get("reads").await.unwrap().data.unwrap_or_default();
    assert_eq!(data.get("state").map(String::as_str), Some(""), "the state directory was read: {data:?}");
    assert_eq!(data.get("other").map(String::as_str), Some(""), "another unit's tree was read: {data:?}");

    let run = sync(dir.path(), "sandbox = \"off\"", &unit, Some(&tool));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let data = configmaps.get("reads").await.unwrap().data.unwrap_or_default();
    assert_eq!(data.get("state").map(String::as_str), Some("state-bytes"), "unconfined, the read succeeds");
    assert_eq!(data.get("other").map(String::as_str), Some("scratch-bytes"));
}
