#!/usr/bin/env bash
# Runs on SLURM, for docs/BENCHMARKS.md, "SLURM": a real cluster of 3 nodes on this machine
# (scripts/slurm-cluster.sh, its own ports), and `shardscope launch --target slurm` of a small
# recipe on 2 and on 3 nodes, one rank each, RUNS times each: the time from submission to the first
# step in this machine's history, and how the nodes' events reached it (events recorded, how many a
# second while they came, the lag behind the nodes: each event's own time to its recording), as
# the launch prints them at its end.
#   ./scripts/bench-slurm.sh [STEPS] [RUNS]     defaults 300, 3
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
steps=${1:-300}
runs=${2:-3}
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(uname -sr)"
export SLURM_LAB="$work/slurm" NODES=3 CPUS=2 PORT_BASE=29817
chmod 755 "$work"
eval "$("$root/scripts/slurm-cluster.sh" start)"
trap '"$root/scripts/slurm-cluster.sh" stop >/dev/null 2>&1 || true; pkill -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
printf '[default]\nshared_folder = %s\n' "$work/shared" > "$work/clusters.ini"
printf 'name: bench\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\ntraining: {per_device_batch_size: 8, max_steps: %s}\n' \
  "$steps" > "$work/recipe.yaml"
for nodes in 2 3; do
  for run in $(seq "$runs"); do
    out=$("$bin" launch --target slurm --cluster_profiles "$work/clusters.ini" --recipe "$work/recipe.yaml" \
      --run_name "n$nodes-$run" --num_machines "$nodes" --num_processes "$nodes" -- --threads 1 2>&1) \
      || { echo "$out" >&2; exit 1; }
    echo "$nodes nodes, run $run: $(echo "$out" | sed -n 's/^shardscope launch: \([0-9]* events from the nodes.*\)$/\1/p')"
  done
done
