#!/usr/bin/env bash
# Builds the agent's OCI image from a built tree and Debian packages only: no registry, no base image.
#   scripts/build-image.sh [--arch ARCH] [BUILD_DIR]     # needs root, mmdebstrap and buildah
#     ARCH: Debian's name (amd64, arm64), default this machine's; BUILD_DIR: default build for this
#     machine's architecture, build-ARCH for another (scripts/cross-build.sh).
# Writes BUILD_DIR/image/sockpressure-exporter_<version>_<arch>.oci.tar (an OCI archive: `podman load`,
# `skopeo copy oci-archive:...`, `buildah pull oci-archive:...`) and leaves the image in buildah's local
# store: as ghcr.io/sockpressure/sockpressure-exporter:<version>, the name deploy/ uses, when it is this
# machine's architecture (the one it can run), as ...:<version>-<arch> otherwise.
# Then it writes the image index of every architecture of this version in the store (the one just built
# and the other if built before) to BUILD_DIR/image/sockpressure-exporter_<version>.oci.tar: what a
# registry gets (`skopeo copy --all`), and what a node of either architecture imports its image from.
#
# The image is distroless in shape: the stripped binary, exactly the shared libraries it links (its
# ldd closure, taken from the Debian packages that own them on this machine, unpacked by mmdebstrap),
# the Mozilla CA bundle for https peers, passwd/group entries for root and nobody, and each package's
# copyright file. No shell, no package manager, no apt cache. deploy/image/Containerfile assembles it
# with `buildah bud`; the repository's Dockerfile stays the recipe for `docker build` with registries.
# Finally the binary runs inside the image (`--version`), so an image that cannot start is never written.
# Another architecture's binary cannot run here (no emulator is assumed): its image is checked instead
# for every library each ELF file in it needs, and for the loader the binary names.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
fail() { echo "build-image.sh: $*" >&2; exit 2; }
host_arch="$(dpkg --print-architecture)"
arch="$host_arch"
if [ "${1:-}" = --arch ]; then
  [ -n "${2:-}" ] || fail "--arch needs a value (amd64, arm64)"
  arch="$2"
  shift 2
fi
native=false
[ "$arch" = "$host_arch" ] && native=true
default_build=build
$native || default_build="build-$arch"
build="${1:-$default_build}"
bin="$build/sockpressure_exporter"
[ -x "$bin" ] || fail "$bin: not built ($($native && echo "cmake --build $build --target sockpressure_exporter" ||
  echo "scripts/cross-build.sh --arch $arch $build"))"
command -v dpkg-architecture >/dev/null || fail "dpkg-architecture not found (apt-get install dpkg-dev)"
# The GNU triplet names the multiarch library directory and the cross binutils.
triplet="$(dpkg-architecture -a"$arch" -qDEB_HOST_MULTIARCH 2>/dev/null)" || fail "dpkg knows no architecture '$arch'"
tools=(mmdebstrap buildah dpkg)
if $native; then
  strip=strip readelf=readelf
  tools+=(ldd)
else
  strip="$triplet-strip" readelf="$triplet-readelf"
fi
for tool in "${tools[@]}" "$strip" "$readelf"; do
  command -v "$tool" >/dev/null || fail "$tool not found (scripts/install-deps.sh test installs it)"
done
[ "$(id -u)" = 0 ] || fail "run as root: mmdebstrap unpacks root-owned files and buildah uses its root store"
# The binary must be the architecture asked for: an amd64 tree passed with --arch arm64 is refused.
machine="$("$readelf" -h "$bin" | sed -n 's/^ *Machine: *//p')"
case "$arch:$machine" in
  amd64:*X86-64* | arm64:*AArch64*) ;;
  *) fail "$bin is a '$machine' binary, not $arch" ;;
esac

# The project's version, as --version prints it (read from the tree: a foreign binary cannot say it).
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")"
[ -n "$version" ] || fail "$build/CMakeCache.txt has no CMAKE_PROJECT_VERSION"
repository=ghcr.io/sockpressure/sockpressure-exporter
image_name() {  # the local store's name of the image of architecture $1
  if [ "$1" = "$host_arch" ]; then echo "$repository:$version"; else echo "$repository:$version-$1"; fi
}
name="$(image_name "$arch")"
out="$(mkdir -p "$build/image" && cd "$build/image" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/context/rootfs"
mkdir -p "$rootfs"

# The libraries the dynamic loader resolves for this binary, and the loader itself. Natively `ldd`
# prints "soname => /path (addr)" for each and the loader as a bare "/path (addr)". ldd runs the
# binary's loader, so another architecture's closure is followed through the ELF files instead: each
# NEEDED soname, found in the sysroot of that architecture's Debian packages (scripts/arm64-sysroot.sh)
# or the cross toolchain's libc, and the PT_INTERP loader; printed as the paths the image holds them at.
libraries() {
  if $native; then
    ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u
    return
  fi
  local todo=("$bin") f soname interp seen
  interp="$(interpreter "$bin")"
  echo "$interp"
  # libc names the loader too: it is the loader already there, not a library to look up.
  seen=" $(basename "$interp") "
  while [ "${#todo[@]}" -gt 0 ]; do
    f="${todo[0]}"
    todo=("${todo[@]:1}")
    for soname in $("$readelf" -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case "$seen" in *" $soname "*) continue ;; esac
      seen+="$soname "
      echo "/usr/lib/$triplet/$soname"
      todo+=("$(foreign_lib "$soname")")
    done
  done | sort -u
}

interpreter() {  # the loader an ELF executable names (PT_INTERP)
  "$readelf" -l "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p'
}

# Where the build machine has a copy of another architecture's library, to read its NEEDED entries.
foreign_lib() {
  local dir
  for dir in "$repo/.cache/$arch/sysroot/lib/$triplet" "$repo/.cache/$arch/sysroot/usr/lib/$triplet" "/usr/$triplet/lib"; do
    [ -e "$dir/$1" ] && { echo "$dir/$1"; return 0; }
  done
  echo "$1: in neither the $arch sysroot nor /usr/$triplet/lib (scripts/arm64-sysroot.sh)" >&2
  return 1
}

# The Debian package owning a path; usrmerge means dpkg may know it under /lib or /usr/lib. Another
# architecture's packages are not installed here: scripts/arm64-sysroot.sh listed every file of them.
owner() {
  local p="$1" cand
  if ! $native; then
    awk -v f="$(basename "$p")" '{ n = split($1, a, "/") } a[n] == f && $1 ~ /^\/(usr\/)?lib/ { print $2; exit }' \
      "$repo/.cache/$arch/owners" | grep . && return 0
  else
    for cand in "$p" "$(realpath "$p")" "${p/#\/lib\//\/usr\/lib\/}" "${p/#\/usr\/lib\//\/lib\/}"; do
      dpkg -S "$cand" 2>/dev/null | head -1 | cut -d: -f1 && return 0
    done
  fi
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
  # extract only unpacks: no maintainer script runs, so another architecture needs no emulator.
  mmdebstrap --quiet --variant=extract --architectures="$arch" --include="$(IFS=,; echo "${pkgs[*]}")" \
    "$suite" "$work/debs.tar"
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
# the binary names (/lib64/ld-linux-x86-64.so.2, /lib/ld-linux-aarch64.so.1) and the multiarch library
# directory both resolve.
stage_root() {
  local lib rel
  mkdir -p "$rootfs"/usr/{bin,lib,lib64} "$rootfs"/etc/ssl/certs "$rootfs/tmp" "$rootfs/usr/share/doc"
  ln -s usr/lib "$rootfs/lib"
  ln -s usr/lib64 "$rootfs/lib64"
  chmod 1777 "$rootfs/tmp"
  "$strip" -o "$rootfs/usr/bin/sockpressure_exporter" "$bin"
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
  # --platform: the config says which architecture the files are for (the index is made from it);
  # the Containerfile only copies, so nothing of that architecture runs here.
  buildah bud --quiet --isolation chroot --layers=false --platform "linux/$arch" --build-arg "VERSION=$version" \
    -f "$repo/deploy/image/Containerfile" -t "$name" "$work/context" >/dev/null
}

# The image must start: run its binary inside it once before anything is written. Another
# architecture's cannot run here: every ELF file in its root must find each library it needs there, and
# the binary its loader.
self_check() {
  local ctr
  if ! $native; then
    check_foreign_root
    return
  fi
  ctr="$(buildah from --quiet "$name")"
  if ! buildah run --isolation chroot "$ctr" -- /usr/bin/sockpressure_exporter --version; then
    buildah rm "$ctr" >/dev/null
    echo "the image's binary does not start" >&2
    return 1
  fi
  buildah rm "$ctr" >/dev/null
}

check_foreign_root() {
  local interp f soname missing=0
  interp="$(interpreter "$rootfs/usr/bin/sockpressure_exporter")"
  [ -e "$rootfs$interp" ] || { echo "the image lacks the loader $interp" >&2; missing=1; }
  while read -r f; do
    "$readelf" -h "$f" >/dev/null 2>&1 || continue
    for soname in $("$readelf" -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ "$soname" = "$(basename "$interp")" ] || [ -e "$rootfs/usr/lib/$triplet/$soname" ] || { echo "${f#"$rootfs"} needs $soname, not in the image" >&2; missing=1; }
    done
  done < <(find "$rootfs/usr/bin" "$rootfs/usr/lib" -type f)
  [ "$missing" = 0 ] || return 1
  echo "$arch image: the loader and every library its ELF files need are in it (not run: no $arch CPU here)"
}

write_archive() {
  local archive="$out/sockpressure-exporter_${version}_${arch}.oci.tar"
  rm -f "$archive"
  # The full name as the reference: podman load and ctr images import name the image as deploy/ pulls it.
  buildah push --quiet "$name" "oci-archive:$archive:$repository:$version" >/dev/null
  echo "image $name"
  echo "archive $archive ($(stat -c %s "$archive") bytes)"
  echo "rootfs $(du -sb --apparent-size "$rootfs" | cut -f1) bytes unpacked"
}

# The image index of every architecture of this version in the store, as an OCI archive.
write_index() {
  local list="localhost/sockpressure-exporter-index:$version" index="$out/sockpressure-exporter_${version}.oci.tar"
  local a arches=()
  buildah manifest rm "$list" >/dev/null 2>&1 || true
  buildah manifest create "$list" >/dev/null
  for a in amd64 arm64; do
    buildah inspect --type image "$(image_name "$a")" >/dev/null 2>&1 || continue
    buildah manifest add "$list" "containers-storage:$(image_name "$a")" >/dev/null
    arches+=("$a")
  done
  rm -f "$index"
  buildah manifest push --quiet --all "$list" "oci-archive:$index:$repository:$version" >/dev/null
  buildah manifest rm "$list" >/dev/null
  echo "index $index (${arches[*]}; $(stat -c %s "$index") bytes)"
}

unpack_packages
stage_root
build_image
self_check
write_archive
write_index
