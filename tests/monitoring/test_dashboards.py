#!/usr/bin/env python3
"""Static dashboard conventions (the PromQL itself is executed by test_promql.py):
(committed JSON == mixin output is monitoring.mixin's job); stable, unique UIDs; the $datasource, $cluster,
$instance, $namespace, $pod, $cgroup variables; every panel and target on ${datasource}; every
range selector is [$__rate_interval]; every metric name is in the contract or a recording rule."""
import glob
import json
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402

ROOT = contract.ROOT
WANT_UIDS = {"sockpressure-overview.json": "sockpressure-overview", "sockpressure-cgroup.json": "sockpressure-cgroup",
             "sockpressure-agent.json": "sockpressure-agent", "sockpressure-fleet.json": "sockpressure-fleet"}
WANT_VARS = ["datasource", "cluster", "instance", "namespace", "pod", "cgroup"]
# The fleet dashboard spans nodes: no $instance/$pod/$cgroup, and it must read only the fleet
# recording rules (a few series per throttled pod/workload/node), never per-cgroup series.
FLEET = "sockpressure-fleet.json"
FLEET_VARS = ["datasource", "cluster", "namespace"]
failures = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        failures.append(msg)


def main():
    rules = yaml.safe_load(open(os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")))
    known = contract.metric_names() | {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r} \
        | {"up"} | set(contract.EXTERNAL)
    fleet_records = {r["record"] for g in rules["groups"] if g["name"] == "sockpressure.fleet.rules"
                     for r in g["rules"]}
    context = contract.context_metric_names()
    check(bool(context), "docs/metrics.md marks the context-profile metrics")
    files = sorted(glob.glob(os.path.join(ROOT, "dashboards", "*.json")))
    check(sorted(os.path.basename(f) for f in files) == sorted(WANT_UIDS), f"dashboards present: {sorted(WANT_UIDS)}")
    uids = []
    for path in files:
        name = os.path.basename(path)
        d = json.load(open(path))
        uids.append(d["uid"])
        check(d["uid"] == WANT_UIDS.get(name), f"{name}: stable uid {d['uid']}")
        check(d.get("id") is None, f"{name}: no instance-specific numeric id")
        names = [v["name"] for v in d["templating"]["list"]]
        check(names == (FLEET_VARS if name == FLEET else WANT_VARS), f"{name}: variables {names}")
        ds = d["templating"]["list"][0]
        check(ds["type"] == "datasource" and ds["query"] == "prometheus", f"{name}: $datasource is a Prometheus picker")
        n_expr = 0
        panels = [p for p in d["panels"] if p["type"] != "row"]
        ids = [p["id"] for p in d["panels"]]
        check(len(ids) == len(set(ids)), f"{name}: unique panel ids")
        for p in panels:
            where = f"{name} / {p['title']}"
            if p.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
                check(False, f"{where}: panel datasource is not ${{datasource}}")
            for t in p["targets"]:
                n_expr += 1
                e = t["expr"]
                if t.get("datasource", {}).get("uid") != "${datasource}":
                    check(False, f"{where}: target datasource is not ${{datasource}}")
                for rng in re.findall(r"\[([^\]]*)\]", e):
                    if rng != "$__rate_interval":
                        check(False, f"{where}: range [{rng}] instead of [$__rate_interval]")
                for m in contract.metric_names_in_expr(e):
                    if m not in known:
                        check(False, f"{where}: metric {m} is not in docs/metrics.md")
                    # A series off by default only in a panel that says it needs it.
                    if m in context and "--metrics.profile=context" not in p["title"] + p.get("description", ""):
                        check(False, f"{where}: metric {m} needs --metrics.profile=context and the panel does not say so")
                for v in d["templating"]["list"]:
                    q = v.get("definition", "")
                    for m in contract.metric_names_in_expr(q.replace("label_values(", "(")) if q else ():
                        if m in context:
                            check(False, f"{name} variable {v['name']}: {m} needs --metrics.profile=context")
                for sel in re.findall(r"(\w[\w:]*)\{([^}]*)\}", e):
                    need = ['cluster=~"$cluster"'] + ([] if name == FLEET else ['instance=~"$instance"'])
                    if sel[0] != "up" and not all(n in sel[1] for n in need):
                        check(False, f"{where}: selector {sel[0]}{{{sel[1]}}} ignores {need}")
                if name == FLEET:
                    heavy = [m for m in contract.metric_names_in_expr(e)
                             if m != "sockpressure_build_info" and m not in fleet_records]
                    check(not heavy, f"{where}: reads only fleet recording rules (not {heavy})")
        print(f"     {name}: {len(panels)} panels, {n_expr} queries")
        # Units: "pps" is Grafana's packets/s (pages are not packets), and one axis must not mix
        # bytes with counts (a failcnt or OOM-kill count drawn against a GiB axis reads as 0).
        for p in panels:
            unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
            check(unit != "pps", f"{name} / {p['title']}: unit pps (packets/s) for pages")
            if p["type"] != "timeseries":
                continue
            overridden = {m["matcher"]["options"] for m in p["fieldConfig"].get("overrides", [])
                          if m.get("matcher", {}).get("id") == "byFrameRefID"
                          and any(x["id"] == "unit" for x in m.get("properties", []))}
            kinds = set()
            for t in p["targets"]:
                if t["refId"] in overridden:
                    continue
                ms = contract.metric_names_in_expr(t["expr"])
                kinds.add("bytes" if ms and all(m.endswith("_bytes") for m in ms) else "other")
            check(len(kinds) <= 1 and (unit == "bytes") == (kinds == {"bytes"}),
                  f"{name} / {p['title']}: one kind of quantity per axis (unit {unit}, targets {sorted(kinds)})")
    # The cgroup dashboard is about one cgroup: $cgroup is a single value, never All.
    cg = json.load(open(os.path.join(ROOT, "dashboards", "sockpressure-cgroup.json")))
    v = next(v for v in cg["templating"]["list"] if v["name"] == "cgroup")
    check(not v["includeAll"] and not v["multi"] and v.get("current", {}).get("value") != ["$__all"],
          "sockpressure-cgroup.json: $cgroup is single-valued without All")
    # sockpressure_memcg_socket_pressure_active is 1 for every descendant of a cgroup under
    # pressure (they inherit it): counting it counts a whole subtree for one cgroup.
    ov = json.load(open(os.path.join(ROOT, "dashboards", "sockpressure-overview.json")))
    st = next(p for p in ov["panels"] if p["title"].startswith("Cgroups under socket pressure"))
    check(all("socket_pressure_active" not in t["expr"] for t in st["targets"]),
          "overview: 'cgroups under socket pressure' counts cgroups whose own deadline is live, not inheritors")
    check(len(set(uids)) == len(uids), "UIDs unique")
    print(f"\n{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
