//! The namespaces a sandboxed tool runs in: a user namespace, a network namespace and a PID
//! namespace, made once per run by a small holder process and joined by the tool before it
//! execs ([`Entry::enter`]). Ending the run ([`Pod`]'s drop) kills the PID namespace's init,
//! and with it — by the kernel, not by a search — every process the tool started, a detached
//! or daemonised one included (`pid_namespaces(7)`).
//!
//! Made in a forked holder (only async-signal-safe calls after the fork, on buffers prepared
//! before it):
//!
//! 1. `unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID)`, then the caller's uid and gid
//!    mapped to themselves (`setgroups` denied first, as an unprivileged `gid_map` requires);
//! 2. for a pod with a proxy: loopback brought up and a TCP socket listening on
//!    `127.0.0.1:<any>` inside the new network namespace, handed to gitward over a UNIX socket
//!    (`SCM_RIGHTS`): gitward accepts on it from its own namespace and serves the remote-bases
//!    proxy ([`super::proxy`]), so that socket is the only address the tool can reach;
//! 3. a fork, which becomes PID 1 of the new PID namespace and reaps orphans until killed.
//!
//! gitward opens the init's `ns/user`, `ns/net` and `ns/pid`; the tool's child, between fork
//! and exec, joins them with `setns` in that order and forks once more into the PID namespace
//! ([`Entry::enter`]). Holder and init die with their parent (`PR_SET_PDEATHSIG`), so a killed gitward
//! leaves no render behind either.

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A live set of namespaces for one run; everything in them is killed and reaped when dropped.
pub(super) struct Pod {
    /// The holder: gitward's child, parent of `init`.
    holder: libc::pid_t,
    /// PID 1 of the PID namespace, as gitward sees it.
    init: libc::pid_t,
    /// `ns/user`, `ns/net`, `ns/pid` of `init`, joined by the tool.
    user: OwnedFd,
    net: OwnedFd,
    pid: OwnedFd,
    /// The proxy's listening socket inside the network namespace, until taken.
    listener: Option<TcpListener>,
}

/// What the tool's child joins: the namespaces' descriptors, copied for use after the fork.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    user: RawFd,
    net: RawFd,
    pid: RawFd,
}

impl Pod {
    /// Makes the namespaces (see the module docs), with a listening socket for the proxy
    /// when `proxy`.
    ///
    /// Errors: the first failing step's (`unshare` refused where user namespaces are not
    /// allowed, a map write, the socket), or the holder's silence for 10 s.
    pub fn create(proxy: bool) -> std::io::Result<Self> {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let maps = Maps { uid: format!("{uid} {uid} 1\n").into_bytes(), gid: format!("{gid} {gid} 1\n").into_bytes() };
        let mut pair = [0 as RawFd; 2];
        // SAFETY: a valid array of two descriptors.
        check(unsafe {
            libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, pair.as_mut_ptr())
        })?;
        // SAFETY: socketpair returned two open descriptors this function now owns.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let mut control = [0u64; 8];
        // SAFETY: fork; the child runs `holder`, which makes only async-signal-safe calls and
        // never returns.
        let holder = unsafe { libc::fork() };
        if holder == 0 {
            holder_main(theirs.as_raw_fd(), &maps, proxy, &mut control);
        }
        drop(theirs);
        check(holder)?;
        let received = receive(&ours);
        let (init, listener) = match received {
            Ok(got) => got,
            Err(e) => {
                end(holder);
                return Err(e);
            }
        };
        let open = |name: &str| File::open(format!("/proc/{init}/ns/{name}")).map(OwnedFd::from);
        match (open("user"), open("net"), open("pid")) {
            (Ok(user), Ok(net), Ok(pid)) => Ok(Self { holder, init, user, net, pid, listener }),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                // SAFETY: kill on a pid of ours.
                unsafe { libc::kill(init, libc::SIGKILL) };
                end(holder);
                Err(e)
            }
        }
    }

    /// The proxy's listening socket (a pod made with `proxy`), once.
    pub fn take_listener(&mut self) -> Option<TcpListener> {
        self.listener.take()
    }

    /// The port of the proxy's listening socket, while the pod holds it.
    pub fn listener_port(&self) -> Option<u16> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok()).map(|a| a.port())
    }

    /// What a child joins ([`Entry::enter`]); valid while the pod lives.
    pub fn entry(&self) -> Entry {
        Entry { user: self.user.as_raw_fd(), net: self.net.as_raw_fd(), pid: self.pid.as_raw_fd() }
    }

    /// Whether a child can join the pod as a tool does: a fork that makes the full entry and
    /// exits with 0 when it succeeded.
    pub fn try_entry(&self) -> bool {
        let entry = self.entry();
        // SAFETY: the child makes only async-signal-safe calls (`setns`, `_exit`).
        unsafe {
            let pid = libc::fork();
            if pid == 0 {
                libc::_exit(if entry.enter().is_ok() { 0 } else { 1 });
            }
            if pid < 0 {
                return false;
            }
            wait_status(pid).is_some_and(|s| libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0)
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        // SIGKILL to a PID namespace's init kills every process in it; the holder, waiting for
        // the init, then exits and is reaped here.
        // SAFETY: kill on a pid of ours.
        unsafe { libc::kill(self.init, libc::SIGKILL) };
        wait_status(self.holder);
    }
}

impl Entry {
    /// In the child between fork and exec: joins the pod's user, network and PID namespaces
    /// (`setns`), then forks, since a process is never moved into a PID namespace itself (and
    /// one whose children would be born elsewhere cannot make threads: `clone(2)`, `EINVAL`).
    /// Returns in the new child, PID namespace member, which goes on to exec the tool; the
    /// process gitward started stays behind as a relay: it closes every descriptor above
    /// stderr, waits for the tool and exits with its code (128 + the signal that killed it).
    /// Both die with their parent. Async-signal-safe calls only.
    ///
    /// Errors: the failing `setns`'s or `fork`'s.
    pub fn enter(self) -> std::io::Result<()> {
        // SAFETY: setns on descriptors the pod keeps open; fork, prctl, close_range, waitpid
        // and _exit are async-signal-safe.
        unsafe {
            check(libc::setns(self.user, libc::CLONE_NEWUSER))?;
            check(libc::setns(self.net, libc::CLONE_NEWNET))?;
            check(libc::setns(self.pid, libc::CLONE_NEWPID))?;
            let tool = libc::fork();
            check(tool)?;
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
            if tool == 0 {
                return Ok(());
            }
            // The relay keeps nothing open: `Command::spawn` learns of the exec by its
            // close-on-exec error pipe closing, which a copy held here would delay.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            let code = match wait_status(tool) {
                Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
                Some(s) if libc::WIFSIGNALED(s) => 128 + libc::WTERMSIG(s),
                _ => 127,
            };
            libc::_exit(code)
        }
    }
}

/// The id maps, written into the new user namespace.
struct Maps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

/// The holder, after the fork: makes the namespaces, sends `[errno, init pid]` (and the
/// listener) on `sock`, then waits for the init and exits. Async-signal-safe calls only.
fn holder_main(sock: RawFd, maps: &Maps, proxy: bool, control: &mut [u64; 8]) -> ! {
    // SAFETY: system calls on prepared data; see the module docs.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        // Nothing of gitward's (API connections, listeners, mirrors) stays open in the pod.
        let sock_u = sock as libc::c_uint;
        if sock_u > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, sock_u - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, sock_u + 1, u32::MAX, 0u32);
        let made = (|| -> std::io::Result<RawFd> {
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWPID))?;
            write_file(c"/proc/self/uid_map", &maps.uid)?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/gid_map", &maps.gid)?;
            if proxy { listen_on_loopback() } else { Ok(-1) }
        })();
        let listener = match made {
            Ok(fd) => fd,
            Err(e) => {
                send(sock, [e.raw_os_error().unwrap_or(libc::EINVAL), 0], -1, control);
                libc::_exit(1);
            }
        };
        let init = libc::fork();
        if init == 0 {
            init_main();
        }
        if init < 0 {
            send(sock, [*libc::__errno_location(), 0], -1, control);
            libc::_exit(1);
        }
        send(sock, [0, init], listener, control);
        libc::close(sock);
        if listener >= 0 {
            libc::close(listener);
        }
        wait_status(init);
        libc::_exit(0);
    }
}

/// PID 1 of the namespace: reaps whatever is reparented to it, until killed.
fn init_main() -> ! {
    let pause = libc::timespec { tv_sec: 0, tv_nsec: 100_000_000 };
    // SAFETY: async-signal-safe calls on a valid struct.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        loop {
            if libc::waitpid(-1, std::ptr::null_mut(), 0) < 0 {
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }
}

/// Brings `lo` up and returns a socket listening on `127.0.0.1:0`, in the current network
/// namespace.
fn listen_on_loopback() -> std::io::Result<RawFd> {
    // SAFETY: socket calls on zeroed, then filled, plain structs.
    unsafe {
        let ctl = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(ctl)?;
        let mut req: libc::ifreq = std::mem::zeroed();
        for (to, from) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *to = *from as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        // The request's type is the C library's (`c_ulong` in glibc, `c_int` in musl).
        let up = libc::ioctl(ctl, libc::SIOCSIFFLAGS as _, &req);
        libc::close(ctl);
        check(up)?;
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        check(fd)?;
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        check(libc::bind(fd, (&raw const addr).cast(), len))?;
        check(libc::listen(fd, 64))?;
        Ok(fd)
    }
}

/// `sendmsg` of two integers and, when `fd >= 0`, that descriptor (`SCM_RIGHTS`).
fn send(sock: RawFd, data: [i32; 2], fd: RawFd, control: &mut [u64; 8]) {
    // SAFETY: a message header over valid buffers; CMSG_* compute offsets into `control`.
    unsafe {
        let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: 8 };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        if fd >= 0 {
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(4) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        }
        libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL);
    }
}

/// Receives the holder's message: the init's pid and the listener, or the holder's error.
fn receive(sock: &OwnedFd) -> std::io::Result<(libc::pid_t, Option<TcpListener>)> {
    let timeout = Duration::from_secs(10);
    let tv = libc::timeval { tv_sec: timeout.as_secs() as _, tv_usec: 0 };
    let mut data = [0i32; 2];
    let mut control = [0u64; 8];
    // SAFETY: valid buffers for setsockopt and recvmsg; a descriptor received is owned here.
    unsafe {
        let size = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
        check(libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&raw const tv).cast(), size))?;
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: 8 };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        // `size_t` in glibc's msghdr, `socklen_t` in musl's.
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut listener = None;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if !cmsg.is_null() && (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
            listener = Some(TcpListener::from_raw_fd(fd));
        }
        match (n, data) {
            (8, [0, init]) if init > 0 => Ok((init, listener)),
            (8, [errno, _]) if errno != 0 => Err(std::io::Error::from_raw_os_error(errno)),
            _ => Err(std::io::Error::other("the namespace holder exited without an answer")),
        }
    }
}

/// `waitpid(pid)` until it returns, retried on `EINTR`; the status, or `None` on an error.
pub(super) fn wait_status(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid with a valid status pointer; async-signal-safe.
    unsafe {
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if *libc::__errno_location() != libc::EINTR {
                return None;
            }
        }
    }
    Some(status)
}

/// Kills the holder (its init dies with it) and reaps it.
fn end(holder: libc::pid_t) {
    // SAFETY: kill on a pid of ours, not yet reaped.
    unsafe { libc::kill(holder, libc::SIGKILL) };
    wait_status(holder);
}

/// `open`, `write`, `close`: async-signal-safe.
pub(super) fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated path and a valid buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd)?;
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

pub(super) fn check(r: i32) -> std::io::Result<()> {
    if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}
