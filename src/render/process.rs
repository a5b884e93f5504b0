//! Running one render tool as a child process: an empty environment but for what is passed,
//! stdin closed, stdout collected up to a cap, stderr kept for the error message, a deadline
//! after which the tool is killed, and the OS sandbox of [`super::sandbox`] around it (the
//! [`Grants`] a run names). The tool leads its own process group; when the run ends — success,
//! failure, timeout, too much output — the group is killed and so is every process left in
//! the run's PID namespace ([`super::pod`]), and the pipes are read no longer than a short
//! drain after the tool's exit or the deadline. Blocking: callers run in `spawn_blocking`.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::proxy::{Deadlines, Proxy};
use super::sandbox::{self, Confined, Policy};
use crate::config::{Origin, SandboxMode};

/// The most bytes of a tool's stderr kept for its error message.
const MAX_STDERR: usize = 64 << 10;

/// How long to wait between checks of a running tool.
const POLL: Duration = Duration::from_millis(10);

/// How long the pipes are still read after the tool exited and its processes were killed:
/// what the tool wrote is in the pipe by then; a writer still holding it (outside a PID
/// namespace, a process that left the tool's group) is not waited for.
const DRAIN: Duration = Duration::from_millis(500);

/// Why a run produced no output.
#[derive(Debug)]
pub(super) enum RunError {
    /// The binary could not be started (missing, not executable).
    Spawn(std::io::Error),
    /// The tool exited unsuccessfully; its stderr, or stdout when stderr is empty.
    Failed(ExitStatus, String),
    /// The deadline passed; the tool was killed.
    Timeout,
    /// stdout went over the cap; the tool was killed.
    TooLarge,
    /// The sandbox cannot be set up (the kernel lacks it and `[render] sandbox` is on); the
    /// tool was not started.
    Sandbox(String),
}

/// What one run may use.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Wall time before the tool is killed.
    pub timeout: Duration,
    /// Most bytes read from stdout.
    pub max_output: u64,
    /// Most private writable memory, in bytes (`RLIMIT_DATA`).
    pub max_memory: u64,
    /// Whether the run is confined ([`super::sandbox`]).
    pub sandbox: SandboxMode,
}

impl Limits {
    /// The limits `[render]` sets.
    pub fn of(tools: &crate::config::RenderTools) -> Self {
        Self {
            timeout: tools.timeout,
            max_output: tools.max_output_bytes,
            max_memory: tools.max_memory,
            sandbox: tools.sandbox,
        }
    }
}

/// What one run may touch besides the system directories ([`super::sandbox::Policy`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Grants {
    /// Read (and execute) beneath these: the scratch directory, the tool binary, a key file.
    pub read: Vec<PathBuf>,
    /// Read and write beneath these: the tool's `HOME` and `TMPDIR`.
    pub write: Vec<PathBuf>,
    /// For kustomize with `allow_remote_bases`: the targets the remote-bases proxy tunnels to
    /// ([`super::proxy`]); the tool reaches that proxy and nothing else.
    pub proxy: Option<BTreeMap<String, Origin>>,
}

impl Grants {
    /// A run of `tool` in scratch directory `root`: read `root` and the binary, write
    /// `root/home` and `root/tmp`.
    pub fn scratch(root: &Path, tool: &Path) -> Self {
        Self {
            read: vec![root.to_owned(), tool.to_owned()],
            write: vec![root.join("home"), root.join("tmp")],
            proxy: None,
        }
    }
}

/// The proxy a tool without network is given: the discard port of the loopback address, where
/// nothing listens, so every HTTP(S) request that honours the proxy variables (Go's
/// `net/http`, hence kustomize, Helm and the KMS clients of sops) fails at once. Go sends
/// requests to loopback hosts directly, past any proxy: those are refused before the tool runs
/// (kustomize's URL fields, [`super::kustomize::input_dirs`]).
pub(super) const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// A command for `program` with an empty environment plus `env`, run in `cwd`, and without
/// network: the proxy variables name [`DEAD_PROXY`] unless `env` sets them (a unit that
/// allows remote bases passes no proxy of its own, and then none is set).
pub(super) fn command(program: &Path, cwd: &Path, env: &[(&str, &Path)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear().current_dir(cwd);
    for key in PROXY_VARIABLES {
        cmd.env(key, DEAD_PROXY);
    }
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd
}

/// The variables Go's `net/http` (`httpproxy.FromEnvironment`) reads for a proxy.
pub(super) const PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/// Runs `cmd` to completion within `limits`, confined to `grants` by every layer the kernel
/// has ([`sandbox::Support::probe`]); returns its stdout.
pub(super) fn run(cmd: Command, limits: Limits, grants: &Grants) -> Result<Vec<u8>, RunError> {
    run_within(cmd, limits, grants, sandbox::Support::probe())
}

/// [`run`] with the sandbox layers `support` names: the kernel's, or fewer, as the tests run
/// a tool where a layer is missing.
pub(super) fn run_within(
    mut cmd: Command,
    limits: Limits,
    grants: &Grants,
    support: sandbox::Support,
) -> Result<Vec<u8>, RunError> {
    let policy = Policy {
        mode: limits.sandbox,
        read: grants.read.clone(),
        write: grants.write.clone(),
        proxy: grants.proxy.is_some(),
        max_memory: limits.max_memory,
    };
    let mut confined = sandbox::confine(&mut cmd, &policy, support).map_err(|e| RunError::Sandbox(e.to_string()))?;
    // The proxy lives as long as the run: dropped on return, its tunnels close.
    let _proxy = match &grants.proxy {
        Some(targets) => Some(start_proxy(&mut cmd, &mut confined, targets, limits.timeout)?),
        None => None,
    };
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let mut run = Running::new(&mut child, confined, limits)?;
    let outcome = run.watch();
    run.end();
    let status = outcome?;
    let (bytes, stderr) = (std::mem::take(&mut run.stdout), String::from_utf8_lossy(&run.stderr).into_owned());
    if !status.success() {
        let message = if stderr.trim().is_empty() { String::from_utf8_lossy(&bytes).into_owned() } else { stderr };
        return Err(RunError::Failed(status, message));
    }
    Ok(bytes)
}

/// Serves the remote-bases proxy on the pod's listening socket (or, with the sandbox off, on
/// gitward's loopback) and names it in `cmd`'s proxy variables.
fn start_proxy(
    cmd: &mut Command,
    confined: &mut Confined,
    targets: &BTreeMap<String, Origin>,
    timeout: Duration,
) -> Result<Proxy, RunError> {
    let listener = match confined.take_listener() {
        Some(listener) => listener,
        None => TcpListener::bind("127.0.0.1:0").map_err(RunError::Spawn)?,
    };
    let proxy = Proxy::start(listener, targets.clone(), Deadlines::of(timeout)).map_err(RunError::Spawn)?;
    for key in PROXY_VARIABLES {
        cmd.env(key, proxy.url());
    }
    Ok(proxy)
}

/// A started tool: its pipes (non-blocking), what was read, and what ends the run.
struct Running<'a> {
    child: &'a mut Child,
    out: Option<ChildStdout>,
    err: Option<ChildStderr>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    confined: Confined,
    limits: Limits,
    ended: bool,
}

impl<'a> Running<'a> {
    fn new(child: &'a mut Child, confined: Confined, limits: Limits) -> Result<Self, RunError> {
        let (out, err) = (child.stdout.take(), child.stderr.take());
        for fd in [out.as_ref().map(AsRawFd::as_raw_fd), err.as_ref().map(AsRawFd::as_raw_fd)].into_iter().flatten() {
            // SAFETY: fcntl on a pipe this process owns.
            unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
        }
        let (stdout, stderr) = (Vec::new(), Vec::new());
        Ok(Self { child, out, err, stdout, stderr, confined, limits, ended: false })
    }

    /// Reads the pipes until the tool exits and they close (or [`DRAIN`] after its exit), the
    /// deadline passes, or stdout passes its cap.
    fn watch(&mut self) -> Result<ExitStatus, RunError> {
        let deadline = Instant::now() + self.limits.timeout;
        let mut exited: Option<(ExitStatus, Instant)> = None;
        loop {
            self.read_pipes()?;
            if exited.is_none() {
                match self.child.try_wait() {
                    Ok(Some(status)) => {
                        self.end();
                        exited = Some((status, Instant::now() + DRAIN));
                    }
                    Ok(None) => {}
                    Err(e) => return Err(RunError::Spawn(e)),
                }
            }
            match exited {
                Some((status, _)) if self.out.is_none() && self.err.is_none() => return Ok(status),
                Some((status, drained)) if Instant::now() >= drained => return Ok(status),
                _ if Instant::now() >= deadline => return Err(RunError::Timeout),
                _ => std::thread::sleep(POLL),
            }
        }
    }

    /// Reads what the pipes hold now; closes each at its end.
    ///
    /// Errors: [`RunError::TooLarge`] once stdout passes the cap.
    fn read_pipes(&mut self) -> Result<(), RunError> {
        let max = usize::try_from(self.limits.max_output).unwrap_or(usize::MAX);
        if drain(&mut self.out, &mut self.stdout, max.saturating_add(1), true) && self.stdout.len() > max {
            return Err(RunError::TooLarge);
        }
        drain(&mut self.err, &mut self.stderr, MAX_STDERR, false);
        Ok(())
    }

    /// Ends the run: kills the tool's process group and the tool, then every process left in
    /// its namespaces, and reaps them. Later calls do nothing.
    fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        if let Ok(pgid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: the group the tool leads (`process_group(0)`); a group id stays in use,
            // and so is not reused, while a member lives.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.confined.end();
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

/// Reads `pipe` until it would block, keeping at most `keep` bytes in `into` (the rest is
/// read and dropped, so that the writer never blocks on a full pipe); closes the pipe at its
/// end. With `stop`, returns as soon as `into` is full. Returns whether it is.
fn drain<R: Read>(pipe: &mut Option<R>, into: &mut Vec<u8>, keep: usize, stop: bool) -> bool {
    let mut chunk = [0u8; 64 << 10];
    while let Some(reader) = pipe.as_mut() {
        match reader.read(&mut chunk) {
            Ok(0) => *pipe = None,
            Ok(n) => into.extend_from_slice(&chunk[..n.min(keep.saturating_sub(into.len()))]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(_) => *pipe = None,
        }
        if stop && into.len() >= keep {
            return true;
        }
    }
    into.len() >= keep
}

/// The binary for `tool`: `configured` if set, else the first `tool` on this process's `PATH`.
pub(super) fn locate(tool: &str, configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = configured {
        return path.is_file().then(|| path.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(tool)).find(|candidate| candidate.is_file())
}

/// A line Helm adds to a template error that gitward's users cannot act on: gitward runs
/// `helm template` itself, so there is no command line to add `--debug` to.
const HELM_DEBUG_HINT: &str = "Use --debug flag to render out invalid YAML";

/// The tool's message for an error: whitespace-trimmed, without Helm's [`HELM_DEBUG_HINT`]
/// line, at most 40 lines (the last ones, where Go tools put the cause) and 4000 characters.
pub(super) fn trim_message(message: &str) -> String {
    let lines: Vec<&str> = message.lines().filter(|l| l.trim() != HELM_DEBUG_HINT).collect();
    let joined = lines.join("\n");
    let lines: Vec<&str> = joined.trim().lines().collect();
    let tail = &lines[lines.len().saturating_sub(40)..];
    let text = tail.join("\n");
    match text.char_indices().nth(4000) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = command(Path::new("/bin/sh"), Path::new("/"), &[]);
        cmd.args(["-c", script]);
        cmd
    }

    const LIMITS: Limits =
        Limits { timeout: Duration::from_secs(30), max_output: 1 << 20, max_memory: 1 << 30, sandbox: SandboxMode::On };

    #[test]
    fn helms_debug_hint_is_left_out_of_a_message() {
        let helm = "Error: YAML parse error on c/templates/a.yaml: error converting YAML to JSON: yaml: line 2: \
                    did not find expected node content\n\nUse --debug flag to render out invalid YAML\n";
        assert_eq!(
            trim_message(helm),
            "Error: YAML parse error on c/templates/a.yaml: error converting YAML to JSON: yaml: line 2: did not \
             find expected node content"
        );
    }

    #[test]
    fn stdout_is_returned_and_the_environment_is_empty() {
        // CARGO and HOME are set for this test process; the tool inherits neither.
        assert!(std::env::var_os("CARGO").is_some());
        let out = run(sh("echo hello; printf '[%s|%s]' \"$HOME\" \"$CARGO\""), LIMITS, &Grants::default()).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "hello\n[|]");
    }

    #[test]
    fn a_failing_tool_reports_its_stderr() {
        match run(sh("echo oops >&2; exit 3"), LIMITS, &Grants::default()) {
            Err(RunError::Failed(status, message)) => {
                assert_eq!(status.code(), Some(3));
                assert_eq!(message.trim(), "oops");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn output_over_the_cap_kills_the_tool() {
        let limits = Limits { max_output: 1000, ..LIMITS };
        assert!(matches!(run(sh("yes"), limits, &Grants::default()), Err(RunError::TooLarge)));
    }

    #[test]
    fn a_tool_past_its_deadline_is_killed() {
        let limits = Limits { timeout: Duration::from_millis(200), ..LIMITS };
        assert!(matches!(run(sh("exec sleep 30"), limits, &Grants::default()), Err(RunError::Timeout)));
    }

    #[test]
    fn messages_keep_the_last_lines() {
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let trimmed = trim_message(&format!("  {long}  "));
        assert!(trimmed.starts_with("line 60\n") && trimmed.ends_with("line 99"), "{trimmed}");
    }
}
