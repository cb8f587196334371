#!/usr/bin/env python3
"""What slow readers cost the agent (issue 29), on loopback only, bounded in count and time.

Generates a cgroup tree of N cgroups (bench/make_tree.py, never the real cgroupfs), starts the agent on it, and
for each case opens READERS connections per path that ask for the path and then read RATE bytes a second (0:
never), for SECONDS (past the write deadline). A case is one path, or several joined by '+' (opened at once).
While they are held it samples, every 100 ms: the agent's VmRSS, the host's TCP memory and orphaned sockets
(/proc/net/sockstat: host-wide, the readers' own receive queues count too), and the send buffer (skmem tb) of
the agent's accepted sockets (ss -tmn); once a second a normal /metrics scrape and a /healthz probe are timed.
It prints the agent's RSS before, its peak, its RSS 5 s after the readers are closed, how the readers' connections
ended (reset / closed by FIN / still open), and those latencies. Each case runs on a fresh agent.

usage: bench/slow_readers.py AGENT [--cgroups 10000] [--readers 150] [--rate 4] [--seconds 20] [--pace 0.01]
       [--case /metrics] [--case '/api/v1/cgroups?pretty=1'] [--tree DIR] [--agent-arg=FLAG ...]
"""
import argparse
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "common"))
from hostile import SlowReaders  # noqa: E402
from ports import free_port  # noqa: E402

FIX = os.path.join(HERE, "..", "tests", "fixtures", "v2")
PAGE = os.sysconf("SC_PAGE_SIZE")


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def sockstat():
    """(TCP memory in bytes, orphaned TCP sockets), host-wide."""
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                v = line.split()[1:]
                d = dict(zip(v[::2], map(int, v[1::2])))
                return d.get("mem", 0) * PAGE, d.get("orphan", 0)
    return 0, 0


def tcp_mem_pressure_bytes():
    with open("/proc/sys/net/ipv4/tcp_mem") as f:
        return int(f.read().split()[1]) * PAGE


def server_sndbufs(port):
    """skmem tb (the send buffer, bytes) of each established socket whose local port is the agent's."""
    out = subprocess.run(["ss", "-tmnH", "state", "established", f"( sport = :{port} )"], capture_output=True,
                         text=True).stdout
    return [int(m) for m in re.findall(r"\btb(\d+)", out)]


def timed_get(port, path, timeout=15):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return time.monotonic() - t0, r.status
    except (OSError, http.client.HTTPException):
        return time.monotonic() - t0, 0
    finally:
        c.close()


def run_case(a, tree, paths):
    port = free_port()
    args = [a.agent, f"--web.listen-address=127.0.0.1:{port}", "--sample.interval=1s",
            f"--cgroup.max={a.cgroups + 100}", f"--path.procfs={FIX}/proc", f"--path.sysfs={FIX}/sys",
            f"--path.cgroupfs={tree}", "--no-collector.bpf", "--no-collector.bpf_census",
            "--no-collector.sock_diag", *a.agent_args]
    log = tempfile.TemporaryFile()
    agent = subprocess.Popen(args, stdout=log, stderr=log)
    readers = []
    try:
        deadline = time.time() + 120
        while timed_get(port, "/readyz", 1)[1] != 200:
            if time.time() > deadline or agent.poll() is not None:
                log.seek(0)
                sys.exit("agent did not start: " + log.read().decode(errors="replace")[-2000:])
            time.sleep(0.2)
        time.sleep(3)
        rss0 = status_kb(agent.pid, "VmRSS")
        hwm0 = status_kb(agent.pid, "VmHWM")
        tcp0, orphan0 = sockstat()
        peak = {"rss": rss0, "tcp": tcp0, "orphan": orphan0, "tb": 0}
        lat = {"/healthz": [], "/metrics": []}
        codes = {"/healthz": [], "/metrics": []}
        stop = threading.Event()

        def sample():
            while not stop.wait(0.1):
                peak["rss"] = max(peak["rss"], status_kb(agent.pid, "VmRSS"))
                tcp, orphan = sockstat()
                peak["tcp"] = max(peak["tcp"], tcp)
                peak["orphan"] = max(peak["orphan"], orphan)

        def probe():
            while not stop.wait(1.0):
                for path in lat:
                    t, code = timed_get(port, path)
                    lat[path].append(t)
                    codes[path].append(code)

        threads = [threading.Thread(target=sample), threading.Thread(target=probe)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        for p in paths:
            readers.append(SlowReaders(port, a.readers, p, a.rate, pace=a.pace))
        while time.monotonic() - t0 < a.seconds:
            time.sleep(0.5)
            peak["tb"] = max([peak["tb"], *server_sndbufs(port)])
        stop.set()
        for t in threads:
            t.join()
        for r in readers:
            r.drain()
        ended = [r.ended() for r in readers]
        statuses = [r.statuses() for r in readers]
        for r in readers:
            r.close()
        readers = []
        time.sleep(5)
        rss_after = status_kb(agent.pid, "VmRSS")
        hwm = status_kb(agent.pid, "VmHWM")

        mib = lambda kb: kb / 1024.0  # noqa: E731
        print(f"== {' + '.join(paths)}: {a.readers} readers each at {a.rate} B/s for {a.seconds:.0f} s, "
              f"{a.cgroups} cgroups")
        print(f"  agent RSS {mib(rss0):.1f} MiB before (VmHWM {mib(hwm0):.1f}), peak {mib(peak['rss']):.1f} MiB "
              f"(VmHWM {mib(hwm):.1f}), {mib(rss_after):.1f} MiB 5 s after the readers closed")
        pressure = tcp_mem_pressure_bytes()
        print(f"  host TCP memory {tcp0 / 2**20:.1f} MiB before, peak {peak['tcp'] / 2**20:.1f} MiB "
              f"({100.0 * peak['tcp'] / pressure:.1f} % of tcp_mem pressure {pressure / 2**20:.0f} MiB); "
              f"orphans {orphan0} before, peak {peak['orphan']}")
        print(f"  largest send buffer (skmem tb) of an accepted socket: {peak['tb'] / 1024:.0f} KiB")
        for p, e, st in zip(paths, ended, statuses):
            print(f"  {p} readers: answers " + ", ".join(f"{k} x{v}" for k, v in sorted(st.items())) +
                  "; ended " + ", ".join(f"{k} {v}" for k, v in sorted(e.items())))
        for path, v in lat.items():
            ok = sum(c == 200 for c in codes[path])
            worst = max(v) * 1000 if v else float("nan")
            print(f"  {path:9s} during: {ok}/{len(v)} answered 200, worst {worst:.0f} ms")
    finally:
        for r in readers:
            r.close()
        agent.terminate()
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("agent")
    ap.add_argument("--cgroups", type=int, default=10000)
    ap.add_argument("--readers", type=int, default=150)
    ap.add_argument("--rate", type=int, default=4, help="bytes each reader reads a second (0: never reads)")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--pace", type=float, default=0.01, help="seconds between two readers' connections")
    ap.add_argument("--case", action="append", help="a path, or paths joined by '+' held at once")
    ap.add_argument("--tree", help="an existing tree of --cgroups cgroups (default: generated, then removed)")
    ap.add_argument("--agent-arg", dest="agent_args", action="append", default=[],
                    help="a further agent flag (repeat for more), e.g. --agent-arg=--web.max-requests=400")
    a = ap.parse_args()
    cases = a.case or ["/metrics", "/api/v1/cgroups?pretty=1"]
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    work = None if a.tree else tempfile.mkdtemp(prefix="sockpressure-slow.", dir=base)
    try:
        tree = a.tree or os.path.join(work, "tree")
        if not a.tree:
            subprocess.run([sys.executable, os.path.join(HERE, "make_tree.py"), tree, str(a.cgroups)], check=True)
        for case in cases:
            run_case(a, tree, case.split("+"))
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
