#!/usr/bin/env bash
# The reporter's cost per step, for docs/BENCHMARKS.md, "Reporter": the Accelerate example
# (resources/examples/accelerate_train.py) on 2 CPU ranks through shardscope launch, with the
# reporter (its two lines) and without (--no_reporter), alternating, PAIRS times each; the
# example's own mean step time after 3 warm-up steps (rank 0's log).
#   ./scripts/bench-reporter.sh [STEPS] [PAIRS]     defaults 300, 5
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
steps=${1:-300}
pairs=${2:-5}
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
      -- --steps "$steps" "${flag[@]}" >/dev/null 2>&1 || { echo "run $name failed" >&2; exit 1; }
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
