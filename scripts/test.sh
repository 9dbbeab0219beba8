#!/usr/bin/env bash
# The whole test suite: set up if needed, build, run every test (unit, multiproc, gui).
#   ./scripts/test.sh              the dev build, all tests
#   ./scripts/test.sh --preset asan   the same under AddressSanitizer + UBSan
#   ./scripts/test.sh -L unit      extra arguments go to ctest
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
preset=dev
if [ "${1:-}" = "--preset" ]; then preset=$2; shift 2; fi
shardscope_build "$preset"
cd "$root"

# Note [leftovers]: no test may leave a process or a mount behind (#43). What runs or is mounted
# before the suite is not ours; what the suite started (ranks, launchers and cluster followers,
# SLURM daemons, the tests' sshd, users' script launchers and their Python ranks from tests/tools
# or resources/examples, gdb reading stacks, temporary file systems) must be gone within 30 s of its end.
ours='shardscope-worker|/app/shardscope( |$)|slurmctld|slurmd|munged|accelerate|torchrun|fake_rank|/tests/tools/|/resources/examples/|gdb |sshd -D -f .*/ssh/sshd_config'
processes() { pgrep -a -f -- "$ours" | sort || true; }
tmp_mounts() { awk '$2 ~ "^/tmp/" {print $2}' /proc/mounts | sort || true; }
before_processes=$(processes | awk '{print $1}')
before_mounts=$(tmp_mounts)
# MFU's CPU peaks are measured once per machine (engine/train/mfu.h): measured here, before the
# tests load the machine, into the tests' SHARDSCOPE_HOME, never by a rank beside another test.
worker=$(find "build/$preset" -maxdepth 2 -name shardscope-worker -type f 2>/dev/null | head -n 1 || true)
if [ -n "$worker" ]; then
  mkdir -p "build/$preset/test-home"
  "$worker" machine-peaks --file "build/$preset/test-home/machine-peaks.json"
fi
status=0
ctest --preset "$preset" -j2 "$@" || status=$?
left_processes="" left_mounts=""
for _ in $(seq 30); do
  left_processes=$(processes | awk -v before="$before_processes" \
    'BEGIN { n = split(before, pids); for (i = 1; i <= n; i++) seen[pids[i]] = 1 } !($1 in seen)')
  left_mounts=$(comm -13 <(printf '%s\n' "$before_mounts") <(tmp_mounts) | grep . || true)
  [ -z "$left_processes$left_mounts" ] && break
  sleep 1
done
if [ -n "$left_processes$left_mounts" ]; then
  echo "test.sh: the suite left these behind (Note [leftovers] in scripts/test.sh):" >&2
  [ -n "$left_processes" ] && echo "$left_processes" | sed 's/^/  process /' >&2
  [ -n "$left_mounts" ] && echo "$left_mounts" | sed 's/^/  mount /' >&2
  exit 1
fi
exit $status
