#!/usr/bin/env python3
"""Adds reclaim activity to one cgroup of a cgroup v2 fixture tree.

usage: bump.py CGROUP_ROOT /path/of/cgroup SCANNED RECLAIMED

memory.stat is hierarchical, so the same amounts are added to every
ancestor too, as the kernel's counters would show them. Each file is
replaced with rename(2), so a reader never sees half a file; like the
kernel's own files, a parent and its child may be read on either side of
an update, which the agent must absorb.
"""
import os
import sys


def bump(root, path, scanned, reclaimed):
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        stat = os.path.join(root, *parts[:depth], "memory.stat")
        lines = []
        with open(stat) as f:
            for line in f:
                key, _, value = line.strip().partition(" ")
                if key in ("pgscan", "pgscan_kswapd"):
                    value = str(int(value) + scanned)
                elif key in ("pgsteal", "pgsteal_kswapd"):
                    value = str(int(value) + reclaimed)
                lines.append("%s %s\n" % (key, value))
        tmp = stat + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(lines)
        os.rename(tmp, stat)


if __name__ == "__main__":
    bump(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
