"""gitward vs kubectl on the same apiserver, in the same run (see benches/run).

Scenarios, each measured for gitward and for kubectl (the peer):
  first sync   - create everything (N ConfigMaps + sock-shop's 28 objects)
  no-op sync   - nothing changed in git: every object is still sent
  one change   - one ConfigMap changed in git
Figures: wall time, peak RSS of the process, requests seen in the apiserver's audit log.
Daemon: push-to-applied latency (gitward's own trigger_to_applied_ms) over several pushes,
and its resident memory at rest, against the time and memory of the peer's full apply.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GITWARD = os.path.join(ROOT, "target/release/gitward")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "argocd-example-apps", "sock-shop", "base")
AUDIT = os.environ["GITWARD_TEST_AUDIT_LOG"]
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@gitward.dev"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def timed(cmd, env=None):
    """Runs cmd under /usr/bin/time -v; returns (seconds, peak RSS in MiB, stdout, stderr)."""
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - start
    if p.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
    return wall, rss, p.stdout, p.stderr


def audit_count(agent_prefix, since):
    """Requests in the audit log after line `since` whose user agent starts with agent_prefix."""
    n = 0
    verbs = {}
    with open(AUDIT) as f:
        for i, line in enumerate(f):
            if i < since:
                continue
            e = json.loads(line)
            if e.get("userAgent", "").startswith(agent_prefix):
                n += 1
                verbs[e["verb"]] = verbs.get(e["verb"], 0) + 1
    return n, verbs


def audit_len():
    with open(AUDIT) as f:
        return sum(1 for _ in f)


def make_repo(tmp, n):
    work = os.path.join(tmp, "work")
    bare = os.path.join(tmp, "repo.git")
    sh(["git", "init", "-q", "--bare", "--initial-branch=main", bare])
    sh(["git", "init", "-q", "--initial-branch=main", work])
    os.makedirs(os.path.join(work, "config"))
    for i in range(n):
        with open(os.path.join(work, "config", f"cm-{i:05d}.yaml"), "w") as f:
            f.write(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:05d}\n  labels:\n    app: bench\ndata:\n  index: \"{i}\"\n  payload: \"{'x' * 200}\"\n")
    shutil.copytree(FIXTURES, os.path.join(work, "sock-shop"))
    commit(work, bare, "initial")
    return work, bare


def commit(work, bare, message):
    sh(GIT + ["add", "-A"], cwd=work)
    sh(GIT + ["commit", "-q", "-m", message], cwd=work)
    sh(GIT + ["push", "-q", bare, "main"], cwd=work)


def change_one(work, bare, i, value):
    path = os.path.join(work, "config", f"cm-{i:05d}.yaml")
    text = open(path).read()
    open(path, "w").write(re.sub(r'index: "[^"]*"', f'index: "{value}"', text))
    commit(work, bare, f"change {i}")


def kubectl_apply(work, ns):
    env = dict(os.environ, KUBECTL_APPLYSET="true")
    return timed(["kubectl", "apply", "--server-side", "--prune", "--applyset=secret/kubectl-bench",
                  "-n", ns, "-R", "-f", work, "-o", "name"], env=env)


def write_config(tmp, bare, ns, listen=None):
    path = os.path.join(tmp, "gitward.toml")
    daemon = f'listen = "{listen}"\n' if listen else ""
    open(path, "w").write(
        f'[daemon]\nstate_dir = "{tmp}/state"\ninterval = "1h"\nresync_interval = "1h"\n{daemon}\n'
        f'[[sync]]\nname = "bench"\nrepo = "{bare}"\nnamespace = "{ns}"\nmax_prune_fraction = 1.0\n')
    return path


def main():
    n = int(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="gitward-bench-")
    sh(["kubectl", "create", "namespace", "bench-gitward"])
    sh(["kubectl", "create", "namespace", "bench-kubectl"])
    work, bare = make_repo(tmp, n)
    objects = n + 28
    config = write_config(tmp, bare, "bench-gitward")
    rows = []

    def measure(name, gw_cmd, kc_cmd):
        mark = audit_len()
        gw = timed(gw_cmd)
        time.sleep(0.5)
        gw_req = audit_count("gitward/", mark)
        mark = audit_len()
        kc = kc_cmd()
        time.sleep(0.5)
        kc_req = audit_count("kubectl", mark)
        rows.append((name, gw[0], kc[0], gw[1], kc[1], gw_req, kc_req))

    gw_sync = [GITWARD, "sync", "--config", config]
    # kubectl reads files from a work tree; the kustomization file is not an object.
    kc_dir = os.path.join(tmp, "kubectl-tree")
    def kc_tree():
        shutil.rmtree(kc_dir, ignore_errors=True)
        shutil.copytree(work, kc_dir, ignore=shutil.ignore_patterns(".git", "kustomization.yaml"))
        return kubectl_apply(kc_dir, "bench-kubectl")

    measure("first sync (create)", gw_sync, kc_tree)
    measure("no-op sync", gw_sync, kc_tree)
    change_one(work, bare, 7, "changed")
    measure("one object changed", gw_sync, kc_tree)

    # Daemon: push-to-applied latency and memory at rest.
    port = 19000 + os.getpid() % 1000
    dconfig = write_config(tmp, bare, "bench-gitward", listen=f"127.0.0.1:{port}")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    daemon = subprocess.Popen([GITWARD, "--log-format", "json", "run", "--config", dconfig], stderr=log)
    deadline = time.time() + 120
    while time.time() < deadline:
        if "every unit has synced once" in open(log.name).read():
            break
        time.sleep(0.2)
    else:
        sys.exit("daemon not ready:\n" + open(log.name).read()[-3000:])
    latencies = []
    for k in range(10):
        change_one(work, bare, k, f"push-{k}")
        want = k + 1
        deadline = time.time() + 30
        while time.time() < deadline:
            events = [json.loads(l) for l in open(log.name) if l.startswith("{")]
            got = [e for e in events if e.get("message") == "trigger applied" and e.get("trigger") == "push"]
            if len(got) >= want:
                break
            time.sleep(0.05)
        time.sleep(0.3)
    events = [json.loads(l) for l in open(log.name) if l.startswith("{")]
    latencies = [e["trigger_to_applied_ms"] for e in events if e.get("message") == "trigger applied" and e.get("trigger") == "push"]
    time.sleep(2)
    rss = int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{daemon.pid}/status").read()).group(1)) / 1024
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=15)
    kc_full = kc_tree()

    out = []
    out.append(f"# gitward benchmark: {objects} objects ({n} ConfigMaps + sock-shop), same apiserver, same run\n")
    out.append("| scenario | gitward s | kubectl s | time ratio | gitward MiB | kubectl MiB | RSS ratio | gitward requests | kubectl requests |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for name, gt, kt, gr, kr, (gq, gv), (kq, kv) in rows:
        out.append(f"| {name} | {gt:.2f} | {kt:.2f} | {gt / kt:.2f} | {gr:.0f} | {kr:.0f} | {gr / kr:.2f} | {gq} {dict(sorted(gv.items()))} | {kq} {dict(sorted(kv.items()))} |")
    if latencies:
        med = statistics.median(latencies)
        out.append("")
        out.append(f"daemon push-to-applied (trigger_to_applied_ms, {len(latencies)} pushes): median {med:.0f} ms, "
                   f"max {max(latencies)} ms; peer (post-receive hook running kubectl apply on the tree): {kc_full[0] * 1000:.0f} ms "
                   f"-> ratio {med / (kc_full[0] * 1000):.3f}")
    out.append(f"daemon resident memory at rest with {objects} objects: {rss:.0f} MiB; kubectl apply peak: {kc_full[1]:.0f} MiB "
               f"-> ratio {rss / kc_full[1]:.2f}")
    text = "\n".join(out)
    print(text)
    os.makedirs(os.path.join(ROOT, "target/bench"), exist_ok=True)
    open(os.path.join(ROOT, "target/bench/results.md"), "w").write(text + "\n")


if __name__ == "__main__":
    main()
