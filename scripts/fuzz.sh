#!/usr/bin/env bash
# Long fuzzing runs with libFuzzer (the `fuzz` preset: clang 14, ASan + UBSan, coverage-guided).
#   ./scripts/fuzz.sh                      every target for 600 s each
#   ./scripts/fuzz.sh 3600 fuzz_recipe     one target for an hour
#   JOBS=1 ./scripts/fuzz.sh 20            build with -j1 (shared machines), 20 s each
# Each target starts from its seed folders (tests/fuzz/seeds/<target>, plus the repository's real
# inputs: ../shared/corpus/accelerate-configs, resources/recipes) and keeps what it finds in
# build/fuzz/fuzz-corpus/<target>; a failing input is saved as build/fuzz/fuzz-corpus/crash-*.
# Fix the loader, then copy the input to tests/fuzz/seeds/<target>/regression-<what>.<ext>: the
# bounded runs in the test suite replay it first from then on. Without libFuzzer, the same
# targets run with tests/fuzz/fuzz_driver.cpp: SHARDSCOPE_FUZZ_SECONDS=600 build/dev/tests/fuzz/<target>.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_accelerate_config fuzz_recipe fuzz_deepspeed_json fuzz_event_line fuzz_chrome_trace)

cmake --preset fuzz -S "$root" >/dev/null
cmake --build "$root/build/fuzz" -j "${JOBS:-2}" --target shardscope_fuzz
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for target in "${targets[@]}"; do
    bin="$root/build/fuzz/tests/fuzz/$target"
    corpus="$root/build/fuzz/fuzz-corpus/$target"
    mkdir -p "$corpus"
    mapfile -t seeds < <(grep -v '^$' "$root/build/fuzz/tests/fuzz/$target.seeds")
    echo "== $target: $seconds s"
    if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$root/build/fuzz/fuzz-corpus/" "$corpus" "${seeds[@]}" 2>&1 | tail -n 30; then
        status=1
    fi
done
exit $status
