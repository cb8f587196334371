#!/usr/bin/env bash
# Sampling benchmark: the agent's cgroupfs walk + state update on generated
# trees of 1,000 and 10,000 cgroups, against a peer measured in the same
# process and run: reading exactly the same files with open/read/close and
# no parsing (the floor for any reader of these files). Also /metrics render
# time and RSS. Usage: bench/run.sh BUILD_DIR
set -euo pipefail
BUILD="${1:-build}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for n in 1000 10000; do
  python3 "$HERE/make_tree.py" "$WORK/t$n" "$n"
  "$BUILD/bench/sample_bench" "$WORK/t$n" $(( n >= 10000 ? 20 : 100 ))
done
