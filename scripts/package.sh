#!/usr/bin/env bash
# Builds the release artifacts from a configured build tree (cmake/packaging.cmake): the .deb and the
# binary tarball, into BUILD_DIR/packages, with a SHA256SUMS beside them (`sha256sum -c SHA256SUMS`
# verifies a download). Prints each artifact and its sum: what a release job uploads.
#   scripts/package.sh [BUILD_DIR]     # default: build
# It builds the agent target first (a no-op when it is up to date), so the artifacts hold the tree's binary.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
[ -f "$build/CMakeCache.txt" ] || { echo "$build: not a configured build tree (no CMakeCache.txt)" >&2; exit 2; }
build="$(cd "$build" && pwd)"
out="$build/packages"

# Also re-runs cmake when a CMakeLists.txt changed, which writes CPackConfig.cmake.
cmake --build "$build" -j"$(nproc)" --target sockpressure_exporter
[ -f "$build/CPackConfig.cmake" ] || { echo "$build: no CPackConfig.cmake (cmake/packaging.cmake not included?)" >&2; exit 2; }
# Only this run's artifacts, so that SHA256SUMS lists no stale version.
rm -rf "$out"
mkdir -p "$out"
(cd "$build" && cpack --config CPackConfig.cmake -B "$out")
# cpack stages under -B: keep only what is uploaded.
rm -rf "$out/_CPack_Packages"

cd "$out"
shopt -s nullglob
artifacts=(*.deb *.tar.gz)
[ "${#artifacts[@]}" -eq 2 ] || { echo "expected one .deb and one .tar.gz in $out, got: ${artifacts[*]}" >&2; exit 1; }
sha256sum "${artifacts[@]}" > SHA256SUMS
echo "artifacts in $out:"
cat SHA256SUMS
