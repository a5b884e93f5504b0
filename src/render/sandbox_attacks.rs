//! The ways out of the sandbox a render tool may try ([`Attack`], and the observer [`Target`],
//! both of `gitward sandbox-check`), as a table the tests run under each sandbox setting
//! ([`Setting`]): the layers the kernel has, the same without namespaces (as in a Kubernetes
//! Pod), and the sandbox off, where every attack must succeed so that a test of the others can
//! fail. Each attack is a `perl -e` script (perl-base is in every Debian system; the script uses
//! no module, only builtins and `syscall`) that prints `escaped` when its call succeeded; the
//! network attacks are also observed from outside, by a listener that counts what reached it.

use std::path::Path;
use std::time::Duration;

use super::Support;
use crate::config::SandboxMode;
use crate::render::process::{self, Grants, Limits, RunError};
pub(super) use crate::render::sandbox_check::Attack;
use crate::render::sandbox_check::Target;

/// The perl script of `attack` on what `target` aims it at ([`Target::aim`]).
fn script(attack: Attack, target: &Target) -> String {
    let aim = target.aim(attack);
    // A `struct sockaddr_in` for 127.0.0.1:port (the family in host order, the port not).
    let sockaddr = format!("pack('S n C4 x8', 2, {aim}, 127, 0, 0, 1)");
    match attack {
        Attack::ReadHost => format!("my $f; open($f, '<', '{aim}') and print <$f>;"),
        Attack::WriteOutside => format!("my $f; open($f, '>', '{aim}') and print \"escaped\\n\";"),
        Attack::Tcp => format!("my $s; socket($s, 2, 1, 0) and connect($s, {sockaddr}) and print \"escaped\\n\";"),
        Attack::Udp => {
            format!("my $s; socket($s, 2, 2, 0) and send($s, 'leak', 0, {sockaddr}) and print \"escaped\\n\";")
        }
        Attack::Dns => format!(
            "my $q = pack('n6', 0x1234, 0x0100, 1, 0, 0, 0) . \"\\x04leak\\x07example\\x00\" . pack('n2', 1, 1); \
             my $s; socket($s, 2, 2, 0) and send($s, $q, 0, {sockaddr}) and print \"escaped\\n\";"
        ),
        Attack::IoUring => {
            format!("my $p = \"\\0\" x 120; print \"escaped\\n\" if syscall({}, 8, $p) >= 0;", libc::SYS_io_uring_setup)
        }
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
    let target = Target::new().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    for sub in ["home", "tmp"] {
        std::fs::create_dir(scratch.path().join(sub)).unwrap();
    }
    let perl = Path::new("/usr/bin/perl");
    let grants = Grants::scratch(scratch.path(), perl);
    let mut cmd = process::command(perl, scratch.path(), &[]);
    cmd.args(["-e", &script(attack, &target)]);
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
