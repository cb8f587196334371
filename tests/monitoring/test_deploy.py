#!/usr/bin/env python3
"""Deployment bundle checks: kustomize render, offline Kubernetes schema validation, yamllint,
generated files in sync with alerts/ and dashboards/, the DaemonSet's security and wiring
choices, and the systemd unit.

Exit 77 (ctest SKIP) when kubectl, node/npm or yamllint is missing; 1 on any failure.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, fail, finish  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BASE = os.path.join(ROOT, "deploy", "base")



def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


def need(tool, why):
    if not shutil.which(tool):
        print(f"SKIP: {tool} not found ({why})")
        sys.exit(77)


def render_with(component):
    """deploy/base plus one component, rendered from a throwaway overlay."""
    with tempfile.TemporaryDirectory() as d:
        rel = lambda p: os.path.relpath(os.path.join(ROOT, "deploy", p), d)  # noqa: E731
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            f.write(f"resources:\n  - {rel('base')}\ncomponents:\n  - {rel('components/' + component)}\n")
        p = subprocess.run(["kubectl", "kustomize", d], capture_output=True, text=True)
    return p


def check_components(sa_name):
    comps = sorted(os.listdir(os.path.join(ROOT, "deploy", "components")))
    want = {"kube-prometheus", "kube-prometheus-stack", "plain-prometheus", "namespace", "tls", "kubelet-nodes-proxy"}
    check(want <= set(comps), f"components {sorted(want)} exist ({comps})")
    for comp in comps:
        p = render_with(comp)
        if p.returncode != 0:
            fail(f"component {comp}: kubectl kustomize: {p.stderr}")
            continue
        docs = [x for x in yaml.safe_load_all(p.stdout) if x]
        kinds = {}
        for x in docs:
            kinds.setdefault(x["kind"], []).append(x)
        v = subprocess.run(["node", os.path.join(HERE, "validate-k8s.js")], input=p.stdout, capture_output=True,
                           text=True)
        check(v.returncode == 0, f"component {comp}: renders and every object validates offline"
              + ("" if v.returncode == 0 else "\n" + v.stdout[-1500:]))
        ds = kinds["DaemonSet"][0]
        c = ds["spec"]["template"]["spec"]["containers"][0]
        if comp == "kube-prometheus":
            # kube-prometheus' Prometheus (monitoring/prometheus-k8s) may list the agent's endpoints in its
            # namespace: the operator-generated scrape config discovers them there.
            ns = ds["metadata"]["namespace"]
            roles = [r for r in kinds.get("Role", []) if r["metadata"]["namespace"] == ns]
            grants = {(g, res, v) for r in roles for rule in r["rules"] for g in rule["apiGroups"]
                      for res in rule["resources"] for v in rule["verbs"]}
            bound = [b for b in kinds.get("RoleBinding", []) if b["metadata"]["namespace"] == ns
                     and b["roleRef"]["kind"] == "Role" and b["roleRef"]["name"] in {r["metadata"]["name"] for r in roles}
                     and {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"} in b["subjects"]]
            need = {("", res, v) for res in ("services", "endpoints", "pods") for v in ("get", "list", "watch")}
            check(need <= grants and bound and not any(v in ("create", "update", "patch", "delete", "*")
                                                        for _, _, v in grants),
                  f"{comp}: monitoring/prometheus-k8s may get/list/watch services, endpoints and pods in {ns}, "
                  f"read-only")
        elif comp == "kube-prometheus-stack":
            check(all(x["metadata"]["labels"].get("release") for k in ("ServiceMonitor", "PrometheusRule")
                      for x in kinds.get(k, [])) and kinds.get("ServiceMonitor") and kinds.get("PrometheusRule"),
                  f"{comp}: ServiceMonitor and PrometheusRule carry the chart's release label")
        elif comp == "plain-prometheus":
            ann = ds["spec"]["template"]["metadata"].get("annotations", {})
            check(not [x for x in docs if x["apiVersion"].startswith("monitoring.coreos.com/")]
                  and ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == "19100",
                  f"{comp}: no operator CRD objects, pods annotated for scraping on 19100")
        elif comp == "namespace":
            ns = [x for x in docs if x["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")]
            target = ds["metadata"]["namespace"]
            crb = [b for b in kinds["ClusterRoleBinding"] if b["roleRef"]["name"] == "sockpressure-exporter-kubelet"]
            sm = kinds["ServiceMonitor"][0]
            check(target != "sockpressure" and all(x["metadata"]["namespace"] == target for x in ns)
                  and crb[0]["subjects"][0]["namespace"] == target and sa_name == crb[0]["subjects"][0]["name"]
                  and "matchNames" not in sm["spec"].get("namespaceSelector", {})
                  and not kinds.get("Namespace"),
                  f"{comp}: everything in {target}, binding follows, ServiceMonitor finds its own namespace")
        elif comp == "tls":
            check(all(c[pr]["httpGet"]["scheme"] == "HTTPS" and c[pr]["httpGet"]["path"] == path
                      for pr, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")))
                  and "--web.config.file=/etc/sockpressure/web/web.yml" in c["args"]
                  and any(m["mountPath"] == "/etc/sockpressure/web" for m in c["volumeMounts"])
                  and kinds["ServiceMonitor"][0]["spec"]["endpoints"][0].get("scheme") == "https",
                  f"{comp}: web config mounted, probes and ServiceMonitor on HTTPS")
        elif comp == "kubelet-nodes-proxy":
            cr = [r for r in kinds["ClusterRole"] if r["metadata"]["name"] == "sockpressure-exporter-kubelet"][0]
            check({"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]} in cr["rules"],
                  f"{comp}: adds get nodes/proxy (opt-in, see its risk comment)")
        else:
            fail(f"component {comp} has no checks in test_deploy.py")
    # The plain-Prometheus scrape job: Debian's promtool is built without Kubernetes discovery
    # (it rejects kubernetes_sd_configs), so check its shape here.
    job = yaml.safe_load(open(os.path.join(ROOT, "deploy", "prometheus", "scrape-config.yaml")))[0]
    targets = [r.get("target_label") for r in job["relabel_configs"] if r.get("target_label")]
    check(job["kubernetes_sd_configs"] == [{"role": "pod"}] and targets == ["instance"]
          and not job.get("honor_labels"),
          "deploy/prometheus/scrape-config.yaml sets only instance (no namespace/pod/container target labels)")


def main():
    need("kubectl", "renders deploy/base with `kubectl kustomize`")
    need("node", "runs the kubernetes-models schema validation")
    need("yamllint", "Debian package yamllint")

    # --- render ----------------------------------------------------------------
    p = run(["kubectl", "kustomize", "deploy/base"])
    if p.returncode != 0:
        fail("kubectl kustomize deploy/base: " + p.stderr)
        return 1
    rendered = p.stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    print(f"rendered {len(docs)} objects: " + ", ".join(f"{k}x{len(v)}" for k, v in sorted(by_kind.items())))

    # --- schema validation -------------------------------------------------------
    if not os.path.isdir(os.path.join(HERE, "node_modules", "kubernetes-models")):
        need("npm", "installs kubernetes-models into tests/monitoring/node_modules")
        p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True, text=True)
        if p.returncode != 0:
            print("SKIP: npm ci failed (registry unreachable?):\n" + p.stderr[-2000:])
            return 77
    p = subprocess.run(["node", os.path.join(HERE, "validate-k8s.js")], input=rendered, capture_output=True,
                       text=True)
    print(p.stdout + p.stderr)
    check(p.returncode == 0, "every rendered object validates against its Kubernetes / CRD schema")

    # The validator must reject a broken object, or a green result means nothing.
    bad = rendered.replace("containerPort: 19100", 'containerPort: "19100"')
    p = subprocess.run(["node", os.path.join(HERE, "validate-k8s.js")], input=bad, capture_output=True, text=True)
    check(p.returncode != 0 and "containerPort must be integer" in p.stdout,
          "the validator rejects a string containerPort (sanity check of the validator)")

    # --- yamllint ------------------------------------------------------------------
    # Helm templates are not YAML until rendered (tests/monitoring/test_helm.py lints the output).
    files = sorted([f for f in glob.glob(os.path.join(ROOT, "deploy", "**", "*.yaml"), recursive=True)
                    if "/templates/" not in f]
                   + glob.glob(os.path.join(ROOT, "alerts", "*.yaml"))
                   + glob.glob(os.path.join(HERE, "*.yaml")))
    p = run(["yamllint", "-s", "-c", os.path.join(HERE, "yamllint.yaml")] + files)
    print(p.stdout + p.stderr)
    check(p.returncode == 0, f"yamllint (strict) on {len(files)} files")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(rendered)
        f.flush()
        # kustomize emits unindented sequences; only that style rule is relaxed.
        p = run(["yamllint", "-s", "-d", "{extends: default, rules: {line-length: disable, document-start: disable, "
                 "indentation: {indent-sequences: whatever}}}", f.name])
        print(p.stdout + p.stderr)
        check(p.returncode == 0, "yamllint (strict) on the rendered bundle")

    # --- PrometheusRule == alerts/ ------------------------------------------------
    rules = yaml.safe_load(open(os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")))
    prs = by_kind.get("PrometheusRule", [])
    check(len(prs) == 1 and prs[0]["spec"]["groups"] == rules["groups"],
          "the rendered PrometheusRule's groups equal alerts/sockpressure-rules.yaml exactly")

    # --- dashboards as ConfigMaps ---------------------------------------------------
    dash_files = sorted(glob.glob(os.path.join(ROOT, "dashboards", "*.json")))
    cms = [c for c in by_kind.get("ConfigMap", []) if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    check(len(dash_files) > 0 and len(cms) == len(dash_files),
          f"{len(cms)} dashboard ConfigMaps labelled grafana_dashboard=1 for {len(dash_files)} dashboards/*.json")
    for path in dash_files:
        name = os.path.basename(path)
        match = [c for c in cms if name in c.get("data", {})]
        check(len(match) == 1 and match[0]["data"][name] == open(path).read(),
              f"ConfigMap carries dashboards/{name} byte for byte")

    # --- DaemonSet -------------------------------------------------------------------
    ds = by_kind["DaemonSet"][0]
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    sc = c["securityContext"]
    check(spec.get("tolerations") == [{"operator": "Exists"}], "tolerates every taint")
    check(spec.get("hostPID") is True and spec.get("hostNetwork") is True, "hostPID and hostNetwork")
    # The token is for the kubelet's /pods (identity labels); RBAC grants nothing else.
    check(spec.get("automountServiceAccountToken") is True and
          {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in c.get("env", []),
          "service account token and NODE_IP=status.hostIP for the kubelet /pods client")
    check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
          and not sc.get("privileged"), "read-only root fs, no privilege escalation, not privileged")
    # No DAC_READ_SEARCH: cgroup ids are mapped to paths through st_ino, not open_by_handle_at().
    want_caps = {"BPF", "PERFMON", "SYS_RESOURCE", "SYS_ADMIN", "SYS_PTRACE", "SETPCAP"}
    check(sc["capabilities"].get("drop") == ["ALL"] and set(sc["capabilities"].get("add", [])) == want_caps,
          "drop ALL, then add exactly " + ",".join(sorted(want_caps)))
    # Each added capability must be justified by a comment right above it in the source.
    src = open(os.path.join(BASE, "daemonset.yaml")).read().splitlines()
    for cap in sc["capabilities"]["add"]:
        i = next((n for n, line in enumerate(src) if line.strip() == f"- {cap}"), None)
        check(i is not None and src[i - 1].strip().startswith("#"), f"capability {cap} has a comment saying why")
    check({"name": "metrics", "containerPort": 19100, "protocol": "TCP"} in c["ports"],
          "container port 19100 named metrics")
    for a in ("--web.listen-address=:19100", "--path.procfs=/host/proc"):
        check(a in c["args"], f"agent flag {a}")
    # The probes are served without basic auth, so they work with auth on; HTTPS with TLS on. Liveness
    # is /healthz (alive, also during a long first sample), readiness /readyz (a first sample is in).
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        check(c[probe]["httpGet"] == {"path": path, "port": "metrics", "scheme": "HTTP"},
              f"{probe} on {path}, scheme HTTP (the TLS component switches it)")
    check(spec.get("securityContext", {}).get("seccompProfile") == {"type": "RuntimeDefault"},
          "seccompProfile RuntimeDefault")
    # NODE_NAME is the instance label both alert paths use (ServiceMonitor relabeling and the
    # agent's direct push), so Alertmanager deduplicates them.
    check({"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c.get("env", []),
          "NODE_NAME=spec.nodeName for the pushed alerts' instance label")
    check(spec.get("nodeSelector", {}).get("kubernetes.io/os") == "linux", "nodeSelector kubernetes.io/os: linux")
    mu = ds["spec"].get("updateStrategy", {}).get("rollingUpdate", {}).get("maxUnavailable")
    check(isinstance(mu, str) and mu.endswith("%") and int(mu[:-1]) >= 5,
          f"maxUnavailable {mu!r} is a percentage (1 rolls a 1,000-node fleet one node at a time)")
    # A hostPath of type "" whose path is missing fails the pod; a node without BTF must fall back
    # to the non-eBPF tiers instead.
    for v in spec["volumes"]:
        if "hostPath" in v:
            check(v["hostPath"].get("type") == "Directory" and v["hostPath"]["path"] in ("/proc", "/sys",
                                                                                       "/sys/fs/cgroup"),
                  f"hostPath volume {v['name']} ({v['hostPath']['path']}) always exists on a Linux node")
    # system-node-critical outside kube-system needs a ResourceQuota for that class (GKE refuses
    # the pods otherwise).
    pc = spec.get("priorityClassName")
    if pc in ("system-node-critical", "system-cluster-critical") and ds["metadata"]["namespace"] != "kube-system":
        rq = [q for q in by_kind.get("ResourceQuota", []) if any(
            e.get("scopeName") == "PriorityClass" and pc in e.get("values", [])
            for e in q["spec"].get("scopeSelector", {}).get("matchExpressions", []))]
        check(len(rq) == 1, f"a ResourceQuota scoped to PriorityClass {pc} allows it outside kube-system")
    check(c["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"},
                             "limits": {"cpu": "500m", "memory": "256Mi"}}, "requests 50m/64Mi, limits 500m/256Mi")
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in spec["volumes"]}
    for path, host in (("/host/proc", "/proc"), ("/host/sys/fs/cgroup", "/sys/fs/cgroup")):
        m = mounts.get(path)
        check(m is not None and m.get("readOnly") is True and vols[m["name"]]["hostPath"]["path"] == host,
              f"host {host} mounted read-only at {path}")
    flags = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in c["args"] if "=" in a}
    for flag in ("--path.procfs", "--path.sysfs", "--path.cgroupfs"):
        check(flags.get(flag) in mounts or any(flags.get(flag, "").startswith(p + "/") for p in mounts)
              or flags.get(flag) in ("/host/sys",), f"{flag}={flags.get(flag)} points into a mounted host path")
    check(ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          "DaemonSet selector matches its pod labels")

    # --- Service / ServiceMonitor wiring --------------------------------------------
    svc = by_kind["Service"][0]
    sm = by_kind["ServiceMonitor"][0]
    check(svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          "Service selects the agent pods")
    check(any(p["name"] == "metrics" and p["targetPort"] == "metrics" for p in svc["spec"]["ports"]),
          "Service port metrics -> container port metrics")
    check(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
          and sm["spec"]["endpoints"][0]["port"] == "metrics", "ServiceMonitor selects the Service's metrics port")
    # Alerts key agent up/absent on job=<Service name> (prometheus-operator default).
    rules_text = open(os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")).read()
    check(f'up{{job="{svc["metadata"]["name"]}"}}' in rules_text, "agent alerts select job=<Service name>")
    # The job label must stay the Service name under any overlay, and the operator's target labels
    # must not collide with the agent's own namespace/pod/container (they became exported_*, and
    # every series carried the agent pod's own namespace and pod).
    ep = sm["spec"]["endpoints"][0]
    check(not ep.get("honorLabels"), "honorLabels off: it would stamp the agent's namespace/pod on node series")
    drops = [r for r in ep.get("relabelings", []) if r.get("action") == "labeldrop"]
    check(any(re.fullmatch(r.get("regex", ""), x) for r in drops for x in ("namespace", "pod", "container"))
          and all(any(re.fullmatch(r.get("regex", ""), x) for r in drops)
                  for x in ("namespace", "pod", "container", "service", "endpoint")),
          "ServiceMonitor relabelings drop the operator's namespace/pod/container/service/endpoint target labels")
    check("matchNames" not in sm["spec"].get("namespaceSelector", {}),
          "ServiceMonitor has no hard-coded namespaceSelector (its own namespace, whatever the overlay)")
    cr = [r for r in by_kind.get("ClusterRole", []) if r["metadata"]["name"] == "sockpressure-exporter-kubelet"]
    check(len(cr) == 1 and cr[0]["rules"] == [{"apiGroups": [""], "resources": ["nodes/pods"], "verbs": ["get"]}],
          "ClusterRole sockpressure-exporter-kubelet grants only get on nodes/pods (not nodes/proxy)")
    nps = by_kind.get("NetworkPolicy", [])
    check(len(nps) == 1 and nps[0]["spec"]["podSelector"]["matchLabels"].items()
          <= ds["spec"]["template"]["metadata"]["labels"].items()
          and nps[0]["spec"].get("policyTypes") == ["Ingress"]
          and len(nps[0]["spec"]["ingress"]) == 1
          and nps[0]["spec"]["ingress"][0]["ports"] == [{"port": "metrics", "protocol": "TCP"}]
          and all("podSelector" in f for f in nps[0]["spec"]["ingress"][0]["from"]),
          "a NetworkPolicy admits only the scraper's pods to the metrics port")
    crb = [b for b in by_kind.get("ClusterRoleBinding", []) if b["roleRef"]["name"] == "sockpressure-exporter-kubelet"]
    check(len(crb) == 1 and crb[0]["subjects"] == [{"kind": "ServiceAccount", "name": spec["serviceAccountName"],
                                                    "namespace": "sockpressure"}],
          "the ClusterRole is bound to the DaemonSet's service account")
    namespaced = [d for d in docs if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")]
    check(all(d["metadata"].get("namespace") == "sockpressure" for d in namespaced),
          "every namespaced object is in namespace sockpressure")

    # --- kustomize components -----------------------------------------------------------
    check_components(spec["serviceAccountName"])

    # --- systemd unit ----------------------------------------------------------------
    unit = os.path.join(ROOT, "deploy", "systemd", "sockpressure-exporter.service")
    if shutil.which("systemd-analyze"):
        with tempfile.TemporaryDirectory() as d:
            # verify/security want an existing executable; the syntax is what we check.
            text = open(unit).read().replace("/usr/local/bin/sockpressure_exporter", "/bin/true")
            tmp = os.path.join(d, "sockpressure-exporter.service")
            open(tmp, "w").write(text)
            p = run(["systemd-analyze", "security", "--offline=yes", tmp])
            out = p.stdout + p.stderr
            bad_lines = [line for line in out.splitlines() if "ignoring" in line or "Unknown" in line]
            m = re.search(r"Overall exposure level for \S+: ([\d.]+)", out)
            print(out.splitlines()[-1] if out else "")
            check(p.returncode == 0 and not bad_lines, "systemd unit: every directive known " + "; ".join(bad_lines))
            check(m is not None and float(m.group(1)) <= 4.0,
                  f"systemd unit exposure level {m.group(1) if m else '?'} <= 4.0 (systemd-analyze security)")
    else:
        print("note: systemd-analyze not found; systemd unit not verified")
        fail("systemd-analyze missing")
    text = open(unit).read()
    check("AmbientCapabilities=CAP_BPF CAP_PERFMON CAP_SYS_RESOURCE CAP_SYS_ADMIN CAP_SYS_PTRACE CAP_SETPCAP\n" in text
          and not re.search(r"^(Ambient|Bounding|CapabilityBoundingSet).*DAC_READ_SEARCH", text, re.M), "systemd unit grants the same capabilities as the DaemonSet")

    # --- Dockerfile --------------------------------------------------------------------
    stages = re.split(r"^FROM ", open(os.path.join(ROOT, "Dockerfile")).read(), flags=re.M)
    runtime = stages[-1].replace("\\\n", " ")
    check(re.search(r"apt-get install[^&]*\bca-certificates\b", runtime) is not None,
          "runtime stage installs ca-certificates (https Alertmanager with a public certificate)")
    # bpf/CMakeLists.txt compiles against sp_core.h, not the build host's BTF.
    check("BTF of the *build* host" not in stages[0], "Dockerfile does not claim the build host's BTF is used")

    return finish("deploy bundle OK")


if __name__ == "__main__":
    sys.exit(main())
