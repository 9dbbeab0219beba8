#!/usr/bin/env bash
# The main job: set up if needed, build, open the workbench. Without a display, run the demo
# headless instead and print its progress.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_build dev
bin="$root/build/dev/app"
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ "${SHARDSCOPE_HEADLESS:-0}" != 1 ]; then
  exec "$bin/shardscope" "$@"
fi
echo "No display: running the demo headless: a small GPT trained with DDP on two CPU ranks (c10d/Gloo)."
"$bin/shardscope" launch --num_processes 2 -- check-collectives
"$bin/shardscope" launch --num_processes 2 --recipe "$root/resources/recipes/demo-gpt.yaml" "$@"
echo "Then a small Llama on the project's own text, tokenized with the tokenizer it ships (resources/tokenizers/demo)."
"$bin/shardscope" launch --num_processes 2 --recipe "$root/resources/recipes/demo-llama.yaml" "$@"
echo "Demo ran: the runs' events and per-rank logs are in the run directories named above."
