#!/usr/bin/env bash
# Installs what sockpressure needs from Debian 12 / Ubuntu packages.
#   scripts/install-deps.sh build   # compilers and libraries only
#   scripts/install-deps.sh test    # + everything the test suite drives for real
# Idempotent; needs root (or sudo).
set -euo pipefail
what="${1:-build}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get install -y -q -o DPkg::Lock::Timeout=900)

BUILD_PKGS=(
  build-essential cmake pkg-config git ca-certificates ccache
  prometheus-cpp-dev libabsl-dev libprotobuf-dev protobuf-compiler
  libcpp-httplib-dev libssl-dev zlib1g-dev libcrypt-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev
  libbpf-dev libelf-dev bpftool clang llvm
  python3  # the tests, the lab and the benchmarks
)
# Servers and tools the tests run for real: Prometheus, Alertmanager, node_exporter,
# promtool/amtool, a browser, the QEMU kernel lab, netns tooling, linters.
TEST_PKGS=(
  prometheus prometheus-alertmanager prometheus-node-exporter yamllint python3 python3-jsonschema jsonnet
  chromium openssl curl iproute2 procps psmisc
  # The lab's proxy condition also needs fio and nginx: tests/lab/build-guest downloads their debs
  # (apt-get download) and unpacks them for the guest, never installs them (nginx would start here).
  qemu-system-x86 busybox-static e2fsprogs cpio kmod zstd xz-utils gzip util-linux binutils systemd
  # The arm64 lab (tests/lab/run --arch arm64, ctest -L lab-arm64): qemu-system-aarch64 -M virt boots the
  # kernel directly (no firmware); its busybox and iproute2 are arm64 debs the lab downloads and unpacks.
  qemu-system-arm
  clang-14 libclang-rt-14-dev
  mmdebstrap buildah  # the release image (scripts/build-image.sh), without a registry
  # The arm64 cross build (scripts/cross-build.sh): compiler, libc and libstdc++; the other arm64
  # libraries are unpacked into a sysroot by scripts/arm64-sysroot.sh, never installed.
  crossbuild-essential-arm64 file
)

missing() {  # prints the packages of "$@" that are not installed
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

pkgs=("${BUILD_PKGS[@]}")
if [ "$what" = test ]; then
  pkgs+=("${TEST_PKGS[@]}")
  # Node.js runs the offline Kubernetes schema validation. Some images ship
  # it from elsewhere with npm bundled, where Debian's npm would conflict:
  # install it only when there is no node/npm at all.
  command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
fi
todo=$(missing "${pkgs[@]}")
if [ -n "$todo" ]; then
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO "${APT[@]}" --no-install-recommends $todo
fi
# policy-rc.d may forbid starting services; the tests start their own
# Prometheus and Alertmanager on loopback ports anyway.
echo "dependencies ($what) installed"
