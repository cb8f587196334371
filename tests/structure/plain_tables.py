#!/usr/bin/env python3
"""Tables are plain C++ beside their code (docs/structure.md): no JSON catalog under exporter/ and no code
written from one at build time (an included .inc file).

    plain_tables.py SOURCE_DIR
"""
import os
import re
import sys


def main():
    source = sys.argv[1]
    errors, files = [], 0
    for folder, _, names in os.walk(os.path.join(source, "exporter")):
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, source)
            if name.endswith(".json"):
                errors.append(f"{rel}: a JSON catalog; write the table as C++ in the .cc that uses it")
            if name.endswith((".cc", ".h", "CMakeLists.txt")):
                files += 1
                with open(path, encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        if re.match(r'\s*#\s*include\s+"[^"]+\.inc"', line) or "sp_catalog(" in line:
                            errors.append(f"{rel}:{n}: code generated from a catalog: {line.strip()}")
    print(f"{files} source files under exporter/")
    if files < 50:
        errors.append(f"found only {files} source files: wrong SOURCE_DIR?")
    for e in errors:
        print("FAIL", e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
