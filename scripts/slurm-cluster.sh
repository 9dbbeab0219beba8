#!/usr/bin/env bash
# A real multi-node SLURM cluster on this one machine, for the tests (adapted from
# ../shared/refs/cluster/slurm-minicluster.sh, where the measurements are). Debian's slurm-wlm
# builds slurmd with multiple-slurmd support: nodes n1..nN each run as `slurmd -N nI` with their
# own port, all at 127.0.0.1. No systemd, no cgroups (proctrack/linuxproc), no accounting
# database (jobcomp/filetxt records finished jobs). Every daemon is started here, its PID
# recorded, and stopped here by PID.
#
#   scripts/slurm-cluster.sh start     prints `export SLURM_CONF=...` (a second start fails)
#   scripts/slurm-cluster.sh stop      cancels the jobs, stops every daemon it started
#   scripts/slurm-cluster.sh status
#   scripts/slurm-cluster.sh kill-controller    SIGKILL to slurmctld (its jobs go on on the nodes)
#   scripts/slurm-cluster.sh start-controller   slurmctld again, recovering its state; waits until it answers
#   scripts/slurm-cluster.sh kill-node nI       SIGKILL to node nI's slurmd (its tasks run on, unheard)
#   scripts/slurm-cluster.sh start-node nI      node nI's slurmd again; waits until SLURM has it back
#
# Environment: SLURM_LAB (default /tmp/shardscope-slurm-$USER), NODES (2), CPUS (CPUs per node, 2),
# PORT_BASE (26817: the controller; nodes listen on PORT_BASE+100+i), HIDE_FROM_LAST_NODE (a folder
# the last node does not see, as a node where a shared folder is not mounted: its slurmd runs in a
# mount namespace of its own with an empty tmpfs over that folder; needs root).
set -Eeuo pipefail

LAB=${SLURM_LAB:-/tmp/shardscope-slurm-${USER:-$(id -un)}}
NODES=${NODES:-2}
CPUS=${CPUS:-2}
BASE=${PORT_BASE:-26817}
CONF=$LAB/slurm.conf
HOST=$(hostname -s)

log() { printf '[slurm-cluster] %s\n' "$*" >&2; }

wait_until() { # wait_until SECONDS command...: poll every 0.1 s
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

alive() { # a running process (a zombie counts as gone)
  [ -n "$1" ] && [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

write_conf() {
  cat > "$CONF" <<CONFEOF
ClusterName=shardscope-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$BASE
SlurmdPort=$((BASE + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$LAB/msock/munge.sock,cred_expire=10
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool/%n
SlurmctldPidFile=$LAB/run/slurmctld.pid
SlurmdPidFile=$LAB/run/slurmd-%n.pid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
KillWait=5
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LAB/log/jobcomp.txt
NodeName=n[1-$NODES] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[$((BASE + 101))-$((BASE + 100 + NODES))] CPUs=$CPUS RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONFEOF
}

all_idle() { [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle$')" = "$NODES" ]; }
no_live_jobs() { [ -z "$(squeue -h -t R,CG,S 2>/dev/null)" ]; }

start() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null \
    || { log "SLURM's daemons are not installed: ./scripts/setup.sh installs them (slurmctld slurmd slurm-client munge)"; exit 2; }
  [ -e "$LAB/run/ours.pids" ] && { log "already started in $LAB (stop it first)"; exit 1; }
  case "$LAB" in /tmp/?*|/var/tmp/?*|*slurm*) ;; *) log "refusing SLURM_LAB=$LAB (it is removed on start)"; exit 1 ;; esac
  rm -rf "$LAB"
  mkdir -p "$LAB"/{state,spool,log,run,msock,munge}
  chmod 700 "$LAB/munge"
  chmod 755 "$LAB/msock"
  for i in $(seq 1 "$NODES"); do mkdir -p "$LAB/spool/n$i"; done
  write_conf
  export SLURM_CONF=$CONF
  : > "$LAB/run/ours.pids"
  trap 'log "start failed (line $LINENO): stopping what was started"; trap - ERR; stop; exit 1' ERR
  dd if=/dev/urandom of="$LAB/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$LAB/munge/munge.key"
  munged --socket="$LAB/msock/munge.sock" --key-file="$LAB/munge/munge.key" --pid-file="$LAB/munge/munged.pid" \
    --log-file="$LAB/log/munged.log" --seed-file="$LAB/munge/munged.seed"
  echo "munged $(cat "$LAB/munge/munged.pid")" >> "$LAB/run/ours.pids"
  slurmctld -D -f "$CONF" > "$LAB/log/slurmctld.stderr" 2>&1 &
  echo "slurmctld $!" >> "$LAB/run/ours.pids"
  for i in $(seq 1 "$NODES"); do start_slurmd "$i"; done
  if ! wait_until 30 all_idle; then
    log "the nodes are not idle after 30 s; see $LAB/log"
    sinfo -N >&2 || true
    trap - ERR
    stop
    exit 1
  fi
  trap - ERR
  log "up: $NODES nodes of $CPUS CPUs"
  echo "export SLURM_CONF=$CONF"
}

stop() {
  export SLURM_CONF=$CONF
  [ -e "$LAB/run/ours.pids" ] || { log "nothing started in $LAB"; return 0; }
  local ids name pid i
  ids=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ' || true)
  if [ -n "${ids// }" ]; then
    # shellcheck disable=SC2086
    scancel $ids 2>/dev/null || true
    wait_until 20 no_live_jobs || log "jobs still running after 20 s"
  fi
  scontrol shutdown >/dev/null 2>&1 || true
  while read -r name pid; do # newest first, by PID only
    if alive "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 1 30); do alive "$pid" || break; sleep 0.1; done
      alive "$pid" && { log "$name ($pid) ignored TERM: KILL"; kill -KILL "$pid" 2>/dev/null || true; }
    fi
  done < <(tac "$LAB/run/ours.pids")
  mv "$LAB/run/ours.pids" "$LAB/run/stopped.pids"
  log "stopped"
}

controller_pid() { awk '$1 == "slurmctld" { pid = $2 } END { print pid }' "$LAB/run/ours.pids"; }

kill_controller() {
  export SLURM_CONF=$CONF
  [ -e "$LAB/run/ours.pids" ] || { log "nothing started in $LAB"; exit 1; }
  local pid; pid=$(controller_pid)
  alive "$pid" || { log "slurmctld is not running"; exit 1; }
  kill -KILL "$pid"
  wait_until 10 bash -c "! [ -e /proc/$pid ] || grep -q '^State:[[:space:]]*Z' /proc/$pid/status"
  log "slurmctld ($pid) killed"
}

start_controller() {
  export SLURM_CONF=$CONF
  [ -e "$LAB/run/ours.pids" ] || { log "nothing started in $LAB"; exit 1; }
  alive "$(controller_pid)" && { log "slurmctld is running"; exit 1; }
  slurmctld -D -f "$CONF" >> "$LAB/log/slurmctld.stderr" 2>&1 &
  # The new PID replaces the old one (stop stops by PID).
  sed -i "s/^slurmctld .*/slurmctld $!/" "$LAB/run/ours.pids"
  wait_until 60 sinfo -h || { log "slurmctld does not answer after 60 s; see $LAB/log"; exit 1; }
  log "slurmctld ($!) answers"
}

node_pid() { awk -v name="slurmd-$1" '$1 == name { pid = $2 } END { print pid }' "$LAB/run/ours.pids"; }

start_slurmd() { # start_slurmd I: node nI's slurmd, in the background, recorded in ours.pids
  local i=$1
  if [ "$i" -eq "$NODES" ] && [ -n "${HIDE_FROM_LAST_NODE:-}" ]; then
    # unshare and sh exec into slurmd, so $! is slurmd's PID; its jobs run in its mount
    # namespace, which ends with them.
    unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1m shardscope-hidden "$1" && shift && exec "$@"' \
      _ "$HIDE_FROM_LAST_NODE" slurmd -D -f "$CONF" -N "n$i" >> "$LAB/log/slurmd-n$i.stderr" 2>&1 &
  else
    slurmd -D -f "$CONF" -N "n$i" >> "$LAB/log/slurmd-n$i.stderr" 2>&1 &
  fi
  if grep -q "^slurmd-n$i " "$LAB/run/ours.pids"; then
    sed -i "s/^slurmd-n$i .*/slurmd-n$i $!/" "$LAB/run/ours.pids"
  else
    echo "slurmd-n$i $!" >> "$LAB/run/ours.pids"
  fi
}

kill_node() {
  export SLURM_CONF=$CONF
  local node=${1:?kill-node takes a node name, n1 .. n$NODES} pid
  pid=$(node_pid "$node")
  alive "$pid" || { log "slurmd of $node is not running"; exit 1; }
  kill -KILL "$pid"
  log "slurmd of $node ($pid) killed"
}

start_node() {
  export SLURM_CONF=$CONF
  local node=${1:?start-node takes a node name, n1 .. n$NODES}
  alive "$(node_pid "$node")" && { log "slurmd of $node is running"; exit 1; }
  start_slurmd "${node#n}"
  wait_until 90 bash -c "[ \"\$(sinfo -h -N -n $node -o %T | sed -n 1p)\" = idle ]" \
    || { log "$node is not idle after 90 s; see $LAB/log"; exit 1; }
  log "$node is back"
}

status() {
  export SLURM_CONF=$CONF
  [ -e "$LAB/run/ours.pids" ] || { echo "not started"; return 1; }
  while read -r name pid; do
    if alive "$pid"; then echo "$name $pid running"; else echo "$name $pid GONE"; fi
  done < "$LAB/run/ours.pids"
  sinfo -N -o '%N %T %E' || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  kill-controller) kill_controller ;;
  start-controller) start_controller ;;
  kill-node) kill_node "${2:-}" ;;
  start-node) start_node "${2:-}" ;;
  *) echo "usage: $0 start|stop|status|kill-controller|start-controller|kill-node NODE|start-node NODE" >&2; exit 2 ;;
esac
