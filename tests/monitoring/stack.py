"""Test stack: throttle simulator -> real agent -> real Prometheus [-> Alertmanager -> webhook].

Everything listens on 127.0.0.1 on free ports and lives in one temp dir; processes are started in
their own process groups and killed (by pid) at exit, also on SIGTERM/SIGINT from ctest.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from ports import free_port  # noqa: E402,F401  (shared by the test harnesses)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SIM = os.path.join(ROOT, "tests", "sim", "throttle_sim.py")
RULES = os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")
JOB = "sockpressure-exporter"


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def find_agent(argv_path=None):
    if argv_path:
        # ctest passes the build's own target: test that one or nothing, never another build.
        if not os.access(argv_path, os.X_OK):
            skip(f"{argv_path} is not built (build the sockpressure_exporter target)")
        return argv_path
    cands = [os.environ.get("SOCKPRESSURE_EXPORTER")] + \
        [os.path.join(ROOT, d, "sockpressure_exporter") for d in ("build-mon", "build")]
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    skip("sockpressure_exporter not built (pass its path, set SOCKPRESSURE_EXPORTER, or build build-mon/)")


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(pred, timeout, what, step=0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 -- retried until the deadline
            last = e
        time.sleep(step)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last error: {last})")


def compress_rules(text, factor):
    """Rule file with every range and `for` duration divided by `factor`, so an end-to-end test
    sees fire/resolve in seconds. The promtool unit tests cover the real durations."""
    units = {"s": 1, "m": 60, "h": 3600}

    def scale(m):
        secs = max(1, int(int(m.group(1)) * units[m.group(2)] / factor))
        return f"{secs}s"

    n_range = len(re.findall(r"\[(\d+)([smh])\]", text))
    out = re.sub(r"\[(\d+)([smh])\]", lambda m: f"[{scale(m)}]", text)
    n_for = len(re.findall(r"^(\s+for: )(\d+)([smh])$", out, re.M))
    out = re.sub(r"^(\s+for: )(\d+)([smh])$",
                 lambda m: m.group(1) + scale(re.match(r"(\d+)([smh])", m.group(2) + m.group(3))), out, flags=re.M)
    assert n_range > 0 and n_for > 0, "nothing to compress: rule file format changed?"
    return out


class Webhook:
    """Alertmanager webhook receiver (python http.server) that records every notification."""

    def __init__(self):
        self.port = free_port()
        self.notifications = []
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.notifications.append((time.monotonic(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = HTTPServer(("127.0.0.1", self.port), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return list(self.notifications)


class Stack:
    def __init__(self, agent, rules_text=None, alertmanager=False, sim_args=(), scrape_configs=None, agent_args=()):
        """scrape_configs: optional function(agent host:port) -> YAML text of the scrape_configs list
        (default: one static_configs job named JOB)."""
        for tool in ("prometheus",) + (("prometheus-alertmanager",) if alertmanager else ()):
            if not shutil.which(tool):
                skip(f"{tool} not installed (Debian packages prometheus / prometheus-alertmanager)")
        self.dir = tempfile.mkdtemp(prefix="sockpressure-mon-")
        self.has_pod_labels = False
        self.procs = []
        atexit.register(self.stop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: sys.exit(1))
        self.t0 = time.monotonic()

        # 1. simulator
        self.sim_root = os.path.join(self.dir, "sim")
        self.start("sim", [sys.executable, SIM, "--root", self.sim_root, "--state", "throttling", *sim_args])
        wait_for(lambda: os.path.exists(os.path.join(self.sim_root, "procfs", "vmstat")), 20, "simulator tree")

        # 2. agent
        self.agent_port = free_port()
        self.instance = f"127.0.0.1:{self.agent_port}"
        self.start("agent", [agent, f"--web.listen-address=127.0.0.1:{self.agent_port}",
                             f"--path.procfs={self.sim_root}/procfs", f"--path.sysfs={self.sim_root}/sysfs",
                             f"--path.cgroupfs={self.sim_root}/cgroupfs", "--sample.interval=1s",
                             "--log.level=info"] + self.optional_flags(agent) + list(agent_args))
        wait_for(lambda: http_get(f"http://{self.instance}/readyz") is not None, 30, "agent /readyz")

        # 3. alertmanager + webhook
        self.webhook = None
        am_target = ""
        if alertmanager:
            self.webhook = Webhook()
            self.am_port = free_port()
            am_cfg = os.path.join(self.dir, "alertmanager.yml")
            with open(am_cfg, "w") as f:
                f.write(f"""route:
  receiver: webhook
  group_by: [alertname, instance, cgroup]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: http://127.0.0.1:{self.webhook.port}/
        send_resolved: true
""")
            p = subprocess.run(["amtool", "check-config", am_cfg], capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError("amtool check-config: " + p.stdout + p.stderr)
            self.start("alertmanager", ["prometheus-alertmanager", f"--config.file={am_cfg}",
                                        f"--storage.path={self.dir}/am", f"--web.listen-address=127.0.0.1:{self.am_port}",
                                        "--cluster.listen-address="])
            wait_for(lambda: http_get(f"http://127.0.0.1:{self.am_port}/-/ready"), 30, "alertmanager ready")
            am_target = f"""alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:{self.am_port}']
"""

        # 4. prometheus
        rules_path = os.path.join(self.dir, "rules.yaml")
        with open(rules_path, "w") as f:
            f.write(rules_text if rules_text is not None else open(RULES).read())
        self.prom_port = free_port()
        prom_cfg = os.path.join(self.dir, "prometheus.yml")
        with open(prom_cfg, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: ['{rules_path}']
{am_target}scrape_configs:
""" + (scrape_configs(self.instance) if scrape_configs else f"""  - job_name: {JOB}
    static_configs:
      - targets: ['{self.instance}']
"""))
        p = subprocess.run(["promtool", "check", "config", prom_cfg], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("promtool check config: " + p.stdout + p.stderr)
        # resend-delay 1s: alerts that fire before the Alertmanager is discovered are otherwise
        # re-sent only after 1 minute (measured, see docs/build-notes).
        self.start("prometheus", ["prometheus", f"--config.file={prom_cfg}", f"--storage.tsdb.path={self.dir}/tsdb",
                                  f"--web.listen-address=127.0.0.1:{self.prom_port}", "--rules.alert.resend-delay=1s",
                                  "--log.level=warn"])
        wait_for(lambda: http_get(f"{self.prom}/-/ready"), 30, "prometheus ready")

    def optional_flags(self, agent):
        # Builds without these features have no such flags (and reject unknown flags).
        # The simulated tree has no kernel behind it.
        h = subprocess.run([agent, "--help"], capture_output=True, text=True)
        h = h.stdout + h.stderr
        flags = []
        if "collector.bpf" in h:
            # The simulated tree has no kernel behind it: keep the agent on its file tiers.
            flags.append("--no-collector.bpf")
        if "collector.sock_diag" in h:
            # sock_diag talks netlink to the *real* kernel (and enters network namespaces found
            # under --path.procfs, of which the simulator has none): it would mix this host's
            # sockets into the simulated node. The simulator exercises the file tiers only.
            flags.append("--no-collector.sock_diag")
        if "kubelet.pods-file" in h:
            # The simulator's pod list, so namespace/pod/container labels flow end to end.
            flags.append(f"--kubelet.pods-file={self.sim_root}/pods.json")
            self.has_pod_labels = True
        return flags

    @property
    def prom(self):
        return f"http://127.0.0.1:{self.prom_port}"

    def start(self, name, cmd):
        log = open(os.path.join(self.dir, f"{name}.log"), "w")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, p))
        return p

    def stop(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)  # its own group, started by us
                    p.wait(5)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        self.procs = []
        if os.environ.get("SOCKPRESSURE_KEEP_TMP"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dead(self):
        return [n for n, p in self.procs if p.poll() is not None]

    def log(self, name):
        try:
            return open(os.path.join(self.dir, f"{name}.log")).read()
        except OSError:
            return ""

    def set_sim_state(self, state):
        path = os.path.join(self.sim_root, "sim.state")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(state + "\n")
        os.replace(tmp, path)

    def query(self, expr, t=None):
        q = {"query": expr}
        if t is not None:
            q["time"] = f"{t:.3f}"
        url = f"{self.prom}/api/v1/query?" + urllib.parse.urlencode(q)
        try:
            body = http_get(url, timeout=10)
        except urllib.error.HTTPError as e:
            body = e.read().decode()
        return json.loads(body)

    def wait_first_scrape(self, timeout=30):
        return wait_for(lambda: self.query(f'up{{job="{JOB}"}} == 1')["data"]["result"], timeout,
                        "the first successful scrape of the agent")
