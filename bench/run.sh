#!/usr/bin/env bash
# Sampling benchmark: the agent's cgroupfs walk + state update on generated
# trees of 1,000 and 10,000 cgroups, against a peer measured in the same run:
# `cat` of exactly the files the agent reads (the floor for any reader of
# these files). Usage: bench/run.sh BUILD_DIR
set -euo pipefail
BUILD="${1:-build}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for n in 1000 10000; do
  python3 "$HERE/make_tree.py" "$WORK/t$n" "$n"
  cycles=$(( n >= 10000 ? 10 : 50 ))
  agent="$("$BUILD/bench/sample_bench" "$WORK/t$n" "$cycles")"
  # Peer: read the same files once per cycle with cat (one process per 1,000 files).
  start=$(date +%s.%N)
  for _ in $(seq "$cycles"); do
    find "$WORK/t$n" -type f -name 'memory.*' -print0 | xargs -0 -n 1000 cat >/dev/null
  done
  end=$(date +%s.%N)
  peer_ms=$(python3 -c "print('%.2f' % ((float('$end') - float('$start')) * 1000 / $cycles))")
  agent_ms=$(sed -E 's/.*cpu_ms_per_cycle=([0-9.]+).*/\1/' <<<"$agent")
  ratio=$(python3 -c "print('%.2f' % ($agent_ms / $peer_ms))")
  echo "$agent peer_cat_wall_ms_per_cycle=$peer_ms agent_cpu_over_peer_wall=$ratio"
done
