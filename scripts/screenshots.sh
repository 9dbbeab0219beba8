#!/usr/bin/env bash
# Renders every page of the workbench with real data into docs/screenshots/*.png, under a virtual
# display: seeds a fresh run history with real `shardscope launch` runs of the demo recipe (a
# precision sweep: no, fp16, bf16, bf16-pure, each profiled, tagged as one sweep) and lets the
# workbench save each page, at 1440x900 (docs/screenshots/*.png) and at 1366x768, the smallest
# common laptop screen (docs/screenshots/1366x768/*.png); the Run page with TensorBoard smoothing
# 0.6; trace.png shows the traces of the run shown in Run (sweep-fp16).
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

# --profile (steps 3-7) so that the run shown in Run has real traces: Trace follows the open run.
for mode in no fp16 bf16 bf16-pure; do
  "$bin_dir/shardscope" launch --num_processes 2 --recipe "$root/resources/recipes/demo-mlp.yaml" \
    --max_steps 300 --run_name "sweep-$mode" --mixed_precision "$mode" --profile --tag sweep:sweep > /dev/null
done
"$bin_dir/shardscope" runs list

# configure.png: Configure opens Accelerate's default config file, so the workbench alone gets an
# HF_HOME holding an FSDP2 one (the launches above must keep running without any config file).
hf_home="$home/hf"
mkdir -p "$hf_home/accelerate"
cat > "$hf_home/accelerate/default_config.yaml" <<'YAML'
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
enable_cpu_affinity: false
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: true
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_version: 2
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
YAML

mkdir -p "$out" "$out/1366x768"
for size in 1440x900 1366x768; do
  dir="$out"
  [ "$size" = 1440x900 ] || dir="$out/$size"
  HF_HOME="$hf_home" SHARDSCOPE_SCREENSHOTS="$dir" SHARDSCOPE_SCREENSHOT_COMPARE="sweep-" SHARDSCOPE_SCREENSHOT_RUN="sweep-fp16" \
    SHARDSCOPE_SCREENSHOT_SIZE="$size" SHARDSCOPE_SCREENSHOT_SMOOTHING=0.6 \
    xvfb-run -a -s "-screen 0 1600x1000x24" "$gui"
done
ls -l "$out" "$out/1366x768"
