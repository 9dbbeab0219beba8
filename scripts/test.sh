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
ctest --preset "$preset" -j2 "$@"
