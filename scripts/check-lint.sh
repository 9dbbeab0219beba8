#!/usr/bin/env bash
# Runs clang-tidy (the checks of .clang-tidy, warnings as errors) on the torch-free parts:
# storage/, profiler/ (without CUPTI), engine/common, engine/accelerate, engine/recipe, engine/plan,
# engine/estimate, engine/protocol, app/runs. The lint_check test runs it. Usage: scripts/check-lint.sh BUILD_DIR (one with compile_commands.json).
# The engine's torch translation units are left out: clang-tidy takes minutes on each here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: check-lint.sh BUILD_DIR}
tidy=${CLANG_TIDY:-clang-tidy-14}
command -v "$tidy" >/dev/null \
  || { echo "check-lint: $tidy not found; ./scripts/setup.sh installs it (Debian package clang-tidy-14)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || { echo "check-lint: no $build/compile_commands.json; configure the build first" >&2; exit 2; }
cd "$root"
mapfile -t files < <(git ls-files 'storage/*.cpp' 'profiler/*.cpp' 'engine/common/*.cpp' 'engine/accelerate/*.cpp' \
  'engine/recipe/*.cpp' 'engine/plan/*.cpp' 'engine/estimate/*.cpp' 'engine/protocol/*.cpp' 'app/runs/*.cpp' ':!profiler/cupti' ':!profiler/bench' ':!storage/bench')
# Only what the build compiled (a preset without a part has no entry for it).
mapfile -t files < <(for f in "${files[@]}"; do grep -q "\"$root/$f\"" "$build/compile_commands.json" && echo "$f"; done)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# -Wshadow=local is GCC's; clang-tidy speaks clang.
if ! "$tidy" -p "$build" --quiet --warnings-as-errors='*' --extra-arg=-Wno-unknown-warning-option "${files[@]}" >"$out" 2>&1; then
  grep -E "(warning|error):" "$out" >&2 || cat "$out" >&2
  echo "check-lint: clang-tidy found the problems above in ${#files[@]} files; fix them (or, for a deliberate case, NOLINT with the reason)" >&2
  exit 1
fi
echo "check-lint: ${#files[@]} files clean"
