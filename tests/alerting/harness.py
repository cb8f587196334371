"""Shared plumbing for the alerting script tests: free loopback ports, the
throttle simulator, the agent, Alertmanager and amtool, all started in temp
dirs and stopped (by pid) at the end. Exit code 77 = skip (tool missing)."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from ports import free_port  # noqa: E402,F401  (shared by the test harnesses)

SKIP = 77


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True, help="sockpressure_exporter binary")
    ap.add_argument("--sim", required=True, help="tests/sim/throttle_sim.py")
    return ap.parse_args()


def need(*tools):
    for t in tools:
        if not shutil.which(t) and not os.path.exists(t):
            print(f"SKIP: {t} not installed")
            sys.exit(SKIP)


def wait_for(cond, timeout, what, step=0.1):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # the thing may still be starting
            last = e
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def metric(port, name_and_labels):
    """The value of one series in the agent's /metrics, or None: `name{labels}` as exposed."""
    for line in http_get(f"http://127.0.0.1:{port}/metrics").splitlines():
        if line.startswith(name_and_labels + " "):
            return float(line.split()[-1])
    return None


class Procs:
    """Processes this test started; stopped by pid in reverse order."""

    def __init__(self):
        self.procs = []
        self.tmp = tempfile.mkdtemp(prefix="sp-alerting-")

    def start(self, name, argv, **kw):
        log = open(os.path.join(self.tmp, f"{name}.log"), "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, **kw)
        p.name = name
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def log(self, name):
        try:
            return open(os.path.join(self.tmp, f"{name}.log"), errors="replace").read()
        except OSError:
            return ""

    def close(self, keep=False):
        for p in reversed(list(self.procs)):
            self.stop(p)
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"(logs kept in {self.tmp})")


def start_sim(procs, sim, root, state="throttling", interval=0.25):
    p = procs.start("sim", [sys.executable, sim, "--root", root, "--state", state, "--interval", str(interval)])
    wait_for(lambda: "tree at" in procs.log("sim"), 20, "simulator tree")
    return p


def set_sim_state(root, state):
    tmp = os.path.join(root, "sim.state.tmp")
    with open(tmp, "w") as f:
        f.write(state + "\n")
    os.replace(tmp, os.path.join(root, "sim.state"))


def agent_argv(agent, root, port, *extra):
    return [agent, f"--web.listen-address=127.0.0.1:{port}",
            f"--path.procfs={root}/procfs", f"--path.sysfs={root}/sysfs", f"--path.cgroupfs={root}/cgroupfs",
            "--sample.interval=500ms", "--log.level=debug", *agent_collector_flags(agent), *extra]


_collectors = {}


def agent_collector_flags(agent):
    """Turn off the collectors that read the real host (eBPF, sock_diag) when
    the binary has them: the fixture tree is the only input."""
    if agent not in _collectors:
        help_text = subprocess.run([agent, "--help"], capture_output=True, text=True).stdout
        _collectors[agent] = [f"--no-collector.{c}" for c in ("bpf", "sock_diag", "identity")
                              if f"--collector.{c}" in help_text]
    return _collectors[agent]


def start_alertmanager(procs, port, data_dir, name="alertmanager"):
    os.makedirs(data_dir, exist_ok=True)
    cfg = os.path.join(data_dir, "alertmanager.yml")
    with open(cfg, "w") as f:
        f.write("route:\n  receiver: devnull\n  group_wait: 1s\n  group_interval: 1s\n"
                "receivers:\n  - name: devnull\n")
    p = procs.start(name, ["prometheus-alertmanager", f"--config.file={cfg}", f"--storage.path={data_dir}",
                           f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                           "--log.level=info"])
    wait_for(lambda: http_get(f"http://127.0.0.1:{port}/-/ready") is not None, 30, "alertmanager ready")
    return p


def amtool_alerts(port, *matchers):
    """Active alerts as `amtool alert query` lists them (JSON output)."""
    argv = ["amtool", "alert", "query", f"--alertmanager.url=http://127.0.0.1:{port}", "-o", "json"]
    argv += list(matchers)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        raise AssertionError(f"amtool failed: {out.stderr}")
    return json.loads(out.stdout or "[]")
