//! The one way out of the sandbox for a unit with `allow_remote_bases`: an HTTP `CONNECT` proxy
//! on gitward's loopback (RFC 9110 §9.3.6) that opens a tunnel only to the hosts the unit's
//! kustomizations name as remote bases ([`super::kustomize::Inputs::hosts`]). kustomize and the
//! `git` it runs are given it as `HTTPS_PROXY`; Landlock lets the tool connect to the proxy's
//! port and no other (ABI 4, Linux 6.7).
//!
//! What goes through: HTTPS (a tunnel to `host:port` as named, matched without case). What does
//! not: plain `http://` (a proxy request other than `CONNECT` is answered 403), `ssh://` and
//! `git@host:` bases (ssh honours no proxy variable), and any host the kustomizations do not
//! name. Name resolution happens here, in gitward, so the tool needs no DNS.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The longest request head read from a client, in bytes: a `CONNECT` line and a few headers.
const MAX_HEAD: usize = 8 << 10;

/// How long a tunnel's upstream connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A running proxy; stopped (its listener closed, open tunnels left to end with the tool) when
/// dropped.
pub(super) struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Starts a proxy on `127.0.0.1:0` that tunnels to `allowed` (`host:port`, lowercase).
    ///
    /// Errors: the bind's.
    pub fn start(allowed: BTreeSet<String>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let allowed = Arc::new(allowed);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let allowed = allowed.clone();
                std::thread::spawn(move || serve(stream, &allowed));
            }
        });
        Ok(Self { port, stop })
    }

    /// The loopback port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The proxy's URL, for `HTTPS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One client: a `CONNECT host:port` to an allowed target gets `200` and a tunnel; anything
/// else `403` (or `400` for a head that does not parse) and the connection closed.
fn serve(mut client: TcpStream, allowed: &BTreeSet<String>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(target) = read_connect(&mut client) else {
        let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    let target = target.to_ascii_lowercase();
    if !allowed.contains(&target) {
        let body = format!("gitward: {target} is not a remote base of this unit\n");
        let _ = write!(client, "HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        return;
    }
    let upstream = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.find_map(|a| TcpStream::connect_timeout(&a, CONNECT_TIMEOUT).ok()));
    let Some(upstream) = upstream else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        return;
    };
    if client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").is_err() {
        return;
    }
    let _ = client.set_read_timeout(None);
    tunnel(client, upstream);
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

/// Copies bytes both ways until each side closes.
fn tunnel(client: TcpStream, upstream: TcpStream) {
    let (Ok(mut client_r), Ok(mut upstream_r)) = (client.try_clone(), upstream.try_clone()) else { return };
    let (mut client_w, mut upstream_w) = (client, upstream);
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_r, &mut upstream_w);
        let _ = upstream_w.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut upstream_r, &mut client_w);
    let _ = client_w.shutdown(Shutdown::Write);
    let _ = up.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(proxy: &Proxy, request: &str) -> (String, TcpStream) {
        let mut stream = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
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
        let proxy = Proxy::start(BTreeSet::from([target.clone()])).unwrap();

        let (head, mut stream) = ask(&proxy, &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let (mut upstream, _) = allowed_upstream.accept().unwrap();
        stream.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        upstream.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");

        let denied = format!("127.0.0.1:{}", other.local_addr().unwrap().port());
        let (head, _) = ask(&proxy, &format!("CONNECT {denied} HTTP/1.1\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
        let (head, _) = ask(&proxy, &format!("GET http://{target}/x HTTP/1.1\r\n\r\n"));
        assert!(head.starts_with("HTTP/1.1 403"), "plain HTTP is not proxied: {head}");
        assert_eq!(other.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    }
}
