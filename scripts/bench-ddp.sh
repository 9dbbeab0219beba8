#!/usr/bin/env bash
# DDP throughput benchmark: our 2-rank DDP (shardscope launch) against PyTorch's Python DDP
# (tests/tools/ddp_reference.py, same torch wheel, same model, batch, data and initial weights),
# run alternately in one session; and our bucketed, overlapped all-reduce against "one all-reduce
# after backward". Prints a Markdown table for docs/BENCHMARKS.md.
#
#   ./scripts/bench-ddp.sh [rounds]      (default 3 rounds of each configuration)
#   BENCH_MODELS=mlp BENCH_SKIP_OVERLAP=1 ./scripts/bench-ddp.sh 5    (a subset)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rounds=${1:-3}
python="$root/.venv/bin/python"
shardscope_measure_setup

# name | recipe body. The GPT is the demo model; the MLP is small enough that Python's per-step
# overhead dominates; the wide MLP has many parameters per FLOP, so communication matters.
cat > "$work/gpt.yaml" <<'EOF'
name: bench-gpt
seed: 1
model: {type: gpt, vocab_size: 256, n_layer: 2, n_embd: 64, n_head: 4, block_size: 64}
data: {type: text}
optimizer: {type: adamw, lr: 0.003}
training: {per_device_batch_size: 16, max_steps: 60}
EOF
cat > "$work/mlp.yaml" <<'EOF'
name: bench-mlp
seed: 1
model: {type: mlp, input_dim: 32, hidden_dim: 64, depth: 2, output_dim: 1}
data: {type: synthetic_regression, num_samples: 8192, eval_fraction: 0}
optimizer: {type: sgd, lr: 0.01, momentum: 0.9}
training: {per_device_batch_size: 32, max_steps: 400}
EOF
wide() {
  cat <<EOF
name: bench-wide-$1
seed: 1
model: {type: mlp, input_dim: 256, hidden_dim: 1024, depth: 6, output_dim: 1}
data: {type: synthetic_regression, num_samples: 4096, eval_fraction: 0}
optimizer: {type: sgd, lr: 0.001}
ddp: {bucket_cap_mb: 4, first_bucket_cap_mb: 1, overlap: $1}
training: {per_device_batch_size: 64, max_steps: 40}
EOF
}
wide true > "$work/wide-overlap.yaml"
wide false > "$work/wide-serial.yaml"

# Tokens/s over all steps but the first two (warm-up), from rank 0's step events.
ours() {
  local recipe=$1 run="run$RANDOM$RANDOM"
  "$bin" launch --num_processes 2 --recipe "$recipe" --runs_dir "$work/runs" --run_name "$run" \
    -- --dump-initial "$work/init.safetensors" >/dev/null
  python3 "$root/tests/tools/events.py" "$work/runs/$run/events.jsonl" --ranks 2 --warmup 2 throughput
}
theirs() {
  shardscope_ddp_reference "$1" "$work/init.safetensors" "$work/ref.json" || exit 1
  python3 - "$work/ref.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
times = r["step_times"][2:]
per_step = r["tokens"] / len(r["step_times"])
print(per_step * len(times) / sum(times))
EOF
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), torch $("$python" -c 'import torch;print(torch.__version__)')"
echo
echo "| configuration | Shardscope tokens/s | PyTorch DDP tokens/s | ratio |"
echo "|---|---|---|---|"
for model in ${BENCH_MODELS:-gpt mlp}; do
  a=(); b=()
  for _ in $(seq "$rounds"); do
    a+=("$(ours "$work/$model.yaml")")
    b+=("$(theirs "$work/$model.yaml")")
  done
  ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
  printf '| %s, 2 ranks | %.0f | %.0f | %.2f |\n' "$model" "$ma" "$mb" "$(echo "$ma / $mb" | bc -l)"
done
[ "${BENCH_SKIP_OVERLAP:-0}" = 1 ] && exit 0
echo
echo "| wide MLP (13 MB of gradients), 2 ranks | tokens/s |"
echo "|---|---|"
o=(); s=()
for _ in $(seq "$rounds"); do
  o+=("$(ours "$work/wide-overlap.yaml")")
  s+=("$(ours "$work/wide-serial.yaml")")
done
mo=$(median "${o[@]}"); ms=$(median "${s[@]}")
printf '| bucketed, overlapped all-reduce (4 MiB buckets) | %.0f |\n' "$mo"
printf '| one all-reduce after backward | %.0f |\n' "$ms"
printf '| speed-up of overlap | %.2f |\n' "$(echo "$mo / $ms" | bc -l)"
