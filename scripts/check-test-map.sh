#!/usr/bin/env bash
# Checks that a newcomer finds the test of every unit of the product's code (app, ui, engine,
# profiler, storage): either a suite of the unit's own name (tests/**/tst_<unit>.cpp), or a row of
# docs/ARCHITECTURE.md's table "Where each unit is tested" naming the suites that cover it, each of
# which must exist (or saying it is an entry point or a benchmark). Rows of units that are gone
# fail too. The test_map_check test runs it. Usage: scripts/check-test-map.sh [ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
doc=docs/ARCHITECTURE.md
[ -f "$doc" ] || { echo "check-test-map: no $doc under $root" >&2; exit 2; }
table=$(sed -n '/<!-- tests:begin -->/,/<!-- tests:end -->/p' "$doc")
[ -n "$table" ] || { echo "check-test-map: $doc has no <!-- tests:begin --> ... <!-- tests:end --> table" >&2; exit 2; }
suites=$(find tests -name 'tst_*.cpp' -o -name 'fuzz_*.cpp' | xargs -n1 basename | sed 's/\.cpp$//' | sort -u)
units=$(find app ui engine profiler storage -name '*.cpp' -not -path '*/fixtures/*' 2>/dev/null | sort)
problems=()
for unit in $units; do
  name=$(basename "$unit" .cpp)
  grep -qx "tst_$name" <<<"$suites" && continue
  row=$(grep -F "| \`$unit\` |" <<<"$table" || true)
  if [ -z "$row" ]; then
    problems+=("$unit: no tests/**/tst_$name.cpp and no row in $doc's table")
    continue
  fi
  covered=$(grep -o '\b\(tst\|fuzz\)_[a-z0-9_]*' <<<"$row" || true)
  if [ -z "$covered" ] && ! grep -q 'entry point\|benchmark' <<<"$row"; then
    problems+=("$unit: its row names no suite")
  fi
  for suite in $covered; do
    grep -qx "$suite" <<<"$suites" || problems+=("$unit: its row names $suite, which does not exist")
  done
done
while read -r listed; do
  [ -f "$listed" ] || problems+=("$listed: listed in $doc but gone; remove its row")
done < <(grep -o '^| `[^`]*` |' <<<"$table" | sed 's/^| `//; s/` |$//')
if [ ${#problems[@]} -gt 0 ]; then
  echo "check-test-map: units whose tests a newcomer cannot find:" >&2
  printf '  %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "check-test-map: $(wc -w <<<"$units") units, each with a suite of its name or a row in $doc"
