"""Helpers shared by the monitoring tests: the metric contract and PromQL name extraction.

docs/metrics.md is the contract. Rules and dashboards may only use names from it (plus recording
rules defined in alerts/ and Prometheus' own `up`), so we parse it instead of keeping a second list
that could drift.
"""
import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
METRICS_MD = os.path.join(ROOT, "docs", "metrics.md")


# Series the mixin reads that other exporters or mixins provide, with where from. Only the fleet
# workload rules use one; without it they are empty and the fleet dashboard falls back to pods.
EXTERNAL = {
    "namespace_workload_pod:kube_pod_owner:relabel":
        "kubernetes-mixin recording rule over kube-state-metrics' kube_pod_owner (pod -> workload)",
}


def metric_names(path=METRICS_MD):
    names = set()
    for line in open(path):
        names |= _names_in_row(line)
    return names


def _names_in_row(line):
    names = set()
    if not line.startswith("| `"):
        return names
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    first, meaning = cells[0], cells[-1]
    tokens = re.findall(r"`([^`]+)`", first)
    last_full = None
    for tok in tokens:
        tok = re.sub(r"\{.*\}$", "", tok)
        if "*" in tok:
            continue  # sockpressure_tier_*: a family only present with --signal.all-tiers
        if tok.startswith("sockpressure_"):
            names.add(tok)
            last_full = tok
        elif tok.startswith("_") and last_full:
            # "`sockpressure_memcg_anon_bytes`, `_file_bytes`": the continuation replaces as
            # many trailing components of the previous full name as it has itself.
            n = tok.count("_")
            base = "_".join(last_full.split("_")[:-n])
            names.add(base + tok)
    if "…" in first and last_full:
        # "`sockpressure_node_tcp_prune_called_total` …" + the TcpExt keys in the meaning cell.
        m = re.fullmatch(r"(sockpressure_\w+?_)prune_called(_total)", last_full)
        if m:
            for key in re.findall(r"`([a-z_]+)`", meaning):
                names.add(m.group(1) + key + m.group(2))
    return names


def context_metric_names(path=METRICS_MD):
    """Names the agent exports only with --metrics.profile=context (the `profile` column of docs/metrics.md)."""
    names = set()
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4 and cells[2] == "context":
            names |= _names_in_row(line)
    return names


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
             "bool", "offset", "inf", "nan", "atan2", "topk", "bottomk"}


def metric_names_in_expr(expr):
    """Metric names a PromQL expression selects (a lexical approximation that is exact for the
    subset our rules and dashboards use: no metric names inside strings or label matchers)."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)          # strings (label values, regexes)
    e = re.sub(r"\{[^}]*\}", "", e)                        # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                       # range / subquery durations
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\b(\s*\()?", e):
        tok, call = m.group(1), m.group(2)
        if call or tok.lower() in _KEYWORDS:
            continue
        names.add(tok)
    return names
