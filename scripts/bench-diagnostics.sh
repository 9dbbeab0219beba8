#!/usr/bin/env bash
# What #22's diagnostics cost a step, for docs/BENCHMARKS.md, "Diagnostics overhead": the demo GPT
# (resources/recipes/demo-gpt.yaml) on 2 CPU ranks, in ONE run whose steps cycle through four
# modes (`-- --diagnostics-ab`; step % 4): 0 none of the diagnostics, 1 all of them, 2 the flight
# recorder and the wait clock alone, 3 the NaN probe and memory per phase alone. Each cycle's
# steps share the machine, the data and the moment; each mode's step is compared with its cycle's
# mode-0 step. Per rank and mode: the median step times, the median of the per-cycle ratios, and
# a bootstrap 95% interval of that median over cycles. WARMUP steps are left out.
#   ./scripts/bench-diagnostics.sh [STEPS] [WARMUP]     defaults 800, 20
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
steps=${1:-800}
warmup=${2:-20}
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(uname -sr)"
echo "command: shardscope launch --num_processes 2 --recipe resources/recipes/demo-gpt.yaml --max_steps $steps -- --diagnostics-ab"
"$bin" launch --num_processes 2 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps "$steps" --run_name ab \
  -- --diagnostics-ab >/dev/null 2>&1 || { echo "the run failed: see $SHARDSCOPE_HOME/runs/ab/logs" >&2; exit 1; }
"$root/.venv/bin/python" - "$SHARDSCOPE_HOME/runs/ab/events.jsonl" "$warmup" <<'PY'
import json, random, statistics, sys
path, warmup = sys.argv[1], int(sys.argv[2])
times = {}  # rank -> cycle -> mode -> step time
for line in open(path):
    e = json.loads(line)
    if e.get("type") != "step" or e["step"] <= warmup:
        continue
    times.setdefault(e["rank"], {}).setdefault(e["step"] // 4, {})[e["step"] % 4] = e["step_time"]
names = {1: "all of them", 2: "flight recorder + wait clock", 3: "NaN probe + memory per phase"}
random.seed(0)
print("| rank | diagnostics on | cycles | median step, on (ms) | median step, off (ms) | overhead (median of per-cycle ratios) | 95% interval |")
print("|---|---|---|---|---|---|---|")
for rank, cycles in sorted(times.items()):
    for mode, name in names.items():
        pairs = [(c[mode], c[0]) for c in cycles.values() if mode in c and 0 in c]
        ratios = [on / off - 1 for on, off in pairs]
        boot = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(2000))
        print(f"| {rank} | {name} | {len(pairs)} | {1000 * statistics.median(p[0] for p in pairs):.2f} | "
              f"{1000 * statistics.median(p[1] for p in pairs):.2f} | {100 * statistics.median(ratios):+.2f} % | "
              f"{100 * boot[50]:+.2f} .. {100 * boot[1949]:+.2f} % |")
PY
