//! `gitward sandbox-check`: the ways out of the render sandbox a tool may try, each made by a
//! gitward child started exactly as a render tool is ([`process::run`]: the layers
//! [`Support::probe`](super::sandbox::Support::probe) finds, a scratch tree of its own, read and
//! execute of the binary), and watched from outside: a file beside the tree, a TCP listener, a
//! UDP socket and a "resolver" on loopback. Run where gitward runs (`kubectl exec` into its Pod,
//! or a host), it shows which of them the sandbox stops there; with the sandbox off, that each
//! of them works, so a "stopped" is the sandbox's doing. The lib tests make the same attacks
//! with perl scripts (`sandbox_attacks.rs`).

use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::process::{self, Grants, Limits, RunError};
use crate::config::SandboxMode;

/// One attempt to leave the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attack {
    /// Read a file outside the granted paths.
    ReadHost,
    /// Write a file outside `home/` and `tmp/`.
    WriteOutside,
    /// Connect over TCP to a port on the host's loopback.
    Tcp,
    /// Send a UDP datagram to a port on the host's loopback.
    Udp,
    /// Send a DNS query (a leak by name resolution) to a resolver on the host's loopback.
    Dns,
    /// `io_uring_setup`: a ring whose operations pass by the system-call filter.
    IoUring,
    /// `unshare(CLONE_NEWUSER)`: a user namespace of its own, with every capability in it.
    Unshare,
    /// `ptrace(PTRACE_ATTACH)` of another process.
    Ptrace,
}

impl Attack {
    /// Every attack, in the order they are made and printed.
    pub const ALL: [Attack; 8] = [
        Attack::ReadHost,
        Attack::WriteOutside,
        Attack::Tcp,
        Attack::Udp,
        Attack::Dns,
        Attack::IoUring,
        Attack::Unshare,
        Attack::Ptrace,
    ];

    /// The attack's name on the command line and in the output: `read-host`, `io-uring`, ….
    pub fn name(self) -> &'static str {
        match self {
            Attack::ReadHost => "read-host",
            Attack::WriteOutside => "write-outside",
            Attack::Tcp => "tcp",
            Attack::Udp => "udp",
            Attack::Dns => "dns",
            Attack::IoUring => "io-uring",
            Attack::Unshare => "unshare",
            Attack::Ptrace => "ptrace",
        }
    }

    /// The attack named `name` ([`Attack::name`]), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// Why the check could not tell whether an attack got out.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The observer (a temporary directory, a loopback socket) could not be made.
    #[error("sandbox check: the observer of {attack}: {source}")]
    Observer {
        /// [`Attack::name`].
        attack: &'static str,
        /// What failed.
        source: std::io::Error,
    },
    /// The child did not run to its end: it could not start, the sandbox refused it, or it
    /// failed or timed out.
    #[error("sandbox check: {attack}: the probe did not run: {message}")]
    Run {
        /// [`Attack::name`].
        attack: &'static str,
        /// The run's error.
        message: String,
    },
}

/// What the attacks aim at, watched from outside the sandbox: a directory with a secret file,
/// a TCP listener, a UDP socket and a "resolver" (another UDP socket), all on loopback.
pub(super) struct Target {
    outside: tempfile::TempDir,
    tcp: TcpListener,
    udp: UdpSocket,
    dns: UdpSocket,
}

/// The bytes of [`Attack::ReadHost`]'s file.
const SECRET: &str = "host-secret-bytes";

impl Target {
    /// Makes the directory and binds the sockets.
    pub(super) fn new() -> std::io::Result<Self> {
        let outside = tempfile::tempdir()?;
        std::fs::write(outside.path().join("secret"), SECRET)?;
        let tcp = TcpListener::bind("127.0.0.1:0")?;
        tcp.set_nonblocking(true)?;
        let (udp, dns) = (UdpSocket::bind("127.0.0.1:0")?, UdpSocket::bind("127.0.0.1:0")?);
        for socket in [&udp, &dns] {
            socket.set_read_timeout(Some(Duration::from_millis(200)))?;
        }
        Ok(Self { outside, tcp, udp, dns })
    }

    /// What `attack` aims at: the path of the file to read or write, or the loopback port.
    pub(super) fn aim(&self, attack: Attack) -> String {
        let port = |addr: std::io::Result<std::net::SocketAddr>| addr.map(|a| a.port()).unwrap_or(0).to_string();
        match attack {
            Attack::ReadHost => self.outside.path().join("secret").display().to_string(),
            Attack::WriteOutside => self.outside.path().join("pwned").display().to_string(),
            Attack::Tcp => port(self.tcp.local_addr()),
            Attack::Udp => port(self.udp.local_addr()),
            Attack::Dns => port(self.dns.local_addr()),
            Attack::IoUring | Attack::Unshare | Attack::Ptrace => "-".into(),
        }
    }

    /// Whether `attack` got out: the child said so (`escaped`) in `output`, or its effect is
    /// seen here.
    pub(super) fn escaped(&self, attack: Attack, output: &str) -> bool {
        // Nothing within the read timeout: nothing was sent.
        let received = |socket: &UdpSocket| {
            let mut buf = [0u8; 512];
            socket.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
        };
        let seen = match attack {
            Attack::ReadHost => output.contains(SECRET),
            Attack::WriteOutside => self.outside.path().join("pwned").exists(),
            // The child has exited: a connection it made is queued on the listener by now.
            Attack::Tcp => self.tcp.accept().is_ok(),
            Attack::Udp => received(&self.udp).is_some_and(|b| b == b"leak"),
            Attack::Dns => received(&self.dns).is_some_and(|b| b.windows(13).any(|w| w == DNS_NAME)),
            Attack::IoUring | Attack::Unshare | Attack::Ptrace => false,
        };
        seen || output.contains("escaped")
    }
}

/// The name [`Attack::Dns`] asks for, as it is on the wire: `leak.example`.
const DNS_NAME: &[u8] = b"\x04leak\x07example";

/// Makes every attack as a child `program` (this gitward: its `sandbox-probe` command) under
/// `[render] sandbox = mode` with the layers this kernel has; whether each got out, in
/// [`Attack::ALL`]'s order.
///
/// Errors: [`Error`] when an attack's observer cannot be made or its child does not run.
pub fn check(program: &Path, mode: SandboxMode) -> Result<Vec<(Attack, bool)>, Error> {
    Attack::ALL.into_iter().map(|attack| Ok((attack, attempt(program, attack, mode)?))).collect()
}

/// `gitward sandbox-check [--off]`: prints `sandbox: ` and the layers in effect
/// ([`super::sandbox::state`]), then `<attack>: stopped` or `<attack>: escaped` for each attack
/// [`check`] makes with `program`; returns whether one escaped.
///
/// Errors: as [`check`].
pub fn command(program: &Path, mode: SandboxMode) -> Result<bool, Error> {
    println!("sandbox: {}", super::sandbox::state(mode));
    let outcomes = check(program, mode)?;
    for (attack, escaped) in &outcomes {
        println!("{}: {}", attack.name(), if *escaped { "escaped" } else { "stopped" });
    }
    Ok(outcomes.iter().any(|(_, escaped)| *escaped))
}

/// Runs `program sandbox-probe ATTACK AIM` as a tool in a scratch tree of its own.
fn attempt(program: &Path, attack: Attack, mode: SandboxMode) -> Result<bool, Error> {
    let observer = |source| Error::Observer { attack: attack.name(), source };
    let target = Target::new().map_err(observer)?;
    let scratch = tempfile::tempdir().map_err(observer)?;
    for sub in ["home", "tmp"] {
        std::fs::create_dir(scratch.path().join(sub)).map_err(observer)?;
    }
    let program: PathBuf = program.canonicalize().map_err(observer)?;
    let grants = Grants::scratch(scratch.path(), &program);
    let mut cmd = process::command(&program, scratch.path(), &[]);
    cmd.args(["sandbox-probe", attack.name(), &target.aim(attack)]);
    let limits = Limits { timeout: Duration::from_secs(30), max_output: 1 << 20, max_memory: 1 << 30, sandbox: mode };
    let output = process::run(cmd, limits, &grants).map_err(|e| Error::Run {
        attack: attack.name(),
        message: match e {
            RunError::Failed(status, message) => format!("{status}: {message}"),
            other => format!("{other:?}"),
        },
    })?;
    Ok(target.escaped(attack, &String::from_utf8_lossy(&output)))
}

/// The child's side of [`check`]: makes `attack`'s call on `aim` ([`Target::aim`]) and returns
/// what it printed for the observer: `escaped` (and for [`Attack::ReadHost`] the bytes read)
/// when the call succeeded, else the error.
pub fn probe(attack: Attack, aim: &str) -> String {
    let port = aim.parse::<u16>().unwrap_or(0);
    let udp = |payload: &[u8]| UdpSocket::bind("127.0.0.1:0").and_then(|s| s.send_to(payload, ("127.0.0.1", port)));
    let result = match attack {
        Attack::ReadHost => std::fs::read_to_string(aim).map(|text| format!("escaped: {text}")),
        Attack::WriteOutside => std::fs::File::create(aim).map(|_| "escaped".into()),
        Attack::Tcp => TcpStream::connect(("127.0.0.1", port)).map(|_| "escaped".into()),
        Attack::Udp => udp(b"leak").map(|_| "escaped".into()),
        Attack::Dns => {
            let mut query = vec![0x12, 0x34, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0];
            query.extend_from_slice(DNS_NAME);
            query.extend_from_slice(&[0, 0, 1, 0, 1]);
            udp(&query).map(|_| "escaped".into())
        }
        Attack::IoUring => {
            let mut params = [0u8; 120];
            // SAFETY: io_uring_setup writes at most sizeof(struct io_uring_params) (120) bytes.
            let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 8u32, params.as_mut_ptr()) };
            syscall_result(fd)
        }
        Attack::Unshare => unshare_in_a_child(),
        Attack::Ptrace => ptrace_a_child(),
    };
    result.unwrap_or_else(|e| format!("stopped: {e}"))
}

/// `escaped` for a system call's non-negative return, else its errno.
fn syscall_result(ret: libc::c_long) -> std::io::Result<String> {
    if ret >= 0 { Ok("escaped".into()) } else { Err(std::io::Error::last_os_error()) }
}

/// `unshare(CLONE_NEWUSER)` in a forked child: gitward has threads (jemalloc's background
/// thread), and the call fails with `EINVAL` in a process that has more than one.
fn unshare_in_a_child() -> std::io::Result<String> {
    // SAFETY: the child makes one system call and exits, both async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe { libc::_exit(if libc::unshare(libc::CLONE_NEWUSER) == 0 { 0 } else { *libc::__errno_location() }) }
    }
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut status = 0;
    // SAFETY: reaps the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WEXITSTATUS(status) {
        0 => Ok("escaped".into()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// Forks a child that sleeps, attaches to it with `ptrace(PTRACE_ATTACH)` (allowed for a
/// descendant under Yama's default scope), then kills it.
fn ptrace_a_child() -> std::io::Result<String> {
    // SAFETY: the child only sleeps and exits, both async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::sleep(5);
            libc::_exit(0)
        }
    }
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: system calls on integers and null pointers.
    let attached = unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0usize, 0usize) };
    let result = syscall_result(attached);
    // SAFETY: as above; the child is ours to kill and reap.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    result
}
