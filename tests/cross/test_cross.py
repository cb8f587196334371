#!/usr/bin/env python3
"""The arm64 cross build's artifacts (docs/arm64.md), checked on the x86-64 build machine.

    test_cross.py binary  <arm64 build dir>   the agent is an aarch64 ELF; its eBPF objects are arm64's
    test_cross.py package <arm64 build dir>   scripts/package.sh --arch arm64: .deb, tarball, SHA256SUMS
    test_cross.py image   <arm64 build dir>   scripts/build-image.sh --arch arm64: image, archive, index
    test_cross.py deploy  <arm64 build dir>   no manifest under deploy/ pins the node architecture

Nothing here runs an arm64 program (no emulator is assumed): the checks read the files. Exit 77 when
the arm64 tree is not built (scripts/cross-build.sh builds it; scripts/test.sh does so as a stage) or a
tool is missing; 1 on any failure.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "monitoring"))
from checks import check, fail, finish  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PKG = "sockpressure-exporter"
# The arguments vmpressure's 6-argument kprobe reads (memcg, tree, scanned, reclaimed: the 3rd to 6th) are
# x2..x5 on arm64, at these offsets of struct user_pt_regs. On x86-64 they would be rdx, rcx, r8 and r9 at
# 96, 88, 72 and 64 of struct pt_regs: an object built for the wrong target reads other registers.
ARM64_ARG_OFFSETS = {16, 24, 32, 40}


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def file_says(path):
    return run(["file", "-L", "-b", path]).stdout.strip()


def check_aarch64(path, what):
    out = file_says(path)
    print(f"     file {what}: {out}")
    check(out.startswith("ELF 64-bit LSB") and "ARM aarch64" in out, f"{what} is a 64-bit aarch64 ELF")
    check("interpreter /lib/ld-linux-aarch64.so.1" in out, f"{what} asks for Debian's arm64 loader")


def kprobe_ctx_offsets(obj, prog):
    """The ctx offsets the program loads before its first helper call (its arguments)."""
    p = run(["llvm-objdump-14" if shutil.which("llvm-objdump-14") else "llvm-objdump", "-d", "--no-show-raw-insn", obj])
    if p.returncode != 0:
        fail(f"llvm-objdump -d {obj}: {p.stderr.strip()}")
        return set()
    body = p.stdout.split(f"<{prog}>:", 1)
    if len(body) < 2:
        fail(f"{obj} has no program {prog}")
        return set()
    offsets = set()
    for line in body[1].splitlines()[1:]:
        if "call" in line or not line.strip():
            break
        m = re.search(r"= \*\(u64 \*\)\(r1 \+ (\d+)\)", line)
        if m:
            offsets.add(int(m.group(1)))
    return offsets


def test_binary(build):
    binary = os.path.join(build, "sockpressure_exporter")
    if not os.path.isfile(binary):
        skip(f"{binary} not built (scripts/cross-build.sh)")
    for tool in ("file",):
        if not shutil.which(tool):
            skip(f"{tool} missing (apt-get install {tool})")
    check_aarch64(binary, "the agent")
    obj = os.path.join(build, "bpf", "skel", "vmpressure.bpf.o")
    if not os.path.isfile(obj):
        fail(f"{obj} missing: the arm64 agent was built without its eBPF programs")
    elif not (shutil.which("llvm-objdump-14") or shutil.which("llvm-objdump")):
        fail("llvm-objdump missing (scripts/install-deps.sh build installs llvm)")
    else:
        got = kprobe_ctx_offsets(obj, "vmp_kprobe_order")
        check(got == ARM64_ARG_OFFSETS,
              f"vmp_kprobe_order reads its arguments from arm64's x2..x5 (ctx offsets {sorted(got)})")
    return finish("the arm64 agent and its eBPF objects are built for arm64")


def needed(path):
    p = run(["aarch64-linux-gnu-readelf" if shutil.which("aarch64-linux-gnu-readelf") else "readelf", "-d", path])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", p.stdout)


def owners():
    """soname file name -> the arm64 package shipping it (scripts/arm64-sysroot.sh's owners list)."""
    table = {}
    with open(os.path.join(ROOT, ".cache", "arm64", "owners")) as f:
        for line in f:
            path, _, pkg = line.strip().rpartition(" ")
            table.setdefault(os.path.basename(path), pkg)
    return table


def test_package(build):
    binary = os.path.join(build, "sockpressure_exporter")
    if not os.path.isfile(binary):
        skip(f"{binary} not built (scripts/cross-build.sh)")
    for tool in ("dpkg-deb", "sha256sum", "file"):
        if not shutil.which(tool):
            skip(f"{tool} missing")
    if not os.path.isfile(os.path.join(ROOT, ".cache", "arm64", "owners")):
        skip("no .cache/arm64/owners (scripts/arm64-sysroot.sh writes it)")
    p = run([os.path.join(ROOT, "scripts", "package.sh"), "--arch", "arm64", build])
    print(p.stdout, end="")
    if p.returncode != 0:
        fail(f"scripts/package.sh --arch arm64 {build}: exit {p.returncode}\n{p.stderr}")
        return finish("")
    out = os.path.join(build, "packages")
    debs = [f for f in os.listdir(out) if f.endswith(".deb")]
    tars = [f for f in os.listdir(out) if f.endswith(".tar.gz")]
    check(len(debs) == 1 and debs[0].endswith("_arm64.deb"), f"one arm64 .deb ({debs})")
    check(len(tars) == 1 and tars[0].endswith("-linux-arm64.tar.gz"), f"one linux-arm64 tarball ({tars})")
    if len(debs) != 1 or len(tars) != 1:
        return finish("")
    s = run(["sha256sum", "-c", "SHA256SUMS"], cwd=out)
    check(s.returncode == 0, f"SHA256SUMS verifies both: {s.stdout.strip()!r}")

    deb = os.path.join(out, debs[0])
    arch = run(["dpkg-deb", "-f", deb, "Architecture"]).stdout.strip()
    check(arch == "arm64", f"the .deb's Architecture is arm64 ({arch})")
    depends = run(["dpkg-deb", "-f", deb, "Depends"]).stdout.strip()
    print(f"     Depends: {depends}")
    dep_pkgs = {d.strip().split()[0] for d in depends.split(",") if d.strip()}
    table = owners()
    with tempfile.TemporaryDirectory() as tmp:
        run(["dpkg-deb", "-x", deb, tmp])
        packaged = os.path.join(tmp, "usr", "bin", "sockpressure_exporter")
        check_aarch64(packaged, "the .deb's /usr/bin/sockpressure_exporter")
        for soname in needed(packaged):
            pkg = table.get(soname)
            check(pkg in dep_pkgs, f"{soname} is covered: its package {pkg} is in Depends")
        check("not stripped" not in file_says(packaged), "the packaged binary is stripped")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(os.path.join(out, tars[0])) as t:
            t.extractall(tmp)
        top = tars[0][: -len(".tar.gz")]
        check_aarch64(os.path.join(tmp, top, "sockpressure_exporter"), "the tarball's binary")
    return finish("scripts/package.sh --arch arm64 builds the arm64 .deb and tarball")


def test_image(build):
    binary = os.path.join(build, "sockpressure_exporter")
    if not os.path.isfile(binary):
        skip(f"{binary} not built (scripts/cross-build.sh)")
    if os.geteuid() != 0:
        skip("needs root: mmdebstrap unpacks root-owned files, buildah uses its root store")
    for tool in ("mmdebstrap", "buildah", "file"):
        if not shutil.which(tool):
            skip(f"{tool} missing (scripts/install-deps.sh test installs it)")
    p = run(["bash", os.path.join(ROOT, "scripts", "build-image.sh"), "--arch", "arm64", build])
    print(p.stdout, end="")
    if p.returncode != 0:
        fail(f"scripts/build-image.sh --arch arm64 exited {p.returncode}:\n{p.stderr}")
        return finish("")
    image = re.search(r"^image (\S+)", p.stdout, re.M).group(1)
    archive = re.search(r"^archive (\S+)", p.stdout, re.M).group(1)
    index = re.search(r"^index (\S+)", p.stdout, re.M).group(1)
    check(image.endswith("-arm64"), f"the arm64 image is not given the native name ({image})")
    check(archive.endswith("_arm64.oci.tar"), f"its archive is named for arm64 ({os.path.basename(archive)})")
    # What a node does with the index: a throwaway store pulls the arm64 instance from it, under the name
    # deploy/ pulls, and that image's binary is the aarch64 agent.
    with tempfile.TemporaryDirectory() as tmp:
        store = ["buildah", "--root", os.path.join(tmp, "root"), "--runroot", os.path.join(tmp, "run")]
        pulled = run(store + ["pull", "--quiet", "--arch", "arm64", f"oci-archive:{index}"])
        check(pulled.returncode == 0, f"the index archive pulls with --arch arm64 {pulled.stderr.strip()}")
        version = image.rsplit(":", 1)[1][: -len("-arm64")]
        name = f"ghcr.io/sockpressure/sockpressure-exporter:{version}"
        info = run(store + ["inspect", "--type", "image", name])
        arch = json.loads(info.stdout)["OCIv1"].get("architecture") if info.returncode == 0 else None
        check(arch == "arm64", f"{name} from the index is the arm64 image ({arch})")
        ctr = run(store + ["from", "--quiet", name]).stdout.strip()
        if ctr:
            mnt = run(store + ["mount", ctr]).stdout.strip()
            check_aarch64(os.path.join(mnt, "usr", "bin", "sockpressure_exporter"), "the image's agent")
            run(store + ["umount", ctr])
            run(store + ["rm", ctr])
        run(store + ["rmi", "--all", "--force"])
    return finish(f"scripts/build-image.sh --arch arm64 builds {image} and an index nodes pull it from")


def test_deploy(_build):
    # A nodeSelector or node affinity on kubernetes.io/arch would keep the DaemonSet off arm64 nodes.
    pinned = []
    for base, _, files in os.walk(os.path.join(ROOT, "deploy")):
        for name in files:
            if name.endswith((".yaml", ".yml", ".tpl")):
                path = os.path.join(base, name)
                with open(path) as f:
                    for n, line in enumerate(f, 1):
                        if re.search(r"kubernetes\.io/arch\b", line):
                            pinned.append(f"{os.path.relpath(path, ROOT)}:{n}")
    check(not pinned, f"no manifest names kubernetes.io/arch ({pinned or 'none'})")
    return finish("the chart and the kustomize base schedule on amd64 and arm64 nodes alike")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("binary", "package", "image", "deploy"):
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.abspath(sys.argv[2])
    tests = {"binary": test_binary, "package": test_package, "image": test_image, "deploy": test_deploy}
    return tests[sys.argv[1]](build)


if __name__ == "__main__":
    sys.exit(main())
