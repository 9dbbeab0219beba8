#!/usr/bin/env bash
# Checks that every C++ file of the tree is formatted as .clang-format says (the format_check
# test runs it). With --fix, formats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=${CLANG_FORMAT:-clang-format-14}
command -v "$formatter" >/dev/null \
  || { echo "check-format: $formatter not found; ./scripts/setup.sh installs it (Debian package clang-format-14)" >&2; exit 2; }
# The layering check's fixtures are inputs to a test, kept as written.
mapfile -t files < <(git ls-files '*.cpp' '*.h' ':!tests/build/fixtures' 2>/dev/null \
  || find app ui engine profiler storage tests -name '*.cpp' -o -name '*.h' | grep -v '^tests/build/fixtures')
if [ "${1:-}" = --fix ]; then
  "$formatter" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$formatter" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) not formatted as .clang-format says:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix them with: ./scripts/check-format.sh --fix   (or clang-format-14 -i FILE)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
