//! gitward's image run as deploy/kubernetes' Pod runs it (`scripts/pod`): podman with runc, user
//! 65532, read-only root, no capabilities, no_new_privs, the RuntimeDefault seccomp profile
//! (moby's default.json), a TokenRequest token of the ServiceAccount gitward-system/gitward
//! and kube's in-cluster config. It applies the example units (plain, kustomize, Helm), reports
//! its sandbox on /readyz, sends no request deploy/kubernetes' RBAC refuses (the audit log),
//! stops every attack on the render sandbox inside the container as on the host, and ends on
//! SIGTERM (`podman stop`) within the Pod's grace period, exit 0.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::common;

/// The identity the container's requests carry: the ServiceAccount deploy/kubernetes makes.
const USER: &str = "system:serviceaccount:gitward-system:gitward";

/// deployment.yaml's terminationGracePeriodSeconds.
const GRACE: Duration = Duration::from_secs(30);

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `scripts/pod`'s run, and its container removed when the test ends however it ends.
struct Pod {
    name: String,
    child: Child,
    /// Its output (gitward's log among it).
    log: std::path::PathBuf,
    /// `[daemon] listen`'s port on the host's loopback (`--network=host`).
    port: u16,
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["rm", "-f", "-t", "0", &self.name]).output();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Pod {
    /// Starts `scripts/pod` with the example units, listening on a port of its own.
    fn start() -> Self {
        let log = tempfile::NamedTempFile::new().unwrap().into_temp_path().keep().unwrap();
        let out = std::fs::File::create(&log).unwrap();
        let name = common::unique("gitward-pod");
        let port = common::free_port();
        let child = Command::new(root().join("scripts/pod"))
            .current_dir(root())
            .env("GITWARD_POD_NAME", &name)
            .env("GITWARD_POD_LISTEN", format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("scripts/pod starts");
        Pod { name, child, log, port }
    }

    /// `/readyz?verbose` once it answers 200 (every unit has synced): after the image build
    /// (cached when scripts/test or the image test built it) and the first syncs.
    async fn wait_ready(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(900);
        loop {
            if let Some((200, body)) = common::http(self.port, "GET", "/readyz?verbose", &[], b"") {
                return body;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("scripts/pod exited {status} before ready:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "not ready within 900 s:\n{}", self.log());
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// The container's process as the kernel sees it: the Pod's user, no capability,
    /// no_new_privs, a seccomp filter, a read-only root.
    fn assert_pod_settings(&self) {
        let inspect = Command::new("podman").args(["inspect", "-f", "{{.State.Pid}}", &self.name]).output().unwrap();
        let pid = String::from_utf8_lossy(&inspect.stdout).trim().to_owned();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        for line in [
            "Uid:\t65532\t65532\t65532\t65532",
            "Gid:\t65532\t65532\t65532\t65532",
            "CapEff:\t0000000000000000",
            "CapPrm:\t0000000000000000",
            "NoNewPrivs:\t1",
            "Seccomp:\t2",
        ] {
            assert!(status.contains(line), "{line:?} in {status}");
        }
        let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        let root = mounts.lines().find(|l| l.split(' ').nth(4) == Some("/")).unwrap();
        assert!(root.split(' ').nth(5).unwrap().split(',').any(|o| o == "ro"), "{root}");
    }

    /// SIGTERM, as the kubelet sends it (`podman stop -t 30`): gone within the grace period,
    /// exit 0, the Lease released.
    fn stop(&mut self) {
        let started = Instant::now();
        let stop = Command::new("podman").args(["stop", "-t", "30", &self.name]).output().unwrap();
        assert!(stop.status.success(), "podman stop: {}", String::from_utf8_lossy(&stop.stderr));
        let exit = self.child.wait().unwrap();
        let took = started.elapsed();
        assert!(exit.success() && took < GRACE, "exit {exit} after {took:?}:\n{}", self.log());
        assert!(self.log().contains("\"leadership released\""), "{}", self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `gitward ARGS` run in the container (`podman exec`: its user, capabilities and seccomp
    /// profile).
    fn exec(&self, args: &[&str]) -> Output {
        Command::new("podman")
            .args(["exec", &self.name, "/usr/local/bin/gitward"])
            .args(args)
            .output()
            .expect("podman exec runs")
    }
}

/// `gitward sandbox-check ARGS`'s exit code, its sandbox line and the attacks that escaped.
fn sandbox_check(output: Output) -> (Option<i32>, String, Vec<String>) {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut lines = stdout.lines();
    let sandbox = lines.next().unwrap_or_default().to_owned();
    let attacks: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once(": ")).collect();
    assert_eq!(attacks.len(), 8, "every attack reported:\n{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let escaped = attacks.iter().filter(|(_, o)| *o == "escaped").map(|(a, _)| a.to_string()).collect();
    (output.status.code(), sandbox, escaped)
}

/// Every attack `sandbox-check` makes.
const ATTACKS: [&str; 8] = ["read-host", "write-outside", "tcp", "udp", "dns", "io-uring", "unshare", "ptrace"];

#[tokio::test]
async fn the_image_runs_as_its_pod_within_its_rbac_and_every_sandbox_attack_fails_inside() {
    let abi = attacks_on_the_host();
    let mut pod = Pod::start();
    let readyz = pod.wait_ready().await;
    // Under RuntimeDefault no user namespace can be made: Landlock and the seccomp filter hold.
    assert!(readyz.contains(&format!("sandbox: landlock ABI {abi}, seccomp, no namespaces")), "{readyz}");
    for unit in ["example", "example-kustomize", "example-helm"] {
        assert!(readyz.contains(&format!("[+]{unit} ok")), "{unit} applied: {readyz}");
    }
    pod.assert_pod_settings();
    assert_applied().await;
    attacks_in_the_container(&pod, &abi);
    pod.stop();
    let events = requests_of(USER);
    assert_allowed(&events);
    assert_role_covers_its_own_namespace(&events);
}

/// Every attack on the host, under the layers this kernel has (all stopped) and off (each gets
/// out); the Landlock ABI `sandbox-check` reports.
fn attacks_on_the_host() -> String {
    let host = sandbox_check(Command::new(common::binary()).arg("sandbox-check").output().unwrap());
    assert_eq!((host.0, host.2.clone()), (Some(0), vec![]), "on the host: {}", host.1);
    let off = sandbox_check(Command::new(common::binary()).args(["sandbox-check", "--off"]).output().unwrap());
    assert_eq!((off.0, off.2), (Some(1), ATTACKS.map(String::from).to_vec()), "unconfined on the host");
    host.1.strip_prefix("sandbox: landlock ABI ").and_then(|s| s.split(',').next()).unwrap().to_owned()
}

/// Every attack inside the container, under RuntimeDefault: all stopped by gitward's layers;
/// with them off, each gets out but io_uring and unshare, which the profile itself denies.
fn attacks_in_the_container(pod: &Pod, abi: &str) {
    let inside = sandbox_check(pod.exec(&["sandbox-check"]));
    assert_eq!((inside.0, inside.2), (Some(0), vec![]), "in the container: {}", inside.1);
    assert!(inside.1.starts_with(&format!("sandbox: landlock ABI {abi}, seccomp, no namespaces")), "{}", inside.1);
    let off = sandbox_check(pod.exec(&["sandbox-check", "--off"]));
    let open: Vec<String> =
        ATTACKS.iter().filter(|a| !["io-uring", "unshare"].contains(a)).map(|a| a.to_string()).collect();
    assert_eq!((off.0, off.2), (Some(1), open), "unconfined in the container");
}

/// What the three example units applied, read from the cluster: their Deployments, written by
/// gitward, and their ApplySet parents in gitward-system.
async fn assert_applied() {
    let client = common::admin("gitward-test-image-pod").await;
    for (namespace, name) in [("hello", "hello"), ("hello-kustomize", "demo-hello"), ("hello-helm", "hello")] {
        let deployment = Api::<Deployment>::namespaced(client.clone(), namespace).get(name).await.unwrap();
        let managers: Vec<_> =
            deployment.metadata.managed_fields.iter().flatten().filter_map(|f| f.manager.clone()).collect();
        assert!(managers.iter().any(|m| m == "gitward"), "{namespace}/{name}: {managers:?}");
    }
    let secrets = Api::<Secret>::namespaced(client, "gitward-system");
    for parent in ["gitward-example", "gitward-example-kustomize", "gitward-example-helm"] {
        secrets.get(parent).await.unwrap_or_else(|e| panic!("ApplySet parent {parent}: {e}"));
    }
}

/// The audit events of `user`.
fn requests_of(user: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(common::audit_log()).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["user"]["username"] == user)
        .collect()
}

/// No request was refused by deploy/kubernetes' RBAC, after the container applied objects and
/// renewed and released its Lease.
fn assert_allowed(events: &[serde_json::Value]) {
    let verbs = common::verbs(events);
    assert!(verbs.get("patch").is_some_and(|&n| n >= 8) && verbs.contains_key("update"), "{verbs:?}");
    let forbidden: Vec<String> = events
        .iter()
        .filter(|e| e["responseStatus"]["code"] == 403)
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect();
    assert_eq!(forbidden, Vec::<String>::new(), "requests deploy/kubernetes/rbac.yaml does not allow");
}

/// The Role gitward alone covers what gitward did for itself in gitward-system (the Lease, the
/// ApplySet parents, their Events), as it must once the ClusterRole is narrowed: asked of the
/// API server (`kubectl auth can-i`) for an identity bound to that Role only.
fn assert_role_covers_its_own_namespace(events: &[serde_json::Value]) {
    let binding = "--serviceaccount=gitward-system:role-only";
    for args in [
        vec!["create", "serviceaccount", "role-only"],
        vec!["create", "rolebinding", "role-only", "--role=gitward", binding],
    ] {
        let out = common::kubectl(&[&["-n", "gitward-system"][..], &args].concat());
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let own: std::collections::BTreeSet<String> = events
        .iter()
        .filter(|e| e["objectRef"]["namespace"] == "gitward-system")
        .map(|e| {
            let r = &e["objectRef"];
            let group = r["apiGroup"].as_str().map(|g| format!(".{g}")).unwrap_or_default();
            let name = r["name"].as_str().map(|n| format!("/{n}")).unwrap_or_default();
            format!("{} {}{group}{name}", e["verb"].as_str().unwrap(), r["resource"].as_str().unwrap())
        })
        .collect();
    assert!(own.iter().any(|r| r.starts_with("update leases.coordination.k8s.io")), "{own:?}");
    let as_role = "system:serviceaccount:gitward-system:role-only";
    let refused: Vec<&String> = own
        .iter()
        .filter(|request| {
            let (verb, resource) = request.split_once(' ').unwrap();
            let can = common::kubectl(&["auth", "can-i", verb, resource, "-n", "gitward-system", "--as", as_role]);
            String::from_utf8_lossy(&can.stdout).trim() != "yes"
        })
        .collect();
    assert_eq!(refused, Vec::<&String>::new(), "requests the Role gitward does not allow");
}
