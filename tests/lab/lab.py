#!/usr/bin/env python3
"""sockpressure kernel lab: host-side orchestrator (entry point: tests/lab/run).

For each condition it boots the Debian kernel under QEMU (TCG) with the lab
initramfs, lets the guest reproduce (or not) memcg socket pressure on a real TCP
receiver, and watches the agent inside the guest from the host through a real
Prometheus (scraping it via QEMU's port forward, with the project's alert rules)
and a real Alertmanager delivering to a local webhook. It then asserts the
per-condition expectations, the per-tier verdicts and measures detection
latency. Nothing leaves 127.0.0.1; the host's cgroups, sysctls and swap are
never touched (all pressure lives inside the guest). --arch arm64 does the same
with Debian's arm64 kernels under qemu-system-aarch64 -M virt and the cross-built
agent (ARCHES, ARCH_DEFAULTS).
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
import traceback
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
# proxy: the reporter's workload (guest/proxy.sh): a real nginx reverse proxy in A beside the hot
# ballast, its upstream across the netem link, curl downloading through it, and real fio in B running
# the report's job (ioengine=mmap) scaled to the guest; a control phase without fio comes first in the
# same boot. proxy-REMEDY applies one remedy before fio starts (on demand: the remedy table).
PROXY_REMEDIES = ["swapmax", "low", "min", "swapoff", "nosocket"]
PROXY_CONDS = {"proxy"} | {f"proxy-{r}" for r in PROXY_REMEDIES}
CONDITIONS = (["nopressure", "swap", "noswap", "nosocket", "churn", "prune", "slowread", "mmapread"]
              + sorted(PROXY_CONDS))
# mmapread: `swap` with B reading its file through mmap (fio's ioengine=mmap, the original report's
# job). Mapped pages B touched are referenced, so reclaim rotates rather than frees them: B itself may
# be scanned without reclaim and get socket pressure with no socket to throttle, which must never page.
# Whether A is clamped is judged by the guest's TCP_INFO ("varies"). On demand: the default run boots
# proxy in its place, which covers the same socket-less case with real fio.
NO_SOCKET_PRESSURE_CONDS = {"mmapread"} | PROXY_CONDS
# Conditions that put A under pressure the way `swap` does (churn = swap plus thousands of memory
# cgroups created and removed while it runs; prune = swap with a slow reader on a lossy path);
# THROTTLED: where the kernel really clamps (6.1, MGLRU off).
PRESSURE_CONDS = {"swap", "churn", "prune"}
# The slow-reader conditions (lab.read_kbps, lab.loss): `prune`, where the kernel prunes the
# receiver's queues under the pressure, and its control `slowread` (the same reader and path, no
# page-cache load), where it must not.
PRUNE_CONDS = {"prune", "slowread"}
# Booted with cgroup.memory=nosocket: sockets are not charged to memcgs.
NOSOCKET_CONDS = {"nosocket", "proxy-nosocket"}
# Kernels on which `prune` makes the kernel prune for A's receiver, as measured (tests/lab/README.md):
# on 6.1 the fair-share refusal in __sk_mem_raise_allocated() still asks sk_under_memory_pressure(),
# which includes the memcg's socket pressure; 6.12 asks sk_under_global_memory_pressure() ("sock: Fix
# misuse of sk_under_memory_pressure()"), so there the same workload is never refused and must not prune.
PRUNES_UNDER_MEMCG_PRESSURE = {"6.1"}
# The conditions of the default run, each in a boot of its own (the throughput reference and the
# reference swap boot stay free of the other agents); the other controls and prune/slowread run as
# combined boots, the fallback agents beside the default one (EXTRA_BOOTS): two boots fewer.
DEFAULT_CONDITIONS = ["nopressure", "swap", "churn"]
THROTTLED = PRESSURE_CONDS
# The kernel axis: Debian 12's two kernel series (build-guest --kernel) and the reclaim implementation
# (lab.mglru, /sys/kernel/mm/lru_gen/enabled). BASE is the reference the condition checks were written
# for; every other (kernel, reclaim) pair is judged by what the kernel did (the receiver's TCP_INFO),
# with the expectation below asserted for `swap` (the controls must never clamp on any kernel).
KERNELS = ["5.10", "6.1", "6.12", "7"]
MGLRU_MODES = ["off", "on"]
# 5.10 has no MGLRU (lru_gen arrived in 6.1): only "off" exists there.
NO_MGLRU = {"5.10"}
BASE = ("6.1", "off")
# (kernel, mglru) -> what the kernel does to A's receiver in `swap`, as measured (tests/lab/README.md):
# "throttled": clamped for most of the transfer, with the reference checks (throughput, ratio, alert);
# "clamped": clamped at least once (how steadily varies: 92-93 % of TCP_INFO samples measured on
# 6.12 MGLRU off), and the agent must agree with the kernel's ground truth; "varies": the kernel may
# or may not clamp in a given boot (6.12 MGLRU on: clamped fractions 0.52, 0.17 and 0 measured, the
# last one a boot that freed 57 % of what it scanned in A), so only the agent's agreement with that
# boot's ground truth is asserted; "quiet": never clamped. On 6.1, MGLRU never scanned A (pgscan 0);
# on 6.12 it still scans A's hot anon under the memcg limit, sometimes enough to throttle.
# 5.10 (no MGLRU) and 7.x: measured like 6.1 and 6.12 (docs/kernel.md, "Kernel by kernel").
SWAP_EXPECT = {("6.1", "off"): "throttled", ("6.12", "off"): "clamped",
               ("6.1", "on"): "quiet", ("6.12", "on"): "varies",
               ("5.10", "off"): "throttled", ("7", "off"): "clamped", ("7", "on"): "varies"}
# Boots added to the default run: the kernel axis within the CI budget. COND@KERNEL/MGLRU, "+fallback"
# = the fallback agents boot beside the default one (one boot proves every tier on that kernel).
EXTRA_BOOTS = ("noswap@6.1/off+fallback,nosocket@6.1/off+fallback,"
               "swap@6.12/off+fallback,swap@6.12/on+fallback,swap@6.1/on+fallback,"
               "prune@6.1/off+fallback,slowread@6.1/off+fallback,proxy@6.1/off+fallback,"
               # 5.10, where the vmpressure tier once attached and saw nothing (docs/kernel.md §9).
               "swap@5.10/off")
# Every tier the issue asks a verdict from. A row is (id, `source` label of sockpressure_tier_*, the
# sockpressure_probe_loaded{probe,attach} (from an older agent: _attached) that must be 1 for it to
# count as live, the families its verdict reads). eBPF sources are split by probe: the `fentry` source carries both the fentry
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
# The pruning rows: the function tier (tcp_collapse / tcp_prune_ofo_queue; probe tcp_prunes) and the
# drop tier (skb:kfree_skb with drop reason PROTO_MEM / TCP_OFO_QUEUE_PRUNE; probe tcp_drops). Their
# verdict ("pruned" or "quiet" for A) is held to what the kernel did in that boot (TcpExt), not to the
# throttling: see prune_truth().
PRUNE_FN_FAMS = ("prune_collapses_total", "ofo_prunes_total")
DROP_FAMS = ("rcv_mem_drops_total", "ofo_pruned_segments_total")
PRUNE_FAMS = PRUNE_FN_FAMS + DROP_FAMS
PRUNE_ROWS = [
    ("fentry-prunes", "fentry", ("tcp_prunes", "fentry"), PRUNE_FN_FAMS),
    ("kprobe-prunes", "kprobe", ("tcp_prunes", "kprobe"), PRUNE_FN_FAMS),
    ("tp_btf-drops", "tp_btf", ("tcp_drops", "tp_btf"), DROP_FAMS),
    ("raw_tp-drops", "raw_tp", ("tcp_drops", "raw_tp"), DROP_FAMS),
]
# Tiers a kernel cannot attach, measured, with why: the row is still MISSING there (no verdict, not a pass),
# but says so instead of blaming the run's agents. Keyed (row, kernel) on x86-64, (row, kernel, "arm64")
# on arm64 (unattachable()).
ARM64_61_FENTRY = ("Debian's arm64 6.1 has no ftrace direct calls (CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS: "
                   "arm64 6.4+), so its BPF trampoline cannot attach to a kernel function: fentry/fexit fail "
                   "and the agent uses kprobe (docs/arm64.md)")
ARM64_61_INLINED = ("Debian's arm64 6.1 build inlines tcp_prune_ofo_queue() (in neither its BTF nor kallsyms; "
                    "x86-64's 6.1 and arm64's 6.12 keep it): the prune function tier has nothing to attach to "
                    "(the drop tier counts the prunes' drops)")
UNATTACHABLE = {
    ("fentry-prunes", "6.1"): "6.1's x86-64 BPF trampoline takes at most 6 arguments and tcp_collapse() has 7: "
                              "the attach fails with -524 (ENOTSUPP) and the agent uses kprobe (more arguments: 6.6+)",
    ("fentry", "6.1", "arm64"): ARM64_61_FENTRY,
    ("fexit-clamps", "6.1", "arm64"): ARM64_61_FENTRY,
    ("fentry-prunes", "6.1", "arm64"): ARM64_61_FENTRY + "; and " + ARM64_61_INLINED,
    ("kprobe-prunes", "6.1", "arm64"): ARM64_61_INLINED,
}
# Probes a forced agent cannot attach on a kernel, measured, with why (no verdict there, not a pass).
FORCED_UNATTACHABLE = {
    ("tcp_drops", "tp_btf", "5.10"): "5.10 has no skb drop reasons (5.17+): nothing to filter PROTO_MEM drops on",
    ("tcp_drops", "raw_tp", "5.10"): "5.10 has no skb drop reasons (5.17+): nothing to filter PROTO_MEM drops on",
    ("tcp_prunes", "kprobe", "6.1", "arm64"): ARM64_61_INLINED,
}
# The guest's architecture (--arch): QEMU binary and machine, serial console, the agent's default build
# tree, and `slow`, the factor the host-side timeouts (boot, the end of the transfer, the alert) are scaled
# by. A margin, not a measured ratio: the first arm64 runs reached /init in 5-8 s and finished a `swap`
# boot in about 2 minutes, as x86-64's do, but aarch64 TCG (every instruction translated) has no record
# yet on a host loaded by another lab.
ARCHES = {
    "amd64": {"qemu": "qemu-system-x86_64", "pkg": "qemu-system-x86", "machine": [], "cpu": "max",
              "console": "ttyS0", "builds": ("build-lab", "build"), "slow": 1},
    "arm64": {"qemu": "qemu-system-aarch64", "pkg": "qemu-system-arm", "machine": ["-M", "virt"],
              # pauth-impdef: the QARMA pointer authentication of plain `max` dominates TCG's time.
              "cpu": "max,pauth-impdef=on", "console": "ttyAMA0", "builds": ("build-arm64",), "slow": 3},
}


# What --arch arm64 boots when not told otherwise: `nopressure` and `swap` on 6.1 and on 6.12, each with the
# fallback agents beside the default one, so that every tier that loads on that kernel gets a verdict in the
# throttled condition and in its control (four boots; no churn soak, no many-memcgs walk).
ARCH_DEFAULTS = {
    "amd64": {"conditions": ",".join(DEFAULT_CONDITIONS), "extra_boots": EXTRA_BOOTS, "fallback_conditions": "swap",
              "many_memcgs_conditions": "nopressure"},
    "arm64": {"conditions": "", "extra_boots": "nopressure@6.1/off+fallback,swap@6.1/off+fallback,"
                                               "nopressure@6.12/off+fallback,swap@6.12/off+fallback",
              "fallback_conditions": "", "many_memcgs_conditions": ""},
}


def unattachable(table, key, arch):
    """The measured reason `key` cannot attach on this architecture's kernel, or None."""
    return table.get(key + (arch,)) if arch != "amd64" else table.get(key)
TCPEXT_KEYS = ("PruneCalled", "RcvPruned", "OfoPruned", "TCPRcvCollapsed", "TCPRcvQDrop", "TCPOFODrop")
TIER_LABEL = {"fentry": "fentry (vmpressure)", "fexit-clamps": "fexit (window clamps)",
              "kprobe": "kprobe (vmpressure)", "kprobe-clamps": "kprobe (window clamps)",
              "tp_btf": "tp_btf (window clamps)", "raw_tp": "raw_tp (window clamps)",
              "iter": "iter (socket pressure)", "iter-census": "iter (TCP census)",
              "fentry-prunes": "fentry (prunes: tcp_collapse, tcp_prune_ofo_queue)",
              "kprobe-prunes": "kprobe (prunes: tcp_collapse, tcp_prune_ofo_queue)",
              "tp_btf-drops": "tp_btf (memory drops: kfree_skb)", "raw_tp-drops": "raw_tp (memory drops: kfree_skb)"}
# Second agent configuration, booted once more per --fallback-conditions: agents that are forced
# onto the fallback attach types, which never win on a kernel with fentry/fexit. name=flags;...
FALLBACK_AGENTS = ("kprobe=--signal.all-tiers --bpf.vmpressure-attach=kprobe --bpf.clamps-attach=kprobe "
                   "--bpf.prunes-attach=kprobe;"
                   "tp_btf=--signal.all-tiers --bpf.clamps-attach=tp_btf --bpf.drops-attach=tp_btf;"
                   "raw_tp=--signal.all-tiers --bpf.clamps-attach=raw_tp --bpf.drops-attach=raw_tp "
                   "--no-collector.sock_diag")
FALLBACK_FLAGS = ("--bpf.vmpressure-attach", "--bpf.clamps-attach", "--bpf.prunes-attach", "--bpf.drops-attach")
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

    def query(self, expr, timeout=5.0, strict=False, at=None):
        """The instant vector of `expr` (at host time `at`, default now); [] when the query fails, or
        with `strict` an exception (a query over every churned cgroup can outlast the default timeout
        on a busy host, and an empty answer would then read as "none seen" or "none pressured")."""
        q = {"query": expr}
        if at is not None:
            q["time"] = f"{at:.3f}"
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode(q)
        try:
            d = json.loads(http_get(url, timeout))
        except Exception as e:
            if strict:
                raise RuntimeError(f"Prometheus query failed ({e}): {expr}") from e
            return []
        if d.get("status") != "success":
            if strict:
                raise RuntimeError(f"Prometheus query failed ({d.get('error')}): {expr}")
            return []
        return [(r["metric"], float(r["value"][1])) for r in d["data"]["result"]]

    def scalar(self, expr, at=None):
        r = self.query(expr, at=at)
        return r[0][1] if r else None

    def steps(self, expr, start, end):
        """The whole-second host times in [start, end] at which `expr` has a sample (1 s steps); [] when
        the query fails or nothing matched."""
        q = {"query": expr, "start": str(math.ceil(start)), "end": str(math.floor(end)), "step": "1"}
        try:
            d = json.loads(http_get(f"{self.base}/api/v1/query_range?" + urllib.parse.urlencode(q), 10.0))
        except Exception:
            return []
        if d.get("status") != "success":
            return []
        return sorted({int(float(t)) for r in d["data"]["result"] for t, _ in r["values"]})


def qemu_cmd(qemu, guest_files, append, mem_mib, fwd, disk=True, arch="amd64"):
    """The lab's QEMU command line: TCG on 2 vCPUs, the guest's console on stdio, user networking
    that only forwards `fwd` (hostfwd=... entries, comma-separated) to host loopback."""
    a = ARCHES[arch]
    return [qemu] + a["machine"] + [
        "-accel", "tcg,thread=multi", "-smp", "2", "-m", str(mem_mib), "-cpu", a["cpu"],
        "-kernel", guest_files["KERNEL"], "-initrd", guest_files["INITRD"], "-append", " ".join(append),
    ] + ([
        # Read-only data disk: several runs (and conditions) share one cached image.
        "-drive", f"file={guest_files['DISK']},if=virtio,format=raw,readonly=on",
    ] if disk else []) + ([
        # The proxy condition's curl, fio and nginx (build-guest: too big for the initramfs), /dev/vdb.
        "-drive", f"file={guest_files['TOOLS']},if=virtio,format=raw,readonly=on",
    ] if disk and guest_files.get("TOOLS") else []) + [
        "-netdev", f"user,id=n0,{fwd}",
        "-device", "virtio-net-pci,netdev=n0",
        "-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot",
    ]


class Console:
    """A running QEMU whose serial console lines are timestamped on the host as they arrive; the
    guest's "LAB kind key=value ..." lines are kept as events."""

    def __init__(self, cmd, log_path):
        self.events = []  # (host_time, kind, fields, raw)
        self.lock = threading.Lock()
        self.log_path = log_path
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


class Guest(Console):
    """One lab boot: one condition with its agents."""

    def __init__(self, args, guest_files, cond, agents, rundir, run=None, mglru="off", many=False):
        """agents: [(name, flags, host_port)]; agent k listens on GUEST_AGENT_PORT + k."""
        append = [
            f"console={ARCHES[args.arch]['console']}", "quiet", "loglevel=4", "panic=-1", "mitigations=off",
            f"lab.cond={cond}", f"lab.mglru={mglru}", f"lab.warmup={args.warmup}", f"lab.transfer={args.transfer}",
            f"lab.agent_port={GUEST_AGENT_PORT}", f"lab.linger={args.linger}",
        ]
        if args.memcg_limit:
            append.append(f"lab.memcg_limit={args.memcg_limit}")
        if args.many_memcgs and many:
            append.append(f"lab.many_memcgs={args.many_memcgs}")
        if cond == "churn":
            append += [f"lab.churn={args.churn}", f"lab.churn_seconds={args.churn_seconds}"]
        if cond in PRUNE_CONDS:
            append += [f"lab.read_kbps={args.read_kbps}", f"lab.loss={args.loss}"]
            for key in ("adv_win_scale", "tcp_mem", "peer_wmem", "bystander", "hoard_sockets"):
                if getattr(args, key):
                    append.append(f"lab.{key}={getattr(args, key).replace(' ', ',')}")
        for k, (_, flags, _) in enumerate(agents):
            # Spaces become commas, commas semicolons (guest/init turns them back).
            enc = ",".join(a.replace(",", ";") for a in flags.split())
            if enc:
                append.append(f"lab.agent{'' if k == 0 else k + 1}_args={enc}")
        if len(agents) > 1:
            append.append(f"lab.agents={len(agents)}")
        fwd = ",".join(f"hostfwd=tcp:127.0.0.1:{hp}-:{GUEST_AGENT_PORT + k}"
                       for k, (_, _, hp) in enumerate(agents))
        if cond in NOSOCKET_CONDS:
            append.append("cgroup.memory=nosocket")
        # Every boot traces the kernel's own vmpressure() verdicts (guest/vmptrace.sh): the judge the
        # agent's socket-pressure events are held to.
        offs = vmp_offsets(guest_files["KERNEL"])
        if offs:
            append.append(f"lab.vmp_offsets={offs}")
        if guest_files.get("KVER", "").startswith("7."):
            append.append("lab.vmp_layout=order")
        # User networking only forwards the agents' ports to host loopback.
        super().__init__(qemu_cmd(args.qemu, guest_files, append, args.mem_mib, fwd, arch=args.arch),
                         os.path.join(rundir, f"{run or cond}.console.log"))


_VMP_OFFSETS = {}


def vmp_offsets(kernel_image):
    """CSS_CGROUP,CGROUP_KN,KN_NAME: where the proxy condition's vmpressure trace finds a memcg's cgroup
    name (core_fields.py --offsets, from the kernel's BTF); None without bpftool (the guest then says
    the trace is off, and the host reports it MISSING)."""
    if kernel_image not in _VMP_OFFSETS:
        try:
            p = subprocess.run([sys.executable, os.path.join(LAB_DIR, "core_fields.py"), "--offsets", kernel_image],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
            o = dict(x.split("=", 1) for x in p.stdout.split() if "=" in x) if p.returncode == 0 else {}
            _VMP_OFFSETS[kernel_image] = (f"{int(o['mem_cgroup.css']) + int(o['cgroup_subsys_state.cgroup'])},"
                                          f"{o['cgroup.kn']},{o['kernfs_node.name']}") if o else None
        except (OSError, subprocess.SubprocessError, KeyError, ValueError):
            _VMP_OFFSETS[kernel_image] = None
    return _VMP_OFFSETS[kernel_image]


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
                # The job name the project's rules select on (agentSelector in mixin/config.libsonnet).
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


def run_condition(args, guest_files, boot, rundir):
    """Boot one condition with the agents agent_specs [(name, flags)]; collect what the checks need.
    Headline checks (events, clamps, alerts, latency) use the first agent; tier verdicts all agents."""
    run, cond, agent_specs = boot["run"], boot["cond"], boot["agents"]
    agents = [(name, flags, free_port()) for name, flags in agent_specs]
    res = {"errors": [], "agents": [(n, f) for n, f in agent_specs],
           **{k: boot[k] for k in ("run", "condition", "kernel", "mglru", "variant", "group", "many", "expect")}}
    agent_host_port = agents[0][2]
    stack = Stack(args, cond, agents, rundir, run) if args.agent else None
    guest = Guest(args, guest_files, cond, agents, rundir, run, boot["mglru"], boot["many"])
    log(f"{run}: QEMU started (console log {os.path.relpath(guest.log_path, REPO)})")
    A, B = args.cgroup_a, args.cgroup_b
    first = {}  # name -> host time when first seen

    def mark(name, cond_ok, t=None):
        if cond_ok and name not in first:
            first[name] = t or time.time()

    # The guest may extend its warm-up up to 180 s (lab.warmup_max) on a slow host. The budget after
    # the warm-up starts is counted from when it did: a boot that took long (TCG on a loaded host took
    # 149 s to reach it, against 20-30 s on a quiet one) must not eat the warm-up's and transfer's time.
    def deadline():
        w = guest.first("warmup_start")
        # The proxy condition also waits for doctor and stops fio after its transfer.
        return ((w[0] if w else guest.started + args.boot_timeout) + max(args.warmup, 180) + args.transfer
                + 60 * args.slow + (150 if cond in PROXY_CONDS else 0))
    try:
        while time.time() < deadline() and guest.alive() and not guest.first("done"):
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
            tail = console_tail(guest.log_path)
            res["console_tail"] = tail
            res["early_death"] = early_death(guest, tail)
            last = tail[-1] if tail else "(console empty)"
            res["errors"].append(f"guest did not finish ({'QEMU exited' if not guest.alive() else 'timeout'} "
                                 f"after {time.time() - guest.started:.0f} s); last console line: {last}")
        if args.agent and guest.first("done"):
            # Let the last scrapes and rule evaluations land; in the throttled condition also wait
            # (bounded) for the alert to make it through Alertmanager.
            settle_until = time.time() + args.settle
            alert_until = time.time() + args.alert_timeout
            while time.time() < max(settle_until, alert_until if boot["expect"] == "throttled" else 0):
                for t, status, labels in stack.webhook.alerts():
                    if status == "firing" and labels.get("alertname") in args.throttle_alerts:
                        mark("alert_" + labels.get("cgroup", "?"), True, t)
                if time.time() >= settle_until and f"alert_{A}" in first:
                    break
                if not guest.alive():
                    break
                time.sleep(0.5)
        if cond == "churn" and guest.first("done"):
            collect_churn(res, args, guest, stack, agent_host_port)
        many = None
        if boot["many"]:
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
            if cond in PROXY_CONDS:
                collect_proxy_control(res, stack, guest, A, B, agents[0][0])
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
    if cond in PROXY_CONDS:
        collect_proxy(res, guest)
    res["agent_missing"] = bool(guest.first("agent_missing"))
    res["wall_s"] = time.time() - guest.started
    return res


# A guest kernel that crashed in our code shows one of these with a BPF frame in the trace.
KERNEL_CRASH = re.compile(r"Kernel panic|BUG:|Oops|general protection fault|Call Trace|RIP:")


def console_tail(path, n=25):
    """The last n console lines (without the host timestamp) of a boot, for the failure report."""
    try:
        with open(path, errors="replace") as f:
            lines = [ln.rstrip("\n").split(None, 1)[-1] if ln[:1] != "#" else "" for ln in f]
    except OSError:
        return []
    return [ln for ln in lines if ln.strip()][-n:]


def early_death(guest, tail):
    """True when QEMU exited before the guest began the measurement (no warmup_start) and the console
    shows no kernel crash involving BPF: a boot lost to the emulator, not a result. Such a boot is
    booted again once (main()); a crash with a BPF frame, or any death after the measurement began,
    is a failure."""
    if guest.alive() or guest.first("warmup_start") or guest.first("fatal"):
        return False  # still running (timeout), measured something, or the guest said what failed
    text = "\n".join(tail)
    return not (KERNEL_CRASH.search(text) and "bpf" in text.lower())


def set_aside_lost_boot(rundir, run):
    """Keep a lost boot's console log and Prometheus/Alertmanager directory under .lost. names, so the
    retry starts with empty stores (a reopened TSDB would keep the lost agents' up=0 samples)."""
    for name, lost in ((f"{run}.console.log", f"{run}.lost.console.log"), (f"{run}.stack", f"{run}.lost.stack")):
        src, dst = os.path.join(rundir, name), os.path.join(rundir, lost)
        if os.path.exists(src):
            shutil.rmtree(dst, ignore_errors=True)
            os.replace(src, dst)


def collect_churn(res, args, guest, stack, agent_host_port):
    """The churn soak: wait (bounded) until the guest has removed its last churned cgroup and let the
    agent run 15 s more, then look for anything left of the removed cgroups in the agent's output."""
    until = time.time() + args.churn_seconds + 120
    while not guest.first("churn_after") and time.time() < until and guest.alive():
        time.sleep(0.5)
    start, done, after = guest.first("churn_start"), guest.first("churn_done"), guest.first("churn_after")
    if not (start and done and after):
        res["errors"].append("guest did not finish the churn (no churn_start/churn_done/churn_after)")
        return
    kib = lambda e, k="rss_kib": int(e[2].get(k) or 0)  # noqa: E731
    res["churn"] = {"created": int(done[2].get("created", 0)), "rounds": int(done[2].get("rounds", 0)),
                    "seconds": round(done[0] - start[0], 1), "dying": done[2].get("dying_cgroups"),
                    "rss_before_kib": kib(start), "rss_peak_kib": kib(done, "peak_rss_kib"),
                    "rss_after_kib": kib(after), "alive": after[2].get("agent_alive") == "1",
                    "errors": [e[3] for e in guest.all("churn_error")]}
    if args.agent:
        try:
            text = http_get(f"http://127.0.0.1:{agent_host_port}/metrics", 60)
            stale = sorted({l.get("cgroup") for _, l, _ in parse_prom_text(text)
                            if l.get("cgroup", "").startswith("/churn")})
            res["churn"]["stale_cgroups"] = stale
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            res["errors"].append(f"agent scrape after the churn: {e}")
        p = stack.prom
        rng = f"[{int(time.time() - guest.started) + 30}s]"
        # Every churned cgroup is exported while it lives (thousands of cgroups, tens of series each
        # with --signal.all-tiers): these queries take seconds, so they get a minute, and a failure
        # is an error, never an empty answer.
        try:
            seen = p.query(f'count(count by (cgroup) (last_over_time('
                           f'{{__name__=~"sockpressure_.+",cgroup=~"/churn/.+"}}{rng})))', 60, strict=True)
            res["churn"]["seen_cgroups"] = seen[0][1] if seen else 0
            # One family per query: max_over_time drops the metric name, and two families with the
            # same labels in one vector are an error ("vector cannot contain metrics with the same
            # labelset"), which the lenient client used to read as "no churned cgroup pressured".
            res["churn"]["pressured_cgroups"] = sorted({
                m.get("cgroup")
                for fam in ("memcg_socket_pressure_events_total", "tcp_window_clamps_total")
                for m, v in p.query(f'max_over_time(sockpressure_{fam}{{cgroup=~"/churn.*"}}{rng}) > 0',
                                    60, strict=True)})
        except RuntimeError as e:
            res["errors"].append(f"churn: {e}")


def collect_proxy_control(res, stack, guest, A, B, agent):
    """The agent's view at the end of the proxy condition's control phase (before fio started): what
    its first agent had counted for A and B by then, from Prometheus at that host time."""
    end = guest.first("control_end")
    if not end:
        res["control_agent"] = {"ok": False, "values": "no control_end on the console"}
        return
    vals, ok = {}, True
    for cg, key in ((A, "A"), (B, "B")):
        for fam in ("memcg_socket_pressure_events_total", "tcp_window_clamps_total", "tcp_clamped_sockets"):
            v = stack.prom.query(f'max_over_time(sockpressure_{fam}{{cgroup="{cg}",lab_agent="{agent}"}}'
                                 f'[{int(end[0] - guest.started) + 5}s])', at=end[0])
            vals[f"{key} {fam}"] = v[0][1] if v else 0
    # The agent must have been scraped in the phase, or zeros prove nothing.
    up = stack.prom.query(f'max_over_time(up{{lab_agent="{agent}"}}[{int(end[0] - guest.started) + 5}s])', at=end[0])
    ok = bool(up) and up[0][1] == 1
    res["control_agent"] = {"ok": ok, "values": vals}


def collect_proxy(res, guest):
    """The proxy condition's guest lines: the control phase, fio, OOM kills, swap and doctor's report."""
    c = guest.first("control_result")
    if c:
        res["control_kBps"] = float(c[2]["kBps"])
        res["control_checks"] = int(c[2].get("checks", 0))
        res["control_clamped"] = int(c[2].get("clamped_checks", 0))
    e = guest.first("control_end")
    res["control_end_s"] = round(e[0] - guest.started, 1) if e else None
    m = guest.first("remedy")
    res["remedy"] = m[2].get("name") if m else None
    f = guest.first("fio")
    if f:
        res["fio_bw_kibps"] = float(f[2]["bw_kibps"]) if f[2].get("bw_kibps") else None
        res["fio_error"] = f[2].get("error")
    for e in guest.all("memory_events"):
        res[f"oom_kill_{e[2].get('cg', '').rsplit('/', 1)[-1]}"] = int(e[2].get("oom_kill", 0))
    for e in guest.all("stat"):
        res[f"guest_{e[2].get('cg', '').rsplit('/', 1)[-1]}_swap"] = int(e[2].get("swap", 0))
    v = guest.first("vmstat")
    res["pswpout"] = int(v[2].get("pswpout", 0)) if v else None
    done = guest.first("doctor_done")
    if not done:
        return
    with open(guest.log_path, errors="replace") as fh:
        text = [ln.split(" doctor: ", 1)[1].rstrip("\n") for ln in fh if " doctor: " in ln]
    A = "/lab/A"
    first = measured = None
    remedies_b = False
    for i, ln in enumerate(text):
        if ln.startswith("Remedies that fit /lab/B"):
            remedies_b = True
        if ln.startswith("Remedies that fit /lab/A") and i + 1 < len(text):
            first = re.sub(r"^\s*1\.\s*", "", text[i + 1]).strip()
            nxt = [x.strip() for x in text[i + 2:i + 4] if x.strip().startswith("measured:")]
            measured = nxt[0][len("measured:"):].strip() if nxt else None
    a_lines = [ln.strip() for ln in text if A in ln]
    res["doctor"] = {"rc": done[2].get("rc"), "names_a": bool(a_lines), "a_line": a_lines[0] if a_lines else None,
                     "first": first, "first_measured": measured, "remedies_b": remedies_b, "lines": len(text)}


def collect_guest(res, guest):
    r = guest.first("recv_result")
    res["recv_kBps"] = float(r[2]["kBps"]) if r else None
    if r:
        res["recv_clamped_frac"] = int(r[2]["clamped_checks"]) / max(1, int(r[2]["checks"]))
        res["recv_max_ssthresh"] = int(r[2].get("max_rcv_ssthresh", 0))
    # The proxy condition's control phase (phase=control_result) has its own count (collect_proxy).
    ss = [e for e in guest.all("ss") if e[2].get("phase") != "control_result"]
    res["ss_samples"] = len(ss)
    # `ss -tmi` samples where rcv_ssthresh sits at 4*advmss: the lab notes' measurement.
    res["ss_clamped"] = sum(1 for raw in (e[3] for e in ss) if _ss_clamped(raw))
    for e in guest.all("stat"):
        cg = e[2].get("cg")
        key = cg.rsplit("/", 1)[-1]  # A or B, with or without the lab/ parent
        res[f"guest_{key}_pgscan"] = int(e[2].get("pgscan", 0))
        res[f"guest_{key}_pgsteal"] = int(e[2].get("pgsteal", 0))
        res[f"guest_{key}_sock_throttled"] = e[2].get("sock_throttled")  # "absent" before 6.19
    # The kernel's own vmpressure() verdicts, traced in every boot (guest/vmptrace.sh).
    t = guest.first("vmp_trace")
    res["vmp_trace"] = (t[2].get("reason") or t[3]) if t and t[3].split()[2:3] != ["on"] else None
    v = guest.first("vmp_result")
    if v:
        res["vmp"] = {k: int(x) for k, x in v[2].items() if x.isdigit()}
    c = guest.first("clamp_first")
    res["first_clamp_s"] = float(c[2]["t"]) if c else None
    res["guest_clamped"] = c is not None
    b = guest.first("boot")
    res["boot_s"] = round(b[0] - guest.started, 1) if b else None
    res["kernel_release"] = b[2].get("kernel") if b else None
    m = guest.first("reclaim")
    res["guest_mglru"] = m[2].get("mglru") if m else None
    # The kernel's own pruning counters over the boot (TcpExt, node-wide; the receiver in A is the only
    # socket receiving bulk data).
    start, end = guest.first("tcpext"), guest.all("tcpext")[-1]  if guest.all("tcpext") else None
    if start and end and start[2].get("phase") == "start" and end[2].get("phase") == "end":
        res["tcpext"] = {k: int(end[2].get(k, 0)) - int(start[2].get(k, 0)) for k in TCPEXT_KEYS}


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
        res[f"{key}_pressure_sockets_max"] = p.scalar(
            f"max_over_time(sockpressure_memcg_socket_pressure_sockets{sel}{rng})")
        res[f"{key}_scanned"] = p.scalar(f"max_over_time(sockpressure_memcg_reclaim_scanned_pages_total{sel}{rng})")
        res[f"{key}_reclaimed"] = p.scalar(
            f"max_over_time(sockpressure_memcg_reclaim_reclaimed_pages_total{sel}{rng})")
        for fam in PRUNE_FAMS:
            res[f"{key}_{fam}"] = p.scalar(f"max_over_time(sockpressure_tcp_{fam}{sel}{rng})")
        # The agent's count when the vmpressure() trace stopped (guest/vmptrace.sh): the load goes on
        # after it, so the end-of-boot count is not comparable with the trace's.
        at = trace_end(guest)
        if at:
            res[f"{key}_events_at_trace_end"] = p.scalar(
                f"max_over_time(sockpressure_memcg_socket_pressure_events_total{sel}[5s])", at=at)
        # The kernel as the judge on 6.19+: 1 s steps in which memory.events.local sock_throttled moved (a
        # socket of the cgroup was found under pressure), those in which the agent's socket-pressure
        # seconds moved, and both. Absent (None) on kernels without the counter.
        thr = f"(increase(sockpressure_memcg_sock_throttled_total{sel}[2s]) > 0)"
        agent = f"(increase(sockpressure_memcg_socket_pressure_seconds_total{sel}[2s]) > 0)"
        res[f"{key}_sock_throttled"] = p.scalar(f"max_over_time(sockpressure_memcg_sock_throttled_total{sel}{rng})")
        res[f"{key}_judge_steps"] = p.scalar(f"count_over_time({thr}{rng[:-1]}:1s])")
        res[f"{key}_judge_agent_steps"] = p.scalar(f"count_over_time({agent}{rng[:-1]}:1s])")
        res[f"{key}_judge_both_steps"] = p.scalar(f"count_over_time(({thr} and {agent}){rng[:-1]}:1s])")
    res["mglru_metric"] = p.scalar(
        f"last_over_time(sockpressure_node_mglru_enabled{{lab_agent='{first}'}}{rng})")
    res["socket_accounting"] = p.scalar(
        f"last_over_time(sockpressure_node_socket_accounting_enabled{{lab_agent='{first}'}}{rng})")
    res["signal_source"] = {m.get("signal"): m.get("source") for m, v in p.query(
        f"last_over_time(sockpressure_signal_source{{lab_agent='{first}'}}{rng}) == 1")}
    # Per agent: the tier values (one query per family: functions like max_over_time drop __name__)
    # and which eBPF probes attached with which attach type.
    res["agent_tiers"] = {}
    at = trace_end(guest)
    live, trace_span = trace_live(guest)
    res["vmp_live"] = {k: len(v) if v is not None else "truncated" for k, v in live.items()} if trace_span else None
    for name in agent_names:
        tiers = {}
        for fam in ("scan_without_reclaim_ratio", "socket_pressure_events_total", "socket_pressure_seconds_total",
                    "window_clamps_total", "clamped_sockets") + PRUNE_FAMS:
            for m, v in p.query(f'max_over_time(sockpressure_tier_{fam}{{cgroup=~"{A}|{B}",lab_agent="{name}"}}{rng})'):
                tiers.setdefault(m.get("source"), {})[(fam, m.get("cgroup"))] = v
        # Per tier, the prune and drop counts summed over every cgroup: what the agent attributed at
        # all, held to the guest's TcpExt deltas.
        sums = {}
        for fam in PRUNE_FAMS:
            for m, v in p.query(f'sum by (source) (max_over_time(sockpressure_tier_{fam}{{lab_agent="{name}"}}{rng}))'):
                sums.setdefault(m.get("source"), {})[fam] = v
        # The variant in use: sockpressure_probe_loaded (issue 48: the window-clamp probe is attached
        # only while socket pressure is live, so _attached is 0 for it on a quiet node); an agent from
        # before it has only _attached, which then meant the same.
        probes = sorted({(m.get("probe"), m.get("attach")) for m, v in p.query(
            f"max_over_time(sockpressure_probe_loaded{{lab_agent='{name}'}}{rng}) == 1 or "
            f"max_over_time(sockpressure_probe_attached{{lab_agent='{name}'}}{rng}) == 1")})
        # In-kernel cost per program run (kernel.bpf_stats_enabled=1 in the guest): ns per event.
        cost = {}
        for m, v in p.query(f"increase(sockpressure_bpf_program_run_seconds_total{{lab_agent='{name}'}}{rng})"):
            runs = p.scalar(f"increase(sockpressure_bpf_program_runs_total{{lab_agent='{name}',"
                            f"program='{m.get('program')}'}}{rng})")
            if runs:
                cost[m.get("program")] = (v * 1e9 / runs, runs)
        # 6.19+: each tier's socket-pressure seconds against A's sock_throttled, in 1 s steps: steps where
        # both moved, steps where only the tier did, steps where only the kernel's count did.
        judge = {}
        thr = f'(increase(sockpressure_memcg_sock_throttled_total{{cgroup="{A}",lab_agent="{first}"}}[2s]) > 0)'
        for m, _ in p.query(f'max_over_time(sockpressure_tier_socket_pressure_seconds_total'
                            f'{{cgroup="{A}",lab_agent="{name}"}}{rng})'):
            src = m.get("source")
            tier = (f'(increase(sockpressure_tier_socket_pressure_seconds_total{{cgroup="{A}",lab_agent="{name}",'
                    f'source="{src}"}}[2s]) > 0)')
            # Over the transfer only: before it A has no socket, so pressure moves no sock_throttled.
            ts = guest.first("transfer_start")
            if not ts:
                continue
            span = int(ts[2].get("seconds", 30))
            steps = lambda e, ts=ts, span=span: p.scalar(  # noqa: E731
                f"count_over_time(({e})[{span}s:1s])", at=ts[0] + span) or 0
            judge[src] = {"both": steps(f"{thr} and on() {tier}"), "tier_only": steps(f"{tier} unless on() {thr}"),
                          "kernel_only": steps(f"{thr} unless on() {tier}")}
        # Each tier's socket-pressure events when the vmpressure() trace stopped (as for the agent's own
        # count above): reclaim of the shared limit goes on walking A and B after it.
        at_trace_end = {}
        if at:
            for m, v in p.query(f'max_over_time(sockpressure_tier_socket_pressure_events_total'
                                f'{{cgroup=~"{A}|{B}",lab_agent="{name}"}}[5s])', at=at):
                at_trace_end[(m.get("source"), m.get("cgroup"))] = v
        # Every kernel: each tier's socket-pressure seconds against the kernel's own traced assertions, in
        # 1 s steps over the trace (the agent samples and Prometheus scrapes once a second: TRACE_LAG).
        trace_judge = {}
        if trace_span:
            for m, _ in p.query(f'max_over_time(sockpressure_tier_socket_pressure_seconds_total'
                                f'{{cgroup=~"{A}|{B}",lab_agent="{name}"}}{rng})'):
                src, cg = m.get("source"), m.get("cgroup")
                key = "A" if cg == A else "B"
                if live.get(key, []) is None or not serves_pressure(src, probes):
                    continue
                moved = p.steps(f'increase(sockpressure_tier_socket_pressure_seconds_total{{cgroup="{cg}",'
                                f'lab_agent="{name}",source="{src}"}}[2s]) > 0', trace_span[0],
                                trace_span[1] + TRACE_LAG)
                trace_judge.setdefault(src, {})[key] = interval_agreement(live.get(key, []), moved, *trace_span)
        res["agent_tiers"][name] = {"tiers": tiers, "probes": probes, "cost": cost, "sums": sums, "judge": judge,
                                    "events_at_trace_end": at_trace_end, "trace_judge": trace_judge}
    res["tiers_json"] = {n: {"probes": a["probes"], "tiers": {t: {f"{fam} {cg}": v for (fam, cg), v in vals.items()}
                                                              for t, vals in a["tiers"].items()}}
                         for n, a in res["agent_tiers"].items()}
    res["alerts_firing"] = sorted({(m.get("alertname"), m.get("cgroup", "")) for m, v in p.query(
        f'max_over_time(ALERTS{{alertstate="firing"}}{rng})')})


# ---------------------------------------------------------------------------------------------
# Verdicts


def check_b_pressure(ck, run, cond, r, has):
    """B holds no socket. Where its reads are mmap'd (NO_SOCKET_PRESSURE_CONDS) the kernel may assert
    socket pressure on B itself: reported, with its socket count at 0 where a census runs; elsewhere B
    gets none."""
    events = r.get("B_events") or 0
    if cond not in NO_SOCKET_PRESSURE_CONDS:
        ck.check(run, "B: no socket-pressure events", not events, fmt(r.get("B_events")))
        return
    log(f"  [INFO] {run}: B (mmap reader, no socket): socket-pressure events {fmt(r.get('B_events'))}, "
        f"seconds {fmt(r.get('B_pressure_s'))}, ratio max {fmt(r.get('B_ratio_max'), 3)}, "
        f"sockets its pressure throttles (max) {fmt(r.get('B_pressure_sockets_max'))}")
    if events and has("clamped_sockets"):
        ck.check(run, "B: its socket pressure has nothing to throttle (sockpressure_memcg_socket_pressure_sockets 0)",
                 r.get("B_pressure_sockets_max") == 0, fmt(r.get("B_pressure_sockets_max")))


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
        for flag, probe in (("--bpf.vmpressure-attach=", "vmpressure"), ("--bpf.clamps-attach=", "window_clamps"),
                            ("--bpf.prunes-attach=", "tcp_prunes"), ("--bpf.drops-attach=", "tcp_drops")):
            if a.startswith(flag) and "," not in a[len(flag):]:
                out[probe] = a[len(flag):]
    return out


def core_check(args, guest_files):
    """CO-RE: every type, field and attach point of bpf/ resolved against each lab kernel's BTF and
    this host's (core_fields.py); the differing rows go into the report."""
    specs = [f"{k}={g['KERNEL']}" for k, g in guest_files.items()]
    if os.path.exists("/sys/kernel/btf/vmlinux"):
        specs.append(f"host {os.uname().release}=/sys/kernel/btf/vmlinux")
    try:
        p = subprocess.run([sys.executable, os.path.join(LAB_DIR, "core_fields.py")] + specs,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        return {"rc": p.returncode, "out": p.stdout, "kernels": [x.split("=", 1)[0] for x in specs]}
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        return {"rc": 2, "out": str(e), "kernels": []}


def assess(args, results):
    ck = Checker()
    core = getattr(args, "core", None)
    if core and core["rc"] == 2:
        ck.missing("CO-RE", "bpf/ types resolve on every kernel", core["out"].strip()[-300:])
    elif core:
        ck.check("CO-RE", f"every type, field and attach point bpf/ uses resolves on {', '.join(core['kernels'])} "
                          "(or is guarded by bpf_core_field_exists)", core["rc"] == 0,
                 "; ".join(l for l in core["out"].splitlines() if l.startswith("MISSING")))
    A, B = args.cgroup_a, args.cgroup_b
    ref0 = results.get("nopressure", {}).get("recv_kBps")
    for run, r in results.items():
        cond = r["condition"]
        # The throughput reference: the no-pressure boot of the same kernel when the run has one.
        ref = next((x.get("recv_kBps") for x in results.values() if x["condition"] == "nopressure"
                    and x.get("kernel") == r.get("kernel") and x.get("recv_kBps")), ref0)
        for e in r["errors"]:
            ck.check(run, "run", False, e)
        expect = r.get("expect", "throttled" if cond in THROTTLED else "quiet")
        # Off the reference kernel, what the agent must say is what the kernel did (ground truth: the
        # receiver's 20 Hz TCP_INFO), since how steadily the kernel clamps there varies between runs.
        thr = expect == "throttled" or (expect in ("clamped", "varies") and bool(r.get("guest_clamped")))
        strict = expect == "throttled"
        # "varies" and no clamp seen: whether the kernel set A's socket pressure is unknown (see below).
        unobservable = expect == "varies" and not thr
        r["thr"] = thr
        r["unobservable"] = unobservable
        kbps = r.get("recv_kBps")
        ck.check(run, "receiver finished", kbps is not None, f"{fmt(kbps, 0)} kB/s")
        mglru = r.get("guest_mglru")
        if r.get("mglru") in ("on", "off"):
            on = mglru not in (None, "absent") and int(mglru, 16) & 1 == 1
            ck.check(run, f"guest reclaim: MGLRU {r['mglru']}", mglru is not None and on == (r["mglru"] == "on"),
                     f"lru_gen/enabled = {mglru}")
        if expect == "clamped":
            ck.check(run, "kernel clamped the receiver at least once (rcv_ssthresh = 4*advmss seen in guest)",
                     r.get("guest_clamped"), f"clamped fraction {fmt(r.get('recv_clamped_frac'))}, "
                     f"ss {r.get('ss_clamped', 0)}/{r.get('ss_samples', 0)}, {fmt(kbps, 0)} kB/s")
        elif expect == "varies":
            log(f"  [INFO] {run}: the kernel {'clamped' if thr else 'never clamped'} the receiver in this boot "
                f"(clamped fraction {fmt(r.get('recv_clamped_frac'))}); the agent is held to that")
        elif expect == "quiet":
            ck.check(run, "kernel never clamped the receiver", not r.get("guest_clamped"),
                     f"clamped fraction {fmt(r.get('recv_clamped_frac'))}")
        elif cond in PROXY_CONDS:
            ctl = r.get("control_kBps")
            ck.check(run, "proxy download < half of its control phase (no fio)",
                     kbps is not None and ctl is not None and kbps < ctl / 2, f"{fmt(kbps, 0)} vs {fmt(ctl, 0)} kB/s")
            ck.check(run, "kernel clamped the proxy's upstream socket (ss: rcv_ssthresh = 4*advmss)",
                     r.get("guest_clamped"), f"{r.get('ss_clamped', 0)}/{r.get('ss_samples', 0)} samples")
        elif cond in PRESSURE_CONDS:
            if cond in PRUNE_CONDS:
                pass  # the slow reader, not the window, sets the rate: not compared
            elif ref:
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
                 acct == (0 if cond in NOSOCKET_CONDS else 1), f"= {fmt(acct)}")
        mm = r.get("mglru_metric")
        if r.get("mglru") in ("on", "off") and r.get("guest_mglru") == "absent":
            # A kernel without MGLRU (5.10): the agent has nothing to say, and says nothing.
            ck.check(run, "sockpressure_node_mglru_enabled absent (kernel without MGLRU)", mm is None, f"= {fmt(mm)}")
        elif r.get("mglru") in ("on", "off"):
            ck.check(run, "sockpressure_node_mglru_enabled", mm == (1 if r["mglru"] == "on" else 0), f"= {fmt(mm)}")
        def has(signal, r=r):
            return r.get("signal_source", {}).get(signal, "none") != "none"

        thr_alerts = [a for a in r.get("alerts_firing", []) if a[0] in args.throttle_alerts]
        hooks = [w for w in r.get("webhook", []) if w[1] == "firing" and w[2] in args.throttle_alerts]
        if thr:
            if strict:
                ck.check(run, "A: scan-without-reclaim ratio >= 0.95", (r.get("A_ratio_max") or 0) >= 0.95,
                         f"max {fmt(r.get('A_ratio_max'), 3)}")
            # A tier that attaches but does not see: the kernel's own count of A's scanned pages (memory.stat
            # pgscan, read in the guest at the end) against what the agent's best reclaim tier counted. They
            # count the same LRU scans; the agent starts a few seconds after boot, so half is the bar.
            ck.check(run, "A: the agent's scanned pages >= half of the kernel's pgscan (memory.stat)",
                     (r.get("A_scanned") or 0) >= 0.5 * (r.get("guest_A_pgscan") or 0),
                     f"agent {fmt(r.get('A_scanned'))} ({r.get('signal_source', {}).get('reclaim')}) vs kernel "
                     f"{r.get('guest_A_pgscan')}")
            ck.check(run, "A: socket-pressure events > 0", (r.get("A_events") or 0) > 0, fmt(r.get("A_events")))
            if r.get("A_judge_steps"):
                # 6.19+: the kernel's own count. A step where sock_throttled moved is a step in which a
                # socket of A was found under pressure; the agent must have seen pressure in most of them.
                both, steps = r.get("A_judge_both_steps") or 0, r["A_judge_steps"]
                ck.check(run, "A: socket pressure seen in >= 80 % of the 1 s steps where sock_throttled moved",
                         both >= 0.8 * steps, f"{fmt(both)} of {fmt(steps)} steps; agent pressure in "
                         f"{fmt(r.get('A_judge_agent_steps'))} steps; sock_throttled {fmt(r.get('A_sock_throttled'))}")
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
            check_b_pressure(ck, run, cond, r, has)
            if has("window_clamps"):
                ck.check(run, "B: no window clamps", not (r.get("B_clamps") or 0), fmt(r.get("B_clamps")))
            if strict:
                ck.check(run, "throttling alert for A reached the webhook",
                         any(w[3] == A for w in hooks), str(sorted({(w[2], w[3]) for w in hooks})))
            ck.check(run, "no throttling alert for B", not any(w[3] == B for w in hooks))
        elif unobservable:
            # The kernel can set A's socket pressure without clamping a receiver that keeps its queue under
            # half full; the flag is not observable from the guest, so A's series are reported, and held
            # only to what holds either way: a clamp, and an alert, need the pressure the agent saw.
            log(f"  [INFO] {run}: A's socket pressure (not observable in the guest): events "
                f"{fmt(r.get('A_events'))}, seconds {fmt(r.get('A_pressure_s'))}, clamps {fmt(r.get('A_clamps'))}, "
                f"clamped sockets max {fmt(r.get('A_clamped_sockets_max'))}")
            pressure = (r.get("A_events") or 0) > 0
            ck.check(run, "A: clamps only with socket pressure", pressure or not (
                (r.get("A_clamps") or 0) or (r.get("A_clamped_sockets_max") or 0)), fmt(r.get("A_events")))
            ck.check(run, "A: a throttling alert only with socket pressure", pressure or not any(
                w[3] == A for w in hooks), fmt(r.get("A_events")))
            check_b_pressure(ck, run, cond, r, has)
            if has("window_clamps"):
                ck.check(run, "B: no window clamps", not (r.get("B_clamps") or 0), fmt(r.get("B_clamps")))
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
                why = unattachable(FORCED_UNATTACHABLE, (probe, attach, r.get("kernel")), args.arch)
                if why:
                    ck.missing(run, f"agent {name}: {probe} attached as {attach} (forced)", why)
                    continue
                ck.check(run, f"agent {name}: {probe} attached as {attach} (forced)",
                         (probe, attach) in {tuple(p) for p in data["probes"]},
                         "attached: " + ", ".join(f"{p}={a}" for p, a in data["probes"]))
            for row in TIER_ROWS:
                vals = row_values(data, row)
                if vals is None:
                    continue
                va, vb = tier_verdict(vals, A), tier_verdict(vals, B)
                obs.setdefault(row[0], []).append((name, va, vb))
                said = "throttled" if va else "not throttled" if va is not None else "no data"
                if unobservable:
                    log(f"  [INFO] {run}: tier {TIER_LABEL.get(row[0], row[0])} [{name}]: A {said} (not judged)")
                else:
                    ck.check(run, f"tier {TIER_LABEL.get(row[0], row[0])} [{name}]: verdict for A", va == thr, said)
                if vb is not None and cond in NO_SOCKET_PRESSURE_CONDS:
                    # B may be under socket pressure here, with no socket: no tier may see a clamp.
                    clamped_b = tier_verdict({k: v for k, v in vals.items() if "clamp" in k[0]}, B)
                    ck.check(run, f"tier {TIER_LABEL.get(row[0], row[0])} [{name}]: no clamp for B "
                             f"(pressure {'seen' if vb else 'not seen'}, nothing to throttle)", not clamped_b,
                             "clamped" if clamped_b else "not clamped")
                elif vb is not None:
                    ck.check(run, f"tier {TIER_LABEL.get(row[0], row[0])} [{name}]: verdict for B", vb is False,
                             "throttled" if vb else "not throttled")
        r["tier_obs"] = obs
        if cond in PROXY_CONDS:
            assess_proxy(ck, run, r, A, B, thr, hooks)
        elif cond not in NOSOCKET_CONDS and cond != "churn":
            assess_trace(ck, run, r, A, B)
        assess_prunes(ck, run, r, A, B)
        if cond == "churn":
            assess_churn(ck, run, r, A, hooks)
        if r.get("many_memcgs"):
            ck.check(run, f"cgroup iterator walks all {r.get('memcgs_total')} memcgs "
                          f"({r['many_memcgs']} added after the measurement)",
                     (r.get("iter_memcgs") or 0) >= r.get("memcgs_total", 0) and not r.get("iter_errors"),
                     f"iter tier has {fmt(r.get('iter_memcgs'), 0)} cgroups; A events "
                     f"{fmt(r.get('iter_A_events'), 0)}; errors: {r.get('iter_errors') or 'none'}")
    # A tier with no verdict in a column (condition x kernel x reclaim; no agent of any boot of it had
    # it live) is MISSING.
    fb_groups = sorted({r["group"] for r in results.values() if len(r.get("agents", [])) > 1})
    # The churn soak asks no tier matrix of its own (swap's boots do): only its default agent's tiers.
    for group in dict.fromkeys(r["group"] for r in results.values() if r["condition"] != "churn"):
        live = {rid for r in results.values() if r["group"] == group for rid in r.get("tier_obs", {})}
        kernels = {r["kernel"] for r in results.values() if r["group"] == group}
        for rid, *_ in TIER_ROWS + PRUNE_ROWS:
            if rid in live:
                continue
            elsewhere = judged_in_other_controls(results, group, rid)
            if elsewhere:
                log(f"  [covered] {group}: tier {TIER_LABEL.get(rid, rid)}: no fallback boot here; judged quiet "
                    f"in {', '.join(elsewhere)}")
                continue
            known = [w for w in (unattachable(UNATTACHABLE, (rid, k), args.arch) for k in sorted(kernels)) if w]
            if known:
                why = "; ".join(known)
            elif group in fb_groups or not args.fallback_reason:
                why = "not live in any agent of this condition and kernel"
            else:
                why = args.fallback_reason.format(conds=", ".join(fb_groups) or "none")
            ck.missing(group, f"tier {TIER_LABEL.get(rid, rid)}", why)
    return ck


def judged_in_other_controls(results, group, rid):
    """The other control columns (expected quiet, same kernel and reclaim mode) where tier `rid` was live,
    when `group` is itself a control that has no fallback boot: the forced-fallback tiers need one quiet
    verdict per kernel, and the controls that carry the fallback agents (noswap, nosocket, slowread) give
    it, so `nopressure`, the throughput reference, boots with the default agent alone."""
    mine = [r for r in results.values() if r["group"] == group]
    if not mine or any(r["expect"] != "quiet" or len(r.get("agents", [])) > 1 for r in mine):
        return []
    key = {(r["kernel"], r["mglru"]) for r in mine}
    return sorted({r["group"] for r in results.values() if r["group"] != group and r["expect"] == "quiet"
                   and (r["kernel"], r["mglru"]) in key and r["condition"] != "churn"
                   and rid in r.get("tier_obs", {})})


def has_rx_sk(kernel):
    """skb:kfree_skb carries the receiving socket (rx_sk) from 6.11: then every TCP memory drop is
    attributed."""
    try:
        return tuple(int(x) for x in str(kernel).split(".")[:2]) >= (6, 11)
    except ValueError:
        return False


def prune_truth(d, kind, slow_reader, rx_sk=False):
    """Whether a prune or drop tier must have seen A's receiver pruned in this boot, by the guest's
    TcpExt deltas d (the receiver is the only socket receiving bulk data): True, False, or None when
    TcpExt cannot tell (then only the bounds of assess_prunes() hold).

    Both tiers see every out-of-order prune (OfoPruned) with its socket: the pruned skbs are owned.
    A kernel that collapsed, pruned and dropped nothing (TCPRcvCollapsed, OfoPruned, RcvPruned,
    TCPRcvQDrop, TCPOFODrop all 0) called neither tcp_collapse() on the receive queue nor
    tcp_prune_ofo_queue() on a non-empty queue, and dropped no segment for memory; PruneCalled alone
    may be > 0 then: tcp_prune_queue() ran only to grow the buffer. TCPRcvCollapsed > 0 means
    tcp_prune_queue() got to its collapse step, which collapses the receive queue when it is not
    empty: with the slow reader it never is, so the function tier must have seen it. Memory drops of
    arriving segments need a socket to be attributed (rx_sk, 6.11+): with it, the drop tier must see
    every one; without it they alone decide nothing."""
    if d is None:
        return None
    if d["OfoPruned"] > 0:
        return True
    if kind == "functions":
        if not (d["TCPRcvCollapsed"] or d["RcvPruned"] or d["TCPRcvQDrop"] or d["TCPOFODrop"]):
            return False
        return True if d["TCPRcvCollapsed"] > 0 and slow_reader else None
    if not (d["TCPRcvQDrop"] or d["TCPOFODrop"]):
        return False
    return True if rx_sk else None


def assess_prunes(ck, run, r, A, B):
    """Pruning and memory drops: the kernel's TcpExt deltas are the ground truth; each live prune or
    drop tier on its own must give A the kernel's verdict, B none, and its sum over all cgroups must
    agree with TcpExt (exactly where both count the same event, as bounds where they do not)."""
    d = r.get("tcpext")
    cond = r["condition"]
    if d is None:
        ck.check(run, "guest logged its TcpExt counters at start and end", False)
        return
    kernel = ", ".join(f"{k} {d[k]}" for k in TCPEXT_KEYS)
    pruned = {k: d[k] for k in TCPEXT_KEYS if k != "PruneCalled"}
    # Only where the kernel prunes for memcg pressure and A was under it in this boot (the receiver was
    # clamped: with MGLRU on, 6.1 never scans A, so `prune` there is a control too).
    prunes_here = r.get("kernel") in PRUNES_UNDER_MEMCG_PRESSURE and bool(r.get("thr"))
    if cond == "prune" and prunes_here:
        ck.check(run, "kernel pruned for the slow receiver and collapsed, pruned or dropped (TcpExt PruneCalled > 0; "
                      "TCPRcvCollapsed, OfoPruned, TCPRcvQDrop or TCPOFODrop > 0)",
                 d["PruneCalled"] > 0 and any(pruned.values()), kernel)
    elif cond == "prune":
        ck.check(run, "kernel refused the receiver nothing (A not under socket pressure, or a kernel whose "
                      "fair-share refusal needs global TCP pressure): TcpExt deltas 0", not any(d.values()), kernel)
    elif cond == "slowread":
        ck.check(run, "kernel collapsed, pruned and dropped nothing (TcpExt deltas 0 but PruneCalled, which "
                      "here only grows the buffer)", not any(pruned.values()), kernel)
    a_sum = sum(r.get(f"A_{fam}") or 0 for fam in PRUNE_FAMS)
    detail = ", ".join(f"{fam} {fmt(r.get(f'A_{fam}'))}" for fam in PRUNE_FAMS)
    rx_sk = has_rx_sk(r.get("kernel"))
    attributable = d["OfoPruned"] > 0 or d["TCPRcvCollapsed"] > 0 or (rx_sk and d["TCPRcvQDrop"] + d["TCPOFODrop"] > 0)
    if cond == "prune" and not prunes_here:
        ck.check(run, "A: no prune or memory-drop counts", a_sum == 0, detail)
    elif cond == "prune" and not attributable and d["TCPRcvQDrop"] + d["TCPOFODrop"] > 0:
        ck.missing(run, "A: prune or memory-drop counts > 0",
                   f"the kernel pruned no queue and only dropped arriving segments ({kernel}); before 6.11 those "
                   "have no socket to attribute them to")
    elif cond == "prune":
        ck.check(run, "A: prune or memory-drop counts > 0", a_sum > 0, detail)
    elif cond == "slowread":
        ck.check(run, "A: no prune or memory-drop counts", a_sum == 0, detail)
    ck.check(run, "B: no prune or memory-drop counts", not any(r.get(f"B_{fam}") for fam in PRUNE_FAMS),
             ", ".join(f"{fam} {fmt(r.get(f'B_{fam}'))}" for fam in PRUNE_FAMS))
    r["prune_truth"] = {rid: prune_truth(d, "functions" if rid.endswith("-prunes") else "drops", cond in PRUNE_CONDS,
                                         rx_sk) for rid, *_ in PRUNE_ROWS}
    for name, data in r.get("agent_tiers", {}).items():
        for row in PRUNE_ROWS:
            rid, source = row[0], row[1]
            truth = r["prune_truth"][rid]
            vals = row_values(data, row)
            if vals is None:
                continue
            va, vb = tier_verdict(vals, A), tier_verdict(vals, B)
            r.setdefault("tier_obs", {}).setdefault(rid, []).append((name, va, vb))
            label = TIER_LABEL[rid]
            if truth is not None:
                ck.check(run, f"tier {label} [{name}]: verdict for A", va == truth,
                         f"{'pruned' if va else 'quiet' if va is not None else 'no data'}; kernel: {kernel}")
            if vb is not None:
                ck.check(run, f"tier {label} [{name}]: verdict for B", vb is False, "pruned" if vb else "quiet")
            tot = data.get("sums", {}).get(source, {})
            if rid.endswith("-prunes"):
                ofo, col = tot.get("ofo_prunes_total") or 0, tot.get("prune_collapses_total") or 0
                # One tcp_prune_ofo_queue() call on a non-empty queue = one OfoPruned; a receive-queue
                # collapse happens at most once per tcp_prune_queue() call (PruneCalled).
                if source == "kprobe":
                    # A kprobe program is skipped while any kprobe program or BPF map syscall is active
                    # on that CPU (trace_call_bpf(): bpf_prog_active), e.g. a prune in a softirq that
                    # interrupts an agent reading its maps: never more than the kernel, and short only
                    # by what such nesting explains (measured: 1 of 57).
                    short = d["OfoPruned"] - ofo
                    allowed = max(1, math.ceil(0.05 * d["OfoPruned"]))
                    ck.check(run, f"tier {label} [{name}]: all cgroups' out-of-order prunes <= TcpExt OfoPruned, "
                                  "short by at most 5 % (nesting; at least 1), collapses <= PruneCalled",
                             0 <= short <= allowed and col <= d["PruneCalled"],
                             f"{fmt(ofo)} vs {d['OfoPruned']} (short {short:.0f}, allowed {allowed}), "
                             f"{fmt(col)} vs {d['PruneCalled']}")
                else:
                    ck.check(run, f"tier {label} [{name}]: all cgroups' out-of-order prunes = TcpExt OfoPruned, "
                                  "collapses <= PruneCalled", ofo == d["OfoPruned"] and col <= d["PruneCalled"],
                             f"{fmt(ofo)} vs {d['OfoPruned']}, {fmt(col)} vs {d['PruneCalled']}")
            else:
                segs, drops = tot.get("ofo_pruned_segments_total") or 0, tot.get("rcv_mem_drops_total") or 0
                kdrops = d["TCPRcvQDrop"] + d["TCPOFODrop"]
                # Every OfoPruned call frees at least one queued (owned) segment; an arriving segment
                # dropped for memory is attributed only when it has a socket (rx_sk, 6.11+), so the
                # attributed drops are a lower bound of the kernel's.
                # With rx_sk (6.11+) every one of them has its socket: then they must match exactly.
                ok = (segs >= d["OfoPruned"] and (segs > 0) == (d["OfoPruned"] > 0)
                      and (drops == kdrops if rx_sk else drops <= kdrops))
                ck.check(run, f"tier {label} [{name}]: all cgroups' pruned segments >= TcpExt OfoPruned (0 iff 0), "
                              f"memory drops {'=' if rx_sk else '<='} TCPRcvQDrop + TCPOFODrop", ok,
                         f"{fmt(segs)} vs {d['OfoPruned']}, {fmt(drops)} vs {kdrops} "
                         f"({kdrops - drops:.0f} without a socket to attribute them to)")


# Seconds from the kernel's assertion to the tier's move in Prometheus: the agent samples once a second,
# Prometheus scrapes once a second, and increase()'s 2 s range ends at the step.
TRACE_LAG = 3


def serves_pressure(source, probes):
    """Whether `source` produces socket pressure in an agent with these (probe, attach) pairs live: a
    source with no such probe exports zeros for it, which are no verdict."""
    if source == "memory_stat":
        return True
    if source in ("fentry", "kprobe"):
        return ("vmpressure", source) in probes
    return source == "iter" and ("socket_pressure", "iter") in probes


def trace_end(guest):
    """Host time at which the vmpressure() trace stopped: the vmp_mark line (logged as the marker went
    into the trace); from a guest before it, 2 s before vmp_result. None without a trace result."""
    mark, vr = guest.first("vmp_mark"), guest.first("vmp_result")
    return mark[0] if mark else vr[0] - 2 if vr else None


def trace_live(guest):
    """The kernel's traced pressure intervals per cgroup ("A", "B") in host seconds, and the span the
    trace covered ((start, stop), None without a trace). The guest logs them relative to a marker it
    wrote into the trace when it logged vmp_mark; that line's arrival places them. None for a cgroup
    whose list the guest truncated."""
    on, mark, lv = guest.first("vmp_trace"), guest.first("vmp_mark"), guest.first("vmp_live")
    if not (on and mark and lv and lv[2].get("mark") == "ok" and on[3].split()[2:3] == ["on"]):
        return {}, None
    live = {}
    for k, v in lv[2].items():
        if not k.endswith("_live"):
            continue
        live[k[:-5]] = None if v == "truncated" else [
            (mark[0] + float(a), mark[0] + float(b)) for a, b in (iv.split("~") for iv in v.split(",") if iv)]
    # From a couple of seconds after the trace started (the agent's first samples) to the marker.
    return live, (on[0] + 2, mark[0])


def interval_agreement(live, moved, start, stop, lag=TRACE_LAG):
    """1 s steps: a kernel step is a whole second s in [start, stop] whose second before it, [s-1, s),
    overlaps a live interval; the tier recalled it if its seconds moved at a step in [s, s + lag]. A tier
    step is judged where the trace covers the lag before it ([start + lag, stop]), and false when no kernel
    step lies in [s - lag, s]."""
    ksteps = [s for s in range(math.ceil(start), math.floor(stop) + 1) if any(a < s and b > s - 1 for a, b in live)]
    recalled = sum(1 for k in ksteps if any(k <= s <= k + lag for s in moved))
    judged = [s for s in moved if start + lag <= s <= stop]
    false = sum(1 for s in judged if not any(s - lag <= k <= s for k in ksteps))
    return {"kernel": len(ksteps), "recalled": recalled, "tier": len(judged), "false": false}


def assess_trace(ck, run, r, A, B):
    """The kernel as the judge (guest/vmptrace.sh): whether the agent names the cgroups the kernel's own
    vmpressure() put under socket pressure, replayed from a kprobe trace of every call, and how its count
    compares. The agent counts the deadline's moves: a window completed in the jiffy that set the deadline
    writes the same jiffies + HZ and moves nothing (fewer), and two CPUs' exits can both see one move
    (more): the more windows a second, the fewer moves per assertion (6.1 `swap`: 1,167 moves for 2,710
    assertions in a heavy boot, 1,427 for 1,546 in a lighter one). So the count is reported against the
    kernel's and held only to naming the same cgroups; blindness is the scanned-pages check's to catch
    (docs/kernel.md §9)."""
    vmp = r.get("vmp")
    if vmp is None or vmp.get("calls") is None:
        ck.missing(run, "A and B: socket pressure named as the kernel's traced vmpressure() asserted it",
                   r.get("vmp_trace") or (f"the trace recorded no call (kprobe hits {vmp.get('kprobe_hits', '?')}, "
                                           f"events read {vmp.get('read_events', '?')})" if vmp is not None else
                                           "no vmp_result from the guest"))
        return
    r["vmp_compare"] = {"overrun": vmp.get("overrun"), "calls": vmp.get("calls")}
    for key in ("A", "B"):
        kernel = vmp.get(f"{key}_assertions", 0)
        agent = r.get(f"{key}_events_at_trace_end", r.get(f"{key}_events"))
        r["vmp_compare"].update({f"kernel_{key}": kernel, f"agent_{key}": agent})
        detail = (f"kernel {kernel} of {vmp.get(f'{key}_windows', 0)} windows, agent {fmt(agent)} "
                  f"({r.get('signal_source', {}).get('socket_pressure')}); {vmp.get('calls')} calls traced, "
                  f"overrun {vmp.get('overrun')}")
        ck.check(run, f"{key}: socket pressure named exactly where the kernel's traced vmpressure() asserted it",
                 agent is not None and (kernel > 0) == (agent > 0), detail)
        for name, data in r.get("agent_tiers", {}).items():
            for src, j in sorted(data.get("trace_judge", {}).items()):
                if key in j:
                    log(f"  [INFO] {run}: tier {src} [{name}]: {key}: recalled {j[key]['recalled']} of "
                        f"{j[key]['kernel']} kernel pressure steps, {j[key]['false']} false of {j[key]['tier']}")
        if kernel:
            log(f"  [INFO] {run}: {key}: the agent's deadline moves / the kernel's assertions = "
                f"{fmt((agent or 0) / kernel, 2)} ({detail})")


def assess_proxy(ck, run, r, A, B, thr, hooks):
    """The reporter's workload: the control phase quiet, fio ran, B (fio, no socket) never paged, and
    doctor named the proxy's cgroup with the remedy that fits first, in the throttled phase."""
    ck.check(run, "control phase (no fio): the kernel never clamped the proxy's upstream socket",
             r.get("control_checks", 0) > 0 and not r.get("control_clamped"),
             f"{r.get('control_clamped')}/{r.get('control_checks')} ss samples, {fmt(r.get('control_kBps'), 0)} kB/s")
    ctl = r.get("control_agent", {})
    ck.check(run, "control phase: the agent saw no socket pressure, clamp or clamped socket for A or B",
             ctl.get("ok", False) and not any(ctl.get("values", {}).values()), str(ctl.get("values")))
    early = [w for w in hooks if r.get("control_end_s") is not None and w[0] <= r["control_end_s"]]
    ck.check(run, "control phase: no throttling alert", not early, str(early))
    ck.check(run, "fio ran in B (the report's job, scaled)", (r.get("fio_bw_kibps") or 0) > 0,
             f"{fmt(r.get('fio_bw_kibps'), 0)} KiB/s {r.get('fio_error') or ''}".strip())
    # B's socket pressure beside the kernel's own count of it: the traced vmpressure() calls replayed
    # through its rule (guest/proxy.sh). The fentry tier sees every call, so with no trace event lost
    # (overrun 0) the two must agree.
    vmp = r.get("vmp")
    if vmp is None:
        ck.missing(run, "B: socket-pressure events against the kernel's traced vmpressure() assertions",
                   r.get("vmp_trace") or "no vmp_result from the guest")
    else:
        kb, ka = vmp.get("B_assertions", 0), vmp.get("A_assertions", 0)
        # The fentry tier's count when the trace stopped: the proxy's ballast keeps reclaiming the shared
        # limit after it, and that walk passes B too (shrink_node_memcgs() calls vmpressure() for every
        # memcg it visits), so the count at the end of the boot can be higher than the trace's.
        at_end = r.get("agent_tiers", {}).get("default", {}).get("events_at_trace_end", {})
        ab, aa = at_end.get(("fentry", B)), at_end.get(("fentry", A))
        r["vmp_compare"] = {"kernel_B": kb, "agent_B": ab, "kernel_A": ka, "agent_A": aa,
                            "overrun": vmp.get("overrun"), "calls": vmp.get("calls")}
        final = r.get("agent_tiers", {}).get("default", {}).get("tiers", {}).get("fentry", {})
        detail = (f"B: kernel {kb} (of {vmp.get('B_windows', 0)} windows), agent fentry {fmt(ab)} at the trace's end "
                  f"({fmt(final.get(('socket_pressure_events_total', B)))} at the boot's end); A: kernel {ka}, "
                  f"agent {fmt(aa)}; {vmp.get('calls')} calls traced, overrun {vmp.get('overrun')}")
        if r["condition"] in NOSOCKET_CONDS:
            # The kernel still sets socket_pressure under cgroup.memory=nosocket, without effect, and the
            # agent ignores the marks there (README, "nosocket (fixed)"): it must report none.
            ck.check(run, "B: no socket-pressure events under cgroup.memory=nosocket (the kernel's marks have no "
                          "effect)", not ab, detail)
        elif vmp.get("overrun"):
            log(f"  [INFO] {run}: the trace lost events (overrun), so the kernel's counts are a floor: {detail}")
            ck.check(run, "B: the agent's socket-pressure events >= the kernel's traced assertions (trace lost "
                          "events)", ab is not None and ab >= kb, detail)
        else:
            # Named exactly where the kernel asserted; the counts are reported. The trace replays concurrent
            # calls in the order they entered vmpressure(), the kernel accumulates them in sr_lock order, so
            # the replay can close windows differently: the agent counted 29 against the replay's 26 on 6.1
            # and 95 against 92 on 5.10 with nothing lost (docs/benchmarks.md, "Kernel matrix").
            log(f"  [INFO] {run}: B: the agent's socket-pressure events (fentry) / the kernel's traced assertions: {detail}")
            ck.check(run, "B: the agent's socket-pressure events (fentry) > 0 exactly when the kernel's traced "
                          "vmpressure() asserted on B", ab is not None and (kb > 0) == (ab > 0), detail)
    d = r.get("doctor")
    if not r.get("agents"):
        return
    if d is None:
        ck.check(run, "doctor ran in the throttled phase", False, "no doctor output on the console")
        return
    if r.get("expect") != "throttled":
        # Off the reference (a remedy, another kernel or reclaim mode) the kernel may clamp only part of the
        # time, and doctor's two samples 2 s apart may fall outside it: reported, not judged.
        log(f"  [INFO] {run}: doctor (rc {d['rc']}), the kernel {'clamped' if thr else 'never clamped'} in this boot: "
            f"{'names A' if d['names_a'] else 'does not name A'}; first remedy {d['first'] or 'none'}")
        return
    ck.check(run, "doctor (throttled phase) names the proxy's cgroup", d["names_a"] and d["rc"] == "1",
             f"rc {d['rc']}, {d['a_line'] or 'no line naming ' + A}")
    want = f"set memory.swap.max=0 on {A}" if r["condition"] == "proxy" else None
    if want:
        ck.check(run, "doctor: the first fitting remedy is memory.swap.max=0 (swap on, unset), with its "
                      "measured effect", d["first"] == want and bool(d["first_measured"]),
                 f"first: {d['first']!r}; measured: {d['first_measured']!r}")
    ck.check(run, "doctor: no remedy for B (its socket pressure has nothing to throttle)", not d["remedies_b"])


def assess_churn(ck, run, r, A, hooks):
    c = r.get("churn")
    if not c:
        ck.check(run, "churn soak ran", False, "no churn results")
        return
    ck.check(run, "churn: cgroups created and removed", c["created"] >= 1000 and not c["errors"],
             f"{c['created']} in {c['seconds']} s ({c['rounds']} rounds), {c['dying']} dying memcgs left; "
             f"errors: {c['errors'] or 'none'}")
    ck.check(run, "churn: agent alive after the churn", c["alive"])
    seen = c.get("seen_cgroups") or 0
    ck.check(run, "churn: the agent exported churned cgroups while they lived", seen > 0, f"{fmt(seen, 0)} seen")
    ck.check(run, "churn: no series of a removed cgroup 15 s after the last removal",
             c.get("stale_cgroups") == [], f"{len(c.get('stale_cgroups') or [])} stale: "
             f"{(c.get('stale_cgroups') or [])[:5]}")
    ck.check(run, "churn: no socket pressure or clamp on any churned cgroup", not c.get("pressured_cgroups"),
             str(c.get("pressured_cgroups", [])[:5]))
    ck.check(run, "churn: no throttling alert except for A", all(w[3] == A for w in hooks),
             str(sorted({w[3] for w in hooks})))
    before, after, peak = c["rss_before_kib"], c["rss_after_kib"], c["rss_peak_kib"]
    ck.check(run, "churn: agent RSS after the churn within 1.5x of before",
             before > 0 and after <= 1.5 * before,
             f"{before} KiB before, peak {peak} KiB, {after} KiB 15 s after ({after / max(1, before):.2f}x)")


def report(args, results, ck, total_s):
    A = args.cgroup_a
    lines = []
    add = lines.append
    add("## Lab results\n")
    kernels = ", ".join(f"{k}: {v}" for k, v in args.kvers.items())
    add(f"Kernels {kernels} ({args.arch}), QEMU TCG ({os.path.basename(args.qemu)}), 2 vCPU, {args.mem_mib} MiB, warm-up {args.warmup} s, "
        f"transfer {args.transfer} s, scrape/eval interval {args.scrape_interval}, alert `for` "
        f"{args.lab_for or 'as in the rules file'}. Total run time {total_s:.0f} s.\n")
    add("| boot | kernel | MGLRU (lru_gen/enabled; agent metric) | receiver kB/s | clamped (20 Hz TCP_INFO) "
        "| ss samples clamped | A pgscan/pgsteal (guest) "
        "| A ratio max | A events | A pressure s | A clamps | A clamped sockets max | accounting | throttling alert |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cond, r in results.items():
        hooks = sorted({w[2] for w in r.get("webhook", []) if w[1] == "firing" and w[2] in args.throttle_alerts
                        and w[3] == A})
        add(f"| {cond} | {r.get('kernel_release') or r.get('kernel')} | {r.get('mglru')} "
            f"(`{r.get('guest_mglru')}`; {fmt(r.get('mglru_metric'))}) | "
            f"{fmt(r.get('recv_kBps'), 0)} | {fmt(r.get('recv_clamped_frac'))} | "
            f"{r.get('ss_clamped', 0)}/{r.get('ss_samples', 0)} | "
            f"{r.get('guest_A_pgscan', '?')}/{r.get('guest_A_pgsteal', '?')} | {fmt(r.get('A_ratio_max'), 3)} | "
            f"{fmt(r.get('A_events'))} | {fmt(r.get('A_pressure_s'))} | {fmt(r.get('A_clamps'))} | "
            f"{fmt(r.get('A_clamped_sockets_max'))} | {fmt(r.get('socket_accounting'))} | "
            f"{', '.join(hooks) or 'none'} |")
    proxies = [(run, r) for run, r in results.items() if r["condition"] in PROXY_CONDS]
    if proxies:
        add("\n### The reporter's workload (nginx in A, fio in B) and its remedies\n")
        add("Control: the same proxy, ballast and download before fio starts. Throttled phase: after fio's "
            "warm-up, with the remedy applied before fio started. Clamped: `ss` samples of the proxy's upstream "
            "socket at rcv_ssthresh = 4*advmss. Kernel vmpressure: assertions replayed from a kprobe trace of "
            "vmpressure() (guest/proxy.sh).\n")
        add("| boot | kernel | MGLRU | remedy | control kB/s | throttled kB/s | clamped (ss) | A pgscan/pgsteal "
            "| A events | alert for A | B events (kernel vmpressure) | B sockets | fio KiB/s | A swap | pswpout "
            "| OOM kills A/B | doctor |")
        add("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for run, r in proxies:
            hooks = sorted({w[2] for w in r.get("webhook", []) if w[1] == "firing" and w[2] in args.throttle_alerts
                            and w[3] == A})
            vc = r.get("vmp_compare") or {}
            d = r.get("doctor") or {}
            doc = ("names A, first: " + (d.get("first") or "none")) if d.get("names_a") else (
                f"rc {d['rc']}, A not named" if d else "not run")
            add(f"| {run} | {r.get('kernel_release') or r.get('kernel')} | {r.get('mglru')} | {r.get('remedy')} | "
                f"{fmt(r.get('control_kBps'), 0)} | {fmt(r.get('recv_kBps'), 0)} | "
                f"{r.get('ss_clamped', 0)}/{r.get('ss_samples', 0)} | "
                f"{r.get('guest_A_pgscan', '?')}/{r.get('guest_A_pgsteal', '?')} | {fmt(r.get('A_events'))} | "
                f"{', '.join(hooks) or 'none'} | {fmt(r.get('B_events'))} ({vc.get('kernel_B', 'no trace')}) | "
                f"{fmt(r.get('B_pressure_sockets_max'))} | {fmt(r.get('fio_bw_kibps'), 0)} | "
                f"{(r.get('guest_A_swap') or 0) / 2**20:.1f} MiB | {fmt(r.get('pswpout'))} | "
                f"{r.get('oom_kill_A', '?')}/{r.get('oom_kill_B', '?')} | {doc} |")
    retried = [(run, r["retried"]) for run, r in results.items() if r.get("retried")]
    if retried:
        add("\nBooted again after QEMU exited before the measurement began (the lost boot's console log is "
            "kept as `<boot>.lost.console.log`): " + "; ".join(f"{run} ({x['error']})" for run, x in retried) + "\n")
    if args.agent:
        add("\n### Per-tier verdict for cgroup A (each tier on its own)\n")
        add("Cell: the verdict, ✓ right / ✗ WRONG, and [the agents that had the tier live; fb: = in the "
            "condition's fallback boot]. "
            "MISSING: no agent of any boot of that condition had the tier live (no verdict, not a pass).\n")
        groups = list(dict.fromkeys(r["group"] for r in results.values()))
        add("Columns: condition · kernel · MGLRU; the kernel's ground truth under each (clamped = the receiver saw "
            "rcv_ssthresh = 4*advmss at least once).\n")
        add("| tier | " + " | ".join(groups) + " |")
        add("|---|" + "---|" * len(groups))
        truth = []
        for group in groups:
            rs = [r for r in results.values() if r["group"] == group]
            truth.append(", ".join(f"{'clamped' if r.get('guest_clamped') else 'never clamped'} "
                                   f"{fmt(r.get('recv_clamped_frac'))}" for r in rs))
        add("| *kernel: receiver clamped (fraction)* | " + " | ".join(truth) + " |")
        for rid, *_ in TIER_ROWS:
            cells = []
            for group in groups:
                seen = [(o, r.get("run"), r.get("variant"), r.get("thr")) for r in results.values()
                        if r["group"] == group for o in r.get("tier_obs", {}).get(rid, [])]
                judged = not any(r.get("unobservable") for r in results.values() if r["group"] == group)
                if not seen:
                    elsewhere = judged_in_other_controls(results, group, rid)
                    cells.append(f"see {', '.join(elsewhere)}" if elsewhere else "**MISSING**")
                    continue
                verdicts = {("throttled" if va else "quiet" if va is not None else "no data")
                            for (_, va, _), *_ in seen}
                ok = all(va == thr for (_, va, _), _, _, thr in seen)
                who = ", ".join(name if variant != "fallback" else f"fb:{name}" for (name, _, _), _, variant, _ in seen)
                mark = ("✓" if ok else "✗ WRONG") if judged else "(A's pressure not observable: not judged)"
                cells.append(f"{'/'.join(sorted(verdicts))} {mark} [{who}]")
            add(f"| {TIER_LABEL.get(rid, rid)} | " + " | ".join(cells) + " |")
        for rid, *_ in PRUNE_ROWS:
            cells = []
            for group in groups:
                seen = [(o, r.get("variant"), (r.get("prune_truth") or {}).get(rid)) for r in results.values()
                        if r["group"] == group for o in r.get("tier_obs", {}).get(rid, [])]
                if not seen:
                    elsewhere = judged_in_other_controls(results, group, rid)
                    cells.append(f"see {', '.join(elsewhere)}" if elsewhere else "**MISSING**")
                    continue
                verdicts = {("pruned" if va else "quiet" if va is not None else "no data") for (_, va, _), _, _ in seen}
                judged = [va == t for (_, va, _), _, t in seen if t is not None]
                mark = ("✓" if all(judged) else "✗ WRONG") if judged else "(TcpExt cannot tell; bounds only)"
                who = ", ".join(n if v != "fallback" else f"fb:{n}" for (n, _, _), v, _ in seen)
                cells.append(f"{'/'.join(sorted(verdicts))} {mark} [{who}]")
            add(f"| {TIER_LABEL.get(rid, rid)} | " + " | ".join(cells) + " |")
        add("\n### Pruning and memory drops (TcpExt deltas of the guest against the agents' per-cgroup counts)\n")
        add("Prune rows above: the verdict for A is held to what the kernel did (TcpExt, lab.py prune_truth()): "
            "pruned when OfoPruned > 0 (and, for the function tier under a slow reader, TCPRcvCollapsed > 0), quiet "
            "when the kernel collapsed, pruned and dropped nothing. Below: A's counts and the sum over all cgroups, "
            "per agent and tier (collapses / out-of-order prunes from the function tier; pruned segments / memory "
            "drops from the drop tier).\n")
        add("| boot | TcpExt " + " / ".join(TCPEXT_KEYS) + " | agent: tier | A collapses / ofo prunes "
            "| A pruned segs / mem drops | all cgroups collapses / ofo prunes / pruned segs / mem drops | B |")
        add("|---|---|---|---|---|---|---|")
        for run, r in results.items():
            d = r.get("tcpext")
            if d is None:
                continue
            kernel = " / ".join(str(d[k]) for k in TCPEXT_KEYS)
            for name, data in r.get("agent_tiers", {}).items():
                live = {p[0]: p[1] for p in data.get("probes", [])}
                fn, dr = live.get("tcp_prunes"), live.get("tcp_drops")
                tiers = data.get("tiers", {})
                g = lambda src, fam, cg: fmt((tiers.get(src) or {}).get((fam, cg)), 0)  # noqa: E731
                sm = lambda src, fam: fmt((data.get("sums", {}).get(src) or {}).get(fam), 0)  # noqa: E731
                b = sum((tiers.get(src) or {}).get((fam, args.cgroup_b)) or 0
                        for src in (fn, dr) if src for fam in PRUNE_FAMS)
                add(f"| {run} | {kernel} | {name}: {fn or '-'} + {dr or '-'} | "
                    f"{g(fn, 'prune_collapses_total', A)} / {g(fn, 'ofo_prunes_total', A)} | "
                    f"{g(dr, 'ofo_pruned_segments_total', A)} / {g(dr, 'rcv_mem_drops_total', A)} | "
                    f"{sm(fn, 'prune_collapses_total')} / {sm(fn, 'ofo_prunes_total')} / "
                    f"{sm(dr, 'ofo_pruned_segments_total')} / {sm(dr, 'rcv_mem_drops_total')} | {fmt(b, 0)} |")
        add("\n### Detection latency\n")
        add("Host clock throughout (guest console lines are timestamped on arrival). Socket pressure starts "
            "at the first reclaim scan of A (the guest polls memory.stat at 1 Hz); a clamp needs a socket, "
            "so clamp metrics start at the receiver's first clamped TCP_INFO (20 Hz). Negative: the alert "
            "fired on socket pressure before the transfer began.\n")
        add("| boot | A scanned → agent events | → Prometheus events | → alert at webhook | "
            "first clamp → agent clamps | → Prometheus clamps | → alert at webhook |")
        add("|---|---|---|---|---|---|---|")
        for run, r in results.items():
            if not r.get("thr"):
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
        add("\n### Every tier against the kernel's traced pressure (1 s steps)\n")
        add(f"A kernel step: a second in which a cgroup's deadline was live by the traced vmpressure() "
            f"(guest/vmptrace.sh); recalled when the tier's socket-pressure seconds moved within {TRACE_LAG} s "
            f"after it; a tier step with no kernel step in the {TRACE_LAG} s before it is false.\n")
        add("| boot / agent | tier | A: recalled / kernel steps | A: false / tier steps | B: recalled / kernel steps "
            "| B: false / tier steps |")
        add("|---|---|---|---|---|---|")
        for run, r in results.items():
            for n, d in r.get("agent_tiers", {}).items():
                for src, j in sorted(d.get("trace_judge", {}).items()):
                    cell = lambda k, a, b: (f"{j[k][a]} / {j[k][b]}" if k in j else "-")  # noqa: E731
                    add(f"| {run} / {n} | {src} | {cell('A', 'recalled', 'kernel')} | {cell('A', 'false', 'tier')} | "
                        f"{cell('B', 'recalled', 'kernel')} | {cell('B', 'false', 'tier')} |")
        add("\n### eBPF per-event cost (in-kernel, `kernel.bpf_stats_enabled=1` in the guest, under TCG)\n")
        add("| boot / agent | program | runs | ns per run |")
        add("|---|---|---|---|")
        for run, r in results.items():
            for n, d in r.get("agent_tiers", {}).items():
                for prog, (ns, runs) in sorted(d.get("cost", {}).items()):
                    add(f"| {run} / {n} | `{prog}` | {runs:.0f} | {ns:.0f} |")
    core = getattr(args, "core", None)
    if core and core["rc"] != 2:
        rows = [l for l in core["out"].splitlines() if l.startswith("|")]
        add("\n### CO-RE: what differs between the kernels (tests/lab/core_fields.py)\n")
        add("Only the rows that differ; offsets are left out (they differ everywhere and are relocated). "
            "Guarded: the program tests bpf_core_field_exists() before reading.\n")
        add("\n".join(rows[:2] + [l for l in rows[2:] if l.rstrip().endswith("**yes** |")]))
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


def find_agent(explicit, arch="amd64"):
    if explicit:
        return os.path.abspath(explicit)
    for cand in ARCHES[arch]["builds"]:
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
    ap.add_argument("--conditions", default=None,
                    help="comma-separated subset of " + ",".join(CONDITIONS) + " (default: " +
                         ",".join(DEFAULT_CONDITIONS) + "; arm64: none, its extra boots carry the conditions)")
    ap.add_argument("--extra-boots", default=None,
                    help="boots beside the conditions on 6.1 with MGLRU off: COND@KERNEL/MGLRU[+fallback],... "
                         "(+fallback: the fallback agents run in the same boot); \"\" = none (default: the kernel "
                         "axis, see EXTRA_BOOTS; arm64: " + ARCH_DEFAULTS["arm64"]["extra_boots"] + ")")
    ap.add_argument("--matrix", action="store_true",
                    help="every condition x kernel (" + ", ".join(KERNELS) + ") x MGLRU (off, on), each with "
                         "its fallback boot (ignores --extra-boots; about 32 boots)")
    ap.add_argument("--agent", help="agent binary (default: build-lab/ or build/ sockpressure_exporter)")
    ap.add_argument("--no-agent", action="store_true", help="kernel reproduction only, no agent/Prometheus")
    ap.add_argument("--agent-args", default="--signal.all-tiers",
                    help="extra agent flags (default settings plus the per-tier export)")
    ap.add_argument("--fallback-conditions", default=None,
                    help="conditions booted a second time with the forced-fallback agents (--fallback-agents), so "
                         "the kprobe/tp_btf tiers get a verdict; \"\" = none (default swap; arm64: none, its "
                         "extra boots carry the fallback agents)")
    ap.add_argument("--fallback-agents", default=FALLBACK_AGENTS,
                    help="the agents of the fallback boots, NAME=FLAGS;NAME=FLAGS (each on its own port)")
    ap.add_argument("--memcg-limit", default="640M",
                    help="put A and B under a parent /lab with this memory.max (limit reclaim; \"\" = global reclaim by kswapd, the first prototype, which throttles only intermittently on a busy host)")
    ap.add_argument("--many-memcgs", type=int, default=1100,
                    help="after the measurement, create this many more memcgs and check the cgroup iterator "
                         "walks them all (0 = off)")
    ap.add_argument("--many-memcgs-conditions", default=None,
                    help="the default boots that do it (comma-separated; default nopressure, arm64 none)")
    ap.add_argument("--churn", type=int, default=100,
                    help="churn condition: memory cgroups created and removed per round (one round ~1.5 s)")
    ap.add_argument("--churn-seconds", type=int, default=120, help="churn condition: how long the churn lasts")
    ap.add_argument("--read-kbps", type=int, default=48,
                    help="prune/slowread conditions: the receiver's read rate in kB/s (below the clamped window's)")
    ap.add_argument("--tcp-mem", default="1 65536 2048",
                    help="prune/slowread conditions: the guest's net.ipv4.tcp_mem in pages (MIN PRESSURE MAX); above "
                         "MIN a socket holding more than its share of MAX (TCP sockets x its pages >= MAX) is refused "
                         "receive memory, on 6.1 and 6.12 only under global TCP pressure (tests/lab/README.md); "
                         "\"\" = kernel default")
    ap.add_argument("--peer-wmem", default="4096 16384 65536",
                    help="prune/slowread conditions: tcp_wmem of the sender's netns (keeps the node's TCP memory "
                         "below tcp_mem PRESSURE)")
    ap.add_argument("--hoard-sockets", default="400",
                    help="prune/slowread conditions: idle TCP sockets in the guest; tcp_mem MAX / their number is a "
                         "socket's share (src/sockhoard.c)")
    ap.add_argument("--bystander", default="4194304",
                    help="prune/slowread conditions: tcp_rmem of a root-cgroup loopback connection that never reads "
                         "(holds about half of it), so the node's TCP memory, counted in 1 MiB per-CPU steps, stays "
                         "above tcp_mem MIN; 0 = none")
    ap.add_argument("--adv-win-scale", default="",
                    help="prune/slowread conditions: the guest's net.ipv4.tcp_adv_win_scale (31: the window is the "
                         "whole free buffer, so skb overhead may overrun it and tcp_prune_queue() run); "
                         "\"\" = kernel default")
    ap.add_argument("--loss", default="2",
                    help="prune/slowread conditions: netem loss (%%) from the sender to the receiver, which keeps an "
                         "out-of-order queue behind every hole")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--transfer", type=int, default=30)
    ap.add_argument("--mem-mib", type=int, default=1024)
    ap.add_argument("--scrape-interval", default="1s")
    ap.add_argument("--lab-for", default="0s", help="replace every alert `for:` (empty: keep the rules' own)")
    ap.add_argument("--rules", help="alert rules file (default alerts/sockpressure-rules.yaml)")
    ap.add_argument("--settle", type=float, default=15, help="seconds to keep scraping after the transfer")
    ap.add_argument("--alert-timeout", type=float, default=60,
                    help="max seconds to wait after the transfer for the throttling alert")
    ap.add_argument("--boot-timeout", type=int, default=None,
                    help="seconds for the guest to reach its warm-up (default 90 s, times the architecture's "
                         "slowness: 270 s on arm64)")
    ap.add_argument("--arch", default="amd64", choices=sorted(ARCHES),
                    help="guest architecture: amd64 (qemu-system-x86_64) or arm64 (qemu-system-aarch64 -M virt, "
                         "Debian's arm64 kernels, the agent from build-arm64/: scripts/cross-build.sh)")
    ap.add_argument("--linger", type=int, default=600)
    ap.add_argument("--results", help="results directory (default tests/lab/.cache/results/<time>)")
    args = ap.parse_args()
    for key, value in ARCH_DEFAULTS[args.arch].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    # ctest's timeout sends SIGTERM: turn it into SystemExit so the `finally` blocks still kill
    # QEMU, Prometheus and Alertmanager (they run in their own sessions and would outlive us).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.cgroup_a, args.cgroup_b = ("/lab/A", "/lab/B") if args.memcg_limit else ("/A", "/B")
    args.slow = ARCHES[args.arch]["slow"]
    if args.boot_timeout is None:
        args.boot_timeout = 90 * args.slow
    args.alert_timeout *= args.slow
    t0 = time.time()

    conds = [c for c in args.conditions.split(",") if c]
    fb_conds = [c for c in args.fallback_conditions.split(",") if c]
    bad = [c for c in conds + fb_conds if c not in CONDITIONS]
    if bad:
        raise SystemExit(f"lab: unknown condition(s) {bad}; known: {CONDITIONS}")
    missing = []
    args.qemu = shutil.which(ARCHES[args.arch]["qemu"])
    if not args.qemu:
        missing.append(f"{ARCHES[args.arch]['qemu']} (Debian package {ARCHES[args.arch]['pkg']})")
    if args.arch != "amd64":
        unsupported = [c for c in conds + fb_conds if c in PROXY_CONDS]
        if unsupported:
            raise SystemExit(f"lab: {', '.join(unsupported)}: the proxy tools (curl, fio, nginx) are amd64 only")
    if args.no_agent:
        args.agent = None
    else:
        args.agent = find_agent(args.agent, args.arch)
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
    fb_forceable = bool(fb_agents)
    if args.agent and fb_conds and fb_agents:
        # The fallback boots need an agent that can be forced onto an attach type.
        try:
            if args.arch == "amd64":
                helptext = subprocess.run([args.agent, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, timeout=30).stdout
            else:
                # Another architecture's binary does not run here: its flag names are in its strings.
                with open(args.agent, "rb") as f:
                    helptext = f.read().decode("latin-1")
        except Exception as e:  # noqa: BLE001
            helptext = str(e)
        lacking = [f for f in FALLBACK_FLAGS if f not in helptext and any(f in fl for _, fl in fb_agents)]
        if lacking:
            log(f"[MISSING] agent has no {', '.join(lacking)}: fallback boots skipped")
            args.fallback_reason = (f"agent has no {', '.join(lacking)}: fallback tiers cannot be forced, "
                                    "fallback boots skipped")
            fb_conds = []
            fb_forceable = False
        else:
            args.fallback_reason = ("not live in the default agent (a better attach type wins on this kernel); "
                                    "the forced-fallback agents boot only in: {conds}")
    elif args.agent:
        args.fallback_reason = "not live in the default agent; fallback boots disabled (--fallback-conditions)"
    many = [c for c in args.many_memcgs_conditions.split(",") if c] if args.many_memcgs else []

    def boot(cond, kernel, mglru, agents, variant="default"):
        base = (kernel, mglru) == BASE
        tag = "" if base else f"@{kernel}-mglru-{mglru}"
        # proxy throttles on the reference as swap does; a remedy, or another kernel or reclaim mode, is
        # judged by what the kernel did to the proxy's upstream socket in that boot (its ss samples).
        expect = (SWAP_EXPECT[(kernel, mglru)] if cond in PRESSURE_CONDS
                  else ("throttled" if cond == "proxy" and base else "varies") if cond in PROXY_CONDS
                  else "varies" if cond in NO_SOCKET_PRESSURE_CONDS else "quiet")
        return {"run": cond + tag + ("-fallback" if variant == "fallback" else ""), "cond": cond,
                "condition": cond, "kernel": kernel, "mglru": mglru, "agents": agents, "variant": variant,
                "group": cond if base else f"{cond} · {kernel} · MGLRU {mglru}", "expect": expect,
                "many": variant == "default" and base and cond in many}

    default_agent = [("default", args.agent_args)]
    runs = []
    for kernel, mglru in ([(k, m) for k in KERNELS for m in MGLRU_MODES if not (k in NO_MGLRU and m == "on")]
                          if args.matrix else [BASE]):
        runs += [boot(c, kernel, mglru, default_agent) for c in conds]
        runs += [boot(c, kernel, mglru, fb_agents, "fallback") for c in conds if c in fb_conds]
    for spec in ([] if args.matrix else [x for x in args.extra_boots.split(",") if x]):
        m = re.fullmatch(r"([\w-]+)@([\d.]+)/(on|off)(\+fallback)?(?:\*(\d+))?", spec)
        if not m or m.group(1) not in CONDITIONS or m.group(2) not in KERNELS:
            raise SystemExit(f"lab: bad --extra-boots entry {spec!r} (COND@KERNEL/on|off[+fallback][*N])")
        agents = default_agent + (fb_agents if m.group(4) and fb_forceable else [])
        # *N: the same boot N times in a row (an intermittent failure needs several boots to show).
        repeat = int(m.group(5) or 1)
        for i in range(repeat):
            b = boot(m.group(1), m.group(2), m.group(3), agents, "combined" if len(agents) > 1 else "default")
            if repeat > 1:
                b["run"] += f"#{i + 1}"
            runs.append(b)
    if missing:
        print("lab: ERROR: missing prerequisites:\n  - " + "\n  - ".join(missing), file=sys.stderr)
        return 2

    rundir = args.results or os.path.join(LAB_DIR, ".cache", "results", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(rundir, exist_ok=True)
    guest_files, args.kvers = {}, {}
    for kernel in dict.fromkeys(b["kernel"] for b in runs):
        build = [os.path.join(LAB_DIR, "build-guest"), "--kernel", kernel, "--arch", args.arch] + (
            ["--agent", args.agent] if args.agent else [])
        log(f"building guest for kernel {kernel} (cached by inputs)")
        p = subprocess.run(build, stdout=subprocess.PIPE, text=True, timeout=1800)
        if p.returncode != 0:
            print(f"lab: ERROR: build-guest --kernel {kernel} failed (see messages above)", file=sys.stderr)
            return 2
        guest_files[kernel] = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
        args.kvers[kernel] = guest_files[kernel].get("KVER", "?")
    args.core = core_check(args, guest_files)
    if args.agent:
        args.rules_file = prepare_rules(args, rundir)
        log(f"agent {os.path.relpath(args.agent, REPO)}; rules {args.rules_source} (for: {args.lab_for or 'kept'}); "
            f"throttling alerts {args.throttle_alerts}")
    log(f"results in {os.path.relpath(rundir, REPO)}")

    results = {}
    for b in runs:
        run = b["run"]
        log(f"=== {run}: condition {b['cond']}, kernel {b['kernel']}, MGLRU {b['mglru']}, "
            f"agents {', '.join(n for n, _ in b['agents'])} ===")
        try:
            results[run] = run_condition(args, guest_files[b["kernel"]], b, rundir)
        except Exception as e:  # noqa: BLE001 - one condition's crash must not hide the others
            log(f"{run}: the lab itself failed:\n{traceback.format_exc()}")
            results[run] = {"errors": [f"{type(e).__name__}: {e}"],
                            **{k: b[k] for k in ("run", "condition", "kernel", "mglru", "variant", "group",
                                                 "expect")}}
        r = results[run]
        if r.get("early_death"):
            # Recorded in the report (boots retried) with the lost boot's last console lines.
            set_aside_lost_boot(rundir, run)
            log(f"{run}: QEMU exited before the measurement began; booting once more. Last console lines:")
            for ln in r.get("console_tail", [])[-10:]:
                log(f"{run}:   | {ln}")
            try:
                retry = run_condition(args, guest_files[b["kernel"]], b, rundir)
            except Exception as e:  # noqa: BLE001 - as above
                retry = {**r, "errors": r["errors"] + [f"retry: {type(e).__name__}: {e}"]}
            retry["retried"] = {"error": r["errors"][-1], "console_tail": r.get("console_tail", [])}
            results[run] = r = retry
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
    # The failed checks on their own, for a caller that shows only the end of a long log (CI).
    with open(os.path.join(rundir, "failed-checks.txt"), "w") as f:
        # First the last console lines of a boot that did not finish: the checks after it then fail
        # only for want of its data.
        for run, r in results.items():
            if r.get("console_tail"):
                f.write(f"{run}: last console lines\n" + "".join(f"  | {ln}\n" for ln in r["console_tail"]))
        f.writelines(f"{c}: {n} {d}\n" for c, n, _, d in ck.failed())
    if ck.failed():
        log(f"FAILED ({len(ck.failed())} checks); logs in {os.path.relpath(rundir, REPO)}")
        return 1
    log("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
