#!/usr/bin/env python3
"""--web.config.file end to end, with real TLS clients, against node_exporter.

Every exporter-toolkit web config here is given to the agent and, when
Debian's prometheus-node-exporter is installed, to node_exporter too, both on
loopback. They must agree on accepting or refusing the config and on what a
client sees: the TLS version and cipher negotiated (min_version, max_version,
cipher_suites, curve_preferences), a client certificate required, accepted or
refused (client_auth_type with a client CA) and the extra response headers.
The few places where the agent differs on purpose are asserted as such.
Without node_exporter (or openssl) the test skips (77) with the reason; the
agent's own checks still run first when openssl is there, and fail the test
if they fail.

usage: web_config_test.py AGENT
"""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore", category=DeprecationWarning)  # ssl.TLSVersion.TLSv1_1: refused on purpose

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from ports import free_port  # noqa: E402

AGENT = sys.argv[1]
FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "v2")
# SOCKPRESSURE_NODE_EXPORTER: a node_exporter binary, or "none" to leave it out.
NODE = os.environ.get("SOCKPRESSURE_NODE_EXPORTER") or shutil.which("prometheus-node-exporter") or shutil.which(
    "node_exporter")
if NODE == "none":
    NODE = None
FAILURES = []
WORK = tempfile.mkdtemp(prefix="sockpressure-webcfg.")


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_pki():
    p = lambda name: os.path.join(WORK, name)  # noqa: E731
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test CA",
            "-keyout", p("ca.key"), "-out", p("ca.crt"))
    for name, ext in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", p(f"{name}.key"),
                "-out", p(f"{name}.csr"))
        with open(p(f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", p(f"{name}.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-days", "1", "-extfile", p(f"{name}.ext"), "-out", p(f"{name}.crt"))
    # A client certificate no configured CA signed.
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=rogue",
            "-keyout", p("rogue.key"), "-out", p("rogue.crt"))


class Server:
    """The agent or node_exporter on a loopback port with one web config."""

    def __init__(self, kind, config_path):
        self.kind = kind
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        listen = f"--web.listen-address=127.0.0.1:{self.port}"
        if kind == "agent":
            args = [AGENT, listen, f"--web.config.file={config_path}", f"--path.procfs={FIX}/proc",
                    f"--path.sysfs={FIX}/sys", f"--path.cgroupfs={FIX}/cgroup", "--no-collector.bpf",
                    "--no-collector.bpf_census", "--no-collector.sock_diag"]
        else:
            args = [NODE, listen, f"--web.config.file={config_path}", "--collector.disable-defaults"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        self.accepted = self._wait()

    def _wait(self):
        """True once it answers over TLS, False once it exits (config refused)."""
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            # Any client that can get an answer from any config used here.
            if probe(self.port, cert="client", tls_min=ssl.TLSVersion.TLSv1_2, ciphers="ALL:@SECLEVEL=0").get("status"):
                return True
            time.sleep(0.2)
        raise RuntimeError(f"{self.kind} neither served nor exited:\n{self.output()}")

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def probe(port, tls_min=None, tls_max=None, ciphers=None, cert=None):
    """One HTTPS GET /metrics: what the client saw (version, cipher, status, headers) or the error."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(WORK, "ca.crt"))
    if tls_min is not None and tls_min < ssl.TLSVersion.TLSv1_2 and ciphers is None:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer what old versions need
    if tls_min is not None:
        ctx.minimum_version = tls_min
    if tls_max is not None:
        ctx.maximum_version = tls_max
    if ciphers is not None:
        ctx.set_ciphers(ciphers)
    if cert is not None:
        ctx.load_cert_chain(os.path.join(WORK, f"{cert}.crt"), os.path.join(WORK, f"{cert}.key"))
    out = {}
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                out["version"] = s.version()
                out["cipher"] = s.cipher()[0]
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].decode(errors="replace").split("\r\n")
        if not head[0].startswith("HTTP/1."):
            raise ConnectionError(f"no HTTP answer ({head[0]!r})")
        out["status"] = int(head[0].split()[1])
        out["headers"] = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in head[1:] if ":" in line)}
    except (OSError, ssl.SSLError, ConnectionError, ValueError) as e:
        out = {"error": type(e).__name__ + ": " + str(e)}
    return out


def s_client_groups(port, groups):
    """openssl s_client offering only `groups`: the negotiated group's line, or None when refused."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2", "-groups", groups,
                        "-CAfile", os.path.join(WORK, "ca.crt")], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=20)
    for line in r.stdout.splitlines():
        if line.startswith("Server Temp Key:"):
            return line.split(":", 1)[1].split(",")[1].strip() if "," in line else line
    return None


def outcome(p):
    """What a probe shows, in terms that must match between the two servers."""
    if "error" in p:
        return "refused"
    return f"{p['version']} {p['cipher']} HTTP {p['status']}"


TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"  # relative: the config's directory
V = ssl.TLSVersion

# name, config, [(what, probe kwargs)], headers to see
CASES = [
    ("defaults", TLS, [
        ("default client", {}),
        ("TLS 1.2 client", {"tls_max": V.TLSv1_2}),
        ("TLS 1.1 client", {"tls_min": V.TLSv1_1, "tls_max": V.TLSv1_1}),
        ("TLS 1.2 ECDHE-RSA-AES128-GCM-SHA256 only", {"tls_max": V.TLSv1_2, "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"}),
        # Static-RSA key exchange and CBC with SHA-1: not offered by default.
        ("TLS 1.2 static-RSA AES128-GCM-SHA256 only", {"tls_max": V.TLSv1_2, "ciphers": "AES128-GCM-SHA256"}),
        ("TLS 1.2 static-RSA AES128-SHA only", {"tls_max": V.TLSv1_2, "ciphers": "AES128-SHA"}),
        ("TLS 1.2 ECDHE-RSA-AES128-SHA only", {"tls_max": V.TLSv1_2, "ciphers": "ECDHE-RSA-AES128-SHA"}),
    ], {}),
    ("min_version TLS13", TLS + "  min_version: TLS13\n", [
        ("default client", {}),
        ("TLS 1.2 client", {"tls_max": V.TLSv1_2}),
    ], {}),
    ("max_version TLS12", TLS + "  max_version: TLS12\n", [
        ("default client", {}),
        ("TLS 1.3 client", {"tls_min": V.TLSv1_3}),
    ], {}),
    # http2 off: Go's HTTP/2 refuses a suite list without AES-128-GCM (a difference, below).
    ("cipher_suites", TLS + "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n"
     "http_server_config:\n  http2: false\n", [
        ("default client", {}),
        ("client without that suite", {"ciphers": "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305"}),
    ], {}),
    ("cipher_suites with a CBC suite", TLS + "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA]\n"
     "http_server_config:\n  http2: false\n", [
        ("client offering CBC and GCM", {"ciphers": "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-SHA"}),
    ], {}),
    ("cipher_suites without AES-128-GCM, http2 on",
     TLS + "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n", [], {}),
    ("RequireAndVerifyClientCert", TLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n", [
        ("no client certificate", {}),
        ("client certificate from the CA", {"cert": "client"}),
        ("client certificate from another CA", {"cert": "rogue"}),
        ("no client certificate, TLS 1.2", {"tls_max": V.TLSv1_2}),
    ], {}),
    ("VerifyClientCertIfGiven", TLS + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n", [
        ("no client certificate", {}),
        ("client certificate from the CA", {"cert": "client"}),
        ("client certificate from another CA", {"cert": "rogue"}),
    ], {}),
    ("RequireAnyClientCert", TLS + "  client_auth_type: RequireAnyClientCert\n", [
        ("no client certificate", {}),
        ("client certificate from another CA", {"cert": "rogue"}),
    ], {}),
    ("RequestClientCert", TLS + "  client_auth_type: RequestClientCert\n  client_ca_file: ca.crt\n", [
        ("no client certificate", {}),
        ("client certificate from another CA", {"cert": "rogue"}),
    ], {}),
    ("headers and http2", TLS + "http_server_config:\n  http2: false\n  headers:\n"
     "    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\n"
     "    Strict-Transport-Security: max-age=31536000\n    Content-Security-Policy: default-src 'none'\n",
     [("default client", {})],
     {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "deny",
      "Strict-Transport-Security": "max-age=31536000", "Content-Security-Policy": "default-src 'none'"}),
    ("curve_preferences", TLS + "  curve_preferences: [CurveP384]\n", [], {}),
    # Refused by both.
    ("unknown top-level key", TLS + "tls_config: {}\n", [], {}),
    ("unknown tls key", TLS + "  minversion: TLS13\n", [], {}),
    ("unknown http key", TLS + "http_server_config:\n  http3: true\n", [], {}),
    ("bad min_version", TLS + "  min_version: TLS14\n", [], {}),
    ("insecure cipher", TLS + "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", [], {}),
    ("OpenSSL cipher name", TLS + "  cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256]\n", [], {}),
    ("bad curve", TLS + "  curve_preferences: [P-256]\n", [], {}),
    ("bad client_auth_type", TLS + "  client_auth_type: Always\n", [], {}),
    ("client CA with NoClientCert", TLS + "  client_auth_type: NoClientCert\n  client_ca_file: ca.crt\n", [], {}),
    ("reserved header", TLS + "http_server_config:\n  headers:\n    Server: x\n", [], {}),
    ("bad X-Frame-Options", TLS + "http_server_config:\n  headers:\n    X-Frame-Options: allow\n", [], {}),
    ("lower-case header", TLS + "http_server_config:\n  headers:\n    x-frame-options: deny\n", [], {}),
    ("key_file missing", "tls_server_config:\n  cert_file: server.crt\n", [], {}),
    ("plain password", TLS + "basic_auth_users:\n  alice: s3cret\n", [], {}),
]

# Where the agent differs on purpose: (case, probe or None for accept/reject)
# -> (agent, node_exporter), both asserted (None: not asserted).
DIFFERENCES = {
    # The agent's earlier meaning of client_ca_file alone is kept (require
    # and verify); exporter-toolkit refuses a client CA without a policy.
    ("client_ca_file alone", None): ("accepted", "refused"),
    # Go's HTTP/2 requires an AES-128-GCM suite when cipher_suites is set
    # and http2 is on; this server speaks HTTP/1.1 only.
    ("cipher_suites without AES-128-GCM, http2 on", None): ("accepted", "refused"),
    # The default TLS 1.2 suites are ECDHE with an AEAD only, as exporter-
    # toolkit documents for current Go; node_exporter 1.5.0 (Go 1.19) still
    # offers static-RSA key exchange and CBC with SHA-1 (None: either).
    ("defaults", "TLS 1.2 static-RSA AES128-GCM-SHA256 only"): ("refused", None),
    ("defaults", "TLS 1.2 static-RSA AES128-SHA only"): ("refused", None),
    ("defaults", "TLS 1.2 ECDHE-RSA-AES128-SHA only"): ("refused", None),
}
CASES.append(("client_ca_file alone", TLS + "  client_ca_file: ca.crt\n", [
    ("no client certificate", {}),
    ("client certificate from the CA", {"cert": "client"}),
], {}))


def run_case(name, config, probes, headers):
    path = os.path.join(WORK, f"web-{len(os.listdir(WORK))}.yml")
    with open(path, "w") as f:
        f.write(config)
    servers = {"agent": Server("agent", path)}
    if NODE:
        servers["node_exporter"] = Server("node_exporter", path)
    try:
        seen = {k: ("accepted" if s.accepted else "refused") for k, s in servers.items()}
        print(f"--- {name}: " + ", ".join(f"{k} {v}" for k, v in seen.items()), flush=True)
        want = DIFFERENCES.get((name, None))
        if want and NODE:
            check((seen["agent"], seen["node_exporter"]) == want,
                  f"{name}: the agent {want[0]}, node_exporter {want[1]} (a known difference)")
        elif NODE:
            check(seen["agent"] == seen["node_exporter"], f"{name}: both {seen['agent']} the config")
        if not servers["agent"].accepted:
            out = servers["agent"].output()
            check("web config" in out, f"{name}: the agent says why: {out.strip().splitlines()[-1:]}")
            return seen, {}
        results = {}
        for what, kw in probes:
            got = {k: outcome(probe(s.port, **kw)) for k, s in servers.items() if s.accepted}
            results[what] = got
            print(f"    {what}: " + "; ".join(f"{k}: {v}" for k, v in got.items()), flush=True)
            if "node_exporter" in got:
                want = DIFFERENCES.get((name, what))
                if want:
                    check(got["agent"] == want[0] and want[1] in (None, got["node_exporter"]),
                          f"{name}, {what}: a known difference")
                else:
                    check(got["agent"] == got["node_exporter"], f"{name}, {what}: the client sees the same")
        if headers:
            for k, s in servers.items():
                if s.accepted:
                    h = probe(s.port).get("headers", {})
                    check(all(h.get(n) == v for n, v in headers.items()), f"{name}: {k} sends the configured headers")
        if name == "curve_preferences":
            for k, s in servers.items():
                if s.accepted:
                    results[k] = (s_client_groups(s.port, "P-384"), s_client_groups(s.port, "X25519"))
                    print(f"    {k}: TLS 1.2 client with P-384: {results[k][0]}; X25519 only: {results[k][1]}")
            if NODE and servers["node_exporter"].accepted:
                check(results["agent"] == results["node_exporter"], "curve_preferences: the same groups negotiated")
        return seen, results
    finally:
        for s in servers.values():
            s.stop()


def main():
    if shutil.which("openssl") is None:
        print("SKIP: openssl not found (apt-get install openssl)")
        return 77
    make_pki()
    if NODE is None:
        print("NOTE: prometheus-node-exporter not installed (apt-get install prometheus-node-exporter): "
              "checking the agent alone, not the comparison", flush=True)
    got = {}
    for name, config, probes, headers in CASES:
        got[name] = run_case(name, config, probes, headers)

    # What exporter-toolkit documents, on the agent itself (whether or not node_exporter ran).
    def agent(name, what):
        return got[name][1][what]["agent"]

    check(agent("defaults", "default client").startswith("TLSv1.3"), "defaults: TLS 1.3 negotiated")
    check(agent("defaults", "TLS 1.1 client") == "refused", "defaults: min_version TLS12, TLS 1.1 refused")
    check(agent("defaults", "TLS 1.2 client").startswith("TLSv1.2 ECDHE-"), "defaults: TLS 1.2 with ECDHE")
    for what in ("TLS 1.2 static-RSA AES128-GCM-SHA256 only", "TLS 1.2 static-RSA AES128-SHA only",
                 "TLS 1.2 ECDHE-RSA-AES128-SHA only"):
        check(agent("defaults", what) == "refused", f"defaults: {what} refused")
    check(agent("min_version TLS13", "TLS 1.2 client") == "refused", "min_version TLS13: TLS 1.2 refused")
    check(agent("max_version TLS12", "default client").startswith("TLSv1.2 "), "max_version TLS12: TLS 1.2")
    check(agent("max_version TLS12", "TLS 1.3 client") == "refused", "max_version TLS12: TLS 1.3 refused")
    check(agent("cipher_suites", "default client") == "TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384 HTTP 200",
          "cipher_suites: the configured suite negotiated")
    check(agent("cipher_suites", "client without that suite") == "refused", "cipher_suites: others refused")
    check(agent("cipher_suites with a CBC suite", "client offering CBC and GCM").startswith("TLSv1.2 ECDHE-RSA-AES128-SHA "),
          "cipher_suites: a configured CBC suite is used")
    for case in ("RequireAndVerifyClientCert", "client_ca_file alone"):
        check(agent(case, "no client certificate") == "refused", f"{case}: no client certificate refused")
        check(agent(case, "client certificate from the CA").endswith("HTTP 200"), f"{case}: the CA's client served")
    check(agent("RequireAndVerifyClientCert", "client certificate from another CA") == "refused",
          "RequireAndVerifyClientCert: another CA's certificate refused")
    check(agent("VerifyClientCertIfGiven", "no client certificate").endswith("HTTP 200"),
          "VerifyClientCertIfGiven: no certificate served")
    check(agent("VerifyClientCertIfGiven", "client certificate from another CA") == "refused",
          "VerifyClientCertIfGiven: another CA's certificate refused")
    check(agent("RequireAnyClientCert", "no client certificate") == "refused", "RequireAnyClientCert: none refused")
    check(agent("RequireAnyClientCert", "client certificate from another CA").endswith("HTTP 200"),
          "RequireAnyClientCert: any certificate served")
    check(agent("RequestClientCert", "client certificate from another CA").endswith("HTTP 200"),
          "RequestClientCert: any certificate served")
    groups = got["curve_preferences"][1].get("agent")
    check(groups is not None and groups[0] in ("P-384", "secp384r1") and groups[1] is None,
          f"curve_preferences [CurveP384]: P-384 negotiated, X25519 alone refused ({groups})")
    for name, _, probes, _ in CASES:
        if not probes and name != "curve_preferences" and (name, None) not in DIFFERENCES:
            check(got[name][0]["agent"] == "refused", f"{name}: the agent refuses the config")
    shutil.rmtree(WORK, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} FAILED: " + "; ".join(FAILURES))
        return 1
    if NODE is None:
        print("SKIP: the agent's checks passed, but node_exporter is not installed "
              "(apt-get install prometheus-node-exporter) so the comparison did not run")
        return 77
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
