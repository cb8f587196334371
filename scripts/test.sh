#!/usr/bin/env bash
# Installs everything, builds, and runs every test (unit, end-to-end, real
# Prometheus/Alertmanager, eBPF on this kernel, the monitoring bundle, and the
# QEMU kernel lab). Run as root: the eBPF tests load programs and the network
# tests create their own network namespaces.
#   scripts/test.sh            # everything
#   scripts/test.sh -L unit    # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure --timeout 1800 "$@"
