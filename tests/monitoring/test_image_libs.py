#!/usr/bin/env python3
"""The Dockerfile's runtime stage installs what the agent links, and no build-only packages.

    test_image_libs.py path/to/sockpressure_exporter

No container engine runs here, so the image build itself is not exercised; this checks the part
that usually breaks: every shared library `ldd` resolves for the locally built binary belongs to
a Debian package that the runtime stage installs or that those packages pull in (apt-cache
depends --recurse), and no -dev package sneaks into the runtime stage. Same Debian release
(bookworm) as the image, so package names match. Exit 77 when the binary is not built or
ldd/dpkg/apt-cache are missing.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stack  # noqa: E402


def runtime_packages(dockerfile):
    stages = re.split(r"^FROM ", open(dockerfile).read(), flags=re.M)
    last = stages[-1].replace("\\\n", " ")
    pkgs = []
    for m in re.finditer(r"apt-get install ([^&\n]*)", last):
        pkgs += [w for w in m.group(1).split() if not w.startswith("-")]
    return pkgs


def owners(paths):
    """path -> Debian package, with one dpkg -S call (it is slow per call). usrmerge means a file
    may be registered under /lib or /usr/lib, so both spellings are asked for."""
    variants = {}
    for path in paths:
        for cand in (path, os.path.realpath(path), re.sub(r"^/usr/lib/", "/lib/", path),
                     re.sub(r"^/lib/", "/usr/lib/", path)):
            variants.setdefault(cand, path)
    p = subprocess.run(["dpkg", "-S"] + sorted(variants), capture_output=True, text=True)
    found = {}
    for line in p.stdout.splitlines():
        m = re.match(r"([^:,\s]+)(?::\w+)?: (/\S+)$", line)
        if m and m.group(2) in variants:
            found.setdefault(variants[m.group(2)], m.group(1))
    return found


def main():
    for tool in ("ldd", "readelf", "dpkg", "apt-cache"):
        if not shutil.which(tool):
            stack.skip(f"{tool} not found")
    agent = stack.find_agent(sys.argv[1] if len(sys.argv) > 1 else None)
    pkgs = runtime_packages(os.path.join(stack.ROOT, "Dockerfile"))
    print("runtime stage installs:", " ".join(pkgs))
    failures = []
    if not pkgs:
        failures.append("no apt-get install in the Dockerfile's last stage")
    text = open(os.path.join(stack.ROOT, "Dockerfile")).read()
    final = re.split(r"^FROM ", text, flags=re.M)[-1]
    for what, ok in (("final stage runs as a non-root USER", re.search(r"^USER (?!0\b|root\b)\S+", final, re.M)),
                     ("final stage copies the binary to the ENTRYPOINT path",
                      "/usr/bin/sockpressure_exporter" in final and
                      'ENTRYPOINT ["/usr/bin/sockpressure_exporter"]' in final),
                     ("EXPOSE 19100 and --web.listen-address=:19100", "EXPOSE 19100" in final
                      and "--web.listen-address=:19100" in final),
                     ("both stages on Debian bookworm", text.count("FROM debian:bookworm") == 2)):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)
    dev = [p for p in pkgs if p.endswith("-dev") or p in ("cmake", "clang", "build-essential", "bpftool")]
    if dev:
        failures.append(f"build-only packages in the runtime stage: {dev}")

    p = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                        "--no-breaks", "--no-replaces", "--no-enhances"] + pkgs, capture_output=True, text=True)
    closure = set(pkgs)
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(?:\|)?(?:Pre)?Depends: <?([\w.+-]+)", line)
        if m:
            closure.add(m.group(1))
        elif line and not line.startswith(" "):
            closure.add(line.strip())
    if p.returncode != 0 or len(closure) <= len(pkgs):
        stack.skip("apt-cache has no package lists (run apt-get update)")

    out = subprocess.run(["ldd", agent], capture_output=True, text=True).stdout
    libs = re.findall(r"=> (/\S+)", out)
    needed_pkgs = {}
    own = owners(libs)
    for lib in libs:
        pkg = own.get(lib)
        if pkg is None:
            failures.append(f"{lib}: no Debian package owns it (built locally?)")
            continue
        needed_pkgs.setdefault(pkg, []).append(os.path.basename(lib))
    for pkg, ls in sorted(needed_pkgs.items()):
        ok = pkg in closure
        print(f"{'ok  ' if ok else 'FAIL'} {pkg:28} {' '.join(ls)}")
        if not ok:
            failures.append(f"{pkg} ({' '.join(ls)}) is linked but not installed by the runtime stage")
    # Libraries the binary names itself (DT_NEEDED) must come from packages the Dockerfile lists,
    # not from whatever another library happens to pull in today; the C/C++ runtime is in the
    # bookworm-slim base image.
    base_image = {"libc6", "libgcc-s1", "libstdc++6"}
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                        subprocess.run(["readelf", "-d", agent], capture_output=True, text=True).stdout)
    by_name = {os.path.basename(lib): own.get(lib) for lib in libs}
    for soname in needed:
        pkg = by_name.get(soname)
        if pkg and pkg not in pkgs and pkg not in base_image:
            failures.append(f"{soname} is linked directly; list its package {pkg} in the runtime stage")
    direct = {pkg for pkg in needed_pkgs}
    for pkg in pkgs:
        if pkg not in direct:
            print(f"note {pkg} is installed but not linked directly (a dependency of a linked library)")
    for f in failures:
        print("FAIL:", f)
    print(f"\n{len(libs)} libraries from {len(needed_pkgs)} packages, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
