#!/usr/bin/env python3
"""Fake cgroup v2 + procfs tree that makes the agent see memcg socket-pressure throttling.

    tests/sim/throttle_sim.py --root DIR [--state throttling|healthy] [--interval 1]

creates DIR/cgroupfs and DIR/procfs and then rewrites the counters every interval, so

    sockpressure_exporter --path.cgroupfs=DIR/cgroupfs --path.procfs=DIR/procfs \
                          --path.sysfs=DIR/sysfs --no-collector.bpf

(memory.stat tier) sees:

* cgroup A `/workload.slice/proxy.service`: reclaim scans 20000 pages/s of its own LRUs and
  reclaims 10/s (1 - 10/20000 = 0.9995: every 512-page vmpressure window is "critical", so the
  agent estimates socket pressure all the time) -- the hot-anon-with-swap pattern;
* cgroup B `/workload.slice/cache.service`: scans and reclaims 5000 pages/s (healthy reclaim);
* container C of pod shop/frontend-7d9f (`/kubepods.slice/.../cri-containerd-<id>.scope`): 8000
  scanned, 40 reclaimed pages/s (throttled); DIR/pods.json is the kubelet pod list naming it, for
  the agent's --kubelet.pods-file;
* everything else idle; a swap area is active; socket accounting on; no global tcp_mem pressure.

In state `healthy` A reclaims what it scans. Switch at run time by writing `healthy` or
`throttling` into DIR/sim.state, or send SIGUSR1 (-> healthy) / SIGUSR2 (-> throttling).

Why a simulator and not a real cgroup: tests must not touch this host's cgroups, sysctls or
swap. memory.stat is hierarchical, so parents are written as the sum of their children plus their
own pages, as the kernel does; the agent has to subtract to get the local (vmpressure) view.
Every file is replaced atomically (write + rename) so the agent never reads half a file.
"""
import argparse
import json
import os
import signal
import sys
import time

PAGE = 4096
MiB = 1 << 20

POD_UID = "5f0c2e1a-7b7d-4a5e-9d1c-2b8f4e6a9c10"
POD_SLICE = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + POD_UID.replace("-", "_") + ".slice"
CONTAINER_ID = "4b1e0c9d2a7f6e5d8c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d"
CONTAINER = POD_SLICE + "/cri-containerd-" + CONTAINER_ID + ".scope"
# The agent's `cgroup` label of CONTAINER: the leading systemd slices that the
# pod slice's own name implies are left out (docs/metrics.md#the-cgroup-label).
CONTAINER_LABEL = CONTAINER[len("/kubepods.slice/kubepods-burstable.slice"):]
# The kubelet's /pods answer for the one pod (subset of a core/v1 PodList), for the agent's
# --kubelet.pods-file, so Kubernetes labels (namespace/pod/container) flow end to end.
PODS = {"kind": "PodList", "apiVersion": "v1", "items": [{
    "metadata": {"name": "frontend-7d9f", "namespace": "shop", "uid": POD_UID},
    "spec": {"containers": [{"name": "web"}]},
    "status": {"qosClass": "Burstable",
               "containerStatuses": [{"name": "web", "containerID": "containerd://" + CONTAINER_ID}]}}]}

# Per-cgroup local reclaim rates (pages/s) by state: (pgscan, pgsteal).
RATES = {
    "throttling": {"/workload.slice/proxy.service": (20000, 10),
                   "/workload.slice/cache.service": (5000, 5000),
                   CONTAINER: (8000, 40)},
    "healthy": {"/workload.slice/proxy.service": (2000, 2000),
                "/workload.slice/cache.service": (5000, 5000),
                CONTAINER: (800, 800)},
}

# Tree: path -> static sizes. Interior nodes get hierarchical sums.
CGROUPS = {
    "/": {},
    "/system.slice": {},
    "/system.slice/sshd.service": {"anon": 8 * MiB, "file": 20 * MiB, "sock": 0, "max": None},
    "/kubepods.slice": {},
    "/kubepods.slice/kubepods-burstable.slice": {},
    POD_SLICE: {"max": 256 * MiB},
    # C: the pod's container, throttled like A; pods.json names it shop/frontend-7d9f/web.
    POD_SLICE + "/cri-containerd-" + CONTAINER_ID + ".scope":
        {"anon": 160 * MiB, "file": 60 * MiB, "sock": 12 * MiB, "max": None, "swap": 30 * MiB},
    "/workload.slice": {},
    # A: a proxy with lots of hot anon memory near its limit and socket buffers.
    "/workload.slice/proxy.service": {"anon": 700 * MiB, "file": 180 * MiB, "sock": 48 * MiB,
                                      "max": 1024 * MiB, "low": 0, "swap": 200 * MiB, "swap_max": 512 * MiB},
    # B: a cache that streams files; reclaim finds clean page cache easily.
    "/workload.slice/cache.service": {"anon": 50 * MiB, "file": 400 * MiB, "sock": 2 * MiB,
                                      "max": 512 * MiB, "low": 64 * MiB, "swap": 0},
}


def children(path):
    pref = path.rstrip("/") + "/"
    return [c for c in CGROUPS if c != path and c.startswith(pref) and "/" not in c[len(pref):]]


def write(path, text):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Sim:
    def __init__(self, root, state, sock_throttled):
        self.root = os.path.abspath(root)
        self.cg = os.path.join(self.root, "cgroupfs")
        self.proc = os.path.join(self.root, "procfs")
        self.sys = os.path.join(self.root, "sysfs")
        self.state_file = os.path.join(self.root, "sim.state")
        self.state = state
        self.sock_throttled = sock_throttled
        self.t = 0
        # Local (own-LRU) counters per cgroup.
        self.scan = {c: 0 for c in CGROUPS}
        self.steal = {c: 0 for c in CGROUPS}
        self.throttled = {c: 0 for c in CGROUPS}
        self.psi_some = {c: 0 for c in CGROUPS}
        self.psi_full = {c: 0 for c in CGROUPS}
        self.netstat = {"PruneCalled": 0, "RcvPruned": 0, "OfoPruned": 0, "TCPRcvCollapsed": 0,
                        "TCPMemoryPressures": 0, "TCPMemoryPressuresChrono": 0, "TCPRcvQDrop": 0,
                        "TCPOFODrop": 0, "TCPWantZeroWindowAdv": 0, "TCPToZeroWindowAdv": 0,
                        "TCPFromZeroWindowAdv": 0}
        self.psi_node = [0, 0]

    # -- static layout -------------------------------------------------------
    def build(self):
        for c in CGROUPS:
            os.makedirs(self.cgdir(c), exist_ok=True)
        for d in ("sys/kernel", "sys/net/ipv4", "net", "pressure"):
            os.makedirs(os.path.join(self.proc, d), exist_ok=True)
        os.makedirs(os.path.join(self.sys, "fs", "cgroup"), exist_ok=True)
        ctrl = "cpuset cpu io memory hugetlb pids rdma misc\n"
        for c in CGROUPS:
            d = self.cgdir(c)
            write(os.path.join(d, "cgroup.controllers"), ctrl)
            write(os.path.join(d, "cgroup.subtree_control", ), ctrl if children(c) else "\n")
            write(os.path.join(d, "cgroup.procs"), "")
        p = self.proc
        write(os.path.join(p, "cmdline"), "BOOT_IMAGE=/boot/vmlinuz-6.1.0-sim root=/dev/vda1 ro quiet\n")
        write(os.path.join(p, "sys/kernel/osrelease"), "6.1.0-sim\n")
        write(os.path.join(p, "sys/net/ipv4/tcp_mem"), "188958\t251946\t377916\n")
        write(os.path.join(p, "swaps"), "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
                                        "/dev/vdb                                partition\t8388604\t\t"
                                        "409600\t\t-2\n")
        with open(os.path.join(self.root, "pods.json"), "w") as f:
            json.dump(PODS, f, indent=1)
        if not os.path.exists(self.state_file):
            write(self.state_file, self.state + "\n")

    def cgdir(self, c):
        return self.cg if c == "/" else os.path.join(self.cg, c.lstrip("/"))

    # -- dynamics -------------------------------------------------------------
    def read_state(self):
        try:
            s = open(self.state_file).read().strip()
        except OSError:
            return
        if s in RATES and s != self.state:
            print(f"sim: state {self.state} -> {s}", flush=True)
            self.state = s

    def set_state(self, s):
        write(self.state_file, s + "\n")

    def hier(self, table, c):
        return table[c] + sum(self.hier(table, k) for k in children(c))

    def size(self, c, key):
        if CGROUPS[c].get(key) is not None:
            return CGROUPS[c][key]
        return sum(self.size(k, key) for k in children(c))

    def step(self, dt):
        self.read_state()
        rates = RATES[self.state]
        for c, (s, r) in rates.items():
            self.scan[c] += int(s * dt)
            self.steal[c] += int(r * dt)
        bad = self.state == "throttling"
        a = "/workload.slice/proxy.service"
        if bad:
            self.throttled[CONTAINER] += int(300 * dt)
            # Memory stalls are modest (PSI is only a co-signal) while sockets
            # are throttled; sock_throttled counts pressure checks (6.19+).
            self.psi_some[a] += int(30000 * dt)
            self.psi_full[a] += int(5000 * dt)
            self.throttled[a] += int(800 * dt)
            self.netstat["PruneCalled"] += int(40 * dt)
            self.netstat["TCPWantZeroWindowAdv"] += int(3 * dt)
        self.psi_some["/workload.slice/cache.service"] += int(1000 * dt)
        self.t += dt
        self.write_all()

    def write_all(self):
        # Deepest cgroups first: a reader that walks top-down (as the agent does) and races with
        # this update then sees a parent *older* than its children, as with a kernel stats flush
        # between two reads. The other order would show a parent newer than its children, which
        # the kernel never does, and fake scanning in the parent (local = parent - children).
        for c in sorted(CGROUPS, key=lambda c: -(0 if c == "/" else c.count("/"))):
            self.write_cgroup(c)
        self.write_proc()

    def write_cgroup(self, c):
        d = self.cgdir(c)
        anon, file_, sock = self.size(c, "anon"), self.size(c, "file"), self.size(c, "sock")
        scan, steal = self.hier(self.scan, c), self.hier(self.steal, c)
        stat = [("anon", anon), ("file", file_), ("kernel", 16 * MiB), ("sock", sock), ("shmem", 0),
                ("inactive_anon", anon // 4), ("active_anon", anon - anon // 4),
                ("inactive_file", file_ // 2), ("active_file", file_ - file_ // 2),
                ("pgscan", scan), ("pgsteal", steal),
                ("pgscan_kswapd", scan * 3 // 4), ("pgscan_direct", scan - scan * 3 // 4),
                ("pgscan_khugepaged", 0),
                ("pgsteal_kswapd", steal * 3 // 4), ("pgsteal_direct", steal - steal * 3 // 4),
                ("pgsteal_khugepaged", 0),
                ("pgrefill", scan // 2), ("pgactivate", scan // 2), ("pgdeactivate", scan // 3),
                ("workingset_refault_anon", steal // 2), ("workingset_refault_file", steal // 3)]
        write(os.path.join(d, "memory.stat"), "".join(f"{k} {v}\n" for k, v in stat))
        some, full = self.hier(self.psi_some, c), self.hier(self.psi_full, c)
        write(os.path.join(d, "memory.pressure"),
              f"some avg10=0.00 avg60=0.00 avg300=0.00 total={some}\n"
              f"full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n")
        if c == "/":
            return  # the root cgroup has no memory.current/max/events files
        cur = anon + file_ + sock + 16 * MiB
        mx = CGROUPS[c].get("max")
        write(os.path.join(d, "memory.current"), f"{cur}\n")
        write(os.path.join(d, "memory.max"), f"{mx}\n" if mx else "max\n")
        write(os.path.join(d, "memory.high"), "max\n")
        write(os.path.join(d, "memory.low"), f"{CGROUPS[c].get('low') or 0}\n")
        write(os.path.join(d, "memory.min"), "0\n")
        write(os.path.join(d, "memory.swap.current"), f"{self.size(c, 'swap') if 'swap' in CGROUPS[c] or children(c) else 0}\n")
        smax = CGROUPS[c].get("swap_max")
        write(os.path.join(d, "memory.swap.max"), f"{smax}\n" if smax else "max\n")
        st_local = self.throttled[c]
        st = self.hier(self.throttled, c)
        extra_l = f"sock_throttled {st_local}\n" if self.sock_throttled else ""
        extra = f"sock_throttled {st}\n" if self.sock_throttled else ""
        high = int(self.t) * 3 if c == "/workload.slice/proxy.service" else 0
        write(os.path.join(d, "memory.events"),
              f"low 0\nhigh {high}\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n{extra}")
        write(os.path.join(d, "memory.events.local"),
              f"low 0\nhigh {high}\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n{extra_l}")

    def write_proc(self):
        p = self.proc
        keys = ["SyncookiesSent", "SyncookiesRecv", "EmbryonicRsts", "PruneCalled", "RcvPruned", "OfoPruned",
                "TCPRcvCollapsed", "TCPMemoryPressures", "TCPMemoryPressuresChrono", "TCPRcvQDrop",
                "TCPOFODrop", "TCPWantZeroWindowAdv", "TCPToZeroWindowAdv", "TCPFromZeroWindowAdv"]
        vals = [self.netstat.get(k, 0) for k in keys]
        write(os.path.join(p, "net/netstat"),
              "TcpExt: " + " ".join(keys) + "\nTcpExt: " + " ".join(map(str, vals)) + "\n"
              "IpExt: InNoRoutes InTruncatedPkts InOctets\nIpExt: 0 0 123456789\n")
        write(os.path.join(p, "net/sockstat"),
              "sockets: used 412\nTCP: inuse 37 orphan 0 tw 12 alloc 45 mem 1536\n"
              "UDP: inuse 4 mem 3\nUDPLITE: inuse 0\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n")
        scan, steal = self.hier(self.scan, "/"), self.hier(self.steal, "/")
        vm = [("nr_free_pages", 250000), ("pgscan_kswapd", scan * 3 // 4), ("pgscan_direct", scan - scan * 3 // 4),
              ("pgscan_khugepaged", 0), ("pgscan_proactive", 0),
              ("pgsteal_kswapd", steal * 3 // 4), ("pgsteal_direct", steal - steal * 3 // 4),
              ("pgsteal_khugepaged", 0), ("pgsteal_proactive", 0), ("pswpin", steal // 10), ("pswpout", steal // 5)]
        write(os.path.join(p, "vmstat"), "".join(f"{k} {v}\n" for k, v in vm))
        some, full = self.hier(self.psi_some, "/"), self.hier(self.psi_full, "/")
        write(os.path.join(p, "pressure/memory"),
              f"some avg10=0.00 avg60=0.00 avg300=0.00 total={some}\n"
              f"full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, help="directory to build the tree in")
    ap.add_argument("--state", choices=sorted(RATES), default="throttling")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between updates")
    ap.add_argument("--once", action="store_true", help="write one step and exit")
    ap.add_argument("--duration", type=float, default=0, help="exit after this many seconds (0 = forever)")
    ap.add_argument("--sock-throttled", action="store_true",
                    help="also write the 6.19+ memory.events sock_throttled key")
    args = ap.parse_args()

    sim = Sim(args.root, args.state, args.sock_throttled)
    sim.build()
    if os.path.exists(sim.state_file):
        sim.set_state(args.state)
    signal.signal(signal.SIGUSR1, lambda *_: sim.set_state("healthy"))
    signal.signal(signal.SIGUSR2, lambda *_: sim.set_state("throttling"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sim.step(0)
    print(f"sim: tree at {sim.root} (state {sim.state})", flush=True)
    if args.once:
        return 0
    start = time.monotonic()
    next_t = start + args.interval
    while not args.duration or time.monotonic() - start < args.duration:
        time.sleep(max(0.0, next_t - time.monotonic()))
        sim.step(args.interval)
        next_t += args.interval
    return 0


if __name__ == "__main__":
    sys.exit(main())
