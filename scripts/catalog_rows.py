#!/usr/bin/env python3
"""Writes the rows of a declarative C++ table from its JSON catalog.

    catalog_rows.py CATALOG.json OUT.inc

Flag and metric family tables (names, help texts, the field each one binds)
are kept as data, and one place (the .cc that includes OUT.inc) gives them
meaning. The catalog holds:

    "row":  how one row is written, a str.format template over a row's keys;
            {key:q} writes the value as a C++ string literal, {key} as is
            (a field or expression of the including code)
    "rows": the rows, in order

Each row is written as "{<row>},", one a line, so the including code wraps
the file in its own braces. The build runs this (exporter/CMakeLists.txt,
sp_catalog); the output lives in the build tree only.
"""
import json
import os
import string
import sys


def cpp_string(text):
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class RowFormatter(string.Formatter):
    def format_field(self, value, spec):
        if spec == "q":
            if not isinstance(value, str):
                raise ValueError(f"{value!r} is not text")
            return cpp_string(value)
        return super().format_field(value, spec)


def main(argv):
    if len(argv) != 3:
        sys.exit(f"usage: {argv[0]} CATALOG.json OUT.inc")
    path, out_path = argv[1], argv[2]
    with open(path, encoding="utf-8") as f:
        catalog = json.load(f)
    formatter = RowFormatter()
    lines = [f"// Generated from {os.path.basename(path)} by catalog_rows.py: edit the catalog, not this."]
    for i, row in enumerate(catalog["rows"]):
        try:
            lines.append("{" + formatter.format(catalog["row"], **row) + "},")
        except (KeyError, ValueError) as e:
            sys.exit(f"{path}: row {i + 1}: {e}")
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv)
