#!/usr/bin/env python3
"""Workload labels survive prometheus-operator: the real agent (fed by tests/sim/throttle_sim.py,
whose pod list names container C as shop/frontend-7d9f/web) scraped by a real Prometheus whose
scrape config is what the operator generates for the shipped ServiceMonitor (operator_scrape.py:
the agent pod's namespace/service/pod/container/endpoint target labels, job from the Service,
then the ServiceMonitor's relabelings).

    test_operator_labels.py [path/to/sockpressure_exporter] [--servicemonitor FILE]

(--servicemonitor tests another ServiceMonitor manifest, e.g. an older one, instead of the one
`kubectl kustomize deploy/base` renders.)

Asserts:
* series of the pod's cgroup carry the workload's namespace/pod/container, not exported_*;
* no series carries the agent pod's own namespace or pod name (node-level series and non-pod
  cgroups carry no namespace/pod at all);
* job is the Service name and instance the node name, as the alerts and the agent's push expect;
* the dashboards' namespace/pod variables list the workload, not the agent;
* SockPressureTCPThrottled for the pod's cgroup has the workload labels and names the pod in its
  description.

Exit 77 when the agent, kubectl or prometheus is missing.
"""
import json
import os
import glob
import re
import shutil
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import operator_scrape  # noqa: E402
import stack  # noqa: E402
from checks import check, fail, finish  # noqa: E402

AGENT_POD = "sockpressure-exporter-x7k2p"
NODE = "node-a"



def main():
    args = sys.argv[1:]
    sm_file = None
    if "--servicemonitor" in args:
        i = args.index("--servicemonitor")
        sm_file = args[i + 1]
        del args[i:i + 2]
    agent = stack.find_agent(args[0] if args else None)
    if not shutil.which("kubectl"):
        stack.skip("kubectl not found (renders deploy/base with `kubectl kustomize`)")
    p = subprocess.run(["kubectl", "kustomize", os.path.join(stack.ROOT, "deploy", "base")],
                       capture_output=True, text=True)
    if p.returncode != 0:
        fail("kubectl kustomize deploy/base: " + p.stderr)
        return 1
    docs = [d for d in yaml.safe_load_all(p.stdout) if d]
    sm = next(d for d in docs if d["kind"] == "ServiceMonitor")
    if sm_file:
        sm = yaml.safe_load(open(sm_file))
        print(f"testing the ServiceMonitor from {sm_file}")
    svc = next(d for d in docs if d["kind"] == "Service")
    agent_ns = sm["metadata"]["namespace"]
    labels = operator_scrape.discovered_labels(sm, svc, AGENT_POD, NODE)

    rules = stack.compress_rules(open(stack.RULES).read(), 30)
    s = stack.Stack(agent, rules_text=rules,
                    scrape_configs=lambda target: operator_scrape.scrape_config(sm, target, labels))
    if not s.has_pod_labels:
        stack.skip("this agent build has no --kubelet.pods-file, so no workload labels to check")
    job = svc["metadata"]["name"]
    stack.wait_for(lambda: s.query(f'up{{job="{job}"}} == 1')["data"]["result"], 30,
                   f"a successful scrape with job={job}")
    up = s.query("up")["data"]["result"]
    print("target labels:", [r["metric"] for r in up])
    check(len(up) == 1 and up[0]["metric"] == {"__name__": "up", "job": job, "instance": NODE},
          f"the target is job={job}, instance={NODE}, with no other target label")

    import throttle_sim  # noqa: E402  (tests/sim, on the path via stack's caller below)
    sel = f'cgroup="{throttle_sim.CONTAINER_LABEL}"'
    res = stack.wait_for(lambda: s.query(f"sockpressure_memcg_socket_pressure_seconds_total{{{sel}}}")["data"]["result"],
                         30, "the pod cgroup's series")
    m = res[0]["metric"]
    print("pod cgroup series:", m)
    check(m.get("namespace") == "shop" and m.get("pod") == "frontend-7d9f" and m.get("container") == "web",
          "the pod's cgroup series carry the workload's namespace/pod/container")
    exported = s.query('count by (__name__) ({__name__=~"sockpressure_.*|cgroup:.*", '
                       'exported_namespace=~".+"} or {__name__=~"sockpressure_.*", exported_pod=~".+"} '
                       'or {__name__=~"sockpressure_.*", exported_container=~".+"})')["data"]["result"]
    check(not exported, f"no exported_* labels (found on {[r['metric'] for r in exported][:5]})")
    own = s.query(f'count by (__name__) ({{__name__=~".+", namespace="{agent_ns}"}} '
                  f'or {{__name__=~".+", pod="{AGENT_POD}"}})')["data"]["result"]
    check(not own, f"no series carries the agent pod's own namespace {agent_ns} or pod {AGENT_POD} "
                   f"(found on {[r['metric'].get('__name__') for r in own][:5]})")
    node = s.query("sockpressure_node_swap_enabled")["data"]["result"]
    check(len(node) == 1 and not {"namespace", "pod", "container", "service", "endpoint"} & set(node[0]["metric"]),
          f"node-level series carry no namespace/pod/container/service/endpoint ({node[0]['metric'] if node else None})")
    a = s.query(f'sockpressure_memcg_socket_pressure_seconds_total{{cgroup="/workload.slice/proxy.service"}}')
    a = a["data"]["result"]
    check(len(a) == 1 and "namespace" not in a[0]["metric"] and "pod" not in a[0]["metric"],
          "a non-pod cgroup's series carry no namespace/pod")

    # Dashboard variables: the namespace/pod pickers must offer the workload, not the agent.
    for path in sorted(glob.glob(os.path.join(stack.ROOT, "dashboards", "*.json"))):
        d = json.load(open(path))
        for v in d["templating"]["list"]:
            if v["type"] != "query" or v["name"] not in ("namespace", "pod"):
                continue
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            mm = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
            sel_expr = re.sub(r"\$\{?(\w+)\}?", ".*", mm.group(1)).replace('=".*"', '=~".*"')
            want = "shop" if v["name"] == "namespace" else "frontend-7d9f"

            def values():
                return {r["metric"].get(mm.group(2)) for r in
                        s.query(f"count by ({mm.group(2)}) ({sel_expr})")["data"]["result"]}
            # Variables over recording rules (the fleet dashboard's) fill after a rule evaluation.
            try:
                stack.wait_for(lambda: want in values(), 30, f"{want} in ${v['name']}")
            except TimeoutError:
                pass
            vals = values()
            bad = agent_ns if v["name"] == "namespace" else AGENT_POD
            check(want in vals and bad not in vals,
                  f"{os.path.basename(path)} ${v['name']} offers {want}, not {bad} ({sorted(x for x in vals if x)})")

    # The alert for the pod's cgroup, with its annotations as Prometheus templated them.
    def pod_alert():
        body = json.loads(stack.http_get(f"{s.prom}/api/v1/alerts"))
        return [x for x in body["data"]["alerts"] if x["labels"].get("alertname") == "SockPressureTCPThrottled"
                and x["labels"].get("cgroup") == throttle_sim.CONTAINER_LABEL]
    alerts = stack.wait_for(pod_alert, 60, "SockPressureTCPThrottled for the pod's cgroup (pending or firing)")
    lab, ann = alerts[0]["labels"], alerts[0]["annotations"]
    print("alert:", lab, ann.get("description"))
    check(lab.get("namespace") == "shop" and lab.get("pod") == "frontend-7d9f" and lab.get("container") == "web"
          and lab.get("instance") == NODE and lab.get("job") == job,
          "the alert carries the workload's namespace/pod/container and instance=<node>")
    check("(pod shop/frontend-7d9f)" in ann.get("description", "") and f" on {NODE} " in ann.get("description", ""),
          "the alert description names the workload's pod and the node")

    if s.dead():
        fail(f"processes died: {s.dead()}\n" + s.log("prometheus")[-2000:])
    return finish("workload labels survive the operator's scrape config")


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(stack.ROOT, "tests", "sim"))
    sys.exit(main())
