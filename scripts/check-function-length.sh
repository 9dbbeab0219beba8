#!/usr/bin/env bash
# Checks that no function of the product's code (app, ui, engine, profiler, storage) is longer
# than 120 lines, except the declarative tables named below (the function_length_check test runs
# it; a long function is a sign of parts that want their own names). Usage:
#   scripts/check-function-length.sh [ROOT]     (ROOT: the tree to check, default this one)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
limit=120
# Declarative tables: one entry after another, where length is the number of entries.
tables=(
  buildTree      # engine/accelerate/questionnaire_tree.cpp: every question of `accelerate config`
  buildSchema    # engine/accelerate/schema.cpp: every key of Accelerate's config files
  parseRecipe    # engine/recipe/recipe.cpp: every recipe key and its setter
  decodeEvent    # engine/protocol/events.cpp: every event type's fields
)
command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q Universal \
  || { echo "check-function-length: Universal Ctags not found; ./scripts/setup.sh installs it (Debian package universal-ctags)" >&2; exit 2; }
cd "$root"
parts=()
for p in app ui engine profiler storage; do [ -d "$p" ] && parts+=("$p"); done
[ ${#parts[@]} -gt 0 ] || { echo "check-function-length: no app/ ui/ engine/ profiler/ storage/ under $root" >&2; exit 2; }
long=$(ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x --_xformat="%{end} %{line} %F %N" "${parts[@]}" \
  | awk -v limit=$limit -v tables="${tables[*]}" '
      BEGIN { n = split(tables, t, " "); for (i = 1; i <= n; i++) allowed[t[i]] = 1 }
      $1 != "-" && $1 - $2 + 1 > limit && !($4 in allowed) { printf "  %s:%s %s (%d lines)\n", $3, $2, $4, $1 - $2 + 1 }')
if [ -n "$long" ]; then
  echo "check-function-length: functions over $limit lines (split them into named parts):" >&2
  echo "$long" >&2
  exit 1
fi
echo "check-function-length: no function over $limit lines outside the ${#tables[@]} declarative tables"
