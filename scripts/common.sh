# Sourced by run.sh and test.sh: set up if needed, then configure and build one preset.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# shardscope_build <preset>: setup (idempotent, offline once done), configure, build with -j2.
shardscope_build() {
  local preset=$1
  "$root/scripts/setup.sh" || return 1
  # ccache's own cache lives outside the checkout, so a fresh clone reuses earlier compilations.
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  cmake --preset "$preset" -S "$root" >/dev/null || { echo "configure failed (cmake --preset $preset)" >&2; return 1; }
  cmake --build --preset "$preset" || { echo "build failed (cmake --build --preset $preset)" >&2; return 1; }
}
