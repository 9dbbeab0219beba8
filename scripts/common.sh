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

# shardscope_ddp_reference <recipe> <initial.safetensors> <out.json>: PyTorch's DDP on the recipe
# (tests/tools/ddp_reference.py, 2 ranks) from our initial weights. PyTorch's Gloo teardown
# occasionally ends a rank with "terminate called without an active exception" after the
# measurement: rerun rather than read a stale or missing result.
shardscope_ddp_reference() {
  local recipe=$1 initial=$2 out=$3 try
  for try in 1 2 3; do
    rm -f "$out"
    "$root/.venv/bin/python" "$root/tests/tools/ddp_reference.py" --recipe "$recipe" --initial "$initial" \
      --ranks 2 --out "$out" >/dev/null 2>&1 && [ -s "$out" ] && return 0
  done
  echo "the PyTorch reference failed 3 times on $recipe" >&2
  return 1
}

# For the measuring scripts (bench-ddp, *-table, profile-overhead, reliability-report): $bin, the
# built shardscope; $work, a scratch folder removed on exit with any run still started from it;
# and a scratch run history, so measurements never land in the user's.
shardscope_measure_setup() {
  bin="$root/build/dev/app/shardscope"
  [ -x "$bin" ] || { echo "build first: ./scripts/test.sh" >&2; exit 1; }
  work=$(mktemp -d)
  # || true: under set -e a pkill that found nothing would make every measuring script exit 1.
  trap 'pkill -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
  export SHARDSCOPE_HOME="$work/home"
}
