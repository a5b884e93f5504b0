//! The sandbox against a shell that tries to leave it: each test runs `/bin/sh` (or `bash`, for
//! its `/dev/tcp`) through [`super::super::process::run`] with the sandbox on, and asserts on
//! what the attempt left behind — a file, a connection, a byte count.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::*;
use crate::render::process::{self, Grants, Limits, RunError};

const LIMITS: Limits =
    Limits { timeout: Duration::from_secs(30), max_output: 1 << 20, max_memory: 1 << 30, sandbox: SandboxMode::On };

fn shell(program: &str, script: &str, cwd: &Path) -> Command {
    let mut cmd = process::command(Path::new(program), cwd, &[]);
    cmd.args(["-c", script]);
    cmd
}

/// A scratch-like directory: `home/` and `tmp/` writable, the rest readable.
fn scratch() -> (tempfile::TempDir, Grants) {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["home", "tmp"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    let grants = Grants::scratch(dir.path(), Path::new("/bin/sh"));
    (dir, grants)
}

#[test]
fn this_kernel_confines_tools() {
    // The machines gitward is tested on have Landlock with network rules and user namespaces;
    // a kernel without them must fail here, not skip the tests below.
    let support = Support::probe();
    assert!(support.usable(), "{support:?}: {:?}", support.missing());
    assert!(support.namespaces, "the pod is made and entered in full here");
    assert!(support.seccomp, "the filter is installed and enforced here");
    let on = state(SandboxMode::On);
    assert!(on.starts_with("landlock ABI ") && on.ends_with(", seccomp, user, network and PID namespaces"), "{on}");
    assert!(state(SandboxMode::Off).starts_with("off"));
    assert_eq!(layers(SandboxMode::On), [("landlock", true), ("seccomp", true), ("namespaces", true)]);
    assert_eq!(layers(SandboxMode::Off), [("landlock", false), ("seccomp", false), ("namespaces", false)]);
}

#[test]
fn a_kernel_without_landlock_or_without_the_filter_is_not_usable() {
    let support = |landlock_abi, namespaces, seccomp| Support { landlock_abi, namespaces, seccomp };
    assert!(!support(0, true, true).usable());
    assert!(support(0, true, true).missing().unwrap().contains("no Landlock"));
    assert!(!support(7, true, false).usable(), "namespaces do not stand in for the filter");
    assert!(support(7, true, false).missing().unwrap().contains("seccomp"));
    assert!(support(1, false, true).usable(), "the filter closes the network where Landlock cannot");
    assert_eq!(support(7, true, true).missing(), None);
}

/// Every attack of [`attacks::Attack::ALL`], under `setting`, and the off run that shows each
/// can succeed.
fn attacks_fail_under(setting: attacks::Setting) {
    assert_eq!(attacks::escapes(setting), [], "under {setting:?}");
    assert_eq!(attacks::escapes(attacks::Setting::off()), attacks::Attack::ALL, "every attack works unconfined");
}

#[test]
fn every_attack_fails_under_every_layer_this_kernel_has() {
    attacks_fail_under(attacks::Setting::kernel());
}

#[test]
fn every_attack_fails_without_namespaces_under_landlock_and_seccomp() {
    attacks_fail_under(attacks::Setting::without_namespaces());
}

#[test]
fn a_missing_layer_refuses_the_run_unless_the_sandbox_is_off() {
    let (dir, grants) = scratch();
    let without = Support { seccomp: false, ..Support::probe() };
    let run = |limits| process::run_within(shell("/bin/sh", "echo ran", dir.path()), limits, &grants, without);
    match run(LIMITS) {
        Err(RunError::Sandbox(message)) => assert!(message.contains("seccomp filter"), "{message}"),
        other => panic!("a run without the filter is refused: {other:?}"),
    }
    let off = Limits { sandbox: SandboxMode::Off, ..LIMITS };
    assert_eq!(run(off).unwrap(), b"ran\n");
}

#[test]
fn reads_outside_the_granted_paths_are_denied() {
    let (dir, grants) = scratch();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "host-bytes").unwrap();
    std::fs::write(dir.path().join("inside"), "tree-bytes").unwrap();
    let script = format!("cat inside; cat {}/secret; cat /etc/hostname; exit 0", outside.path().display());
    let out = process::run(shell("/bin/sh", &script, dir.path()), LIMITS, &grants).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(out, "tree-bytes", "only the scratch tree is readable");
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    assert!(!out.contains(hostname.trim()));
}

#[test]
fn writes_outside_home_and_tmp_are_denied() {
    let (dir, grants) = scratch();
    let outside = tempfile::tempdir().unwrap();
    let script = format!(
        "echo a > home/ok; echo b > tmp/ok; echo c > tree-file; echo d > {}/pwned; mkdir {}/dir; exit 0",
        outside.path().display(),
        outside.path().display()
    );
    process::run(shell("/bin/sh", &script, dir.path()), LIMITS, &grants).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("home/ok")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("tmp/ok")).unwrap(), "b\n");
    assert!(!dir.path().join("tree-file").exists(), "the materialized tree is read-only");
    assert!(!outside.path().join("pwned").exists() && !outside.path().join("dir").exists());
}

#[test]
fn tcp_connections_to_loopback_are_denied() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (dir, grants) = scratch();
    let script = format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo connected; exit 0");
    let out = process::run(shell("/bin/bash", &script, dir.path()), LIMITS, &grants).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "", "bash could not connect");
    // The shell has exited: a connect it made would be queued on the listener by now.
    assert_eq!(listener.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    // Off, the same script connects: the test can fail.
    let off = Limits { sandbox: SandboxMode::Off, ..LIMITS };
    let out = process::run(shell("/bin/bash", &script, dir.path()), off, &grants).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "connected\n");
    assert!(listener.accept().is_ok());
}

#[test]
fn the_network_namespace_has_no_interface_up() {
    let (dir, mut grants) = scratch();
    grants.read.push("/proc".into());
    // /proc/net/dev lists the namespace's interfaces; a fresh one has only `lo`.
    let script = "cat /proc/self/net/dev";
    let out = process::run(shell("/bin/sh", script, dir.path()), LIMITS, &grants).unwrap();
    let out = String::from_utf8(out).unwrap();
    let interfaces: Vec<&str> = out.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
    assert_eq!(interfaces, ["lo"], "{out}");
}

#[test]
fn inherited_descriptors_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("leak");
    let file = std::fs::File::create(&target).unwrap();
    // SAFETY: dup of a valid descriptor; the copy has no close-on-exec flag, as a descriptor
    // opened by a C library or inherited from the parent may not.
    let fd = unsafe { libc::dup(std::os::fd::AsRawFd::as_raw_fd(&file)) };
    assert!(fd > 2);
    let script = format!("echo leaked >&{fd} && echo wrote; exit 0");
    let (scratch, grants) = scratch();
    // bash: dash takes one digit after `>&`, and with tests running in parallel the copy is
    // often descriptor 10 or above (a syntax error in dash, not a closed descriptor).
    let out = process::run(shell("/bin/bash", &script, scratch.path()), LIMITS, &grants).unwrap();
    // SAFETY: the descriptor dup returned.
    unsafe { libc::close(fd) };
    assert_eq!(String::from_utf8_lossy(&out), "");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "", "nothing reached the inherited file");
}

#[test]
fn the_memory_cap_fails_a_tool_that_allocates_past_it() {
    let (dir, mut grants) = scratch();
    grants.read.push("/dev/zero".into());
    let script = "dd if=/dev/zero of=/dev/null bs=256M count=1 2>&1";
    let small = Limits { max_memory: 64 << 20, ..LIMITS };
    match process::run(shell("/bin/sh", script, dir.path()), small, &grants) {
        Err(RunError::Failed(_, message)) => assert!(message.contains("memory"), "{message}"),
        other => panic!("{other:?}"),
    }
    process::run(shell("/bin/sh", script, dir.path()), LIMITS, &grants).expect("256 MiB fit under 1 GiB");
}

#[test]
fn a_tool_runs_at_a_lower_priority_than_gitward() {
    let (dir, grants) = scratch();
    // SAFETY: getpriority of this process.
    let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    // `nice` without a command prints the nice value it runs at.
    let out = process::run(shell("/bin/sh", "/usr/bin/nice", dir.path()), LIMITS, &grants).unwrap();
    let nice: i32 = String::from_utf8(out).unwrap().trim().parse().unwrap();
    assert_eq!(nice, (own + RENDER_NICENESS).min(19));
}

#[test]
fn the_environment_is_empty() {
    let (dir, grants) = scratch();
    assert!(std::env::var_os("HOME").is_some());
    let out = process::run(shell("/bin/sh", "/usr/bin/env", dir.path()), LIMITS, &grants).unwrap();
    let mut names: Vec<String> = String::from_utf8(out)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
        .filter(|k| k != "PWD")
        .collect();
    names.sort();
    let mut proxies = process::PROXY_VARIABLES.map(str::to_owned).to_vec();
    proxies.sort();
    assert_eq!(names, proxies, "only the dead proxy is set");
}

/// The command lines of every process on the host that holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(format!("{}: {cmdline}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

#[test]
fn a_detached_process_is_killed_when_the_run_ends_however_it_ends() {
    let (dir, grants) = scratch();
    for (case, tail, limits) in [
        ("exit", "exit 0", LIMITS),
        ("fail", "exit 3", LIMITS),
        ("timeout", "exec sleep 30", Limits { timeout: Duration::from_millis(500), ..LIMITS }),
    ] {
        // A sleep of a length no other process has, detached from the tool's group and session.
        let marker = format!("{}.{}", 300 + std::process::id() % 1000, case.len());
        let script = format!("setsid sh -c 'exec sleep {marker}' </dev/null >/dev/null 2>&1 & sleep 0.2; {tail}");
        let began = std::time::Instant::now();
        let _ = process::run(shell("/bin/sh", &script, dir.path()), limits, &grants);
        assert!(began.elapsed() < Duration::from_secs(10), "{case}: the run waited for its detached child");
        let left = processes_with(&format!("sleep {marker}"));
        assert!(left.is_empty(), "{case}: a detached process outlived the run: {left:?}");
    }
}

#[test]
fn a_remote_bases_run_reads_only_its_tree_and_reaches_only_its_proxy() {
    let (dir, mut grants) = scratch();
    grants.proxy = Some(Default::default());
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("substitute.key"), "state-bytes").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        "cat {}/substitute.key; cat /etc/hostname; echo x > /dev/tcp/127.0.0.1/{} && echo connected; \
         p=${{HTTPS_PROXY##*:}}; echo x > /dev/tcp/127.0.0.1/$p && echo proxied; exit 0",
        state.path().display(),
        listener.local_addr().unwrap().port()
    );
    let out = process::run(shell("/bin/bash", &script, dir.path()), LIMITS, &grants).unwrap();
    assert_eq!(String::from_utf8_lossy(&out), "proxied\n", "only the proxy is reachable, no host file readable");
    assert_eq!(listener.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
}
