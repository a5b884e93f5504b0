//! Running one render tool as a child process: an empty environment but for what is passed,
//! stdin closed, stdout collected up to a cap, stderr kept for the error message, a deadline
//! after which the tool is killed, and the OS sandbox of [`super::sandbox`] around it (the
//! [`Grants`] a run names). Blocking: callers run in `spawn_blocking`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::sandbox::{self, Policy};
use crate::config::SandboxMode;

/// The most bytes of a tool's stderr kept for its error message.
const MAX_STDERR: usize = 64 << 10;

/// How long to wait between checks of a running tool.
const POLL: Duration = Duration::from_millis(10);

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
    /// Network and a readable filesystem (kustomize with `allow_remote_bases`).
    pub network: bool,
    /// With `network`: the remote-bases proxy's port, the only one TCP may reach.
    pub proxy_port: Option<u16>,
}

impl Grants {
    /// A run of `tool` in scratch directory `root`: read `root` and the binary, write
    /// `root/home` and `root/tmp`.
    pub fn scratch(root: &Path, tool: &Path) -> Self {
        Self {
            read: vec![root.to_owned(), tool.to_owned()],
            write: vec![root.join("home"), root.join("tmp")],
            network: false,
            proxy_port: None,
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

/// Runs `cmd` to completion within `limits`, confined to `grants`; returns its stdout.
pub(super) fn run(mut cmd: Command, limits: Limits, grants: &Grants) -> Result<Vec<u8>, RunError> {
    let policy = Policy {
        mode: limits.sandbox,
        read: grants.read.clone(),
        write: grants.write.clone(),
        network: grants.network,
        proxy_port: grants.proxy_port,
        max_memory: limits.max_memory,
    };
    sandbox::confine(&mut cmd, &policy).map_err(|e| RunError::Sandbox(e.to_string()))?;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let (overflow_tx, overflow) = mpsc::channel();
    let max = limits.max_output;
    let out = std::thread::spawn(move || read_capped(stdout, max, overflow_tx));
    let err = std::thread::spawn(move || read_stderr(stderr));
    let deadline = Instant::now() + limits.timeout;
    let outcome = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(RunError::Spawn(e)),
        }
        if overflow.try_recv().is_ok() {
            break Err(RunError::TooLarge);
        }
        if Instant::now() >= deadline {
            break Err(RunError::Timeout);
        }
        std::thread::sleep(POLL);
    };
    if outcome.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (bytes, overflowed) = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let status = outcome?;
    if overflowed {
        return Err(RunError::TooLarge);
    }
    if !status.success() {
        let message = if stderr.trim().is_empty() { String::from_utf8_lossy(&bytes).into_owned() } else { stderr };
        return Err(RunError::Failed(status, message));
    }
    Ok(bytes)
}

/// Reads `from` until EOF or until more than `max` bytes came; then tells `overflow` and stops
/// reading (the tool gets EPIPE). Returns what was read and whether the cap was passed.
fn read_capped(mut from: impl Read, max: u64, overflow: mpsc::Sender<()>) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut chunk) {
            Ok(0) | Err(_) => return (buf, false),
            Ok(n) => {
                if (buf.len() + n) as u64 > max {
                    let _ = overflow.send(());
                    return (Vec::new(), true);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Reads all of stderr, keeping the first [`MAX_STDERR`] bytes.
fn read_stderr(mut from: impl Read) -> String {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n) = from.read(&mut chunk) {
        if n == 0 {
            break;
        }
        let room = MAX_STDERR.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
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
