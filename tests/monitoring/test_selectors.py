#!/usr/bin/env python3
"""The mixin's agent selector reaches every query (node-mixin style), so several agents or
clusters in one Prometheus do not mix.

The mixin is rendered with a selector no default contains (SELECTOR below), then:
* promtool parses every expression: the rule file as rendered (`promtool check rules`), and every
  dashboard target, template variable and alert-annotation query, each wrapped into a rule of a
  throwaway file (Grafana's $__rate_interval, $cluster... substituted with valid values);
* every vector selector of an agent series (sockpressure_*, the mixin's recorded series, `up`) in
  each of them carries every matcher of SELECTOR; a series that is neither the agent's nor a
  known foreign one (kube-state-metrics' pod owner, contract.EXTERNAL) fails, so a new join has
  to be classified here rather than slip past the check;
* every aggregating recording rule keeps the selector's labels (`by` lists them, `without`
  spares them), so rules and dashboards on recorded series can select by it too;
* `promtool test rules` on the rendered rules: series of the selected agent are recorded and
  alert with their selector labels kept through the fleet aggregates; the same series from
  another job or another cluster in the same Prometheus are not recorded and do not alert;
* agentSelectorLabels (the labels kept) is derived from agentSelector, quoted commas included.

Exit 77 (ctest SKIP) when jsonnet or promtool is missing.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MIXIN = os.path.join(ROOT, "mixin")
sys.path.insert(0, HERE)
import contract  # noqa: E402
from checks import check, fail, finish  # noqa: E402
from promql_selectors import LexError, aggregations, parse_matchers, selectors  # noqa: E402

# Two matchers, one of them on the cluster label the dashboards also filter on: both must reach
# every selector, not only the first or only the one the mixin already writes.
SELECTOR = 'job="sp-test",cluster="c9"'

# Grafana's variables as Prometheus would see them after Grafana interpolated them.
GRAFANA_VARS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}


def render(selector):
    prog = """
    local m = (import 'mixin.libsonnet') + { _config+:: { agentSelector: std.extVar('sel') } };
    { alerts: m.prometheusAlerts, rules: m.prometheusRules, dashboards: m.grafanaDashboards,
      config: m._config }
    """
    p = subprocess.run(["jsonnet", "-J", MIXIN, "--ext-str", f"sel={selector}", "-e", prog],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return json.loads(p.stdout)


def grafana_expr(expr):
    """The PromQL a dashboard query sends once Grafana filled in its variables."""
    e = re.sub(r"\$\{?(__\w+)\}?", lambda m: GRAFANA_VARS.get(m.group(1), m.group(0)), expr)
    # Template variables stand inside matcher strings (=~"$cluster"); All is ".*".
    return re.sub(r"\$\{?(\w+)(?::\w+)?\}?", ".*", e)


def variable_expr(query):
    """A template variable's query as PromQL: label_values(sel, label) is the series API over sel;
    query_result(expr) is expr."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query, re.S)
    if m:
        return f"count by ({m.group(2)}) ({m.group(1)})"
    m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
    if m:
        return m.group(1)
    return None


def annotation_queries(text):
    """The PromQL strings an alert annotation hands to Go's `query` (directly or via printf)."""
    string = r"(`[^`]*`|\"(?:\\.|[^\"\\])*\")"
    out = []
    # `printf FMT args... | query` (a printf not piped to query formats text, not PromQL) and
    # `query STRING`.
    for m in re.finditer(r"\bprintf\s+" + string + r"(?:\s+\$[\w.]*)*\s*\|\s*query\b|\bquery\s+" + string, text):
        s = m.group(1) or m.group(2)
        s = s[1:-1] if s[0] == "`" else re.sub(r"\\(.)", r"\1", s[1:-1])
        if m.group(1):
            s = s.replace("%q", '"v"').replace("%%", "%")
        out.append(s)
    return out


def collect(out):
    """[(where, expr, kind)] for every expression of the rendered mixin."""
    exprs = []
    for key, src in (("rules", "mixin/rules.libsonnet"), ("alerts", "mixin/alerts.libsonnet")):
        for g in out[key]["groups"]:
            for r in g["rules"]:
                name = r.get("record") or r.get("alert")
                exprs.append((f"{src} / {g['name']} / {name}", r["expr"], key))
                for a, text in sorted(r.get("annotations", {}).items()):
                    for i, q in enumerate(annotation_queries(text)):
                        exprs.append((f"{src} / {name} / annotation {a} query {i + 1}", q, "annotation"))

    def walk(panels):
        for p in panels:
            yield p
            yield from walk(p.get("panels", []))

    for fname, d in sorted(out["dashboards"].items()):
        src = f"dashboards/{fname} (mixin/dashboards.libsonnet)"
        for p in walk(d["panels"]):
            for t in p.get("targets", []):
                exprs.append((f"{src} / panel {p['title']!r} / target {t['refId']}", grafana_expr(t["expr"]),
                              "dashboard"))
        for v in d["templating"]["list"]:
            if v["type"] != "query":
                continue
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            e = variable_expr(q)
            if e is None:
                fail(f"{src} / variable ${v['name']}: query {q!r} is neither label_values() nor query_result()")
                continue
            exprs.append((f"{src} / variable ${v['name']}", grafana_expr(e), "dashboard"))
    return exprs


def promtool_parse(tmp, out, exprs):
    """promtool check rules on the rendered rules and on every other expression wrapped in a rule
    (one group per expression, named after where it comes from, so an error names it)."""
    rules = os.path.join(tmp, "rendered.yaml")
    with open(rules, "w") as f:
        yaml.safe_dump({"groups": out["rules"]["groups"] + out["alerts"]["groups"]}, f, sort_keys=False)
    wrapped = os.path.join(tmp, "wrapped.yaml")
    others = [(w, e) for w, e, kind in exprs if kind in ("dashboard", "annotation")]
    with open(wrapped, "w") as f:
        yaml.safe_dump({"groups": [{"name": w, "rules": [{"record": "sp:expression_check", "expr": e}]}
                                   for w, e in others]}, f, sort_keys=False, width=1000)
    for path, what in ((rules, "the rendered rule file"), (wrapped, f"{len(others)} dashboard and annotation queries")):
        p = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
        check(p.returncode == 0, f"promtool parses {what}" + ("" if p.returncode == 0 else
                                                               "\n" + (p.stdout + p.stderr)[-3000:]))
    return rules


def check_selectors(exprs, want, records, foreign):
    agent_sel = foreign_sel = 0
    for where, expr, kind in exprs:
        try:
            sels = selectors(expr)
        except LexError as e:
            fail(f"{where}: cannot lex {expr!r}: {e}")
            continue
        if kind in ("rules", "alerts") and not sels:
            fail(f"{where}: no selector found in {expr!r} (lexer blind to it?)")
        for s in sels:
            name = s.name or next((v for n, op, v in s.matchers if n == "__name__" and op == "="), "")
            if name in foreign:
                foreign_sel += 1
                continue
            if not (name == "up" or name in records or name.startswith("sockpressure_")):
                fail(f"{where}: selector {s.text} is neither the agent's series nor a known foreign one "
                     "(classify it in test_selectors.py)")
                continue
            agent_sel += 1
            missing = [f"{n}{op}\"{v}\"" for n, op, v in want if (n, op, v) not in s.matchers]
            if missing:
                fail(f"{where}: selector {s.text} lacks {', '.join(missing)}")
    return agent_sel, foreign_sel


def check_kept_labels(out, labels, records, foreign):
    """Every aggregation over agent series in a recording rule keeps the selector's labels, so
    what it records can be selected like the raw series. Aggregations over foreign series only
    (the pod owner side of a join) are theirs to group as they like."""
    n = 0
    for g in out["rules"]["groups"]:
        for r in g["rules"]:
            for a in aggregations(r["expr"]):
                names = {s.name for s in selectors(a.argument)}
                if a.op in ("topk", "bottomk", "limitk", "limit_ratio") or not names - foreign:
                    continue
                n += 1
                where = f"mixin/rules.libsonnet / {r['record']}: `{a.op} {a.grouping} ({', '.join(a.labels)})`"
                if a.grouping == "by" and not labels <= set(a.labels):
                    fail(f"{where} drops the selector's {sorted(labels - set(a.labels))}, so {r['record']} "
                         "cannot be selected by it")
                elif a.grouping == "without" and labels & set(a.labels):
                    fail(f"{where} drops the selector's {sorted(labels & set(a.labels))}")
                elif not a.grouping:
                    fail(f"{where} drops every label, the selector's {sorted(labels)} too")
    return n


UNIT_TEST = """
rule_files: [rendered.yaml]
evaluation_interval: 1m
tests:
  - name: only the selected agent's series are recorded and alert, its labels kept
    interval: 1m
    input_series:
      # 30 s of socket pressure per minute (ratio 0.5), 1 clamp/s: the selected agent.
      - series: 'sockpressure_memcg_socket_pressure_seconds_total{%(sel)s,instance="n1",cgroup="/kubepods/pod-a",namespace="shop",pod="web-0"}'
        values: '0+30x20'
      - series: 'sockpressure_tcp_window_clamps_total{%(sel)s,instance="n1",cgroup="/kubepods/pod-a",namespace="shop",pod="web-0"}'
        values: '0+60x20'
      # The same cgroup from another agent job in the same cluster, and from this job in another
      # cluster (a global view): neither is this mixin's, neither may be recorded or alert.
      - series: 'sockpressure_memcg_socket_pressure_seconds_total{job="other-agent",cluster="c9",instance="n1",cgroup="/kubepods/pod-a",namespace="shop",pod="web-0"}'
        values: '0+60x20'
      - series: 'sockpressure_tcp_window_clamps_total{job="other-agent",cluster="c9",instance="n1",cgroup="/kubepods/pod-a",namespace="shop",pod="web-0"}'
        values: '0+600x20'
      - series: 'sockpressure_memcg_socket_pressure_seconds_total{job="sp-test",cluster="c8",instance="n1",cgroup="/kubepods/pod-a",namespace="shop",pod="web-0"}'
        values: '0+60x20'
      # kube-state-metrics' owner (via kubernetes-mixin): not the agent's, no agent job.
      - series: 'namespace_workload_pod:kube_pod_owner:relabel{cluster="c9",namespace="shop",pod="web-0",workload="web",workload_type="statefulset"}'
        values: '1x20'
    promql_expr_test:
      - expr: cgroup:sockpressure_socket_pressure:ratio_rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'cgroup:sockpressure_socket_pressure:ratio_rate5m{%(sel)s,instance="n1",cgroup="/kubepods/pod-a",namespace="shop",pod="web-0"}'
            value: 0.5
      - expr: namespace_pod:sockpressure_socket_pressure:ratio_rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'namespace_pod:sockpressure_socket_pressure:ratio_rate5m{%(sel)s,namespace="shop",pod="web-0"}'
            value: 0.5
      - expr: namespace_pod:sockpressure_tcp_window_clamps:rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'namespace_pod:sockpressure_tcp_window_clamps:rate5m{%(sel)s,namespace="shop",pod="web-0"}'
            value: 1
      - expr: namespace_workload:sockpressure_socket_pressure:ratio_rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'namespace_workload:sockpressure_socket_pressure:ratio_rate5m{%(sel)s,namespace="shop",workload="web",workload_type="statefulset"}'
            value: 0.5
      - expr: namespace_workload:sockpressure_tcp_window_clamps:rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'namespace_workload:sockpressure_tcp_window_clamps:rate5m{%(sel)s,namespace="shop",workload="web",workload_type="statefulset"}'
            value: 1
      - expr: namespace:sockpressure_throttled_pods:count
        eval_time: 10m
        exp_samples:
          - labels: 'namespace:sockpressure_throttled_pods:count{%(sel)s,namespace="shop"}'
            value: 1
      - expr: instance:sockpressure_throttled_cgroups:count
        eval_time: 10m
        exp_samples:
          - labels: 'instance:sockpressure_throttled_cgroups:count{%(sel)s,instance="n1"}'
            value: 1
      - expr: instance:sockpressure_socket_pressure:max_ratio_rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'instance:sockpressure_socket_pressure:max_ratio_rate5m{%(sel)s,instance="n1"}'
            value: 0.5
      - expr: instance:sockpressure_tcp_window_clamps:rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'instance:sockpressure_tcp_window_clamps:rate5m{%(sel)s,instance="n1"}'
            value: 1
      # One throttled cgroup alerts, from the selected agent only (the other agent's cgroup is at
      # 100%% pressure and 10 clamps/s and would alert if it were read).
      - expr: count by (job, cluster, alertname, alertstate) (ALERTS{alertname=~"SockPressureTCPThrottled.*"})
        eval_time: 5m
        exp_samples:
          - labels: '{%(sel)s,alertname="SockPressureTCPThrottled",alertstate="pending"}'
            value: 1
"""


def main():
    for tool in ("jsonnet", "promtool"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not installed (Debian packages jsonnet, prometheus)")
            return 77
    want = parse_matchers(SELECTOR)
    try:
        out = render(SELECTOR)
    except RuntimeError as e:
        fail(f"the mixin renders with agentSelector {SELECTOR}: {e}")
        return finish("")
    records = {r["record"] for g in out["rules"]["groups"] for r in g["rules"]}
    foreign = set(contract.EXTERNAL) | {out["config"]["workloadOwnerMetric"]}

    exprs = collect(out)
    counts = {k: sum(1 for x in exprs if x[2] == k) for k in ("rules", "alerts", "dashboard", "annotation")}
    print(f"     {counts['rules']} recording rules, {counts['alerts']} alerts, {counts['dashboard']} dashboard "
          f"queries, {counts['annotation']} annotation queries")
    with tempfile.TemporaryDirectory() as tmp:
        promtool_parse(tmp, out, exprs)
        n_agent, n_foreign = check_selectors(exprs, want, records, foreign)
        check(n_agent > 100, f"{n_agent} agent selectors (and {n_foreign} foreign ones) checked for {SELECTOR}")

        labels = {n for n, _, _ in want}
        n_agg = check_kept_labels(out, labels, records, foreign)
        check(n_agg > 0 and out["config"].get("agentSelectorLabels") is not None
              and labels <= set(out["config"]["agentSelectorLabels"]),
              f"{n_agg} aggregations in recording rules keep the selector's labels {sorted(labels)} "
              f"(agentSelectorLabels {out['config'].get('agentSelectorLabels')})")

        # Behaviour, not only text: promtool evaluates the rendered rules.
        with open(os.path.join(tmp, "unit.yaml"), "w") as f:
            f.write(UNIT_TEST % {"sel": SELECTOR})
        p = subprocess.run(["promtool", "test", "rules", "unit.yaml"], cwd=tmp, capture_output=True, text=True)
        check(p.returncode == 0, "promtool test rules: the selected agent's series are recorded and alert with "
                                 "its labels; another job's and another cluster's are not"
              + ("" if p.returncode == 0 else "\n" + (p.stdout + p.stderr)[-4000:]))

    # agentSelectorLabels comes from the selector itself (commas and operators inside values).
    p = subprocess.run(["jsonnet", "-J", MIXIN, "-e", """
        ((import 'mixin.libsonnet') + { _config+:: {
          agentSelector: 'job=~"sp,a|b", env!="x=y", cluster = "c\\\\"9"' } })._config.agentSelectorLabels"""],
                       capture_output=True, text=True)
    got = json.loads(p.stdout) if p.returncode == 0 else p.stderr
    check(got == ["cluster", "env", "job"], f"agentSelectorLabels derived from a selector with quoted commas: {got}")
    return finish(f"the agent selector {SELECTOR} reaches every expression")


if __name__ == "__main__":
    sys.exit(main())
