#!/usr/bin/env python3
"""Release artifacts: scripts/package.sh builds the .deb and the binary tarball, and both install.

    test_package.py <build dir | its sockpressure_exporter>

Runs the package script on that build tree (cmake/packaging.cmake), then
  - the .deb's control data (Depends cover every library the binary links, conffiles, maintainer
    scripts) and its files (exactly the agent, its unit, its default file and docs; no test binary,
    nothing in /usr/local), and the packaged unit equal to deploy/systemd's but for the binary's path;
  - real `dpkg -i`, `-r` and `--purge` into two throwaway roots, never the host's: one where the
    maintainer scripts run chrooted (as in an image build: no systemd running, no helpers), one
    where they run outside it with DPKG_ROOT set (how Debian bootstraps a root; the host's
    deb-systemd-helper enables the unit inside it). Each root's dpkg database lists the host's own
    library packages, so dpkg checks the real Depends against the versions the binary runs with;
  - the installed binary's --version, and `systemd-analyze verify --root` of the installed unit;
  - the tarball's layout and its binary's --version.
Exit 77 when the agent is not built, not root (dpkg writes root-owned files and chroots) or a tool
is missing; 1 on any failure.
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, fail, finish  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PKG = "sockpressure-exporter"
UNIT = f"{PKG}.service"
WANTS = f"etc/systemd/system/multi-user.target.wants/{UNIT}"
DEB_FILES = {
    f"/etc/default/{PKG}",
    "/usr/bin/sockpressure_exporter",
    f"/usr/lib/systemd/system/{UNIT}",
} | {f"/usr/share/doc/{PKG}/{f}" for f in ("CHANGELOG.md", "LICENSE", "README.md", "copyright")}
TAR_FILES = {"sockpressure_exporter", UNIT, f"{PKG}.default", "LICENSE", "README.md", "CHANGELOG.md"}


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def project_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"^project\(sockpressure VERSION ([0-9.]+)", text, re.M).group(1)


def depends_names(field):
    """Depends -> package names; of an alternative `a | b`, every name (any may satisfy it)."""
    return [re.sub(r"\s*\(.*", "", alt).strip() for dep in field.split(",") for alt in dep.split("|")]


def owners(paths):
    """library path -> host package (dpkg -S). A file may be registered under /lib or /usr/lib
    (merged /usr), so both spellings are asked for."""
    variants = {}
    for path in paths:
        for cand in (path, os.path.realpath(path), re.sub(r"^/usr/lib/", "/lib/", path),
                     re.sub(r"^/lib/", "/usr/lib/", path)):
            variants.setdefault(cand, path)
    found = {}
    for line in run(["dpkg", "-S"] + sorted(variants)).stdout.splitlines():
        m = re.match(r"([^:,\s]+)(?::\w+)?: (/\S+)$", line)
        if m and m.group(2) in variants:
            found.setdefault(variants[m.group(2)], m.group(1))
    return found


def new_root(parent, name, deps, with_shell):
    """An empty root with a dpkg database that lists the host's packages in `deps` as installed
    (status only, no files: the binary runs with the host's libraries anyway). with_shell: the
    host's /bin/sh and the libraries it loads, and /dev/null, all a chrooted maintainer script
    gets; no systemd, no deb-systemd-helper, no /run/systemd/system."""
    root = os.path.join(parent, name)
    admin = os.path.join(root, "var", "lib", "dpkg")
    for d in ("info", "updates"):
        os.makedirs(os.path.join(admin, d))
    fmt = ("Package: ${Package}\\nStatus: install ok installed\\nPriority: optional\\n"
           "Architecture: ${Architecture}\\nMulti-Arch: ${Multi-Arch}\\nMaintainer: ${Maintainer}\\n"
           "Version: ${Version}\\nDescription: ${binary:Summary}\\n\\n")
    with open(os.path.join(admin, "status"), "w") as status:
        for p in deps:
            q = run(["dpkg-query", "-W", "-f", fmt, p])
            if q.returncode == 0:
                status.write(q.stdout)
                name_arch = run(["dpkg-query", "-W", "-f", "${binary:Package}", p]).stdout
                open(os.path.join(admin, "info", f"{name_arch}.list"), "w").close()
    if with_shell:
        sh = os.path.realpath("/bin/sh")
        libs = re.findall(r"(/\S+) \(0x", run(["ldd", sh]).stdout)
        for f in [sh] + libs:
            dst = os.path.join(root, f.lstrip("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(f, dst)
        if not os.path.exists(os.path.join(root, "bin", "sh")):
            os.makedirs(os.path.join(root, "bin"), exist_ok=True)
            os.symlink(sh, os.path.join(root, "bin", "sh"))
        os.makedirs(os.path.join(root, "dev"))
        os.mknod(os.path.join(root, "dev", "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return root


def dpkg(root, *args, chrootless=False):
    cmd = ["dpkg", f"--root={root}"] + (["--force-script-chrootless"] if chrootless else []) + list(args)
    p = run(cmd)
    print("$", " ".join(cmd), f"-> {p.returncode}")
    for line in (p.stdout + p.stderr).splitlines():
        print("   ", line)
    return p


def errors(p):
    """dpkg's stderr but for its note that a shared directory (/usr/bin, /etc) outlives the package."""
    return [x for x in p.stderr.splitlines()
            if not re.match(r"dpkg: warning: while removing \S+, directory '.*' not empty so not removed$", x)]


def pkg_status(root):
    p = run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f", "${Status}", PKG])
    return p.stdout if p.returncode == 0 else "not known"


def check_version(binary, version, what):
    p = run([binary, "--version"])
    first = (p.stdout + p.stderr).splitlines()[:1]
    check(p.returncode == 0 and first and first[0].startswith(f"sockpressure_exporter, version {version} "),
          f"{what} --version says version {version}: {first}")


def check_install_remove(root, deb, version, chrootless):
    mode = "scripts outside the root, DPKG_ROOT set" if chrootless else "scripts chrooted, no systemd running"
    p = dpkg(root, "-i", deb, chrootless=chrootless)
    check(p.returncode == 0 and not errors(p),
          f"dpkg -i ({mode}): exit 0, no error (Depends met by the host's library versions)")
    check(pkg_status(root) == "install ok installed", f"({mode}) status: {pkg_status(root)}")
    missing = sorted(f for f in DEB_FILES if not os.path.isfile(root + f))
    check(not missing, f"({mode}) every file installed{': missing ' + ', '.join(missing) if missing else ''}")
    check_version(root + "/usr/bin/sockpressure_exporter", version, f"({mode}) installed binary")
    return p


def main():
    arg = sys.argv[1] if len(sys.argv) > 1 else ""
    if not arg:
        skip("no build tree given (the sockpressure_exporter target is not configured)")
    build, agent = (arg, os.path.join(arg, "sockpressure_exporter")) if os.path.isdir(arg) \
        else (os.path.dirname(os.path.abspath(arg)), arg)
    if not os.access(agent, os.X_OK):
        skip(f"{agent} is not built (build the sockpressure_exporter target)")
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        skip(f"{build} is not a configured build tree")
    if os.geteuid() != 0:
        skip("needs root: dpkg installs root-owned files and chroots into the throwaway root")
    for tool in ("dpkg", "dpkg-deb", "dpkg-query", "dpkg-shlibdeps", "cpack", "systemd-analyze",
                 "sha256sum", "readelf", "ldd"):
        if not shutil.which(tool):
            skip(f"{tool} not found")
    version = project_version()
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    deb_name = f"{PKG}_{version}-1_{arch}.deb"
    tar_top = f"{PKG}-{version}-linux-{arch}"

    # --- scripts/package.sh ----------------------------------------------------------------
    p = run([os.path.join(ROOT, "scripts", "package.sh"), build])
    print(p.stdout[-1500:], p.stderr[-1500:])
    out = os.path.join(build, "packages")
    if p.returncode != 0:
        fail(f"scripts/package.sh {build}: exit {p.returncode}")
        return finish("")
    names = sorted(os.listdir(out))
    check(names == sorted(["SHA256SUMS", deb_name, tar_top + ".tar.gz"]),
          f"packages/ holds {deb_name}, {tar_top}.tar.gz and SHA256SUMS: {names}")
    sums = run(["sha256sum", "-c", "SHA256SUMS"], cwd=out)
    check(sums.returncode == 0 and sums.stdout.count(": OK") == 2, "sha256sum -c SHA256SUMS: both OK")
    check(all(f"{n}" in p.stdout for n in (deb_name, tar_top + ".tar.gz")), "package.sh prints the artifacts")
    deb = os.path.join(out, deb_name)
    tgz = os.path.join(out, tar_top + ".tar.gz")
    if not (os.path.isfile(deb) and os.path.isfile(tgz)):
        return finish("")

    # --- control data -------------------------------------------------------------------
    field = lambda f: run(["dpkg-deb", "-f", deb, f]).stdout.strip()  # noqa: E731
    check(field("Package") == PKG and field("Version") == f"{version}-1" and field("Architecture") == arch,
          f"Package {field('Package')}, Version {field('Version')}, Architecture {field('Architecture')}")
    check(all(field(f) for f in ("Maintainer", "Section", "Description")),
          f"Maintainer, Section ({field('Section')}) and Description set")
    depends = field("Depends")
    print("Depends:", depends)
    dep_names = set(depends_names(depends))
    # Every library the binary names (NEEDED; what those load in turn is their packages' Depends)
    # belongs to a package the .deb depends on.
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", run(["readelf", "-d", agent]).stdout)
    resolved = dict(re.findall(r"^\s*(\S+) => (/\S+) \(0x", run(["ldd", agent]).stdout, re.M))
    libs = [resolved.get(n, n) for n in needed]
    pkg_of = owners([x for x in libs if x.startswith("/")])
    uncovered = sorted(f"{lib} ({pkg_of.get(lib, 'not found')})" for lib in libs if pkg_of.get(lib) not in dep_names)
    check(needed and not uncovered, f"Depends covers all {len(needed)} libraries the binary names (NEEDED)"
          + (f"; not: {', '.join(uncovered)}" if uncovered else ""))

    with tempfile.TemporaryDirectory() as tmp:
        ctrl = os.path.join(tmp, "control")
        check(run(["dpkg-deb", "-e", deb, ctrl]).returncode == 0, "dpkg-deb -e")
        conffiles = open(os.path.join(ctrl, "conffiles")).read().split() if os.path.exists(
            os.path.join(ctrl, "conffiles")) else []
        check(conffiles == [f"/etc/default/{PKG}"], f"conffiles: {conffiles}")
        for s in ("postinst", "prerm", "postrm"):
            path = os.path.join(ctrl, s)
            check(os.path.isfile(path) and stat.S_IMODE(os.stat(path).st_mode) == 0o755
                  and open(path).read() == open(os.path.join(ROOT, "deploy", "debian", s)).read(),
                  f"maintainer script {s}: deploy/debian/{s}, mode 0755")

        # --- data: exactly the agent's files ----------------------------------------------
        listing = run(["dpkg-deb", "-c", deb]).stdout.splitlines()
        files, bad_owner = set(), []
        for line in listing:
            cols = line.split(None, 5)
            path = cols[5].split(" -> ")[0].lstrip(".")
            if cols[1] != "root/root":
                bad_owner.append(path)
            if not cols[0].startswith("d"):
                files.add(path)
        check(files == DEB_FILES, "the .deb holds exactly " + ", ".join(sorted(DEB_FILES))
              + f" (extra: {sorted(files - DEB_FILES)}, missing: {sorted(DEB_FILES - files)})")
        check(not [f for f in files if f.startswith("/usr/local") or re.search(r"test|bench|fuzz", f)],
              "no /usr/local, no test, bench or fuzz binary")
        check(not bad_owner, f"everything owned by root/root{': not ' + ', '.join(bad_owner) if bad_owner else ''}")
        data = os.path.join(tmp, "data")
        run(["dpkg-deb", "-x", deb, data])
        src_unit = open(os.path.join(ROOT, "deploy", "systemd", UNIT)).read()
        deb_unit = open(os.path.join(data, "usr", "lib", "systemd", "system", UNIT)).read()
        directives = lambda t: [x for x in t.splitlines() if x and not x.startswith("#")]  # noqa: E731
        check(directives(deb_unit) == [x.replace("/usr/local/bin/", "/usr/bin/") for x in directives(src_unit)]
              and "ExecStart=/usr/bin/sockpressure_exporter " in deb_unit,
              "packaged unit: deploy/systemd's directives, ExecStart=/usr/bin/sockpressure_exporter")

        # --- install, verify, remove: scripts chrooted, no systemd --------------------------
        host_wants = os.path.lexists("/" + WANTS)
        a = new_root(tmp, "root-chroot", dep_names, with_shell=True)
        check_install_remove(a, deb, version, chrootless=False)
        check(not os.path.lexists(os.path.join(a, WANTS)),
              "(chrooted) no systemd in the root: the postinst enabled nothing and did not fail")
        p = dpkg(a, "-r", PKG)
        left = sorted(f for f in DEB_FILES if os.path.lexists(a + f))
        check(p.returncode == 0 and not errors(p) and left == [f"/etc/default/{PKG}"]
              and pkg_status(a) == "deinstall ok config-files",
              f"(chrooted) dpkg -r: exit 0, only the conffile stays ({left}), status {pkg_status(a)}")
        p = dpkg(a, "--purge", PKG)
        left = sorted(f for f in DEB_FILES if os.path.lexists(a + f))
        check(p.returncode == 0 and not errors(p) and not left and pkg_status(a) == "not known",
              f"(chrooted) dpkg --purge: exit 0, nothing left ({left}), package forgotten")

        # --- install, verify, remove: scripts outside the root (DPKG_ROOT) ------------------
        b = new_root(tmp, "root-dpkg-root", dep_names, with_shell=False)
        check_install_remove(b, deb, version, chrootless=True)
        if shutil.which("deb-systemd-helper") or shutil.which("systemctl"):
            link = os.path.join(b, WANTS)
            check(os.path.islink(link) and os.readlink(link) == f"/usr/lib/systemd/system/{UNIT}",
                  f"(DPKG_ROOT) postinst enabled the unit inside the root: {WANTS}")
        else:
            print("note: neither deb-systemd-helper nor systemctl on this host: enabling not exercised")
        check(os.path.lexists("/" + WANTS) == host_wants, "the host's own systemd configuration untouched")
        # verify starts from the unit's targets: give the root the host's (files no package owns).
        targets = [f for f in os.listdir("/lib/systemd/system") if f.endswith(".target")] \
            if os.path.isdir("/lib/systemd/system") else []
        if not targets:
            skip("no systemd targets on this host for systemd-analyze verify")
        os.makedirs(os.path.join(b, "lib", "systemd", "system"))
        for t in targets:
            shutil.copy2(os.path.join("/lib/systemd/system", t), os.path.join(b, "lib", "systemd", "system", t))
        p = run(["systemd-analyze", "verify", f"--root={b}", UNIT])
        out_lines = (p.stdout + p.stderr).splitlines()
        print("systemd-analyze verify:", p.returncode, out_lines)
        about_unit = [x for x in out_lines if PKG in x or "sockpressure_exporter" in x]
        check(p.returncode == 0 and not about_unit,
              f"systemd-analyze verify --root: installed unit passes, no warning about it {about_unit}")
        p = dpkg(b, "--purge", PKG, chrootless=True)
        left = sorted(f for f in DEB_FILES if os.path.lexists(b + f))
        state = os.path.join(b, "var", "lib", "systemd", "deb-systemd-helper-enabled")
        state_left = [os.path.join(d, f) for d, _, fs in os.walk(state) for f in fs]
        check(p.returncode == 0 and not errors(p) and not left and pkg_status(b) == "not known"
              and not os.path.lexists(os.path.join(b, WANTS)) and not state_left,
              f"(DPKG_ROOT) dpkg --purge: exit 0, files, enable link and helper state gone ({left + state_left})")

        # --- the tarball --------------------------------------------------------------------
        with tarfile.open(tgz) as t:
            members = t.getmembers()
            regular = {m.name for m in members if m.isfile()}
            check(all(m.name == tar_top or m.name.startswith(tar_top + "/") for m in members)
                  and regular == {f"{tar_top}/{f}" for f in TAR_FILES},
                  f"tarball: {', '.join(sorted(TAR_FILES))} under {tar_top}/ ({sorted(regular)})")
            # The "data" filter (where this Python has it) refuses links and paths out of the directory.
            t.extractall(os.path.join(tmp, "tar"), **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        top = os.path.join(tmp, "tar", tar_top)
        binary = os.path.join(top, "sockpressure_exporter")
        check(os.path.isfile(binary) and stat.S_IMODE(os.stat(binary).st_mode) == 0o755, "tarball binary mode 0755")
        check_version(binary, version, "tarball binary")
        same = all(open(os.path.join(top, f), "rb").read() == open(os.path.join(ROOT, src), "rb").read()
                   for f, src in ((UNIT, f"deploy/systemd/{UNIT}"), ("LICENSE", "LICENSE"),
                                  (f"{PKG}.default", f"deploy/systemd/{PKG}.default")))
        check(same, "tarball unit, default file and LICENSE are the repository's")
    return finish(f"{deb_name} and {tar_top}.tar.gz build, install and remove")


if __name__ == "__main__":
    sys.exit(main())
