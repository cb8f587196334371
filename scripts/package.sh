#!/usr/bin/env bash
# Builds the release artifacts from a configured build tree (cmake/packaging.cmake): the .deb and the
# binary tarball, into BUILD_DIR/packages, with a SHA256SUMS beside them (`sha256sum -c SHA256SUMS`
# verifies a download). Prints each artifact and its sum: what a release job uploads.
#   scripts/package.sh [--arch ARCH] [BUILD_DIR]
#     ARCH: Debian's name (amd64, arm64); default this machine's. BUILD_DIR: default build for this
#     machine's architecture, build-ARCH for another (scripts/cross-build.sh configures it).
# It builds the agent target first (a no-op when it is up to date), so the artifacts hold the tree's binary.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "package.sh: $*" >&2; exit 2; }
host_arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
arch="$host_arch"
if [ "${1:-}" = --arch ]; then
  [ -n "${2:-}" ] || fail "--arch needs a value (amd64, arm64)"
  arch="$2"
  shift 2
fi
default_build=build
[ "$arch" = "$host_arch" ] || default_build="build-$arch"
build="${1:-$default_build}"
hint="cmake -S . -B $build"
[ "$arch" = "$host_arch" ] || hint="scripts/cross-build.sh --arch $arch $build"
[ -f "$build/CMakeCache.txt" ] || fail "$build: not a configured build tree (no CMakeCache.txt; $hint)"
build="$(cd "$build" && pwd)"
out="$build/packages"

# Also re-runs cmake when a CMakeLists.txt changed, which writes CPackConfig.cmake.
cmake --build "$build" -j"$(nproc)" --target sockpressure_exporter
[ -f "$build/CPackConfig.cmake" ] || fail "$build: no CPackConfig.cmake (cmake/packaging.cmake not included?)"
# The tree decides what is built: refuse a tree of another architecture than the one asked for.
tree_arch="$(sed -n 's/^set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")"
[ "$tree_arch" = "$arch" ] || fail "$build builds for ${tree_arch:-an unknown architecture}, not $arch ($hint)"
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
