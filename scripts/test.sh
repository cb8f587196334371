#!/usr/bin/env bash
# Installs everything, builds, and runs every test (unit, end-to-end, real
# Prometheus/Alertmanager, eBPF on this kernel, the monitoring bundle, and the
# QEMU kernel lab). Run as root: the eBPF tests load programs and the network
# tests create their own network namespaces.
#   scripts/test.sh            # everything
#   scripts/test.sh -L unit    # extra arguments go to ctest (then no sanitizers/fuzzing)
# Without arguments it then runs the sanitizer builds (scripts/sanitizers.sh:
# ASan+UBSan, TSan) and every fuzz target for FUZZ_SECONDS (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
# Three builds (Release, sanitizers, fuzzing) on two cores: reuse objects
# compiled before on this machine, also from another clone (paths are hashed
# relative to the checkout).
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
if ! ctest --test-dir build --output-on-failure --timeout 1800 "$@"; then
  # CI shows the start and the end of this log: repeat what failed at the end.
  echo "== failed tests"; cat build/Testing/Temporary/LastTestsFailed.log 2>/dev/null || true
  lab=build/tests/lab/lab-results/failed-checks.txt
  if [ -s "$lab" ]; then echo "== failed lab checks"; head -80 "$lab"; fi
  exit 1
fi
if [ "$#" -eq 0 ]; then
  scripts/sanitizers.sh
  scripts/fuzz.sh
fi
