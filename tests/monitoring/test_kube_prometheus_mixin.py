#!/usr/bin/env python3
"""The mixin through kube-prometheus' addMixin, the way a kube-prometheus user adds it
(kube_prometheus_addmixin.jsonnet: addMixin and the Grafana component's dashboard ConfigMaps,
written after kube-prometheus' interface; a `_config` override of the agent selector).

Rendered with the real jsonnet; asserts:
* the PrometheusRule (kube-prometheus' defaults: namespace monitoring, label prometheus=k8s)
  holds the groups of alerts/sockpressure-rules.yaml, alerts first as addMixin orders them,
  with every alert and recording rule of it by name;
* every rule and dashboard query carries the overridden selector in each agent selector, and
  nothing else differs from the committed alerts/ and dashboards/ than that selector;
* grafanaDashboards has the committed dashboards/ file names with their stable, unique uids, each
  in Grafana's dashboard shape (title, uid, schemaVersion, templating list, panels with gridPos,
  datasource and targets with unique refIds and an expr);
* each dashboard's ConfigMap (grafana-dashboard-<name>) holds the file name as its one key and,
  as jsonnet serialized it, the same dashboard.

Exit 77 (ctest SKIP) when jsonnet is missing.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MIXIN = os.path.join(ROOT, "mixin")
FIXTURE = os.path.join(HERE, "kube_prometheus_addmixin.jsonnet")
sys.path.insert(0, HERE)
import contract  # noqa: E402
from checks import check, fail, finish  # noqa: E402
from promql_selectors import parse_matchers, selectors  # noqa: E402
from test_selectors import grafana_expr, variable_expr  # noqa: E402

OVERRIDE = 'job="sp-kp", cluster="kp1"'      # the fixture's _config.agentSelector
DEFAULT = 'job="sockpressure-exporter"'      # config.libsonnet's, in the committed files


def dashboard_shape(name, d):
    """Grafana's dashboard model as provisioning reads it; [] when it holds."""
    bad = []
    for k, t in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list), ("templating", dict)):
        if not isinstance(d.get(k), t):
            bad.append(f"{k} is not a {t.__name__}")
    if bad:
        return bad
    if not isinstance(d["templating"].get("list"), list) or not all(
            isinstance(v, dict) and v.get("name") and v.get("type") for v in d["templating"]["list"]):
        bad.append("templating.list is not a list of named, typed variables")
    ids = [p.get("id") for p in d["panels"]]
    if len(ids) != len(set(ids)) or not all(isinstance(i, int) for i in ids):
        bad.append(f"panel ids not unique integers: {ids}")
    for p in d["panels"]:
        where = f"panel {p.get('title')!r}"
        gp = p.get("gridPos", {})
        if not all(isinstance(gp.get(k), int) for k in "xywh"):
            bad.append(f"{where}: gridPos {gp}")
        if p.get("type") == "row":
            continue
        if not p.get("type") or not p.get("datasource"):
            bad.append(f"{where}: no type or datasource")
        ts = p.get("targets")
        if not isinstance(ts, list) or not ts:
            bad.append(f"{where}: no targets")
            continue
        refs = [t.get("refId") for t in ts]
        if len(set(refs)) != len(refs) or not all(isinstance(t.get("expr"), str) and t["expr"] for t in ts):
            bad.append(f"{where}: targets without unique refIds or expr: {refs}")
    return bad


def main():
    if not shutil.which("jsonnet"):
        print("SKIP: jsonnet not installed (Debian package jsonnet)")
        return 77
    t0 = time.monotonic()
    p = subprocess.run(["jsonnet", "-J", MIXIN, FIXTURE], capture_output=True, text=True)
    check(p.returncode == 0, f"jsonnet renders {os.path.relpath(FIXTURE, ROOT)} ({time.monotonic() - t0:.1f} s) "
          + p.stderr[-1500:])
    if p.returncode != 0:
        return finish("")
    out = json.loads(p.stdout)
    want = parse_matchers(OVERRIDE)

    # --- the PrometheusRule ------------------------------------------------------------------
    committed = yaml.safe_load(open(os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")))
    pr = out["prometheusRule"]
    check(pr["apiVersion"] == "monitoring.coreos.com/v1" and pr["kind"] == "PrometheusRule"
          and pr["metadata"] == {"name": "sockpressure", "namespace": "monitoring", "labels": {"prometheus": "k8s"}},
          f"a PrometheusRule with kube-prometheus' defaults ({pr['metadata']})")
    groups = pr["spec"]["groups"]
    names = [g["name"] for g in groups]
    alerts_first = sorted(committed["groups"], key=lambda g: not g["name"].endswith(".alerts"))
    check(names == [g["name"] for g in alerts_first], f"its groups are alerts/'s, alerts first: {names}")

    def rule_names(gs, key):
        return sorted(r[key] for g in gs for r in g["rules"] if key in r)

    for key in ("alert", "record"):
        got, exp = rule_names(groups, key), rule_names(committed["groups"], key)
        check(got == exp and got, f"every {key} of alerts/ and no other ({len(got)}): "
              + ("" if got == exp else f"missing {sorted(set(exp) - set(got))}, extra {sorted(set(got) - set(exp))}"))
    rendered_text = json.dumps(alerts_first, sort_keys=True).replace(DEFAULT.replace('"', '\\"'),
                                                                      OVERRIDE.replace('"', '\\"'))
    check(json.dumps(groups, sort_keys=True) == rendered_text,
          f"the rules differ from alerts/ only by the selector ({DEFAULT} -> {OVERRIDE})")

    # --- dashboards --------------------------------------------------------------------------
    dash = out["grafanaDashboards"]
    files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(ROOT, "dashboards", "*.json")))
    check(sorted(dash) == files, f"grafanaDashboards has the dashboards/ file names: {sorted(dash)}")
    uids = [d.get("uid") for d in dash.values()]
    check(len(set(uids)) == len(uids), f"dashboard uids unique: {uids}")
    for name in files:
        if name not in dash:
            continue
        d = dash[name]
        c = json.load(open(os.path.join(ROOT, "dashboards", name)))
        check(d.get("uid") == c["uid"], f"{name}: uid {d.get('uid')} is the committed one (links and bookmarks keep working)")
        bad = dashboard_shape(name, d)
        check(not bad, f"{name}: Grafana dashboard shape ({len(d.get('panels', []))} panels)" + "; ".join(bad))
        check(json.dumps(d, sort_keys=True) == json.dumps(c, sort_keys=True).replace(
            DEFAULT.replace('"', '\\"'), OVERRIDE.replace('"', '\\"')),
            f"{name}: differs from dashboards/{name} only by the selector")

    # --- the overridden selector in every query ----------------------------------------------
    records = set(rule_names(groups, "record"))
    foreign = set(contract.EXTERNAL)
    queries = [(f"rule {r.get('alert') or r.get('record')}", r["expr"]) for g in groups for r in g["rules"]]
    for name, d in sorted(dash.items()):
        queries += [(f"{name} / {p['title']} / {t['refId']}", grafana_expr(t["expr"]))
                    for p in d["panels"] for t in p.get("targets", [])]
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                e = variable_expr(v["query"]["query"] if isinstance(v["query"], dict) else v["query"])
                if e is None:
                    fail(f"{name} / ${v['name']}: unsupported variable query")
                else:
                    queries.append((f"{name} / ${v['name']}", grafana_expr(e)))
    n = 0
    for where, e in queries:
        for s in selectors(e):
            if s.name in foreign:
                continue
            n += 1
            missing = [f'{k}{op}"{v}"' for k, op, v in want if (k, op, v) not in s.matchers]
            if missing:
                fail(f"{where}: selector {s.text} lacks {', '.join(missing)}")
    check(n > 100, f"{n} agent selectors in {len(queries)} rule and dashboard queries carry {OVERRIDE}")

    # --- the Grafana component's ConfigMaps ----------------------------------------------------
    items = out["grafanaDashboardDefinitions"]["items"]
    by_name = {i["metadata"]["name"]: i for i in items}
    for name in sorted(dash):
        cm = by_name.get("grafana-dashboard-" + name[:-len(".json")])
        ok = cm is not None and list(cm["data"]) == [name]
        if ok:
            try:
                ok = json.loads(cm["data"][name]) == dash[name]
            except ValueError as e:
                ok = False
                print(f"     {name}: {e}")
        check(ok, f"ConfigMap grafana-dashboard-{name[:-5]} holds {name} as valid JSON, the same dashboard")
    return finish("the mixin through kube-prometheus' addMixin OK")


if __name__ == "__main__":
    sys.exit(main())
