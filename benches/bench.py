"""gitward against its peers on the same kube-apiserver, in the same run (see benches/run).

Workload (generated here and committed with git, one repository per peer so that each applies
to fresh namespaces <peer>-0..9): N objects over 10 namespaces, a mix of Deployments, Services,
ConfigMaps, Secrets, ServiceAccounts, Roles, RoleBindings and custom resources of one CRD
(Widget.bench.gitward.dev). The CRD is in every tree; it is created once before the first
measurement so that no peer pays its discovery wait, and every peer then applies it unchanged.

Peers:
  kubectl  apply --server-side with an ApplySet prune (the kubectl of the apiserver's version)
  flux     fluxcd/pkg/ssa ResourceManager.ApplyAllStaged with DefaultApplyOptions, then
           DeleteAll of the previous inventory's leftovers (benches/flux, built by benches/run);
           SetConcurrency(4), QPS 50, burst 300: kustomize-controller's defaults
  floor    examples/floor.rs: kube server-side apply of every object, 32 in flight, nothing else
Scenarios: cold sync, no-op resync, one object changed, prune (namespace 9's objects removed).
Figures per run: wall seconds, peak RSS (MiB) and CPU seconds (user + system) of the process
(/usr/bin/time -v, from wait4's rusage), requests by verb from the apiserver's audit log
(every request in the run's window not made by the apiserver itself).
Warm resync (the daemon's no-op resync): a signed webhook makes the running daemon sync the
revision it has applied, with its watches warm; timed from the webhook being sent to the last
response in the audit log, requests counted there (one PATCH per object and nothing else is the
contract). Its peer is the floor's second pass in one process (`floor DIR INV 2`): timed in the
audit log from the last response of its first pass to the last of its second. The two take
turns, five runs each, so that neither gets the apiserver at its slower moments only.
Daemon: gitward run's resident memory at rest (VmRSS from /proc) at N and at N/10 objects (the
marginal KiB per tracked object) once its first sync has ended, health wait included (30 s here:
the Deployments never become Available without a controller manager), its peak resident memory
until then (VmHWM), and push-to-applied over 20 pushes measured from outside: from
`git push` returning to a `kubectl get --watch` of the changed object seeing the new value.
`benches/run N daemon` measures the daemon figures alone.
Writes target/bench/results.md and target/bench/results.json.
`benches/run mirror`: the state directory of 1,000 units on one repository (mirror_scenario).
`benches/run N foreign`: the daemon's memory at rest beside an ApplySet it does not hold (foreign).
"""
import datetime
import hashlib
import hmac
import json
import os
import urllib.request
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# GITWARD_BENCH_GITWARD: another gitward binary, e.g. one built --no-default-features for heaptrack.
GITWARD = os.environ.get("GITWARD_BENCH_GITWARD", os.path.join(ROOT, "target/release/gitward"))
FLOOR = os.environ.get("GITWARD_BENCH_FLOOR", os.path.join(ROOT, "target/release/examples/floor"))
FLUX = os.environ.get("GITWARD_BENCH_FLUX", os.path.join(ROOT, "target/bench/flux-apply"))
AUDIT = os.environ.get("GITWARD_TEST_AUDIT_LOG", "")  # set by tests/cluster/run
# Automatic gc (a commit or push past gc.auto loose objects: 10,000 files and up) in the
# foreground: detached, it packs a work tree's objects while one_unit removes that tree, and
# rmtree fails on a file gone under it. The repositories end up as packed as before.
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@gitward.dev",
       "-c", "gc.autoDetach=false", "-c", "maintenance.autoDetach=false"]
PEERS = ["gitward", "kubectl", "flux", "floor"]
NAMESPACES = 10

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.bench.gitward.dev
spec:
  group: bench.gitward.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""

# (kind, share of N, template). {ns} namespace, {name} object name, {i} index.
MIX = [
    ("Deployment", 0.15, """apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}, labels: {{app: {name}, tier: web}}}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}, tier: web}}}}
    spec:
      serviceAccountName: sa-{i:05d}
      containers:
      - name: app
        image: registry.example/app:1.{i}
        ports: [{{containerPort: 8080, name: http}}]
        env: [{{name: INDEX, value: "{i}"}}, {{name: MODE, value: production}}]
        resources: {{requests: {{cpu: 10m, memory: 32Mi}}, limits: {{memory: 64Mi}}}}
        readinessProbe: {{httpGet: {{path: /healthz, port: http}}}}
"""),
    # Headless: four peers' Services would fill the test apiserver's service IP range.
    ("Service", 0.15, """apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}, labels: {{app: {name}}}}}
spec:
  clusterIP: None
  selector: {{app: {name}}}
  ports: [{{name: http, port: 80, targetPort: http}}]
"""),
    ("ConfigMap", 0.25, """apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}, namespace: {ns}, labels: {{app: bench}}}}
data:
  index: "{i}"
  settings.yaml: |
    log_level: info
    payload: {payload}
"""),
    ("Secret", 0.10, """apiVersion: v1
kind: Secret
metadata: {{name: {name}, namespace: {ns}}}
type: Opaque
stringData: {{token: "t-{i}-{payload}"}}
"""),
    ("ServiceAccount", 0.10, """apiVersion: v1
kind: ServiceAccount
metadata: {{name: {name}, namespace: {ns}}}
"""),
    ("Role", 0.05, """apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: {name}, namespace: {ns}}}
rules:
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch]
"""),
    ("RoleBinding", 0.05, """apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {name}, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}
subjects: [{{kind: ServiceAccount, name: sa-{i:05d}, namespace: {ns}}}]
"""),
    ("Widget", 0.15, """apiVersion: bench.gitward.dev/v1
kind: Widget
metadata: {{name: {name}, namespace: {ns}}}
spec: {{size: {i}, color: blue, tags: [a, b, c]}}
"""),
]
PREFIX = {"Deployment": "deploy", "Service": "svc", "ConfigMap": "cm", "Secret": "secret",
          "ServiceAccount": "sa", "Role": "role", "RoleBinding": "rb", "Widget": "widget"}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def generate(work, peer, n, crd=True):
    """Writes the workload for `peer` into `work`: one file per object under <ns>/<kind>/, and
    the CRD unless `crd` is false. Returns the number of objects (CRD included)."""
    os.makedirs(work)
    count = 0
    if crd:
        open(os.path.join(work, "crd.yaml"), "w").write(CRD)
        count = 1
    for kind, share, template in MIX:
        per_ns = max(1, round(n * share / NAMESPACES))
        for k in range(NAMESPACES):
            ns = f"{peer}-{k}"
            d = os.path.join(work, ns, kind.lower())
            os.makedirs(d, exist_ok=True)
            for j in range(per_ns):
                i = k * per_ns + j
                name = f"{PREFIX[kind]}-{i:05d}"
                # ServiceAccounts named sa-<i> for the Deployments and RoleBindings to refer to.
                open(os.path.join(d, f"{name}.yaml"), "w").write(
                    template.format(name=name, ns=ns, i=i, payload="x" * 120))
                count += 1
    return count


def install_crd(tmp):
    """Applies the workload's CRD (written under `tmp`) with kubectl and waits until it is
    Established, so every peer's custom resources are served from its first request."""
    crd = os.path.join(tmp, "crd.yaml")
    open(crd, "w").write(CRD)
    sh(["kubectl", "apply", "--server-side", "-f", crd])
    sh(["kubectl", "wait", "--for=condition=Established", "crd/widgets.bench.gitward.dev", "--timeout=60s"])


def make_repo(tmp, peer, n, crd=True):
    work = os.path.join(tmp, peer, "work")
    bare = os.path.join(tmp, peer, "repo.git")
    count = generate(work, peer, n, crd)
    sh(["git", "init", "-q", "--bare", "--initial-branch=main", bare])
    sh(["git", "init", "-q", "--initial-branch=main", work])
    commit(work, bare, "initial")
    return work, bare, count


def commit(work, bare, message):
    sh(GIT + ["add", "-A"], cwd=work)
    sh(GIT + ["commit", "-q", "-m", message], cwd=work)
    sh(GIT + ["push", "-q", bare, "main"], cwd=work)


def change_one(work, bare, peer, value):
    path = os.path.join(work, f"{peer}-0", "configmap", "cm-00000.yaml")
    text = open(path).read()
    open(path, "w").write(re.sub(r'index: "[^"]*"', f'index: "{value}"', text))
    commit(work, bare, f"change cm-00000 to {value}")


def remove_namespace(work, bare, peer):
    # All but one ConfigMap: kubectl cannot apply an empty set to prune its ApplySet, and every
    # peer must do the same work.
    ns = os.path.join(work, f"{peer}-{NAMESPACES - 1}")
    keep = os.path.join(ns, "configmap", sorted(os.listdir(os.path.join(ns, "configmap")))[0])
    kept = open(keep).read()
    shutil.rmtree(ns)
    os.makedirs(os.path.dirname(keep))
    open(keep, "w").write(kept)
    commit(work, bare, "remove namespace 9's objects but one")


def audit_len():
    with open(AUDIT) as f:
        return sum(1 for _ in f)


def audit_verbs(since):
    """Requests by verb in the audit log after line `since`, the apiserver's own excepted."""
    return verbs_of(audit_events(since))


def audit_events(since):
    """Completed requests in the audit log after line `since`, the apiserver's own excepted."""
    out = []
    with open(AUDIT) as f:
        for i, line in enumerate(f):
            if i < since:
                continue
            if not line.endswith("\n"):
                break  # the apiserver is writing this line: it is read next time
            e = json.loads(line)
            if e.get("stage") in (None, "ResponseComplete") and "kube-apiserver" not in e.get("userAgent", ""):
                out.append(e)
    return out


def stamp(text):
    """Seconds since the epoch of an audit timestamp (RFC 3339, microseconds)."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def in_flight(events):
    """Mean requests in flight over the span of `events`' PATCHes (sum of their latencies in
    the audit log over first received to last completed)."""
    patches = [e for e in events if e["verb"] == "patch"]
    if not patches:
        return None
    busy = sum(stamp(e["stageTimestamp"]) - stamp(e["requestReceivedTimestamp"]) for e in patches)
    span = max(stamp(e["stageTimestamp"]) for e in patches) - min(stamp(e["requestReceivedTimestamp"]) for e in patches)
    return round(busy / span, 1) if span > 0 else None


def verbs_of(events):
    verbs = {}
    for e in events:
        verbs[e["verb"]] = verbs.get(e["verb"], 0) + 1
    return dict(sorted(verbs.items()))


def floor_warm(tmp, work, objects, part_of=None):
    """The floor's warm resync: two passes in one process over a checkout of `work`, the second
    timed in the audit log from the last response of the first to its own last response.

    With `part_of`, it sends gitward's exact bodies: each object with the `part-of` label and a
    64-hex `gitward.dev/desired-hash` annotation (floor's 4th argument), the CRD left out
    (`objects` counts it). Its first pass brings the objects to those bodies; the second is
    the no-op."""
    suffix = "-bodies" if part_of else ""
    tree = os.path.join(tmp, "floor", f"tree-warm{suffix}")
    shutil.rmtree(tree, ignore_errors=True)
    # Without the CRD when labelled: with another ApplySet's id, gitward's unit (which holds
    # it) would refuse it and retry. Each its own inventory file, so the floor deletes nothing.
    ignore = [".git", "crd.yaml"] if part_of else [".git"]
    shutil.copytree(work, tree, ignore=shutil.ignore_patterns(*ignore))
    objects -= 1 if part_of else 0
    mark = audit_len()
    sh([FLOOR, tree, os.path.join(tmp, "floor", f"inventory-warm{suffix}"), "2"] + ([part_of] if part_of else []))
    time.sleep(1.0)  # the audit backend writes asynchronously
    events = audit_events(mark)
    patches = sorted((e for e in events if e["verb"] == "patch"), key=lambda e: stamp(e["requestReceivedTimestamp"]))
    if len(patches) != 2 * objects:
        sys.exit(f"floor warm{suffix}: {len(patches)} patches for 2 passes of {objects} objects")
    first_end = max(stamp(e["stageTimestamp"]) for e in patches[:objects])
    second = [e for e in events if stamp(e["requestReceivedTimestamp"]) >= first_end]
    last = max(stamp(e["stageTimestamp"]) for e in second)
    return {"seconds": round(last - first_end, 3), "window": (first_end, last),
            "requests": verbs_of(second), "in_flight": in_flight(second)}

WEBHOOK_SECRET = b"bench-webhook-secret"
WARM_RUNS = 5


def webhook(port, ref="refs/heads/main", after=None):
    """A GitHub-signed push webhook for `ref` (refs/heads/main: makes the daemon sync at once);
    the units it triggered, as the daemon answers. With `after`, the commit the push brought, as
    a forge's push event names it: a git unit then syncs only a revision it has not taken yet;
    without it the webhook is an explicit request that re-sends the revision last applied."""
    body = json.dumps({"ref": ref, **({"after": after} if after else {})}).encode()
    signature = "sha256=" + hmac.new(WEBHOOK_SECRET, body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/git", data=body, method="POST",
                                     headers={"X-Hub-Signature-256": signature, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        if reply.status != 202:
            sys.exit(f"webhook answered {reply.status}")
        return json.loads(reply.read() or b"{}").get("units", [])


def daemon_warm(daemon, log, port):
    """gitward run's warm resync: from a webhook being sent to the last PATCH response in the
    audit log (the floor's pass is PATCHes alone), every request the daemon made until the sync
    ended counted by verb. The health wait after the apply is left out of the time: it waits
    for the members an earlier wait left unhealthy (the workload's Deployments never roll out
    on an API server without controllers), up to health_timeout, and its watches end with it."""
    quiet = 0
    while quiet < 20:  # 1 s with no sync in flight
        text = open(log).read()
        quiet = quiet + 1 if text.count('"sync triggered"') <= text.count('"sync complete"') else 0
        time.sleep(0.05)
    before = open(log).read().count('"sync complete"')
    mark = audit_len()
    sent = time.time()
    webhook(port)
    deadline = time.time() + 600
    while open(log).read().count('"sync complete"') <= before:
        if time.time() > deadline or daemon.poll() is not None:
            sys.exit("warm resync did not end:\n" + open(log).read()[-3000:])
        time.sleep(0.05)
    time.sleep(1.0)  # the audit backend writes asynchronously
    events = [e for e in audit_events(mark) if e.get("userAgent", "").startswith("gitward")]
    # The ApplySet parent's record and the sync's Event are written once the sync's health wait
    # has ended (a sync that changes nothing still waits, up to health_timeout, for the
    # Deployments an earlier wait left not rolled out; a repeated Event is a PATCH of its count):
    # the members' last PATCH ends the resync.
    members = [e for e in events if e["verb"] == "patch" and e["objectRef"].get("name") != "gitward-bench"
               and e["objectRef"].get("resource") != "events"]
    last = max(stamp(e["stageTimestamp"]) for e in members)
    return {"seconds": round(last - sent, 3), "window": (sent, last),
            "requests": verbs_of(events), "in_flight": in_flight(members)}


def server_cpu_seconds():
    """CPU seconds (user + system) the test cluster's process (kube-apiserver and its embedded
    etcd, tests/cluster/main.go) has used so far, from /proc/PID/stat."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if not (cmdline and cmdline[0].endswith(b"testcluster") and b"serve" in cmdline):
                continue
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


class ServerCpu:
    """Samples server_cpu_seconds() every 50 ms on a thread, so the API server's CPU over a
    window known only afterwards (a floor's second pass, from the audit log) can be read:
    `between(t0, t1)` with wall-clock times (time.time(), as the audit log's stamps)."""

    def __init__(self):
        self.samples = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            self.samples.append((time.time(), server_cpu_seconds()))
            self.stop.wait(0.05)

    def at(self, t):
        before = [cpu for at, cpu in self.samples if at <= t]
        return before[-1] if before else self.samples[0][1]

    def between(self, t0, t1):
        return round(self.at(t1) - self.at(t0), 2)

    def close(self):
        self.stop.set()
        self.thread.join()


def timed(cmd, env=None):
    """Runs cmd under /usr/bin/time -v: wall s, peak RSS MiB, CPU s (user + system), requests,
    and the CPU seconds the API server spent meanwhile."""
    mark = audit_len()
    server = server_cpu_seconds()
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - start
    server = server_cpu_seconds() - server
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    field = lambda name: float(re.search(name + r": ([\d.]+)", p.stderr).group(1))
    time.sleep(1.0)  # the audit backend writes asynchronously
    return {"seconds": round(wall, 3), "rss_mib": round(field(r"Maximum resident set size \(kbytes\)") / 1024, 1),
            "cpu_seconds": round(field(r"User time \(seconds\)") + field(r"System time \(seconds\)"), 2),
            "server_cpu_seconds": round(server, 2), "requests": audit_verbs(mark)}


def write_config(tmp, bare, peer, listen=None, health_timeout=None):
    path = os.path.join(tmp, peer, "gitward.toml")
    daemon = ""
    if listen:
        secret = os.path.join(tmp, peer, "webhook-secret")
        open(secret, "wb").write(WEBHOOK_SECRET)
        daemon = f'listen = "{listen}"\nwebhook_secret_file = "{secret}"\n'
    unit = f'health_timeout = "{health_timeout}"\n' if health_timeout else ""
    open(path, "w").write(
        f'[daemon]\nstate_dir = "{tmp}/{peer}/state"\ninterval = "1h"\nresync_interval = "1h"\n{daemon}\n'
        f'[[sync]]\nname = "bench"\nrepo = "{bare}"\nnamespace = "{peer}-0"\nmax_prune_fraction = 1.0\n{unit}')
    return path


def runner(tmp, peer, work, bare):
    """The command that brings the cluster to the work tree's (or repository's) state."""
    if peer == "gitward":
        config = write_config(tmp, bare, peer)
        return lambda: timed([GITWARD, "sync", "--config", config])
    inventory = os.path.join(tmp, peer, "inventory")
    tree = os.path.join(tmp, peer, "tree")

    def run():
        # The peers read files: a checkout of the committed revision, without .git.
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(work, tree, ignore=shutil.ignore_patterns(".git"))
        if peer == "kubectl":
            # kubectl's ApplySet parent is namespaced and one apply takes one namespace: one
            # ApplySet per namespace, all ten run (a removed namespace's directory is empty, so
            # its ApplySet prunes everything) and timed as one command.
            env = dict(os.environ, KUBECTL_APPLYSET="true")
            script = []
            for k in range(NAMESPACES):
                ns = f"{peer}-{k}"
                os.makedirs(os.path.join(tree, ns), exist_ok=True)
                script.append(f"kubectl apply --server-side --prune --applyset=secret/kubectl-bench -n {ns} "
                              f"-R -f {os.path.join(tree, ns)} -o name")
            return timed(["sh", "-ec", "\n".join(script)], env=env)
        return timed([FLUX if peer == "flux" else FLOOR, tree, inventory])
    return run


def rss_kib(pid):
    return int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))


def start_daemon(tmp, bare, peer, health_timeout=None):
    """gitward run on `peer`'s repository, returned once every unit has synced once (applied;
    its health wait may still run)."""
    port = 19000 + (os.getpid() + len(peer)) % 1000
    config = write_config(tmp, bare, peer, listen=f"127.0.0.1:{port}", health_timeout=health_timeout)
    log = open(os.path.join(tmp, f"{peer}-daemon.log"), "w")
    daemon = subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", config], stderr=log)
    daemon.port = port
    deadline = time.time() + 600
    while "every unit has synced once" not in open(log.name).read():
        if time.time() > deadline or daemon.poll() is not None:
            sys.exit("daemon not ready:\n" + open(log.name).read()[-3000:])
        time.sleep(0.2)
    return daemon, log.name


def hwm_kib(pid):
    """Peak resident memory of `pid` so far (VmHWM)."""
    return int(re.search(r"VmHWM:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1))


def first_sync_ended(daemon, log):
    """Waits (at most 10 min) until the daemon logs `sync complete`: its first sync and health
    wait have ended."""
    deadline = time.time() + 600
    while '"sync complete"' not in open(log).read():
        if time.time() > deadline or daemon.poll() is not None:
            sys.exit("first sync did not end:\n" + open(log).read()[-3000:])
        time.sleep(0.2)
    if '"object failed"' in open(log).read():
        sys.exit("the daemon's first sync failed objects (a retry would re-send everything):\n"
                 + open(log).read()[-3000:])


def at_rest_kib(daemon):
    """VmRSS after the first sync, once it stops falling (sampled every second, at most 10 s)."""
    time.sleep(2)
    rss = rss_kib(daemon.pid)
    for _ in range(8):
        time.sleep(1)
        now = rss_kib(daemon.pid)
        if now >= rss:
            break
        rss = now
    return rss


class Watch:
    """`kubectl get --watch` of one ConfigMap's data.index: when each value was first seen."""

    def __init__(self, ns, name):
        self.seen = {}
        self.proc = subprocess.Popen(
            ["kubectl", "get", "configmap", name, "-n", ns, "--watch", "-o", "jsonpath={.data.index}{\"\\n\"}"],
            stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.seen.setdefault(line.strip(), time.monotonic())

    def wait(self, value, deadline):
        while value not in self.seen and time.monotonic() < deadline:
            time.sleep(0.002)
        return self.seen.get(value)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def daemon_figures(tmp, bare, work, peer, small, floor):
    """gitward run: VmRSS at rest after its first sync on `peer`'s repository and on `small`'s
    (a tenth of the objects), and push-to-applied over 20 pushes, measured from outside: from
    `git push` returning to a watch of the object seeing the new value. Each push is made once
    the previous push's sync has ended."""
    small_daemon, small_log = start_daemon(tmp, small[1], small[2], health_timeout="30s")
    first_sync_ended(small_daemon, small_log)
    small_rss = at_rest_kib(small_daemon)
    small_daemon.send_signal(signal.SIGTERM)
    small_daemon.wait(timeout=60)

    daemon, log = start_daemon(tmp, bare, peer, health_timeout="30s")
    first_sync_ended(daemon, log)
    rss = at_rest_kib(daemon)
    peak = hwm_kib(daemon.pid)
    watch = Watch(f"{peer}-0", "cm-00000")
    time.sleep(1)
    def settled(k):
        """The k-th push's sync has ended: a `sync complete` after its `trigger applied`."""
        lines = open(log).read().splitlines()
        pushed = [i for i, line in enumerate(lines) if '"trigger applied"' in line and '"push"' in line]
        if k == 0:
            return any('"sync complete"' in line for line in lines)
        return len(pushed) >= k and any('"sync complete"' in line for line in lines[pushed[k - 1]:])
    external = []
    for k in range(20):
        # Each push once the previous one's sync has ended: every sync re-sends all objects
        # (DESIGN.md decision 3), and a push during that queues behind it.
        # And no other sync in flight (at 10k, the drift-triggered sync that follows the first
        # sync's 10,000 own writes re-sends everything for seconds).
        deadline = time.time() + 600
        quiet = 0
        while quiet < 20 and time.time() < deadline:
            text = open(log).read()
            idle = settled(k) and text.count('"sync triggered"') <= text.count('"sync complete"')
            quiet = quiet + 1 if idle else 0
            time.sleep(0.05)
        path = os.path.join(work, f"{peer}-0", "configmap", "cm-00000.yaml")
        external.append(push_and_watch(work, bare, path, k, watch))
    watch.stop()
    # Interleaved with the floor's (gitward, floor, gitward, …): the apiserver slows as a run
    # goes on (objects, compactions), and runs in a row would give the later peer the slower one.
    warm = {"gitward": [], "floor": []}
    for _ in range(WARM_RUNS):
        warm["gitward"].append(daemon_warm(daemon, log, daemon.port))
        warm["floor"].append(floor())
    events = [json.loads(line) for line in open(log) if line.startswith("{")]
    own = [e["trigger_to_applied_ms"] for e in events
           if e.get("message") == "trigger applied" and e.get("trigger") == "push"]
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)
    return {"rss_at_rest_mib": round(rss / 1024, 1), "small_rss_at_rest_mib": round(small_rss / 1024, 1),
            "peak_rss_first_sync_mib": round(peak / 1024, 1),
            "push_to_applied_ms": external, "own_trigger_to_applied_ms": own, "warm_resync": warm}


def du_bytes(path):
    """Disk usage of `path` in bytes (`du -s --block-size=1`: blocks allocated, as a state
    directory costs)."""
    return int(sh(["du", "-s", "--block-size=1", path]).stdout.split()[0])


def mirror_dir_name(url):
    """The directory name of the shared mirror of `url` (an absolute path) without credentials,
    as `source::shared::mirror_dir` makes it: the repository's last path segment without
    `.git`, a dot, then the first 8 bytes (hex) of a sha256 over the tagged parts (the URL, then
    four unset credential settings)."""
    digest = hashlib.sha256(b"s" + struct.pack("<Q", len(url.encode())) + url.encode() + b"n" * 4).digest()
    readable = re.sub(r"[^a-z0-9]", "-", os.path.basename(url.rstrip("/")).removesuffix(".git").lower())[:40]
    return f"{readable.strip('-') or 'repo'}.{digest[:8].hex()}"


def mirror_scenario(units=1000, per_unit=10):
    """`benches/run mirror`: the state directory of `units` units that follow one repository,
    a path each holding `per_unit` ConfigMaps, after `gitward validate` has fetched and read
    every unit (no cluster involved: the state directory holds only mirrors). Figures: the bare
    repository's size, the state directory's, the mirrors in it; per-unit mirrors would hold a
    copy of the repository each. Writes target/bench/results-mirror.md."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-mirror-")
    work, bare = os.path.join(tmp, "work"), os.path.join(tmp, "repo.git")
    tables = []
    for u in range(units):
        d = os.path.join(work, f"u{u:04d}")
        os.makedirs(d)
        for i in range(per_unit):
            open(os.path.join(d, f"cm-{i}.yaml"), "w").write(
                f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: u{u:04d}-cm-{i}\n"
                f"data:\n  value: \"{u}-{i}-{'x' * 64}\"\n")
        tables.append(f'[[sync]]\nname = "u{u:04d}"\nrepo = "{bare}"\nref = "main"\npath = "u{u:04d}"\n'
                      f'namespace = "fleet-{u % NAMESPACES}"\n')
    sh(["git", "init", "-q", "--bare", "--initial-branch=main", bare])
    sh(["git", "init", "-q", "--initial-branch=main", work])
    commit(work, bare, "initial")
    state = os.path.join(tmp, "state")
    # `gitward validate` fetches a unit into a temporary directory unless its mirror is in the
    # state directory already: make the (empty) shared mirror directory, which it then fills.
    os.makedirs(os.path.join(state, "mirrors", mirror_dir_name(bare)))
    config = os.path.join(tmp, "gitward.toml")
    open(config, "w").write(f'[daemon]\nstate_dir = "{state}"\n\n' + "\n".join(tables))
    start = time.monotonic()
    sh([GITWARD, "validate", "--config", config])
    wall = time.monotonic() - start
    repo_bytes, state_bytes = du_bytes(bare), du_bytes(state)
    mirrors = sorted(os.listdir(os.path.join(state, "mirrors")))
    text = (f"{units} units on one repository ({units * per_unit} ConfigMaps, a path each), after `gitward "
            f"validate` fetched and read every unit ({wall:.1f} s): repository {repo_bytes / 2**20:.2f} MiB, "
            f"state directory {state_bytes / 2**20:.2f} MiB ({state_bytes / repo_bytes:.2f}x the repository) in "
            f"{len(mirrors)} mirror(s) {mirrors}; per-unit mirrors would hold {units} copies, about "
            f"{units * repo_bytes / 2**30:.2f} GiB.")
    print(text)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    open(os.path.join(ROOT, "target/bench/results-mirror.md"), "w").write(text + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


def percentile(values, q):
    values = sorted(v for v in values if v is not None)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else None


def applyset_id_like(name):
    """An id shaped like an ApplySet's (KEP-3659: 55 characters), for the floor's bodies."""
    import base64
    digest = hashlib.sha256(name.encode()).digest()
    return "applyset-" + base64.urlsafe_b64encode(digest).decode().rstrip("=") + "-v1"


def warm_only(n):
    """`benches/run N warm`: the warm resync alone, three peers taking turns WARM_RUNS times:
    gitward run synced by a webhook, the floor's second pass, and the floor's second pass with
    gitward's exact bodies (so the body's cost to the API server is measured apart from
    gitward's own)."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-warm-")
    install_crd(tmp)
    repos = {}
    for peer in ["gitward", "floor"]:
        for k in range(NAMESPACES):
            sh(["kubectl", "create", "namespace", f"{peer}-{k}"])
        repos[peer] = make_repo(tmp, peer, n)
    load_before = open("/proc/loadavg").read().split()[:3]
    daemon, log = start_daemon(tmp, repos["gitward"][1], "gitward", health_timeout="30s")
    first_sync_ended(daemon, log)
    floor_work, _, _ = repos["floor"]
    objects = sum(f.endswith(".yaml") for _, _, files in os.walk(floor_work) for f in files)
    part_of = applyset_id_like("floor")
    runs = {"gitward": [], "floor": [], "floor, gitward's bodies": []}
    cpu = ServerCpu()
    for _ in range(WARM_RUNS):
        runs["gitward"].append(daemon_warm(daemon, log, daemon.port))
        runs["floor"].append(floor_warm(tmp, floor_work, objects))
        runs["floor, gitward's bodies"].append(floor_warm(tmp, floor_work, objects, part_of))
        for r in runs.values():
            r[-1]["server_cpu_seconds"] = cpu.between(*r[-1]["window"])
        print({peer: (r[-1]["seconds"], r[-1]["server_cpu_seconds"]) for peer, r in runs.items()}, file=sys.stderr)
    cpu.close()
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)
    load_after = open("/proc/loadavg").read().split()[:3]
    median = {peer: statistics.median(r["seconds"] for r in rs) for peer, rs in runs.items()}
    server = {peer: statistics.median(r["server_cpu_seconds"] for r in rs) for peer, rs in runs.items()}
    out = [f"# Warm resync, {repos['gitward'][2]} objects ({WARM_RUNS} runs each, the peers taking turns)\n",
           f"Load average before: {' '.join(load_before)}; after: {' '.join(load_after)}.\n",
           "| peer | seconds, median | each run | API server CPU s, median (each run) | in flight, each run "
           "| requests by verb (first run) | gitward ÷ peer |", "|---|---|---|---|---|---|---|"]
    for peer, rs in runs.items():
        verbs = ", ".join(f"{v} {c}" for v, c in rs[0]["requests"].items())
        each = ", ".join(f"{r['seconds']:.2f}" for r in rs)
        cpus = ", ".join(f"{r['server_cpu_seconds']:.1f}" for r in rs)
        flight = ", ".join(str(r["in_flight"]) for r in rs)
        ratio = "" if peer == "gitward" else f"{median['gitward'] / median[peer]:.2f}"
        out.append(f"| {peer} | {median[peer]:.2f} | {each} | {server[peer]:.1f} ({cpus}) | {flight} | {verbs} "
                   f"| {ratio} |")
    write_results("warm", "\n".join(out), {"runs": runs, "median": median, "server_cpu_median": server})
    shutil.rmtree(tmp, ignore_errors=True)


UNIT_FLOORS = {"floor": "floor", "fbodies": "floor, gitward's bodies"}


def unit_floor(n, peer):
    """`benches/run N unit` runs this first for each floor, each in a cluster of its own (an
    API server already holding another peer's N objects is slower: at 100,000, on 2026-11-26,
    gitward's cold sync took 123 s run second in one cluster, 163 s run third, against 100 s
    for the floor run first): the cold sync of N objects by the
    floor (`floor`) or by the floor sending gitward's exact bodies (`fbodies`: the `part-of`
    label and the 64-hex desired-hash annotation, floor's 4th argument: what those two fields
    cost the API server, apart from gitward's own work). Writes target/bench/unit-<peer>.json."""
    tmp = tempfile.mkdtemp(prefix=f"gitward-bench-unit-{peer}-")
    install_crd(tmp)
    for k in range(NAMESPACES):
        sh(["kubectl", "create", "namespace", f"{peer}-{k}"])
    # The floor reads files: no repository. The bodies' run leaves the CRD out: kubectl made it.
    tree = os.path.join(tmp, peer, "tree")
    count = generate(tree, peer, n, crd=peer == "floor")
    load = open("/proc/loadavg").read().split()[:3]
    extra = ["1", applyset_id_like(peer)] if peer == "fbodies" else []
    result = timed([FLOOR, tree, os.path.join(tmp, peer, "inventory")] + extra)
    result["objects"] = count
    result["load_before"] = load
    result["load_after"] = open("/proc/loadavg").read().split()[:3]
    print(f"{UNIT_FLOORS[peer]} cold {result}", file=sys.stderr)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    json.dump(result, open(os.path.join(ROOT, f"target/bench/unit-{peer}.json"), "w"), indent=2)
    shutil.rmtree(tmp, ignore_errors=True)


def one_unit(n):
    """`benches/run N unit` (N = 100000 for the issue's figure): one unit of N objects.
    gitward's cold sync (`gitward sync`, one-shot) in a cluster of its own, against the two
    floors' (unit_floor, each in its own cluster, run before); then, in gitward's cluster,
    `gitward run` on N/10 objects and on the N objects (its first sync a no-op resync), VmRSS
    at rest of each and the marginal KiB per object; and how many pieces the unit's members
    record was split into."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-unit-")
    install_crd(tmp)
    for peer in ["gitward", "gwsmall"]:
        for k in range(NAMESPACES):
            sh(["kubectl", "create", "namespace", f"{peer}-{k}"])
    results = {}
    for peer, name in UNIT_FLOORS.items():
        results[name] = json.load(open(os.path.join(ROOT, f"target/bench/unit-{peer}.json")))
    count = results["floor"]["objects"]
    work, bare, gw_count = make_repo(tmp, "gitward", n)
    shutil.rmtree(work)
    load_before = open("/proc/loadavg").read().split()[:3]
    config = write_config(tmp, bare, "gitward")
    results["gitward"] = timed([GITWARD, "sync", "--config", config])
    print(f"gitward cold {results['gitward']}", file=sys.stderr)
    pieces = sh(["kubectl", "get", "secret", "-n", "gitward-0", "-l", "gitward.dev/members-of", "-o", "name"]).stdout.split()
    small_work, small_bare, small_count = make_repo(tmp, "gwsmall", max(1, n // 10), crd=False)
    shutil.rmtree(small_work)
    small, small_log = start_daemon(tmp, small_bare, "gwsmall", health_timeout="30s")
    first_sync_ended(small, small_log)
    small_rss = at_rest_kib(small)
    small.send_signal(signal.SIGTERM)
    small.wait(timeout=60)
    daemon, log = start_daemon(tmp, bare, "gitward", health_timeout="30s")
    first_sync_ended(daemon, log)
    rss = at_rest_kib(daemon)
    peak = hwm_kib(daemon.pid)
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)
    load_after = open("/proc/loadavg").read().split()[:3]
    marginal = (rss - small_rss) / max(1, gw_count - small_count)
    gw, fl = results["gitward"], results["floor"]
    floors = "; ".join(f"{name}: {' '.join(r['load_before'])} before, {' '.join(r['load_after'])} after"
                       for name, r in results.items() if "load_before" in r)
    out = [f"# One unit of {gw_count} objects (the floor: {count}), each peer in a cluster of its own\n",
           f"Load average before gitward: {' '.join(load_before)}; after: {' '.join(load_after)} ({floors}).\n",
           "| peer | seconds | CPU s | API server CPU s | peak MiB | requests by verb |", "|---|---|---|---|---|---|"]
    for peer, r in results.items():
        verbs = ", ".join(f"{v} {c}" for v, c in r["requests"].items())
        out.append(f"| {peer} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | {r['server_cpu_seconds']:.2f} "
                   f"| {r['rss_mib']:.0f} | {verbs} |")
    out.append("")
    fb = results["floor, gitward's bodies"]
    out.append(f"Cold sync gitward ÷ floor: {gw['seconds'] / fl['seconds']:.2f} (time), "
               f"{gw['cpu_seconds'] / max(fl['cpu_seconds'], 0.01):.2f} (CPU), {gw['rss_mib'] / fl['rss_mib']:.2f} (RSS); "
               f"÷ the floor sending gitward's bodies: {gw['seconds'] / fb['seconds']:.2f} (time). "
               f"Members record: {len(pieces)} pieces beside the parent.")
    out.append(f"gitward run at rest: {rss / 1024:.0f} MiB resident with {gw_count} objects, "
               f"{small_rss / 1024:.0f} MiB with {small_count}: {marginal:.2f} KiB per tracked object; "
               f"peak {peak / 1024:.0f} MiB (VmHWM) through its first sync (a no-op resync).")
    text = "\n".join(out)
    print(text)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    open(os.path.join(ROOT, "target/bench/unit.md"), "w").write(text + "\n")
    json.dump({"results": results, "pieces": len(pieces), "rss_kib": rss, "small_rss_kib": small_rss,
               "peak_kib": peak, "objects": gw_count, "small_objects": small_count},
              open(os.path.join(ROOT, "target/bench/unit.json"), "w"), indent=2)
    shutil.rmtree(tmp, ignore_errors=True)



def push_idle(log):
    """No sync in flight: every `sync triggered` has its `sync complete` or its yield."""
    text = open(log).read()
    return text.count('"sync triggered"') <= text.count('"sync complete"') + text.count('"sync yielded')


def push_settled(daemon, log, revision):
    """Waits (at most 10 min) until the sync of `revision` has completed and no other runs."""
    deadline = time.time() + 600
    quiet = 0
    while quiet < 20:
        lines = open(log).read().splitlines()
        done = any('"sync complete"' in line and revision in line for line in lines)
        quiet = quiet + 1 if done and push_idle(log) else 0
        if time.time() > deadline or daemon.poll() is not None:
            sys.exit(f"sync of {revision} did not end:\n" + open(log).read()[-3000:])
        time.sleep(0.05)


def push_once(work, bare, watch, value, path):
    """Commits `value` into cm-00000 and pushes; ms from `git push` returning to the watch
    seeing it (None past 60 s), and the revision."""
    text = open(path).read()
    open(path, "w").write(re.sub(r'index: "[^"]*"', f'index: "{value}"', text))
    sh(GIT + ["commit", "-q", "-a", "-m", f"push {value}"], cwd=work)
    sh(GIT + ["push", "-q", bare, "main"], cwd=work)
    pushed = time.monotonic()
    revision = sh(GIT + ["rev-parse", "HEAD"], cwd=work).stdout.strip()
    seen = watch.wait(value, pushed + 60)
    return (round((seen - pushed) * 1000, 1) if seen else None), revision


def write_results(name, text, data):
    """Prints `text` and writes it to target/bench/<name>.md, `data` to <name>.json."""
    print(text)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    open(os.path.join(ROOT, f"target/bench/{name}.md"), "w").write(text + "\n")
    json.dump(data, open(os.path.join(ROOT, f"target/bench/{name}.json"), "w"), indent=2)


def push_main(n=10000, pushes=20, idle_pushes=5):
    """`benches/run push`: push to applied while a full re-send of the same unit is in flight.

    One `gitward run` over N objects (the workload above, 10,000 by default). Each measured push
    is made once a webhook-forced resync of the unit is in its apply (500 of its PATCHes in the
    audit log), and timed from `git push` returning to a `kubectl get --watch` of the changed
    ConfigMap seeing the new value; the next one waits until that push's sync has completed.
    The reference in the same run: pushes with nothing else in flight (the daemon figures'
    method). Writes target/bench/push.md and push.json."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-push-")
    install_crd(tmp)
    peer = "gitward"
    for k in range(NAMESPACES):
        sh(["kubectl", "create", "namespace", f"{peer}-{k}"])
    work, bare, count = make_repo(tmp, peer, n)
    daemon, log = start_daemon(tmp, bare, peer, health_timeout="30s")
    first_sync_ended(daemon, log)
    watch = Watch(f"{peer}-0", "cm-00000")
    path = os.path.join(work, f"{peer}-0", "configmap", "cm-00000.yaml")
    time.sleep(1)
    load_before = open("/proc/loadavg").read().split()[:3]
    idle, during, yields = [], [], 0
    revision = None
    for k in range(idle_pushes):
        if revision:
            push_settled(daemon, log, revision)
        ms, revision = push_once(work, bare, watch, f"idle-{k}", path)
        idle.append(ms)
    for k in range(pushes):
        push_settled(daemon, log, revision)
        mark = audit_len()
        webhook(daemon.port)
        deadline = time.time() + 120
        while sum(1 for e in audit_events(mark) if e["verb"] == "patch"
                  and e.get("userAgent", "").startswith("gitward")) < 500:
            if time.time() > deadline:
                sys.exit("the forced resync sent no 500 PATCHes:\n" + open(log).read()[-3000:])
            time.sleep(0.05)
        ms, revision = push_once(work, bare, watch, f"during-{k}", path)
        during.append(ms)
        print(f"push {k} during a resync: {ms} ms", file=sys.stderr)
    push_settled(daemon, log, revision)
    yields = open(log).read().count('"sync yielded to a newer revision"')
    watch.stop()
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)
    load_after = open("/proc/loadavg").read().split()[:3]
    p50, p95 = percentile(during, 0.5), percentile(during, 0.95)
    i50 = percentile(idle, 0.5)
    out = [f"# gitward push during a forced resync: {count} objects, one unit\n",
           f"Load average (1, 5, 15 min) before: {' '.join(load_before)}; after: {' '.join(load_after)}; "
           f"{os.cpu_count()} CPUs.\n",
           f"Push to applied, from `git push` returning to a watch seeing the new value, each push made once a "
           f"webhook-forced resync of the unit had sent 500 PATCHes ({len(during)} pushes, "
           f"{sum(v is None for v in during)} not seen within 60 s; {yields} resyncs yielded): "
           f"p50 {p50} ms, p95 {p95} ms, max {percentile(during, 1.0)} ms.",
           f"The same daemon with nothing else in flight ({len(idle)} pushes): p50 {i50} ms, max "
           f"{percentile(idle, 1.0)} ms; during a resync ÷ idle, p50: "
           f"{(p50 / i50) if p50 and i50 else float('nan'):.2f}."]
    write_results("push", "\n".join(out),
                  {"objects": count, "load_before": load_before, "load_after": load_after,
                   "during_resync_ms": during, "idle_ms": idle, "yields": yields})
    shutil.rmtree(tmp, ignore_errors=True)


# --- fleet: many units on one repository -------------------

FLEET_OBJECTS = 4           # ConfigMaps per unit: the Flux benchmark's shape
# Units' namespaces: unit i goes to <prefix>-(i mod FLEET_NAMESPACES). One by default: many apps
# of one team in one namespace, the layout where a unit's cost could grow with its neighbours.
FLEET_NAMESPACES = int(os.environ.get("GITWARD_BENCH_FLEET_NAMESPACES", "1"))
FLUX_FLEET_SECONDS = 253    # flux-benchmark RESULTS.md, Flux v2.9.0: 1,000 Kustomizations, 4m13s
FLUX_FLEET_MIB = 223        # the same row's kustomize-controller memory


def fleet_repo(tmp, prefix, units):
    """A repository with one directory per unit, `units/<prefix>-NNNN/`, of FLEET_OBJECTS
    ConfigMaps each (one file per object, no namespace: the unit's is the default)."""
    work = os.path.join(tmp, prefix, "work")
    bare = os.path.join(tmp, prefix, "repo.git")
    for u in range(units):
        d = os.path.join(work, "units", f"{prefix}-{u:04d}")
        os.makedirs(d)
        for j in range(FLEET_OBJECTS):
            name = f"{prefix}-{u:04d}-{j}"
            open(os.path.join(d, f"cm-{j}.yaml"), "w").write(
                f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {{app: fleet}}}}\n"
                f"data:\n  index: \"{j}\"\n  settings.yaml: |\n    log_level: info\n    payload: {'x' * 120}\n")
    sh(["git", "init", "-q", "--bare", "--initial-branch=main", bare])
    sh(["git", "init", "-q", "--initial-branch=main", work])
    commit(work, bare, "fleet")
    return work, bare


def fleet_namespace(prefix, u):
    return f"{prefix}-{u % FLEET_NAMESPACES}"


def create_fleet_namespaces(prefix, units):
    """Creates the namespaces [`fleet_namespace`] gives `units` units."""
    for k in range(min(units, FLEET_NAMESPACES)):
        sh(["kubectl", "create", "namespace", f"{prefix}-{k}"])


def fleet_config(tmp, prefix, bare, units, name, sharding=None, listen=None, webhook_secret=False, tables=""):
    """A daemon config with `units` units, unit i following `units/<prefix>-i` into
    [`fleet_namespace`]; `sharding` is a [daemon.sharding] body; `webhook_secret`: webhooks
    signed with WEBHOOK_SECRET are accepted; `tables` is appended (a [[preview]])."""
    path = os.path.join(tmp, prefix, f"{name}.toml")
    text = [f'[daemon]\nstate_dir = "{tmp}/{prefix}/state-{name}"\ninterval = "1h"\nresync_interval = "1h"\n']
    if listen:
        text.append(f'listen = "{listen}"\n')
    if webhook_secret:
        secret = os.path.join(tmp, prefix, "webhook-secret")
        open(secret, "wb").write(WEBHOOK_SECRET)
        text.append(f'webhook_secret_file = "{secret}"\n')
    if sharding:
        text.append(f"[daemon.sharding]\n{sharding}\n")
    for u in range(units):
        text.append(f'[[sync]]\nname = "{prefix}-{u:04d}"\nrepo = "{bare}"\npath = "units/{prefix}-{u:04d}"\n'
                    f'namespace = "{fleet_namespace(prefix, u)}"\nhealth_timeout = "0s"\n')
    text.append(tables)
    open(path, "w").write("\n".join(text))
    return path


def wait_log(daemon, log, text, seconds=1800):
    deadline = time.time() + seconds
    while text not in open(log).read():
        if time.time() > deadline or daemon.poll() is not None:
            sys.exit(f"no `{text}` in {log}:\n" + open(log).read()[-3000:])
        time.sleep(0.5)


def log_quiet(log, seconds=2.0, deadline=600):
    """Waits until the daemon's log shows no sync in flight for `seconds`: as many syncs ended as
    were triggered, or no line written for 5 s (a trigger coalesced into a queued one, or a
    sync that yielded to a newer revision, has no end of its own)."""
    quiet_since, end = None, time.time() + deadline
    size, grown = -1, time.time()
    while time.time() < end:
        text = open(log).read()
        if len(text) != size:
            size, grown = len(text), time.time()
        idle = (text.count('"sync triggered"') <= text.count('"sync complete"') + text.count('"sync failed"')
                or time.time() - grown >= 5.0)
        if idle:
            quiet_since = quiet_since or time.time()
            if time.time() - quiet_since >= seconds:
                return True
        else:
            quiet_since = None
        time.sleep(0.1)
    return False


def fleet_writes(since, prefix):
    """gitward's PATCHes of the fleet's ConfigMaps in the audit log after line `since`:
    (object name, user agent, completed)."""
    out = []
    for e in audit_events(since):
        ref = e.get("objectRef") or {}
        if (e["verb"] == "patch" and ref.get("resource") == "configmaps"
                and (ref.get("namespace") or "").startswith(prefix + "-")
                and e.get("userAgent", "").startswith("gitward") and e.get("responseStatus", {}).get("code") in (200, 201)):
            out.append((ref["name"], e["userAgent"], stamp(e["stageTimestamp"])))
    return out


def lease_writes(since, namespace):
    """gitward's successful writes of Leases in `namespace` in the audit log after line `since`:
    (Lease name, replica identity from the user agent, completed)."""
    out = []
    for e in audit_events(since):
        ref = e.get("objectRef") or {}
        agent = e.get("userAgent", "")
        who = re.search(r"\((\S+?)\)", agent)
        if (e["verb"] in ("create", "update", "patch") and ref.get("resource") == "leases"
                and ref.get("namespace") == namespace and agent.startswith("gitward") and who
                and e.get("responseStatus", {}).get("code") in (200, 201)):
            out.append((ref["name"], who.group(1), stamp(e["stageTimestamp"])))
    return out


def buckets_taken_over(since, namespace, victim, killed_at):
    """The bucket Leases `victim` held when it was killed at `killed_at` (its write the last of
    each before then) and, of each, the seconds from the kill to its first write by another
    replica: (held, sorted seconds)."""
    last, taken = {}, {}
    for name, who, at in sorted(lease_writes(since, namespace), key=lambda w: w[2]):
        if not name.startswith("gitward-bucket-"):
            continue
        if at <= killed_at:
            last[name] = who
        elif who != victim and last.get(name) == victim:
            taken.setdefault(name, at - killed_at)
    held = sorted(n for n, who in last.items() if who == victim)
    return held, sorted(taken.values())


def requests_of(since, agent, until=None):
    """Requests by verb (and in all) in the audit log after line `since`, up to line `until`,
    from user agents starting with `agent`."""
    events = [e for e in audit_events(since)[:None if until is None else until - since]
              if e.get("userAgent", "").startswith(agent)]
    verbs = verbs_of(events)
    verbs["all"] = len(events)
    return verbs


def push_and_watch(work, bare, path, k, watch):
    """Commits `push-k` as the `index` of the ConfigMap in `path` and pushes it; ms from `git
    push` returning to the watch seeing it (None: not within 60 s)."""
    value = f"push-{k}"
    text = open(path).read()
    open(path, "w").write(re.sub(r'index: "[^"]*"', f'index: "{value}"', text))
    sh(GIT + ["commit", "-q", "-a", "-m", f"push {k}"], cwd=work)
    sh(GIT + ["push", "-q", bare, "main"], cwd=work)
    pushed = time.monotonic()
    seen = watch.wait(value, pushed + 60)
    return round((seen - pushed) * 1000, 1) if seen else None


def fleet_run(tmp, prefix, units, pushes=0, tables=""):
    """One `gitward run` of `units` units: seconds from its start to the last of their objects
    applied (audit log), VmRSS at rest, peak, state directory size, gitward's requests per unit
    until every unit synced once and per push (audit log), push-to-applied. `tables` is appended
    to the config (a [provenance])."""
    create_fleet_namespaces(prefix, units)
    work, bare = fleet_repo(tmp, prefix, units)
    config = fleet_config(tmp, prefix, bare, units, "run", tables=tables)
    log = os.path.join(tmp, f"{prefix}-daemon.log")
    mark = audit_len()
    started = time.time()
    daemon = subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", config],
                              stderr=open(log, "w"))
    wait_log(daemon, log, "every unit has synced once")
    ready = time.time() - started
    time.sleep(2.0)  # the audit backend writes asynchronously
    first_end = audit_len()
    writes = fleet_writes(mark, prefix)
    applied = {name for name, _, _ in writes}
    if len(applied) != units * FLEET_OBJECTS:
        daemon.kill()
        sys.exit(f"{prefix}: {len(applied)} of {units * FLEET_OBJECTS} objects applied:\n" + open(log).read()[-3000:])
    all_synced = max(at for _, _, at in writes) - started
    first_requests = requests_of(mark, "gitward", first_end)
    log_quiet(log)
    rss = at_rest_kib(daemon)
    peak = hwm_kib(daemon.pid)
    rest = where_memory_is(daemon.pid)
    state = int(sh(["du", "-sb", os.path.join(tmp, prefix, "state-run")]).stdout.split()[0])
    repo_size = int(sh(["du", "-sb", bare]).stdout.split()[0])
    latencies = []
    push_requests = {}
    if pushes:
        watch = Watch(fleet_namespace(prefix, 0), f"{prefix}-0000-0")
        time.sleep(1)
        log_quiet(log, 1.0)
        push_mark = audit_len()
        # A push changes one unit's path; the others, plain units whose path it left alone,
        # take the new revision without a sync. Each push is made a second after the previous
        # one was applied.
        for k in range(pushes):
            path = os.path.join(work, "units", f"{prefix}-0000", "cm-0.yaml")
            latencies.append(push_and_watch(work, bare, path, k, watch))
            print(f"fleet push {k}: {latencies[-1]} ms", file=sys.stderr)
            time.sleep(1.0)
        log_quiet(log, 2.0, deadline=1800)
        watch.stop()
        time.sleep(2.0)
        push_requests = requests_of(push_mark, "gitward")
    text = open(log).read()
    unwatched = text.count("cannot watch the repository")
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=120)
    return {"units": units, "objects": units * FLEET_OBJECTS, "all_synced_seconds": round(all_synced, 1),
            "ready_seconds": round(ready, 1), "rss_at_rest_mib": round(rss / 1024, 1),
            "peak_rss_mib": round(peak / 1024, 1), "state_dir_mib": round(state / 2**20, 1),
            "repo_mib": round(repo_size / 2**20, 2), "units_without_ref_watch": unwatched,
            "first_sync_requests": first_requests, "push_requests": push_requests,
            "push_to_applied_ms": latencies, "at_rest": rest}


def fleet_flux(tmp, prefix, units):
    """Flux's engine (benches/flux `fleet`) on `units` units of the same shape: one process,
    4 units at a time, each unit's ConfigMaps applied by ApplyAllStaged into its namespace.
    Wall seconds, peak RSS, CPU seconds and requests (audit log)."""
    create_fleet_namespaces(prefix, units)
    work, _ = fleet_repo(tmp, prefix, units)
    listing = os.path.join(tmp, prefix, "units.tsv")
    open(listing, "w").write("".join(f"{work}/units/{prefix}-{u:04d}\t{fleet_namespace(prefix, u)}\n"
                                     for u in range(units)))
    result = timed([FLUX, "fleet", listing])
    names = sh(["kubectl", "get", "configmaps", "-A", "-l", "app=fleet", "-o", "name"]).stdout.split()
    applied = sum(1 for n in names if n.startswith(f"configmap/{prefix}-"))
    if applied != units * FLEET_OBJECTS:
        sys.exit(f"flux {prefix}: {applied} of {units * FLEET_OBJECTS} objects applied")
    result["units"] = units
    result["requests"]["all"] = sum(result["requests"].values())
    return result


def where_memory_is(pid):
    """At rest, from /proc: anonymous and file-backed resident KiB (smaps_rollup), open
    sockets and threads."""
    rollup = open(f"/proc/{pid}/smaps_rollup").read()
    field = lambda name: int(re.search(rf"^{name}:\s+(\d+)", rollup, re.M).group(1))
    fds = os.listdir(f"/proc/{pid}/fd")
    sockets = sum(1 for fd in fds if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return {"rss_kib": field("Rss"), "anonymous_kib": field("Anonymous"),
            "file_kib": field("Rss") - field("Anonymous"), "sockets": sockets, "threads": threads}


def per_unit(requests, units):
    return f"{requests.get('all', 0) / units:.2f}" if units else "—"


def fleet(units):
    """`benches/run fleet [UNITS]`: one `gitward run` with UNITS / 10 units, then one with UNITS
    (default 1,000), on one repository each (a path per unit, FLEET_OBJECTS ConfigMaps each),
    20 pushes to one unit in each; then Flux's engine on the same two fleets
    (GITWARD_BENCH_FLEET_FLUX=0 leaves it out, `small` runs it on the small fleet only)."""
    tmp = tempfile.mkdtemp(prefix="gitward-fleet-")
    pushes = int(os.environ.get("GITWARD_BENCH_FLEET_PUSHES", "20"))
    with_flux = os.environ.get("GITWARD_BENCH_FLEET_FLUX", "1")
    load_before = open("/proc/loadavg").read().split()[:3]
    small = fleet_run(tmp, "fleets", units // 10, pushes)
    print(f"fleet {small}", file=sys.stderr)
    large = fleet_run(tmp, "fleet", units, pushes)
    print(f"fleet {large}", file=sys.stderr)
    flux = {}
    if with_flux != "0":
        for key, prefix, n in (("small", "fluxs", units // 10), ("large", "fluxl", units)):
            if with_flux == "small" and key == "large":
                continue
            flux[key] = fleet_flux(tmp, prefix, n)
            print(f"flux fleet {flux[key]}", file=sys.stderr)
    load_after = open("/proc/loadavg").read().split()[:3]
    marginal = (large["rss_at_rest_mib"] - small["rss_at_rest_mib"]) * 1024 / (large["units"] - small["units"])
    out = [f"# gitward fleet benchmark: {units // 10} and {units} units on one repository each, {FLEET_OBJECTS} "
           f"ConfigMaps per unit, {FLEET_NAMESPACES} namespace(s)\n",
           f"Load average (1, 5, 15 min) before: {' '.join(load_before)}; after: {' '.join(load_after)}; "
           f"{os.cpu_count()} CPUs. Flux's engine: fluxcd/pkg/ssa ApplyAllStaged per unit, 4 units at a time "
           f"(kustomize-controller's --concurrent), QPS 50 / burst 300, one process (benches/flux `fleet`; no "
           f"source fetch, build or health check).\n",
           "| units | objects | engine | all synced once, s | ÷ Flux | at rest MiB | peak MiB | requests per unit (first sync) | push p50 / p95 ms (requests per push, all units) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for key, r in (("small", small), ("large", large)):
        peer = flux.get(key)
        ratio = f"{r['all_synced_seconds'] / peer['seconds']:.2f}" if peer else "—"
        lat = r["push_to_applied_ms"]
        push = (f"{percentile(lat, 0.5)} / {percentile(lat, 0.95)} ({per_unit(r['push_requests'], len(lat))})"
                if lat else "—")
        out.append(f"| {r['units']} | {r['objects']} | gitward | {r['all_synced_seconds']:.1f} | {ratio} | "
                   f"{r['rss_at_rest_mib']:.0f} | {r['peak_rss_mib']:.0f} | "
                   f"{per_unit(r['first_sync_requests'], r['units'])} | {push} |")
        if peer:
            out.append(f"| {peer['units']} | {peer['units'] * FLEET_OBJECTS} | Flux engine | {peer['seconds']:.1f} | 1 | — | "
                       f"{peer['rss_mib']:.0f} | {per_unit(peer['requests'], peer['units'])} | — |")
    out.append("")
    out.append(f"Marginal resident memory per unit ({small['units']} → {large['units']} units): {marginal:.1f} KiB. "
               f"Flux v2.9.0 (flux-benchmark RESULTS.md, whole controllers): 1,000 Kustomizations × 4 objects in "
               f"{FLUX_FLEET_SECONDS} s, {FLUX_FLEET_MIB} MiB. Units whose repository refs could not be watched "
               f"(inotify limits; they poll): {large['units_without_ref_watch']}.")
    for r in (small, large):
        m = r["at_rest"]
        out.append(f"With {r['units']} units: first-sync requests {r['first_sync_requests']}; from the first "
                   f"push until every sync it caused ended {r['push_requests']}; at rest (/proc/PID/smaps_rollup) anonymous {m['anonymous_kib'] / 1024:.0f} MiB, "
                   f"file-backed {m['file_kib'] / 1024:.0f} MiB, {m['sockets']} sockets, {m['threads']} threads; "
                   f"state dir {r['state_dir_mib']:.1f} MiB (repository {r['repo_mib']:.2f} MiB).")
        lat = r["push_to_applied_ms"]
        if lat:
            missed = sum(1 for v in lat if v is None)
            out.append(f"Push to one unit's path → applied with {r['units']} units ({len(lat)} pushes, each a second "
                       f"after the previous one was applied; a unit whose path a push left alone takes the revision without "
                       f"a sync; "
                       f"{missed} not seen within 60 s): p50 {percentile(lat, 0.5)} ms, p95 "
                       f"{percentile(lat, 0.95)} ms, max {percentile(lat, 1.0)} ms.")
    for key, peer in flux.items():
        out.append(f"Flux engine, {peer['units']} units: {peer['seconds']:.1f} s, peak {peer['rss_mib']:.0f} MiB, "
                   f"{peer['cpu_seconds']} CPU s, requests {peer['requests']}.")
    write_results("fleet", "\n".join(out),
                  {"small": small, "large": large, "flux": flux, "marginal_kib_per_unit": round(marginal, 1),
                   "load_before": load_before, "load_after": load_after})
    shutil.rmtree(tmp, ignore_errors=True)


def clear_fleet(prefix, units):
    """Deletes the ConfigMaps and Secrets of `units` units' namespaces (DELETE on each
    collection: the fleet's objects, its ApplySet parents and attestations)."""
    for k in range(min(units, FLEET_NAMESPACES)):
        for resource in ("configmaps", "secrets"):
            sh(["kubectl", "delete", "--raw", f"/api/v1/namespaces/{prefix}-{k}/{resource}"])


def fleet_attested(units):
    """`benches/run fleet-attested [UNITS]`: what `[provenance]` costs a daemon of UNITS units
    (default 10,000): one `gitward run` of the fleet without it, then one with an Ed25519 key,
    each on its own repository in the same cluster; all synced once, VmRSS at rest and peak
    (/proc), requests per unit (audit log). Writes target/bench/fleet-attested.md and .json."""
    tmp = tempfile.mkdtemp(prefix="gitward-fleet-attested-")
    key = os.path.join(tmp, "provenance.key")
    sh(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key])
    load_before = open("/proc/loadavg").read().split()[:3]
    plain = fleet_run(tmp, "fleetp", units)
    print(f"fleet without [provenance] {plain}", file=sys.stderr)
    # The first fleet's objects would be a foreign ApplySet to the second daemon, whose shared
    # watch keeps them (`benches/run 10000 foreign`): gone before it starts. An apiserver-only
    # cluster has no namespace controller, so each collection is deleted.
    clear_fleet("fleetp", units)
    attested = fleet_run(tmp, "fleeta", units, tables=f'\n[provenance]\nkey_file = "{key}"\n')
    print(f"fleet with [provenance] {attested}", file=sys.stderr)
    load_after = open("/proc/loadavg").read().split()[:3]
    out = [f"# [provenance]'s cost to a daemon of {units} units ({FLEET_OBJECTS} ConfigMaps each), same run\n",
           f"Load average (1, 5, 15 min) before: {' '.join(load_before)}; after: {' '.join(load_after)}; "
           f"{os.cpu_count()} CPUs.\n",
           "| daemon | all synced once, s | at rest MiB | peak MiB | requests per unit (first sync) |",
           "|---|---|---|---|---|"]
    for name, r in (("without [provenance]", plain), ("with [provenance]", attested)):
        out.append(f"| {name} | {r['all_synced_seconds']:.1f} | {r['rss_at_rest_mib']:.1f} | {r['peak_rss_mib']:.0f} "
                   f"| {per_unit(r['first_sync_requests'], r['units'])} |")
    out.append("")
    out.append(f"With ÷ without: all synced {attested['all_synced_seconds'] / plain['all_synced_seconds']:.2f}, "
               f"at rest {attested['rss_at_rest_mib'] / plain['rss_at_rest_mib']:.3f}, "
               f"peak {attested['peak_rss_mib'] / plain['peak_rss_mib']:.3f}.")
    write_results("fleet-attested", "\n".join(out), {"without": plain, "with": attested,
                                                       "load_before": load_before, "load_after": load_after})
    shutil.rmtree(tmp, ignore_errors=True)


def fleet_flux_alone(units):
    """`benches/run fleet-flux [UNITS]`: Flux's engine alone on UNITS units of the fleet's shape
    ([`fleet_flux`]); writes target/bench/fleet-flux.md and .json."""
    tmp = tempfile.mkdtemp(prefix="gitward-fleet-flux-")
    load_before = open("/proc/loadavg").read().split()[:3]
    r = fleet_flux(tmp, "fluxl", units)
    load_after = open("/proc/loadavg").read().split()[:3]
    text = (f"# Flux's engine alone: {units} units, {FLEET_OBJECTS} ConfigMaps each, {FLEET_NAMESPACES} namespace(s)\n\n"
            f"Load average before: {' '.join(load_before)}; after: {' '.join(load_after)}; {os.cpu_count()} CPUs.\n"
            f"{r['seconds']:.1f} s, peak {r['rss_mib']:.0f} MiB, {r['cpu_seconds']} CPU s, requests {r['requests']} ({per_unit(r['requests'], units)} per unit).")
    write_results("fleet-flux", text, dict(r, load_before=load_before, load_after=load_after))
    shutil.rmtree(tmp, ignore_errors=True)


def fleet_heap_run(tmp, prefix, units, tables=""):
    """`gitward run` of `units` fleet units under heaptrack, SIGKILLed at rest (every unit synced
    once, no sync for 2 s): what it still holds is heaptrack's "leaked" memory. Returns the
    data file and VmRSS at rest (KiB). `tables` is appended to the config (a [provenance])."""
    create_fleet_namespaces(prefix, units)
    _, bare = fleet_repo(tmp, prefix, units)
    config = fleet_config(tmp, prefix, bare, units, "run", tables=tables)
    log = os.path.join(tmp, f"{prefix}-daemon.log")
    data = os.path.join(tmp, f"{prefix}.heaptrack")
    tracer = subprocess.Popen(["heaptrack", "-o", data, GITWARD, "--log-format", "json", "run", "--config", config],
                              stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    wait_log(tracer, log, "every unit has synced once")
    log_quiet(log)
    children = open(f"/proc/{tracer.pid}/task/{tracer.pid}/children").read().split()
    daemon = next(int(c) for c in children if open(f"/proc/{c}/comm").read().startswith("gitward"))
    time.sleep(2)
    rss = rss_kib(daemon)
    os.kill(daemon, signal.SIGKILL)
    tracer.wait(timeout=600)
    files = [f for f in os.listdir(tmp) if f.startswith(f"{prefix}.heaptrack")]
    return os.path.join(tmp, files[0]), rss


ALLOCATION = re.compile(r"(^|::)(alloc|raw_vec|hashbrown|malloc|realloc|calloc|__rust|stdalloc|<std.*GlobalAlloc|<alloc::)")


def heap_sites(stacks):
    """Bytes of a heaptrack flame-graph file (`a;b;c BYTES`, root first) by the gitward
    function nearest each allocation, else the first frame below the allocator's own; frames
    demangled with c++filt (which reads Rust's v0 and legacy symbols)."""
    rows = []
    for line in open(stacks):
        frames, _, size = line.rstrip("\n").rpartition(" ")
        if frames and size.lstrip("-").isdigit():
            # A frame is `symbol (file)`; the list ends with a `;`.
            frames = [re.sub(r" \([^()]*\)$", "", f) for f in frames.split(";") if f.strip()]
            rows.append((frames, int(size)))
    names = sorted({f for frames, _ in rows for f in frames})
    demangled = sh(["c++filt"], input="\n".join(names) + "\n").stdout.splitlines()
    # Crate disambiguators ([0123abcd…]) and legacy symbol hashes (::h0123…) left out.
    escapes = {"$u7b$": "{", "$u7d$": "}", "$LT$": "<", "$GT$": ">", "$u20$": " ", "$C$": ",", "$RF$": "&",
               "$BP$": "*", "$u27$": "'", "..": "::"}
    plain = {}
    for n, d in zip(names, demangled):
        d = re.sub(r"::h[0-9a-f]{16}$", "", re.sub(r"\[[0-9a-f]{16}\]", "", d))
        for escape, text in escapes.items():
            d = d.replace(escape, text)
        plain[n] = d
    sites = {}
    for frames, size in rows:
        readable = [plain[f] for f in reversed(frames)]  # leaf first
        ours = next((f for f in readable if re.match(r"^<?gitward::", f)), None)
        site = ours or next((f for f in readable if not ALLOCATION.search(f)), readable[0])
        sites[site] = sites.get(site, 0) + size
    return sites


def fleet_heap(units):
    """`benches/run fleet-heap [UNITS]`: where a unit's memory goes. Two `gitward run`s of the
    fleet (UNITS / 5 and UNITS units, default 1,000) under heaptrack, each killed at rest; the
    difference of what they hold, call stack by call stack (`heaptrack_print --diff`), divided
    by the difference in units, is the heap each unit costs. Needs a gitward built with the
    system allocator (GITWARD_BENCH_GITWARD; benches/run builds one). Writes
    target/bench/fleet-heap.md and the whole report to fleet-heap.txt."""
    tmp = tempfile.mkdtemp(prefix="gitward-fleet-heap-")
    small_units = units // 5
    attested = os.environ.get("GITWARD_BENCH_HEAP_ATTESTED") == "1"
    if attested:
        # What [provenance] adds per unit: UNITS units without it, then UNITS with an Ed25519 key.
        key = os.path.join(tmp, "provenance.key")
        sh(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key])
        small_units = 0
        small, small_rss = fleet_heap_run(tmp, "heaps", units)
        clear_fleet("heaps", units)
        large, large_rss = fleet_heap_run(tmp, "heapl", units, tables=f'\n[provenance]\nkey_file = "{key}"\n')
    else:
        small, small_rss = fleet_heap_run(tmp, "heaps", small_units)
        large, large_rss = fleet_heap_run(tmp, "heapl", units)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    stacks = os.path.join(ROOT, "target/bench/fleet-heap.stacks")
    report = sh(["heaptrack_print", "-f", large, "-d", small, "--print-leaks", "1", "--print-peaks", "0",
                 "--print-allocators", "0", "--print-temporary", "0", "-n", "25",
                 "--flamegraph-cost-type", "leaked", "-F", stacks]).stdout
    open(os.path.join(ROOT, "target/bench/fleet-heap.txt"), "w").write(report)
    extra = units - small_units
    sites = heap_sites(stacks)
    total = re.search(r"^total memory leaked: (.*)$", report, re.M)
    what = (f"{units} units without [provenance] → with it" if attested
            else f"{small_units} → {units} units")
    lines = [f"# Heap per unit: {what}, {FLEET_OBJECTS} ConfigMaps each "
             f"(heaptrack, killed at rest)\n",
             f"VmRSS at rest: {small_rss / 1024:.0f} MiB → {large_rss / 1024:.0f} MiB "
             f"({(large_rss - small_rss) / extra:.1f} KiB per unit). Heap held at rest, the difference: "
             f"{sum(sites.values()) / extra / 1024:.1f} KiB per unit (heaptrack's total: "
             f"{total.group(1) if total else '?'}), by the gitward function nearest each allocation (the "
             f"first library function when no gitward frame is on the stack):\n",
             "| bytes per unit | allocated under |", "|---|---|"]
    for site, size in sorted(sites.items(), key=lambda kv: -kv[1])[:25]:
        lines.append(f"| {size / extra:.0f} | `{site[:160]}` |")
    write_results("fleet-heap", "\n".join(lines), {"units": units, "small_units": small_units,
                                                   "rss_kib": [small_rss, large_rss], "sites": sites})
    shutil.rmtree(tmp, ignore_errors=True)


FLEET_LEASE_SECONDS = 15    # [daemon.sharding] lease_duration in fleet-sharded (its default)


def fleet_sharded(units):
    """`benches/run fleet-sharded [UNITS]`: three sharded `gitward run` replicas sharing UNITS
    units (default 1,000); once every unit has been applied, the replica that applied the most
    is killed (SIGKILL). From the audit log: seconds from the kill until each of its units has
    all its objects applied again by another replica, against lease_duration + 5 s, and that
    no unit was applied by two replicas after the kill; then the killed replica starts again and
    takes its share back ([`fleet_rejoin`])."""
    tmp = tempfile.mkdtemp(prefix="gitward-fleet-sharded-")
    prefix, lease_ns = "fsh", "fleet-leases"
    sh(["kubectl", "create", "namespace", lease_ns])
    create_fleet_namespaces(prefix, units)
    work, bare = fleet_repo(tmp, prefix, units)
    mark = audit_len()
    replicas = {}
    for r in ("r0", "r1", "r2"):
        sharding = f'namespace = "{lease_ns}"\nlease_duration = "{FLEET_LEASE_SECONDS}s"\nidentity = "{r}"\n'
        config = fleet_config(tmp, prefix, bare, units, r, sharding=sharding)
        log = os.path.join(tmp, f"{r}.log")
        replicas[r] = (subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", config],
                                        stderr=open(log, "w")), log)
    started = time.time()
    unit_of = lambda name: name.rsplit("-", 1)[0]
    deadline = time.time() + 1800
    while True:
        time.sleep(5)
        writes = fleet_writes(mark, prefix)
        if len({name for name, _, _ in writes}) == units * FLEET_OBJECTS:
            break
        if time.time() > deadline or any(p.poll() is not None for p, _ in replicas.values()):
            sys.exit("fleet-sharded: not every object applied:\n" + open(replicas["r0"][1]).read()[-3000:])
    all_synced = max(at for _, _, at in writes) - started
    for _, log in replicas.values():
        log_quiet(log)
    rss = {r: round(rss_kib(p.pid) / 1024, 1) for r, (p, _) in replicas.items()}
    writes = fleet_writes(mark, prefix)
    holder = {}
    for name, agent, at in sorted(writes, key=lambda w: w[2]):
        holder[unit_of(name)] = agent
    by_agent = {}
    for unit, agent in holder.items():
        by_agent.setdefault(agent, []).append(unit)
    victim_agent = max(by_agent, key=lambda a: len(by_agent[a]))
    victim = re.search(r"\((\S+)\)", victim_agent).group(1)
    orphans = set(by_agent[victim_agent])
    after = audit_len()
    killed_at = time.time()
    replicas[victim][0].kill()
    replicas[victim][0].wait()
    deadline = killed_at + 300
    while True:
        time.sleep(2)
        later = [w for w in fleet_writes(after, prefix) if w[2] > killed_at]
        done = {}
        for name, agent, at in later:
            done.setdefault(unit_of(name), set()).add(name)
        if all(len(done.get(u, ())) == FLEET_OBJECTS for u in orphans) or time.time() > deadline:
            break
    taken = {}
    heirs = {}
    for name, agent, at in sorted(later, key=lambda w: w[2]):
        unit = unit_of(name)
        heirs.setdefault(unit, set()).add(agent)
        first = taken.setdefault(unit, {})
        first.setdefault(name, at)
    seconds = sorted(max(first.values()) - killed_at for u, first in taken.items()
                     if u in orphans and len(first) == FLEET_OBJECTS)
    missing = len(orphans) - len(seconds)
    twice = sorted(u for u, agents in heirs.items() if len(agents) > 1)
    strays = sorted(u for u in heirs if u not in orphans)
    held, lease_seconds = buckets_taken_over(mark, lease_ns, victim, killed_at)
    joined = fleet_rejoin(tmp, prefix, replicas, victim, victim_agent, orphans)
    for p, _ in replicas.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=120)
    bound = FLEET_LEASE_SECONDS + 5
    out = [f"# gitward fleet-sharded benchmark: {units} units over three replicas, lease_duration "
           f"{FLEET_LEASE_SECONDS} s\n",
           f"Every unit applied once {all_synced:.1f} s after the replicas started; at rest "
           f"{', '.join(f'{r} {m:.0f} MiB' for r, m in rss.items())} (VmRSS).",
           f"SIGKILL of {victim}, which held {len(orphans)} units: {len(seconds)} of them applied again "
           f"(every object) by another replica, the last {seconds[-1] if seconds else float('nan'):.1f} s after "
           f"the kill (p50 {percentile(seconds, 0.5) or float('nan'):.1f} s; bound lease_duration + 5 s = "
           f"{bound} s: {'met' if seconds and not missing and seconds[-1] <= bound else 'NOT met'}); "
           f"{missing} not applied within 300 s; units applied by two replicas after the kill: {len(twice)}; "
           f"units the killed replica did not hold applied after the kill: {len(strays)}.",
           f"Its {len(held)} bucket Leases: {len(lease_seconds)} taken over by another replica (its first write "
           f"of the Lease), the last {lease_seconds[-1] if lease_seconds else float('nan'):.1f} s after the kill "
           f"(bound lease_duration + 5 s = {bound} s: "
           f"{'met' if held and len(lease_seconds) == len(held) and lease_seconds[-1] <= bound else 'NOT met'}).",
           f"{victim} started again: {joined['taken_back']} of its {len(orphans)} units applied by it (every "
           f"object), the last {joined['last_seconds']:.1f} s after its start; units it applied that were not its "
           f"share: {joined['strays']}; units whose previous holder wrote after {victim}'s first write of them "
           f"(applied by two replicas at once): {joined['overlaps']}; units of its share it did not apply within "
           f"300 s: {joined['not_taken_back']}."]
    text = "\n".join(out)
    print(text)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    open(os.path.join(ROOT, "target/bench/fleet-sharded.md"), "w").write(text + "\n")
    json.dump({"units": units, "all_synced_seconds": all_synced, "rss_mib": rss, "victim": victim,
               "orphans": len(orphans), "takeover_seconds": seconds, "missing": missing, "twice": twice,
               "buckets_held": len(held), "bucket_takeover_seconds": lease_seconds,
               "strays": strays, "rejoin": joined},
              open(os.path.join(ROOT, "target/bench/fleet-sharded.json"), "w"), indent=2)
    if os.environ.get("GITWARD_BENCH_KEEP"):
        print(f"replica logs kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def fleet_rejoin(tmp, prefix, replicas, victim, victim_agent, share):
    """Starts the killed replica `victim` again (same identity, config and state directory) and
    waits (at most 300 s) until it has applied every object of each unit of its rendezvous
    `share` again. From the audit log: how many it took back and when, units outside its
    share it applied, units whose previous holder wrote after the returning replica's first
    write of them."""
    mark = audit_len()
    config = os.path.join(tmp, prefix, f"{victim}.toml")
    log = os.path.join(tmp, f"{victim}-rejoin.log")
    started = time.time()
    replicas[victim] = (subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", config],
                                         stderr=open(log, "w")), log)
    unit_of = lambda name: name.rsplit("-", 1)[0]
    deadline = started + 300
    while True:
        time.sleep(2)
        writes = fleet_writes(mark, prefix)
        mine = {}
        for name, agent, _ in writes:
            if agent == victim_agent:
                mine.setdefault(unit_of(name), set()).add(name)
        back = [u for u in share if len(mine.get(u, ())) == FLEET_OBJECTS]
        if len(back) == len(share) or time.time() > deadline:
            break
    time.sleep(FLEET_LEASE_SECONDS)  # any late write of a previous holder would be in by now
    writes = sorted(fleet_writes(mark, prefix), key=lambda w: w[2])
    first_mine, overlaps, last = {}, set(), 0.0
    for name, agent, at in writes:
        unit = unit_of(name)
        if agent == victim_agent:
            first_mine.setdefault(unit, at)
            last = max(last, at - started)
        elif unit in first_mine:
            overlaps.add(unit)
    strays = sorted(u for u in first_mine if u not in share)
    return {"taken_back": len(back), "last_seconds": round(last, 1), "strays": len(strays),
            "overlaps": len(overlaps), "not_taken_back": len(share) - len(back)}


# --- load: 50 units, 100 pushes a minute -------------------------

LOAD_UNITS = 50
LOAD_OBJECTS = 200        # ConfigMaps per unit, in one file (as tests/daemon/load.rs)
LOAD_PUSHES = 100
LOAD_SPREAD = 60.0        # seconds over which the pushes are made


def load_objects(unit, rev):
    docs = []
    for j in range(LOAD_OBJECTS):
        value = f"r{rev}" if j == 0 else f"u{unit}"
        docs.append(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c-{j}\ndata:\n  value: \"{value}\"\n")
    return "".join(docs)


def load_scenario():
    """`benches/run load`: one `gitward run` with 50 units (a repository each, 200 ConfigMaps
    in one file), then 100 pushes spread evenly over 60 s, round robin over the units (each
    push changes one ConfigMap). Push to applied: from `git push` returning to the first
    PATCH of that ConfigMap the API server completed afterwards (audit log; nothing else
    writes it: no resync, no drift). Writes target/bench/load.md and load.json."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-load-")
    works, text = [], ['[daemon]\nstate_dir = "%s/state"\ninterval = "1h"\nresync_interval = "1h"\n' % tmp]
    for u in range(LOAD_UNITS):
        ns = f"load-{u}"
        sh(["kubectl", "create", "namespace", ns])
        work, bare = os.path.join(tmp, f"u{u}", "work"), os.path.join(tmp, f"u{u}", "repo.git")
        os.makedirs(work)
        open(os.path.join(work, "objects.yaml"), "w").write(load_objects(u, 0))
        sh(["git", "init", "-q", "--bare", "--initial-branch=main", bare])
        sh(["git", "init", "-q", "--initial-branch=main", work])
        commit(work, bare, "r0")
        works.append((work, bare))
        text.append(f'[[sync]]\nname = "load-{u}"\nrepo = "{bare}"\nnamespace = "{ns}"\nhealth_timeout = "0s"\n')
    config = os.path.join(tmp, "load.toml")
    open(config, "w").write("\n".join(text))
    log = os.path.join(tmp, "load-daemon.log")
    daemon = subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", config], stderr=open(log, "w"))
    wait_log(daemon, log, "every unit has synced once", seconds=900)
    log_quiet(log)
    load_before = open("/proc/loadavg").read().split()[:3]
    mark = audit_len()
    started = time.time()
    pushed = []
    for i in range(LOAD_PUSHES):
        at = started + i * LOAD_SPREAD / LOAD_PUSHES
        time.sleep(max(0.0, at - time.time()))
        u = i % LOAD_UNITS
        work, bare = works[u]
        open(os.path.join(work, "objects.yaml"), "w").write(load_objects(u, i + 1))
        commit(work, bare, f"r{i + 1}")
        pushed.append((u, time.time()))
    spread = time.time() - started
    log_quiet(log, 2.0, deadline=600)
    time.sleep(2.0)  # the audit backend writes asynchronously
    rss = at_rest_kib(daemon)
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=120)
    load_after = open("/proc/loadavg").read().split()[:3]
    patches = {}
    for e in audit_events(mark):
        ref = e.get("objectRef") or {}
        if (e["verb"] == "patch" and ref.get("resource") == "configmaps" and ref.get("name") == "c-0"
                and e.get("userAgent", "").startswith("gitward") and e.get("responseStatus", {}).get("code") == 200):
            patches.setdefault(ref.get("namespace"), []).append(stamp(e["stageTimestamp"]))
    latencies = []
    for u, at in pushed:
        after = [t for t in patches.get(f"load-{u}", []) if t >= at]
        latencies.append(round((min(after) - at) * 1000, 1) if after else None)
    missed = sum(v is None for v in latencies)
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    out = [f"# gitward load: {LOAD_UNITS} units × {LOAD_OBJECTS} ConfigMaps, {LOAD_PUSHES} pushes over "
           f"{spread:.0f} s\n",
           f"Load average (1, 5, 15 min) before: {' '.join(load_before)}; after: {' '.join(load_after)}; "
           f"{os.cpu_count()} CPUs.\n",
           f"Push to applied, from `git push` returning to the API server completing the PATCH of the changed "
           f"ConfigMap (audit log): p50 {p50} ms, p95 {p95} ms, max {percentile(latencies, 1.0)} ms; "
           f"{missed} of {len(latencies)} never applied. Target p95 < 2,000 ms. VmRSS at rest after: "
           f"{rss / 1024:.0f} MiB."]
    write_results("load", "\n".join(out),
                  {"units": LOAD_UNITS, "objects_per_unit": LOAD_OBJECTS, "pushes": LOAD_PUSHES,
                   "spread_seconds": round(spread, 1), "push_to_applied_ms": latencies,
                   "load_before": load_before, "load_after": load_after, "rss_at_rest_mib": round(rss / 1024, 1)})
    shutil.rmtree(tmp, ignore_errors=True)


# --- scale: every issue-23 scenario, one table (benches/run scale) ---------------------------

SCALE_SCENARIOS = ["push", "load", "warm", "unit", "fleet", "fleet-sharded"]


def scale_report():
    """`benches/run scale` ends here (no cluster): reads the JSON each scenario of the run
    wrote (push, load, warm, unit, fleet, fleet-sharded; benches/run removes the old ones
    first, so a missing one fails) and writes target/bench/scale.md and scale.json: one row
    per fleet-scale target with the figure, the target and whether it is met."""
    bench = os.path.join(ROOT, "target/bench")
    r = {name: json.load(open(os.path.join(bench, f"{name}.json"))) for name in SCALE_SCENARIOS}
    rows = []

    def row(what, figure, target, met):
        rows.append({"what": what, "figure": figure, "target": target, "met": bool(met)})

    during = r["push"]["during_resync_ms"]
    p50, p95 = percentile(during, 0.5), percentile(during, 0.95)
    missed = sum(v is None for v in during)
    row(f"push → applied during a forced resync, {r['push']['objects']} objects ({len(during)} pushes)",
        f"p50 {p50} ms, p95 {p95} ms ({missed} not seen)", "p50 < 100 ms, p95 < 250 ms",
        not missed and p50 < 100 and p95 < 250)
    lat = r["load"]["push_to_applied_ms"]
    missed = sum(v is None for v in lat)
    row(f"push → applied, {r['load']['units']} units, {len(lat)} pushes in {r['load']['spread_seconds']:.0f} s",
        f"p50 {percentile(lat, 0.5)} ms, p95 {percentile(lat, 0.95)} ms ({missed} never applied)",
        "p95 < 2,000 ms", not missed and percentile(lat, 0.95) < 2000)
    large, small = r["fleet"]["large"], r["fleet"]["small"]
    row(f"{large['units']} units on one replica: all synced once", f"{large['all_synced_seconds']:.1f} s "
        f"({large['all_synced_seconds'] / FLUX_FLEET_SECONDS:.2f}× Flux's published {FLUX_FLEET_SECONDS} s for "
        f"1,000 × 4 objects)", "reported against Flux", large["all_synced_seconds"] < FLUX_FLEET_SECONDS)
    row(f"{large['units']} units: daemon at rest", f"{large['rss_at_rest_mib']:.0f} MiB", "< 128 MiB",
        large["rss_at_rest_mib"] < 128)
    row(f"marginal memory per unit, {small['units']} → {large['units']} units",
        f"{r['fleet']['marginal_kib_per_unit']:.0f} KiB", "about 100 KiB (≤ 100)", r["fleet"]["marginal_kib_per_unit"] <= 100)
    row(f"{large['units']} units: state directory", f"{large['state_dir_mib']:.1f} MiB (repository "
        f"{large['repo_mib']:.2f} MiB)", "about one repository (≤ 2×)", large["state_dir_mib"] <= 2 * large["repo_mib"])
    fl = large["push_to_applied_ms"]
    missed = sum(v is None for v in fl)
    row(f"{large['units']} units: push to one unit's path → applied ({len(fl)} pushes)",
        f"p50 {percentile(fl, 0.5)} ms, p95 {percentile(fl, 0.95)} ms ({missed} not seen)", "p95 < 250 ms",
        fl and not missed and percentile(fl, 0.95) < 250)
    u = r["unit"]
    gw, floor, bodies = (u["results"][k] for k in ("gitward", *UNIT_FLOORS.values()))
    row(f"one unit of {u['objects']} objects: members record", f"{u['pieces']} pieces beside the parent",
        "past 1 MiB, read whole, written crash-safe", u["pieces"] > 0)
    per_object = (u["rss_kib"] - u["small_rss_kib"]) / max(1, u["objects"] - u["small_objects"])
    row(f"{u['objects']} objects: marginal memory per tracked object", f"{per_object:.2f} KiB", "< 2 KiB",
        per_object < 2)
    row(f"{u['objects']} objects: daemon at rest", f"{u['rss_kib'] / 1024:.0f} MiB", "< 200 MiB",
        u["rss_kib"] / 1024 < 200)
    ratio = gw["seconds"] / floor["seconds"]
    row(f"{u['objects']} objects: cold sync ÷ the floor (each in a fresh cluster)",
        f"{ratio:.2f}× ({gw['seconds']:.1f} s against {floor['seconds']:.1f} s; API server CPU "
        f"{gw['server_cpu_seconds']:.0f} against {floor['server_cpu_seconds']:.0f} s; ÷ the floor sending "
        f"gitward's bodies {gw['seconds'] / bodies['seconds']:.2f}×)", "≤ 1.15×", ratio <= 1.15)
    w = r["warm"]["median"]
    ratio, with_bodies = w["gitward"] / w["floor"], w["gitward"] / w[UNIT_FLOORS["fbodies"]]
    c = r["warm"].get("server_cpu_median")
    server_cpu = (f"; API server CPU s: {c['gitward']:.1f}, the floor {c['floor']:.1f}, with gitward's bodies "
                  f"{c[UNIT_FLOORS['fbodies']]:.1f}") if c else ""
    row("warm resync at 10,000 objects ÷ the floor (medians of 5, taking turns)",
        f"{ratio:.2f}× ({w['gitward']:.2f} s against {w['floor']:.2f} s; ÷ the floor sending gitward's bodies "
        f"{with_bodies:.2f}×{server_cpu})", "≤ 1.10×", ratio <= 1.10)
    sh_ = r["fleet-sharded"]
    bound = FLEET_LEASE_SECONDS + 5
    last = max(sh_["takeover_seconds"]) if sh_["takeover_seconds"] else None
    row(f"three replicas, {sh_['units']} units: the killed replica's {sh_['orphans']} units applied again",
        f"last after {last:.1f} s, {sh_['missing']} missing, {len(sh_['twice'])} applied twice, "
        f"{len(sh_['strays'])} strays" if last is not None else "none applied again",
        f"≤ lease_duration + 5 s = {bound} s, none twice",
        last is not None and last <= bound and not sh_["missing"] and not sh_["twice"])
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    when = datetime.date.today().isoformat()
    out = [f"# Fleet scale: one run of `benches/run scale`, {when}, {commit}"
           f"{' (with uncommitted changes)' if dirty else ''}, {os.cpu_count()} CPUs\n",
           "| target | figure | wanted | met |", "|---|---|---|---|"]
    out += [f"| {x['what']} | {x['figure']} | {x['target']} | {'yes' if x['met'] else '**no**'} |" for x in rows]
    out.append("")
    out.append("Each scenario ran in a cluster of its own; its own report is in target/bench/<scenario>.md.")
    write_results("scale", "\n".join(out), {"date": when, "commit": commit, "dirty": bool(dirty), "rows": rows})


def foreign(n):
    """`benches/run N foreign`: what the objects of an ApplySet no unit of a daemon holds cost
    it. `gitward run` with one unit of N objects rests alone (its own peer, in the same run),
    then again, from a fresh start, beside another ApplySet of N objects that a one-shot
    `gitward sync` made (as kubectl --applyset or another team's gitward would); VmRSS from
    /proc once at rest. The difference over N is the cost of one foreign member."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-")
    install_crd(tmp)
    for peer in ("gitward", "other"):
        for k in range(NAMESPACES):
            sh(["kubectl", "create", "namespace", f"{peer}-{k}"])
    _, bare, count = make_repo(tmp, "gitward", n, crd=False)
    _, other_bare, other_count = make_repo(tmp, "other", n, crd=False)
    figures = {}
    for case in ("alone", "beside"):
        if case == "beside":
            timed([GITWARD, "sync", "--config", write_config(tmp, other_bare, "other")])
        daemon, log = start_daemon(tmp, bare, "gitward", health_timeout="0s")
        first_sync_ended(daemon, log)
        figures[case] = at_rest_kib(daemon)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
        print(f"{case:8} {figures[case]} KiB", file=sys.stderr)
    per_member = (figures["beside"] - figures["alone"]) * 1024 / other_count
    text = (f"gitward run with one unit of {count} objects, at rest (VmRSS): alone "
            f"{figures['alone'] / 1024:.1f} MiB; beside a foreign ApplySet of {other_count} objects "
            f"{figures['beside'] / 1024:.1f} MiB ({figures['beside'] / figures['alone']:.2f}x); "
            f"{per_member:.0f} bytes per foreign member")
    write_results("foreign", text, {"objects": count, "foreign": other_count, "alone_kib": figures["alone"],
                                    "beside_kib": figures["beside"], "bytes_per_foreign_member": per_member})


ISOLATION_HUNG = [0, 6, 50]
ISOLATION_PUSHES = 10


def hung_listener():
    """A loopback listener that accepts every connection and never answers (a hung git server);
    its port. The accepted sockets are kept open for the life of the process."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(256)
    held = []

    def accept():
        while True:
            held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1]


def isolation_run(tmp, hung):
    """One `gitward run` (interval 5 s) of a healthy unit on a local repository beside `hung`
    units whose remote never answers; ms from `git push` returning to a watch of the healthy
    ConfigMap seeing each of ISOLATION_PUSHES pushes, one a second."""
    ns = f"isolation-{hung}"
    sh(["kubectl", "create", "namespace", ns])
    run = os.path.join(tmp, f"hung-{hung}")
    work, bare = os.path.join(run, "work"), os.path.join(run, "repo.git")
    os.makedirs(work)
    path = os.path.join(work, "cm.yaml")
    cm = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: healthy\ndata:\n  index: "push-0"\n'
    open(path, "w").write(cm)
    sh(["git", "init", "-q", "--bare", "--initial-branch=main", bare])
    sh(["git", "init", "-q", "--initial-branch=main", work])
    commit(work, bare, "push-0")
    port = hung_listener()
    text = [f'[daemon]\nstate_dir = "{run}/state"\ninterval = "5s"\nresync_interval = "1h"\nself_heal = false\n',
            f'[[sync]]\nname = "healthy"\nrepo = "{bare}"\nnamespace = "{ns}"\nhealth_timeout = "0s"\n']
    for i in range(hung):
        text.append(f'[[sync]]\nname = "hung-{i}"\nrepo = "http://127.0.0.1:{port}/r{i}.git"\nnamespace = "{ns}"\n')
    config = os.path.join(run, "gitward.toml")
    open(config, "w").write("\n".join(text))
    log = os.path.join(run, "daemon.log")
    started = time.monotonic()
    daemon = subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", config], stderr=open(log, "w"))
    first = None
    while first is None and time.monotonic() < started + 120:
        got = subprocess.run(["kubectl", "get", "configmap", "healthy", "-n", ns, "-o", "name"], capture_output=True)
        first = time.monotonic() if got.returncode == 0 else None
    # A watch of an object that does not exist yet ends at once: started once it does.
    watch = Watch(ns, "healthy")
    latencies = []
    for k in range(1, ISOLATION_PUSHES + 1):
        time.sleep(1.0)
        latencies.append(push_and_watch(work, bare, path, k, watch))
    watch.stop()
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=120)
    return {"hung": hung, "first_sync_s": round(first - started, 2) if first else None,
            "push_to_applied_ms": latencies}


def isolation_scenario():
    """`benches/run isolation`: push to applied of a healthy unit beside 0, 6 and 50 units whose
    git remote accepts connections and never answers (one daemon each, `interval = "5s"`).
    Writes target/bench/isolation.md and isolation.json."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-isolation-")
    runs = [isolation_run(tmp, hung) for hung in ISOLATION_HUNG]
    out = ["# gitward isolation: a healthy unit's pushes beside hung git remotes\n",
           f"{ISOLATION_PUSHES} pushes a second apart to a unit on a local repository; push to applied from "
           "`git push` returning to a `kubectl get --watch` of its ConfigMap seeing the new value. "
           f"{os.cpu_count()} CPUs.\n",
           "| hung remotes beside it | first sync after start | push p50 | push p95 | not applied in 60 s |",
           "|---|---|---|---|---|"]
    for r in runs:
        lat = r["push_to_applied_ms"]
        missed = sum(v is None for v in lat)
        out.append(f"| {r['hung']} | {r['first_sync_s']} s | {percentile(lat, 0.5)} ms | {percentile(lat, 0.95)} ms "
                   f"| {missed} |")
    write_results("isolation", "\n".join(out), runs)


def warm_up(tmp, n):
    """Not measured: the floor creates the workload in namespaces of its own, so the first
    measured cold sync does not also pay for the fresh apiserver's first writes of every kind."""
    for k in range(NAMESPACES):
        sh(["kubectl", "create", "namespace", f"warmup-{k}"])
    warm_work, warm_bare, _ = make_repo(tmp, "warmup", n)
    runner(tmp, "warmup", warm_work, warm_bare)()


# The object scenarios, in order: (name, the edit of the work tree before it, or None).
SCENARIOS = [("cold sync", None), ("no-op resync", None),
             ("one object changed", lambda w, b, p: change_one(w, b, p, "changed")),
             ("prune one namespace", remove_namespace)]


def attested(n):
    """`benches/run N attested`: what `[provenance]` costs. gitward with an Ed25519 key (an
    attestation signed, kept in its ConfigMap and journalled after each sync that changed
    anything) against the same gitward without, and the floor, on the four object scenarios in
    one run. Writes target/bench/attested.md and .json."""
    tmp = tempfile.mkdtemp(prefix="gitward-bench-")
    install_crd(tmp)
    key = os.path.join(tmp, "provenance.key")
    sh(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key])
    peers = ["gitward", "attested", "floor"]
    repos, runs, count = {}, {}, 0
    for peer in peers:
        for k in range(NAMESPACES):
            sh(["kubectl", "create", "namespace", f"{peer}-{k}"])
        # Without the CRD (install_crd made it): one ApplySet would own it, and the other refuse it.
        work, bare, count = make_repo(tmp, peer, n, crd=False)
        repos[peer] = (work, bare)
        if peer == "attested":
            config = write_config(tmp, bare, peer)
            with open(config, "a") as f:
                f.write(f'\n[provenance]\nkey_file = "{key}"\n')
            runs[peer] = lambda config=config: timed([GITWARD, "sync", "--config", config])
        else:
            runs[peer] = runner(tmp, peer, work, bare)
    warm_up(tmp, n)
    load_before = open("/proc/loadavg").read().split()[:3]
    scenarios = SCENARIOS
    results = {}
    for name, edit in scenarios:
        results[name] = {}
        for peer in peers:
            if edit:
                edit(*repos[peer], peer)
            results[name][peer] = runs[peer]()
            print(f"{name:22} {peer:8} {results[name][peer]}", file=sys.stderr)
    load_after = open("/proc/loadavg").read().split()[:3]
    out = [f"# [provenance]'s cost: {count} objects over {NAMESPACES} namespaces, same apiserver, same run\n",
           f"Load average (1, 5, 15 min) before: {' '.join(load_before)}; after: {' '.join(load_after)}; "
           f"{os.cpu_count()} CPUs.\n",
           "| scenario | gitward s | attested s | floor s | attested ÷ gitward | gitward ÷ floor | attested ÷ floor "
           "| requests, gitward → attested |",
           "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        g, a, f = (r[p]["seconds"] for p in peers)
        verbs = lambda p: ", ".join(f"{v} {c}" for v, c in r[p]["requests"].items())
        out.append(f"| {name} | {g:.3f} | {a:.3f} | {f:.3f} | {a / g:.2f} | {g / f:.2f} | {a / f:.2f} "
                   f"| {verbs('gitward')} → {verbs('attested')} |")
    write_results("attested", "\n".join(out), results)


# --- preview: pull-request previews of a 1,000-unit repository (benches/run preview) ---------

PREVIEW_UNITS = 1000
PREVIEW_PULLS = int(os.environ.get("GITWARD_BENCH_PREVIEW_PULLS", "10"))
PREVIEW_DURING = int(os.environ.get("GITWARD_BENCH_PREVIEW_DURING", "5"))
PREVIEW_CHANGED = 10        # units a pull request (and a push to main) changes


def set_index(work, prefix, units, j, value):
    """Sets `index` of ConfigMap `j` in each of `units` to `value` in the work tree."""
    for u in units:
        path = os.path.join(work, "units", f"{prefix}-{u:04d}", f"cm-{j}.yaml")
        text = open(path).read()
        open(path, "w").write(re.sub(r'index: "[^"]*"', f'index: "{value}"', text, count=1))


def main_push(daemon, log, work, bare, prefix, units, j, value):
    """Commits `value` into ConfigMap `j` of `units`, pushes main and sends its webhook; seconds
    from the push returning to the API server completing the last of their PATCHes (audit log),
    None past 120 s."""
    set_index(work, prefix, units, j, value)
    sh(GIT + ["commit", "-q", "-a", "-m", f"main {value}"], cwd=work)
    sha = sh(GIT + ["rev-parse", "HEAD"], cwd=work).stdout.strip()
    mark = audit_len()
    sh(GIT + ["push", "-q", bare, "main"], cwd=work)
    pushed = time.time()
    webhook(daemon.port, after=sha)
    want = {f"{prefix}-{u:04d}-{j}" for u in units}
    deadline = time.time() + 120
    while time.time() < deadline and daemon.poll() is None:
        first = {}
        for name, _, at in fleet_writes(mark, prefix):
            if name in want and at >= pushed:
                first.setdefault(name, at)
        if len(first) == len(want):
            return round(max(first.values()) - pushed, 3)
        time.sleep(0.1)
    return None


def open_pull(forge, daemon, work, bare, prefix, pr, units, value):
    """A pull request's head: a commit on main's tip setting ConfigMap 1's `index` of `units` to
    `value`, pushed to refs/pull/<pr>/head (as the forge writes it), told to the forge, then the
    signed push webhook of that ref. The head, the wall time the push returned, the units the
    webhook triggered."""
    sh(GIT + ["checkout", "-q", "-B", f"pr-{pr}", "main"], cwd=work)
    set_index(work, prefix, units, 1, value)
    sh(GIT + ["commit", "-q", "-a", "-m", f"pull request {pr}"], cwd=work)
    sha = sh(GIT + ["rev-parse", "HEAD"], cwd=work).stdout.strip()
    sh(GIT + ["push", "-q", "-f", bare, f"HEAD:refs/pull/{pr}/head"], cwd=work)
    pushed = time.time()
    sh(GIT + ["checkout", "-q", "main"], cwd=work)
    forge.pull(pr, sha)
    triggered = webhook(daemon.port, f"refs/pull/{pr}/head")
    return sha, pushed, triggered


def wait_final(forge, daemon, log, sha, seconds=900):
    """(wall time, state) of `sha`'s success or failure status; exits past `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline and daemon.poll() is None:
        done = forge.final(sha)
        if done:
            return done
        time.sleep(0.05)
    sys.exit(f"no final status on {sha}:\n" + open(log).read()[-3000:])


def preview_scenario():
    """`benches/run preview`: `gitward run` of 1,000 units on one repository (fleet_repo) with a
    `[[preview]]` on a recording forge (benches/forge.py, `interval = "1h"`: webhooks alone drive
    rounds). Peer first: PREVIEW_PULLS pushes to main, each changing ConfigMap 0 of 10 units,
    push to applied (audit log). Then PREVIEW_PULLS pull requests in sequence, each changing
    ConfigMap 1 of 10 other units: from the push of refs/pull/<n>/head returning to the forge
    recording the head's final status. Then PREVIEW_DURING more, each with a push to main of
    the same 10 units made once the head's `pending` status is posted: that push's push to
    applied against the peer's. Writes target/bench/preview.md and preview.json."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from forge import REPO, Forge
    tmp = tempfile.mkdtemp(prefix="gitward-bench-preview-")
    prefix = "pv"
    forge = Forge(tmp)
    create_fleet_namespaces(prefix, PREVIEW_UNITS)
    work, bare = fleet_repo(tmp, prefix, PREVIEW_UNITS)
    port = 19000 + (os.getpid() + 7) % 1000
    tables = (f'[[preview]]\nforge = "github"\napi_url = "{forge.url}"\nrepository = "{REPO}"\n'
              f'token_file = "{forge.token_file}"\ninterval = "1h"\n')
    config = fleet_config(tmp, prefix, bare, PREVIEW_UNITS, "run", listen=f"127.0.0.1:{port}",
                          webhook_secret=True, tables=tables)
    log = os.path.join(tmp, f"{prefix}-daemon.log")
    started = time.time()
    daemon = subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", config], stderr=open(log, "w"))
    daemon.port = port
    wait_log(daemon, log, "every unit has synced once")
    ready = time.time() - started
    log_quiet(log)
    load_before = open("/proc/loadavg").read().split()[:3]
    cpu_before = sum(int(x) for x in open(f"/proc/{daemon.pid}/stat").read().split(") ")[1].split()[11:13])
    tick = os.sysconf("SC_CLK_TCK")
    applied = []
    for k in range(PREVIEW_PULLS):
        units = range(PREVIEW_CHANGED * k, PREVIEW_CHANGED * (k + 1))
        applied.append(main_push(daemon, log, work, bare, prefix, units, 0, f"main-{k}"))
        print(f"push to main {k}: {applied[-1]} s", file=sys.stderr)
        log_quiet(log, 1.0)
    pulls, during = [], []
    for k in range(PREVIEW_PULLS + PREVIEW_DURING):
        pr = k + 1
        units = range(500 + PREVIEW_CHANGED * k, 500 + PREVIEW_CHANGED * (k + 1))
        sha, pushed, triggered = open_pull(forge, daemon, work, bare, prefix, pr, units, f"pr-{pr}")
        sync = None
        if k >= PREVIEW_PULLS:
            while not forge.statuses(sha) and time.time() < pushed + 300:
                time.sleep(0.02)
            sync = main_push(daemon, log, work, bare, prefix, units, 1, f"during-{pr}")
            during.append(sync)
        at, state = wait_final(forge, daemon, log, sha)
        states = forge.statuses(sha)
        pending = states[0][0] - pushed if states else None
        pulls.append({"pr": pr, "head": sha, "seconds": round(at - pushed, 3), "state": state,
                      "pending_seconds": round(pending, 3) if pending is not None else None,
                      "states": [s for _, s in states], "webhook_triggered": len(triggered),
                      "main_push_during_seconds": sync})
        print(f"pull request {pr}: {pulls[-1]}", file=sys.stderr)
        log_quiet(log, 1.0)
    cpu = (sum(int(x) for x in open(f"/proc/{daemon.pid}/stat").read().split(") ")[1].split()[11:13])
           - cpu_before) / tick
    load_after = open("/proc/loadavg").read().split()[:3]
    rss = rss_kib(daemon.pid)
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=120)
    forge.close()
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    shutil.copy(log, os.path.join(ROOT, "target/bench/preview-daemon.log"))
    alone = [p["seconds"] for p in pulls[:PREVIEW_PULLS]]
    p50, p95, worst = percentile(alone, 0.5), percentile(alone, 0.95), percentile(alone, 1.0)
    a50 = percentile(applied, 0.5)
    comments = sum(1 for e in forge.events if e[1] == "comment created")
    edits = sum(1 for e in forge.events if e[1] == "comment edited")
    out = [f"# gitward preview: {PREVIEW_UNITS} units on one repository, {PREVIEW_CHANGED} changed per pull request\n",
           f"Load average (1, 5, 15 min) before: {' '.join(load_before)}; after: {' '.join(load_after)}; "
           f"{os.cpu_count()} CPUs. Every unit synced once {ready:.0f} s after the start. "
           f"Daemon CPU over the pushes and previews: {cpu:.0f} s; VmRSS after: {rss / 1024:.0f} MiB.\n",
           f"Preview, from the push of refs/pull/<n>/head returning (the forge told its head, then a signed "
           f"push webhook of that ref) to the forge recording the head's final status ({len(alone)} pull requests "
           f"in sequence; states {sorted({p['state'] for p in pulls})}; {comments} comments created, {edits} "
           f"edited): p50 {p50} s, p95 {p95} s, max {worst} s. Target p95 < 30 s. Push to pending status: "
           f"p50 {percentile([p['pending_seconds'] for p in pulls[:PREVIEW_PULLS]], 0.5)} s.",
           f"Peer, the same daemon: a push to main changing {PREVIEW_CHANGED} units, then its webhook, to the "
           f"API server completing the last of their PATCHes (audit log; {len(applied)} pushes): p50 {a50} s, "
           f"p95 {percentile(applied, 0.95)} s, max {percentile(applied, 1.0)} s. Preview ÷ push to applied, p50: "
           f"{(p50 / a50) if p50 and a50 else float('nan'):.1f}."]
    if during:
        out.append(f"A push to main of the same {PREVIEW_CHANGED} units made while their pull request's preview "
                   f"runs (its `pending` status posted; {len(during)} pushes): push to applied p50 "
                   f"{percentile(during, 0.5)} s, max {percentile(during, 1.0)} s (alone: p50 {a50} s); those "
                   f"previews: {', '.join(str(p['seconds']) for p in pulls[PREVIEW_PULLS:])} s.")
    write_results("preview", "\n".join(out),
                  {"units": PREVIEW_UNITS, "changed_per_pull": PREVIEW_CHANGED, "load_before": load_before,
                   "load_after": load_after, "ready_seconds": round(ready, 1), "daemon_cpu_seconds": cpu,
                   "pulls": pulls, "push_to_applied_seconds": applied, "push_during_preview_seconds": during,
                   "forge_events": forge.events, "forge_requests": forge.requests})
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    if sys.argv[1] == "scale-report":
        return scale_report()
    if sys.argv[1] == "fleet":
        return fleet(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    if sys.argv[1] == "fleet-heap":
        return fleet_heap(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    if sys.argv[1] == "fleet-attested":
        return fleet_attested(int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
    if sys.argv[1] == "fleet-flux":
        return fleet_flux_alone(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    if sys.argv[1] == "fleet-sharded":
        return fleet_sharded(int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
    if sys.argv[1] == "mirror":
        return mirror_scenario()
    if sys.argv[1] == "load":
        return load_scenario()
    if sys.argv[1] == "isolation":
        return isolation_scenario()
    if sys.argv[1] == "preview":
        return preview_scenario()
    # `benches/run push`: push to applied during a forced resync at 10,000 objects.
    if sys.argv[1:2] == ["push"]:
        return push_main()
    n = int(sys.argv[1])
    # `benches/run N warm`, `benches/run N unit`: one scenario alone (see warm_only, one_unit).
    if sys.argv[2:] == ["warm"]:
        return warm_only(n)
    if sys.argv[2:] == ["unit"]:
        return one_unit(n)
    if sys.argv[2:] == ["foreign"]:
        return foreign(n)
    if sys.argv[2:] == ["attested"]:
        return attested(n)
    if sys.argv[2:3] == ["unit-floor"]:
        return unit_floor(n, sys.argv[3])
    tmp = tempfile.mkdtemp(prefix="gitward-bench-")
    install_crd(tmp)
    # `benches/run N daemon`: only gitward's daemon figures (memory at rest, push to applied),
    # for N = 10,000 where the four peers' scenarios take long.
    daemon_only = sys.argv[2:] == ["daemon"]
    peers = ["gitward", "floor"] if daemon_only else PEERS
    repos, runs, count = {}, {}, 0
    for peer in peers:
        for k in range(NAMESPACES):
            sh(["kubectl", "create", "namespace", f"{peer}-{k}"])
        work, bare, count = make_repo(tmp, peer, n)
        repos[peer] = (work, bare)
        runs[peer] = runner(tmp, peer, work, bare)
    # Warm-up, not measured: the floor creates the same workload in namespaces of its own, so
    # the first measured cold sync (gitward's: it runs first) does not also pay for the fresh
    # apiserver's first writes of every kind.
    if not daemon_only:
        warm_up(tmp, n)
    load_before = open("/proc/loadavg").read().split()[:3]
    results = {}
    scenarios = SCENARIOS
    for name, edit in [] if daemon_only else scenarios:
        results[name] = {}
        for peer in PEERS:
            if edit:
                edit(*repos[peer], peer)
            results[name][peer] = runs[peer]()
            print(f"{name:22} {peer:8} {results[name][peer]}", file=sys.stderr)
    # Without the CRD: it is a member of the gitward peer's ApplySet, and a second ApplySet's
    # daemon would fail on it (not taken over), retry, and skip its health wait.
    small_work, small_bare, small_count = make_repo(tmp, "gwsmall", max(1, n // 10), crd=False)
    for k in range(NAMESPACES):
        sh(["kubectl", "create", "namespace", f"gwsmall-{k}"])
    floor_work = repos["floor"][0]
    floor_objects = sum(f.endswith(".yaml") for _, _, files in os.walk(floor_work) for f in files)
    daemon = daemon_figures(tmp, repos["gitward"][1], repos["gitward"][0], "gitward",
                            (small_work, small_bare, "gwsmall"), lambda: floor_warm(tmp, floor_work, floor_objects))
    daemon["small_objects"] = small_count
    results["warm resync"] = daemon.pop("warm_resync")
    load_after = open("/proc/loadavg").read().split()[:3]

    out = [f"# gitward benchmark: {count} objects over {NAMESPACES} namespaces, same apiserver, same run\n",
           f"Load average (1, 5, 15 min) before: {' '.join(load_before)}; after: {' '.join(load_after)}; "
           f"{os.cpu_count()} CPUs. Before the first scenario the floor created the same workload in "
           f"namespaces of its own (warm-up, not measured).\n",
           "| scenario | peer | seconds | CPU s | peak MiB | requests by verb | gitward ÷ peer (time, CPU, RSS) |",
           "|---|---|---|---|---|---|---|"]
    for name, by_peer in results.items():
        if name == "warm resync":
            continue
        gw = by_peer["gitward"]
        for peer, r in by_peer.items():
            ratio = "" if peer == "gitward" else (
                f"{gw['seconds'] / r['seconds']:.2f}, {gw['cpu_seconds'] / max(r['cpu_seconds'], 0.01):.2f}, "
                f"{gw['rss_mib'] / r['rss_mib']:.2f}")
            verbs = ", ".join(f"{v} {c}" for v, c in r["requests"].items())
            out.append(f"| {name} | {peer} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | {r['rss_mib']:.0f} | {verbs} | {ratio} |")
    warm = results["warm resync"]
    median = {peer: statistics.median(r["seconds"] for r in runs) for peer, runs in warm.items()}
    out.append("")
    out.append(f"Warm resync ({WARM_RUNS} runs each, the peers taking turns): gitward run synced by a webhook, from "
               "sending it to the last response; the floor's second pass in one process, from its first pass's last "
               "response to its last. In flight: mean PATCHes in flight over the run (audit log).")
    out.append("")
    out.append("| peer | seconds, median | each run | in flight, each run | requests by verb (first run) | gitward ÷ floor |")
    out.append("|---|---|---|---|---|---|")
    for peer, runs in warm.items():
        verbs = ", ".join(f"{v} {c}" for v, c in runs[0]["requests"].items())
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        flight = ", ".join(str(r["in_flight"]) for r in runs)
        ratio = f"{median['gitward'] / median['floor']:.2f}" if peer == "gitward" else ""
        out.append(f"| {peer} | {median[peer]:.2f} | {each} | {flight} | {verbs} | {ratio} |")
    lat = daemon["push_to_applied_ms"]
    marginal = ((daemon["rss_at_rest_mib"] - daemon["small_rss_at_rest_mib"]) * 1024
                / max(1, count - daemon["small_objects"]))
    daemon["marginal_kib_per_object"] = round(marginal, 2)
    out.append("")
    out.append(f"gitward run at rest: {daemon['rss_at_rest_mib']:.0f} MiB resident (VmRSS) with {count} objects, "
               f"{daemon['small_rss_at_rest_mib']:.0f} MiB with {daemon['small_objects']}: "
               f"{marginal:.2f} KiB per tracked object; peak {daemon['peak_rss_first_sync_mib']:.0f} MiB "
               f"(VmHWM) through its first sync and health wait.")
    missed = sum(1 for v in lat if v is None)
    out.append(f"Push to applied, measured from `git push` returning to a watch seeing the new value "
               f"({len(lat)} pushes, each once the previous sync ended; {missed} not seen within 60 s): p50 {percentile(lat, 0.5)} ms, "
               f"p95 {percentile(lat, 0.95)} ms, max {percentile(lat, 1.0)} ms.")
    own = daemon["own_trigger_to_applied_ms"]
    if own:
        out.append(f"gitward's own trigger_to_applied_ms for the same pushes: median {statistics.median(own):.0f} ms, "
                   f"max {max(own)} ms.")
    text = "\n".join(out)
    print(text)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    open(os.path.join(ROOT, "target/bench/results.md"), "w").write(text + "\n")
    json.dump({"objects": count, "namespaces": NAMESPACES, "load_before": load_before, "load_after": load_after,
               "scenarios": results, "daemon": daemon},
              open(os.path.join(ROOT, "target/bench/results.json"), "w"), indent=2)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
