#!/usr/bin/env python3
"""The Helm chart (deploy/helm/sockpressure-exporter) with a real helm 3.17 (scripts/get-helm.sh):
`helm lint --strict` and `helm template` on every value set in its ci/ (defaults,
kube-prometheus-stack `release` label, TLS, another namespace), plus another release namespace;
every rendered object validates offline (validate-k8s.js); the DaemonSet's posture equals
deploy/base's (or base + the tls component), so the two cannot drift; the PrometheusRule and
dashboards are the mixin's.

Exit 77 (ctest SKIP) with the reason when helm cannot be had, or kubectl/node is missing.
"""
import copy
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "deploy", "helm", "sockpressure-exporter")
sys.path.insert(0, HERE)
from checks import check, fail, finish  # noqa: E402


def kinds(text):
    out = {}
    for d in yaml.safe_load_all(text):
        if d:
            out.setdefault(d["kind"], []).append(d)
    return out


def kustomize(component=None):
    with tempfile.TemporaryDirectory() as d:
        rel = lambda p: os.path.relpath(os.path.join(ROOT, "deploy", p), d)  # noqa: E731
        comps = f"components:\n  - {rel('components/' + component)}\n" if component else ""
        open(os.path.join(d, "kustomization.yaml"), "w").write(f"resources:\n  - {rel('base')}\n{comps}")
        return subprocess.run(["kubectl", "kustomize", d], capture_output=True, text=True, check=True).stdout


def posture(ds):
    """Everything of the DaemonSet that is its security and wiring, not its names or labels."""
    spec = copy.deepcopy(ds["spec"]["template"]["spec"])
    spec.pop("serviceAccountName")
    for c in spec["containers"]:
        c.pop("image")
    return {"updateStrategy": ds["spec"].get("updateStrategy"), "pod": spec}


def main():
    for tool, why in (("kubectl", "renders deploy/base for the comparison"), ("node", "schema validation")):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not found ({why})")
            return 77
    p = subprocess.run([os.path.join(ROOT, "scripts", "get-helm.sh")], capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr.strip() or "SKIP: helm cannot be had")
        return 77 if p.returncode == 77 else 1
    helm = p.stdout.strip()
    if not os.path.isdir(os.path.join(HERE, "node_modules", "kubernetes-models")):
        q = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True, text=True)
        if q.returncode != 0:
            print("SKIP: npm ci failed (registry unreachable?):\n" + q.stderr[-2000:])
            return 77

    base = kinds(kustomize())
    base_tls = kinds(kustomize("tls"))
    rules = yaml.safe_load(open(os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")))["groups"]
    dashboards = {os.path.basename(f): open(f).read() for f in glob.glob(os.path.join(ROOT, "dashboards", "*.json"))}
    app_version = yaml.safe_load(open(os.path.join(CHART, "Chart.yaml")))["appVersion"]

    sets = [(os.path.basename(f)[:-len("-values.yaml")], f, "sockpressure")
            for f in sorted(glob.glob(os.path.join(CHART, "ci", "*-values.yaml")))]
    sets.append(("release-namespace", os.path.join(CHART, "ci", "default-values.yaml"), "monitoring"))
    check({"default", "kube-prometheus-stack", "tls", "namespace"} <= {s[0] for s in sets},
          f"value sets {[s[0] for s in sets]}")
    for name, values, ns in sets:
        p = subprocess.run([helm, "lint", "--strict", CHART, "-f", values, "-n", ns], capture_output=True, text=True)
        check(p.returncode == 0, f"{name}: helm lint --strict" + ("" if p.returncode == 0 else "\n" + p.stdout + p.stderr))
        p = subprocess.run([helm, "template", "sockpressure-exporter", CHART, "-f", values, "-n", ns],
                           capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"{name}: helm template: {p.stderr}")
            continue
        v = subprocess.run(["node", os.path.join(HERE, "validate-k8s.js")], input=p.stdout, capture_output=True,
                           text=True)
        check(v.returncode == 0, f"{name}: every rendered object validates offline"
              + ("" if v.returncode == 0 else "\n" + v.stdout[-1500:]))
        k = kinds(p.stdout)
        vals = yaml.safe_load(open(values)) or {}
        want_ns = vals.get("namespaceOverride") or ns
        ds = k["DaemonSet"][0]
        ref = base_tls if vals.get("tls", {}).get("enabled") else base
        check(posture(ds) == posture(ref["DaemonSet"][0]),
              f"{name}: DaemonSet posture equals deploy/base{' + tls' if ref is base_tls else ''}")
        check(ds["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":" + app_version),
              f"{name}: image tag is the chart's appVersion {app_version}")
        namespaced = [d for ds_ in k.values() for d in ds_ if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
        check(all(d["metadata"]["namespace"] == want_ns for d in namespaced), f"{name}: everything in {want_ns}")
        crb = k["ClusterRoleBinding"][0]
        check(crb["subjects"] == [{"kind": "ServiceAccount", "name": ds["spec"]["template"]["spec"]["serviceAccountName"],
                                   "namespace": want_ns}], f"{name}: the kubelet ClusterRole is bound to the agent's SA")
        svc, sm, pr = k["Service"][0], k["ServiceMonitor"][0], k["PrometheusRule"][0]
        pod_labels = ds["spec"]["template"]["metadata"]["labels"]
        check(svc["spec"]["selector"].items() <= pod_labels.items()
              and sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
              f"{name}: Service selects the pods, ServiceMonitor the Service")
        job = svc["metadata"]["labels"].get(sm["spec"].get("jobLabel", ""), svc["metadata"]["name"])
        check(f'up{{job="{job}"}}' in json.dumps(rules).replace('\\"', '"'),
              f"{name}: job label {job!r} is what the mixin's agentSelector expects")
        ep, bep = sm["spec"]["endpoints"][0], ref["ServiceMonitor"][0]["spec"]["endpoints"][0]
        check(ep["relabelings"] == bep["relabelings"] and not ep.get("honorLabels")
              and ep.get("scheme", "http") == bep.get("scheme", "http"),
              f"{name}: ServiceMonitor relabelings and scheme equal deploy/base's")
        for obj, key in ((sm, "serviceMonitor"), (pr, "prometheusRule")):
            extra = vals.get(key, {}).get("additionalLabels", {})
            check(extra.items() <= obj["metadata"]["labels"].items(), f"{name}: {obj['kind']} carries {extra}")
        check(pr["spec"]["groups"] == rules, f"{name}: PrometheusRule groups equal alerts/sockpressure-rules.yaml")
        cms = {f: c["data"][f] for c in k.get("ConfigMap", []) for f in c["data"]
               if c["metadata"]["labels"].get("grafana_dashboard") == "1"}
        check(cms == dashboards, f"{name}: {len(cms)} dashboard ConfigMaps carry dashboards/*.json byte for byte")

    # The comparison must bite: a changed posture value is seen.
    p = subprocess.run([helm, "template", "x", CHART, "--set", "hostPID=false"], capture_output=True, text=True)
    check(p.returncode == 0 and posture(kinds(p.stdout)["DaemonSet"][0]) != posture(base["DaemonSet"][0]),
          "posture comparison sees --set hostPID=false (sanity check of the test)")
    return finish("helm chart OK")


if __name__ == "__main__":
    sys.exit(main())
