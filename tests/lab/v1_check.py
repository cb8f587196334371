#!/usr/bin/env python3
"""The kernel lab on cgroup v1: one boot of Debian's 6.1 with the memory controller mounted on v1
(guest/v1.sh, lab.cond=v1) and the agent with its default flags.

On v1 a socket is charged to its memcg only once that memcg's tcp limit was written, and only charged
sockets can be throttled by memcg socket pressure, so where no limit is written the agent samples once
per context interval (docs/sampling.md, "Where nothing can move"). What must hold on the real kernel:

  waits      idle and with no limit written, the agent samples every context interval (10 s);
  kernel     after a limit is written on A during such a wait and a slow reader in A receives a stream,
             the kernel refuses A's socket memory (memory.kmem.tcp.failcnt > 0) and clamps the
             receiver's window (tcprecv: clamped_checks > 0): this is the throttling to be seen;
  back       the agent samples every interval again within one context interval of the write (plus
             TCG slack);
  named      the agent names A under socket pressure (sockpressure_memcg_socket_pressure_active) within
             the same bound and counts A's window clamps.

Exit 0 when every check passes, 1 when one fails, 2 when a prerequisite is missing.
  tests/lab/v1_check.py [--agent PATH] [--results DIR] [--kernel 6.1]
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

import lab

CONTEXT_SECONDS = 10  # the agent's default --sample.context-interval
# A TCG guest's agent and wget run late by seconds under load (the lab's detection latencies).
SLACK_SECONDS = 12


def build_guest(kernel, agent):
    p = subprocess.run([os.path.join(lab.LAB_DIR, "build-guest"), "--kernel", kernel, "--agent", agent],
                       stdout=subprocess.PIPE, text=True, timeout=1800)
    if p.returncode != 0:
        return None
    return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)


def wait_for(console, kind, phase, timeout):
    end = time.time() + timeout
    while time.time() < end and console.alive():
        for e in console.all(kind):
            if e[2].get("phase") == phase:
                return e
        time.sleep(0.5)
    return None


def phase(console, name):
    return next((e for e in console.all("v1") if e[2].get("phase") == name), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", help="agent binary (default: build-lab/ or build/ sockpressure_exporter)")
    ap.add_argument("--results", help="results directory (default tests/lab/.cache/results/v1-<time>)")
    ap.add_argument("--kernel", default="6.1", help="Debian kernel series (build-guest --kernel)")
    ap.add_argument("--timeout", type=int, default=480, help="seconds for the whole boot")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    qemu = shutil.which("qemu-system-x86_64")
    agent = lab.find_agent(args.agent)
    missing = ([] if qemu else ["qemu-system-x86_64 (Debian package qemu-system-x86)"]) + (
        [] if agent else ["the agent binary (cmake --build build)"])
    if missing:
        print("lab v1: ERROR: missing prerequisites:\n  - " + "\n  - ".join(missing), file=sys.stderr)
        return 2
    rundir = args.results or os.path.join(lab.LAB_DIR, ".cache", "results", "v1-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(rundir, exist_ok=True)
    lab.log(f"building guest for kernel {args.kernel} (cached by inputs)")
    files = build_guest(args.kernel, agent)
    if not files:
        print(f"lab v1: ERROR: build-guest --kernel {args.kernel} failed (see messages above)", file=sys.stderr)
        return 2
    port = lab.free_port()
    append = ["console=ttyS0", "quiet", "loglevel=4", "panic=-1", "mitigations=off", "lab.cond=v1",
              f"lab.agent_port={lab.GUEST_AGENT_PORT}", "lab.linger=600"]
    fwd = f"hostfwd=tcp:127.0.0.1:{port}-:{lab.GUEST_AGENT_PORT}"
    log_path = os.path.join(rundir, "v1.console.log")
    lab.log(f"booting {files.get('KVER', '?')} with cgroup v1 (console: {os.path.relpath(log_path, lab.REPO)})")
    console = lab.Console(lab.qemu_cmd(qemu, files, append, 1024, fwd), log_path)
    try:
        done = wait_for(console, "v1", "done", args.timeout)
    finally:
        console.stop()
    checks = []

    def check(name, ok, detail):
        checks.append((name, ok, detail))
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}")

    if not done:
        check("boot", False, "the guest did not finish its v1 steps (" +
              ("; ".join(e[3] for e in console.events if e[1] in ("fatal", "v1")) or "no LAB lines") + ")")
        return 1
    idle, written = phase(console, "idle"), phase(console, "limit_written")
    back, seen = phase(console, "back"), phase(console, "pressure_seen")
    d = done[2]
    result = console.first("recv_result")
    clamped = int(result[2].get("clamped_checks", 0)) if result else 0
    check("waits", idle is not None and idle[2].get("interval") == str(CONTEXT_SECONDS),
          f"sample interval {idle[2].get('interval') if idle else 'absent'} s with no tcp limit written "
          f"(sources: {idle[2].get('sources', '?') if idle else '?'}; attached: {idle[2].get('attached', '?') if idle else '?'})")
    check("kernel", int(d.get("failcnt", 0)) > 0 and clamped > 0,
          f"A's memory.kmem.tcp.failcnt {d.get('failcnt')} (limit {written[2].get('limit') if written else '?'}, "
          f"max usage {d.get('max_usage')}); receiver's clamped checks {clamped}")
    limit = CONTEXT_SECONDS + 1 + SLACK_SECONDS
    lag = back[0] - written[0] if back and written else None
    check("back", lag is not None and lag <= limit,
          f"sampling every interval again {lag:.1f} s after the limit was written (<= {limit} s)" if lag is not None
          else "the agent never sampled every interval again")
    seen_lag = seen[0] - written[0] if seen and written else None
    check("named", seen_lag is not None and seen_lag <= limit and float(d.get("clamps") or 0) > 0,
          (f"A under socket pressure {seen_lag:.1f} s after the limit was written (<= {limit} s); "
           if seen_lag is not None
           else "A never named under socket pressure; ") + f"A's window clamps counted: {d.get('clamps')}")
    with open(os.path.join(rundir, "summary.txt"), "w") as f:
        for name, ok, detail in checks:
            f.write(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}\n")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
