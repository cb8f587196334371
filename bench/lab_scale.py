#!/usr/bin/env python3
"""The whole agent on a real kernel: cost per sample against a full memory.stat pass, in the lab guest.

    bench/lab_scale.py [--agent build/sockpressure_exporter] [--sizes 1000,10000,30000]
                       [--phases 0,1,100] [--window 20] [--kernel 6.1] [--perf] [--results DIR]
                       [--high 8M] [--ballast 12|512k] [--zram 1G] [--pods-cpu "100000 100000"]

One QEMU boot of Debian's kernel (the lab's guest, tests/lab/build-guest) per size: a cgroup v2 tree
of that many memory cgroups shaped like a kubelet node (bench/lab/cgtree.c), the released binary
with its default flags (plus a --cgroup.max above the tree), and for each percentage in --phases that
share of the containers really reclaiming (memory.high=8M, 12 MB of hot anon, zram swap, classic
LRU; every container at once needs a smaller pair, e.g. --high 256K --ballast 512k). As systemd does on
a kubelet node, the cpu controller groups the pods under kubepods.slice, capped at one of the guest's
two vCPUs, so that the reclaimers leave the node's daemons (the agent, the peer) a CPU. The peer is one open/read/close pass over every memory.stat in the same boot, right before
each measured window (bench/lab/guest.sh). Printed per window: agent CPU per sample / peer pass,
samples per second achieved, RSS and its high-water mark, /metrics bytes per cgroup, and how many
of the reclaiming containers the agent reported with reclaim scanning.

Ratios only come from one boot: the machine is shared and TCG's speed varies with its load. This is
a benchmark, run on demand; docs/benchmarks.md records its tables with the command and date.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "lab"))
import lab  # noqa: E402  (qemu_cmd, Console: the same guest the lab boots)


def log(msg):
    print(f"[lab-scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def build_guest(agent, kernel, symbols=False, data_mib=None):
    """The lab's kernel and initramfs with this agent (cached by build-guest); with symbols, the
    agent is not stripped, so that a profile names its functions. The data disk is 16 MiB unless
    `data_mib` (or LAB_DATA_MIB) says otherwise: this benchmark reads none of it."""
    env = dict(os.environ, LAB_DATA_MIB=str(data_mib or os.environ.get("LAB_DATA_MIB", "16")),
               LAB_KEEP_SYMBOLS="1" if symbols else "0")
    p = subprocess.run([os.path.join(ROOT, "tests", "lab", "build-guest"), "--agent", agent, "--kernel", kernel],
                       env=env, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("lab-scale: build-guest failed (see above)")
    return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)


def perf_files(kver, cache):
    """Debian's linux-perf for the guest kernel's series, with the shared libraries ldd finds on this
    host (the same Debian release): [(host path, guest path)]."""
    debs = os.path.join(cache, "perf")
    os.makedirs(debs, exist_ok=True)
    deb = [f for f in os.listdir(debs) if f.startswith("linux-perf_") and f.endswith(".deb")]
    if not deb:
        subprocess.run(["apt-get", "download", "linux-perf"], cwd=debs, check=True)
        deb = [f for f in os.listdir(debs) if f.startswith("linux-perf_") and f.endswith(".deb")]
    tree = os.path.join(debs, "tree")
    if not os.path.isdir(tree):
        subprocess.run(["dpkg-deb", "-x", os.path.join(debs, deb[0]), tree], check=True)
    series = ".".join(kver.split(".")[:2])
    # Older packages install perf_<series> beside a wrapper; bookworm's 6.1 one installs perf itself.
    perf = next((p for p in (os.path.join(tree, "usr", "bin", f"perf_{series}"), os.path.join(tree, "usr", "bin", "perf"))
                 if os.path.exists(p)), None)
    if not perf or not deb[0].startswith(f"linux-perf_{series}."):
        sys.exit(f"lab-scale: {deb[0]} has no perf for kernel series {series} ({kver})")
    out = subprocess.run(["ldd", perf], stdout=subprocess.PIPE, text=True).stdout
    missing = [l.split()[0] for l in out.splitlines() if "not found" in l]
    if missing:
        sys.exit("lab-scale: perf needs libraries this host lacks: " + ", ".join(missing) +
                 " (apt-get install the Debian packages that ship them)")
    files = [(perf, "usr/bin/perf")]
    for line in out.splitlines():
        for tok in line.split():
            if tok.startswith("/") and ".so" in tok:
                files.append((os.path.realpath(tok), tok.lstrip("/")))
    return files


def bench_initrd(guest, cache, perf, init="guest.sh", name="bench-init", programs=("cgtree",)):
    """The lab's initramfs with a benchmark's init (bench/lab/<init> as /lab/<name>) and its programs
    (bench/lab/<program>.c, static) appended as a second archive (the kernel unpacks concatenated cpio
    archives in order)."""
    root = tempfile.mkdtemp(prefix=f"{name}-root.", dir=cache)
    try:
        os.makedirs(os.path.join(root, "lab"))
        shutil.copy(os.path.join(HERE, "lab", init), os.path.join(root, "lab", name))
        os.chmod(os.path.join(root, "lab", name), 0o755)
        for prog in programs:
            subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Wno-format-truncation", "-static", "-o",
                            os.path.join(root, "lab", prog), os.path.join(HERE, "lab", f"{prog}.c")], check=True)
        for src, dst in (perf_files(guest["KVER"], cache) if perf else []):
            os.makedirs(os.path.dirname(os.path.join(root, dst)), exist_ok=True)
            shutil.copy(src, os.path.join(root, dst))
        extra = os.path.join(cache, f"{name}-extra.cpio.gz")
        with open(extra, "wb") as f:
            names = subprocess.run("find . | cpio -o -H newc --quiet | gzip -1", shell=True, cwd=root,
                                   stdout=subprocess.PIPE, check=True).stdout
            f.write(names)
    finally:
        shutil.rmtree(root)
    combined = os.path.join(cache, f"{name}-initrd.cpio.gz")
    with open(combined, "wb") as out:
        for part in (guest["INITRD"], extra):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    return combined


def boot(args, guest, initrd, n, rundir):
    """One boot at n cgroups: the guest's "LAB window" lines (and perf's report lines)."""
    append = ["console=ttyS0", "quiet", "loglevel=4", "panic=-1", "mitigations=off", "rdinit=/lab/bench-init",
              f"bench.n={n}", f"bench.phases={args.phases}", f"bench.window={args.window}",
              f"bench.settle={args.settle}", f"bench.pass_ms={args.pass_ms}", f"bench.ballast={args.ballast}",
              f"bench.high={args.high}", f"bench.zram={args.zram}", "bench.pods_cpu=" + args.pods_cpu.replace(" ", "_"),
              f"bench.perf={int(args.perf)}"]
    if args.agent_args:
        append.append("bench.agent_args=" + ",".join(args.agent_args.split()))
    mem = args.mem_mib or (3072 if n <= 10000 else 8192)
    cmd = lab.qemu_cmd(shutil.which("qemu-system-x86_64"), {"KERNEL": guest["KERNEL"], "INITRD": initrd}, append,
                       mem, "restrict=on", disk=False)
    return run_guest(cmd, os.path.join(rundir, f"n{n}.console.log"), args.timeout, f"n={n}", log)


def run_guest(cmd, console_log, timeout, label, log):
    """Boots `cmd` and waits until the guest logs done (then powers off) or fatal, or `timeout`
    seconds pass; says which went wrong. The console, with its "LAB kind ..." events."""
    con = lab.Console(cmd, console_log)
    deadline = time.time() + timeout
    try:
        while con.alive() and time.time() < deadline and not (con.first("done") or con.first("fatal")):
            time.sleep(1)
        while con.alive() and time.time() < deadline and con.first("done"):
            time.sleep(1)  # the guest's last lines and poweroff
    finally:
        con.stop()
    if con.first("fatal"):
        log(f"{label}: guest failed: {con.first('fatal')[3]}")
    elif not con.first("done"):
        log(f"{label}: no result within {timeout} s (console: {con.log_path})")
    return con


def rows(n, con):
    hz = None
    out = []
    health, ready = con.first("healthz"), con.first("ready")
    for _, _, f, _ in con.all("window"):
        hz = float(f.get("hz", 100))
        samples = float(f["samples"])
        seconds = float(f["seconds"])
        # The rate by the agent's clock (the times of the first and last sample counted), where the
        # guest logged it; the guest's window also holds the wget calls around it.
        rate_seconds = float(f.get("agent_seconds") or 0) or seconds
        cpu = float(f["agent_ticks"]) / hz
        peer = float(f["cpu_s"])
        memcgs = int(f["memcgs"])
        out.append({
            "cgroups": n, "memcgs": memcgs, "pct": f["pct"], "reclaiming": int(f["reclaiming"]),
            "seen": int(f["seen"]), "per_sample_ratio": (cpu / samples) / peer if samples and peer else None,
            "cpu_per_s": cpu / seconds, "peer_s": peer, "samples_per_s": samples / rate_seconds,
            "overruns": int(float(f.get("overruns") or 0)),
            "rss_mib": int(f["rss_kib"]) / 1024, "hwm_mib": int(f["hwm_kib"]) / 1024,
            "bytes_per_cgroup": int(f["metrics_bytes"]) / memcgs if memcgs else None,
            "healthz_s": float(health[2]["seconds"]) if health else None,
            "ready_s": float(ready[2]["seconds"]) if ready else None,
        })
    return out


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", default=os.path.join(ROOT, "build", "sockpressure_exporter"))
    ap.add_argument("--kernel", default="6.1", choices=lab.KERNELS)
    ap.add_argument("--sizes", default="1000,10000,30000", help="memory cgroups per boot")
    ap.add_argument("--phases", default="0,1,100", help="percentages of containers reclaiming, in order")
    ap.add_argument("--window", type=int, default=20, help="seconds of each measured window")
    ap.add_argument("--settle", type=int, default=5, help="seconds after starting reclaimers, before measuring")
    ap.add_argument("--pass-ms", type=int, default=0, help="ballast pass pacing (bench/lab/guest.sh)")
    ap.add_argument("--ballast", default="12",
                    help="anon each reclaimer touches, MiB or KiB as 512k (more than --high: it reclaims)")
    ap.add_argument("--high", default="8M", help="each reclaiming container's memory.high")
    ap.add_argument("--zram", default="1G", help="the guest's zram swap size (all that reclaimers push out)")
    ap.add_argument("--pods-cpu", default="100000 100000",
                    help="kubepods.slice's cpu.max (default one vCPU of two: the node's daemons keep the other)")
    ap.add_argument("--agent-args", default="", help="extra agent flags (default: none but --cgroup.max)")
    ap.add_argument("--mem-mib", type=int, default=0, help="guest RAM (default 3 GiB, 8 GiB above 10,000)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per boot")
    ap.add_argument("--perf", action="store_true", help="perf record -g the last window (Debian's linux-perf)")
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "lab-scale"))
    args = ap.parse_args()
    if not shutil.which("qemu-system-x86_64"):
        sys.exit("lab-scale: qemu-system-x86_64 not found (Debian package qemu-system-x86)")
    if not os.access(args.agent, os.X_OK):
        sys.exit(f"lab-scale: no agent binary at {args.agent} (cmake --build build)")
    os.makedirs(args.results, exist_ok=True)
    cache = os.environ.get("LAB_CACHE") or os.path.join(ROOT, "tests", "lab", ".cache")
    os.makedirs(cache, exist_ok=True)
    guest = build_guest(os.path.abspath(args.agent), args.kernel, symbols=args.perf)
    initrd = bench_initrd(guest, cache, args.perf)
    table = []
    for n in [int(x) for x in args.sizes.split(",") if x]:
        log(f"boot: {n} cgroups, phases {args.phases} % reclaiming, kernel {guest.get('KVER')}")
        con = boot(args, guest, initrd, n, args.results)
        table += rows(n, con)
        if args.perf:
            report = os.path.join(args.results, f"n{n}.perf.txt")
            with open(con.log_path) as f, open(report, "w") as out:
                out.writelines(line.split(" PERF ", 1)[1] for line in f if " PERF " in line)
            log(f"perf report of the last window: {report}")
    print(f"\nkernel {guest.get('KVER')}, agent {args.agent}, window {args.window} s, "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("| cgroups | reclaiming | seen | agent CPU per sample ÷ peer pass | peer pass | samples/s (late starts) "
          "| agent CPU/s | RSS / HWM | /metrics B per cgroup | /healthz, /readyz after start |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        print(f"| {r['memcgs']:,} | {r['reclaiming']} ({r['pct']} %) | {r['seen']}/{r['reclaiming']} "
              f"| **{fmt(r['per_sample_ratio'], '.3f')}** | {r['peer_s'] * 1000:.0f} ms "
              f"| {r['samples_per_s']:.2f} ({r['overruns']}) | {r['cpu_per_s'] * 1000:.0f} ms "
              f"| {r['rss_mib']:.0f} / {r['hwm_mib']:.0f} MiB | {fmt(r['bytes_per_cgroup'], ',.0f')} "
              f"| {fmt(r['healthz_s'], '.2f')} s, {fmt(r['ready_s'], '.1f')} s |")
    if not table:
        sys.exit("lab-scale: no window measured")


if __name__ == "__main__":
    main()
