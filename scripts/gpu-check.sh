#!/usr/bin/env bash
# The GPU checks, in one go, for a machine with an NVIDIA GPU and a CUDA build of torch already
# installed (no downloads, no Qt there): builds the engine without the GUI against that torch,
# then runs the NCCL path (collectives check, DDP training on cuda), a CUPTI-traced run with CUDA
# memory stats, sharded runs with offload and recomputation, the Llama 1B shape against transformers,
# and bf16 / bf16-pure / fp8 side by side with PyTorch's, and reports what it measured.
# Results go to stdout and, when $OUT is set, to $OUT/gpu-check.log.
#
#   ./scripts/gpu-check.sh [python-with-torch]   (default: the first python3 whose torch has CUDA)
#
# Gloo headers: .deps/gloo must travel with the tree (scripts/setup.sh puts it there).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log=${OUT:-/tmp}/gpu-check.log
exec > >(tee "$log") 2>&1

py=${1:-}
if [ -z "$py" ]; then
  for candidate in /opt/torch/.venv/bin/python python3; do
    if "$candidate" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
      py=$candidate; break
    fi
  done
fi
[ -n "$py" ] || { echo "no python with a CUDA torch found; pass one as the first argument"; exit 1; }
prefix=$("$py" -c 'import os,torch;print(os.path.dirname(torch.__file__))')
echo "== $(c++ --version | head -1); $(cmake --version | head -1); ninja $(ninja --version)"
echo "== torch: $("$py" -c 'import torch;print(torch.__version__, torch.version.cuda)') from $prefix"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

# Our libraries, where that machine lacks them: scripts/gpu-deps.sh packs Debian's into
# .deps/gpu-sysroot (carried with the tree); their .pc files still say prefix=/usr.
deps=()
sysroot="$root/.deps/gpu-sysroot"
if [ -d "$sysroot/usr" ]; then
  sed -i "s|^prefix=/usr\$|prefix=$sysroot/usr|" "$sysroot"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$sysroot"/usr/share/pkgconfig/*.pc
  pkg_config=/tmp/shardscope-pkg-config
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$sysroot/usr/lib/x86_64-linux-gnu" "$sysroot/usr/bin/pkgconf" >"$pkg_config"
  chmod +x "$pkg_config"
  export PKG_CONFIG_PATH="$sysroot/usr/lib/x86_64-linux-gnu/pkgconfig:$sysroot/usr/share/pkgconfig"
  deps=(-DCMAKE_PREFIX_PATH="$sysroot/usr" -DPKG_CONFIG_EXECUTABLE="$pkg_config")
  echo "== build dependencies from $sysroot"
fi

# Warnings are not errors here: that machine's compiler may be newer than the one CI holds us to.
build=/tmp/shardscope-gpu-build
which nvcc; ls -d /usr/local/cuda*/include 2>/dev/null
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDSCOPE_BUILD_GUI=OFF \
  -DSHARDSCOPE_BUILD_TESTS=OFF -DSHARDSCOPE_WARNINGS_AS_ERRORS=OFF -DSHARDSCOPE_TORCH_PREFIX="$prefix" \
  -DTORCH_CUDA_ARCH_LIST=9.0 -DSHARDSCOPE_GLOO_INCLUDE_DIR="$root/.deps/gloo/usr/include" "${deps[@]}" \
  >"$build.configure.log" 2>&1 || { tail -40 "$build.configure.log"; cp "$build.configure.log" "${OUT:-/tmp}/"; exit 1; }
grep -E 'Shardscope:|libtorch' "$build.configure.log"
# Only what the checks run: the CLI and the worker (not the benchmarks or the layering check).
build_start=$SECONDS
cmake --build "$build" -j"$(nproc)" --target shardscope shardscope-worker >"$build.log" 2>&1 || { grep -E -A12 'error|FAILED' "$build.log" | head -80; cp "$build.log" "${OUT:-/tmp}/"; exit 1; }
tail -1 "$build.log"
echo "== built in $((SECONDS - build_start)) s"
bin="$build/app"

status=0
echo "== NCCL collectives, 1 rank on cuda:0"
"$bin/shardscope" launch --num_processes 1 -- check-collectives --backend nccl || status=1

echo "== DDP training on cuda:0 over NCCL (1 rank), demo GPT, 100 steps"
work=$(mktemp -d)
"$bin/shardscope" launch --num_processes 1 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps 100 \
  --runs_dir "$work/runs" --run_name gpu -- --backend nccl || status=1
python3 - "$work/runs/gpu/events.jsonl" <<'EOF' || status=1
import json, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step"]
hello = next(e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "hello")
tail = steps[10:]
print(f"device {hello['device']}: loss {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}, "
      f"{sum(e['tokens'] for e in tail) / sum(e['step_time'] for e in tail):.0f} tokens/s (steps 11-100)")
EOF

echo "== CUPTI trace and CUDA memory stats: demo GPT on cuda:0, profiled steps 20-24"
"$bin/shardscope" launch --num_processes 1 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps 30 \
  --runs_dir "$work/runs" --run_name gpu-trace -- --backend nccl --profile_start_step 20 --profile_steps 5 || status=1
python3 - "$work/runs/gpu-trace" <<'EOF' || status=1
import json, sys, collections
run = sys.argv[1]
events = [json.loads(l) for l in open(run + "/events.jsonl")]
steps = [e for e in events if e["type"] == "step"]
print("CUDA memory (last step): allocated %.1f MiB, reserved %.1f MiB, peak %.1f MiB" % tuple(
    steps[-1]["mem"][k] / 2**20 for k in ("allocated", "reserved", "peak_allocated")))
assert steps[-1]["mem"]["allocated"] > 0, "no CUDA memory stats in the step events"
for e in events:
    if e["type"] == "log" and e.get("level") == "warning":
        print("warning:", e["message"])
trace = [e for e in events if e["type"] == "trace"]
assert trace, "no trace event"
print("trace source:", trace[-1]["source"], "summary:", trace[-1]["summary"])
doc = json.load(open(trace[-1]["path"]))
cats = collections.Counter(e.get("cat") for e in doc["traceEvents"] if e.get("ph") == "X")
print("span categories:", dict(cats))
kernels = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"]
print("kernels: %d, NCCL kernels: %d" % (len(kernels), sum("nccl" in k.lower() for k in kernels)))
assert trace[-1]["source"] == "cupti" and kernels, "the CUPTI collector recorded no kernel"
EOF

echo "== Sharded on cuda:0: FULL_SHARD with offload (host shards), bf16, and bf16-pure, 1 rank"
for mode in bf16 bf16-pure; do
  "$bin/shardscope" launch --num_processes 1 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps 30 \
    --mixed_precision $mode --runs_dir "$work/runs" --run_name "offload-$mode" -- --backend nccl \
    --fsdp_sharding_strategy FULL_SHARD --fsdp_offload_params --fsdp_activation_checkpointing || status=1
  python3 - "$work/runs/offload-$mode/events.jsonl" "$mode" <<'EOF' || status=1
import json, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step"]
print("%s: loss %.3f -> %.3f, peak CUDA memory %.1f MiB" % (sys.argv[2], steps[0]["loss"], steps[-1]["loss"],
      max(e["mem"]["peak_allocated"] for e in steps) / 2**20))
EOF
done

echo "== Llama 3.2 1B's shape (random init), bf16 on cuda:0: ours against transformers + PyTorch (#18)"
# Llama-3.2-1B's config.json: GQA (32 query, 8 kv heads), tied head, llama3 RoPE. Byte-level text
# (token ids 0-255) until the tokenizers land (#19); the vocabulary is the real one.
cat > "$work/llama1b.yaml" <<'YAML'
name: llama-1b
seed: 1
model:
  type: llama
  block_size: 2048
  vocab_size: 128256
  hidden_size: 2048
  intermediate_size: 8192
  num_hidden_layers: 16
  num_attention_heads: 32
  num_key_value_heads: 8
  head_dim: 64
  max_position_embeddings: 131072
  tie_word_embeddings: true
  rms_norm_eps: 1.0e-05
  rope_theta: 500000.0
  rope_scaling: {rope_type: llama3, factor: 32.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192}
data: {type: text}
optimizer: {type: adamw, lr: 0.0003}
training: {per_device_batch_size: 4, max_steps: 30}
export: {enabled: false}
YAML
peak=${GPU_PEAK_TFLOPS:-989} # H100/H200 SXM dense bf16
"$bin/shardscope" launch --num_processes 1 --recipe "$work/llama1b.yaml" --mixed_precision bf16 \
  --runs_dir "$work/runs" --run_name llama1b -- --backend nccl || status=1
reference=$("$py" "$root/tests/tools/hf_train_bench.py" --recipe "$work/llama1b.yaml" --steps 30 --peak-tflops "$peak") \
  || { echo "the transformers reference failed"; status=1; }
python3 - "$work/runs/llama1b/events.jsonl" "$reference" "$peak" <<'EOF' || status=1
import json, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step"][5:]
ref = json.loads(sys.argv[2])
ours = sum(e["tokens"] for e in steps) / sum(e["step_time"] for e in steps)
mfu = ours * ref["flops_per_token"] / (float(sys.argv[3]) * 1e12)
print(f"{ref['parameters'] / 1e9:.2f}B parameters, 4 x 2048 tokens per step, bf16 autocast, AdamW")
print(f"ours: {ours:.0f} tokens/s, MFU {mfu:.3f}, peak CUDA memory {max(e['mem']['peak_allocated'] for e in steps) / 2**30:.1f} GiB")
# #22: the MFU the engine itself reports in its step events (its FLOP count, the device-peak table), beside
# the figure computed here from the reference's FLOP count and GPU_PEAK_TFLOPS.
reported = sorted(e["mfu"] for e in steps if e.get("mfu") is not None)
print("engine-reported MFU (median of its step events):", f"{reported[len(reported) // 2]:.3f}" if reported else "none (device peak unknown)")
print(f"transformers + PyTorch: {ref['tokens_per_s']:.0f} tokens/s, MFU {ref['mfu']:.3f}, peak {ref['peak_memory_gib']:.1f} GiB")
print(f"ratio {ours / ref['tokens_per_s']:.2f} (goal >= 1.0; MFU goal >= 0.45)")
EOF

echo "== Precision modes on cuda:0 (#23): bf16, bf16-pure, fp8 tokens/s, ours next to PyTorch's (same torch, same recipe)"
# The demo GPT: ours, and tests/tools/ddp_reference.py on cuda from the same initial weights (fp8:
# fp8_reference.py's tensorwise _scaled_mm layers where Accelerate's filter puts them). Llama 1B's
# shape: ours against transformers + PyTorch (hf_train_bench.py, the same fp8 layers for fp8).
echo "| model | mode | ours tokens/s | PyTorch tokens/s | ours / PyTorch | ours last loss | PyTorch last loss |"
echo "|---|---|---|---|---|---|---|"
for mode in bf16 bf16-pure fp8; do
  "$bin/shardscope" launch --num_processes 1 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps 60 \
    --runs_dir "$work/runs" --run_name "demo-$mode" -- --backend nccl --mixed_precision "$mode" \
    --dump-initial "$work/demo-$mode.safetensors" >/dev/null || { echo "| demo GPT | $mode | failed | | | | |"; status=1; continue; }
  "$py" "$root/tests/tools/ddp_reference.py" --recipe "$root/resources/recipes/demo-gpt.yaml" --max-steps 60 --ranks 1 \
    --device cuda --mixed-precision "$mode" --initial "$work/demo-$mode.safetensors" --out "$work/demo-$mode-ref.json" \
    >/dev/null 2>&1 || { echo "| demo GPT | $mode | | reference failed | | | |"; status=1; continue; }
  python3 - "$work/runs/demo-$mode/events.jsonl" "$work/demo-$mode-ref.json" "$mode" <<'PY' || status=1
import json, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step"][10:]
ref = json.load(open(sys.argv[2]))
ours = sum(e["tokens"] for e in steps) / sum(e["step_time"] for e in steps)
per_step = ref["tokens"] / len(ref["step_times"])
theirs = per_step * len(ref["step_times"][10:]) / sum(ref["step_times"][10:])
print(f"| demo GPT | {sys.argv[3]} | {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f} | {steps[-1]['loss']:.3f} | {ref['losses'][-1]:.3f} |")
PY
done
for mode in bf16-pure fp8; do
  "$bin/shardscope" launch --num_processes 1 --recipe "$work/llama1b.yaml" --max_steps 20 --runs_dir "$work/runs" \
    --run_name "llama1b-$mode" -- --backend nccl --mixed_precision "$mode" >/dev/null \
    || { echo "| Llama 1B | $mode | failed | | | | |"; status=1; continue; }
  reference=$("$py" "$root/tests/tools/hf_train_bench.py" --recipe "$work/llama1b.yaml" --steps 20 --peak-tflops "$peak" \
    --mixed-precision "$mode") || { echo "| Llama 1B | $mode | | reference failed | | | |"; status=1; continue; }
  python3 - "$work/runs/llama1b-$mode/events.jsonl" "$reference" "$mode" <<'PY' || status=1
import json, sys
steps = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step"][5:]
ref = json.loads(sys.argv[2])
ours = sum(e["tokens"] for e in steps) / sum(e["step_time"] for e in steps)
print(f"| Llama 1B | {sys.argv[3]} | {ours:.0f} | {ref['tokens_per_s']:.0f} | {ours / ref['tokens_per_s']:.2f} | "
      f"{steps[-1]['loss']:.3f} | {ref['loss']:.3f} |")
PY
done
# Which layers ran in fp8, as each fp8 run's rank 0 said.
cat "$work"/runs/*-fp8/events.jsonl | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] == "log" and e["message"].startswith("fp8: "):
        print("engine:", e["message"])'
exit $status
