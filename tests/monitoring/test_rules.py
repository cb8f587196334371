#!/usr/bin/env python3
"""Static + promtool checks of alerts/.

(That the file is what mixin/ renders is monitoring.mixin's job.)
1. `promtool check rules` accepts it.
2. `promtool test rules tests/monitoring/rules_test.yaml` passes.
3. Coverage: every alert has a test just before its `for` elapses (expects nothing and is
   checked to be *pending* then, so the "before" case is not vacuous) and one after it with the
   exact summary/description/runbook_url and its severity.
4. Every runbook_url resolves to a file in alerts/runbooks/ with a heading for its anchor.
5. Every metric name in a rule is in docs/metrics.md or is a recording rule from the same file.

Exit 77 (ctest SKIP) when promtool is missing; any other failure exits 1.
"""
import os
import re
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RULES = os.path.join(ROOT, "alerts", "sockpressure-rules.yaml")
TESTS = os.path.join(HERE, "rules_test.yaml")
RUNBOOKS = os.path.join(ROOT, "alerts", "runbooks")
RUNBOOK_BASE = "https://github.com/sockpressure/sockpressure/blob/main/alerts/runbooks/"

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def duration_s(d):
    m = re.fullmatch(r"(\d+)([smh])", d)
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


def run(cmd):
    print("+", " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd))
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    return p.returncode


def github_anchor(heading):
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def main():
    if not shutil.which("promtool"):
        print("SKIP: promtool not installed (Debian package 'prometheus')")
        return 77

    if run(["promtool", "check", "rules", RULES]) != 0:
        fail("promtool check rules")
    if run(["promtool", "test", "rules", TESTS]) != 0:
        fail("promtool test rules")

    rules = yaml.safe_load(open(RULES))
    tests = yaml.safe_load(open(TESTS))
    alerts = {}
    records = set()
    for g in rules["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                alerts[r["alert"]] = r
            else:
                records.add(r["record"])

    # --- coverage of every alert on both sides of `for` ---------------------
    for name, rule in alerts.items():
        fired_ok, before_ok = False, False
        for t in tests["tests"]:
            pend_times = set()
            for e in t.get("promql_expr_test", []):
                if re.search(r'ALERTS\{alertname="%s",alertstate="pending"\}' % name, e["expr"]) and \
                        e.get("exp_samples") and float(e["exp_samples"][0]["value"]) >= 1:
                    pend_times.add(duration_s(e["eval_time"]))
            for a in t.get("alert_rule_test", []):
                if a["alertname"] != name:
                    continue
                ts = duration_s(a["eval_time"])
                exp = a.get("exp_alerts") or []
                if not exp and ts in pend_times:
                    before_ok = True
                for x in exp:
                    ann = x.get("exp_annotations", {})
                    if set(ann) != set(rule["annotations"]):
                        fail(f"{name}: test at {a['eval_time']} checks annotations {sorted(ann)}, "
                             f"rule has {sorted(rule['annotations'])}")
                    elif x.get("exp_labels", {}).get("severity") != rule["labels"]["severity"]:
                        fail(f"{name}: test at {a['eval_time']} does not pin severity")
                    elif ann["summary"] != rule["annotations"]["summary"]:
                        fail(f"{name}: summary differs from the rule's static summary")
                    elif "{{" in ann["description"]:
                        fail(f"{name}: expected description still contains a template")
                    else:
                        fired_ok = True
        if not before_ok:
            fail(f"{name}: no test that expects it pending (not firing) before `for` elapses")
        if not fired_ok:
            fail(f"{name}: no test that expects it firing with exact annotations")
        print(f"ok   {name}: tested before and after for={rule['for']}" if before_ok and fired_ok else
              f"MISS {name}")

    # --- mixin conventions ---------------------------------------------------
    for name, rule in alerts.items():
        if not re.fullmatch(r"SockPressure[A-Z][A-Za-z0-9]+", name):
            fail(f"{name}: not CamelCase with the SockPressure prefix")
        if rule["labels"].get("severity") not in ("critical", "warning", "info"):
            fail(f"{name}: severity must be critical|warning|info")
        s = rule["annotations"]["summary"]
        if "{{" in s or not s.endswith("."):
            fail(f"{name}: summary must be a static sentence ending with a period")
        if "{{" not in rule["annotations"]["description"]:
            fail(f"{name}: description is not templated")
        if "for" not in rule:
            fail(f"{name}: no `for` duration")

    # --- runbooks -------------------------------------------------------------
    for name, rule in alerts.items():
        url = rule["annotations"]["runbook_url"]
        if not url.startswith(RUNBOOK_BASE):
            fail(f"{name}: runbook_url {url} is not under {RUNBOOK_BASE}")
            continue
        page, _, anchor = url[len(RUNBOOK_BASE):].partition("#")
        path = os.path.join(RUNBOOKS, page)
        if not os.path.isfile(path):
            fail(f"{name}: runbook {page} does not exist")
            continue
        anchors = {github_anchor(h) for h in re.findall(r"^#+ (.*)$", open(path).read(), re.M)}
        if anchor != name.lower() or anchor not in anchors:
            fail(f"{name}: runbook {page} has no heading for #{anchor}")

    # --- documentation tells the rule's truth ----------------------------------------
    # The README tables are what people read when paged; a threshold there that the rule
    # does not use (README said >= 0.60 while the rule said > 0.4) misleads them.
    sw = alerts["SockPressureReclaimScanWithoutReclaim"]["expr"]
    m = re.search(r"scan_without_reclaim:ratio_rate\w+(?:\{[^}]*\})? > ([\d.]+)", sw)
    thr = float(m.group(1)) if m else None
    for doc in ("README.md", os.path.join("alerts", "README.md")):
        rows = [ln for ln in open(os.path.join(ROOT, doc)) if ln.startswith("|") and
                "SockPressureReclaimScanWithoutReclaim" in ln]
        nums = [float(x) for row in rows for x in re.findall(r"[>≥] ?(0\.\d+)", row)]
        if not rows or thr is None or nums != [thr]:
            fail(f"{doc}: the SockPressureReclaimScanWithoutReclaim row names thresholds {nums}, the rule {thr}")
    # Every script or file a README tells people to run must exist.
    for doc in ("README.md", "alerts/README.md", "dashboards/README.md", "deploy/README.md"):
        spans = re.findall(r"`([^`]+)`", open(os.path.join(ROOT, doc)).read())
        refs = {r for sp in spans for r in re.findall(r"(?<![\w/.])((?:alerts|dashboards|deploy|mixin|scripts)/[\w./-]+)", sp)}
        for ref in sorted(refs):
            if "*" not in ref and not os.path.exists(os.path.join(ROOT, ref.rstrip("/."))):
                fail(f"{doc} names {ref}, which does not exist")

    # --- metric names ----------------------------------------------------------
    known = contract.metric_names() | records | {"up"} | set(contract.EXTERNAL)
    context = contract.context_metric_names()
    if not context:
        fail("docs/metrics.md lists no context-profile metric (its `profile` column)")
    for g in rules["groups"]:
        for r in g["rules"]:
            for m in contract.metric_names_in_expr(r["expr"]):
                if m not in known:
                    fail(f"{r.get('alert') or r.get('record')}: metric {m} is not in docs/metrics.md")
                # Alerts and recording rules must work with the agent's default (core) profile.
                if m in context:
                    fail(f"{r.get('alert') or r.get('record')}: metric {m} needs --metrics.profile=context "
                         "(off by default)")

    if failures:
        print(f"\n{len(failures)} failure(s)")
        return 1
    print(f"\nall {len(alerts)} alerts and {len(records)} recording rules OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
