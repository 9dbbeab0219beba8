#!/usr/bin/env bash
# The precision modes side by side on a recipe (default: the demo GPT), 2 CPU ranks: final loss,
# tokens/s, per-rank bytes of parameters, gradients and optimizer state, skipped steps. Then the
# bf16 "seed finding": at a learning rate below half a bf16 ulp per step, bf16-pure stalls while
# bf16 (fp32 master weights) learns. Then fp8 against bf16 over the demo's 300 steps: the two loss
# curves and how far apart they are (the band tst_float8_training holds on a shorter run). Prints
# Markdown for docs/PRECISION.md. fp8 runs emulated on the CPU (slowly).
#
#   ./scripts/precision-table.sh [recipe.yaml] [max_steps]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
recipe=${1:-$root/resources/recipes/demo-gpt.yaml}
steps=${2:-150}
shardscope_measure_setup

summarize() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
events = [json.loads(l) for l in open(sys.argv[2])]
steps = [e for e in events if e["type"] == "step" and e["rank"] == 0]
tail = steps[2:] or steps
tps = sum(e["tokens"] for e in tail) * 2 / sum(e["step_time"] for e in tail)
last = steps[-1]
mem = last["mem"]
mib = lambda b: f"{b / 2**20:.2f}"
print(f"| {sys.argv[1]} | {sum(e['loss'] for e in steps[-10:]) / len(steps[-10:]):.4f} | {tps:,.0f} | "
      f"{mib(mem['params'])} | {mib(mem['grads'])} | {mib(mem['optimizer'])} | {last.get('skipped_steps', 0)} |")
EOF
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "recipe: $(basename "$recipe"), $steps steps, 2 ranks (Gloo, CPU)"
echo
echo "| mode | final loss (mean of last 10 steps) | tokens/s | params MiB/rank | grads MiB/rank | optimizer MiB/rank | skipped steps |"
echo "|---|---|---|---|---|---|---|"
for mode in no fp16 bf16 bf16-pure fp8; do
  "$bin" launch --num_processes 2 --recipe "$recipe" --max_steps "$steps" --runs_dir "$work/runs" \
    --run_name "$mode" -- --mixed_precision "$mode" >/dev/null
  summarize "$mode" "$work/runs/$mode/events.jsonl"
done

cat > "$work/stall.yaml" <<'EOF'
name: bf16-stall
seed: 3
model: {type: mlp, input_dim: 32, hidden_dim: 64, depth: 2, output_dim: 1}
data: {type: synthetic_regression, num_samples: 4096, noise: 0.01, eval_fraction: 0}
optimizer: {type: sgd, lr: 0.005}
training: {per_device_batch_size: 64, max_steps: 400}
EOF
echo
echo "Seed finding (MLP regression, SGD lr 0.005, 400 steps): mean loss of the first and last 20 steps"
echo
echo "| mode | first 20 | last 20 | last / first |"
echo "|---|---|---|---|"
for mode in no bf16 bf16-pure; do
  "$bin" launch --num_processes 2 --recipe "$work/stall.yaml" --runs_dir "$work/runs" --run_name "stall-$mode" \
    -- --mixed_precision "$mode" >/dev/null
  python3 - "$mode" "$work/runs/stall-$mode/events.jsonl" <<'EOF'
import json, sys
losses = [e["loss"] for e in map(json.loads, open(sys.argv[2])) if e["type"] == "step" and e["rank"] == 0]
a, b = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
print(f"| {sys.argv[1]} | {a:.4f} | {b:.4f} | {b / a:.2f} |")
EOF
done

echo
echo "fp8 against bf16 on the demo GPT, 300 steps, 2 ranks: loss every 25 steps (rank 0's global loss)"
echo
for mode in bf16 fp8; do
  "$bin" launch --num_processes 2 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps 300 --runs_dir "$work/runs" \
    --run_name "band-$mode" -- --mixed_precision "$mode" >/dev/null
done
python3 - "$work/runs/band-bf16/events.jsonl" "$work/runs/band-fp8/events.jsonl" <<'EOF'
import json, sys
def losses(path):
    return [e["loss"] for e in map(json.loads, open(path)) if e["type"] == "step" and e["rank"] == 0]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
print("| step | bf16 | fp8 | fp8 / bf16 |")
print("|---|---|---|---|")
for i in list(range(0, len(a), 25)) + [len(a) - 1]:
    print(f"| {i + 1} | {a[i]:.4f} | {b[i]:.4f} | {b[i] / a[i]:.4f} |")
worst = max(abs(y - x) / x for x, y in zip(a, b))
tail_a, tail_b = sum(a[-10:]) / 10, sum(b[-10:]) / 10
print()
print(f"largest step difference {worst * 100:.2f} % of bf16's loss; last 10 steps: bf16 {tail_a:.4f}, fp8 {tail_b:.4f} "
      f"({(tail_b - tail_a) / tail_a * 100:+.2f} %)")
EOF
