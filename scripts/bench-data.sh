#!/usr/bin/env bash
# Data path benchmarks for docs/BENCHMARKS.md, side by side in one run on this machine:
#   1. `shardscope data prepare` against Hugging Face tokenizers' batch encoding from Python
#      (tests/tools/data_bench.py: the same JSONL corpus, tokenizer and cores; both end to end,
#      reading the JSONL and writing the ids; tokenizers' encode_batch alone too). The two token
#      files must be byte-identical, or the comparison is void.
#   2. The data loader's time per step as a fraction of the step: a small Llama trained on the
#      prepared token file (memory-mapped, read ahead) on two ranks, data_time / step_time of
#      every step after the first, from the run's events.
#   ./scripts/bench-data.sh [MB]       corpus size, default 40
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
py="$root/.venv/bin/python"
mb=${1:-40}
threads=$(nproc)

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(uname -sr)"
"$py" "$root/tests/tools/data_bench.py" make --out "$work/data" --mb "$mb"
now() { "$py" -c 'import time; print(time.time())'; }
ours=() theirs=()
for run in 1 2 3; do
  start=$(now)
  "$bin" data prepare --tokenizer "$work/data/tokenizer" --input "$work/data/corpus.jsonl" \
    --output "$work/ours.tokens" --threads "$threads" --force >/dev/null 2>&1
  ours+=("$start $(now)")
  theirs+=("$(RAYON_NUM_THREADS=$threads "$py" "$root/tests/tools/data_bench.py" encode --dir "$work/data" --out "$work/ref.bin")")
done
cmp -s "$work/ours.tokens" "$work/ref.bin" || { echo "the token files differ: no comparison" >&2; exit 1; }
"$py" - "$work" "$threads" "${ours[@]}" -- "${theirs[@]}" <<'EOF'
import json, os, sys
work, threads, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
cut = rest.index("--")
ours = min(float(b) - float(a) for a, b in (r.split() for r in rest[:cut]))
theirs = [json.loads(r) for r in rest[cut + 1:]]
total = min(t["seconds_total"] for t in theirs)
encode = min(t["seconds_encode"] for t in theirs)
tokens = json.load(open(f"{work}/ours.tokens.json"))["tokens"]
vocab = len(json.load(open(f"{work}/data/tokenizer/tokenizer.json"))["model"]["vocab"])
mb = os.path.getsize(f"{work}/data/corpus.jsonl") / 1e6
print(f"corpus: {mb:.1f} MB JSONL, {theirs[0]['documents']} documents, {tokens} tokens; tokenizer: byte-level BPE, {vocab} ids")
print(f"data prepare vs tokenizers (best of 3, {threads} threads, identical ids):")
for name, s in [("shardscope data prepare (read+encode+write)", ours),
                ("tokenizers encode_batch (read+encode+write)", total),
                ("tokenizers encode_batch alone", encode)]:
    print(f"  {name:<44} {s:7.2f} s  {tokens / s / 1e6:6.2f} M tokens/s")
print(f"  {'ratio, end to end (goal >= 1.0)':<44} {total / ours:7.2f}x")
EOF

cat >"$work/loader.yaml" <<EOF
name: bench-loader
model: {type: llama, vocab_size: 32000, hidden_size: 256, intermediate_size: 688, num_hidden_layers: 4,
        num_attention_heads: 8, num_key_value_heads: 4, max_position_embeddings: 512, tie_word_embeddings: true,
        block_size: 256}
data: {type: tokens, path: $work/ours.tokens, eval_fraction: 0.01}
optimizer: {type: adamw, lr: 0.001}
training: {per_device_batch_size: 8, max_steps: 15}
EOF
"$bin" launch --num_processes 2 --recipe "$work/loader.yaml" --runs_dir "$work/runs" --run_name loader >/dev/null 2>&1
# And a fast step: the Llama demo (its corpus tokenized at start, in memory), where the loader's
# share is largest.
"$bin" launch --num_processes 2 --recipe "$root/resources/recipes/demo-llama.yaml" --runs_dir "$work/runs" \
  --run_name demo --max_steps 100 >/dev/null 2>&1
"$py" - "$work/runs" <<'EOF'
import json, sys
for run, what in [("loader", "Llama 4x256, vocab 32000, on the prepared token file (memory-mapped), batch 8 x 256"),
                  ("demo", "the Llama demo (4x128, vocab 2048, corpus tokenized at start), batch 8 x 64")]:
    steps = [e for e in map(json.loads, open(f"{sys.argv[1]}/{run}/events.jsonl"))
             if e.get("type") == "step" and e["rank"] == 0][1:]
    data = sum(e["data_time"] for e in steps); total = sum(e["step_time"] for e in steps)
    print(f"data loader, {what}, 2 ranks, {len(steps)} steps after the first:")
    print(f"  mean step {total / len(steps) * 1000:.1f} ms, mean data wait {data / len(steps) * 1000:.3f} ms: "
          f"{100 * data / total:.3f} % of the step (goal < 1 %)")
EOF
