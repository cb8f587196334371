#!/usr/bin/env bash
# Quick start: install the build dependencies, build, and run the agent on
# this machine with its defaults (metrics on http://localhost:19100/metrics).
# Extra arguments are passed to the agent, e.g. scripts/run.sh --log.level=debug
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"   # eBPF probes need root (or CAP_BPF+CAP_PERFMON)
echo "starting: build/sockpressure_exporter $* (Ctrl-C to stop)"
exec $SUDO build/sockpressure_exporter "$@"
