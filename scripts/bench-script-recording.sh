#!/usr/bin/env bash
# What the collective state of script ranks costs (#44), for docs/BENCHMARKS.md, "Collective
# state of script ranks": the Accelerate example on 2 CPU ranks through shardscope launch, as it
# runs by default (torch's Flight Recorder on, the reporter reading the pending collective every
# beat) and with both off (TORCH_FR_BUFFER_SIZE=0, SHARDSCOPE_COLLECTIVE_STATE=0), alternating,
# PAIRS times each, at a beat of BEAT_MS (the launcher's is timeout / 4, at most 2 s); the example's
# mean step time after 3 warm-up steps (rank 0's log). Then the two costs the A/B cannot resolve
# from this machine's noise, each alone on one process: a Gloo all_reduce with the Flight Recorder
# on and off (what torch's recording adds to a collective), and the reporter's read of the pending
# collective with a full recorder (what a beat adds, on the heartbeat thread).
#   ./scripts/bench-script-recording.sh [STEPS] [PAIRS] [BEAT_MS]     defaults 1000, 4, 250
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
steps=${1:-1000}
pairs=${2:-4}
beat=${3:-250}
export VIRTUAL_ENV="$root/.venv"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(uname -sr)"
printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: "no"\nnum_machines: 1\nnum_processes: 2\nuse_cpu: true\n' \
  > "$work/cpu2.yaml"
# The launcher beats at a quarter of --heartbeat_timeout (at most 2 s): BEAT_MS * 4 ms.
timeout_s=$("$root/.venv/bin/python" -c "print($beat * 4 / 1000)")
on=() off=()
for pair in $(seq "$pairs"); do
  for mode in on off; do
    name="$mode-$pair"
    envs=(); [ "$mode" = off ] && envs=(TORCH_FR_BUFFER_SIZE=0 SHARDSCOPE_COLLECTIVE_STATE=0)
    env "${envs[@]}" "$bin" launch --config_file "$work/cpu2.yaml" --script "$root/resources/examples/accelerate_train.py" \
      --run_name "$name" --heartbeat_timeout "$timeout_s" -- --steps "$steps" >/dev/null 2>&1 \
      || { echo "run $name failed" >&2; exit 1; }
    ms=$(sed -n 's/^.*step time: \([0-9.]*\) ms.*$/\1/p' "$SHARDSCOPE_HOME/runs/$name/logs/rank0.log" | tail -1)
    [ -n "$ms" ] || { echo "no step time in run $name's log" >&2; exit 1; }
    if [ "$mode" = on ]; then on+=("$ms"); else off+=("$ms"); fi
  done
done
"$root/.venv/bin/python" - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print("recording on  ms/step:", " ".join("%.3f" % x for x in a), " median %.3f" % ma)
print("recording off ms/step:", " ".join("%.3f" % x for x in b), " median %.3f" % mb)
print("difference: %.3f ms/step = %.2f %% of a step" % (ma - mb, 100 * (ma - mb) / mb))
PY
cat > "$work/one_rank.py" <<'PY'
import os, sys, time, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
x = torch.ones(256)
for _ in range(2000):
    dist.all_reduce(x)
if sys.argv[2] == "collective":
    start = time.perf_counter()
    for _ in range(20000):
        dist.all_reduce(x)
    print("%.2f" % ((time.perf_counter() - start) / 20000 * 1e6))
else:
    from shardscope import collectives
    watch = collectives.PendingWatch()
    start = time.perf_counter()
    for _ in range(2000):
        watch.oldest()
    print("%.1f" % ((time.perf_counter() - start) / 2000 * 1e6))
dist.destroy_process_group()
PY
port=$((29000 + RANDOM % 1000))
with_fr=$("$root/.venv/bin/python" "$work/one_rank.py" "$port" collective)
without_fr=$(TORCH_FR_BUFFER_SIZE=0 "$root/.venv/bin/python" "$work/one_rank.py" "$((port + 1))" collective)
read_us=$("$root/.venv/bin/python" "$work/one_rank.py" "$((port + 2))" read)
echo "one-rank Gloo all_reduce (256 floats): ${with_fr} us with the Flight Recorder, ${without_fr} us without"
echo "PendingWatch.oldest() with 2000 recorded collectives: ${read_us} us per beat"
