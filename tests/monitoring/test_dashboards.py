#!/usr/bin/env python3
"""Static dashboard conventions (the PromQL itself is executed by test_promql.py):
committed JSON == dashboards/generate.py output; stable, unique UIDs; the $datasource, $cluster,
$instance, $namespace, $pod, $cgroup variables; every panel and target on ${datasource}; every
range selector is [$__rate_interval]; every metric name is in the contract or a recording rule."""
import glob
import json
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402

ROOT = contract.ROOT
WANT_UIDS = {"sockpressure-overview.json": "sockpressure-overview", "sockpressure-cgroup.json": "sockpressure-cgroup",
             "sockpressure-agent.json": "sockpressure-agent"}
WANT_VARS = ["datasource", "cluster", "instance", "namespace", "pod", "cgroup"]
failures = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        failures.append(msg)


def main():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "dashboards", "generate.py"), "--check"],
                       capture_output=True, text=True)
    check(p.returncode == 0, "dashboards/*.json are what dashboards/generate.py renders" + p.stdout[-2000:])
    rules = yaml.safe_load(open(os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")))
    known = contract.metric_names() | {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r} \
        | {"up"}
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
        check(names == WANT_VARS, f"{name}: variables {names}")
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
                for sel in re.findall(r"(\w[\w:]*)\{([^}]*)\}", e):
                    if sel[0] != "up" and ('cluster=~"$cluster"' not in sel[1] or 'instance=~"$instance"' not in sel[1]):
                        check(False, f"{where}: selector {sel[0]}{{{sel[1]}}} ignores $cluster/$instance")
        print(f"     {name}: {len(panels)} panels, {n_expr} queries")
    check(len(set(uids)) == len(uids), "UIDs unique")
    print(f"\n{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
