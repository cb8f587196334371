#!/usr/bin/env python3
"""Latency of /healthz and /metrics while hostile clients hold connections
(issue 14 targets), on loopback only, bounded in count and time.

Starts the agent binary on a fixture tree, opens IDLE silent connections and
SLOW slowloris connections (a request head that never ends: one header line
every 3 s), then runs SCRAPERS concurrent scrapers (a new connection per
request, ROUNDS requests each) while one prober requests /healthz every 20 ms.
Prints p50/p90/p99/max per route, how many requests were not answered 200,
and the host's ListenOverflows delta (host-wide: other loopback traffic on a
shared host counts too). Every connection is closed and the agent stopped at
the end.

usage: bench/hostile_load.py AGENT [--idle 300] [--slow 8] [--scrapers 200]
       [--rounds 5] [--max-requests 400] [--tls] [--keep-alive] [--procs 4]
"""
import argparse
import http.client
import multiprocessing
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "common"))
from hostile import HeldConnections  # noqa: E402
from ports import free_port  # noqa: E402

FIX = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "v2")


def listen_overflows():
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            d = dict(zip(names.split()[1:], values.split()[1:]))
            return int(d.get("ListenOverflows", 0))
    return 0


def cpu_seconds(pid):
    """utime + stime of a process, all threads (for telling server from client cost)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def connect(port, cafile, timeout=30):
    if cafile:
        return http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                           context=ssl.create_default_context(cafile=cafile))
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


def timed_request(port, cafile, path, timeout=30, conn=None):
    """One GET: on `conn` when given (kept open), else on a new connection closed afterwards."""
    c = conn or connect(port, cafile, timeout)
    t0 = time.monotonic()
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return time.monotonic() - t0, r.status
    except (OSError, http.client.HTTPException):
        c.close()
        return time.monotonic() - t0, 0
    finally:
        if conn is None:
            c.close()


def run_prober(port, cafile, start_at, a):
    """/healthz every 20 ms from the start until the stop file appears."""
    time.sleep(max(0.0, start_at - time.time()))
    times, bad = [], 0
    while not os.path.exists(a.stop_file):
        t, code = timed_request(port, cafile, "/healthz")
        times.append(t)
        bad += code != 200
        time.sleep(0.02)
    return times, bad


def run_scrapers(port, cafile, start_at, n, rounds, keep_alive):
    """n threads, each `rounds` scrapes of /metrics, all starting at start_at. At nice 10: on a loaded
    host the load generators must not delay the prober's own process, or its numbers measure the client."""
    os.nice(10)
    times, bad = [], [0]
    lock = threading.Lock()

    def scrape():
        time.sleep(max(0.0, start_at - time.time()))
        conn = connect(port, cafile) if keep_alive else None
        for _ in range(rounds):
            t, code = timed_request(port, cafile, "/metrics", conn=conn)
            with lock:
                times.append(t)
                bad[0] += code != 200
        if conn:
            conn.close()
    ts = [threading.Thread(target=scrape) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return times, bad[0], time.time() - start_at


def stop_file_touch(path):
    open(path, "w").close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("agent")
    ap.add_argument("--idle", type=int, default=300)
    ap.add_argument("--slow", type=int, default=8)
    ap.add_argument("--scrapers", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-requests", type=int, default=400)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--tls-key", default="rsa:2048",
                    help="openssl req -newkey argument, e.g. ec -pkeyopt ec_paramgen_curve:P-256 via 'ec:PARAMFILE'")
    ap.add_argument("--keep-alive", action="store_true",
                    help="each scraper keeps its connection, as Prometheus does (default: a new one per request)")
    ap.add_argument("--procs", type=int, default=4, help="client processes the scrapers are spread over")
    a = ap.parse_args()

    port = free_port()
    work = tempfile.TemporaryDirectory()
    args = [a.agent, f"--web.listen-address=127.0.0.1:{port}", f"--web.max-requests={a.max_requests}",
            f"--path.procfs={FIX}/proc", f"--path.sysfs={FIX}/sys", f"--path.cgroupfs={FIX}/cgroup",
            "--no-collector.bpf", "--no-collector.bpf_census", "--no-collector.sock_diag"]
    if a.tls:
        crt, key = os.path.join(work.name, "tls.crt"), os.path.join(work.name, "tls.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", a.tls_key, "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", crt],
                       check=True, capture_output=True)
        with open(os.path.join(work.name, "web.yml"), "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n")
        args.append(f"--web.config.file={work.name}/web.yml")

    ctx_file = crt if a.tls else None
    stop_file = os.path.join(work.name, "stop")
    a.stop_file = stop_file

    def request(path, timeout=30):
        return timed_request(port, ctx_file, path, timeout)

    log = tempfile.TemporaryFile()
    agent = subprocess.Popen(args, stdout=log, stderr=log)
    held = None
    try:
        deadline = time.time() + 20
        while request("/readyz", 1)[1] != 200:
            if time.time() > deadline or agent.poll() is not None:
                log.seek(0)
                sys.exit("agent did not start: " + log.read().decode(errors="replace"))
            time.sleep(0.1)
        overflows0 = listen_overflows()
        cpu0 = cpu_seconds(agent.pid)
        held = HeldConnections(port, a.idle, a.slow, drip=3.0)
        time.sleep(1.0)

        # The prober and the scrapers run in their own processes so that the
        # client's interpreter lock does not add to the measured latencies.
        start_at = time.time() + 1.0
        with multiprocessing.Pool(a.procs + 1) as pool:
            probe = pool.apply_async(run_prober, (port, ctx_file, start_at, a))
            per = [a.scrapers // a.procs + (i < a.scrapers % a.procs) for i in range(a.procs)]
            jobs = [pool.apply_async(run_scrapers, (port, ctx_file, start_at, n, a.rounds, a.keep_alive))
                    for n in per if n]
            results = [j.get() for j in jobs]
            elapsed = max(r[2] for r in results)
            metrics = [t for r in results for t in r[0]]
            bad = {"metrics": sum(r[1] for r in results)}
            stop_file_touch(stop_file)
            health, bad["healthz"] = probe.get()
        tls = f" (TLS, {a.tls_key.split(':')[0]} key)" if a.tls else ""
        keep = ", keep-alive" if a.keep_alive else ""
        print(f"agent {a.agent}{tls}: {a.idle} idle + {a.slow} slowloris connections held, {a.scrapers} concurrent "
              f"scrapers x {a.rounds} (--web.max-requests={a.max_requests}{keep}), {elapsed:.1f} s")
        for name, v in (("/healthz", health), ("/metrics", metrics)):
            key = name.strip("/")
            print(f"  {name:9s} n={len(v):5d} p50={pct(v, 50) * 1000:8.1f} ms  p90={pct(v, 90) * 1000:8.1f} ms  "
                  f"p99={pct(v, 99) * 1000:8.1f} ms  max={max(v) * 1000:8.1f} ms  not-200={bad[key]}")
        print(f"  ListenOverflows +{listen_overflows() - overflows0} (host-wide); agent CPU "
              f"{cpu_seconds(agent.pid) - cpu0:.2f} s over the run")
    finally:
        if held:
            held.close()
        agent.terminate()
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()


if __name__ == "__main__":
    main()
