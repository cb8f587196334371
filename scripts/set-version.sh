#!/usr/bin/env bash
# Set the release version. The one source is `project(sockpressure VERSION x.y.z)` in the top-level
# CMakeLists.txt (it reaches --version, sockpressure_build_info and the .deb through version.h and
# CPack); the files below cannot read CMake, so this script writes the same version into them and
# tests/e2e/version_test.py fails when any of them disagrees.
#   scripts/set-version.sh 0.2.0
set -euo pipefail
new="${1:?usage: set-version.sh X.Y.Z}"
[[ "$new" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "not a version: $new" >&2; exit 2; }
cd "$(dirname "$0")/.."
image=ghcr.io/sockpressure/sockpressure-exporter

sed -i -E "s/^(project\(sockpressure VERSION )[0-9.]+/\1$new/" CMakeLists.txt
# The image tag: kustomize's images entry, the DaemonSet's own reference and the build example.
sed -i -E "s/^(    newTag: )[0-9.]+$/\1$new/" deploy/base/kustomization.yaml deploy/README.md
sed -i -E "s|($image):[0-9.]+|\1:$new|" deploy/base/daemonset.yaml Dockerfile
# The Helm chart: its version and appVersion (the image tag defaults to appVersion).
sed -i -E "s/^(version: )[0-9.]+$/\1$new/; s/^(appVersion: )\"[0-9.]+\"$/\1\"$new\"/" deploy/helm/sockpressure-exporter/Chart.yaml
echo "version $new; add its CHANGELOG.md section"
