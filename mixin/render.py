#!/usr/bin/env python3
"""Render the files the mixin is the source of (mixin/build.jsonnet lists them by path):
alerts/sockpressure-rules.yaml, dashboards/*.json, deploy/base/prometheusrule.yaml and
deploy/base/grafana-dashboards.yaml.

    mixin/render.py           write them
    mixin/render.py --check   exit 1 with a diff when a committed file differs (ctest)

Content comes only from the jsonnet; this script serializes it: YAML (block style, readable key
order, multi-line PromQL as literal blocks), which jsonnet's own YAML output does not do, and JSON
(jsonnet 0.18's manifestJsonEx is very slow on dashboards).
"""
import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# jsonnet sorts object keys; YAML readers expect the usual order (and line-based tools find
# `- alert:` / `- record:` first in a rule). Keys of each kind of object in this order, the rest
# alphabetical after them.
ORDERS = [
    ({"alert", "record"}, ["record", "alert", "expr", "for", "labels", "annotations"]),
    ({"apiVersion"}, ["apiVersion", "kind", "metadata", "spec", "data"]),
    ({"summary"}, ["summary", "signal", "description", "runbook_url"]),
    (set(), ["name", "namespace", "labels", "annotations", "groups", "rules"]),
]


def _ordered(v):
    if isinstance(v, dict):
        order = next(o for keys, o in ORDERS if not keys or keys & set(v))
        keys = sorted(v, key=lambda k: (order.index(k) if k in order else len(order), k))
        return {k: _ordered(v[k]) for k in keys}
    if isinstance(v, list):
        return [_ordered(x) for x in v]
    return v


class _Dumper(yaml.SafeDumper):
    # Indent block sequences under their key (yamllint's default style).
    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _str(dumper, s):
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)


_Dumper.add_representer(str, _str)


def render():
    if not shutil.which("jsonnet"):
        raise FileNotFoundError("jsonnet")
    out = subprocess.run(["jsonnet", "-J", HERE, os.path.join(HERE, "build.jsonnet")], capture_output=True,
                         text=True, check=True).stdout
    specs = json.loads(out)
    # JSON is serialized here, not with std.manifestJsonEx: jsonnet 0.18's takes ~10 s per dashboard.
    files = {path: json.dumps(spec["value"], indent=2) + "\n" for path, spec in specs.items()
             if spec["format"] == "json"}

    def fill(v):
        if isinstance(v, dict):
            if set(v) == {"$dashboard"}:
                return files["dashboards/" + v["$dashboard"]]
            return {k: fill(x) for k, x in v.items()}
        return [fill(x) for x in v] if isinstance(v, list) else v

    for path, spec in specs.items():
        if spec["format"] == "yaml":
            docs = [yaml.dump(_ordered(fill(d)), Dumper=_Dumper, sort_keys=False, width=1000, allow_unicode=True)
                    for d in spec["docs"]]
            files[path] = spec["header"] + "---\n".join(docs)
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if a committed file differs from the mixin")
    args = ap.parse_args()
    try:
        files = render()
    except FileNotFoundError:
        print("jsonnet not found (Debian package jsonnet)", file=sys.stderr)
        return 77
    except subprocess.CalledProcessError as e:
        print(e.stderr, file=sys.stderr)
        return 1
    rc = 0
    for rel, text in sorted(files.items()):
        path = os.path.join(ROOT, rel)
        if args.check:
            cur = open(path).read() if os.path.exists(path) else ""
            if cur != text:
                sys.stdout.writelines(difflib.unified_diff(cur.splitlines(True), text.splitlines(True), rel,
                                                           "rendered from mixin/", n=1))
                print(f"{rel} differs from the mixin: run mixin/render.py", file=sys.stderr)
                rc = 1
            else:
                print(f"{rel} matches the mixin")
        else:
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {rel}")
    # A committed dashboard the mixin no longer renders would still be shipped.
    for name in sorted(os.listdir(os.path.join(ROOT, "dashboards"))):
        if name.endswith(".json") and f"dashboards/{name}" not in files:
            print(f"dashboards/{name} is not rendered by the mixin: delete it", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
