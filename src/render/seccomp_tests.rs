//! The filter's rule table against the kernel: a forked child installs the filter with an
//! errno no kernel path returns, makes each call, and reports the first answer that is not the
//! expected one.

use super::*;

/// The errno the tests' filters answer with: no system call returns it, so an answer of it is
/// the filter's.
const MARK: i32 = 4000;

/// Every argument all ones: a call that reaches the kernel fails there (a bad pointer, flag or
/// descriptor) and changes nothing, so a gap in the table shows as another errno.
const JUNK: libc::c_long = -1;

/// One call and what it must answer: `Err(errno)`, or `Ok(())` for any success.
struct Check {
    what: String,
    nr: libc::c_long,
    args: [libc::c_long; 3],
    expect: Result<(), i32>,
}

fn check(what: impl Into<String>, nr: i64, args: [libc::c_long; 3], expect: Result<(), i32>) -> Check {
    Check { what: what.into(), nr, args, expect }
}

/// Runs `checks` in a child under `filter`; the first that answered otherwise, with its answer.
fn first_wrong(filter: &Filter, checks: &[Check]) -> Option<String> {
    let mut answers = vec![0i32; checks.len()];
    let mut pipe = [0; 2];
    // SAFETY: a pipe into a valid array; the child makes only system calls on data prepared
    // before the fork (the checks, the answers buffer) and exits.
    unsafe {
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        let pid = libc::fork();
        if pid == 0 {
            if filter.apply().is_err() {
                libc::_exit(1);
            }
            for (check, answer) in checks.iter().zip(answers.iter_mut()) {
                let [a, b, c] = check.args;
                let r = libc::syscall(check.nr, a, b, c, JUNK, JUNK, JUNK);
                *answer = if r < 0 { *libc::__errno_location() } else { 0 };
            }
            let bytes = std::mem::size_of_val(answers.as_slice());
            libc::write(pipe[1], answers.as_ptr().cast(), bytes);
            libc::_exit(0);
        }
        libc::close(pipe[1]);
        let bytes = std::mem::size_of_val(answers.as_slice());
        let read = libc::read(pipe[0], answers.as_mut_ptr().cast(), bytes);
        libc::close(pipe[0]);
        let status = super::super::pod::wait_status(pid).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child installed the filter");
        assert_eq!(read, bytes as isize);
    }
    checks.iter().zip(answers).find_map(|(check, answer)| {
        let got = if answer == 0 { Ok(()) } else { Err(answer) };
        (got != check.expect).then(|| format!("{}: {got:?}, expected {:?}", check.what, check.expect))
    })
}

/// `socket(family, SOCK_DGRAM)` and its expected answer.
fn socket(family: libc::c_int, expect: Result<(), i32>) -> Check {
    check(format!("socket({family})"), libc::SYS_socket, [family.into(), libc::SOCK_DGRAM.into(), 0], expect)
}

/// The calls every filter denies, whatever the run's network.
fn denied_everywhere() -> Vec<Check> {
    let mut checks: Vec<Check> = DENIED.iter().map(|&(name, nr)| check(name, nr, [JUNK; 3], Err(MARK))).collect();
    for flag in NAMESPACE_FLAGS {
        // CLONE_SIGHAND without CLONE_VM: EINVAL from the kernel, should the filter let it by.
        let flags = (flag | libc::CLONE_SIGHAND).into();
        checks.push(check(format!("clone({flag:#x})"), libc::SYS_clone, [flags, 0, 0], Err(MARK)));
    }
    checks.push(check("clone3", libc::SYS_clone3, [0, 0, 0], Err(libc::ENOSYS)));
    for family in [libc::AF_NETLINK, libc::AF_PACKET, libc::AF_VSOCK, libc::AF_BLUETOOTH, libc::AF_ALG] {
        checks.push(socket(family, Err(MARK)));
    }
    let pair = |family: libc::c_int| [family.into(), libc::SOCK_STREAM.into(), 0];
    checks.push(check("socketpair(AF_INET)", libc::SYS_socketpair, pair(libc::AF_INET), Err(MARK)));
    checks.push(socket(libc::AF_UNIX, Ok(())));
    checks.push(check("getpid", libc::SYS_getpid, [0; 3], Ok(())));
    #[cfg(target_arch = "x86_64")]
    {
        // The x32 entry: the same calls with the x32 bit, which a kernel with x32 runs.
        let netlink = [libc::AF_NETLINK.into(), libc::SOCK_DGRAM.into(), 0];
        checks.push(check("x32 socket(AF_NETLINK)", X32 | libc::SYS_socket, netlink, Err(MARK)));
        checks.push(check("x32 unshare", X32 | libc::SYS_unshare, [JUNK; 3], Err(MARK)));
        checks.push(check("x32 ptrace", X32 | 521, [JUNK; 3], Err(MARK)));
    }
    checks
}

#[test]
fn every_denied_call_fails_with_the_filters_errno_and_other_calls_run() {
    let filter = Filter::with_errno(Network::Unix, MARK as u32).unwrap();
    let mut checks = denied_everywhere();
    checks.push(socket(libc::AF_INET, Err(MARK)));
    checks.push(socket(libc::AF_INET6, Err(MARK)));
    assert_eq!(first_wrong(&filter, &checks), None);
}

#[test]
fn a_run_with_the_proxy_may_make_internet_sockets_and_nothing_else_more() {
    let filter = Filter::with_errno(Network::Proxy, MARK as u32).unwrap();
    let mut checks = denied_everywhere();
    checks.push(socket(libc::AF_INET, Ok(())));
    assert_eq!(first_wrong(&filter, &checks), None);
}

#[test]
fn the_table_names_the_calls_that_leave_a_sandbox() {
    let names: Vec<&str> = DENIED.iter().map(|(name, _)| *name).collect();
    for call in [
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "bpf",
        "keyctl",
        "add_key",
        "request_key",
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "move_mount",
        "open_tree",
        "fsopen",
        "perf_event_open",
        "userfaultfd",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
    ] {
        assert!(names.contains(&call), "{call} is denied");
    }
    let mut numbers: Vec<i64> = DENIED.iter().map(|(_, nr)| *nr).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers.len(), DENIED.len(), "one entry per call");
}

#[test]
fn this_kernel_enforces_the_filter() {
    assert!(works());
}
