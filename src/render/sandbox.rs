//! The OS sandbox every render tool (helm, kustomize, sops) runs in: what a repository's bytes
//! can make a tool do is bounded by the kernel, not by the scans before the run.
//!
//! Applied in the child between `fork` and `exec` (`CommandExt::pre_exec`), with only
//! async-signal-safe system calls there: the Landlock ruleset is built, its paths opened, its
//! file descriptor and the namespaces ([`super::pod`]) created in the parent before the fork;
//! the child makes the calls below and nothing else (no allocation, no lock).
//!
//! In the child, in this order:
//!
//! 1. every inherited file descriptor above stderr is marked close-on-exec (`close_range(3, ~0,
//!    CLOSE_RANGE_CLOEXEC)`, Linux 5.11): a tool sees stdin (`/dev/null`), its stdout and stderr
//!    pipes, nothing else — not the mirror, not an API server connection.
//! 2. With unprivileged user namespaces allowed (`unshare -rnp` works; not in most container
//!    runtimes' default seccomp profile): `setns` into the run's own user, network and PID
//!    namespaces ([`super::pod`]), made with the caller's uid and gid mapped to themselves
//!    (`user_namespaces(7)`), then a fork into the PID namespace: the tool is that child, and
//!    the process gitward started only relays its exit code. The network namespace has only a loopback interface, down: no DNS,
//!    no UDP, no TCP, not even to gitward's own loopback ports — or, for a unit with
//!    `allow_remote_bases`, up with one listening socket, the remote-bases proxy
//!    ([`super::proxy`]). Every process the tool starts is born in the PID namespace and killed
//!    when the run ends, however it ends.
//! 3. `PR_SET_PDEATHSIG`: the tool is killed if gitward dies; and the tool's nice value is
//!    raised by [`RENDER_NICENESS`] (`setpriority(2)`, at most 19; raising it needs no
//!    privilege): a template that loops until its timeout takes the CPU from gitward's own
//!    syncs and pushes only where the CPU is otherwise idle.
//! 4. `RLIMIT_DATA` of `[render] max_memory` (default 1 GiB). Not `RLIMIT_AS`: the Go runtime
//!    reserves address space it never touches (its heap arena index, goroutine stacks), and
//!    counting reservations measures the runtime, not the render: under an `RLIMIT_AS` of
//!    256 MiB the pinned kustomize does not start (`failed to reserve page summary memory`),
//!    though `kustomize version` touches about 12 MiB. `RLIMIT_DATA` counts private writable
//!    memory, which is what a runaway template grows (Linux 4.7 counts anonymous `mmap` in it;
//!    the Go heap is such memory). No cgroup is used: gitward does not assume a delegated one.
//! 5. `PR_SET_NO_NEW_PRIVS` and `landlock_restrict_self` (Landlock, `landlock(7)`):
//!    - files: read and execute beneath the scratch directory, the tool binary and the system
//!      directories a dynamically linked tool needs (`/usr`, `/lib`, `/lib64`, `/bin`,
//!      `/etc/ld.so.cache`; the pinned helm, kustomize and sops are static Go binaries and read
//!      none of them), `/dev/null`, and files the caller names (sops's age key); write beneath
//!      the scratch directory's `home/` and `tmp/` only (and `/dev/null`). A unit with
//!      `allow_remote_bases` also reads the TLS trust store git needs ([`REMOTE_READ`]) and
//!      nothing more. Every other path — `/etc/hostname`, the ServiceAccount token, the state
//!      directory, another unit's scratch tree — is `EACCES`. Linux 5.13 (ABI 1); renames
//!      across directories (ABI 2, 5.19), truncation (ABI 3, 6.2) and device ioctls (ABI 5,
//!      6.10) are handled when the kernel knows them.
//!    - network (ABI 4, Linux 6.7): no TCP `connect` and no TCP `bind`, to any address, but
//!      the remote-bases proxy's port for a unit with `allow_remote_bases`. This holds where no
//!      user namespace can be made (a pod); UDP is not covered by it, the seccomp filter
//!      closes it (step 6).
//!    - scopes (ABI 6, Linux 6.12): no connection to an abstract UNIX socket and no signal to a
//!      process outside the sandbox.
//! 6. the seccomp filter ([`super::seccomp`]), last: no socket but `AF_UNIX` (TCP and UDP to
//!    the proxy alone for a unit with `allow_remote_bases`, which has its network namespace),
//!    no `io_uring`, `ptrace`, `bpf`, keyring, namespace, mount or module calls; each fails
//!    with `EPERM`. It holds where no user namespace can be made (a pod under the
//!    `RuntimeDefault` seccomp profile) and on a Landlock without network rules.
//!
//! Not blocked: connecting to a UNIX socket by path in a readable directory (Landlock does not
//! mediate it before ABI 8; no such directory is granted but the scratch tree); where there is
//! no user namespace, a process the tool detaches from its process group (`setsid`), which may
//! outlive the run. A unit with `allow_remote_bases` is refused there
//! ([`Refusal::Unsupported`]): it runs with its namespaces or not at all.
//!
//! What is enforced is known at start ([`Support::probe`], which makes a pod and enters it as a
//! tool does, and installs the filter in a child): the daemon logs it once, `/readyz` and
//! `gitward status` show it ([`state`]), `gitward_sandbox_layer` counts it ([`layers`]). A
//! kernel without Landlock or without the seccomp filter refuses every unit that runs a tool
//! ([`Support::usable`]) unless `[render] sandbox = "off"`: no tool runs with fewer layers
//! than the sandbox has.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

use super::pod::{Entry, Pod, check};
use super::seccomp::{self, Filter, Network};
use crate::config::SandboxMode;

/// What this kernel lets gitward enforce on a render tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version (`landlock_create_ruleset(NULL, 0, VERSION)`): 0 without
    /// Landlock (a kernel before 5.13, or `landlock` missing from `lsm=`), 1 (5.13) … 7 (6.15).
    pub landlock_abi: u32,
    /// Whether a run can have its own user, network and PID namespaces: a pod made and
    /// entered as a tool enters it ([`super::pod`]), the id maps and the loopback listener
    /// included.
    pub namespaces: bool,
    /// Whether the seccomp filter ([`super::seccomp`]) is installed and enforced: a forked
    /// child installs it and finds a TCP socket refused. False on an architecture
    /// `seccompiler` has no filter for, or a kernel without `SECCOMP_FILTER`.
    pub seccomp: bool,
}

impl Support {
    /// Probes the running kernel once per process (later calls return the first answer): the
    /// Landlock ABI by its version call, the namespaces by making a pod with a proxy listener
    /// and a forked child that joins it as a tool does, the seccomp filter by a forked child
    /// that installs it ([`seccomp::works`]).
    pub fn probe() -> Self {
        static PROBED: OnceLock<Support> = OnceLock::new();
        *PROBED.get_or_init(|| {
            let namespaces = Pod::create(true).is_ok_and(|mut pod| pod.take_listener().is_some() && pod.try_entry());
            Self { landlock_abi: landlock_abi(), namespaces, seccomp: seccomp::works() }
        })
    }

    /// Whether tools may run confined: Landlock on files and the seccomp filter on sockets and
    /// the calls that leave a sandbox. The namespaces are not required (a pod has none); a unit
    /// with `allow_remote_bases` needs them ([`confine`]).
    pub fn usable(&self) -> bool {
        self.landlock_abi >= 1 && self.seccomp
    }

    /// What is missing for [`Support::usable`], as a sentence; `None` when nothing is.
    pub fn missing(&self) -> Option<String> {
        if self.landlock_abi == 0 {
            Some("this kernel has no Landlock (Linux 5.13 or newer with `landlock` in the lsm= boot list)".into())
        } else if !self.seccomp {
            Some(format!(
                "gitward cannot install its seccomp filter here (a kernel without SECCOMP_FILTER, or the \
                 architecture {}, which has no filter)",
                std::env::consts::ARCH
            ))
        } else {
            None
        }
    }
}

/// The sandbox's layers and whether each holds for a tool run under `mode`, in the order
/// [`state`] names them: `landlock`, `seccomp`, `namespaces` (the user, network and PID
/// namespaces together). All false when the sandbox is off or cannot be used, since no tool
/// then runs under any of them.
pub fn layers(mode: SandboxMode) -> [(&'static str, bool); 3] {
    let support = Support::probe();
    let on = mode == SandboxMode::On && support.usable();
    [("landlock", on), ("seccomp", on), ("namespaces", on && support.namespaces)]
}

/// The sandbox as the daemon and `gitward status` report it: the mode configured and what the
/// kernel enforces, each layer named only where it holds: `landlock ABI 7, seccomp, user,
/// network and PID namespaces` or `landlock ABI 5, seccomp, no namespaces: …` or
/// `off ([render] sandbox = "off")`.
pub fn state(mode: SandboxMode) -> String {
    let support = Support::probe();
    match mode {
        SandboxMode::Off => "off ([render] sandbox = \"off\")".into(),
        SandboxMode::On if !support.usable() => {
            format!("unavailable: {}", support.missing().unwrap_or_default())
        }
        SandboxMode::On => {
            let abi = support.landlock_abi;
            match support.namespaces {
                true => format!("landlock ABI {abi}, seccomp, user, network and PID namespaces"),
                false => format!(
                    "landlock ABI {abi}, seccomp, no namespaces: network closed by seccomp, a detached process may \
                     outlive its render, units with allow_remote_bases refused"
                ),
            }
        }
    }
}

/// Logs, once per process, the warning that `[render] sandbox = "off"` runs tools unconfined;
/// called at the daemon's start and before the first tool of a one-shot command runs.
pub fn warn_if_off(mode: SandboxMode) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if mode == SandboxMode::Off {
        WARNED.call_once(|| {
            tracing::warn!("render sandbox off: [render] sandbox = \"off\", render tools run unconfined");
        });
    }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the ABI, or 0.
fn landlock_abi() -> u32 {
    // SAFETY: the version query reads no memory (NULL attributes, size 0).
    let v = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    u32::try_from(v).unwrap_or(0)
}

/// What one tool run may touch.
#[derive(Debug, Clone)]
pub(super) struct Policy {
    /// `[render] sandbox`: `Off` runs the tool with only the empty environment, closed
    /// descriptors, its own process group and the memory cap.
    pub mode: SandboxMode,
    /// Read and execute beneath these (directories or files): the scratch directory, the tool
    /// binary, files such as an age key.
    pub read: Vec<PathBuf>,
    /// Read and write beneath these: the tool's `HOME` and `TMPDIR`.
    pub write: Vec<PathBuf>,
    /// Whether the tool reaches the remote-bases proxy (kustomize with `allow_remote_bases`):
    /// a listening socket in its network namespace, TCP to that port, and [`REMOTE_READ`].
    pub proxy: bool,
    /// `RLIMIT_DATA` in bytes (`[render] max_memory`).
    pub max_memory: u64,
}

/// System paths granted read and execute to every tool, for dynamically linked tools (a
/// wrapper script, a distribution's kustomize): the loader, libraries and `/bin/sh`.
const SYSTEM_READ: [&str; 5] = ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache"];

/// What the `git` a remote-bases kustomize runs reads besides [`SYSTEM_READ`]: the TLS trust
/// store (Debian's `/etc/ssl`, its `/etc/ca-certificates`, Red Hat's `/etc/pki`) and
/// `/dev/urandom`. Name resolution happens in the proxy; git's system config is not read
/// (`GIT_CONFIG_NOSYSTEM`).
pub(super) const REMOTE_READ: [&str; 4] = ["/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/dev/urandom"];

/// Why a tool cannot be confined as asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    /// The kernel lacks what [`Support::usable`] needs, or what a remote-bases run needs (its
    /// namespaces), and `[render] sandbox` is not `"off"`.
    #[error("{0}; set [render] sandbox = \"off\" to run render tools unconfined")]
    Unsupported(String),
    /// Building the Landlock ruleset or the namespaces failed (a path that cannot be opened, a
    /// kernel error).
    #[error("cannot build the sandbox: {0}")]
    Ruleset(String),
}

/// A prepared confinement: the run's namespaces (while it lives, every process of the run can
/// be found and killed) and the proxy's listening socket inside them.
pub(super) struct Confined {
    /// The run's namespaces; dropped to kill every process left in them.
    pod: Option<Pod>,
}

impl Confined {
    /// The remote-bases proxy's listening socket in the tool's network namespace, once; `None`
    /// without a pod (the sandbox off).
    pub fn take_listener(&mut self) -> Option<TcpListener> {
        self.pod.as_mut().and_then(Pod::take_listener)
    }

    /// Kills every process still in the run's namespaces and reaps them; later calls do
    /// nothing.
    pub fn end(&mut self) {
        self.pod = None;
    }
}

/// Makes `cmd` run confined by `policy` with the layers `support` names (the kernel's,
/// [`Support::probe`], but for tests that take one away); the rules, filter and namespaces are
/// prepared now and applied in the child (see the module docs). With `policy.proxy`, the pod's
/// listening socket is taken with [`Confined::take_listener`] and served by the caller.
///
/// Errors: [`Refusal::Unsupported`] when the sandbox is on and `support` lacks a layer (for a
/// remote-bases run: the namespaces); [`Refusal::Ruleset`] when the ruleset, the filter or the
/// namespaces cannot be made.
pub(super) fn confine(cmd: &mut Command, policy: &Policy, support: Support) -> Result<Confined, Refusal> {
    let on = policy.mode == SandboxMode::On;
    if on && let Some(missing) = support.missing() {
        return Err(Refusal::Unsupported(missing));
    }
    if on && policy.proxy && !support.namespaces {
        return Err(Refusal::Unsupported(
            "a unit with allow_remote_bases needs its own user, network and PID namespaces, which this host does \
             not allow (unprivileged user namespaces)"
                .into(),
        ));
    }
    let pod = match on && support.namespaces {
        true => Some(Pod::create(policy.proxy).map_err(|e| Refusal::Ruleset(format!("namespaces: {e}")))?),
        false => None,
    };
    let port = pod.as_ref().and_then(Pod::listener_port);
    let ruleset = if on { Some(ruleset(policy, support.landlock_abi, port)?) } else { None };
    // Internet sockets only where they reach nothing but the proxy: inside the pod.
    let network = if port.is_some() { Network::Proxy } else { Network::Unix };
    let filter = match on {
        true => Some(Filter::new(network).map_err(|e| Refusal::Ruleset(e.to_string()))?),
        false => None,
    };
    let layers = Layers { ruleset, filter, entry: pod.as_ref().map(Pod::entry) };
    confine_with(cmd, policy.max_memory, layers)?;
    Ok(Confined { pod })
}

/// What the child applies, prepared before the fork; `None` for a layer not used.
struct Layers {
    /// The Landlock ruleset's descriptor.
    ruleset: Option<OwnedFd>,
    /// The compiled seccomp filter.
    filter: Option<Filter>,
    /// The pod to join.
    entry: Option<Entry>,
}

/// How much a render tool's nice value is raised above gitward's (`setpriority(2)`; capped at
/// 19, the lowest priority): under CPU contention the scheduler gives a nice-10 process about a
/// tenth of the CPU time of a nice-0 one (CFS weights 110 and 1024, `sched(7)`).
pub const RENDER_NICENESS: i32 = 10;

/// Installs the child's steps (module docs) on `cmd`.
fn confine_with(cmd: &mut Command, max_memory: u64, layers: Layers) -> Result<(), Refusal> {
    let Layers { ruleset, filter, entry } = layers;
    // Never above the hard limit this process has: raising it would fail without privilege.
    let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills a valid struct.
    check(unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut current) }).map_err(|e| Refusal::Ruleset(e.to_string()))?;
    let max_memory = max_memory.min(current.rlim_max);
    let child = move || -> std::io::Result<()> {
        close_inherited()?;
        if let Some(entry) = entry {
            entry.enter()?;
        }
        // SAFETY: prctl and setrlimit with a valid struct; async-signal-safe.
        check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) })?;
        // SAFETY: getpriority and setpriority of this process; async-signal-safe system calls.
        // getpriority's -1 may be a nice value, not an error: either way the raise is relative.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        // SAFETY: as above.
        check(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, (nice + RENDER_NICENESS).min(19)) })?;
        let limit = libc::rlimit { rlim_cur: max_memory, rlim_max: max_memory };
        // SAFETY: as above.
        check(unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) })?;
        if let Some(fd) = &ruleset {
            restrict(fd.as_raw_fd())?;
        }
        if let Some(filter) = &filter {
            filter.apply()?;
        }
        Ok(())
    };
    // SAFETY: the closure makes only async-signal-safe system calls on data prepared before
    // the fork; it allocates nothing and takes no lock.
    unsafe { cmd.pre_exec(child) };
    Ok(())
}

/// The Landlock ruleset of `policy` for a kernel of `abi`, as its file descriptor; TCP may
/// connect to `proxy_port` alone.
fn ruleset(policy: &Policy, abi: u32, proxy_port: Option<u16>) -> Result<OwnedFd, Refusal> {
    let err = |e: &dyn std::fmt::Display| Refusal::Ruleset(e.to_string());
    let abi = match abi {
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    };
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let mut base =
        Ruleset::default().set_compatibility(CompatLevel::BestEffort).handle_access(all).map_err(|e| err(&e))?;
    let net_handled = abi >= ABI::V4;
    if net_handled {
        base = base.handle_access(AccessNet::from_all(abi)).map_err(|e| err(&e))?;
    }
    if abi >= ABI::V6 {
        base = base.scope(Scope::from_all(abi)).map_err(|e| err(&e))?;
    }
    let optional: Vec<&str> =
        SYSTEM_READ.iter().chain(policy.proxy.then_some(&REMOTE_READ).into_iter().flatten()).copied().collect();
    let mut rules = Vec::new();
    let mut grant = |path: &Path, access| -> Result<(), Refusal> {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            // A system directory this host does not have (`/lib64`, `/etc/pki` on some distributions).
            Err(_) if optional.iter().any(|s| Path::new(s) == path) => return Ok(()),
            Err(e) => return Err(Refusal::Ruleset(format!("{}: {e}", path.display()))),
        };
        let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
        // Directory-only rights (make, remove, read a directory) cannot be granted on a file.
        let access = if is_dir { access } else { access & AccessFs::from_file(abi) };
        rules.push(PathBeneath::new(fd, access));
        Ok(())
    };
    for path in optional.iter().map(Path::new).chain(policy.read.iter().map(PathBuf::as_path)) {
        grant(path, read)?;
    }
    for path in &policy.write {
        grant(path, all)?;
    }
    grant(Path::new("/dev/null"), AccessFs::ReadFile | AccessFs::WriteFile)?;
    let mut created = base.create().map_err(|e| err(&e))?;
    for rule in rules {
        created = created.add_rule(rule).map_err(|e| err(&e))?;
    }
    if let (true, Some(port)) = (net_handled, proxy_port) {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)).map_err(|e| err(&e))?;
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| Refusal::Ruleset("no ruleset was created".into()))
}

/// Marks every descriptor above 2 close-on-exec: `close_range` with `CLOSE_RANGE_CLOEXEC`
/// (Linux 5.11), else `fcntl(F_SETFD)` on each descriptor below the soft `RLIMIT_NOFILE`.
fn close_inherited() -> std::io::Result<()> {
    // SAFETY: system calls on integers and a valid struct; all async-signal-safe.
    unsafe {
        let r = libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
        if r == 0 {
            return Ok(());
        }
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        check(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit))?;
        let last = i32::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
        for fd in 3..last {
            // EBADF for a descriptor not open: nothing to do.
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}

/// `prctl(PR_SET_NO_NEW_PRIVS)` then `landlock_restrict_self(fd, 0)`.
fn restrict(fd: i32) -> std::io::Result<()> {
    // SAFETY: system calls on integers.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        check(libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) as i32)
    }
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "sandbox_attacks.rs"]
mod attacks;
