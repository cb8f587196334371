#!/usr/bin/env python3
"""The release image: scripts/build-image.sh builds it, and the agent runs inside it.

    test_image.py <build dir | its sockpressure_exporter>

Runs the image script on that build tree (mmdebstrap + buildah, no registry), then checks
  - the image's files: the agent, every library its ldd closure names, the CA bundle, passwd/group,
    licences; no shell, no package manager, no apt cache;
  - its config: the name deploy/ pulls (tag = the project version), non-root user, entrypoint, port,
    OCI labels;
  - the agent inside it (buildah run): --version is the build's; as the image's user it serves
    /healthz and /metrics with build_info and every collector succeeding; as uid 0 (how the DaemonSet
    runs it) the eBPF programs embedded in the binary load on this kernel; `doctor` prints its report;
  - the OCI archive a release uploads, and its compressed size within a budget (printed, for
    docs/benchmarks.md).
Exit 77 when the agent is not built, not root, or mmdebstrap/buildah are missing; 1 on any failure.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
from checks import check, fail, finish  # noqa: E402
import ports  # noqa: E402
# What a release image may weigh, compressed as a registry stores it. node_exporter's and
# ebpf_exporter's published images are in the same range (docs/benchmarks.md).
ARCHIVE_BUDGET = 16 << 20


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def build_dir(arg):
    path = os.path.abspath(arg)
    return os.path.dirname(path) if os.path.isfile(path) else path


def project_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"^project\(sockpressure VERSION ([0-9.]+)", text, re.M).group(1)


def deploy_image():
    text = open(os.path.join(ROOT, "deploy", "base", "daemonset.yaml")).read()
    return re.search(r"^\s*image:\s*(\S+)", text, re.M).group(1)


def daemonset_capabilities():
    """The capabilities deploy/base's DaemonSet adds after dropping ALL."""
    text = open(os.path.join(ROOT, "deploy", "base", "daemonset.yaml")).read()
    block = re.search(r"^(\s*)add:\n((?:\1[ ]*(?:-.*|#.*)\n)+)", text, re.M).group(2)
    return [m.group(1) for m in re.finditer(r"^\s*-\s*([A-Z_]+)", block, re.M)]


# Capability numbers (linux/capability.h) of the names the DaemonSet adds.
CAP_NUMBERS = {"SETPCAP": 8, "SYS_PTRACE": 19, "SYS_ADMIN": 21, "SYS_RESOURCE": 24, "PERFMON": 38, "BPF": 39}


def grantable(caps):
    """The capabilities this process can hand on (its bounding set), and those it cannot."""
    bnd = int(re.search(r"^CapBnd:\s*([0-9a-f]+)", open("/proc/self/status").read(), re.M).group(1), 16)
    ok = [c for c in caps if bnd >> CAP_NUMBERS[c] & 1]
    return ok, [c for c in caps if c not in ok]


def ldd_names(binary):
    """The file names of the libraries and the loader ldd resolves for the binary."""
    names = set()
    for line in run(["ldd", binary]).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
            names.add(os.path.basename(parts[2]))
        elif parts and parts[0].startswith("/"):
            names.add(os.path.basename(parts[0]))
    return names


class Container:
    """A buildah working container of the image, removed on exit."""

    def __init__(self, image):
        self.image = image
        self.name = run(["buildah", "from", "--quiet", image], check=True).stdout.strip()

    # What buildah run grants by default (containers.conf's default_capabilities). buildah applies
    # --cap-drop after --cap-add, so `--cap-drop ALL` would also remove what is added: each default
    # the caller did not ask for is dropped by name instead. SETUID and SETGID stay: buildah's chroot
    # runtime needs them to switch to the run's user (the agent drops both at start, and says so).
    DEFAULT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETFCAP",
                    "SETPCAP", "SYS_CHROOT")

    def command(self, args, user=None, caps=()):
        """buildah run as a kubelet would: the image's user unless told, only the given capabilities."""
        cmd = ["buildah", "run", "--isolation", "chroot"]
        for cap in caps:
            cmd += ["--cap-add", "CAP_" + cap]
        for cap in self.DEFAULT_CAPS:
            if cap not in caps:
                cmd += ["--cap-drop", "CAP_" + cap]
        if user:
            cmd += ["--user", user]
        return cmd + [self.name, "--"] + args

    def run(self, args, user=None, caps=(), timeout=60):
        return run(self.command(args, user, caps), timeout=timeout)

    def spawn(self, args, log, user=None, caps=()):
        return subprocess.Popen(self.command(args, user, caps), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def mount(self):
        return run(["buildah", "mount", self.name], check=True).stdout.strip()

    def close(self):
        run(["buildah", "umount", self.name])
        run(["buildah", "rm", self.name])


def check_files(root, binary):
    """Only what the agent needs is in the image."""
    check(os.access(os.path.join(root, "usr/bin/sockpressure_exporter"), os.X_OK), "the agent is /usr/bin/sockpressure_exporter")
    present = {f for _, _, files in os.walk(root) for f in files}
    missing = sorted(ldd_names(binary) - present)
    check(not missing, f"every library of the agent's ldd closure is in the image (missing: {missing})")
    for absent in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/apt-get", "usr/bin/dpkg", "var/cache/apt", "var/lib/dpkg"):
        check(not os.path.lexists(os.path.join(root, absent)), f"no /{absent} in the image")
    bundle = os.path.join(root, "etc/ssl/certs/ca-certificates.crt")
    check(os.path.isfile(bundle) and open(bundle).read().count("BEGIN CERTIFICATE") > 100,
          "the Mozilla CA bundle is /etc/ssl/certs/ca-certificates.crt")
    passwd = open(os.path.join(root, "etc/passwd")).read()
    check(re.search(r"^nobody:x:65534:65534:", passwd, re.M) is not None, "/etc/passwd names uid 65534")
    check(os.path.isfile(os.path.join(root, "usr/share/doc/sockpressure-exporter/LICENSE")), "the agent's LICENSE is in the image")
    check(os.path.isfile(os.path.join(root, "usr/share/doc/libc6/copyright")), "each shipped package's copyright is in the image")
    elf = [f for f in present if f.endswith(".so") or ".so." in f]
    print(f"     image files: {sum(len(fs) for _, _, fs in os.walk(root))}, shared objects: {len(elf)}")


def check_config(image, version):
    info = json.loads(run(["buildah", "inspect", "--type", "image", image], check=True).stdout)
    cfg = info["OCIv1"]["config"]
    check(image == deploy_image(), f"the image is the one deploy/base pulls ({deploy_image()})")
    check(image.endswith(":" + version), f"its tag is the project version {version}")
    check(cfg.get("User") == "65534:65534", f"it runs as 65534:65534 by default (User {cfg.get('User')!r})")
    check(cfg.get("Entrypoint") == ["/usr/bin/sockpressure_exporter"], f"entrypoint is the agent ({cfg.get('Entrypoint')})")
    check("19100/tcp" in (cfg.get("ExposedPorts") or {}), "port 19100 is exposed")
    labels = cfg.get("Labels") or {}
    check(labels.get("org.opencontainers.image.version") == version, "the OCI version label is the project version")
    check(labels.get("org.opencontainers.image.licenses") == "Apache-2.0", "the OCI licences label says Apache-2.0")


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def serve(ctr, user, caps, log_path):
    """Starts the image's agent on a loopback port, returns (process, port) once /readyz answers."""
    port = ports.free_port()
    log = open(log_path, "w")
    proc = ctr.spawn(["/usr/bin/sockpressure_exporter", f"--web.listen-address=127.0.0.1:{port}"], log, user, caps)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if get(f"http://127.0.0.1:{port}/readyz")[0] == 200:
                return proc, port
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    return proc, None


def stop(proc):
    try:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()


def check_serving(ctr, version, user, caps, what, log_path):
    proc, port = serve(ctr, user, caps, log_path)
    try:
        if port is None:
            fail(f"{what}: the agent in the image did not become ready:\n{open(log_path).read()}")
            return ""
        status, _ = get(f"http://127.0.0.1:{port}/healthz")
        check(status == 200, f"{what}: /healthz answers 200")
        _, metrics = get(f"http://127.0.0.1:{port}/metrics")
        check(re.search(r'^sockpressure_build_info\{[^}]*version="%s"' % re.escape(version), metrics, re.M) is not None,
              f"{what}: /metrics has sockpressure_build_info version {version}")
        failed = re.findall(r'^sockpressure_collector_success\{collector="([^"]+)"\} 0', metrics, re.M)
        check(not failed, f"{what}: every collector succeeds (failed: {failed})")
        return metrics
    finally:
        stop(proc)


def main():
    if len(sys.argv) < 2 or not sys.argv[1]:
        skip("agent not built")
    build = build_dir(sys.argv[1])
    binary = os.path.join(build, "sockpressure_exporter")
    if not os.access(binary, os.X_OK):
        skip(f"{binary} not built")
    if os.geteuid() != 0:
        skip("needs root: mmdebstrap unpacks root-owned files, buildah uses its root store")
    for tool in ("mmdebstrap", "buildah", "ldd", "dpkg"):
        if not shutil.which(tool):
            skip(f"{tool} missing (scripts/install-deps.sh test installs it)")
    version = project_version()

    t0 = time.time()
    p = run(["bash", os.path.join(ROOT, "scripts", "build-image.sh"), build])
    print(p.stdout, end="")
    if p.returncode != 0:
        fail(f"scripts/build-image.sh exited {p.returncode}:\n{p.stderr}")
        return finish("")
    print(f"     built in {time.time() - t0:.0f} s")
    image = re.search(r"^image (\S+)", p.stdout, re.M).group(1)
    archive = re.search(r"^archive (\S+)", p.stdout, re.M).group(1)

    check_config(image, version)
    check(tarfile.is_tarfile(archive) and "index.json" in tarfile.open(archive).getnames(),
          "the release archive is an OCI layout (index.json)")
    size = os.path.getsize(archive)
    check(size <= ARCHIVE_BUDGET, f"the compressed image is {size / 1e6:.1f} MB (budget {ARCHIVE_BUDGET / 1e6:.1f} MB)")

    ctr = Container(image)
    try:
        check_files(ctr.mount(), binary)
        v = ctr.run(["/usr/bin/sockpressure_exporter", "--version"])
        check(v.returncode == 0 and f"version {version}" in v.stdout, f"--version inside the image: {v.stdout.strip()!r}")
        log = os.path.join(build, "image", "serve-nobody.log")
        check_serving(ctr, version, None, (), "as the image's user (65534), no capability", log)
        log = os.path.join(build, "image", "serve-daemonset.log")
        caps, missing = grantable(daemonset_capabilities())
        if missing:
            print(f"     not granted (this test's own bounding set lacks them): {', '.join(missing)}")
        check_serving(ctr, version, "0:0", caps, f"as the DaemonSet runs it (uid 0, {'+'.join(caps)})", log)
        attached = re.search(r'eBPF probes attached: (.*?)"', open(log).read())
        check(attached is not None and attached.group(1) not in ("", "none"),
              f"so the eBPF programs embedded in the binary attach on this kernel ({attached.group(1) if attached else 'no log line'})")
        d = ctr.run(["/usr/bin/sockpressure_exporter", "doctor"], timeout=60)
        check(d.returncode in (0, 1) and "sockpressure doctor" in d.stdout and "Signals (best source" in d.stdout,
              f"doctor runs inside the image (exit {d.returncode})")
    finally:
        ctr.close()
    return finish(f"image {image}: {size / 1e6:.1f} MB compressed, built from Debian packages and run inside itself")


if __name__ == "__main__":
    sys.exit(main())
