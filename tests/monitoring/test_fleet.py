#!/usr/bin/env python3
"""Fleet recording rules and the fleet dashboard against a real Prometheus scraping the real agent
(tests/sim/throttle_sim.py: throttled non-pod cgroup A, healthy B, throttled container C of pod
shop/frontend-7d9f) plus a stand-in for kube-state-metrics + kubernetes-mixin that serves the pod
owner series (namespace_workload_pod:kube_pod_owner:relabel: frontend-7d9f -> deployment frontend).

    test_fleet.py [path/to/sockpressure_exporter]

Asserts:
* per pod, workload, namespace and node the fleet rules record the throttled entities with the
  workload's labels, and nothing for non-pod cgroups in the pod/workload/namespace series;
* the per-node count is the number of cgroups under their *own* pressure (not inheritors);
* every fleet dashboard query (and variable) executes and returns data (clamp queries: executes;
  the simulated node has no clamp source), reading only the fleet
  series: the whole dashboard touches fewer series than there are throttled entities x a few.

Exit 77 when the agent is not built or prometheus is missing.
"""
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stack  # noqa: E402
from checks import check, fail, finish  # noqa: E402

sys.path.insert(0, os.path.join(stack.ROOT, "tests", "sim"))
import throttle_sim  # noqa: E402

OWNER = ('namespace_workload_pod:kube_pod_owner:relabel{namespace="shop",pod="frontend-7d9f",'
         'workload="frontend",workload_type="deployment"} 1\n'
         # A pod on no throttled cgroup must not appear in the workload series.
         'namespace_workload_pod:kube_pod_owner:relabel{namespace="shop",pod="idle-0",'
         'workload="idle",workload_type="statefulset"} 1\n')


def owner_server():
    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = OWNER.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", stack.free_port()), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main():
    agent = stack.find_agent(sys.argv[1] if len(sys.argv) > 1 else None)
    ksm = owner_server()
    # Recording windows compressed like the e2e test, so 25 s of samples fill them.
    rules = stack.compress_rules(open(stack.RULES).read(), 30)

    def scrape(target):
        return (f"  - job_name: {stack.JOB}\n    static_configs:\n      - targets: ['{target}']\n"
                f"  - job_name: kube-state-metrics\n    honor_labels: true\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{ksm.server_port}']\n")

    s = stack.Stack(agent, rules_text=rules, scrape_configs=scrape)
    if not s.has_pod_labels:
        stack.skip("this agent build has no --kubelet.pods-file: no pod labels to aggregate")
    s.wait_first_scrape()
    time.sleep(20)

    def q(expr):
        r = s.query(expr)
        if r.get("status") != "success":
            fail(f"{expr}: {r.get('error')}")
            return []
        return r["data"]["result"]

    pod = stack.wait_for(lambda: q("namespace_pod:sockpressure_socket_pressure:ratio_rate5m"), 30,
                         "the per-pod fleet series")
    check([(x["metric"].get("namespace"), x["metric"].get("pod")) for x in pod] == [("shop", "frontend-7d9f")]
          and float(pod[0]["value"][1]) > 0, f"per pod: only the throttled pod shop/frontend-7d9f ({pod})")
    wl = stack.wait_for(lambda: q("namespace_workload:sockpressure_socket_pressure:ratio_rate5m"), 30,
                        "the per-workload fleet series")
    check([{k: x["metric"].get(k) for k in ("namespace", "workload", "workload_type")} for x in wl]
          == [{"namespace": "shop", "workload": "frontend", "workload_type": "deployment"}]
          and abs(float(wl[0]["value"][1]) - float(pod[0]["value"][1])) < 0.2,
          f"per workload: the pod's owner deployment shop/frontend, not the idle statefulset ({wl})")
    ns = q("namespace:sockpressure_throttled_pods:count")
    check([(x["metric"].get("namespace"), x["value"][1]) for x in ns] == [("shop", "1")],
          f"per namespace: 1 throttled pod in shop ({ns})")
    own = q("count(cgroup:sockpressure_socket_pressure:ratio_rate5m > 0)")
    node = q("instance:sockpressure_throttled_cgroups:count")
    check(len(node) == 1 and own and node[0]["value"][1] == own[0]["value"][1]
          and int(node[0]["value"][1]) == len([throttle_sim.CONTAINER, "A"]),
          f"per node: the cgroups under their own pressure (A and C) ({node})")
    check(node and node[0]["metric"].get("instance") == s.instance and "namespace" not in node[0]["metric"],
          "per node: keyed by instance, no namespace")

    # The fleet dashboard: every query and variable returns data from the fleet series.
    d = json.load(open(os.path.join(stack.ROOT, "dashboards", "sockpressure-fleet.json")))
    exprs = [(p["title"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", v["query"]["query"])
            exprs.append((f"${v['name']}", f"count by ({m.group(2)}) ({m.group(1)})"))
    for title, e in exprs:
        e = e.replace("$cluster", ".*").replace("$namespace", ".*")
        res = q(e)
        if "tcp_window_clamps" in e:
            # Clamp counts need the eBPF or sock_diag tier, which the simulated node lacks: the
            # query must execute (q() fails on errors) but may be empty.
            print(f"ok   fleet dashboard / {title}: executes (clamps: no data without eBPF/sock_diag)")
        else:
            check(bool(res), f"fleet dashboard / {title}: returns data")
    n_fleet = q('count({__name__=~"namespace_pod:sockpressure.*|namespace_workload:sockpressure.*|'
                'namespace:sockpressure.*|instance:sockpressure.*"})')
    n_cgroup = q('count({__name__=~"sockpressure_memcg_.*"})')
    print(f"fleet series {n_fleet[0]['value'][1] if n_fleet else 0}, per-cgroup agent series "
          f"{n_cgroup[0]['value'][1] if n_cgroup else 0}")
    check(n_fleet and n_cgroup and int(n_fleet[0]["value"][1]) <= 8 < int(n_cgroup[0]["value"][1]),
          "the fleet dashboard reads a handful of series where the node has many per-cgroup ones")

    if s.dead():
        fail(f"processes died: {s.dead()}\n" + s.log("prometheus")[-2000:])
    ksm.shutdown()
    return finish("fleet rules and dashboard OK")


if __name__ == "__main__":
    sys.exit(main())
