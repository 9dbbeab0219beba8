#!/usr/bin/env bash
# Renders every page of the workbench with real data into docs/screenshots/*.png, under a virtual
# display: seeds a fresh run history with real `shardscope launch` runs of the demo recipe (a
# precision sweep: no, fp16, bf16, bf16-pure) and lets the workbench save each page.
#
#   scripts/screenshots.sh [launcher-bin-dir] [gui-binary]
#   launcher-bin-dir: holds shardscope + shardscope-worker built with the engine (default build/dev/app)
#   gui-binary: a shardscope built with the GUI (default build/gui/app/shardscope)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${1:-$root/build/dev/app}"
gui="${2:-$root/build/gui/app/shardscope}"
out="$root/docs/screenshots"
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export SHARDSCOPE_HOME="$home"

for mode in no fp16 bf16 bf16-pure; do
  "$bin_dir/shardscope" launch --num_processes 2 --recipe "$root/resources/recipes/demo-mlp.yaml" \
    --max_steps 300 --run_name "sweep-$mode" --mixed_precision "$mode" > /dev/null
done
"$bin_dir/shardscope" runs list

mkdir -p "$out"
SHARDSCOPE_SCREENSHOTS="$out" SHARDSCOPE_SCREENSHOT_COMPARE="sweep-" SHARDSCOPE_SCREENSHOT_RUN="sweep-fp16" \
  xvfb-run -a -s "-screen 0 1600x1000x24" "$gui"
ls -l "$out"
