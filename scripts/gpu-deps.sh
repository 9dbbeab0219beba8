#!/usr/bin/env bash
# Packs the engine's build dependencies for a GPU machine that has a CUDA torch, a compiler and
# CMake but none of our libraries and no way to download them (the lent H200: see
# docs/BUILDING.md): yaml-cpp, nlohmann-json, CLI11, SQLite, zlib, PCRE2, utf8proc and pkgconf,
# Debian bookworm's packages unpacked into .deps/gpu-sysroot. Run it here, then carry
# .deps/gpu-sysroot (and .deps/gloo) with scripts/gpu-check.sh, which builds against them.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sysroot="$root/.deps/gpu-sysroot"
packages=(libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev libsqlite3-dev libsqlite3-0
  zlib1g-dev zlib1g libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 pkgconf-bin libpkgconf3)

debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
(cd "$debs" && apt-get download "${packages[@]}") \
  || { echo "gpu-deps: apt-get download failed; these packages must come from Debian bookworm's archive: ${packages[*]}" >&2; exit 1; }
rm -rf "$sysroot" && mkdir -p "$sysroot"
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$sysroot"; done
rm -rf "$sysroot/usr/share/doc" "$sysroot/usr/share/man"
# zlib1g puts libz.so.1 in /lib and zlib1g-dev's libz.so points there by absolute path: keep both
# in usr/lib, so the link stays inside the sysroot.
mv "$sysroot"/lib/x86_64-linux-gnu/libz.so* "$sysroot/usr/lib/x86_64-linux-gnu/"
ln -sfn libz.so.1 "$sysroot/usr/lib/x86_64-linux-gnu/libz.so"
echo "gpu-deps: $(du -sh "$sysroot" | cut -f1) in $sysroot"
