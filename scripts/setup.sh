#!/usr/bin/env bash
# Installs everything Shardscope's build and tests need on a fresh Debian (bookworm) machine.
#
# Idempotent: every step checks first and does nothing when its result is already there, so a
# second run on a set-up machine downloads nothing. What it installs:
#   1. Debian packages: compilers and build tools, Qt 6, QCustomPlot (Qt 6 build), yaml-cpp,
#      SQLite, nlohmann-json, CLI11, Xvfb (for screenshots), SLURM's daemons and client with munge
#      (the tests' cluster: scripts/slurm-cluster.sh starts one on this machine), OpenSSH's server
#      and client (the tests' login node: an sshd of their own on 127.0.0.1; on a machine with
#      systemd the package also enables the system's sshd, as any install of it does).
#   2. Gloo headers (libgloo-dev from Debian sid) into .deps/gloo: the torch wheel ships
#      ProcessGroupGloo.hpp but not the gloo headers it includes. See docs/BUILDING.md.
#   3. A project-local virtual environment .venv with the pinned PyTorch wheel (libtorch comes
#      from it) and the Python references used by tests/tools, installed from a wheelhouse cached
#      outside the checkout ($SHARDSCOPE_CACHE, default ~/.cache/shardscope), so that a fresh
#      clone on the same machine does not download the wheels again.
#
# Options:
#   --torch-prefix DIR   use an existing torch installation instead of the pinned wheel: DIR is
#                        the torch package folder (the one holding include/, lib/, share/cmake/),
#                        e.g. "$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')".
#                        It is recorded in .deps/torch-prefix and used by the build.
#   --no-apt             do not install Debian packages (report what is missing instead).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SHARDSCOPE_CACHE:-$HOME/.cache/shardscope}
deps="$root/.deps"
venv="$root/.venv"
torch_prefix=""
use_apt=1

while [ $# -gt 0 ]; do
  case "$1" in
    --torch-prefix) torch_prefix=${2:?--torch-prefix needs a folder}; shift 2 ;;
    --torch-prefix=*) torch_prefix=${1#*=}; shift ;;
    --no-apt) use_apt=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

# --- 1. Debian packages -------------------------------------------------------------------------
apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6 libgl-dev libglx-dev
  libyaml-cpp-dev libsqlite3-dev sqlite3 nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev zlib1g-dev
  xvfb xauth python3-venv clang-format-14 clang-tidy-14 universal-ctags
  slurmctld slurmd slurm-client munge
  openssh-server openssh-client
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ $use_apt = 0 ]; then
    die "missing Debian packages: ${missing[*]}. Install them with: sudo apt-get install ${missing[*]}"
  fi
  [ "$(id -u)" = 0 ] || sudo=sudo
  say "installing Debian packages: ${missing[*]}"
  ${sudo:-} apt-get update -qq || die "apt-get update failed: check the network and /etc/apt/sources.list"
  DEBIAN_FRONTEND=noninteractive ${sudo:-} apt-get install -y -q --no-install-recommends "${missing[@]}" \
    || die "could not install ${missing[*]} with apt-get"
fi

# --- 2. Gloo headers ----------------------------------------------------------------------------
# Note [Gloo headers]: torch's wheel builds Gloo into libtorch_cpu but does not ship its headers.
# Debian sid's libgloo-dev (0.0~git20250912) has the v2 store API that torch 2.1x's GlooStore
# overrides; bookworm's 2022 snapshot does not compile. We fetch only that one .deb through a
# private apt configuration (the machine's own apt setup is untouched) and unpack it under .deps/.
# The archive is the one this machine's own apt sources use (its mirror, and its apt proxy
# settings, which the private configuration keeps): the repository names no host.
debian_mirror() {
  apt-get indextargets --format '$(ORIGIN)|$(LABEL)|$(REPO_URI)' 'Created-By: Packages' 2>/dev/null \
    | awk -F'|' '$1 == "Debian" && $2 == "Debian" { print $3; exit }'
}
gloo_version="0.0~git20250912.d97133a-2"
gloo_dir="$deps/gloo"
if [ ! -f "$gloo_dir/usr/include/gloo/algorithm.h" ]; then
  mkdir -p "$cache/apt-sid/lists/partial" "$cache/debs"
  deb_glob=("$cache"/debs/libgloo-dev_*"${gloo_version#0.0~}"*_amd64.deb)
  if [ ! -f "${deb_glob[0]}" ]; then
    mirror=$(debian_mirror)
    if [ -z "$mirror" ]; then
      # The package lists may never have been read on this machine.
      [ "$(id -u)" = 0 ] || sudo=sudo
      ${sudo:-} apt-get update -qq >/dev/null 2>&1 || true
      mirror=$(debian_mirror)
    fi
    [ -n "$mirror" ] || die "this machine's apt sources list no Debian archive to fetch libgloo-dev $gloo_version from (Debian sid). Add one, or unpack that package by hand into $gloo_dir (dpkg -x FILE.deb $gloo_dir)"
    say "fetching libgloo-dev $gloo_version from Debian sid at $mirror (headers only)"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main" \
      > "$cache/apt-sid/sources.list"
    aptopts=(-o "Dir::Etc::SourceList=$cache/apt-sid/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$cache/apt-sid/lists" -o APT::Sandbox::User=root)
    apt-get "${aptopts[@]}" update -qq \
      || die "could not read Debian sid's package list. Provide the Gloo headers by hand: unpack libgloo-dev $gloo_version into $gloo_dir (dpkg -x FILE.deb $gloo_dir)"
    (cd "$cache/debs" && apt-get "${aptopts[@]}" download "libgloo-dev=$gloo_version") \
      || die "could not download libgloo-dev=$gloo_version from Debian sid; unpack it by hand into $gloo_dir"
    deb_glob=("$cache"/debs/libgloo-dev_*"${gloo_version#0.0~}"*_amd64.deb)
  fi
  rm -rf "$gloo_dir" && mkdir -p "$gloo_dir"
  dpkg -x "${deb_glob[0]}" "$gloo_dir"
  [ -f "$gloo_dir/usr/include/gloo/algorithm.h" ] || die "libgloo-dev unpacked without gloo/algorithm.h"
fi

# --- 3. Python environment and torch ------------------------------------------------------------
mkdir -p "$deps"
# A --torch-prefix given once is remembered: later runs (from run.sh and test.sh) keep using it.
if [ -z "$torch_prefix" ] && [ -f "$deps/torch-prefix" ] && ! grep -q "^$venv/" "$deps/torch-prefix"; then
  torch_prefix=$(cat "$deps/torch-prefix")
fi
if [ -n "$torch_prefix" ]; then
  [ -f "$torch_prefix/share/cmake/Torch/TorchConfig.cmake" ] \
    || die "--torch-prefix $torch_prefix has no share/cmake/Torch/TorchConfig.cmake; pass the torch package folder"
  echo "$torch_prefix" > "$deps/torch-prefix"
  say "using torch from $torch_prefix"
fi

requirements="$root/scripts/requirements.txt"
# Note [references without their extras]: pins installed with --no-deps, because their declared
# requirements are for other uses (holistictraceanalysis asks for jupyterlab and pytest); what
# they import is pinned in requirements.txt.
requirements_no_deps="$root/scripts/requirements-no-deps.txt"
stamp="$venv/.shardscope-requirements"
if [ -z "$torch_prefix" ] && { [ ! -f "$stamp" ] || ! cat "$requirements" "$requirements_no_deps" | cmp -s - "$stamp"; }; then
  py=${PYTHON:-python3}
  command -v "$py" >/dev/null || die "no python3 found; install python3 (>= 3.10) or set PYTHON"
  wheels="$cache/wheels"
  mkdir -p "$wheels"
  # Download only what the wheelhouse lacks: pip resolves against the local folder first.
  if ! "$py" -m pip download -q --no-index --find-links "$wheels" -r "$requirements" -d "$wheels" >/dev/null 2>&1; then
    say "downloading the pinned wheels (torch and its CUDA runtime libraries, about 3 GB) into $wheels"
    "$py" -m pip download -q -r "$requirements" -d "$wheels" \
      || die "could not download the pinned wheels from PyPI. Without network, reuse an installed torch: scripts/setup.sh --torch-prefix DIR"
  fi
  if ! "$py" -m pip download -q --no-index --no-deps --find-links "$wheels" -r "$requirements_no_deps" -d "$wheels" >/dev/null 2>&1; then
    "$py" -m pip download -q --no-deps -r "$requirements_no_deps" -d "$wheels" \
      || die "could not download the wheels of $requirements_no_deps from PyPI"
  fi
  say "creating $venv"
  rm -rf "$venv"
  "$py" -m venv "$venv" || die "python3 -m venv failed; install python3-venv"
  "$py" -m pip download -q --no-index --find-links "$wheels" -r "$root/scripts/requirements-test.txt" -d "$wheels" >/dev/null 2>&1 \
    || "$py" -m pip download -q -r "$root/scripts/requirements-test.txt" -d "$wheels" \
    || die "could not download the wheels of scripts/requirements-test.txt from PyPI"
  # The test tools with the rest: installed after the no-deps references, pip would report their
  # undeclared extras as conflicts.
  "$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" -r "$requirements" \
    -r "$root/scripts/requirements-test.txt" || die "installing the wheels from $wheels failed"
  cp "$root/scripts/requirements-test.txt" "$venv/.shardscope-test-requirements"
  "$venv/bin/python" -m pip install -q --no-index --no-deps --find-links "$wheels" -r "$requirements_no_deps" \
    || die "installing the wheels of $requirements_no_deps from $wheels failed"
  cat "$requirements" "$requirements_no_deps" > "$stamp"
fi
# The Python package's test tools (scripts/requirements-test.txt), stamped on their own so that
# adding one never rebuilds the environment torch lives in.
test_requirements="$root/scripts/requirements-test.txt"
test_stamp="$venv/.shardscope-test-requirements"
if [ -z "$torch_prefix" ] && ! cmp -s "$test_requirements" "$test_stamp"; then
  wheels="$cache/wheels"
  mkdir -p "$wheels"
  if ! "$venv/bin/python" -m pip download -q --no-index --find-links "$wheels" -r "$test_requirements" -d "$wheels" >/dev/null 2>&1; then
    "$venv/bin/python" -m pip download -q -r "$test_requirements" -d "$wheels" \
      || die "could not download the wheels of $test_requirements from PyPI"
  fi
  "$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" -r "$test_requirements" \
    || die "installing the wheels of $test_requirements from $wheels failed"
  cp "$test_requirements" "$test_stamp"
fi
# Shardscope's own Python package (python/: the reporter, tracker and Trainer callback that run
# inside users' scripts), reinstalled whenever its sources change. Offline: setuptools is in the venv.
if [ -z "$torch_prefix" ]; then
  package_stamp="$venv/.shardscope-python-package"
  package_hash=$(cd "$root/python" && find . -name '*.py' -o -name pyproject.toml | LC_ALL=C sort | xargs sha256sum | sha256sum)
  if [ ! -f "$package_stamp" ] || [ "$(cat "$package_stamp")" != "$package_hash" ]; then
    "$venv/bin/python" -m pip install -q --no-index --no-deps --no-build-isolation "$root/python" \
      || die "installing python/ (the shardscope package) into $venv failed"
    echo "$package_hash" > "$package_stamp"
  fi
fi
if [ -z "$torch_prefix" ]; then
  "$venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' > "$deps/torch-prefix" \
    || die "torch does not import in $venv"
fi
say "ready: torch $(cat "$deps/torch-prefix")"
