#!/usr/bin/env bash
# What #22's diagnostics cost a step, for docs/BENCHMARKS.md, "Diagnostics overhead": the demo GPT
# (resources/recipes/demo-gpt.yaml) on 2 CPU ranks, in ONE run whose steps alternate between the
# diagnostics on (odd steps: the flight recorder, the wait clock, memory per phase, the NaN probe)
# and off (even steps), `-- --diagnostics-ab`; so both halves share the machine, the data and the
# moment. Per rank: the median step time of each half after WARMUP steps, their ratio, and a
# bootstrap 95% interval of it.
#   ./scripts/bench-diagnostics.sh [STEPS] [WARMUP]     defaults 300, 20
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
steps=${1:-300}
warmup=${2:-20}
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(uname -sr)"
echo "command: shardscope launch --num_processes 2 --recipe resources/recipes/demo-gpt.yaml --max_steps $steps -- --diagnostics-ab"
"$bin" launch --num_processes 2 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps "$steps" --run_name ab \
  -- --diagnostics-ab >/dev/null 2>&1 || { echo "the run failed: see $SHARDSCOPE_HOME/runs/ab/logs" >&2; exit 1; }
"$root/.venv/bin/python" - "$SHARDSCOPE_HOME/runs/ab/events.jsonl" "$warmup" <<'PY'
import json, random, statistics, sys
path, warmup = sys.argv[1], int(sys.argv[2])
times = {}
for line in open(path):
    e = json.loads(line)
    if e.get("type") != "step" or e["step"] <= warmup:
        continue
    on = e["step"] % 2 == 1
    times.setdefault(e["rank"], {True: [], False: []})[on].append(e["step_time"])
random.seed(0)
print("| rank | steps on / off | median on (ms) | median off (ms) | overhead | 95% interval |")
print("|---|---|---|---|---|---|")
for rank, halves in sorted(times.items()):
    on, off = halves[True], halves[False]
    ratio = statistics.median(on) / statistics.median(off) - 1
    boot = sorted(statistics.median(random.choices(on, k=len(on))) / statistics.median(random.choices(off, k=len(off))) - 1
                  for _ in range(2000))
    print(f"| {rank} | {len(on)} / {len(off)} | {1000 * statistics.median(on):.2f} | {1000 * statistics.median(off):.2f} | "
          f"{100 * ratio:+.2f} % | {100 * boot[50]:+.2f} .. {100 * boot[1949]:+.2f} % |")
PY
