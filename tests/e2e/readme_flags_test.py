#!/usr/bin/env python3
"""The flag catalogs, --help and the README's flag table agree.

    readme_flags_test.py AGENT SOURCE_DIR

Every row of the flag catalogs (exporter/*/*_flags.json) is a flag of the
binary with the catalog's help text, and every flag the README's "## Flags"
table names exists with the default the table gives. The table lists every
flag --help prints, so a flag missing from it is an error too.
"""
import glob
import json
import os
import re
import subprocess
import sys


def help_flags(agent):
    """name -> (help text, default) from --help."""
    out = subprocess.run([agent, "--help"], capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    flags, name = {}, None
    for line in text.splitlines():
        head = re.match(r"  --(?:\[no-\])?([\w.-]+)", line)
        if head and not line.startswith("      "):
            name = head.group(1)
        elif name and line.startswith("      "):
            body, _, default = line.strip().rpartition(" (default: ")
            flags[name] = (body, default[:-1])
            name = None
    if not flags:
        sys.exit(f"no flags in {agent} --help:\n{text}")
    return flags


def readme_rows(readme):
    """(names, defaults) for each row of the README's flag table."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Flags\n", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`--(?:\[no-\])?([\w.-]+)`", cells[0])
        names = [n for n in names if "NAME" not in n and n not in ("help", "version")]
        if not names:
            continue
        if "`" in cells[1]:
            defaults = re.findall(r"`([^`]*)`", cells[1])
        elif cells[1]:
            defaults = [d.strip() for d in cells[1].split(",")]
        else:
            defaults = [""] * len(names)
        yield names, defaults, line


def same_default(readme, shown):
    readme = {"on": "true", "off": "false"}.get(readme, readme)
    if len(shown) >= 2 and shown[0] == shown[-1] == '"':
        shown = shown[1:-1]
    if shown == "[]":  # a repeatable flag: none given
        shown = ""
    return readme == shown


def main():
    agent, source = sys.argv[1], sys.argv[2]
    shown = help_flags(agent)
    errors, catalog_rows = [], 0
    for path in sorted(glob.glob(os.path.join(source, "exporter", "*", "*_flags.json"))):
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)["rows"]
        for row in rows:
            catalog_rows += 1
            where = f"{os.path.relpath(path, source)}: --{row['name']}"
            if row["name"] not in shown:
                errors.append(f"{where} is not in --help")
            elif not shown[row["name"]][0].startswith(row["help"]):
                errors.append(f"{where}: --help says {shown[row['name']][0]!r}")
    readme_flags = 0
    for names, defaults, line in readme_rows(os.path.join(source, "README.md")):
        if len(defaults) != len(names):
            errors.append(f"README: {len(names)} flags but {len(defaults)} defaults in {line}")
            continue
        for name, default in zip(names, defaults):
            readme_flags += 1
            if name not in shown:
                errors.append(f"README names --{name}, which is not a flag")
            elif not same_default(default, shown[name][1]):
                errors.append(f"README: --{name} defaults to {default!r}, --help says {shown[name][1]}")
    listed = {n for names, _, _ in readme_rows(os.path.join(source, "README.md")) for n in names}
    for name in sorted(set(shown) - listed - {"help", "version"}):
        errors.append(f"README's flag table lacks --{name} (it lists every flag --help prints)")
    print(f"{catalog_rows} catalog flags, {readme_flags} README flags, {len(shown)} flags in --help")
    if catalog_rows == 0 or readme_flags == 0:
        errors.append("found no catalog or no README flags")
    for e in errors:
        print("FAIL", e)
    if errors:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
