#!/usr/bin/env python3
"""The agent pushing to a real Alertmanager that serves https with basic auth.

A CA and a server certificate for 127.0.0.1 are made here with openssl and a
bcrypt password hash with libcrypt; Alertmanager gets them through its own
--web.config.file. Four agents watch the same simulated throttling cgroup:
  ok        --alertmanager.ca-file=CA + the right password -> the alert arrives
  insecure  --alertmanager.insecure-skip-verify + the right password -> arrives
  no-ca     the system's roots only -> refused; the agent says why (the
            certificate) and points at --alertmanager.ca-file, and keeps retrying
  bad-auth  the CA + a wrong password -> HTTP 401, the agent names the flags
and bad flag combinations stop the agent at start with a clear message.
"""
import base64
import ctypes
import ctypes.util
import json
import os
import ssl
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CGROUP = "/workload.slice/proxy.service"


def run(*argv):
    subprocess.run(argv, check=True, capture_output=True)


def make_pki(d):
    """CA -> server certificate for 127.0.0.1 (the agent must trust the CA, not the leaf)."""
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = os.path.join(d, "am.key"), os.path.join(d, "am.csr"), os.path.join(d, "am.crt")
    ext = os.path.join(d, "san.ext")
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=sockpressure test CA",
        "-keyout", ca_key, "-out", ca_crt)
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr)
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", "1",
        "-extfile", ext, "-out", crt)
    return ca_crt, crt, key


def bcrypt(password):
    lib = ctypes.CDLL(ctypes.util.find_library("crypt"))
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt.restype = ctypes.c_char_p
    h = lib.crypt(password.encode(), lib.crypt_gensalt(b"$2b$", 5, None, 0)).decode()
    assert h.startswith("$2b$"), f"no bcrypt from libcrypt: {h}"
    return h


def am_alerts(port, ca, user, password):
    """Active alerts straight from Alertmanager's v2 API, over TLS with auth."""
    ctx = ssl.create_default_context(cafile=ca)
    req = urllib.request.Request(f"https://127.0.0.1:{port}/api/v2/alerts?active=true")
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
        return [a for a in json.loads(r.read()) if a["labels"].get("alertname") == "SockPressureTCPThrottled"
                and a["labels"].get("cgroup") == CGROUP]


def main():
    args = harness.parse_args()
    harness.need("prometheus-alertmanager", "openssl", args.agent)
    procs = harness.Procs()
    ok = False
    try:
        d = procs.tmp
        ca, crt, key = make_pki(d)
        with open(os.path.join(d, "web.yml"), "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n"
                    f"basic_auth_users:\n  sockpressure: '{bcrypt('s3cret')}'\n")
        good_pw, bad_pw = os.path.join(d, "pw"), os.path.join(d, "pw.bad")
        with open(good_pw, "w") as f:
            f.write("s3cret\n")  # with the newline an editor leaves
        with open(bad_pw, "w") as f:
            f.write("nope\n")

        am_port = harness.free_port()
        am_dir = os.path.join(d, "am")
        os.makedirs(am_dir)
        with open(os.path.join(am_dir, "alertmanager.yml"), "w") as f:
            f.write("route:\n  receiver: devnull\nreceivers:\n  - name: devnull\n")
        procs.start("alertmanager", [
            "prometheus-alertmanager", f"--config.file={am_dir}/alertmanager.yml", f"--storage.path={am_dir}",
            f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address=",
            f"--web.config.file={d}/web.yml"])
        harness.wait_for(lambda: am_alerts(am_port, ca, "sockpressure", "s3cret") is not None, 30,
                         "Alertmanager serving https with basic auth")

        # Bad flag combinations: exit 2 with a message, before serving anything.
        url = f"--alertmanager.url=https://127.0.0.1:{am_port}"
        for extra, want in (
                (["--alertmanager.basic-auth.username=sockpressure"], "go together"),
                (["--alertmanager.basic-auth.username=x", f"--alertmanager.basic-auth.password-file={d}/missing"],
                 "reading --alertmanager.basic-auth.password-file"),
                ([f"--alertmanager.ca-file={d}/missing.crt"], "reading --alertmanager.ca-file")):
            r = subprocess.run(harness.agent_argv(args.agent, d, harness.free_port(), url, *extra),
                               capture_output=True, text=True, timeout=20)
            assert r.returncode == 2 and want in r.stderr, (extra, r.returncode, r.stderr)
        print("bad flags: refused at start with exit 2 and a message")

        root = os.path.join(d, "tree")
        harness.start_sim(procs, args.sim, root, state="throttling")
        common = [url, "--alertmanager.min-pressure-duration=1s", "--alertmanager.resend-interval=1s",
                  "--alertmanager.max-backoff=1s", "--alertmanager.timeout=2s"]
        agents = {
            "ok": [f"--alertmanager.ca-file={ca}", "--alertmanager.basic-auth.username=sockpressure",
                   f"--alertmanager.basic-auth.password-file={good_pw}", "--alertmanager.instance-label=ok:1"],
            "insecure": ["--alertmanager.insecure-skip-verify", "--alertmanager.basic-auth.username=sockpressure",
                         f"--alertmanager.basic-auth.password-file={good_pw}", "--alertmanager.instance-label=insecure:1"],
            "no-ca": ["--alertmanager.basic-auth.username=sockpressure",
                      f"--alertmanager.basic-auth.password-file={good_pw}", "--alertmanager.instance-label=no-ca:1"],
            "bad-auth": [f"--alertmanager.ca-file={ca}", "--alertmanager.basic-auth.username=sockpressure",
                         f"--alertmanager.basic-auth.password-file={bad_pw}", "--alertmanager.instance-label=bad-auth:1"],
        }
        ports = {}
        for name, extra in agents.items():
            ports[name] = harness.free_port()
            procs.start(f"agent-{name}", harness.agent_argv(args.agent, root, ports[name], *common, *extra))
        for name, port in ports.items():
            harness.wait_for(lambda: harness.http_get(f"http://127.0.0.1:{port}/readyz"), 20, f"agent {name} up")

        alerts = harness.wait_for(
            lambda: (lambda a: a if {x["labels"].get("instance") for x in a} >= {"ok:1", "insecure:1"} else None)(
                am_alerts(am_port, ca, "sockpressure", "s3cret")), 30, "alerts of the ok and insecure agents")
        instances = sorted(a["labels"]["instance"] for a in alerts)
        assert instances == ["insecure:1", "ok:1"], f"only the agents that may push got through: {instances}"
        sel = f'{{alertmanager="https://127.0.0.1:{am_port}"}}'
        for name in ("ok", "insecure"):
            assert harness.metric(ports[name], "sockpressure_alertmanager_up" + sel) == 1, name
        for name, hint in (("no-ca", "--alertmanager.ca-file"), ("bad-auth", "basic-auth")):
            harness.wait_for(lambda: (harness.metric(ports[name], "sockpressure_alertmanager_errors_total" + sel) or 0) >= 2,
                             20, f"{name}: failed pushes counted")
            assert harness.metric(ports[name], "sockpressure_alertmanager_up" + sel) == 0, name
            assert harness.metric(ports[name], "sockpressure_alertmanager_pending_alerts" + sel) >= 1, name
            log = procs.log(f"agent-{name}")
            line = next((l for l in log.splitlines() if "alertmanager https://" in l and "will retry" in l), "")
            assert hint in line, f"{name}: the log does not say what to fix: {line or log[-2000:]}"
            print(f"{name}: refused, logged: {line.split('msg=', 1)[-1][:200]}")
        print(f"ok, insecure: delivered over https with basic auth ({len(alerts)} alerts)")
        ok = True
    finally:
        procs.close(keep=not ok)
    print("PASS")


if __name__ == "__main__":
    main()
