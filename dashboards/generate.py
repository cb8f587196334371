#!/usr/bin/env python3
"""Grafana dashboards as code: renders dashboards/*.json.

Why Python and not grafonnet/the Grafana SDK: no extra toolchain in CI, and the three dashboards
share their variables and selectors, which is all the abstraction needed. The JSON is committed
(Grafana provisioning and the deploy/ ConfigMaps consume it as is); `--check` fails on drift.

Conventions (kubernetes-mixin / node-mixin): `$datasource`, `$cluster`, `$instance`, `$namespace`,
`$pod`, `$cgroup` variables; every range uses `$__rate_interval`; stable UIDs; metric names only
from docs/metrics.md plus the recording rules in alerts/.
"""
import argparse
import difflib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

DS = {"type": "prometheus", "uid": "${datasource}"}
NODE = 'cluster=~"$cluster", instance=~"$instance"'
CG = NODE + ', namespace=~"$namespace", pod=~"$pod", cgroup=~"$cgroup"'
RI = "$__rate_interval"
TAGS = ["sockpressure"]
UID = {"overview": "sockpressure-overview", "cgroup": "sockpressure-cgroup", "agent": "sockpressure-agent"}


# --------------------------------------------------------------------------- helpers
class Layout:
    """Places panels left to right in a 24-column grid, wrapping rows."""

    def __init__(self):
        self.x, self.y, self.h = 0, 0, 0
        self.next_id = 1
        self.panels = []

    def add(self, panel, w=12, h=8):
        if self.x + w > 24:
            self.x, self.y = 0, self.y + self.h
            self.h = 0
        panel["id"] = self.next_id
        self.next_id += 1
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.h = max(self.h, h)
        self.panels.append(panel)

    def row(self, title):
        if self.x:
            self.x, self.y = 0, self.y + self.h
        self.h = 0
        self.panels.append({"type": "row", "title": title, "collapsed": False, "id": self.next_id,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.next_id += 1
        self.y += 1


def target(expr, legend="", ref="A", instant=False, fmt=None):
    t = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend or "__auto"}
    if instant:
        t.update({"instant": True, "range": False})
    if fmt:
        t["format"] = fmt
    return t


def refs(targets):
    for i, t in enumerate(targets):
        t["refId"] = chr(ord("A") + i)
    return targets


def timeseries(title, targets, unit="short", description="", thresholds=None, stack=False, minv=None, maxv=None):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
              "spanNulls": False, "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    steps = [{"color": "green", "value": None}]
    if thresholds:
        # Dashed threshold lines (e.g. the kernel's 0.60 / 0.95 vmpressure levels).
        custom["thresholdsStyle"] = {"mode": "dashed"}
        steps += [{"color": c, "value": v} for v, c in thresholds]
    defaults = {"unit": unit, "custom": custom, "thresholds": {"mode": "absolute", "steps": steps}}
    if minv is not None:
        defaults["min"] = minv
    if maxv is not None:
        defaults["max"] = maxv
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "targets": refs(targets), "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title, expr, unit="short", description="", thresholds=((1, "red"),)):
    steps = [{"color": "green", "value": None}] + [{"color": c, "value": v} for v, c in thresholds]
    return {"type": "stat", "title": title, "description": description, "datasource": DS,
            "targets": [target(expr, instant=True)],
            "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
                            "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "background", "graphMode": "none", "textMode": "value"}}


def table(title, targets, description="", hide=("Time", "__name__", "job"), links=None, overrides=None):
    for t in targets:
        t.update({"instant": True, "range": False, "format": "table"})
    p = {"type": "table", "title": title, "description": description, "datasource": DS,
         "targets": refs(targets),
         "transformations": [{"id": "merge", "options": {}},
                             {"id": "organize", "options": {"excludeByName": {h: True for h in hide}}}],
         "fieldConfig": {"defaults": {"custom": {"align": "auto"}}, "overrides": overrides or []},
         "options": {"showHeader": True, "footer": {"show": False}}}
    if links:
        p["fieldConfig"]["defaults"]["links"] = links
    return p


def variable(name, label, query, multi=True, include_all=True, all_value=".*", hide=0):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": f"{name}-variable"}, "definition": query,
            "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all,
            "allValue": all_value if include_all else None, "hide": hide,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]} if include_all else {},
            "options": [], "regex": ""}


def templating(cgroup_multi=True):
    return {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
        variable("cluster", "cluster", "label_values(sockpressure_build_info, cluster)"),
        variable("instance", "instance", 'label_values(sockpressure_build_info{cluster=~"$cluster"}, instance)'),
        variable("namespace", "namespace", f"label_values(sockpressure_memcg_usage_bytes{{{NODE}}}, namespace)"),
        variable("pod", "pod",
                 f'label_values(sockpressure_memcg_usage_bytes{{{NODE}, namespace=~"$namespace"}}, pod)'),
        variable("cgroup", "cgroup",
                 f'label_values(sockpressure_memcg_usage_bytes{{{NODE}, namespace=~"$namespace", pod=~"$pod"}}, cgroup)',
                 multi=cgroup_multi, include_all=cgroup_multi),
    ]}


def dashboard(key, title, description, layout, cgroup_multi=True):
    return {
        "uid": UID[key], "title": title, "description": description, "tags": TAGS,
        "editable": True, "graphTooltip": 1, "refresh": "30s", "schemaVersion": 39, "version": 1,
        "time": {"from": "now-1h", "to": "now"}, "timezone": "", "fiscalYearStartMonth": 0,
        "timepicker": {}, "liveNow": False, "weekStart": "",
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "links": [{"type": "dashboards", "tags": TAGS, "asDropdown": True, "title": "sockpressure",
                   "includeVars": True, "keepTime": True}],
        "templating": templating(cgroup_multi),
        "panels": layout.panels,
    }


# --------------------------------------------------------------------------- overview
def overview():
    L = Layout()
    L.row("Throttled now")
    L.add(stat("Cgroups under socket pressure now",
               f"count(sockpressure_memcg_socket_pressure_active{{{CG}}} == 1) or vector(0)",
               description="Cgroups whose own or an ancestor's vmpressure socket-pressure deadline is live "
                           "(TCP windows clamped to 4*advmss for every socket below)."), w=6, h=5)
    L.add(stat("Nodes with throttled cgroups",
               f"count(count by (cluster, instance) (rate(sockpressure_memcg_socket_pressure_seconds_total{{{CG}}}[{RI}]) > 0)) or vector(0)"),
          w=6, h=5)
    L.add(stat("Window clamps/s (all cgroups)",
               f"sum(rate(sockpressure_tcp_window_clamps_total{{{CG}}}[{RI}])) or vector(0)", unit="ops",
               description="Needs the eBPF or sock_diag tier; 0 without them (see agent health)."), w=6, h=5)
    L.add(stat("Clamped sockets now", f"sum(sockpressure_tcp_clamped_sockets{{{CG}}}) or vector(0)"), w=6, h=5)
    L.add(table("Throttled cgroups (last 5m)", [
        target(f"cgroup:sockpressure_socket_pressure:ratio_rate5m{{{CG}}} > 0"),
        target(f"cgroup:sockpressure_tcp_window_clamps:rate5m{{{CG}}} > 0"),
        target(f"cgroup:sockpressure_memcg_scan_without_reclaim:ratio_rate5m{{{CG}}}"),
    ], description="Fraction of time under socket pressure, clamps/s and reclaim scan-without-reclaim ratio "
                   "per cgroup (recording rules from alerts/). Click a cgroup for its detail dashboard.",
        links=[{"title": "cgroup detail", "url": f"/d/{UID['cgroup']}?var-datasource=${{datasource}}"
                "&var-instance=${__data.fields.instance}&var-cgroup=${__data.fields.cgroup}&${__url_time_range}"}],
        overrides=[
            {"matcher": {"id": "byName", "options": "Value #A"},
             "properties": [{"id": "displayName", "value": "time under pressure"}, {"id": "unit", "value": "percentunit"}]},
            {"matcher": {"id": "byName", "options": "Value #B"},
             "properties": [{"id": "displayName", "value": "clamps/s"}]},
            {"matcher": {"id": "byName", "options": "Value #C"},
             "properties": [{"id": "displayName", "value": "scan w/o reclaim"}, {"id": "unit", "value": "percentunit"}]},
        ]), w=24, h=8)
    L.add(timeseries("Top cgroups by time under socket pressure", [
        target(f"topk(10, rate(sockpressure_memcg_socket_pressure_seconds_total{{{CG}}}[{RI}]) > 0)",
               "{{instance}} {{cgroup}}")], unit="percentunit", minv=0, maxv=1,
        description="Share of wall time each cgroup's own socket-pressure deadline was live."))
    L.add(timeseries("Top cgroups by window clamp rate", [
        target(f"topk(10, rate(sockpressure_tcp_window_clamps_total{{{CG}}}[{RI}]) > 0)",
               "{{instance}} {{cgroup}}")], unit="ops"))
    L.add(timeseries("Top cgroups by reclaim scan-without-reclaim", [
        target(f"topk(10, 1 - rate(sockpressure_memcg_reclaim_reclaimed_pages_total{{{CG}}}[{RI}])"
               f" / (rate(sockpressure_memcg_reclaim_scanned_pages_total{{{CG}}}[{RI}]) > 0))",
               "{{instance}} {{cgroup}}")], unit="percentunit", minv=0, maxv=1,
        thresholds=((0.60, "orange"), (0.95, "red")),
        description="1 - reclaimed/scanned per cgroup. vmpressure arms socket pressure at >= 60% (medium)."))
    L.add(timeseries("Top cgroups by clamped sockets", [
        target(f"topk(10, sockpressure_tcp_clamped_sockets{{{CG}}} > 0)", "{{instance}} {{cgroup}}")]))

    L.row("Node preconditions")
    yes_no = [{"id": "mappings", "value": [{"type": "value", "options": {
        "0": {"text": "no", "index": 0}, "1": {"text": "yes", "index": 1}}}]}]
    L.add(table("Nodes", [
        target(f"sockpressure_node_swap_enabled{{{NODE}}}"),
        target(f"sockpressure_node_socket_accounting_enabled{{{NODE}}}"),
        target(f"sockpressure_node_tcp_memory_pressure{{{NODE}}}"),
        target(f"sockpressure_node_info{{{NODE}}}"),
    ], description="Preconditions: swap on (anon gets scanned), socket accounting on (no cgroup.memory=nosocket), "
                   "global tcp_mem pressure (a different cause of the same clamp), kernel and cgroup mode.",
        hide=("Time", "__name__", "job", "Value #D"),
        overrides=[
            {"matcher": {"id": "byName", "options": "Value #A"}, "properties": [{"id": "displayName", "value": "swap"}] + yes_no},
            {"matcher": {"id": "byName", "options": "Value #B"},
             "properties": [{"id": "displayName", "value": "socket accounting"}] + yes_no},
            {"matcher": {"id": "byName", "options": "Value #C"},
             "properties": [{"id": "displayName", "value": "global tcp_mem pressure"}] + yes_no},
        ]), w=24, h=7)
    L.add(table("Signal sources", [
        target(f"sockpressure_signal_source{{{NODE}}} == 1")],
        description="Which tier produced each signal: fentry/kprobe/iter/tp_btf/raw_tp are exact, memory_stat is "
                    "an estimate, none means not measured.", hide=("Time", "__name__", "job", "Value")), w=12)
    L.add(timeseries("Swap used", [
        target(f"sockpressure_node_swap_used_bytes{{{NODE}}}", "{{instance}} used"),
        target(f"sockpressure_node_swap_size_bytes{{{NODE}}}", "{{instance}} size")], unit="bytes"))
    L.add(timeseries("Node: TCP memory vs tcp_mem", [
        target(f"sockpressure_node_tcp_memory_pages{{{NODE}}}", "{{instance}} TCP mem"),
        target(f'sockpressure_node_tcp_mem_limit_pages{{{NODE}, threshold="pressure"}}', "{{instance}} tcp_mem[1]"),
    ], description="Above tcp_mem[1] every socket on the node is throttled (global pressure)."))
    L.add(timeseries("Node: reclaim scan-without-reclaim", [
        target(f"1 - rate(sockpressure_node_vmscan_reclaimed_pages_total{{{NODE}}}[{RI}])"
               f" / (rate(sockpressure_node_vmscan_scanned_pages_total{{{NODE}}}[{RI}]) > 0)", "{{instance}}")],
        unit="percentunit", minv=0, maxv=1, thresholds=((0.60, "orange"), (0.95, "red"))))
    L.add(timeseries("Node: TCP prune / zero-window events", [
        target(f"rate(sockpressure_node_tcp_prune_called_total{{{NODE}}}[{RI}])", "{{instance}} prune called"),
        target(f"rate(sockpressure_node_tcp_want_zero_window_adv_total{{{NODE}}}[{RI}])", "{{instance}} want zero window"),
        target(f"rate(sockpressure_node_tcp_memory_pressure_seconds_total{{{NODE}}}[{RI}])", "{{instance}} global pressure s/s"),
    ], unit="ops"))
    return dashboard("overview", "sockpressure / overview",
                     "Which cgroups on which nodes have TCP receive windows throttled by memcg socket pressure.", L)


# --------------------------------------------------------------------------- cgroup detail
def cgroup_detail():
    L = Layout()
    L.row("Reclaim (the cause)")
    L.add(timeseries("Reclaim: scanned vs reclaimed (own LRUs)", [
        target(f"rate(sockpressure_memcg_reclaim_scanned_pages_total{{{CG}}}[{RI}])", "scanned {{cgroup}}"),
        target(f"rate(sockpressure_memcg_reclaim_reclaimed_pages_total{{{CG}}}[{RI}])", "reclaimed {{cgroup}}"),
    ], unit="pps", description="Local (not hierarchical) pages/s, the input of vmpressure()."))
    L.add(timeseries("Scan-without-reclaim ratio", [
        target(f"sockpressure_memcg_scan_without_reclaim_ratio{{{CG}}}", "last 512-page window {{cgroup}}"),
        target(f"1 - rate(sockpressure_memcg_reclaim_reclaimed_pages_total{{{CG}}}[{RI}])"
               f" / (rate(sockpressure_memcg_reclaim_scanned_pages_total{{{CG}}}[{RI}]) > 0)", "interval {{cgroup}}"),
    ], unit="percentunit", minv=0, maxv=1, thresholds=((0.60, "orange"), (0.95, "red")),
        description="1 - reclaimed/scanned. Lines: vmpressure medium (0.60) and critical (0.95); "
                    "medium or worse arms socket pressure for 1 s."))
    L.add(timeseries("vmpressure windows by verdict", [
        target(f"rate(sockpressure_memcg_vmpressure_windows_total{{{CG}}}[{RI}])", "{{level}} {{cgroup}}")],
        unit="ops", stack=True))
    L.add(timeseries("Memory pressure stall (PSI)", [
        target(f"rate(sockpressure_memcg_psi_stall_seconds_total{{{CG}}}[{RI}])", "{{kind}} {{cgroup}}")],
        unit="percentunit", description="Share of time tasks stalled on memory. A co-signal only: socket pressure "
                                        "can be high with PSI near zero."))
    L.row("Socket pressure (the effect)")
    L.add(timeseries("Time under socket pressure", [
        target(f"rate(sockpressure_memcg_socket_pressure_seconds_total{{{CG}}}[{RI}])", "own deadline {{cgroup}}"),
        target(f"sockpressure_memcg_socket_pressure_active{{{CG}}}", "active now (incl. ancestors) {{cgroup}}"),
    ], unit="percentunit", minv=0, maxv=1))
    L.add(timeseries("Socket pressure events", [
        target(f"rate(sockpressure_memcg_socket_pressure_events_total{{{CG}}}[{RI}])", "(re)asserted {{cgroup}}"),
        target(f"rate(sockpressure_memcg_sock_throttled_total{{{CG}}}[{RI}])", "sock_throttled (6.19+) {{cgroup}}"),
    ], unit="ops"))
    L.add(timeseries("Window clamps", [
        target(f"rate(sockpressure_tcp_window_clamps_total{{{CG}}}[{RI}])", "clamps/s {{cgroup}}")], unit="ops",
        description="rcv_ssthresh pulled to <= 4*advmss under socket pressure (eBPF / sock_diag tiers)."))
    L.add(timeseries("Sockets", [
        target(f"sockpressure_tcp_sockets{{{CG}}}", "sockets {{cgroup}}"),
        target(f"sockpressure_tcp_clamped_sockets{{{CG}}}", "clamped now {{cgroup}}")]))
    L.row("Memory")
    L.add(timeseries("Memory by type", [
        target(f"sockpressure_memcg_anon_bytes{{{CG}}}", "anon {{cgroup}}"),
        target(f"sockpressure_memcg_file_bytes{{{CG}}}", "file {{cgroup}}"),
        target(f"sockpressure_memcg_sock_bytes{{{CG}}}", "sock {{cgroup}}"),
        target(f"sockpressure_memcg_swap_bytes{{{CG}}}", "swap {{cgroup}}"),
    ], unit="bytes"))
    L.add(timeseries("Usage vs limits", [
        target(f"sockpressure_memcg_usage_bytes{{{CG}}}", "usage {{cgroup}}"),
        target(f'sockpressure_memcg_limit_bytes{{{CG}, limit=~"max|high|low|min"}} < +Inf', "{{limit}} {{cgroup}}"),
    ], unit="bytes", description="Unlimited limits (+Inf) are not drawn."))
    L.add(timeseries("Swap limit and OOM kills", [
        target(f'sockpressure_memcg_limit_bytes{{{CG}, limit="swap_max"}} < +Inf', "swap.max {{cgroup}}"),
        target(f"increase(sockpressure_memcg_oom_kills_total{{{CG}}}[{RI}])", "OOM kills {{cgroup}}"),
    ]), w=12)
    L.add(timeseries("cgroup v1 TCP kmem", [
        target(f"sockpressure_memcg_kmem_tcp_usage_bytes{{{CG}}}", "usage {{cgroup}}"),
        target(f"sockpressure_memcg_kmem_tcp_limit_bytes{{{CG}}} < +Inf", "limit {{cgroup}}"),
        target(f"increase(sockpressure_memcg_kmem_tcp_failcnt_total{{{CG}}}[{RI}])", "failcnt {{cgroup}}"),
    ], unit="bytes", description="cgroup v1 only: memory.kmem.tcp.* (the v1 pressure source since v6.6)."))
    return dashboard("cgroup", "sockpressure / cgroup detail",
                     "One cgroup: reclaim efficiency against the vmpressure levels, socket pressure, clamps, memory.",
                     L)


# --------------------------------------------------------------------------- agent health
def agent():
    L = Layout()
    L.add(table("Agents", [target(f'up{{job="sockpressure-exporter", {NODE}}}'),
                           target(f"sockpressure_build_info{{{NODE}}}")],
                hide=("Time", "__name__", "Value #B"),
                overrides=[{"matcher": {"id": "byName", "options": "Value #A"},
                            "properties": [{"id": "displayName", "value": "up"}]}]), w=24, h=6)
    L.add(table("Signal sources", [target(f"sockpressure_signal_source{{{NODE}}} == 1")],
                hide=("Time", "__name__", "job", "Value")))
    L.add(table("Probe attach state", [target(f"sockpressure_probe_attached{{{NODE}}}")],
                description="1 attached, 0 tried and skipped (a fallback was used).", hide=("Time", "__name__", "job")))
    L.add(timeseries("Collector success", [
        target(f"sockpressure_collector_success{{{NODE}}}", "{{instance}} {{collector}}")], minv=0, maxv=1))
    L.add(timeseries("Collector duration", [
        target(f"sockpressure_collector_duration_seconds{{{NODE}}}", "{{instance}} {{collector}}")], unit="s"))
    L.add(timeseries("Cgroups tracked", [
        target(f"sockpressure_cgroups_tracked{{{NODE}}}", "{{instance}} tracked"),
        target(f"sockpressure_cgroups_untracked{{{NODE}}}", "{{instance}} over --cgroup.max"),
        target(f"increase(sockpressure_cgroups_overflow_total{{{NODE}}}[{RI}])", "{{instance}} overflowing samples"),
    ]))
    L.add(timeseries("Sampler", [
        target(f"rate(sockpressure_samples_total{{{NODE}}}[{RI}])", "{{instance}} samples/s"),
        target(f"time() - sockpressure_last_sample_timestamp_seconds{{{NODE}}}", "{{instance}} last sample age (s)"),
        target(f"sockpressure_sample_cpu_seconds{{{NODE}}}", "{{instance}} CPU s per sample"),
    ]))
    L.add(timeseries("BPF program cost", [
        target(f"rate(sockpressure_bpf_program_run_seconds_total{{{NODE}}}[{RI}])"
               f" / (rate(sockpressure_bpf_program_runs_total{{{NODE}}}[{RI}]) > 0)", "{{instance}} {{program}}"),
    ], unit="s", description="Average run time per program (needs kernel.bpf_stats_enabled=1)."))
    L.add(timeseries("BPF events lost / HTTP", [
        target(f"rate(sockpressure_bpf_events_lost_total{{{NODE}}}[{RI}])", "{{instance}} BPF events lost"),
        target(f"sum by (instance, handler, code) (rate(sockpressure_http_requests_total{{{NODE}}}[{RI}]))",
               "{{instance}} {{handler}} {{code}}"),
    ], unit="ops"))
    return dashboard("agent", "sockpressure / agent health",
                     "Signal sources, probe attach state, collector health and cgroup tracking of the agents.", L)


DASHBOARDS = {"sockpressure-overview.json": overview, "sockpressure-cgroup.json": cgroup_detail,
              "sockpressure-agent.json": agent}


def render(fn):
    return json.dumps(fn(), indent=2, sort_keys=False) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    rc = 0
    for name, fn in DASHBOARDS.items():
        path = os.path.join(HERE, name)
        text = render(fn)
        if args.check:
            cur = open(path).read() if os.path.exists(path) else ""
            if cur != text:
                sys.stdout.writelines(difflib.unified_diff(cur.splitlines(True), text.splitlines(True), name,
                                                           "generated", n=1))
                print(f"dashboards/{name} is stale: run dashboards/generate.py", file=sys.stderr)
                rc = 1
        else:
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote dashboards/{name}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
