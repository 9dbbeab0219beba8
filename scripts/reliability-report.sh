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
report() { # fault, action, run name, launcher exit, expected root-cause rank, t_fault, t_stopped, pids...
  local fault=$1 action=$2 run=$3 code=$4 expect=$5 t0=$6 t1=$7; shift 7
  local left; left=$(alive "$@")
  local status rows events root
  status=$(sqlite3 "$work/home/history.sqlite" "select status from runs where name='$run'" 2>/dev/null)
  [ "$status" = running ] && status="running (marked interrupted on the next open)"
  root=$(sqlite3 "$work/home/history.sqlite" "select coalesce(root_cause_rank, '-') from runs where name='$run'" 2>/dev/null)
  rows=$(sqlite3 "$work/home/history.sqlite" "select count(*) from metrics m join runs r on r.id=m.run_id join metric_keys k on k.id=m.key_id where r.name='$run' and k.name='loss'" 2>/dev/null || echo "?")
  events=$(grep -c '"type":"step"' "$work/home/runs/$run/events.jsonl")
  printf '| %s | %s | %.2f s | %s | %s | %s (expected %s) | %s | %s |\n' "$fault" "$action" "$(echo "$t1 - $t0" | bc)" \
    "$code" "$status" "$root" "$expect" "$left" "$((events - rows))"
}
pid_of_rank() { python3 -c "
import json
print([e['pid'] for e in map(json.loads, open('$1')) if e['type']=='hello' and e['rank']==$2][0])"; }

echo "| fault | what the script does | fault to all ranks stopped | launcher exit | run status | root-cause rank | processes left | loss rows lost |"
echo "|---|---|---|---|---|---|---|---|"

# 1. A rank killed with SIGKILL.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name kill >/dev/null 2>&1 & launcher=$!
wait_steps kill; set -- $(pids_of "$work/home/runs/kill/events.jsonl")
t0=$(now); kill -KILL "$(pid_of_rank "$work/home/runs/kill/events.jsonl" 1)"; wait $launcher; code=$?; t1=$(now)
report "rank killed (SIGKILL)" "kill -KILL rank 1 after 4 steps" kill $code 1 "$t0" "$t1" "$@"

# 2. A rank that hangs (stopped with SIGSTOP: alive, silent; rank 0 waits for it in an all-reduce
#    and keeps beating), heartbeat timeout 2 s.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name hang --heartbeat_timeout 2 >/dev/null 2>&1 & launcher=$!
wait_steps hang; set -- $(pids_of "$work/home/runs/hang/events.jsonl")
t0=$(now); kill -STOP "$(pid_of_rank "$work/home/runs/hang/events.jsonl" 1)"; wait $launcher; code=$?; t1=$(now)
report "rank hangs (no heartbeat)" "kill -STOP rank 1; --heartbeat_timeout 2" hang $code 1 "$t0" "$t1" "$@"

# 3. A rank taken as hung that then cancels cleanly (it used to end 'completed', exit 0).
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name cut --heartbeat_timeout 1 >/dev/null 2>&1 & launcher=$!
wait_steps cut; set -- $(pids_of "$work/home/runs/cut/events.jsonl"); r1=$(pid_of_rank "$work/home/runs/cut/events.jsonl" 1)
t0=$(now); kill -STOP "$r1"; sleep 2.5; kill -CONT "$r1"; wait $launcher; code=$?; t1=$(now)
report "hung rank that cancels cleanly" "kill -STOP rank 1 for 2.5 s; --heartbeat_timeout 1" cut $code 1 "$t0" "$t1" "$@"

# 4. A rank that throws: fp8 on a CPU rank is refused inside every rank at start.
t0=$(now); "$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name throw --mixed_precision fp8 \
  >/dev/null 2>&1; code=$?; t1=$(now)
report "rank throws" "an option the ranks refuse (error event, exit 4)" throw $code "0 or 1" "$t0" "$t1"

# 5. One rank's own error on resume: its optimizer file truncated; the peer loses its connection.
cat > "$work/short.yaml" <<'YAML'
name: short
model: {type: mlp}
data: {type: synthetic_regression}
training: {per_device_batch_size: 8, max_steps: 10, checkpoint_every: 5}
YAML
"$bin" launch --num_processes 2 --recipe "$work/short.yaml" --run_name base >/dev/null 2>&1
mkdir -p "$work/trunc" "$work/edited"
cp -r "$work/home/runs/base/checkpoints/step_10" "$work/trunc/"; truncate -s 10 "$work/trunc/step_10/optimizer_rank1.bin"
sed 's/max_steps: 10/max_steps: 20/' "$work/short.yaml" > "$work/resume.yaml"
t0=$(now); "$bin" launch --num_processes 2 --recipe "$work/resume.yaml" --run_name trunc \
  --resume_from_checkpoint "$work/trunc/step_10" >"$work/trunc.out" 2>&1; code=$?; t1=$(now)
report "truncated optimizer_rank1.bin" "resume; rank 0 loses its peer (exit $(grep -o 'rank 0 (pid [0-9]*) stopped by the launcher, exited with code [0-9]*' "$work/trunc.out" | grep -o '[0-9]*$'))" trunc $code 1 "$t0" "$t1"

# 6. Ranks that disagree on the resumed step (state_rank1.json edited to step 7).
cp -r "$work/home/runs/base/checkpoints/step_10" "$work/edited/"
python3 -c "import json;p='$work/edited/step_10/state_rank1.json';d=json.load(open(p));d['step']=7;json.dump(d,open(p,'w'))"
t0=$(now); "$bin" launch --num_processes 2 --recipe "$work/resume.yaml" --run_name edited \
  --resume_from_checkpoint "$work/edited/step_10" >"$work/edited.out" 2>&1; code=$?; t1=$(now)
report "ranks resume different steps" "state_rank1.json edited to step 7 (both ranks see it)" edited $code "0 or 1" "$t0" "$t1"

# 7. The launcher killed with SIGKILL: the ranks follow by their parent-death signal.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name orphan >/dev/null 2>&1 & launcher=$!
wait_steps orphan; set -- $(pids_of "$work/home/runs/orphan/events.jsonl")
t0=$(now); kill -KILL $launcher; wait $launcher 2>/dev/null; code=$?
for _ in $(seq 100); do [ "$(alive "$@")" = 0 ] && break; sleep 0.05; done; t1=$(now)
"$bin" runs list >/dev/null 2>&1 # opening the store marks the run interrupted and recovers its rows
report "launcher killed (SIGKILL)" "kill -KILL the launcher after 4 steps" orphan $code - "$t0" "$t1" "$@"

# 8. Ctrl-C: SIGINT to the launcher.
"$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name ctrlc >/dev/null 2>&1 & launcher=$!
wait_steps ctrlc; set -- $(pids_of "$work/home/runs/ctrlc/events.jsonl")
t0=$(now); kill -INT $launcher; wait $launcher; code=$?; t1=$(now)
report "Ctrl-C" "kill -INT the launcher" ctrlc $code - "$t0" "$t1" "$@"

"$bin" runs list >/dev/null 2>&1 # opening the store marks the orphaned run
echo
echo "After reopening the store: the orphaned run is '$(sqlite3 "$work/home/history.sqlite" "select status from runs where name='orphan'")'."

# 9. The rendezvous port already taken.
python3 -c "import socket,time;s=socket.socket();s.bind(('127.0.0.1',29611));s.listen();time.sleep(5)" & holder=$!
sleep 0.5
msg=$("$bin" launch --num_processes 2 --main_process_port 29611 -- check-collectives 2>&1 | tail -1)
kill $holder 2>/dev/null
echo
echo "Port taken: \`$msg\`"

# 10. The disk fills up before a checkpoint: from step 8 the ranks cannot write files over 64 KiB
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

# 11. The history's own disk (a 24 MiB tmpfs holding SHARDSCOPE_HOME) full for 3 s mid-run, and
#     full from the middle of a run to its end. Needs root to mount; CI runs as root.
echo
if [ "$(id -u)" = 0 ] && mkdir -p "$work/disk" && mount -t tmpfs -o size=24m tmpfs "$work/disk" 2>/dev/null; then
  trap 'umount -l "$work/disk" 2>/dev/null; pkill -f "$work" 2>/dev/null; rm -rf "$work"' EXIT
  export SHARDSCOPE_HOME="$work/disk/home"
  fill() { dd if=/dev/zero of="$work/disk/filler" bs=64k 2>/dev/null; dd if=/dev/zero of="$work/disk/filler2" bs=512 2>/dev/null; }
  cat > "$work/disk.yaml" <<'YAML'
name: disk
model: {type: mlp}
data: {type: synthetic_regression}
training: {per_device_batch_size: 8, max_steps: 4000}
export: {enabled: false}
YAML
  home_db="$SHARDSCOPE_HOME/history.sqlite"
  echo "| fault | what the script does | launcher exit | run status | step lines lost from events.jsonl | loss rows lost | what it said |"
  echo "|---|---|---|---|---|---|---|"
  "$bin" launch --num_processes 2 --recipe "$work/disk.yaml" --run_name midrun >"$work/midrun.out" 2>&1 & launcher=$!
  for _ in $(seq 600); do [ -f "$SHARDSCOPE_HOME/runs/midrun/events.jsonl" ] && [ "$(grep -c '"type":"step"' "$SHARDSCOPE_HOME/runs/midrun/events.jsonl")" -ge 4 ] && break; sleep 0.1; done
  fill; sleep 3; rm -f "$work/disk/filler" "$work/disk/filler2"; wait $launcher; code=$?
  lines=$(grep -c '"type":"step"' "$SHARDSCOPE_HOME/runs/midrun/events.jsonl")
  rows=$(sqlite3 "$home_db" "select count(*) from metrics m join runs r on r.id=m.run_id join metric_keys k on k.id=m.key_id where r.name='midrun' and k.name='loss'")
  printf '| store disk full for 3 s | tmpfs filled after 4 steps, emptied 3 s later | %s | %s | %s | %s | `%s` |\n' $code \
    "$(sqlite3 "$home_db" "select status from runs where name='midrun'")" $((8000 - lines)) $((8000 - rows)) \
    "$(grep -m1 'could not be written for' "$work/midrun.out" | sed 's/^shardscope launch: //')"
  sed 's/max_steps: 4000/max_steps: 1500/' "$work/disk.yaml" > "$work/disk2.yaml"
  "$bin" launch --num_processes 2 --recipe "$work/disk2.yaml" --run_name toend >"$work/toend.out" 2>&1 & launcher=$!
  for _ in $(seq 600); do [ -f "$SHARDSCOPE_HOME/runs/toend/events.jsonl" ] && [ "$(grep -c '"type":"step"' "$SHARDSCOPE_HOME/runs/toend/events.jsonl")" -ge 4 ] && break; sleep 0.1; done
  fill; wait $launcher; code=$?
  "$bin" runs list >"$work/list-full.out" 2>&1; listed=$?
  rm -f "$work/disk/filler" "$work/disk/filler2"
  "$bin" runs list >/dev/null 2>&1
  printf '| store disk full to the end | tmpfs filled after 4 steps, emptied after the launcher exited | %s | %s (exit code %s in the history) | (lost with the launcher) | - | `runs list` while full: exit %s; `%s` |\n' $code \
    "$(sqlite3 "$home_db" "select status from runs where name='toend'")" "$(sqlite3 "$home_db" "select exit_code from runs where name='toend'")" \
    $listed "$(grep -m1 'outcome is kept' "$work/toend.out" | sed 's/^ *//')"
  # A read-only home holding a run whose launcher was killed.
  "$bin" launch --num_processes 2 --recipe "$work/long.yaml" --run_name ro >/dev/null 2>&1 & launcher=$!
  for _ in $(seq 600); do [ -f "$SHARDSCOPE_HOME/runs/ro/events.jsonl" ] && [ "$(grep -c '"type":"step"' "$SHARDSCOPE_HOME/runs/ro/events.jsonl")" -ge 4 ] && break; sleep 0.1; done
  kill -KILL $launcher; wait $launcher 2>/dev/null; sleep 0.5
  mount -o remount,ro "$work/disk"
  "$bin" runs list >"$work/ro.out" 2>&1; listed=$?
  mount -o remount,rw "$work/disk"
  printf '| read-only home, orphaned run | launcher SIGKILLed, home remounted read-only, `runs list` | - | %s | - | - | exit %s: `%s` |\n' \
    "$(grep -o 'ro  *[a-z]*' "$work/ro.out" | awk '{print $2}')" $listed "$(grep -m1 warning "$work/ro.out" | cut -c1-160)..."
  export SHARDSCOPE_HOME="$work/home"
else
  echo "Store-disk faults skipped: mounting a small tmpfs needs root."
fi

# 12. A machine-rank-1 launcher with no machine 0 listening.
t0=$(now); msg=$("$bin" launch --num_processes 2 --num_machines 2 --machine_rank 1 --main_process_port 29613 \
  --recipe "$work/long.yaml" --run_name lonely --rendezvous_timeout 6 2>&1); code=$?; t1=$(now)
echo
printf 'Machine 1 without machine 0 (`--rendezvous_timeout 6`): exit %s after %.1f s; it said `%s` and then `%s`\n' $code \
  "$(echo "$t1 - $t0" | bc)" "$(grep -m1 'waiting for machine 0' <<<"$msg")" "$(grep -m1 'did not answer' <<<"$msg" | cut -c1-120)..."
