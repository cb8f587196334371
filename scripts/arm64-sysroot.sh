#!/usr/bin/env bash
# Makes the arm64 sysroot the cross build links against (cmake/toolchain-aarch64.cmake): Debian's own
# arm64 -dev packages of every library the agent links, and their library dependencies, downloaded with
# apt-get and unpacked with dpkg -x. Nothing is installed and the host's apt sources, dpkg architectures
# and package database are left alone: apt runs with a private configuration, lists and cache here.
#   scripts/arm64-sysroot.sh            # -> .cache/arm64/sysroot (gitignored); a no-op when up to date
# Also writes, for scripts/package.sh and scripts/build-image.sh:
#   .cache/arm64/owners    "path package" for every file of every package (which one ships a library)
#   .cache/arm64/shlibs    the packages' DEBIAN/shlibs (soname -> dependency, dpkg-shlibdeps' fallback)
# Needs apt-get, dpkg-deb and the network to the Debian archive the host's apt sources name.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "arm64-sysroot: $*" >&2; exit 2; }

arch=arm64
cache="$PWD/.cache/$arch"
sysroot="$cache/sysroot"
# The -dev packages of what CMakeLists.txt and bpf/CMakeLists.txt find: the same list as
# scripts/install-deps.sh's libraries (GTest is not here: the cross build builds no tests).
DEV_PKGS=(
  prometheus-cpp-dev libabsl-dev libprotobuf-dev libcpp-httplib-dev libssl-dev zlib1g-dev libcrypt-dev
  libyaml-cpp-dev libbpf-dev libelf-dev
)
# Provided, at the cross compiler's own version, by crossbuild-essential-arm64 (libc6-dev-arm64-cross,
# libstdc++-12-dev-arm64-cross, linux-libc-dev-arm64-cross): a second copy in the sysroot could shadow
# them. They are still downloaded, for their shlibs.
TOOLCHAIN_PKGS=" libc6 libc6-dev libc-dev-bin linux-libc-dev libgcc-s1 gcc-12-base libstdc++6 rpcsvc-proto "

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || fail "$tool not found (a Debian or Ubuntu host is needed)"
done
[ -x /usr/bin/aarch64-linux-gnu-g++ ] ||
  fail "aarch64-linux-gnu-g++ not found: apt-get install crossbuild-essential-arm64 (scripts/install-deps.sh test)"

# The archive the host already uses, so that a mirror or proxy configured there applies here too.
archive_uri() {
  local uri
  uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '/^URIs:/ { print $2 } /^deb / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' |
    grep -m1 '/debian/*$' || true)"
  echo "${uri:-http://deb.debian.org/debian}"
}

suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
[ -n "$suite" ] || fail "/etc/os-release names no VERSION_CODENAME"
mkdir -p "$cache/lists/partial" "$cache/cache/archives/partial" "$cache/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(archive_uri) $suite main" > "$cache/sources.list"
# An empty package database: apt resolves the whole closure instead of counting the host's amd64
# packages as installed.
: > "$cache/status"
APT=(apt-get -q -o Dir::Etc::sourcelist="$cache/sources.list" -o Dir::Etc::sourceparts=/dev/null
     -o Dir::State::Lists="$cache/lists" -o Dir::Cache="$cache/cache" -o Dir::State::status="$cache/status"
     -o APT::Architecture="$arch" -o APT::Architectures="$arch" -o Debug::NoLocking=1
     -o APT::Sandbox::User=root)  # the cache is root's: _apt could not write it

# The package lists are refreshed once a day at most: the sysroot must follow security updates, but a
# rebuild should not hit the network each time.
if [ -z "$(find "$cache/lists" -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null)" ]; then
  "${APT[@]}" update >/dev/null || fail "apt-get update of $(archive_uri) $suite ($arch) failed"
fi

# The closure as apt resolves it for an empty arm64 system (alternatives chosen, no recommends).
mapfile -t pkgs < <("${APT[@]}" -s install --no-install-recommends "${DEV_PKGS[@]}" | awk '/^Inst / { print $2 }')
[ "${#pkgs[@]}" -gt 0 ] || fail "apt-get resolved no packages for: ${DEV_PKGS[*]}"

stamp="$cache/sysroot.packages"
# The exact .deb file names: a new version of any package rebuilds the sysroot.
want="$("${APT[@]}" -qq --print-uris download "${pkgs[@]/%/:$arch}" | awk '{ print $2 }' | sort)"
if [ -f "$stamp" ] && [ "$want" = "$(cat "$stamp")" ] && [ -d "$sysroot" ]; then
  echo "$sysroot: up to date (${#pkgs[@]} packages)"
  exit 0
fi

# Only what is not here yet is downloaded; versions no longer wanted go.
(
  cd "$cache/debs"
  for deb in *.deb; do
    [ -e "$deb" ] && ! grep -qxF "$deb" <<<"$want" && rm -f "$deb"
  done
  missing=()
  for p in "${pkgs[@]}"; do
    compgen -G "${p}_*_*.deb" >/dev/null || missing+=("$p:$arch")
  done
  [ "${#missing[@]}" = 0 ] || "${APT[@]}" download "${missing[@]}" >/dev/null
) || fail "apt-get download failed for: ${pkgs[*]}"
rm -rf "$sysroot" "$cache/owners" "$cache/shlibs"
mkdir -p "$sysroot"
for deb in "$cache"/debs/*.deb; do
  pkg="$(dpkg-deb -f "$deb" Package)"
  ctl="$(mktemp -d)"
  dpkg-deb -e "$deb" "$ctl"
  if [ -f "$ctl/shlibs" ]; then sed '/^#/d' "$ctl/shlibs" >> "$cache/shlibs"; fi
  rm -rf "$ctl"
  dpkg-deb -c "$deb" | awk -v p="$pkg" '$1 !~ /^d/ { sub(/^\./, "", $6); print $6, p }' >> "$cache/owners"
  case "$TOOLCHAIN_PKGS" in *" $pkg "*) continue ;; esac
  dpkg -x "$deb" "$sysroot"
done

# Debian's -dev symlinks are often absolute (/usr/lib/aarch64-linux-gnu/libfoo.so -> /lib/...): point
# them inside the sysroot, or the linker would follow them onto the host.
while read -r link; do
  target="$(readlink "$link")"
  [ -e "$sysroot$target" ] && ln -sfn "$sysroot$target" "$link"
done < <(find "$sysroot" -type l -lname '/*')

echo "$want" > "$stamp"
echo "$sysroot: ${#pkgs[@]} packages ($(du -sh "$sysroot" | cut -f1))"
