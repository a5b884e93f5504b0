//! Network git remotes for the tests, real parts only: the real `git daemon` serving bare
//! repositories over `git://` ([`GitDaemon`]), the real `git http-backend` behind a TLS server
//! over `https://` ([`GitHttps`]), and a TCP proxy in front of any server that
//! holds new connections at a gate the test opens and closes ([`GatedProxy`]): a remote whose
//! answer to a fetch comes when the test says.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A `git daemon` serving every repository under a directory over `git://` on a loopback
/// port; killed on drop.
pub struct GitDaemon {
    _child: Served,
    /// Its port.
    pub port: u16,
}

impl GitDaemon {
    /// Serves the repositories under `base` (`git://127.0.0.1:<port>/<path under base>`) and
    /// waits until the port accepts connections.
    pub fn serve(base: &Path) -> Self {
        Self::serve_with(base, Path::new("/dev/null"))
    }

    /// [`GitDaemon::serve`] with `global` as git's global config on the server side (hooks such
    /// as `uploadpack.packObjectsHook` are read only from there).
    pub fn serve_with(base: &Path, global: &Path) -> Self {
        let port = super::free_port();
        let exec_path = Command::new("git").arg("--exec-path").output().expect("git runs").stdout;
        // Run git-daemon itself, not the `git daemon` wrapper, so that kill() stops the server.
        let program = Path::new(String::from_utf8(exec_path).unwrap().trim()).join("git-daemon");
        let child = Command::new(program)
            .args(["--reuseaddr", "--export-all", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .env("GIT_CONFIG_GLOBAL", global)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("git daemon starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "git daemon did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { _child: Served(child), port }
    }

    /// The `git://` URL of the repository at `path` under the served directory.
    pub fn url(&self, path: &str) -> String {
        format!("git://127.0.0.1:{}/{path}", self.port)
    }
}

/// The real `git http-backend` serving every repository under a directory over `https://` on
/// a loopback port (`tests/common/git_https.py`, Python's TLS server), with a self-signed
/// certificate for `127.0.0.1` made by the `openssl` CLI; killed on drop.
pub struct GitHttps {
    _child: Served,
    port: u16,
    /// The server's certificate (PEM): the CA a client must trust.
    pub cert: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl GitHttps {
    /// Serves the repositories under `base` and waits until the port is bound.
    pub fn serve(base: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
            .args([&key, Path::new("-out"), &cert])
            .output()
            .expect("the openssl CLI runs (scripts/setup installs it)");
        assert!(made.status.success(), "openssl req: {}", String::from_utf8_lossy(&made.stderr));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/git_https.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args([base, &cert, &key])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("git_https.py printed no port: {line:?}"));
        Self { _child: Served(child), port, cert, _dir: dir }
    }

    /// The `https://` URL of the repository at `path` under the served directory.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{path}", self.port)
    }
}

/// A server's process: killed, and waited for, on drop.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP proxy on a loopback port in front of `127.0.0.1:<target>`. While its gate is open it
/// forwards each connection both ways; a connection accepted while the gate is closed waits,
/// its request unread and unanswered, until the gate opens. Stops accepting on drop.
pub struct GatedProxy {
    /// The port it listens on.
    pub port: u16,
    /// Whether the gate is open, and the condition waiting connections sleep on.
    gate: Arc<(Mutex<bool>, Condvar)>,
    /// Connections waiting at the closed gate now.
    held: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl GatedProxy {
    /// Listens on a free loopback port, gate open, forwarding to `target`.
    pub fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let gate = Arc::new((Mutex::new(true), Condvar::new()));
        let (held, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (g, h, s) = (gate.clone(), held.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let (gate, held) = (g.clone(), h.clone());
                std::thread::spawn(move || {
                    let (open, changed) = &*gate;
                    let mut is_open = open.lock().unwrap();
                    if !*is_open {
                        held.fetch_add(1, Ordering::SeqCst);
                        while !*is_open {
                            is_open = changed.wait(is_open).unwrap();
                        }
                        held.fetch_sub(1, Ordering::SeqCst);
                    }
                    drop(is_open);
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else { return };
                    pipe(client, server);
                });
            }
        });
        Self { port, gate, held, stop }
    }

    /// Closes the gate: connections accepted from now on wait for [`GatedProxy::open`].
    pub fn close(&self) {
        *self.gate.0.lock().unwrap() = false;
    }

    /// Opens the gate: waiting connections go through, and new ones at once.
    pub fn open(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }

    /// How many connections wait at the closed gate now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }
}

impl Drop for GatedProxy {
    fn drop(&mut self) {
        self.open();
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `a` to `b` and `b` to `a` until either side closes, then shuts both down.
fn pipe(a: TcpStream, b: TcpStream) {
    let (mut a_read, mut b_write) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    let forward = std::thread::spawn(move || {
        let _ = std::io::copy(&mut a_read, &mut b_write);
        let _ = b_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut b_read, mut a_write) = (b, a);
    let _ = std::io::copy(&mut b_read, &mut a_write);
    let _ = a_write.shutdown(std::net::Shutdown::Both);
    let _ = forward.join();
}
