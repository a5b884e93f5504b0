//! The ways out of the sandbox a render tool may try, as a table the tests run under each
//! sandbox setting ([`Setting`]): the layers the kernel has, the same without namespaces (as in
//! a Kubernetes Pod), and the sandbox off, where every attack must succeed so that a test of
//! the others can fail. Each attack is a `perl -e` script (perl-base is in every Debian
//! system; the script uses no module, only builtins and `syscall`) that prints `escaped` when
//! its call succeeded; the network attacks are also observed from outside, by a listener that
//! counts what reached it.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::time::Duration;

use super::Support;
use crate::config::SandboxMode;
use crate::render::process::{self, Grants, Limits, RunError};

/// One attempt to leave the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attack {
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
    /// Every attack.
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

    /// The perl script of the attack on `target`.
    fn script(self, target: &Target) -> String {
        let outside = target.outside.path().display();
        // A `struct sockaddr_in` for 127.0.0.1:port (the family in host order, the port not).
        let sockaddr = |port: u16| format!("pack('S n C4 x8', 2, {port}, 127, 0, 0, 1)");
        match self {
            Attack::ReadHost => format!("my $f; open($f, '<', '{outside}/secret') and print <$f>;"),
            Attack::WriteOutside => format!("my $f; open($f, '>', '{outside}/pwned') and print \"escaped\\n\";"),
            Attack::Tcp => format!(
                "my $s; socket($s, 2, 1, 0) and connect($s, {}) and print \"escaped\\n\";",
                sockaddr(target.tcp.local_addr().unwrap().port())
            ),
            Attack::Udp => format!(
                "my $s; socket($s, 2, 2, 0) and send($s, 'leak', 0, {}) and print \"escaped\\n\";",
                sockaddr(target.udp.local_addr().unwrap().port())
            ),
            Attack::Dns => format!(
                "my $q = pack('n6', 0x1234, 0x0100, 1, 0, 0, 0) . \"\\x04leak\\x07example\\x00\" . pack('n2', 1, 1); \
                 my $s; socket($s, 2, 2, 0) and send($s, $q, 0, {}) and print \"escaped\\n\";",
                sockaddr(target.dns.local_addr().unwrap().port())
            ),
            Attack::IoUring => format!(
                "my $p = \"\\0\" x 120; print \"escaped\\n\" if syscall({}, 8, $p) >= 0;",
                libc::SYS_io_uring_setup
            ),
            Attack::Unshare => {
                format!("print \"escaped\\n\" if syscall({}, {}) == 0;", libc::SYS_unshare, libc::CLONE_NEWUSER)
            }
            Attack::Ptrace => format!(
                "my $pid = fork(); if ($pid == 0) {{ sleep 5; exit 0 }} \
                 my $r = syscall({}, {}, $pid, 0, 0); kill 9, $pid; print \"escaped\\n\" if $r == 0;",
                libc::SYS_ptrace,
                libc::PTRACE_ATTACH
            ),
        }
    }
}

/// What the attacks aim at, watched from outside the sandbox: a directory with a secret file,
/// a TCP listener, a UDP socket and a "resolver" (another UDP socket), all on loopback.
struct Target {
    outside: tempfile::TempDir,
    tcp: TcpListener,
    udp: UdpSocket,
    dns: UdpSocket,
}

/// The bytes of [`Attack::ReadHost`]'s file.
const SECRET: &str = "host-secret-bytes";

impl Target {
    fn new() -> Self {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), SECRET).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dns = UdpSocket::bind("127.0.0.1:0").unwrap();
        for socket in [&udp, &dns] {
            socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        }
        Self { outside, tcp, udp, dns }
    }

    /// Whether `attack` got out: its script said so in `output`, or its effect is seen here.
    fn escaped(&self, attack: Attack, output: &str) -> bool {
        let received = |socket: &UdpSocket| {
            let mut buf = [0u8; 512];
            match socket.recv(&mut buf) {
                Ok(n) => Some(buf[..n].to_vec()),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
                Err(e) => panic!("{attack:?}: the observer's socket: {e}"),
            }
        };
        let seen = match attack {
            Attack::ReadHost => output.contains(SECRET),
            Attack::WriteOutside => self.outside.path().join("pwned").exists(),
            // The script has exited: a connection it made is queued on the listener by now.
            Attack::Tcp => self.tcp.accept().is_ok(),
            Attack::Udp => received(&self.udp).is_some_and(|b| b == b"leak"),
            Attack::Dns => received(&self.dns).is_some_and(|b| b.windows(13).any(|w| w == b"\x04leak\x07example")),
            Attack::IoUring | Attack::Unshare | Attack::Ptrace => false,
        };
        seen || output.contains("escaped")
    }
}

/// A sandbox setting the attacks run under.
#[derive(Debug, Clone, Copy)]
pub(super) struct Setting {
    /// `[render] sandbox`.
    pub mode: SandboxMode,
    /// The layers a run uses ([`super::confine`]).
    pub support: Support,
}

impl Setting {
    /// The sandbox on, with every layer this kernel has.
    pub fn kernel() -> Self {
        Self { mode: SandboxMode::On, support: Support::probe() }
    }

    /// The sandbox on, with no user, network or PID namespaces: Landlock and seccomp alone,
    /// as in a pod under the `RuntimeDefault` seccomp profile.
    pub fn without_namespaces() -> Self {
        Self { mode: SandboxMode::On, support: Support { namespaces: false, ..Support::probe() } }
    }

    /// `[render] sandbox = "off"`.
    pub fn off() -> Self {
        Self { mode: SandboxMode::Off, support: Support::probe() }
    }
}

/// Runs `attack` as a tool under `setting`, in a scratch tree of its own; whether it got out.
/// Panics when the run itself fails (the sandbox refused it, perl is missing).
pub(super) fn attempt(attack: Attack, setting: Setting) -> bool {
    let target = Target::new();
    let scratch = tempfile::tempdir().unwrap();
    for sub in ["home", "tmp"] {
        std::fs::create_dir(scratch.path().join(sub)).unwrap();
    }
    let perl = Path::new("/usr/bin/perl");
    let grants = Grants::scratch(scratch.path(), perl);
    let mut cmd = process::command(perl, scratch.path(), &[]);
    cmd.args(["-e", &attack.script(&target)]);
    let limits =
        Limits { timeout: Duration::from_secs(30), max_output: 1 << 20, max_memory: 1 << 30, sandbox: setting.mode };
    let output = match process::run_within(cmd, limits, &grants, setting.support) {
        Ok(output) => String::from_utf8_lossy(&output).into_owned(),
        Err(RunError::Failed(_, message)) => panic!("{attack:?} under {setting:?}: perl failed: {message}"),
        Err(e) => panic!("{attack:?} under {setting:?}: {e:?}"),
    };
    target.escaped(attack, &output)
}

/// The attacks that got out under `setting`.
pub(super) fn escapes(setting: Setting) -> Vec<Attack> {
    Attack::ALL.into_iter().filter(|&attack| attempt(attack, setting)).collect()
}
