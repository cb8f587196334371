#!/usr/bin/env python3
"""No source file in exporter/ is longer than the limit: a longer file is split along a seam, one job a file.

    file_length.py SOURCE_DIR [MAX_LINES]
"""
import os
import sys


def main():
    source = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    errors, files = [], 0
    for folder, _, names in os.walk(os.path.join(source, "exporter")):
        for name in sorted(names):
            if not name.endswith((".cc", ".h")):
                continue
            path = os.path.join(folder, name)
            files += 1
            with open(path, encoding="utf-8") as f:
                lines = sum(1 for _ in f)
            if lines > limit:
                errors.append(f"{os.path.relpath(path, source)}: {lines} lines, over {limit}")
    print(f"{files} source files in exporter/, limit {limit} lines")
    if files < 50:
        errors.append(f"found only {files} source files: wrong SOURCE_DIR?")
    for e in errors:
        print("FAIL", e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
