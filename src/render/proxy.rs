//! The one way out of the sandbox for a unit with `allow_remote_bases`: an HTTP `CONNECT` proxy
//! (RFC 9110 §9.3.6) that opens a tunnel only to the remote bases' `host:port` targets the
//! unit's kustomizations name and `[render] remote_base_hosts` allows
//! ([`super::kustomize::Inputs::hosts`]). kustomize and the `git` it runs are given it as
//! `HTTPS_PROXY`. Sandboxed, its listening socket lives in the tool's network namespace (made
//! there, accepted from here: [`super::pod`]), the only address the tool can reach; with
//! `[render] sandbox = "off"` it listens on gitward's loopback.
//!
//! What goes through: HTTPS (a tunnel to `host:port` as named, matched without case). What does
//! not: plain `http://` (a proxy request other than `CONNECT` is answered 403), any target not
//! allowed, and an ordinary host name that resolves to a loopback, unspecified, link-local or
//! metadata address ([`crate::config::restricted_ip`], as the chart client checks them; a
//! restricted host is reached only when listed with its port, [`Origin::Vouched`]). Name
//! resolution happens here, in gitward, so the tool needs no DNS.
//!
//! Bounds: at most [`MAX_TUNNELS`] connections at once (more are answered 503); a tunnel with
//! no byte either way for [`Deadlines::idle`], or open for [`Deadlines::total`], is closed, and
//! so is every tunnel within [`TICK`] of the proxy being dropped (the tool's run has ended).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::config::{Origin, restricted_ip};

/// The longest request head read from a client, in bytes: a `CONNECT` line and a few headers.
const MAX_HEAD: usize = 8 << 10;

/// How long a tunnel's upstream connect, or a client's request head, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections served at once: a clone opens one or two; more are answered 503, so
/// a tool cannot make gitward spawn threads or hold descriptors without bound.
pub(super) const MAX_TUNNELS: usize = 16;

/// How often a tunnel wakes to check its deadlines and whether the proxy was dropped.
const TICK: Duration = Duration::from_millis(250);

/// When a tunnel is closed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    /// No byte in either direction for this long. A clone's server answers within seconds;
    /// an upstream that accepts and never answers must not hold a thread and two descriptors.
    pub idle: Duration,
    /// Open this long in all (the render's `[render] timeout`: the tool is killed then).
    pub total: Duration,
}

impl Deadlines {
    /// The deadlines of a render that may run `timeout`: idle 30 s (or `timeout` if shorter),
    /// total `timeout`.
    pub fn of(timeout: Duration) -> Self {
        Self { idle: timeout.min(Duration::from_secs(30)), total: timeout }
    }
}

/// A running proxy; stopped when dropped: its listener closed and every open tunnel closed
/// within [`TICK`].
pub(super) struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
}

/// What every connection of one proxy shares.
struct Shared {
    allowed: BTreeMap<String, Origin>,
    deadlines: Deadlines,
    stop: Arc<AtomicBool>,
    open: AtomicUsize,
}

impl Proxy {
    /// Serves `listener` (bound on a loopback address, here or in a tool's network namespace),
    /// tunnelling to `allowed` (`host:port`, lowercase, with how each was allowed).
    ///
    /// Errors: the listener's (its address, making it non-blocking).
    pub fn start(
        listener: TcpListener,
        allowed: BTreeMap<String, Origin>,
        deadlines: Deadlines,
    ) -> std::io::Result<Self> {
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared { allowed, deadlines, stop: stop.clone(), open: AtomicUsize::new(0) });
        std::thread::spawn(move || accept(&listener, &shared));
        Ok(Self { port, stop })
    }

    /// The proxy's URL, for `HTTPS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Accepts until the proxy is dropped, one thread per connection up to [`MAX_TUNNELS`].
fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let mut client = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(_) => continue,
        };
        let _ = client.set_nonblocking(false);
        if shared.open.fetch_add(1, Ordering::SeqCst) >= MAX_TUNNELS {
            shared.open.fetch_sub(1, Ordering::SeqCst);
            let _ = client.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
            continue;
        }
        let shared = shared.clone();
        std::thread::spawn(move || {
            serve(client, &shared);
            shared.open.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// One client: a `CONNECT host:port` to an allowed target gets `200` and a tunnel; anything
/// else `403` (or `400` for a head that does not parse, `502` when no allowed address answers)
/// and the connection closed.
fn serve(mut client: TcpStream, shared: &Shared) {
    let _ = client.set_read_timeout(Some(CONNECT_TIMEOUT));
    let Some(target) = read_connect(&mut client) else {
        let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    let target = target.to_ascii_lowercase();
    let upstream = match shared.allowed.get(&target) {
        None => Err(format!("gitward: {target} is not a remote base of this unit\n")),
        Some(origin) => connect(&target, *origin),
    };
    let upstream = match upstream {
        Ok(upstream) => upstream,
        Err(body) => {
            let _ = write!(client, "HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\n\r\n{body}", body.len());
            return;
        }
    };
    let Some(upstream) = upstream else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    if shared.stop.load(Ordering::SeqCst) || client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").is_err() {
        return;
    }
    tunnel(client, upstream, shared);
}

/// Resolves `target` and connects to the first address that answers. An ordinary host whose
/// addresses include a restricted one is refused (all of them: DNS rebinding, a poisoned
/// resolver), as the chart client refuses it.
///
/// Errors: the refusal's text for a 403; `Ok(None)` when nothing answers.
fn connect(target: &str, origin: Origin) -> Result<Option<TcpStream>, String> {
    let addrs: Vec<SocketAddr> = target.to_socket_addrs().map(Iterator::collect).unwrap_or_default();
    if origin == Origin::Ordinary
        && let Some((addr, kind)) = addrs.iter().find_map(|a| Some((a, restricted_ip(a.ip())?)))
    {
        return Err(format!("gitward: {target} resolves to {}, a {kind} address: refused\n", addr.ip()));
    }
    Ok(addrs.iter().find_map(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).ok()))
}

/// Reads a request head (up to `\r\n\r\n`, at most [`MAX_HEAD`] bytes, one byte at a time so
/// that nothing after it is consumed) and returns the target of a `CONNECT`.
fn read_connect(client: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD || client.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let line = std::str::from_utf8(&head).ok()?.lines().next()?.to_owned();
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("CONNECT"), Some(target), Some(version)) if version.starts_with("HTTP/") => Some(target.to_owned()),
        // Any other method: a target that is never allowed.
        (Some(_), Some(_), Some(_)) => Some(String::new()),
        _ => None,
    }
}

/// Copies bytes both ways until each side closes, or a deadline passes, or the proxy is
/// dropped; then closes both.
fn tunnel(client: TcpStream, upstream: TcpStream, shared: &Shared) {
    let (Ok(client_r), Ok(upstream_r)) = (client.try_clone(), upstream.try_clone()) else { return };
    let clock = Arc::new(Clock { start: Instant::now(), last: AtomicU64::new(0) });
    let (deadlines, stop) = (shared.deadlines, shared.stop.clone());
    let (up_clock, up_stop, up_to) = (clock.clone(), stop.clone(), upstream.try_clone());
    let up = std::thread::spawn(move || {
        if let Ok(to) = up_to {
            pump(client_r, to, &up_clock, deadlines, &up_stop);
        }
    });
    if let Ok(to) = client.try_clone() {
        pump(upstream_r, to, &clock, deadlines, &stop);
    }
    let _ = up.join();
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
}

/// When a tunnel started and when a byte last went through it (milliseconds after `start`).
struct Clock {
    start: Instant,
    last: AtomicU64,
}

impl Clock {
    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::SeqCst);
    }

    fn expired(&self, deadlines: Deadlines) -> bool {
        let elapsed = self.start.elapsed();
        let idle = elapsed.saturating_sub(Duration::from_millis(self.last.load(Ordering::SeqCst)));
        elapsed >= deadlines.total || idle >= deadlines.idle
    }
}

/// Copies `from` to `to`, waking every [`TICK`] to check the deadlines and the stop flag; on
/// the end of `from` shuts down the write side of `to`, on a deadline or stop both sides.
fn pump(mut from: TcpStream, mut to: TcpStream, clock: &Clock, deadlines: Deadlines, stop: &AtomicBool) {
    let _ = from.set_read_timeout(Some(TICK));
    let _ = to.set_write_timeout(Some(deadlines.idle.max(TICK)));
    let mut buf = vec![0u8; 16 << 10];
    loop {
        if stop.load(Ordering::SeqCst) || clock.expired(deadlines) {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
                clock.touch();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Deadlines = Deadlines { idle: Duration::from_secs(30), total: Duration::from_secs(60) };

    fn start(allowed: &[(&str, Origin)], deadlines: Deadlines) -> (Proxy, u16) {
        let allowed = allowed.iter().map(|(t, o)| ((*t).to_owned(), *o)).collect();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        (Proxy::start(listener, allowed, deadlines).unwrap(), port)
    }

    fn ask(port: u16, request: &str) -> (String, TcpStream) {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        (String::from_utf8(head).unwrap(), stream)
    }

    #[test]
    fn only_connects_to_allowed_targets_are_tunnelled() {
        let allowed_upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        other.set_nonblocking(true).unwrap();
        let target = format!("127.0.0.1:{}", allowed_upstream.local_addr().unwrap().port());
        let (_proxy, port) = start(&[(&target, Origin::Vouched)], LONG);

        let (head, mut stream) = ask(port, &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let (mut upstream, _) = allowed_upstream.accept().unwrap();
        stream.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        upstream.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");

        let denied = format!("127.0.0.1:{}", other.local_addr().unwrap().port());
        let (head, _) = ask(port, &format!("CONNECT {denied} HTTP/1.1\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
        let (head, _) = ask(port, &format!("GET http://{target}/x HTTP/1.1\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 403"), "plain HTTP is not proxied: {head}");
        assert_eq!(other.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    }

    #[test]
    fn an_allowed_name_that_resolves_to_loopback_is_refused() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        upstream.set_nonblocking(true).unwrap();
        let target = format!("localhost:{}", upstream.local_addr().unwrap().port());
        let (_proxy, port) = start(&[(&target, Origin::Ordinary)], LONG);
        let (head, mut stream) = ask(port, &format!("CONNECT {target} HTTP/1.1\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
        let mut body = String::new();
        stream.read_to_string(&mut body).unwrap();
        assert!(body.contains("resolves to 127.0.0.1, a loopback address"), "{body}");
        assert_eq!(upstream.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    }

    #[test]
    fn an_upstream_that_never_answers_is_closed_at_the_idle_deadline() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = format!("127.0.0.1:{}", upstream.local_addr().unwrap().port());
        let short = Deadlines { idle: Duration::from_millis(500), total: Duration::from_secs(60) };
        let (_proxy, port) = start(&[(&target, Origin::Vouched)], short);
        let (head, mut stream) = ask(port, &format!("CONNECT {target} HTTP/1.1\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let (mut held, _) = upstream.accept().unwrap();
        let began = Instant::now();
        stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(stream.read(&mut buf).unwrap(), 0, "the tunnel is closed, not timed out by the test");
        assert!(began.elapsed() < Duration::from_secs(10), "closed after {:?}", began.elapsed());
        held.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        assert_eq!(held.read(&mut buf).unwrap(), 0, "the upstream side is closed too");
    }

    #[test]
    fn tunnels_past_the_bound_are_refused_and_a_dropped_proxy_closes_its_tunnels() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = format!("127.0.0.1:{}", upstream.local_addr().unwrap().port());
        let (proxy, port) = start(&[(&target, Origin::Vouched)], LONG);
        let request = format!("CONNECT {target} HTTP/1.1\r\n\r\n");
        let mut open: Vec<TcpStream> = (0..MAX_TUNNELS).map(|_| ask(port, &request)).map(|(_, s)| s).collect();
        let (head, _) = ask(port, &request);
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        drop(proxy);
        let mut buf = [0u8; 1];
        for stream in &mut open {
            stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            assert_eq!(stream.read(&mut buf).unwrap(), 0, "the tunnel outlived the proxy");
        }
    }
}
