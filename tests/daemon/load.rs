//! Load: `gitward run` (the real binary, real git, the real apiserver) with 50 units of 200
//! ConfigMaps each, 100 pushes spread over 60 s across the units, and a flood of 1,000 webhook
//! requests over the same minute. Every push is applied, no unit is starved (push → applied
//! measured per push, from the push's return to the daemon's `sync complete` of that revision or
//! a later one; p50/p95 printed, per unit too), every bad request is refused, and the daemon's
//! resident memory (VmRSS from /proc, sampled every 250 ms) stays bounded; all printed.
//!
//! The flood: each push is followed by its webhook (100, valid, naming that unit's branch) and
//! by a redelivery of it (100, the same request again at once, as a host retrying a delivery:
//! it coalesces into the sync already queued or running); 650 valid webhooks of feature branches no unit follows
//! (202, nothing triggered); 100 badly signed (401); 50 over the 1 MiB cap (413). Each unit
//! follows its own branch `u<i>` of its own repository, so a webhook triggers one unit only.
//! No object's status is written here: `/proc/<pid>/status` is the daemon's memory, read from outside.

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hmac::{KeyInit, Mac};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

const UNITS: usize = 50;
const OBJECTS: usize = 200;
const PUSHES: usize = 100;
const WEBHOOKS: usize = 1000;
const SPREAD: Duration = Duration::from_secs(60);
const REDELIVERIES: usize = 100;
const BAD_SIGNATURES: usize = 100;
const OVERSIZE: usize = 50;
const SECRET: &str = "load-webhook-secret";
/// A generous bound on the daemon's resident memory with 10,000 tracked objects (debug build).
const MAX_RSS_MIB: u64 = 1024;
/// No unit's push may wait longer than this (p95) to be applied: a starvation bound, generous
/// because a 2-core machine shared with other builds applies far fewer requests a second.
const MAX_PUSH_TO_APPLIED: Duration = Duration::from_secs(120);

fn objects(unit: usize, rev: usize) -> String {
    (0..OBJECTS)
        .map(|j| {
            let value = if j == 0 { format!("r{rev}") } else { format!("u{unit}") };
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c-{j}\ndata:\n  value: \"{value}\"\n")
        })
        .collect()
}

/// One unit's repository, branch `u<unit>`.
struct Unit {
    repo: common::GitRepo,
    namespace: String,
    branch: String,
}

impl Unit {
    /// Writes revision `rev` and pushes it; returns the commit.
    fn push(&self, unit: usize, rev: usize) -> String {
        self.repo.write("objects.yaml", &objects(unit, rev));
        let work = self.repo.work();
        self.repo.git(&["add", "-A"], &work);
        self.repo.git(&["commit", "-q", "-m", &format!("r{rev}")], &work);
        self.repo.git(&["push", "-q", "origin", &format!("main:refs/heads/{}", self.branch)], &work);
        self.repo.git(&["rev-parse", "HEAD"], &work)
    }
}

fn signature(body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// One `POST /hooks/git` over a fresh connection; the body is written on another thread while
/// the response is read, so a 413 sent before the body is read is still received. Returns the
/// status (0: no answer).
fn post(port: u16, body: Vec<u8>, signature: &str) -> u16 {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return 0 };
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "POST /hooks/git HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n\
         X-GitHub-Event: push\r\nX-Hub-Signature-256: {signature}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return 0;
    }
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(&body);
    });
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buf[..n]);
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = sender.join();
    String::from_utf8_lossy(&response).split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// What the flood sends, and the status it must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Push,
    Redelivery,
    Feature,
    BadSignature,
    Oversize,
}

impl Kind {
    fn expected(self) -> u16 {
        match self {
            Kind::BadSignature => 401,
            Kind::Oversize => 413,
            _ => 202,
        }
    }
}

fn send(port: u16, kind: Kind, branch: &str) -> u16 {
    let body = format!("{{\"ref\":\"refs/heads/{branch}\"}}").into_bytes();
    match kind {
        Kind::BadSignature => post(port, body.clone(), &signature(b"something else")),
        Kind::Oversize => {
            let mut big = vec![b' '; (1 << 20) + 1];
            big[..body.len()].copy_from_slice(&body);
            let signature = signature(&big);
            post(port, big, &signature)
        }
        _ => post(port, body.clone(), &signature(&body)),
    }
}

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_units_a_hundred_pushes_and_a_webhook_flood_every_push_applied_none_starved() {
    let started = Instant::now();
    let env = common::setup("load").await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("webhook-secret");
    std::fs::write(&secret_file, SECRET).unwrap();

    // 50 repositories, made in parallel (git runs as a process per step).
    let units: Vec<Unit> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..UNITS)
            .map(|i| {
                let namespace = format!("{}-{i}", env.namespace);
                s.spawn(move || {
                    let unit = Unit { repo: common::GitRepo::new(), namespace, branch: format!("u{i}") };
                    unit.push(i, 0);
                    unit
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for u in &units {
        common::create_namespace(&env.client, &u.namespace).await;
    }
    let tables: String = units
        .iter()
        .enumerate()
        .map(|(i, u)| {
            format!(
                "[[sync]]\nname = \"u{i}\"\nrepo = \"{}\"\nref = \"{}\"\nnamespace = \"{}\"\n\n",
                u.repo.bare().display(),
                u.branch,
                u.namespace
            )
        })
        .collect();
    let secret = format!("webhook_secret_file = \"{}\"", secret_file.display());
    let (config, port) = common::daemon_config(dir.path(), "", &secret, &tables);
    let setup = started.elapsed();

    let mut daemon = common::Daemon::start(&config, port, &[]);
    let pid = daemon.child.id();
    let peak_rss = Arc::new(Mutex::new(0u64));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, on) = (peak_rss.clone(), sampling.clone());
        std::thread::spawn(move || {
            while on.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some(kib) = vm_rss_kib(pid) {
                    let mut p = peak.lock().unwrap();
                    *p = (*p).max(kib);
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
    let cold = Instant::now();
    assert!(daemon.wait_ready(Duration::from_secs(300)).await, "not ready: {}", daemon.log_text());
    let cold = cold.elapsed();
    let synced: std::collections::BTreeSet<String> = daemon
        .events()
        .iter()
        .filter(|e| e["message"] == "sync complete")
        .filter_map(|e| e["unit"].as_str().map(String::from))
        .collect();
    assert_eq!(synced.len(), UNITS, "ready before every unit synced once (units wait for a sync slot)");
    let rss_ready = vm_rss_kib(pid).unwrap_or(0);
    eprintln!(
        "load: setup {:.1} s; cold sync of {UNITS} units x {OBJECTS} objects {:.1} s; VmRSS {} MiB",
        setup.as_secs_f64(),
        cold.as_secs_f64(),
        rss_ready / 1024
    );

    // The flood's schedule: a webhook every 60 ms; pushes every 600 ms, each followed by its webhook.
    let units = Arc::new(units);
    let pushes: Arc<Mutex<Vec<(usize, String, SystemTime)>>> = Arc::default();
    let results: Arc<Mutex<Vec<(Kind, u16)>>> = Arc::default();
    let load_start = Instant::now();
    let pusher = {
        let (units, pushes, results) = (units.clone(), pushes.clone(), results.clone());
        std::thread::spawn(move || {
            for p in 0..PUSHES {
                let at = SPREAD.mul_f64(p as f64 / PUSHES as f64);
                std::thread::sleep(at.saturating_sub(load_start.elapsed()));
                let i = p % UNITS;
                let revision = units[i].push(i, p + 1);
                pushes.lock().unwrap().push((i, revision, SystemTime::now()));
                for kind in [Kind::Push, Kind::Redelivery] {
                    let status = send(port, kind, &units[i].branch);
                    results.lock().unwrap().push((kind, status));
                }
            }
        })
    };
    let flood = {
        let results = results.clone();
        std::thread::spawn(move || {
            let others = WEBHOOKS - PUSHES - REDELIVERIES;
            let mut x: u64 = 0x2545_f491_4f6c_dd1d;
            for w in 0..others {
                let at = SPREAD.mul_f64(w as f64 / others as f64);
                std::thread::sleep(at.saturating_sub(load_start.elapsed()));
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let kind = match w % 16 {
                    0 | 8 => Kind::BadSignature,
                    4 => Kind::Oversize,
                    _ => Kind::Feature,
                };
                let branch = match kind {
                    Kind::Feature => format!("feature-{}", x % 1000),
                    _ => format!("u{}", x as usize % UNITS),
                };
                let status = send(port, kind, &branch);
                results.lock().unwrap().push((kind, status));
            }
        })
    };
    pusher.join().unwrap();
    flood.join().unwrap();
    let sent = load_start.elapsed();

    // Every push applied: its revision, or a later one of the same unit, synced.
    let pushes = pushes.lock().unwrap().clone();
    let applied_at = |events: &[serde_json::Value]| -> Vec<Option<Duration>> {
        let mut synced: BTreeMap<String, Vec<(String, SystemTime)>> = BTreeMap::new();
        for e in events.iter().filter(|e| e["message"] == "sync complete") {
            let Some(ts) = e["timestamp"].as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()) else { continue };
            let at = SystemTime::UNIX_EPOCH + Duration::from_micros(ts.as_microsecond() as u64);
            let unit = e["unit"].as_str().unwrap_or_default().to_string();
            synced.entry(unit).or_default().push((e["revision"].as_str().unwrap_or_default().to_string(), at));
        }
        pushes
            .iter()
            .enumerate()
            .map(|(k, (i, _, pushed))| {
                let later: Vec<&String> = pushes[k..].iter().filter(|(j, _, _)| j == i).map(|(_, r, _)| r).collect();
                synced
                    .get(&format!("u{i}"))?
                    .iter()
                    .filter(|(rev, at)| later.contains(&rev) && at >= pushed)
                    .map(|(_, at)| at.duration_since(*pushed).unwrap_or_default())
                    .min()
            })
            .collect()
    };
    let all_applied = common::eventually(Duration::from_secs(180), || async {
        applied_at(&daemon.events()).iter().all(Option::is_some)
    })
    .await;
    let latencies = applied_at(&daemon.events());
    sampling.store(false, std::sync::atomic::Ordering::SeqCst);
    sampler.join().unwrap();
    let peak_mib = *peak_rss.lock().unwrap() / 1024;
    let rss_end = vm_rss_kib(pid).unwrap_or(0) / 1024;
    let missing: Vec<usize> = latencies.iter().enumerate().filter(|(_, l)| l.is_none()).map(|(k, _)| k).collect();
    assert!(all_applied, "pushes never applied: {missing:?}: {}", daemon.log_text());

    let mut all: Vec<Duration> = latencies.iter().flatten().copied().collect();
    all.sort();
    let mut per_unit: BTreeMap<usize, Vec<Duration>> = BTreeMap::new();
    for ((i, _, _), l) in pushes.iter().zip(&latencies) {
        per_unit.entry(*i).or_default().push(l.unwrap());
    }
    let unit_p95: Vec<(usize, Duration)> = per_unit
        .iter_mut()
        .map(|(i, ls)| {
            ls.sort();
            (*i, percentile(ls, 0.95))
        })
        .collect();
    let worst = unit_p95.iter().max_by_key(|(_, d)| *d).unwrap();
    let results = results.lock().unwrap().clone();
    let mut by_kind: BTreeMap<(Kind, u16), usize> = BTreeMap::new();
    for r in &results {
        *by_kind.entry(*r).or_default() += 1;
    }
    let syncs = daemon.events().iter().filter(|e| e["message"] == "sync complete").count();
    eprintln!(
        "load: {PUSHES} pushes and {} webhooks sent in {:.1} s; {syncs} syncs in all; push -> applied p50 {} ms, \
         p95 {} ms, max {} ms; per-unit p95: median {} ms, worst {} ms (u{}); webhooks by (kind, status): {by_kind:?}; \
         VmRSS peak {peak_mib} MiB, at the end {rss_end} MiB; test {:.1} s",
        results.len(),
        sent.as_secs_f64(),
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.95)),
        ms(*all.last().unwrap()),
        ms({
            let mut p: Vec<Duration> = unit_p95.iter().map(|(_, d)| *d).collect();
            p.sort();
            p[p.len() / 2]
        }),
        ms(worst.1),
        worst.0,
        started.elapsed().as_secs_f64()
    );

    assert_eq!(results.len(), WEBHOOKS);
    for (kind, status) in &results {
        assert_eq!(*status, kind.expected(), "{kind:?} answered {status}; all: {by_kind:?}");
    }
    let count = |k: Kind| results.iter().filter(|(kind, _)| *kind == k).count();
    assert_eq!((count(Kind::BadSignature), count(Kind::Oversize)), (BAD_SIGNATURES, OVERSIZE));
    assert_eq!(count(Kind::Redelivery), REDELIVERIES);
    assert!(worst.1 <= MAX_PUSH_TO_APPLIED, "u{} starved: p95 {:?}", worst.0, worst.1);
    assert!(peak_mib <= MAX_RSS_MIB, "VmRSS peak {peak_mib} MiB over {MAX_RSS_MIB} MiB");

    // The cluster holds every unit's last push.
    for (i, u) in units.iter().enumerate() {
        let last = pushes.iter().enumerate().filter(|(_, (j, _, _))| *j == i).map(|(k, _)| k + 1).max().unwrap();
        let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &u.namespace);
        let value = api.get("c-0").await.unwrap().data.unwrap_or_default().remove("value");
        assert_eq!(value.as_deref(), Some(format!("r{last}").as_str()), "u{i}");
    }
    assert!(daemon.child.try_wait().unwrap().is_none(), "the daemon exited");
}
