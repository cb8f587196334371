#!/usr/bin/env bash
# Cross-builds the agent for another architecture on this x86-64 Debian host (docs/arm64.md): the sysroot
# of Debian's arm64 packages (scripts/arm64-sysroot.sh), a Release tree configured with
# cmake/toolchain-aarch64.cmake, and the agent target only (tests and benchmarks do not run here).
#   scripts/cross-build.sh [--arch arm64] [BUILD_DIR]     # default: build-arm64
# Then scripts/package.sh --arch arm64 and scripts/build-image.sh --arch arm64 take that tree.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "cross-build.sh: $*" >&2; exit 2; }
arch=arm64
if [ "${1:-}" = --arch ]; then
  arch="${2:-}"
  shift 2 || true
fi
# One toolchain file per target; arm64 is the only one so far.
[ "$arch" = arm64 ] || fail "no toolchain for '$arch' (cmake/toolchain-aarch64.cmake is arm64's)"
build="${1:-build-$arch}"
command -v aarch64-linux-gnu-g++ >/dev/null ||
  fail "aarch64-linux-gnu-g++ not found: apt-get install crossbuild-essential-arm64 (scripts/install-deps.sh test)"
# Reuse objects compiled before, also from another clone (paths hashed relative to the checkout).
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
fi
scripts/arm64-sysroot.sh
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target sockpressure_exporter
file -L "$build/sockpressure_exporter"
