#!/usr/bin/env bash
# Sampling benchmark: the agent's cgroupfs walk + state update on generated
# Kubernetes-shaped trees of 1,000, 10,000 and 50,000 cgroups, with 1 % and
# with every cgroup reclaiming (the bench moves their memory.stat counters,
# and their ancestors', before every cycle), against a peer measured in the
# same process and run: open/read/close of exactly the files the agent
# serves at the same cadence, no parsing. Both profiles: core (memory.stat)
# and context (plus the ten slow files on the full pass). Then a late
# starter and /metrics render time and RSS.
#   bench/run.sh BUILD_DIR [SIZES...]
set -euo pipefail
BUILD="${1:-build}"; shift || true
SIZES=("${@:-1000 10000 50000}")
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for n in ${SIZES[*]}; do
  python3 "$HERE/make_tree.py" "$WORK/t$n" "$n"
  "$BUILD/bench/sample_bench" "$WORK/t$n" $(( n >= 50000 ? 10 : n >= 10000 ? 20 : 100 )) 1 100
  rm -rf "$WORK/t$n"
done
