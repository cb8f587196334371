#!/usr/bin/env python3
"""Hostile clients against the real agent binary, on loopback only (issue 14).

Each check drives the agent the way an attacker on the node's network could and
asserts the agent keeps serving legitimate requests. Every connection this test
opens is closed before it ends; every wait is bounded.

usage: hostile_clients_test.py AGENT
"""
import base64
import collections
import ctypes
import ctypes.util
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from hostile import HeldConnections, SlowReaders  # noqa: E402
from make_tree import main as make_tree  # noqa: E402
from ports import free_port  # noqa: E402

AGENT = sys.argv[1]
FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "v2")
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def agent_args(port, *extra, cgroupfs=f"{FIX}/cgroup"):
    return [AGENT, f"--web.listen-address=127.0.0.1:{port}", f"--path.procfs={FIX}/proc",
            f"--path.sysfs={FIX}/sys", f"--path.cgroupfs={cgroupfs}", "--no-collector.bpf",
            "--no-collector.bpf_census", "--no-collector.sock_diag", *extra]


class Agent:
    def __init__(self, *extra, cgroupfs=f"{FIX}/cgroup", ready_within=20):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(agent_args(self.port, *extra, cgroupfs=cgroupfs), stdout=self.log,
                                     stderr=self.log)
        deadline = time.time() + ready_within
        while time.time() < deadline:
            try:
                if get(self.port, "/readyz", timeout=1)[0] in (200, 401):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit("agent did not start: " + self.output())

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def get(port, path, headers=None, timeout=10, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def raw(port, data, timeout=5):
    """Sends raw bytes; returns (seconds until the reply or close, first reply bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    t0 = time.time()
    try:
        s.sendall(data)
        try:
            reply = s.recv(4096)
        except socket.timeout:
            reply = b""
        return time.time() - t0, reply
    finally:
        s.close()


def test_slowloris_and_idle():
    a = Agent()
    held = HeldConnections(a.port, idle=300, slow=8, drip=1.0)
    try:
        time.sleep(1.5)
        worst = {"/healthz": 0.0, "/metrics": 0.0}
        answered = 0
        for _ in range(5):
            for path in worst:
                t0 = time.time()
                try:
                    answered += get(a.port, path, timeout=15)[0] == 200
                except OSError:
                    pass
                worst[path] = max(worst[path], time.time() - t0)
        print(f"     300 idle + 8 slowloris held: 10 requests, {answered} answered; worst /healthz "
              f"{worst['/healthz'] * 1000:.0f} ms, worst /metrics {worst['/metrics'] * 1000:.0f} ms")
        # Generous sanity bounds; the percentiles come from bench/hostile_load.py.
        check(answered == 10, "every /healthz and /metrics answered with 300 idle + 8 slowloris connections")
        check(worst["/healthz"] < 2.0 and worst["/metrics"] < 3.0,
              "answered within seconds, not after the attackers' timeouts")
    finally:
        held.close()
        a.stop()


def test_connection_cap():
    a = Agent()
    held = []
    try:
        # Over the 1,000-connection cap the oldest idle connections are shed,
        # so the newest (a probe) is still served.
        for _ in range(1100):
            held.append(socket.create_connection(("127.0.0.1", a.port), timeout=5))
        time.sleep(0.5)
        t0 = time.time()
        code = get(a.port, "/healthz", timeout=10)[0]
        took = time.time() - t0
        closed = 0
        for s in held[:200]:
            s.settimeout(0.01)
            try:
                closed += s.recv(1) == b""
            except OSError:
                pass
        print(f"     1100 idle connections: /healthz {code} in {took * 1000:.0f} ms; "
              f"{closed} of the 200 oldest closed by the agent")
        check(code == 200, "/healthz served with 1100 idle connections held")
        check(closed >= 100, "the oldest idle connections were shed")
    finally:
        for s in held:
            s.close()
        a.stop()


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def queued_by_server(port):
    """{client port: bytes the kernel holds to send to it} for the server's connections on `port` (/proc/net/tcp
    tx_queue), orphans included; not the listener, not TIME_WAIT (06) or CLOSE (07) entries."""
    out = {}
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if (int(fields[1].split(":")[1], 16) == port and fields[2] != "00000000:0000"
                    and fields[3] not in ("06", "07")):
                out[int(fields[2].split(":")[1], 16)] = int(fields[4].split(":")[0], 16)
    return out


def test_slow_readers():
    # Issue 29: 150 readers that take 4 bytes a second, of /metrics and of the pretty JSON list each, on
    # 10,000 cgroups, pushed the agent from 45 to 241 MB and 509 MB, and each could make the kernel queue
    # 4 MB for it, kept by an orphan after the write deadline.
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="sockpressure-slow.", dir=base)
    a = None
    readers = []
    try:
        make_tree(os.path.join(work, "tree"), 10000)
        # Every reader admitted (--web.max-requests bounds CPU, not memory).
        a = Agent("--cgroup.max=10100", "--web.max-requests=400", cgroupfs=os.path.join(work, "tree"),
                  ready_within=120)
        time.sleep(2)
        rss0 = status_kb(a.proc.pid, "VmRSS")
        stop = threading.Event()
        peak = {"rss": rss0, "queued": 0}
        worst = {"/healthz": 0.0, "/metrics": 0.0}
        codes = []

        def watch():
            while not stop.wait(0.1):
                peak["rss"] = max(peak["rss"], status_kb(a.proc.pid, "VmRSS"))
                peak["queued"] = max([peak["queued"], *queued_by_server(a.port).values()])

        def probe():
            while not stop.wait(1.0):
                for path in worst:
                    t0 = time.time()
                    try:
                        codes.append(get(a.port, path, timeout=15)[0])
                    except (OSError, http.client.HTTPException) as e:
                        codes.append(f"{path} {type(e).__name__}")
                    worst[path] = max(worst[path], time.time() - t0)
        threads = [threading.Thread(target=watch), threading.Thread(target=probe)]
        for t in threads:
            t.start()
        t0 = time.time()
        readers = [SlowReaders(a.port, 150, path, rate=4, pace=0.01)
                   for path in ("/metrics", "/api/v1/cgroups?pretty=1")]
        # Past the 10 s write deadline (plus 1 s per MB of what each was sent), counted from each answer's
        # first piece, which a loaded host may render late: until the agent holds none of them, or 30 s.
        ports = {s.getsockname()[1] for r in readers for s in r.sockets}
        while time.time() - t0 < 30 and (time.time() - t0 < 12 or ports & queued_by_server(a.port).keys()):
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join()
        for r in readers:
            r.drain()
        ended = [r.ended() for r in readers]
        answers = [r.statuses() for r in readers]
        for r in readers:
            r.close()
        readers = []
        time.sleep(3)
        rss_after = status_kb(a.proc.pid, "VmRSS")
        hwm = status_kb(a.proc.pid, "VmHWM")
        resets = {l.split('"')[1]: float(l.split()[-1])
                  for l in metric_lines(a.port, "sockpressure_http_responses_reset_total")}
        mib = 1024.0
        print(f"     150 + 150 readers at 4 B/s, 10,000 cgroups: RSS {rss0 / mib:.1f} MiB before, peak "
              f"{peak['rss'] / mib:.1f} (VmHWM {hwm / mib:.1f}), {rss_after / mib:.1f} after; largest send queue "
              f"{peak['queued'] // 1024} KiB; answers {[dict(x) for x in answers]}; ended {[dict(e) for e in ended]}; "
              f"worst /healthz {worst['/healthz'] * 1000:.0f} ms, /metrics {worst['/metrics'] * 1000:.0f} ms; "
              f"probe answers {dict(collections.Counter(codes))}; resets counted {resets}; {time.time() - t0:.1f} s")
        check(all(x.get("200", 0) == 150 for x in answers), "every slow reader got its answer begun (200)")
        # The kernel counts twice SO_SNDBUF (256 KiB) and lets one more 64 KiB segment in past it.
        check(0 < peak["queued"] <= 576 * 1024,
              "the kernel queues at most 576 KiB for a reader (with autotuning: 4 MiB)")
        sanitizer = os.environ.get("SOCKPRESSURE_SANITIZER")
        if sanitizer:
            # What is bounded here is memory and time: a sanitizer's quarantine keeps freed memory (the
            # agent starts at 134 MiB under ASan) and its slowdown moves when the budget and the
            # deadlines act. The Release build is held to them.
            print(f"     memory, reset and timing bounds not checked under {sanitizer}: its quarantine keeps "
                  "freed memory and its slowdown moves the deadlines")
            return
        # The budget (64 MiB, less 512 KiB for the kernel per connection) bounds the pieces held; with the
        # pieces being rendered and the allocator's slack, 80 MiB over the agent's own is generous, and far
        # from the DaemonSet's 256 MiB. It was +200 MB and +460 MB.
        check(peak["rss"] - rss0 < 80 * 1024, "300 slow readers cost the agent under 80 MiB")
        check(hwm < 128 * 1024, "the agent's peak RSS stays under 128 MiB (its sampling peak included)")
        check(rss_after - rss0 < 16 * 1024, "the memory is given back once the readers are gone")
        check(all(e.get("reset", 0) == 150 for e in ended),
              "every slow reader is reset (RST) by the write deadline or the budget, none left to an orphan")
        check(sum(resets.values()) >= 300,
              "each reset is counted in sockpressure_http_responses_reset_total, by reason")
        # /metrics: within Prometheus' default scrape timeout even when other tests load this 2-core host (0.1-0.5 s
        # measured on a quiet one; before, 15 s and most JSON readers got nothing).
        check(all(c == 200 for c in codes) and worst["/healthz"] < 1.0 and worst["/metrics"] < 10.0,
              "/healthz (under 1 s) and /metrics (under 10 s) answered all along")
    finally:
        for r in readers:
            r.close()
        if a:
            a.stop()
        shutil.rmtree(work, ignore_errors=True)


def metric_lines(port, name):
    body = get(port, "/metrics")[2].decode()
    return [l for l in body.splitlines() if l.startswith(name + "{")]


def test_hostile_paths_and_malformed():
    a = Agent("--web.max-requests=1", "--sample.interval=200ms")
    try:
        n = 20000  # the count
        for i in range(n):
            try:
                get(a.port, f"/x{i}", method="TRACE", timeout=5)
            except OSError:
                pass
        for i in range(500):
            try:
                get(a.port, f"/api/v1/cgroups{i}", timeout=5)
            except OSError:
                pass
        time.sleep(0.5)
        series = metric_lines(a.port, "sockpressure_http_requests_total")
        print(f"     {n} TRACE /x<i> + 500 GET /api/v1/cgroups<i>: {len(series)} request series")
        check(0 < len(series) <= 30, "distinct hostile paths add no series")

        for _ in range(1000):
            try:
                raw(a.port, b"GARBAGE\r\n\r\n", timeout=2)
            except OSError:
                pass
        # With --web.max-requests=1, 16 concurrent /metrics requests cannot all
        # be admitted if the in-flight count is right: /metrics renders for
        # longer than it takes to open 16 connections that are already sent.
        codes = []
        lock = threading.Lock()
        barrier = threading.Barrier(16)

        def one():
            barrier.wait()
            try:
                c = get(a.port, "/api/v1/cgroups?pretty=1", timeout=10)[0]
            except OSError:
                c = 0
            with lock:
                codes.append(c)
        rounds = 0
        while rounds < 10 and 503 not in codes:
            rounds += 1
            ts = [threading.Thread(target=one) for _ in range(16)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            barrier.reset()
        print(f"     after 1000 malformed requests, {rounds} rounds of 16 concurrent: "
              f"{codes.count(200)} x 200, {codes.count(503)} x 503")
        check(503 in codes, "--web.max-requests=1 still holds after 1000 malformed requests")
        check(all(c in (200, 503) for c in codes), "every concurrent request answered (200 or 503)")
    finally:
        a.stop()


def test_bodies_encoding_bind():
    a = Agent()
    try:
        for cl in ("10485760", "-1", "99999999999999999999999"):
            secs, reply = raw(a.port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: " + cl.encode() +
                              b"\r\n\r\n", timeout=8)
            code = reply.split(b" ")[1].decode() if reply.startswith(b"HTTP/1.") else "none"
            print(f"     POST Content-Length {cl}: reply {code} after {secs * 1000:.0f} ms")
            check(reply.startswith(b"HTTP/1.1 4") and secs < 1.0,
                  f"POST with Content-Length {cl} answered at once with a 4xx")
        # A client that half-closes after its request (nc -N, some probes) still gets its answer.
        s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        try:
            reply = s.recv(4096)
        except OSError:
            reply = b""
        s.close()
        check(reply.startswith(b"HTTP/1.1 200"), "a request followed by a half-close is answered")
        _, h, _ = get(a.port, "/metrics", {"Accept-Encoding": "gzip;q=0"})
        check(h.get("Content-Encoding") != "gzip", "Accept-Encoding gzip;q=0 gets no gzip")
        _, h, _ = get(a.port, "/metrics", {"Accept-Encoding": "gzip;q=0.5"})
        check(h.get("Content-Encoding") == "gzip", "Accept-Encoding gzip;q=0.5 gets gzip")

        # A second agent on the same port must fail, before sampling, with the reason.
        second = subprocess.run(agent_args(a.port), capture_output=True, text=True, timeout=30)
        out = second.stdout + second.stderr
        print("     second agent: exit", second.returncode, out.strip().splitlines()[-1:] if out else "")
        check(second.returncode != 0 and "in use" in out and "first sample" not in out,
              "a second agent on the same port fails with a clear message before sampling")
        check(get(a.port, "/healthz")[0] == 200, "the first agent still serves")
    finally:
        a.stop()


def test_startup_errors():
    with tempfile.TemporaryDirectory() as d:
        garbage = os.path.join(d, "garbage.pem")
        with open(garbage, "w") as f:
            f.write("not a certificate\n")
        cases = {
            "missing cert": (f"tls_server_config:\n  cert_file: {d}/nope.crt\n  key_file: {garbage}\n", "nope.crt"),
            "garbage cert": (f"tls_server_config:\n  cert_file: {garbage}\n  key_file: {garbage}\n", "garbage.pem"),
        }
        for name, (yml, want) in cases.items():
            path = os.path.join(d, name.replace(" ", "_") + ".yml")
            with open(path, "w") as f:
                f.write(yml)
            r = subprocess.run(agent_args(free_port(), f"--web.config.file={path}"), capture_output=True, text=True,
                               timeout=30)
            out = r.stdout + r.stderr
            print(f"     {name}: exit {r.returncode}: {out.strip().splitlines()[-1:] if out else ''}")
            check(r.returncode != 0 and want in out and "first sample" not in out,
                  f"{name}: refused with the file named, before sampling")
        r = subprocess.run(agent_args(0)[:1] + ["--web.listen-address=256.1.1.1:9", *agent_args(0)[2:]],
                           capture_output=True, text=True, timeout=30)
        out = r.stdout + r.stderr
        print(f"     bad address: exit {r.returncode}: {out.strip().splitlines()[-1:] if out else ''}")
        check(r.returncode != 0 and "256.1.1.1" in out and "first sample" not in out,
              "bad listen address refused before sampling")


def bcrypt_hash(password, cost):
    lib = ctypes.CDLL(ctypes.util.find_library("crypt"))
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt.restype = ctypes.c_char_p
    return lib.crypt(password, lib.crypt_gensalt(b"$2b$", cost, None, 0)).decode()


def test_auth():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "web.yml")
        with open(path, "w") as f:
            f.write(f"basic_auth_users:\n  prometheus: '{bcrypt_hash(b's3cret', 10)}'\n"
                    f"  alice: '{bcrypt_hash(b'wonder', 4)}'\n")
        a = Agent(f"--web.config.file={path}")
        try:
            def cost(user, password):
                hdr = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
                t0 = time.time()
                code = get(a.port, "/metrics", hdr)[0]
                return time.time() - t0, code
            unknown = [cost(f"nobody{i}", "x") for i in range(7)]
            wrong = [cost("prometheus", f"x{i}") for i in range(7)]
            mu = statistics.median(t for t, _ in unknown)
            mw = statistics.median(t for t, _ in wrong)
            print(f"     median 401 time: unknown user {mu * 1000:.1f} ms, wrong password {mw * 1000:.1f} ms")
            check(all(c == 401 for _, c in unknown + wrong), "unknown user and wrong password get 401")
            check(mu > 0.5 * mw, "an unknown user costs what a wrong password costs")
            # Users with different bcrypt costs: a wrong password for the cheap
            # one must not answer faster than an unknown name (that told which
            # names exist: 1.7 ms against 65.9 ms).
            cheap = [cost("alice", f"x{i}") for i in range(7)]
            mc = statistics.median(t for t, _ in cheap)
            print(f"     median 401 time: wrong password of a cost-4 user {mc * 1000:.1f} ms")
            check(all(c == 401 for _, c in cheap), "a wrong password of the cheap user gets 401")
            check(0.5 * mu < mc < 2 * mu, "a cheap user's wrong password costs what an unknown user costs")
            check(get(a.port, "/healthz")[0] == 200, "/healthz answers without credentials (probes)")
            check(get(a.port, "/metrics")[0] == 401, "/metrics still needs credentials")
        finally:
            a.stop()


def test_auth_flood():
    # 40 connections sending wrong passwords (bcrypt cost 10) used to take every
    # request slot and both cores: authenticated scrapes got 503. Failures must
    # not starve the scraper whose credentials were verified before.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "web.yml")
        with open(path, "w") as f:
            f.write(f"basic_auth_users:\n  prometheus: '{bcrypt_hash(b's3cret', 10)}'\n")
        a = Agent(f"--web.config.file={path}")
        good = {"Authorization": "Basic " + base64.b64encode(b"prometheus:s3cret").decode()}
        try:
            check(get(a.port, "/metrics", good)[0] == 200, "the scraper's first scrape")
            stop = threading.Event()
            flood_codes = collections.Counter()

            def flood(i):
                bad = {"Authorization": "Basic " + base64.b64encode(f"prometheus:guess{i}".encode()).decode()}
                while not stop.is_set():
                    try:
                        flood_codes[get(a.port, "/metrics", bad, timeout=10)[0]] += 1
                    except Exception:
                        flood_codes["error"] += 1

            threads = [threading.Thread(target=flood, args=(i,), daemon=True) for i in range(40)]
            for t in threads:
                t.start()
            time.sleep(1)
            answered = 0
            for _ in range(16):
                try:
                    answered += get(a.port, "/metrics", good, timeout=10)[0] == 200
                except Exception:
                    pass
                time.sleep(0.1)
            stop.set()
            for t in threads:
                t.join(15)
            print(f"     good scrapes answered during the flood: {answered}/16; flood answers: {dict(flood_codes)}")
            check(answered >= 15, "a wrong-password flood leaves at least 15 of 16 good scrapes answered")
            check(flood_codes[200] == 0, "no wrong password is let in")
        finally:
            a.stop()


if __name__ == "__main__":
    only = os.environ.get("HOSTILE_ONLY", "")
    for name, fn in list(globals().items()):
        if name.startswith("test_") and (not only or only in name):
            print(f"--- {name}", flush=True)
            fn()
    if FAILURES:
        print(f"FAIL: {len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("PASS")
