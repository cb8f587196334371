#!/usr/bin/env python3
"""sockpressure kernel lab: host-side orchestrator (entry point: tests/lab/run).

For each condition it boots the Debian kernel under QEMU (TCG) with the lab
initramfs, lets the guest reproduce (or not) memcg socket pressure on a real TCP
receiver, and watches the agent inside the guest from the host through a real
Prometheus (scraping it via QEMU's port forward, with the project's alert rules)
and a real Alertmanager delivering to a local webhook. It then asserts the
per-condition expectations, the per-tier verdicts and measures detection
latency. Nothing leaves 127.0.0.1; the host's cgroups, sysctls and swap are
never touched (all pressure lives inside the guest).
"""
import argparse
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from ports import free_port  # noqa: E402,F401  (shared by the test harnesses)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webhook import WebhookServer  # noqa: E402

LAB_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(LAB_DIR))
CONDITIONS = ["nopressure", "swap", "noswap", "nosocket"]
THROTTLED = {"swap"}  # conditions where the kernel really clamps windows
# Every tier the issue asks a verdict from. A row is (id, `source` label of sockpressure_tier_*, the
# sockpressure_probe_attached{probe,attach} that must be 1 for it to count as live, the families its
# verdict reads). eBPF sources are split by probe: the `fentry` source carries both the fentry
# vmpressure and the fexit window-clamp probe, `kprobe` both kprobe probes, and a source that lacks a
# probe still exports zeros for that probe's families, so only the families of an attached probe count.
PRESSURE_FAMS = ("socket_pressure_events_total", "socket_pressure_seconds_total")
CLAMP_FAMS = ("window_clamps_total",)
TIER_ROWS = [
    ("fentry", "fentry", ("vmpressure", "fentry"), PRESSURE_FAMS),
    ("fexit-clamps", "fentry", ("window_clamps", "fexit"), CLAMP_FAMS),
    ("kprobe", "kprobe", ("vmpressure", "kprobe"), PRESSURE_FAMS),
    ("kprobe-clamps", "kprobe", ("window_clamps", "kprobe"), CLAMP_FAMS),
    ("iter", "iter", ("socket_pressure", "iter"), PRESSURE_FAMS),
    ("iter-census", "iter", ("tcp_census", "iter"), ("clamped_sockets",)),
    ("tp_btf", "tp_btf", ("window_clamps", "tp_btf"), CLAMP_FAMS),
    ("raw_tp", "raw_tp", ("window_clamps", "raw_tp"), CLAMP_FAMS),
    ("sock_diag", "sock_diag", None, None),
    ("memory_stat", "memory_stat", None, None),
]
TIER_LABEL = {"fentry": "fentry (vmpressure)", "fexit-clamps": "fexit (window clamps)",
              "kprobe": "kprobe (vmpressure)", "kprobe-clamps": "kprobe (window clamps)",
              "tp_btf": "tp_btf (window clamps)", "raw_tp": "raw_tp (window clamps)",
              "iter": "iter (socket pressure)", "iter-census": "iter (TCP census)"}
# Second agent configuration, booted once more per --fallback-conditions: agents that are forced
# onto the fallback attach types, which never win on a kernel with fentry/fexit. name=flags;...
FALLBACK_AGENTS = ("kprobe=--signal.all-tiers --bpf.vmpressure-attach=kprobe --bpf.clamps-attach=kprobe;"
                   "tp_btf=--signal.all-tiers --bpf.clamps-attach=tp_btf;"
                   "raw_tp=--signal.all-tiers --bpf.clamps-attach=raw_tp --no-collector.sock_diag")
FALLBACK_FLAGS = ("--bpf.vmpressure-attach", "--bpf.clamps-attach")
GUEST_AGENT_PORT = 9101
THROTTLE_ALERTS = ("SockPressureTCPThrottled", "SockPressureTCPThrottledCritical")
FALLBACK_THROTTLE_ALERT = "LabSocketPressureThrottling"


def log(msg):
    print(f"[lab {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def http_get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8", "replace")


def wait_http(url, timeout, proc=None):
    """Wait until url answers; bounded, and gives up early if proc died."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            http_get(url, 1.0)
            return True
        except Exception:
            time.sleep(0.3)
    return False


def parse_prom_text(text):
    """Minimal Prometheus text-format parser: [(name, labels, value)]."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(4))))
        except ValueError:
            pass
    return out


class Prom:
    """Tiny Prometheus HTTP API client."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr):
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            d = json.loads(http_get(url, 5.0))
        except Exception:
            return []
        if d.get("status") != "success":
            return []
        return [(r["metric"], float(r["value"][1])) for r in d["data"]["result"]]

    def scalar(self, expr):
        r = self.query(expr)
        return r[0][1] if r else None


class Guest:
    """One QEMU boot; its serial console lines are timestamped on the host as they arrive."""

    def __init__(self, args, guest_files, cond, agents, rundir, run=None):
        """agents: [(name, flags, host_port)]; agent k listens on GUEST_AGENT_PORT + k."""
        self.events = []  # (host_time, kind, fields, raw)
        self.lock = threading.Lock()
        append = [
            "console=ttyS0", "quiet", "loglevel=4", "panic=-1", "mitigations=off",
            f"lab.cond={cond}", f"lab.warmup={args.warmup}", f"lab.transfer={args.transfer}",
            f"lab.agent_port={GUEST_AGENT_PORT}", f"lab.linger={args.linger}",
        ]
        if args.memcg_limit:
            append.append(f"lab.memcg_limit={args.memcg_limit}")
        if args.many_memcgs and run in (None, cond) and cond in args.many_memcgs_conditions.split(","):
            append.append(f"lab.many_memcgs={args.many_memcgs}")
        for k, (_, flags, _) in enumerate(agents):
            # Spaces become commas, commas semicolons (guest/init turns them back).
            enc = ",".join(a.replace(",", ";") for a in flags.split())
            if enc:
                append.append(f"lab.agent{'' if k == 0 else k + 1}_args={enc}")
        if len(agents) > 1:
            append.append(f"lab.agents={len(agents)}")
        fwd = ",".join(f"hostfwd=tcp:127.0.0.1:{hp}-:{GUEST_AGENT_PORT + k}"
                       for k, (_, _, hp) in enumerate(agents))
        if cond == "nosocket":
            append.append("cgroup.memory=nosocket")
        cmd = [
            args.qemu, "-accel", "tcg,thread=multi", "-smp", "2", "-m", str(args.mem_mib), "-cpu", "max",
            "-kernel", guest_files["KERNEL"], "-initrd", guest_files["INITRD"], "-append", " ".join(append),
            # Read-only data disk: several runs (and conditions) share one cached image.
            "-drive", f"file={guest_files['DISK']},if=virtio,format=raw,readonly=on",
            # User networking only forwards the agents' ports to host loopback.
            "-netdev", f"user,id=n0,{fwd}",
            "-device", "virtio-net-pci,netdev=n0",
            "-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot",
        ]
        self.log_path = os.path.join(rundir, f"{run or cond}.console.log")
        self.logf = open(self.log_path, "w")
        self.logf.write("# " + shlex.join(cmd) + "\n")
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            t = time.time()
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.logf.write(f"{t - self.started:8.3f} {line}\n")
            self.logf.flush()
            if line.startswith("LAB "):
                parts = line[4:].split(None, 1)
                kind = parts[0] if parts else ""
                fields = {}
                rest = parts[1] if len(parts) > 1 else ""
                try:
                    toks = shlex.split(rest)
                except ValueError:
                    toks = rest.split()
                for tok in toks:
                    if "=" in tok:
                        k, v = tok.split("=", 1)
                        fields[k] = v
                with self.lock:
                    self.events.append((t, kind, fields, line))

    def first(self, kind):
        with self.lock:
            for e in self.events:
                if e[1] == kind:
                    return e
        return None

    def all(self, kind):
        with self.lock:
            return [e for e in self.events if e[1] == kind]

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.reader.join(5)
        self.logf.close()


class Stack:
    """Prometheus + Alertmanager + webhook on loopback, fresh per condition."""

    def __init__(self, args, cond, agents, rundir, run=None):
        self.dir = os.path.join(rundir, f"{run or cond}.stack")
        os.makedirs(self.dir, exist_ok=True)
        self.procs = []
        self.webhook = WebhookServer(0, os.path.join(self.dir, "webhook.jsonl")).start()
        self.am_port, self.prom_port = free_port(), free_port()
        am_cfg = os.path.join(self.dir, "alertmanager.yml")
        with open(am_cfg, "w") as f:
            # group_wait 1s: the lab measures detection latency, production routes batch longer.
            f.write(
                "route:\n  receiver: lab\n  group_by: [alertname, cgroup]\n"
                "  group_wait: 1s\n  group_interval: 5s\n  repeat_interval: 1h\n"
                "receivers:\n  - name: lab\n    webhook_configs:\n"
                f"      - url: http://127.0.0.1:{self.webhook.port}/alert\n        send_resolved: true\n")
        prom_cfg = os.path.join(self.dir, "prometheus.yml")
        with open(prom_cfg, "w") as f:
            f.write(
                f"global:\n  scrape_interval: {args.scrape_interval}\n"
                f"  evaluation_interval: {args.scrape_interval}\n  scrape_timeout: {args.scrape_interval}\n"
                f"  external_labels: {{lab_condition: {cond}}}\n"
                f"rule_files: [{json.dumps(args.rules_file)}]\n"
                "alerting:\n  alertmanagers:\n"
                f"    - static_configs: [{{targets: ['127.0.0.1:{self.am_port}']}}]\n"
                "scrape_configs:\n"
                # The job name the project's rules select on (alerts/generate.py agent_selector).
                "  - job_name: sockpressure-exporter\n"
                "    static_configs:\n" + "".join(
                    f"      - {{targets: ['127.0.0.1:{hp}'], labels: {{lab_agent: {name}}}}}\n"
                    for name, _, hp in agents))
        self._spawn("alertmanager", [
            args.alertmanager, f"--config.file={am_cfg}", f"--storage.path={self.dir}/am-data",
            f"--web.listen-address=127.0.0.1:{self.am_port}",
            # Empty cluster address: no HA gossip listener on 0.0.0.0:9094.
            "--cluster.listen-address=", "--log.level=warn"])
        self._spawn("prometheus", [
            args.prometheus, f"--config.file={prom_cfg}", f"--storage.tsdb.path={self.dir}/prom-data",
            f"--web.listen-address=127.0.0.1:{self.prom_port}", "--log.level=warn"])
        self.prom = Prom(self.prom_port)
        ok = wait_http(f"http://127.0.0.1:{self.am_port}/-/ready", 30, self.procs[0][1])
        ok = ok and wait_http(f"http://127.0.0.1:{self.prom_port}/-/ready", 30, self.procs[1][1])
        if not ok:
            self.stop()
            raise RuntimeError(f"Prometheus/Alertmanager did not become ready (logs in {self.dir})")

    def _spawn(self, name, cmd):
        logf = open(os.path.join(self.dir, f"{name}.log"), "w")
        p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs.append((name, p, logf))

    def stop(self):
        for _, p, logf in self.procs:
            if p.poll() is None:
                p.terminate()
        for _, p, logf in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            logf.close()
        self.webhook.shutdown()
        self.webhook.server_close()


def metric_value(samples, name, **labels):
    for n, l, v in samples:
        if n == name and all(l.get(k) == val for k, val in labels.items()):
            return v
    return None


def run_condition(args, guest_files, run, cond, agent_specs, rundir):
    """Boot one condition with the agents agent_specs [(name, flags)]; collect what the checks need.
    Headline checks (events, clamps, alerts, latency) use the first agent; tier verdicts all agents."""
    agents = [(name, flags, free_port()) for name, flags in agent_specs]
    res = {"condition": cond, "run": run, "variant": "default" if run == cond else "fallback", "errors": [],
           "agents": [(n, f) for n, f in agent_specs]}
    agent_host_port = agents[0][2]
    stack = Stack(args, cond, agents, rundir, run) if args.agent else None
    guest = Guest(args, guest_files, cond, agents, rundir, run)
    log(f"{run}: QEMU started (console log {os.path.relpath(guest.log_path, REPO)})")
    A, B = args.cgroup_a, args.cgroup_b
    first = {}  # name -> host time when first seen

    def mark(name, cond_ok, t=None):
        if cond_ok and name not in first:
            first[name] = t or time.time()

    # The guest may extend its warm-up up to 180 s (lab.warmup_max) on a slow host.
    deadline = guest.started + args.boot_timeout + max(args.warmup, 180) + args.transfer + 60
    try:
        while time.time() < deadline and guest.alive() and not guest.first("done"):
            fatal = guest.first("fatal")
            if fatal:
                res["errors"].append(f"guest: {fatal[3]}")
                break
            if args.agent and guest.first("agent_started"):
                # Poll the agent directly and Prometheus, to time when the clamp became visible.
                try:
                    s = parse_prom_text(http_get(f"http://127.0.0.1:{agent_host_port}/metrics", 2))
                    mark("agent_clamps", (metric_value(s, "sockpressure_tcp_window_clamps_total", cgroup=A) or 0) > 0)
                    mark("agent_events", (metric_value(
                        s, "sockpressure_memcg_socket_pressure_events_total", cgroup=A) or 0) > 0)
                except Exception:
                    pass
                first_agent = agents[0][0]
                mark("prom_clamps", (stack.prom.scalar(
                    f'sockpressure_tcp_window_clamps_total{{cgroup="{A}",lab_agent="{first_agent}"}}') or 0) > 0)
                mark("prom_events", (stack.prom.scalar(
                    f'sockpressure_memcg_socket_pressure_events_total{{cgroup="{A}",lab_agent="{first_agent}"}}')
                    or 0) > 0)
                for t, status, labels in stack.webhook.alerts():
                    if status == "firing" and labels.get("alertname") in args.throttle_alerts:
                        mark("alert_" + labels.get("cgroup", "?"), True, t)
            time.sleep(0.5)
        if not guest.first("done"):
            res["errors"].append("guest did not finish (timeout or crash); see console log")
        if args.agent and guest.first("done"):
            # Let the last scrapes and rule evaluations land; in the throttled condition also wait
            # (bounded) for the alert to make it through Alertmanager.
            settle_until = time.time() + args.settle
            alert_until = time.time() + args.alert_timeout
            while time.time() < max(settle_until, alert_until if cond in THROTTLED else 0):
                for t, status, labels in stack.webhook.alerts():
                    if status == "firing" and labels.get("alertname") in args.throttle_alerts:
                        mark("alert_" + labels.get("cgroup", "?"), True, t)
                if time.time() >= settle_until and f"alert_{A}" in first:
                    break
                if not guest.alive():
                    break
                time.sleep(0.5)
        many = None
        if args.many_memcgs and run == cond and cond in args.many_memcgs_conditions.split(","):
            until = time.time() + 60
            while not many and time.time() < until and guest.alive() and guest.first("done"):
                many = guest.first("many_memcgs")
                time.sleep(0.5)
            if not many:
                res["errors"].append("guest did not report many_memcgs")
        if args.agent and many:
            # Give the agent a few samples and Prometheus a few scrapes of the larger tree.
            time.sleep(max(0.0, many[0] + 10 - time.time()))
            res["many_memcgs"] = int(many[2].get("n", 0))
            res["memcgs_total"] = int(many[2].get("total", 0))
            # Straight from the agent (a 1,100-cgroup exposition can outlast a 1 s scrape under TCG).
            try:
                samples = [x for x in parse_prom_text(http_get(f"http://127.0.0.1:{agent_host_port}/metrics", 60))
                           if x[0] == "sockpressure_tier_socket_pressure_events_total"
                           and x[1].get("source") == "iter"]
                res["iter_memcgs"] = len(samples)
                res["iter_A_events"] = next((v for _, l, v in samples if l.get("cgroup") == A), None)
            except Exception as e:  # noqa: BLE001 - reported as a failed check
                res["errors"].append(f"agent scrape after many_memcgs: {e}")
            with open(guest.log_path, errors="replace") as f:
                res["iter_errors"] = [ln.strip() for ln in f if "cgroup iterator:" in ln]
        if args.agent:
            collect_prometheus(res, stack, guest, A, B, [a[0] for a in agents])
            res["webhook"] = [(round(t - guest.started, 1), st, l.get("alertname"), l.get("cgroup"))
                              for t, st, l in stack.webhook.alerts()]
    finally:
        guest.stop()
        if stack:
            stack.stop()
    collect_guest(res, guest)
    # Two start points: the first clamp the receiver saw (for the clamp metrics, which need a
    # socket) and the first reclaim scan of A (for socket pressure, which exists before any socket).
    res["latency"] = {}
    clamp, onset = guest.first("clamp_first"), guest.first("a_scan_onset")
    for k, t in first.items():
        start = onset if ("events" in k or k.startswith("alert")) else clamp
        if start:
            res["latency"][k] = t - start[0]
        if clamp and k.startswith("alert"):
            res["latency"][k + "_from_clamp"] = t - clamp[0]
    res["agent_missing"] = bool(guest.first("agent_missing"))
    res["wall_s"] = time.time() - guest.started
    return res


def collect_guest(res, guest):
    r = guest.first("recv_result")
    res["recv_kBps"] = float(r[2]["kBps"]) if r else None
    if r:
        res["recv_clamped_frac"] = int(r[2]["clamped_checks"]) / max(1, int(r[2]["checks"]))
    ss = [e[2] for e in guest.all("ss")]
    res["ss_samples"] = len(ss)
    # `ss -tmi` samples where rcv_ssthresh sits at 4*advmss: the lab notes' measurement.
    res["ss_clamped"] = sum(1 for raw in (e[3] for e in guest.all("ss")) if _ss_clamped(raw))
    for e in guest.all("stat"):
        cg = e[2].get("cg")
        key = cg.rsplit("/", 1)[-1]  # A or B, with or without the lab/ parent
        res[f"guest_{key}_pgscan"] = int(e[2].get("pgscan", 0))
        res[f"guest_{key}_pgsteal"] = int(e[2].get("pgsteal", 0))
    c = guest.first("clamp_first")
    res["first_clamp_s"] = float(c[2]["t"]) if c else None
    res["guest_clamped"] = c is not None
    b = guest.first("boot")
    res["boot_s"] = round(b[0] - guest.started, 1) if b else None


def _ss_clamped(raw):
    m1 = re.search(r"rcv_ssthresh:(\d+)", raw)
    m2 = re.search(r"advmss:(\d+)", raw)
    return bool(m1 and m2 and int(m1.group(1)) <= 4 * int(m2.group(1)))


def collect_prometheus(res, stack, guest, A, B, agent_names):
    p = stack.prom
    rng = f"[{int(time.time() - guest.started) + 30}s]"
    first = agent_names[0]
    # Every agent must have been scraped; the headline signals are the first agent's.
    ups = {m.get("lab_agent"): v for m, v in p.query(f"max_over_time(up{{job='sockpressure-exporter'}}{rng})")}
    res["prom_up_by_agent"] = ups
    res["prom_up"] = min((ups.get(n) or 0) for n in agent_names)
    for cg, key in ((A, "A"), (B, "B")):
        sel = f'{{cgroup="{cg}",lab_agent="{first}"}}'
        res[f"{key}_ratio_max"] = p.scalar(f"max_over_time(sockpressure_memcg_scan_without_reclaim_ratio{sel}{rng})")
        res[f"{key}_events"] = p.scalar(f"max_over_time(sockpressure_memcg_socket_pressure_events_total{sel}{rng})")
        res[f"{key}_pressure_s"] = p.scalar(f"max_over_time(sockpressure_memcg_socket_pressure_seconds_total{sel}{rng})")
        res[f"{key}_clamps"] = p.scalar(f"max_over_time(sockpressure_tcp_window_clamps_total{sel}{rng})")
        res[f"{key}_clamped_sockets_max"] = p.scalar(f"max_over_time(sockpressure_tcp_clamped_sockets{sel}{rng})")
        res[f"{key}_sockets_max"] = p.scalar(f"max_over_time(sockpressure_tcp_sockets{sel}{rng})")
        res[f"{key}_scanned"] = p.scalar(f"max_over_time(sockpressure_memcg_reclaim_scanned_pages_total{sel}{rng})")
        res[f"{key}_reclaimed"] = p.scalar(
            f"max_over_time(sockpressure_memcg_reclaim_reclaimed_pages_total{sel}{rng})")
    res["socket_accounting"] = p.scalar(
        f"last_over_time(sockpressure_node_socket_accounting_enabled{{lab_agent='{first}'}}{rng})")
    res["signal_source"] = {m.get("signal"): m.get("source") for m, v in p.query(
        f"last_over_time(sockpressure_signal_source{{lab_agent='{first}'}}{rng}) == 1")}
    # Per agent: the tier values (one query per family: functions like max_over_time drop __name__)
    # and which eBPF probes attached with which attach type.
    res["agent_tiers"] = {}
    for name in agent_names:
        tiers = {}
        for fam in ("scan_without_reclaim_ratio", "socket_pressure_events_total", "socket_pressure_seconds_total",
                    "window_clamps_total", "clamped_sockets"):
            for m, v in p.query(f'max_over_time(sockpressure_tier_{fam}{{cgroup=~"{A}|{B}",lab_agent="{name}"}}{rng})'):
                tiers.setdefault(m.get("source"), {})[(fam, m.get("cgroup"))] = v
        probes = sorted({(m.get("probe"), m.get("attach")) for m, v in p.query(
            f"max_over_time(sockpressure_probe_attached{{lab_agent='{name}'}}{rng}) == 1")})
        # In-kernel cost per program run (kernel.bpf_stats_enabled=1 in the guest): ns per event.
        cost = {}
        for m, v in p.query(f"increase(sockpressure_bpf_program_run_seconds_total{{lab_agent='{name}'}}{rng})"):
            runs = p.scalar(f"increase(sockpressure_bpf_program_runs_total{{lab_agent='{name}',"
                            f"program='{m.get('program')}'}}{rng})")
            if runs:
                cost[m.get("program")] = (v * 1e9 / runs, runs)
        res["agent_tiers"][name] = {"tiers": tiers, "probes": probes, "cost": cost}
    res["tiers_json"] = {n: {"probes": a["probes"], "tiers": {t: {f"{fam} {cg}": v for (fam, cg), v in vals.items()}
                                                              for t, vals in a["tiers"].items()}}
                         for n, a in res["agent_tiers"].items()}
    res["alerts_firing"] = sorted({(m.get("alertname"), m.get("cgroup", "")) for m, v in p.query(
        f'max_over_time(ALERTS{{alertstate="firing"}}{rng})')})


# ---------------------------------------------------------------------------------------------
# Verdicts


class Checker:
    def __init__(self):
        self.rows = []  # (condition, check, ok, detail)

    def check(self, cond, name, ok, detail=""):
        self.rows.append((cond, name, ok, detail))
        mark = "PASS" if ok else "FAIL"
        log(f"  [{mark}] {cond}: {name} {detail}")
        return ok

    def missing(self, cond, name, why):
        """A check the agent cannot be judged on (no source for the signal): loud, not a pass."""
        self.rows.append((cond, name, None, why))
        log(f"  [MISSING] {cond}: {name}: {why}")

    def failed(self):
        return [r for r in self.rows if r[2] is False]


def fmt(v, nd=2):
    if v is None:
        return "absent"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def tier_verdict(values, cg):
    """A tier says 'throttled' for cg if any of its socket-pressure or clamp signals is > 0."""
    signals = [v for (fam, c), v in values.items() if c == cg and fam != "scan_without_reclaim_ratio"]
    if not signals:
        return None
    return any(v > 0 for v in signals)


def row_values(agent_data, row):
    """The tier values one agent gives for one TIER_ROWS row, or None when that row is not live."""
    _, source, probe, fams = row
    vals = agent_data["tiers"].get(source)
    if vals is None:
        return None
    if probe is not None and tuple(probe) not in {tuple(p) for p in agent_data["probes"]}:
        return None
    return {k: v for k, v in vals.items() if fams is None or k[0] in fams}


def forced_attach(flags):
    """{probe: attach} an agent's flags force with a single-valued --bpf.*-attach."""
    out = {}
    for a in flags.split():
        for flag, probe in (("--bpf.vmpressure-attach=", "vmpressure"), ("--bpf.clamps-attach=", "window_clamps")):
            if a.startswith(flag) and "," not in a[len(flag):]:
                out[probe] = a[len(flag):]
    return out


def assess(args, results):
    ck = Checker()
    A, B = args.cgroup_a, args.cgroup_b
    ref = results.get("nopressure", {}).get("recv_kBps")
    for run, r in results.items():
        cond = r["condition"]
        for e in r["errors"]:
            ck.check(run, "run", False, e)
        thr = cond in THROTTLED
        kbps = r.get("recv_kBps")
        ck.check(run, "receiver finished", kbps is not None, f"{fmt(kbps, 0)} kB/s")
        if cond == "swap":
            if ref:
                ck.check(run, "throughput < half of nopressure", kbps is not None and kbps < ref / 2,
                         f"{fmt(kbps, 0)} vs {fmt(ref, 0)} kB/s")
            else:
                ck.missing(run, "throughput < half of nopressure", "nopressure not run: not compared")
            ck.check(run, "kernel clamped the receiver (rcv_ssthresh = 4*advmss seen in guest)",
                     r.get("guest_clamped"), f"first after {fmt(r.get('first_clamp_s'))} s")
        else:
            ck.check(run, "kernel never clamped the receiver", not r.get("guest_clamped"),
                     f"clamped fraction {fmt(r.get('recv_clamped_frac'))}")
        if not args.agent:
            continue
        if r.get("agent_missing"):
            ck.check(run, "agent present in guest", False)
            continue
        ck.check(run, "Prometheus scraped the agent", (r.get("prom_up") or 0) == 1)
        acct = r.get("socket_accounting")
        ck.check(run, "sockpressure_node_socket_accounting_enabled",
                 acct == (0 if cond == "nosocket" else 1), f"= {fmt(acct)}")
        def has(signal, r=r):
            return r.get("signal_source", {}).get(signal, "none") != "none"

        thr_alerts = [a for a in r.get("alerts_firing", []) if a[0] in args.throttle_alerts]
        hooks = [w for w in r.get("webhook", []) if w[1] == "firing" and w[2] in args.throttle_alerts]
        if thr:
            ck.check(run, "A: scan-without-reclaim ratio >= 0.95", (r.get("A_ratio_max") or 0) >= 0.95,
                     f"max {fmt(r.get('A_ratio_max'), 3)}")
            ck.check(run, "A: socket-pressure events > 0", (r.get("A_events") or 0) > 0, fmt(r.get("A_events")))
            ck.check(run, "A: socket-pressure seconds > 0", (r.get("A_pressure_s") or 0) > 0,
                     fmt(r.get("A_pressure_s")))
            if has("window_clamps"):
                ck.check(run, "A: window clamps > 0", (r.get("A_clamps") or 0) > 0, fmt(r.get("A_clamps")))
            else:
                ck.missing(run, "A: window clamps > 0", "agent has no window_clamps source")
            if has("clamped_sockets"):
                ck.check(run, "A: clamped sockets >= 1 during transfer",
                         (r.get("A_clamped_sockets_max") or 0) >= 1, f"max {fmt(r.get('A_clamped_sockets_max'))}")
            else:
                ck.missing(run, "A: clamped sockets >= 1 during transfer", "agent has no clamped_sockets source")
            ck.check(run, "B: no socket-pressure events", not (r.get("B_events") or 0), fmt(r.get("B_events")))
            if has("window_clamps"):
                ck.check(run, "B: no window clamps", not (r.get("B_clamps") or 0), fmt(r.get("B_clamps")))
            ck.check(run, "throttling alert for A reached the webhook",
                     any(w[3] == A for w in hooks), str(sorted({(w[2], w[3]) for w in hooks})))
            ck.check(run, "no throttling alert for B", not any(w[3] == B for w in hooks))
        else:
            for key in ("A", "B"):
                ck.check(run, f"{key}: no socket-pressure events", not (r.get(f"{key}_events") or 0),
                         fmt(r.get(f"{key}_events")))
                if has("window_clamps"):
                    ck.check(run, f"{key}: no window clamps", not (r.get(f"{key}_clamps") or 0),
                             fmt(r.get(f"{key}_clamps")))
                else:
                    ck.missing(run, f"{key}: no window clamps", "agent has no window_clamps source")
                if has("clamped_sockets"):
                    ck.check(run, f"{key}: no clamped sockets", not (r.get(f"{key}_clamped_sockets_max") or 0),
                             fmt(r.get(f"{key}_clamped_sockets_max")))
                else:
                    ck.missing(run, f"{key}: no clamped sockets", "agent has no clamped_sockets source")
            ck.check(run, "no throttling alert (Prometheus or webhook)", not thr_alerts and not hooks,
                     str(thr_alerts + hooks))
        # Per tier: each live tier of each agent, on its own, must reach the right verdict for A (and
        # never say throttled for B). An agent forced onto one attach type must have attached it.
        obs = {}
        for name, data in r.get("agent_tiers", {}).items():
            flags = dict(r.get("agents", [])).get(name, "")
            for probe, attach in forced_attach(flags).items():
                ck.check(run, f"agent {name}: {probe} attached as {attach} (forced)",
                         (probe, attach) in {tuple(p) for p in data["probes"]},
                         "attached: " + ", ".join(f"{p}={a}" for p, a in data["probes"]))
            for row in TIER_ROWS:
                vals = row_values(data, row)
                if vals is None:
                    continue
                va, vb = tier_verdict(vals, A), tier_verdict(vals, B)
                obs.setdefault(row[0], []).append((name, va, vb))
                ck.check(run, f"tier {TIER_LABEL.get(row[0], row[0])} [{name}]: verdict for A", va == thr,
                         f"{'throttled' if va else 'not throttled' if va is not None else 'no data'}")
                if vb is not None:
                    ck.check(run, f"tier {TIER_LABEL.get(row[0], row[0])} [{name}]: verdict for B", vb is False,
                             "throttled" if vb else "not throttled")
        r["tier_obs"] = obs
        if r.get("many_memcgs"):
            ck.check(run, f"cgroup iterator walks all {r.get('memcgs_total')} memcgs "
                          f"({r['many_memcgs']} added after the measurement)",
                     (r.get("iter_memcgs") or 0) >= r.get("memcgs_total", 0) and not r.get("iter_errors"),
                     f"iter tier has {fmt(r.get('iter_memcgs'), 0)} cgroups; A events "
                     f"{fmt(r.get('iter_A_events'), 0)}; errors: {r.get('iter_errors') or 'none'}")
    # A tier with no verdict in a condition (no agent of any boot of it had it live) is MISSING.
    fb_conds = sorted({r["condition"] for r in results.values() if r.get("variant") == "fallback"})
    for cond in dict.fromkeys(r["condition"] for r in results.values()):
        live = {rid for r in results.values() if r["condition"] == cond for rid in r.get("tier_obs", {})}
        for rid, *_ in TIER_ROWS:
            if rid in live:
                continue
            if cond in fb_conds or not args.fallback_reason:
                why = "not live in any agent of this condition"
            else:
                why = args.fallback_reason.format(conds=", ".join(fb_conds) or "none")
            ck.missing(cond, f"tier {TIER_LABEL.get(rid, rid)}", why)
    return ck


def report(args, results, ck, total_s):
    A = args.cgroup_a
    lines = []
    add = lines.append
    add("## Lab results\n")
    add(f"Kernel {args.kver}, QEMU TCG, 2 vCPU, {args.mem_mib} MiB, warm-up {args.warmup} s, "
        f"transfer {args.transfer} s, scrape/eval interval {args.scrape_interval}, alert `for` "
        f"{args.lab_for or 'as in the rules file'}. Total run time {total_s:.0f} s.\n")
    add("| boot | receiver kB/s | clamped (20 Hz TCP_INFO) | ss samples clamped | A pgscan/pgsteal (guest) "
        "| A ratio max | A events | A pressure s | A clamps | A clamped sockets max | accounting | throttling alert |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cond, r in results.items():
        hooks = sorted({w[2] for w in r.get("webhook", []) if w[1] == "firing" and w[2] in args.throttle_alerts
                        and w[3] == A})
        add(f"| {cond} | {fmt(r.get('recv_kBps'), 0)} | {fmt(r.get('recv_clamped_frac'))} | "
            f"{r.get('ss_clamped', 0)}/{r.get('ss_samples', 0)} | "
            f"{r.get('guest_A_pgscan', '?')}/{r.get('guest_A_pgsteal', '?')} | {fmt(r.get('A_ratio_max'), 3)} | "
            f"{fmt(r.get('A_events'))} | {fmt(r.get('A_pressure_s'))} | {fmt(r.get('A_clamps'))} | "
            f"{fmt(r.get('A_clamped_sockets_max'))} | {fmt(r.get('socket_accounting'))} | "
            f"{', '.join(hooks) or 'none'} |")
    if args.agent:
        add("\n### Per-tier verdict for cgroup A (each tier on its own)\n")
        add("Cell: the verdict, ✓ right / ✗ WRONG, and [the agents that had the tier live; fb: = in the "
            "condition's fallback boot]. "
            "MISSING: no agent of any boot of that condition had the tier live (no verdict, not a pass).\n")
        conds = list(dict.fromkeys(r["condition"] for r in results.values()))
        add("| tier | " + " | ".join(conds) + " |")
        add("|---|" + "---|" * len(conds))
        for rid, *_ in TIER_ROWS:
            cells = []
            for cond in conds:
                seen = [(o, r.get("run")) for r in results.values() if r["condition"] == cond
                        for o in r.get("tier_obs", {}).get(rid, [])]
                if not seen:
                    cells.append("**MISSING**")
                    continue
                thr = cond in THROTTLED
                verdicts = {("throttled" if va else "quiet" if va is not None else "no data") for (_, va, _), _ in seen}
                ok = all(va == thr for (_, va, _), _ in seen)
                who = ", ".join(name if run_ == cond else f"fb:{name}" for (name, _, _), run_ in seen)
                cells.append(f"{'/'.join(sorted(verdicts))} {'✓' if ok else '✗ WRONG'} [{who}]")
            add(f"| {TIER_LABEL.get(rid, rid)} | " + " | ".join(cells) + " |")
        add("\n### Detection latency\n")
        add("Host clock throughout (guest console lines are timestamped on arrival). Socket pressure starts "
            "at the first reclaim scan of A (the guest polls memory.stat at 1 Hz); a clamp needs a socket, "
            "so clamp metrics start at the receiver's first clamped TCP_INFO (20 Hz). Negative: the alert "
            "fired on socket pressure before the transfer began.\n")
        add("| boot | A scanned → agent events | → Prometheus events | → alert at webhook | "
            "first clamp → agent clamps | → Prometheus clamps | → alert at webhook |")
        add("|---|---|---|---|---|---|---|")
        for run, r in results.items():
            if r.get("condition") not in THROTTLED:
                continue
            lat = r.get("latency", {})
            add(f"| {run} | " + " | ".join(
                f"{lat[k]:.1f} s" if k in lat else "never" for k in
                ("agent_events", "prom_events", f"alert_{A}", "agent_clamps", "prom_clamps",
                 f"alert_{A}_from_clamp")) + " |")
        add("\nAgents per boot (headline columns and latency: the first agent): " + "; ".join(
            f"{run}: " + ", ".join(f"{n} `{f}`" for n, f in r.get("agents", [])) for run, r in results.items()))
        add("\nSignal sources the first agent chose: " + "; ".join(
            f"{c}: " + ", ".join(f"{k}={v}" for k, v in sorted(r.get("signal_source", {}).items()))
            for c, r in results.items()))
        add("\neBPF probes attached: " + "; ".join(
            f"{run}/{n}: " + ", ".join(f"{p}={a}" for p, a in d.get("probes", []))
            for run, r in results.items() for n, d in r.get("agent_tiers", {}).items()))
    if args.agent:
        add("\n### eBPF per-event cost (in-kernel, `kernel.bpf_stats_enabled=1` in the guest, under TCG)\n")
        add("| boot / agent | program | runs | ns per run |")
        add("|---|---|---|---|")
        for run, r in results.items():
            for n, d in r.get("agent_tiers", {}).items():
                for prog, (ns, runs) in sorted(d.get("cost", {}).items()):
                    add(f"| {run} / {n} | `{prog}` | {runs:.0f} | {ns:.0f} |")
    fails = ck.failed()
    miss_rows = [r for r in ck.rows if r[2] is None]
    add(f"\n{len([r for r in ck.rows if r[2]])} checks passed, {len(fails)} failed, "
        f"{len(miss_rows)} MISSING (not verifiable with this agent or run).")
    for cond, name, ok, detail in fails:
        add(f"- FAIL {cond}: {name} {detail}")
    for cond, name, ok, detail in miss_rows:
        add(f"- MISSING {cond}: {name}: {detail}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def find_agent(explicit):
    if explicit:
        return os.path.abspath(explicit)
    for cand in ("build-lab", "build"):
        p = os.path.join(REPO, cand, "sockpressure_exporter")
        if os.access(p, os.X_OK):
            return p
    return None


def prepare_rules(args, rundir):
    """The project's alert rules, with every `for:` shortened to --lab-for so a 30 s transfer can
    fire them (the thresholds and expressions stay as shipped). Falls back to a lab rule when the
    rules file is not there yet."""
    src = args.rules
    if not src:
        cand = os.path.join(REPO, "alerts", "sockpressure-rules.yaml")
        src = cand if os.path.exists(cand) else os.path.join(LAB_DIR, "rules", "fallback.yaml")
    args.rules_source = os.path.relpath(src, REPO)
    with open(src) as f:
        text = f.read()
    if args.lab_for:
        text = re.sub(r"(?m)^(\s*)for:\s*\S+\s*$", lambda m: f"{m.group(1)}for: {args.lab_for}", text)
    out = os.path.join(rundir, "rules.yaml")
    with open(out, "w") as f:
        f.write(text)
    names = re.findall(r"(?m)^\s*-?\s*alert:\s*(\S+)", text)
    args.throttle_alerts = [n for n in names if n in THROTTLE_ALERTS or n == FALLBACK_THROTTLE_ALERT]
    if not args.throttle_alerts:
        raise SystemExit(f"lab: no throttling alert ({', '.join(THROTTLE_ALERTS)}) in {src}")
    return out


def main():
    ap = argparse.ArgumentParser(description="sockpressure kernel lab (see tests/lab/README.md)")
    ap.add_argument("--conditions", default=",".join(CONDITIONS),
                    help="comma-separated subset of " + ",".join(CONDITIONS))
    ap.add_argument("--agent", help="agent binary (default: build-lab/ or build/ sockpressure_exporter)")
    ap.add_argument("--no-agent", action="store_true", help="kernel reproduction only, no agent/Prometheus")
    ap.add_argument("--agent-args", default="--signal.all-tiers",
                    help="extra agent flags (default settings plus the per-tier export)")
    ap.add_argument("--fallback-conditions", default="nopressure,swap,noswap,nosocket",
                    help="conditions booted a second time with the forced-fallback agents (--fallback-agents), so "
                         "the kprobe/tp_btf tiers get a verdict; \"\" = none")
    ap.add_argument("--fallback-agents", default=FALLBACK_AGENTS,
                    help="the agents of the fallback boots, NAME=FLAGS;NAME=FLAGS (each on its own port)")
    ap.add_argument("--memcg-limit", default="640M",
                    help="put A and B under a parent /lab with this memory.max (limit reclaim; \"\" = global reclaim by kswapd, the first prototype, which throttles only intermittently on a busy host)")
    ap.add_argument("--many-memcgs", type=int, default=1100,
                    help="after the measurement, create this many more memcgs and check the cgroup iterator "
                         "walks them all (0 = off)")
    ap.add_argument("--many-memcgs-conditions", default="nopressure",
                    help="the default boots that do it (comma-separated)")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--transfer", type=int, default=30)
    ap.add_argument("--mem-mib", type=int, default=1024)
    ap.add_argument("--scrape-interval", default="1s")
    ap.add_argument("--lab-for", default="0s", help="replace every alert `for:` (empty: keep the rules' own)")
    ap.add_argument("--rules", help="alert rules file (default alerts/sockpressure-rules.yaml)")
    ap.add_argument("--settle", type=float, default=15, help="seconds to keep scraping after the transfer")
    ap.add_argument("--alert-timeout", type=float, default=60,
                    help="max seconds to wait after the transfer for the throttling alert")
    ap.add_argument("--boot-timeout", type=int, default=90)
    ap.add_argument("--linger", type=int, default=600)
    ap.add_argument("--results", help="results directory (default tests/lab/.cache/results/<time>)")
    args = ap.parse_args()
    # ctest's timeout sends SIGTERM: turn it into SystemExit so the `finally` blocks still kill
    # QEMU, Prometheus and Alertmanager (they run in their own sessions and would outlive us).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.cgroup_a, args.cgroup_b = ("/lab/A", "/lab/B") if args.memcg_limit else ("/A", "/B")
    t0 = time.time()

    conds = [c for c in args.conditions.split(",") if c]
    fb_conds = [c for c in args.fallback_conditions.split(",") if c]
    bad = [c for c in conds + fb_conds if c not in CONDITIONS]
    if bad:
        raise SystemExit(f"lab: unknown condition(s) {bad}; known: {CONDITIONS}")
    missing = []
    args.qemu = shutil.which("qemu-system-x86_64")
    if not args.qemu:
        missing.append("qemu-system-x86_64 (Debian package qemu-system-x86)")
    if args.no_agent:
        args.agent = None
    else:
        args.agent = find_agent(args.agent)
        if not args.agent:
            missing.append("the agent binary (build it: cmake -S . -B build-lab -DCMAKE_BUILD_TYPE=Release && "
                           "cmake --build build-lab), or pass --no-agent for the kernel reproduction only")
        args.prometheus = shutil.which("prometheus")
        args.alertmanager = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        if not args.prometheus:
            missing.append("prometheus (Debian package prometheus)")
        if not args.alertmanager:
            missing.append("prometheus-alertmanager (Debian package prometheus-alertmanager)")
    fb_agents = [tuple(x.split("=", 1)) for x in args.fallback_agents.split(";") if x.strip()]
    if any(len(a) != 2 for a in fb_agents):
        raise SystemExit("lab: --fallback-agents wants NAME=FLAGS;NAME=FLAGS")
    args.fallback_reason = None
    if args.agent and fb_conds and fb_agents:
        # The fallback boots need an agent that can be forced onto an attach type.
        try:
            helptext = subprocess.run([args.agent, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, timeout=30).stdout
        except Exception as e:  # noqa: BLE001
            helptext = str(e)
        lacking = [f for f in FALLBACK_FLAGS if f not in helptext and any(f in fl for _, fl in fb_agents)]
        if lacking:
            log(f"[MISSING] agent has no {', '.join(lacking)}: fallback boots skipped")
            args.fallback_reason = (f"agent has no {', '.join(lacking)}: fallback tiers cannot be forced, "
                                    "fallback boots skipped")
            fb_conds = []
        else:
            args.fallback_reason = ("not live in the default agent (a better attach type wins on this kernel); "
                                    "the forced-fallback agents boot only in: {conds}")
    elif args.agent:
        args.fallback_reason = "not live in the default agent; fallback boots disabled (--fallback-conditions)"
    runs = [(c, c, [("default", args.agent_args)]) for c in conds]
    runs += [(f"{c}-fallback", c, fb_agents) for c in conds if c in fb_conds]
    if missing:
        print("lab: ERROR: missing prerequisites:\n  - " + "\n  - ".join(missing), file=sys.stderr)
        return 2

    rundir = args.results or os.path.join(LAB_DIR, ".cache", "results", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(rundir, exist_ok=True)
    build = [os.path.join(LAB_DIR, "build-guest")] + (["--agent", args.agent] if args.agent else [])
    log("building guest (cached by inputs)")
    p = subprocess.run(build, stdout=subprocess.PIPE, text=True, timeout=1800)
    if p.returncode != 0:
        print("lab: ERROR: build-guest failed (see messages above)", file=sys.stderr)
        return 2
    guest_files = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    args.kver = guest_files.get("KVER", "?")
    if args.agent:
        args.rules_file = prepare_rules(args, rundir)
        log(f"agent {os.path.relpath(args.agent, REPO)}; rules {args.rules_source} (for: {args.lab_for or 'kept'}); "
            f"throttling alerts {args.throttle_alerts}")
    log(f"results in {os.path.relpath(rundir, REPO)}")

    results = {}
    for run, cond, agent_specs in runs:
        log(f"=== {run}: condition {cond}, agents {', '.join(n for n, _ in agent_specs)} ===")
        try:
            results[run] = run_condition(args, guest_files, run, cond, agent_specs, rundir)
        except Exception as e:  # noqa: BLE001 - one condition's crash must not hide the others
            results[run] = {"condition": cond, "run": run, "errors": [f"{type(e).__name__}: {e}"],
                            "variant": "default" if run == cond else "fallback"}
        r = results[run]
        log(f"{run}: receiver {fmt(r.get('recv_kBps'), 0)} kB/s, guest clamped={r.get('guest_clamped')}, "
            f"A pgscan/pgsteal {r.get('guest_A_pgscan')}/{r.get('guest_A_pgsteal')}, "
            f"wall {fmt(r.get('wall_s'), 0)} s")
    ck = assess(args, results)
    text = report(args, results, ck, time.time() - t0)
    print("\n" + text)
    with open(os.path.join(rundir, "summary.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(rundir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str, skipkeys=True)
    if ck.failed():
        log(f"FAILED ({len(ck.failed())} checks); logs in {os.path.relpath(rundir, REPO)}")
        return 1
    log("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
