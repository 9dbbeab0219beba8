#!/usr/bin/env bash
# The cost of profiling: the demo recipe on 2 CPU ranks with the profile window open over every
# step but the first two, against the same run without profiling, alternately; mean step time
# over steps 3..N. Prints a Markdown row pair for docs/PROFILING.md.
#
#   ./scripts/profile-overhead.sh [rounds] [steps]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rounds=${1:-3}
steps=${2:-40}
shardscope_measure_setup
mean_step() {
  python3 - "$1" <<'PY'
import json, sys
t = [e["step_time"] for e in map(json.loads, open(sys.argv[1])) if e["type"] == "step" and e["rank"] == 0][2:]
print(sum(t) / len(t))
PY
}
on=(); off=()
for i in $(seq "$rounds"); do
  "$bin" launch --num_processes 2 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps "$steps" \
    --runs_dir "$work/runs" --run_name "off$i" >/dev/null
  off+=("$(mean_step "$work/runs/off$i/events.jsonl")")
  "$bin" launch --num_processes 2 --recipe "$root/resources/recipes/demo-gpt.yaml" --max_steps "$steps" \
    --runs_dir "$work/runs" --run_name "on$i" -- --profile_start_step 3 --profile_steps "$steps" >/dev/null
  on+=("$(mean_step "$work/runs/on$i/events.jsonl")")
done
python3 - "${off[*]}" "${on[*]}" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(off), statistics.median(on)
print(f"| profiling off | {a * 1000:.2f} ms/step |")
print(f"| profiling on (window over every step) | {b * 1000:.2f} ms/step |")
print(f"| overhead | {100 * (b - a) / a:+.1f} % |")
PY
