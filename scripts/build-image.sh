#!/usr/bin/env bash
# Builds the agent's OCI image from a built tree and Debian packages only: no registry, no base image.
#   scripts/build-image.sh [BUILD_DIR]     # default: build; needs root, mmdebstrap and buildah
# Writes BUILD_DIR/image/sockpressure-exporter_<version>.oci.tar (an OCI archive: `podman load`,
# `skopeo copy oci-archive:...`, `buildah pull oci-archive:...`) and leaves the image in buildah's
# local store as ghcr.io/sockpressure/sockpressure-exporter:<version>, the name deploy/ uses.
#
# The image is distroless in shape: the stripped binary, exactly the shared libraries it links (its
# ldd closure, taken from the Debian packages that own them on this machine, unpacked by mmdebstrap),
# the Mozilla CA bundle for https peers, passwd/group entries for root and nobody, and each package's
# copyright file. No shell, no package manager, no apt cache. deploy/image/Containerfile assembles it
# with `buildah bud`; the repository's Dockerfile stays the recipe for `docker build` with registries.
# Finally the binary runs inside the image (`--version`), so an image that cannot start is never written.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
build="${1:-build}"
bin="$build/sockpressure_exporter"
[ -x "$bin" ] || { echo "$bin: not built (cmake --build $build --target sockpressure_exporter)" >&2; exit 2; }
for tool in mmdebstrap buildah ldd dpkg strip; do
  command -v "$tool" >/dev/null || { echo "$tool not found (scripts/install-deps.sh test installs it)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "run as root: mmdebstrap unpacks root-owned files and buildah uses its root store" >&2; exit 2; }

version="$("$bin" --version | sed -n 's/.*version \([0-9][0-9.]*\).*/\1/p' | head -1)"
[ -n "$version" ] || { echo "$bin --version printed no version" >&2; exit 1; }
name="ghcr.io/sockpressure/sockpressure-exporter:$version"
out="$(mkdir -p "$build/image" && cd "$build/image" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/context/rootfs"
mkdir -p "$rootfs"

# The libraries the dynamic loader resolves for this binary, and the loader itself: `ldd` prints
# "soname => /path (addr)" for each and the loader as a bare "/path (addr)".
libraries() {
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u
}

# The Debian package owning a path; usrmerge means dpkg may know it under /lib or /usr/lib.
owner() {
  local p="$1" cand
  for cand in "$p" "$(realpath "$p")" "${p/#\/lib\//\/usr\/lib\/}" "${p/#\/usr\/lib\//\/lib\/}"; do
    dpkg -S "$cand" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  echo "no Debian package owns $p: the image cannot be built from packages" >&2
  return 1
}

# Unpacks the owning packages (and ca-certificates) as Debian ships them, without running their
# maintainer scripts: only files are taken from it.
unpack_packages() {
  local suite pkgs=(ca-certificates) lib
  suite="$(. /etc/os-release && echo "$VERSION_CODENAME")"
  while read -r lib; do pkgs+=("$(owner "$lib")"); done < <(libraries)
  mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
  echo "packages: ${pkgs[*]}"
  printf '%s\n' "${pkgs[@]}" > "$work/packages"
  mkdir -p "$work/debs"
  mmdebstrap --quiet --variant=extract --include="$(IFS=,; echo "${pkgs[*]}")" "$suite" "$work/debs.tar"
  tar -C "$work/debs" -xf "$work/debs.tar"
}

# Finds a library by file name where the packages put it (/lib or /usr/lib, before usrmerge).
unpacked() {
  local base="$1" dir
  for dir in "$work/debs/lib" "$work/debs/usr/lib" "$work/debs/lib64"; do
    local hit
    hit="$(find "$dir" -name "$base" 2>/dev/null | head -1)"
    [ -n "$hit" ] && { echo "$hit"; return 0; }
  done
  echo "$base: not in the unpacked packages" >&2
  return 1
}

# Lays the root out as merged-/usr Debian does: /lib and /lib64 point into /usr, so the loader path
# the binary names (/lib64/ld-linux-x86-64.so.2) and the multiarch library directory both resolve.
stage_root() {
  local lib rel
  mkdir -p "$rootfs"/usr/{bin,lib,lib64} "$rootfs"/etc/ssl/certs "$rootfs/tmp" "$rootfs/usr/share/doc"
  ln -s usr/lib "$rootfs/lib"
  ln -s usr/lib64 "$rootfs/lib64"
  chmod 1777 "$rootfs/tmp"
  strip -o "$rootfs/usr/bin/sockpressure_exporter" "$bin"
  while read -r lib; do
    rel="${lib#/usr}"              # /lib/x86_64-linux-gnu/libc.so.6, /lib64/ld-linux-x86-64.so.2
    mkdir -p "$rootfs/usr$(dirname "$rel")"
    cp -L "$(unpacked "$(basename "$lib")")" "$rootfs/usr$rel"
  done < <(libraries)
  # The bundle update-ca-certificates would write from the same certificates.
  cat "$work"/debs/usr/share/ca-certificates/mozilla/*.crt > "$rootfs/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
    > "$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$rootfs/etc/group"
  stage_licenses
}

# Each shipped package's copyright, and the agent's own licence, as Debian and distroless ship them.
stage_licenses() {
  local pkg
  while read -r pkg; do
    [ -f "$work/debs/usr/share/doc/$pkg/copyright" ] || continue
    mkdir -p "$rootfs/usr/share/doc/$pkg"
    cp "$work/debs/usr/share/doc/$pkg/copyright" "$rootfs/usr/share/doc/$pkg/"
  done < "$work/packages"
  mkdir -p "$rootfs/usr/share/doc/sockpressure-exporter"
  cp "$repo/LICENSE" "$rootfs/usr/share/doc/sockpressure-exporter/"
}

build_image() {
  buildah rmi --force "$name" >/dev/null 2>&1 || true
  buildah bud --quiet --isolation chroot --layers=false --build-arg "VERSION=$version" \
    -f "$repo/deploy/image/Containerfile" -t "$name" "$work/context" >/dev/null
}

# The image must start: run its binary inside it once before anything is written.
self_check() {
  local ctr
  ctr="$(buildah from --quiet "$name")"
  if ! buildah run --isolation chroot "$ctr" -- /usr/bin/sockpressure_exporter --version; then
    buildah rm "$ctr" >/dev/null
    echo "the image's binary does not start" >&2
    return 1
  fi
  buildah rm "$ctr" >/dev/null
}

write_archive() {
  local archive="$out/sockpressure-exporter_${version}.oci.tar"
  rm -f "$archive"
  buildah push --quiet "$name" "oci-archive:$archive:$version" >/dev/null
  echo "image $name"
  echo "archive $archive ($(stat -c %s "$archive") bytes)"
  echo "rootfs $(du -sb --apparent-size "$rootfs" | cut -f1) bytes unpacked"
}

unpack_packages
stage_root
build_image
self_check
write_archive
