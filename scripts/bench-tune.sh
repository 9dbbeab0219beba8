#!/usr/bin/env bash
# Tuner benchmark (#47): `shardscope tune` of the Llama demo (resources/recipes/demo-llama.yaml) at 2
# CPU ranks under a memory budget per rank, then the tuner's choice against the recipe's own
# setting (DDP, micro-batch 8, no accumulation) in one session, alternately: tokens/s over the
# steps after the first two. Also the number of trials, the time the tuning took, and the
# estimate's error per field (parameters, gradients, optimizer state) over every trial. Prints
# Markdown for docs/BENCHMARKS.md.
#
#   ./scripts/bench-tune.sh [rounds] [budget]      (default 3 rounds, budget 14MB)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rounds=${1:-3}
budget=${2:-14MB}
shardscope_measure_setup

sed "s|\.\./|$root/resources/|g" "$root/resources/recipes/demo-llama.yaml" > "$work/demo-llama.yaml"
printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\nmixed_precision: '"'no'"'\n' \
  > "$work/own.yaml"

"$bin" tune --recipe "$work/demo-llama.yaml" --num_processes 2 --memory_budget "$budget" --time_budget 600 \
  --runs_dir "$work/runs" --out "$work" --json > "$work/tune.json"

speed() { # $1 config, $2 recipe
  local run="run$RANDOM$RANDOM"
  "$bin" launch --config_file "$1" --recipe "$2" --max_steps 40 --runs_dir "$work/runs" --run_name "$run" >/dev/null
  python3 "$root/tests/tools/events.py" "$work/runs/$run/events.jsonl" --ranks 2 --warmup 2 throughput
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
chosen_config=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"])' "$work/tune.json")
chosen_recipe=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["recipe"])' "$work/tune.json")
own=(); tuned=()
for _ in $(seq "$rounds"); do
  own+=("$(speed "$work/own.yaml" "$work/demo-llama.yaml")")
  tuned+=("$(speed "$chosen_config" "$chosen_recipe")")
done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
python3 - "$work/tune.json" "$(median "${own[@]}")" "$(median "${tuned[@]}")" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
own, tuned = float(sys.argv[2]), float(sys.argv[3])
ran = [c for c in r["candidates"] if c["rounds"] > 0]
print(f"Budget {r['budget_bytes'] / 2**20:.2f} MiB per rank; {len(r['candidates'])} candidates, "
      f"{sum(1 for c in r['candidates'] if c['rounds'] == 0)} ruled out by the estimate, {r['trials_run']} trials "
      f"in {r['seconds']:.0f} s{' (stopped by the time budget)' if r['out_of_time'] else ''}; best: {r['best']}.")
print()
print("| Llama demo, 2 CPU ranks, fp32, 40 steps | tokens/s |")
print("|---|---|")
print(f"| the recipe's own setting (DDP, micro-batch 8 x 1) | {own:.0f} |")
print(f"| the tuner's choice ({r['best']}) | {tuned:.0f} |")
print(f"| ratio | {tuned / own:.2f} |")
print()
print("| field | trials | estimate / measured: mean | min | max |")
print("|---|---|---|---|---|")
for field in ("params", "grads", "optimizer"):
    ratios = [c["estimate_fields"][field] / c["measured_fields"][field] for c in ran if c["measured_fields"][field] > 0]
    if ratios:
        print(f"| {field} | {len(ratios)} | {sum(ratios) / len(ratios):.3f} | {min(ratios):.3f} | {max(ratios):.3f} |")
EOF
