#!/usr/bin/env python3
"""The agent's kernel-side cost per byte of traffic, in the lab guest (issue 48).

    bench/lab_netcost.py [--agent build/sockpressure_exporter] [--kernels 6.1,6.12,7] [--window 20]
                         [--loads bulk,rr] [--modes none,always,ondemand] [--results DIR]

One QEMU boot of Debian's kernel per --kernels entry (the lab's guest, tests/lab/build-guest), with
`kernel.bpf_stats_enabled=1`. In that boot, first a healthy node, then the receiver's cgroup really under
socket pressure (the lab's `swap` condition), and in each, for a bulk stream and for 64-byte
request/response (the worst case for a per-segment probe), one window per agent mode: no agent; the
agent with its window-clamp program attached all the time (`--no-bpf.clamps-on-demand`, as before issue
48); the agent as released (bench/lab/netcost.sh). Per window: eBPF program runs and run time per GB
(every program of the agent, and the clamp program alone; run time is the program's, the trampoline's
is not counted), the guest's busy CPU per GB (the no-agent window's is the traffic's own), and the
seconds the clamp program was attached.

Ratios only within one boot: the machine is shared and TCG's speed varies with its load. A benchmark
run on demand; docs/benchmarks.md records its table with the command and date.
"""
import argparse
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab_scale  # noqa: E402  (build_guest, bench_initrd, lab: the lab's guest and QEMU)

lab = lab_scale.lab


def log(msg):
    print(f"[lab-netcost {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def boot(args, guest, initrd, kernel, rundir):
    """One boot: the guest's console with its "LAB window" lines."""
    append = ["console=ttyS0", "quiet", "loglevel=4", "panic=-1", "mitigations=off", "rdinit=/lab/netcost-init",
              f"netcost.window={args.window}", f"netcost.loads={args.loads}", f"netcost.modes={args.modes}",
              f"netcost.pressures={args.pressures}", f"netcost.rr_size={args.rr_size}"]
    cmd = lab.qemu_cmd(shutil.which("qemu-system-x86_64"), {"KERNEL": guest["KERNEL"], "INITRD": initrd,
                                                             "DISK": guest["DISK"]}, append, args.mem_mib,
                       "restrict=on", disk=True)
    return lab_scale.run_guest(cmd, os.path.join(rundir, f"netcost-{kernel}.console.log"), args.timeout, kernel, log)


def rows(kver, con):
    """Per window, the figures per GB of traffic (None where the window moved no byte)."""
    out = []
    for _, _, f, _ in con.all("window"):
        gb = int(f.get("bytes") or 0) / 1e9
        per = (lambda v: v / gb if gb else None)  # noqa: E731
        out.append({
            "kernel": kver, "pressure": f["pressure"], "load": f["load"], "mode": f["mode"], "gb": gb,
            "mb_per_s": gb * 1e3 / float(f["seconds"]) if float(f.get("seconds") or 0) else None,
            "cpu_s_per_gb": per(int(f["cpu_ticks"]) / float(f.get("hz", 100))),
            "runs_per_gb": per(int(f["runs"])), "prog_ms_per_gb": per(int(f["run_ns"]) / 1e6),
            "clamp_runs_per_gb": per(int(f["clamp_runs"])), "clamp_ms_per_gb": per(int(f["clamp_ns"]) / 1e6),
            "clamp_missed": int(f["clamp_missed"]), "clamp_attached_s": float(f["clamp_attached_s"]),
            "seconds": float(f.get("seconds") or 0),
        })
    return out


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def table(all_rows):
    """Markdown: one row per window; the share columns compare with the no-agent window of the same
    kernel, pressure and load (the traffic's own CPU per GB)."""
    print("| kernel | node | load | agent | MB/s | guest CPU s/GB | eBPF runs/GB (clamp) | eBPF ms/GB (clamp) "
          "| eBPF time ÷ traffic CPU | clamp attached s / window s | clamp missed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = {(r["kernel"], r["pressure"], r["load"]): r["cpu_s_per_gb"] for r in all_rows if r["mode"] == "none"}
    for r in all_rows:
        traffic = base.get((r["kernel"], r["pressure"], r["load"]))
        share = (r["prog_ms_per_gb"] / 1e3 / traffic) if traffic and r["prog_ms_per_gb"] is not None else None
        print(f"| {r['kernel']} | {r['pressure']} | {r['load']} | {r['mode']} | {fmt(r['mb_per_s'], '.1f')} "
              f"| {fmt(r['cpu_s_per_gb'], '.2f')} | {fmt(r['runs_per_gb'], ',.0f')} ({fmt(r['clamp_runs_per_gb'], ',.0f')}) "
              f"| {fmt(r['prog_ms_per_gb'], ',.1f')} ({fmt(r['clamp_ms_per_gb'], ',.1f')}) "
              f"| {fmt(share * 100 if share is not None else None, '.3f')} % "
              f"| {r['clamp_attached_s']:.1f} / {r['seconds']:.0f} | {r['clamp_missed']} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", default=os.path.join(lab_scale.ROOT, "build", "sockpressure_exporter"))
    ap.add_argument("--kernels", default="6.1,6.12,7", help=f"one boot each, of {', '.join(lab.KERNELS)}")
    ap.add_argument("--window", type=int, default=20, help="seconds of each measured window")
    ap.add_argument("--loads", default="bulk,rr")
    ap.add_argument("--modes", default="none,always,ondemand")
    ap.add_argument("--pressures", default="healthy,pressured")
    ap.add_argument("--rr-size", type=int, default=64, help="request and response size, bytes")
    ap.add_argument("--mem-mib", type=int, default=1024)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per boot")
    ap.add_argument("--results", default=os.path.join(lab_scale.ROOT, "build", "lab-netcost"))
    args = ap.parse_args()
    if not shutil.which("qemu-system-x86_64"):
        sys.exit("lab-netcost: qemu-system-x86_64 not found (Debian package qemu-system-x86)")
    if not os.access(args.agent, os.X_OK):
        sys.exit(f"lab-netcost: no agent binary at {args.agent} (cmake --build build)")
    os.makedirs(args.results, exist_ok=True)
    cache = os.environ.get("LAB_CACHE") or os.path.join(lab_scale.ROOT, "tests", "lab", ".cache")
    os.makedirs(cache, exist_ok=True)
    all_rows = []
    for kernel in [k for k in args.kernels.split(",") if k]:
        # The lab's data disk (1.5 GiB): the pressured phase reads it from B, as the lab's `swap` does.
        guest = lab_scale.build_guest(os.path.abspath(args.agent), kernel, data_mib=1536)
        initrd = lab_scale.bench_initrd(guest, cache, False, init="netcost.sh", name="netcost-init",
                                        programs=("tcprr",))
        log(f"boot: kernel {guest.get('KVER')}, windows of {args.window} s")
        con = boot(args, guest, initrd, kernel, args.results)
        all_rows += rows(guest.get("KVER"), con)
    print(f"\nagent {args.agent}, window {args.window} s, {time.strftime('%Y-%m-%d')}\n")
    table(all_rows)
    if not all_rows:
        sys.exit("lab-netcost: no window measured")


if __name__ == "__main__":
    main()
