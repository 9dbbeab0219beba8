#!/usr/bin/env bash
# Trace import benchmark for docs/BENCHMARKS.md, "Trace import": our Kineto import plus analysis
# (build/dev/profiler/bench_kineto_import) against Holistic Trace Analysis loading the same file
# (tests/tools/hta_reference.py load: TraceAnalysis' parse, align and filter), each in a process
# of its own so that peak RSS is the file's. Files: the largest corpus trace, and a synthetic
# torch.profiler trace of MB megabytes (tests/tools/kineto_synthetic.py).
#   ./scripts/bench-trace-import.sh [MB]     default 500
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
py="$root/.venv/bin/python"
ours="$root/build/dev/profiler/bench_kineto_import"
[ -x "$ours" ] || { echo "build first: cmake --build build/dev --target bench_kineto_import" >&2; exit 1; }
mb=${1:-500}
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(uname -sr)"
"$py" "$root/tests/tools/kineto_synthetic.py" --mb "$mb" --out "$work/synthetic.json"
for file in "$root/../shared/corpus/kineto-traces/nccl_parser_config_nccl_data.json.gz" "$work/synthetic.json"; do
  echo "file: $(basename "$file") ($(du -h "$file" | cut -f1))"
  echo "  shardscope: $("$ours" "$file")"
  echo "  hta:        $("$py" "$root/tests/tools/hta_reference.py" load "$file")"
done
