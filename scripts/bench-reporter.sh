#!/usr/bin/env bash
# The reporter's cost per step, for docs/BENCHMARKS.md, "Reporter": the Accelerate example
# (resources/examples/accelerate_train.py) on 2 CPU ranks through shardscope launch, with the
# reporter (its two lines) and without (--no_reporter), alternating, PAIRS times each; the
# example's own mean step time after 3 warm-up steps (rank 0's log). WIDTH is the model's width
# (64: a 7 ms step here; 512: a longer one).
#   ./scripts/bench-reporter.sh [STEPS] [PAIRS] [WIDTH]     defaults 1000, 5, 64
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
steps=${1:-1000}
pairs=${2:-5}
width=${3:-64}
export VIRTUAL_ENV="$root/.venv"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(uname -sr)"
printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: "no"\nnum_machines: 1\nnum_processes: 2\nuse_cpu: true\n' \
  > "$work/cpu2.yaml"
with=() without=()
for pair in $(seq "$pairs"); do
  for mode in with without; do
    flag=(); [ "$mode" = without ] && flag=(--no_reporter)
    name="$mode-$pair"
    "$bin" launch --config_file "$work/cpu2.yaml" --script "$root/resources/examples/accelerate_train.py" --run_name "$name" \
      -- --steps "$steps" --width "$width" "${flag[@]}" >/dev/null 2>&1 || { echo "run $name failed" >&2; exit 1; }
    ms=$(sed -n 's/^.*step time: \([0-9.]*\) ms.*$/\1/p' "$SHARDSCOPE_HOME/runs/$name/logs/rank0.log" | tail -1)
    [ -n "$ms" ] || { echo "no step time in run $name's log" >&2; exit 1; }
    if [ "$mode" = with ]; then with+=("$ms"); else without+=("$ms"); fi
  done
done
"$root/.venv/bin/python" - "${with[*]}" "${without[*]}" <<'PY'
import statistics, sys
w = [float(x) for x in sys.argv[1].split()]
o = [float(x) for x in sys.argv[2].split()]
mw, mo = statistics.median(w), statistics.median(o)
print("with reporter    ms/step:", " ".join("%.3f" % x for x in w), " median %.3f" % mw)
print("without reporter ms/step:", " ".join("%.3f" % x for x in o), " median %.3f" % mo)
print("reporter cost: %.3f ms/step = %.2f %% of a step" % (mw - mo, 100 * (mw - mo) / mo))
PY
# The reporter's own cost per call on one process (no collective, events to a file), which the
# A/B above cannot resolve from run-to-run noise: Reporter.step's Python work per step.
SHARDSCOPE_HOME="$work/percall" SHARDSCOPE_BIN=/bin/true "$root/.venv/bin/python" - <<'PY' 2>/dev/null
import time, torch, shardscope
reporter = shardscope.Reporter(None)
batch = torch.randint(0, 255, (8, 32))
loss = torch.tensor(1.5)
for _ in range(100):
    reporter.step(loss, batch)
start = time.perf_counter()
for _ in range(5000):
    reporter.step(loss, batch)
print("Reporter.step alone: %.1f us per call" % ((time.perf_counter() - start) / 5000 * 1e6))
PY
