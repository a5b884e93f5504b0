//! The system-call filter a sandboxed render tool runs under (`seccomp(2)`, a BPF program that
//! answers each call before the kernel runs it): the layer of [`super::sandbox`] that holds
//! where no user namespace can be made (a Kubernetes Pod under the `RuntimeDefault` profile)
//! and where Landlock has no network rules (before Linux 6.7) or none for UDP (any version).
//!
//! Compiled from the table below by `seccompiler` before the fork ([`Filter::new`]); installed
//! by the tool's child last, after Landlock, just before `exec` ([`Filter::apply`]): every
//! process the tool starts inherits it and none can remove it (`PR_SET_NO_NEW_PRIVS` is set).
//! A denied call fails with `EPERM` — never a kill: a Go tool reports the error and exits as it
//! would on any failed call. Denied:
//!
//! - `socket` and `socketpair` of every address family but `AF_UNIX` (no TCP, UDP, DNS, raw,
//!   netlink or packet sockets), except that a run with its own network namespace and the
//!   remote-bases proxy in it ([`Network::Proxy`]) may make `AF_INET` and `AF_INET6` sockets:
//!   that namespace has one reachable address, the proxy;
//! - the calls of [`DENIED`]: `io_uring`, `ptrace` and reading or writing another process's
//!   memory, `bpf`, the kernel keyring, making or joining namespaces (`unshare`, `setns`),
//!   mounting, `perf_event_open`, `userfaultfd`, loading kernels and modules, and the like;
//! - `clone` with a namespace flag (`CLONE_NEWUSER`, …); `clone3` fails with `ENOSYS`, as under
//!   the container runtimes' default profile, since its flags are behind a pointer the filter
//!   cannot read: C libraries then fall back to `clone`.
//!
//! On x86_64 the x32 numbers of the denied calls are denied too; a call made through another
//! architecture's entry (a 32-bit `int 0x80`) kills the process, as `seccompiler` builds every
//! filter. Filters exist for x86_64, aarch64 and riscv64; elsewhere [`Filter::new`] fails and
//! the sandbox refuses tools ([`super::sandbox::Support::missing`]).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// The calls every sandboxed tool is denied outright, by name (for the tests and the docs) and
/// number on this architecture.
pub(super) const DENIED: &[(&str, i64)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
    #[cfg(target_arch = "x86_64")]
    ("uselib", libc::SYS_uselib),
];

/// The `clone` flags that make a namespace; a `clone` with any of them is denied.
pub(super) const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// The x32 system-call numbers (x86_64's `__X32_SYSCALL_BIT` set) of calls in [`DENIED`] that
/// x32 numbers apart from x86_64's (`arch/x86/entry/syscalls/syscall_64.tbl`, 512 and up):
/// `ptrace`, `kexec_load`, `process_vm_readv`, `process_vm_writev`.
#[cfg(target_arch = "x86_64")]
const X32_ONLY: [i64; 4] = [X32 | 521, X32 | 528, X32 | 539, X32 | 540];

/// `__X32_SYSCALL_BIT`.
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

/// Which sockets a run may make besides `AF_UNIX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Network {
    /// None: the run has no network.
    Unix,
    /// `AF_INET` and `AF_INET6` too: the run holds its own network namespace, whose only
    /// listening socket is the remote-bases proxy.
    Proxy,
}

/// Why no filter could be built.
#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
    /// `seccompiler` has no filter for this architecture.
    #[error("seccomp: no filter for the architecture {0}")]
    Architecture(&'static str),
    /// The rule table did not compile (a condition or filter `seccompiler` rejects).
    #[error("seccomp: the filter does not compile: {0}")]
    Compile(String),
}

/// A run's compiled filters, ready to be installed in its child.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    /// `clone3` answered with `ENOSYS`, then the table answered with the chosen errno.
    programs: [BpfProgram; 2],
}

impl Filter {
    /// The filter of the module docs, for a run with `network`; denied calls fail with `EPERM`.
    ///
    /// Errors: [`Error::Architecture`] where `seccompiler` has no filter; [`Error::Compile`].
    pub fn new(network: Network) -> Result<Self, Error> {
        Self::with_errno(network, libc::EPERM as u32)
    }

    /// As [`Filter::new`], with denied calls failing with `errno` (the tests choose one no
    /// kernel path returns, so an answer is known to be the filter's).
    pub fn with_errno(network: Network, errno: u32) -> Result<Self, Error> {
        let arch =
            TargetArch::try_from(std::env::consts::ARCH).map_err(|_| Error::Architecture(std::env::consts::ARCH))?;
        let compile = |e: seccompiler::BackendError| Error::Compile(e.to_string());
        let absent = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
        let absent =
            SeccompFilter::new(with_x32(absent), SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch)
                .map_err(compile)?;
        let denied =
            SeccompFilter::new(with_x32(rules(network)?), SeccompAction::Allow, SeccompAction::Errno(errno), arch)
                .map_err(compile)?;
        let program = |f: SeccompFilter| BpfProgram::try_from(f).map_err(compile);
        Ok(Self { programs: [program(absent)?, program(denied)?] })
    }

    /// Installs the filters on the calling thread, and `PR_SET_NO_NEW_PRIVS` first. In the
    /// child between fork and exec: `prctl` and `seccomp` only, no allocation.
    ///
    /// Errors: the failing call's (`EINVAL` from a kernel without `SECCOMP_FILTER`).
    pub fn apply(&self) -> std::io::Result<()> {
        for program in &self.programs {
            seccompiler::apply_filter(program).map_err(|e| match e {
                seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
                _ => std::io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        }
        Ok(())
    }
}

/// Whether this kernel installs the filter and enforces it: a forked child installs the
/// filter of a run without network, then finds an `AF_INET` socket refused with `EPERM` and an
/// `AF_UNIX` one made.
pub(super) fn works() -> bool {
    let Ok(filter) = Filter::new(Network::Unix) else { return false };
    // SAFETY: the child makes only async-signal-safe calls (prctl, seccomp, socket, _exit) on
    // data prepared before the fork.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let ok = filter.apply().is_ok()
                && libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) < 0
                && *libc::__errno_location() == libc::EPERM
                && libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) >= 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
        if pid < 0 {
            return false;
        }
        super::pod::wait_status(pid).is_some_and(|s| libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0)
    }
}

/// The denied calls and their conditions (an empty rule list: always), by call number.
fn rules(network: Network) -> Result<BTreeMap<i64, Vec<SeccompRule>>, Error> {
    let compile = |e: seccompiler::BackendError| Error::Compile(e.to_string());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|&(_, nr)| (nr, Vec::new())).collect();
    let families: &[libc::c_int] = match network {
        Network::Unix => &[libc::AF_UNIX],
        Network::Proxy => &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6],
    };
    // One rule, all its conditions together: the domain (argument 0) is none of `families`.
    let other_family = |families: &[libc::c_int]| -> Result<SeccompRule, Error> {
        let conditions = families
            .iter()
            .map(|&f| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, f as u64))
            .collect::<Result<Vec<_>, _>>()
            .map_err(compile)?;
        SeccompRule::new(conditions).map_err(compile)
    };
    rules.insert(libc::SYS_socket, vec![other_family(families)?]);
    rules.insert(libc::SYS_socketpair, vec![other_family(&[libc::AF_UNIX])?]);
    // One rule per flag, any of them matching: the flags (argument 0) hold that flag.
    let clone = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let flag = flag as u32 as u64;
            let held = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(flag), flag);
            SeccompRule::new(vec![held.map_err(compile)?]).map_err(compile)
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone);
    #[cfg(target_arch = "x86_64")]
    rules.extend(X32_ONLY.iter().map(|&nr| (nr, Vec::new())));
    Ok(rules)
}

/// `rules` with, on x86_64, the same rules under each call's x32 number too; elsewhere `rules`
/// unchanged.
fn with_x32(rules: BTreeMap<i64, Vec<SeccompRule>>) -> BTreeMap<i64, Vec<SeccompRule>> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut rules = rules;
        let x32: Vec<_> = rules.iter().map(|(nr, chain)| (nr | X32, chain.clone())).collect();
        rules.extend(x32);
        rules
    }
    #[cfg(not(target_arch = "x86_64"))]
    rules
}

#[cfg(test)]
#[path = "seccomp_tests.rs"]
mod tests;
