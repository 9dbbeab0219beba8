#!/usr/bin/env bash
# Hugging Face model benchmark (#18): a Llama of about 20M parameters (GQA: 8 query heads, 2
# key/value heads; Llama's layout at a small size) on 2 CPU ranks. Our DDP (shardscope launch)
# against PyTorch's DDP training transformers' LlamaForCausalLM (tests/tools/ddp_reference.py:
# same torch wheel, same initial weights, same data order), run alternately in one session; full
# fine-tuning and LoRA (r 16 on every projection). Per-rank memory: the engine's measured model
# states against `shardscope estimate-memory`, and both sides' peak RSS. Prints Markdown for
# docs/BENCHMARKS.md.
#
#   ./scripts/bench-models.sh [rounds]      (default 3 rounds of each configuration)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rounds=${1:-3}
python="$root/.venv/bin/python"
shardscope_measure_setup

llama() { # $1: extra model lines (LoRA)
  cat <<EOF
name: bench-llama
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
$1
data: {type: text}
optimizer: {type: adamw, lr: 0.0003}
training: {per_device_batch_size: 4, max_steps: 12}
export: {enabled: false}
EOF
}
llama "" > "$work/full.yaml"
llama "  lora: {r: 16, alpha: 32, target_modules: all-linear}" > "$work/lora.yaml"

# Tokens/s over all steps but the first two (warm-up) from rank 0's step events, then rank 0's
# measured model states (parameters + gradients + optimizer) and the highest peak RSS of a rank.
ours() {
  local recipe=$1 run="run$RANDOM$RANDOM"
  "$bin" launch --num_processes 2 --recipe "$recipe" --runs_dir "$work/runs" --run_name "$run" \
    -- --dump-initial "$work/init.safetensors" >/dev/null
  python3 "$root/tests/tools/events.py" "$work/runs/$run/events.jsonl" --ranks 2 --warmup 2 \
    throughput model_states peak_rss
}
theirs() {
  shardscope_ddp_reference "$1" "$work/init.safetensors" "$work/ref.json" || exit 1
  python3 - "$work/ref.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
times = r["step_times"][2:]
print(r["tokens"] / len(r["step_times"]) * len(times) / sum(times), r["peak_rss_bytes"])
EOF
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mb() { echo "$1 / 1048576" | bc -l | xargs printf '%.1f MiB'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), torch $("$python" -c 'import torch;print(torch.__version__)'), transformers $("$python" -c 'import transformers;print(transformers.__version__)')"
echo
echo "| Llama 20M (GQA), 2 CPU ranks, fp32 | Shardscope tokens/s | PyTorch DDP + transformers tokens/s | ratio | model states measured / estimated | peak RSS ours / PyTorch's |"
echo "|---|---|---|---|---|---|"
for kind in full lora; do
  a=(); b=(); states=0; rss=0; theirRss=0
  for _ in $(seq "$rounds"); do
    read -r speed states rss < <(ours "$work/$kind.yaml")
    a+=("$speed")
    read -r speed theirRss < <(theirs "$work/$kind.yaml")
    b+=("$speed")
  done
  # The estimate's DDP fp32 row: parameters + gradients + optimizer, in bytes.
  estimate=$("$bin" estimate-memory --recipe "$work/$kind.yaml" --num_processes 2 --precision fp32 --markdown \
    | python3 -c '
import sys
units = {"bytes": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
for line in sys.stdin:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cells and cells[0].startswith("DDP"):
        total = 0
        for c in cells[2:5]:
            v, u = c.split()
            total += float(v) * units[u]
        print(int(total)); break')
  ma=$(median "${a[@]}"); mb_=$(median "${b[@]}")
  printf '| %s | %.0f | %.0f | %.2f | %s / %s | %s / %s |\n' "$kind" "$ma" "$mb_" "$(echo "$ma / $mb_" | bc -l)" \
    "$(mb "$states")" "$(mb "$estimate")" "$(mb "$rss")" "$(mb "$theirRss")"
done
