#!/usr/bin/env python3
"""One version everywhere: `project(sockpressure VERSION x.y.z)` in CMakeLists.txt is the source;
--version, sockpressure_build_info, the image tags of the kustomize base and the Dockerfile's
example, and the newest CHANGELOG.md release must all say the same (scripts/set-version.sh
writes them).

    version_test.py AGENT SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from ports import free_port  # noqa: E402

IMAGE = "ghcr.io/sockpressure/sockpressure-exporter"
failures = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        failures.append(msg)


def read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read()


def build_info_version(agent, root):
    """The version label of sockpressure_build_info, from a real scrape on a fixture tree."""
    port = free_port()
    fx = os.path.join(root, "tests", "fixtures", "v2")
    p = subprocess.Popen([agent, f"--web.listen-address=127.0.0.1:{port}", f"--path.procfs={fx}/proc",
                          f"--path.sysfs={fx}/sys", f"--path.cgroupfs={fx}/cgroup", "--no-collector.context"]
                         + [f for f in ("--no-collector.bpf", "--no-collector.sock_diag") if has_flag(agent, f)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                m = re.search(r'^sockpressure_build_info\{[^}]*version="([^"]*)"', body, re.M)
                return m.group(1) if m else None
            except OSError:
                time.sleep(0.1)
        return None
    finally:
        p.terminate()
        p.wait(timeout=10)


def has_flag(agent, flag):
    name = flag.removeprefix("--no-")
    return f"--[no-]{name}" in subprocess.run([agent, "--help"], capture_output=True, text=True).stdout


def main():
    agent, root = sys.argv[1], sys.argv[2]
    m = re.search(r"^project\(sockpressure VERSION ([0-9]+\.[0-9]+\.[0-9]+)\b", read(root, "CMakeLists.txt"), re.M)
    if not m:
        print("FAIL no project(sockpressure VERSION x.y.z) in CMakeLists.txt")
        return 1
    v = m.group(1)
    print(f"version {v} (CMakeLists.txt)")

    out = subprocess.run([agent, "--version"], capture_output=True, text=True).stdout
    check(f"version {v} " in out, f"--version says {v}: {out.splitlines()[0] if out else ''!r}")
    check(build_info_version(agent, root) == v, f"sockpressure_build_info{{version=\"{v}\"}}")

    kust = read(root, "deploy/base/kustomization.yaml")
    check(re.search(rf"- name: {re.escape(IMAGE)}\n    newTag: {re.escape(v)}\n", kust) is not None,
          f"deploy/base/kustomization.yaml images newTag {v}")
    for rel in ("deploy/base/daemonset.yaml", "Dockerfile"):
        tags = re.findall(rf"{re.escape(IMAGE)}:(\S+)", read(root, rel))
        check(tags and all(t == v for t in tags), f"{rel} names the image with tag {v} ({tags})")
    chart = read(root, "deploy/helm/sockpressure-exporter/Chart.yaml")
    check(re.search(rf'^version: {re.escape(v)}$', chart, re.M) and re.search(rf'^appVersion: "{re.escape(v)}"$', chart, re.M),
          f"the Helm chart's version and appVersion (its default image tag) are {v}")
    rels = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", read(root, "CHANGELOG.md"), re.M)
    check(rels[:1] == [v], f"CHANGELOG.md's newest release is {v} ({rels[:1]})")

    if failures:
        print(f"{len(failures)} failure(s): run scripts/set-version.sh {v}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
