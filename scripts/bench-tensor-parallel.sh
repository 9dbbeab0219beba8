#!/usr/bin/env bash
# Tensor parallelism benchmark (#46): the 20M Llama of bench-models.sh (GQA: 8 query heads, 2
# key/value heads) with parallelism_config tp 2 on 2 CPU ranks (MULTI_GPU with use_cpu) and
# dp_shard 2 x tp 2 on 4 (FSDP2), against PyTorch splitting transformers' LlamaForCausalLM the
# same way on Accelerate's mesh (tests/tools/ddp_reference.py --tp: parallelize_module with
# ColwiseParallel / RowwiseParallel, then fully_shard over dp_shard), same torch wheel, same
# initial weights, same data order, run alternately in one session. Tokens/s over all steps but
# the first two. Prints Markdown for docs/BENCHMARKS.md.
#
#   ./scripts/bench-tensor-parallel.sh [rounds]      (default 3 rounds of each layout)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rounds=${1:-3}
python="$root/.venv/bin/python"
shardscope_measure_setup

cat > "$work/llama.yaml" <<EOF
name: bench-tp
seed: 1
model:
  type: llama
  block_size: 128
  vocab_size: 256
  hidden_size: 512
  intermediate_size: 1408
  num_hidden_layers: 7
  num_attention_heads: 8
  num_key_value_heads: 2
  max_position_embeddings: 512
  tie_word_embeddings: false
data: {type: text}
optimizer: {type: adamw, lr: 0.0003}
training: {per_device_batch_size: 4, max_steps: 12}
export: {enabled: false}
EOF
config() { # $1: dp_shard size; tp 2
  if [ "$1" -gt 1 ]; then
    printf 'distributed_type: FSDP\nnum_processes: %d\nuse_cpu: true\nfsdp_config:\n  fsdp_version: 2\n' $(($1 * 2))
    printf 'parallelism_config:\n  parallelism_config_dp_shard_size: %d\n  parallelism_config_tp_size: 2\n' "$1"
  else
    printf 'distributed_type: MULTI_GPU\nnum_processes: 2\nuse_cpu: true\n'
    printf 'parallelism_config:\n  parallelism_config_tp_size: 2\n'
  fi
}

ours() { # $1: dp_shard size
  local run="run$RANDOM$RANDOM"
  config "$1" > "$work/accelerate-$1.yaml"
  "$bin" launch --config_file "$work/accelerate-$1.yaml" --recipe "$work/llama.yaml" --runs_dir "$work/runs" \
    --run_name "$run" -- --dump-initial "$work/init-$1.safetensors" >/dev/null
  # Each rank reports its share of the tokens (a tensor group's ranks split each batch): x all ranks.
  python3 "$root/tests/tools/events.py" "$work/runs/$run/events.jsonl" --ranks $(($1 * 2)) --warmup 2 throughput
}
theirs() { # $1: dp_shard size
  local try
  for try in 1 2 3; do
    rm -f "$work/ref.json"
    "$python" "$root/tests/tools/ddp_reference.py" --recipe "$work/llama.yaml" --initial "$work/init-$1.safetensors" \
      --ranks $(($1 * 2)) --tp "$1,2" --out "$work/ref.json" >/dev/null 2>&1 && [ -s "$work/ref.json" ] && break
  done
  [ -s "$work/ref.json" ] || { echo "the PyTorch reference failed 3 times (dp_shard $1 x tp 2)" >&2; exit 1; }
  python3 - "$work/ref.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
times = r["step_times"][2:]
print(r["tokens"] / len(r["step_times"]) * len(times) / sum(times))
EOF
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), torch $("$python" -c 'import torch;print(torch.__version__)'), transformers $("$python" -c 'import transformers;print(transformers.__version__)')"
echo
echo "| Llama 20M (GQA), fp32, CPU ranks | Shardscope tokens/s | PyTorch parallelize_module (+ fully_shard) tokens/s | ratio |"
echo "|---|---|---|---|"
for shard in 1 2; do
  a=(); b=()
  for _ in $(seq "$rounds"); do
    rm -f "$work/init-$shard.safetensors" # --dump-initial writes a new file only
    a+=("$(ours "$shard")")
    b+=("$(theirs "$shard")")
  done
  label=$([ "$shard" -gt 1 ] && echo "dp_shard 2 x tp 2, 4 ranks" || echo "tp 2, 2 ranks")
  ma=$(median "${a[@]}"); mb_=$(median "${b[@]}")
  printf '| %s | %.0f | %.0f | %.2f |\n' "$label" "$ma" "$mb_" "$(echo "$ma / $mb_" | bc -l)"
done
