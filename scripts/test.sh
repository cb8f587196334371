#!/usr/bin/env bash
# Installs everything, builds (and cross-builds for arm64), and runs every test
# (unit, end-to-end, real Prometheus/Alertmanager, eBPF on this kernel, the
# monitoring bundle, the arm64 artifacts, and the QEMU kernel lab). Run as
# root: the eBPF tests load programs and the network tests create their own
# network namespaces.
#   scripts/test.sh            # everything
#   scripts/test.sh -L unit    # extra arguments go to ctest (then no sanitizers/fuzzing)
# Without arguments it then runs the sanitizer builds (scripts/sanitizers.sh:
# ASan+UBSan, TSan) and every fuzz target for FUZZ_SECONDS (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# Three builds (Release, sanitizers, fuzzing) on two cores: reuse objects
# compiled before on this machine, also from another clone (paths are hashed
# relative to the checkout).
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
fi
# Each stage's wall time, printed at the end (the README and docs/benchmarks.md quote them).
stages=()
stage() {
  local name="$1" t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  stages+=("$(printf '%-40s %5d s%s' "$name" $((SECONDS - t0)) "$([ $rc = 0 ] || echo " (failed, $rc)")")")
  return $rc
}
report() {
  echo "== stage times"
  printf '%s\n' "${stages[@]}"
  printf '%-40s %5d s\n' "total" "$SECONDS"
}
trap report EXIT
failed() {
  # CI shows the start and the end of this log: repeat what failed at the end.
  echo "== failed tests"; cat build/Testing/Temporary/LastTestsFailed.log 2>/dev/null || true
  lab=build/tests/lab/lab-results/failed-checks.txt
  if [ -s "$lab" ]; then echo "== failed lab checks"; head -80 "$lab"; fi
  exit 1
}
build() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j"$(nproc)"
}
stage "install (apt-get)" scripts/install-deps.sh test
stage "Release build" build
# The arm64 agent, cross-compiled (docs/arm64.md); ctest -L cross checks what it built.
stage "arm64 cross build" scripts/cross-build.sh --arch arm64 build-arm64
if [ "$#" -gt 0 ]; then
  stage "ctest $*" ctest --test-dir build --output-on-failure --timeout 1800 "$@" || failed
  exit 0
fi
# The tests other than the lab run two at a time (none needs a core of its own); the lab boots QEMU,
# whose two emulated CPUs want both cores, so it runs alone after them.
stage "ctest, all but the lab (-j$(nproc))" ctest --test-dir build --output-on-failure --timeout 1800 -LE lab \
  -j"$(nproc)" || failed
# The arm64 lab (label lab-arm64, opt-in: SOCKPRESSURE_LAB_ARM64=1) is left out: it does not fit CI's budget.
stage "ctest -L lab (QEMU kernel lab)" ctest --test-dir build --output-on-failure --timeout 3600 -L lab \
  -LE lab-arm64 || failed
stage "ASan+UBSan build and tests" scripts/sanitizers.sh asan
stage "TSan build and tests" scripts/sanitizers.sh tsan
stage "fuzzing" scripts/fuzz.sh
