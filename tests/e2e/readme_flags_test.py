#!/usr/bin/env python3
"""The flags registered in the source, --help and the README's flag table agree.

    readme_flags_test.py AGENT SOURCE_DIR

Every flag the source registers with a literal name and help text
(flags->String("name", &field, "help"), in exporter/**/*.cc) is a flag of
the binary with that help text, every flag in --help has a help text and
(but --help and --version) a default, and every flag the README's "## Flags"
table names exists with the default the table gives. The table lists every
flag --help prints, so a flag missing from it is an error too.
"""
import ast
import glob
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
            body, sep, default = line.strip().rpartition(" (default: ")
            flags[name] = (body, default[:-1]) if sep else (line.strip(), "")
            name = None
    if not flags:
        sys.exit(f"no flags in {agent} --help:\n{text}")
    return flags


# flags->Kind("name", &field, "help" "more help") or flags.Kind(...): the
# help may be several adjacent string literals.
REGISTRATION = re.compile(
    r'flags(?:->|\.)(?:String|Bool|Int|Duration|StringList)\(\s*("(?:[^"\\]|\\.)*")\s*,\s*[^,;]+,'
    r'\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)')
LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')


def source_flags(source):
    """(file, name, help) for each flag registration in the exporter's source."""
    for path in sorted(glob.glob(os.path.join(source, "exporter", "**", "*.cc"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in REGISTRATION.finditer(text):
            name = ast.literal_eval(m.group(1))
            help_text = "".join(ast.literal_eval(lit) for lit in LITERAL.findall(m.group(2)))
            yield os.path.relpath(path, source), name, help_text


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
    errors, registered = [], set()
    for path, name, help_text in source_flags(source):
        where = f"{path}: --{name}"
        if name in registered:
            errors.append(f"{where} is registered twice")
        registered.add(name)
        if name not in shown:
            errors.append(f"{where} is not in --help")
        elif not shown[name][0].startswith(help_text):
            errors.append(f"{where}: --help says {shown[name][0]!r}")
    for name, (help_text, default) in shown.items():
        # --help and --version are actions, not values: they have no default.
        if not help_text or (not default and name not in ("help", "version")):
            errors.append(f"--help shows --{name} without a help text or a default")
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
    print(f"{len(registered)} flags in the source, {readme_flags} README flags, {len(shown)} flags in --help")
    if not registered or readme_flags == 0:
        errors.append("found no flags in the source or none in the README")
    for e in errors:
        print("FAIL", e)
    if errors:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
