#!/usr/bin/env bash
# Faults injected into real 2-rank training runs, and what happened: time from the fault until the
# launcher had stopped every rank, processes left behind, the run's status in the history, and
# metric rows lost (events the ranks wrote to events.jsonl that are missing from the store).
# Prints Markdown for docs/RELIABILITY.md.
#
#   ./scripts/reliability-report.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
shardscope_measure_setup
cat > "$work/long.yaml" <<'EOF'
name: long
model: {type: mlp}
data: {type: synthetic_regression}
training: {per_device_batch_size: 8, max_steps: 1000000}
EOF

pids_of() { python3 -c "
import json,sys
print(' '.join(str(e['pid']) for e in map(json.loads, open('$1')) if e['type']=='hello'))" 2>/dev/null; }
alive() { local n=0; for p in "$@"; do kill -0 "$p" 2>/dev/null && n=$((n+1)); done; echo $n; }
wait_steps() { # run name
  for _ in $(seq 600); do
    [ -f "$work/home/runs/$1/events.jsonl" ] && [ "$(grep -c '"type":"step"' "$work/home/runs/$1/events.jsonl")" -ge 4 ] && return 0
    sleep 0.1
  done
  return 1
}
now() { date +%s.%N; }
report() { # fault, action, run name, t_fault, t_stopped, pids...
  local fault=$1 action=$2 run=$3 t0=$4 t1=$5; shift 5
  local left; left=$(alive "$@")
  local status rows events
  status=$(sqlite3 "$work/home/history.sqlite" "select status from runs where name='$run'" 2>/dev/null)
  [ "$status" = running ] && status="running (marked interrupted on the next open)"
  rows=$(sqlite3 "$work/home/history.sqlite" "select count(*) from metrics m join runs r on r.id=m.run_id join metric_keys k on k.id=m.key_id where r.name='$run' and k.name='loss'" 2>/dev/null || echo "?")
  events=$(grep -c '"type":"step"' "$work/home/runs/$run/events.jsonl")
  printf '| %s | %s | %.2f s | %s | %s | %s |\n' "$fault" "$action" "$(echo "$t1 - $t0" | bc)" "$left" "$status" \
    "$((events - rows))"
}

echo "| fault | what the script does | fault to all ranks stopped | processes left | run status | loss rows lost |"
echo "|---|---|---|---|---|---|"

# 1. A rank killed with SIGKILL.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name kill >/dev/null 2>&1 & launcher=$!
wait_steps kill; set -- $(pids_of "$work/home/runs/kill/events.jsonl")
t0=$(now); kill -KILL "$2"; wait $launcher; t1=$(now)
report "rank killed (SIGKILL)" "kill -KILL rank 1 after 4 steps" kill "$t0" "$t1" "$@"

# 2. A rank that hangs (stopped with SIGSTOP: alive, silent), heartbeat timeout 2 s.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name hang --heartbeat_timeout 2 >/dev/null 2>&1 & launcher=$!
wait_steps hang; set -- $(pids_of "$work/home/runs/hang/events.jsonl")
t0=$(now); kill -STOP "$2"; wait $launcher; t1=$(now)
report "rank hangs (no heartbeat)" "kill -STOP rank 1; --heartbeat_timeout 2" hang "$t0" "$t1" "$@"

# 3. A rank that throws: fp8 on a CPU rank is refused inside every rank at start.
t0=$(now); "$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name throw --mixed_precision fp8 \
  >/dev/null 2>&1; t1=$(now)
report "rank throws" "an option the ranks refuse (error event, exit 4)" throw "$t0" "$t1"

# 4. The launcher killed with SIGKILL: the ranks follow by their parent-death signal.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name orphan >/dev/null 2>&1 & launcher=$!
wait_steps orphan; set -- $(pids_of "$work/home/runs/orphan/events.jsonl")
t0=$(now); kill -KILL $launcher; wait $launcher 2>/dev/null
for _ in $(seq 100); do [ "$(alive "$@")" = 0 ] && break; sleep 0.05; done; t1=$(now)
"$bin" runs list >/dev/null 2>&1 # opening the store marks the run interrupted and recovers its rows
report "launcher killed (SIGKILL)" "kill -KILL the launcher after 4 steps" orphan "$t0" "$t1" "$@"

# 5. Ctrl-C: SIGINT to the launcher.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name ctrlc >/dev/null 2>&1 & launcher=$!
wait_steps ctrlc; set -- $(pids_of "$work/home/runs/ctrlc/events.jsonl")
t0=$(now); kill -INT $launcher; wait $launcher; t1=$(now)
report "Ctrl-C" "kill -INT the launcher" ctrlc "$t0" "$t1" "$@"

"$bin" runs list >/dev/null 2>&1 # opening the store marks the orphaned run
echo
echo "After reopening the store: the orphaned run is '$(sqlite3 "$work/home/history.sqlite" "select status from runs where name='orphan'")'."

# 6. The rendezvous port already taken.
python3 -c "import socket,time;s=socket.socket();s.bind(('127.0.0.1',29611));s.listen();time.sleep(5)" & holder=$!
sleep 0.5
msg=$("$bin" launch --num_processes 2 --main_process_port 29611 -- check-collectives 2>&1 | tail -1)
kill $holder 2>/dev/null
echo
echo "Port taken: \`$msg\`"

# 7. The disk fills up before a checkpoint: from step 8 the ranks cannot write files over 64 KiB
#    (RLIMIT_FSIZE, --fill-disk-at-step), so the checkpoint after step 10 fails.
cat > "$work/ckpt.yaml" <<'YAML'
name: ckpt
model: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32}
training: {per_device_batch_size: 4, max_steps: 20, checkpoint_every: 5}
YAML
echo
echo "| fault | what the script does | launcher exit | run status | loss rows lost | previous checkpoint | half-written checkpoint |"
echo "|---|---|---|---|---|---|---|"
msg=$("$bin" launch --num_processes 2 --recipe "$work/ckpt.yaml" --run_name diskfull -- --fill-disk-at-step 8 2>&1)
code=$?
ck="$work/home/runs/diskfull/checkpoints"
status=$(sqlite3 "$work/home/history.sqlite" "select status from runs where name='diskfull'" 2>/dev/null)
rows=$(sqlite3 "$work/home/history.sqlite" "select count(*) from metrics m join runs r on r.id=m.run_id join metric_keys k on k.id=m.key_id where r.name='diskfull' and k.name='loss'" 2>/dev/null || echo "?")
events=$(grep -c '"type":"step"' "$work/home/runs/diskfull/events.jsonl")
printf '| disk full at a checkpoint | 64 KiB file-size limit on the ranks from step 8 | %s | %s | %s | %s | %s |\n' "$code" "$status" \
  "$((events - rows))" "$([ -f "$ck/step_5/manifest.json" ] && echo "step_5 complete" || echo MISSING)" \
  "$([ -e "$ck/step_10" ] && echo "step_10 EXISTS" || echo "none under a final name")"
echo
echo "Message: \`$(grep -m1 'reported by rank' <<<"$msg" | sed 's/^ *//')\`"
