#!/usr/bin/env python3
"""The mixin (mixin/) is the one source of the alerts, recording rules and dashboards.

Asserts:
* every file it renders (alerts/sockpressure-rules.yaml, dashboards/*.json,
  deploy/base/prometheusrule.yaml, deploy/base/grafana-dashboards.yaml) is committed exactly as
  `mixin/render.py` renders it, and no dashboard is committed that the mixin does not render;
* no other generator is left beside it (a second source of truth);
* it imports the way kube-prometheus users import mixins, and `_config` overrides reach the
  output: another agent selector, cluster label and runbook URL pattern, thresholds and `for`;
* `jsonnetfmt --test` accepts every file (formatting drift is how hand edits creep in).

Exit 77 (ctest SKIP) when jsonnet is missing.
"""
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MIXIN = os.path.join(ROOT, "mixin")
sys.path.insert(0, HERE)
from checks import check, finish  # noqa: E402


def main():
    if not shutil.which("jsonnet"):
        print("SKIP: jsonnet not installed (Debian package jsonnet)")
        return 77
    p = subprocess.run([sys.executable, os.path.join(MIXIN, "render.py"), "--check"], capture_output=True, text=True)
    print(p.stdout[-4000:] + p.stderr[-2000:])
    check(p.returncode == 0, "every rendered file is committed exactly as mixin/render.py renders it")

    leftovers = [os.path.relpath(f, ROOT) for d in ("alerts", "dashboards", "deploy")
                 for f in glob.glob(os.path.join(ROOT, d, "**", "*.py"), recursive=True)]
    check(not leftovers, f"no second generator beside the mixin ({leftovers})")

    # Import as a user would, overriding _config.
    override = """
    local m = (import 'mixin.libsonnet') + { _config+:: {
      agentSelector: 'job="node-agents"', clusterLabel: 'k8s_cluster',
      runbookURLPattern: 'https://runbooks.example/%(page)s#%(anchor)s',
      throttledWarningRatio: 0.2, throttledWarningFor: '3m',
    } };
    { alerts: m.prometheusAlerts, rules: m.prometheusRules, dash: m.grafanaDashboards }
    """
    p = subprocess.run(["jsonnet", "-J", MIXIN, "-e", override], capture_output=True, text=True)
    check(p.returncode == 0, "the mixin imports with a _config override " + p.stderr[-500:])
    if p.returncode == 0:
        out = json.loads(p.stdout)
        alerts = {r["alert"]: r for g in out["alerts"]["groups"] for r in g["rules"]}
        w = alerts["SockPressureTCPThrottled"]
        check("> 0.2\n" in w["expr"] and w["for"] == "3m", "thresholds and `for` come from _config")
        check(alerts["SockPressureAgentDown"]["expr"] == 'up{job="node-agents"} == 0',
              "the agent selector comes from _config")
        check(w["annotations"]["runbook_url"] == "https://runbooks.example/tcp-throttled#sockpressuretcpthrottled",
              "runbook URLs follow _config.runbookURLPattern")
        text = json.dumps(out["dash"]) + json.dumps(out["rules"])
        check('k8s_cluster=~\\"$cluster\\"' in text and "by (k8s_cluster, job, namespace, pod)" in text
              and 'cluster=~\\"$cluster\\"' not in text.replace("k8s_cluster", "K"),
              "the cluster label comes from _config (dashboards and fleet rules)")
        check(all(r["expr"] for g in out["rules"]["groups"] for r in g["rules"]), "every recording rule has an expr")

    if shutil.which("jsonnetfmt"):
        files = sorted(glob.glob(os.path.join(MIXIN, "**", "*.*sonnet"), recursive=True))
        p = subprocess.run(["jsonnetfmt", "--test", "--max-blank-lines", "2", "--string-style", "s",
                            "--comment-style", "s"] + files, capture_output=True, text=True)
        check(p.returncode == 0, f"jsonnetfmt --test on {len(files)} files " + (p.stdout + p.stderr)[-1000:])
    else:
        print("note: jsonnetfmt not found; formatting not checked")

    return finish("mixin OK")


if __name__ == "__main__":
    sys.exit(main())
