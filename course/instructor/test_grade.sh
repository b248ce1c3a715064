#!/usr/bin/env bash
# The grader's test (ctest exercises.grade, registered by exercises/CMakeLists.txt): scripts/grade.sh on three
# trees of temporary copies, graded one after the other in one build directory (a file is recompiled only when it
# differs from the previous tree's):
#   solutions  the four solutions                                      -> 100 %
#   mixed      E1's solution, E2's mutant no_reset, E5's untouched stub, E6's mutant no_mean
#              -> E1 10/10, E2 between 1 and 9, E5 0, E6 between 1 and 9: in between
#   stubs      the four untouched stubs                                -> 0 %, each "not attempted"
# with a fixed seed (--seed 1), so that the test does not change from run to run.
#   test_grade.sh BUILD_DIR MUTANTS_DIR      (MUTANTS_DIR: <build>/exercises/mutants, where the mutants are generated)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$1"
mutants="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

# field <json> <key>: the value of a top-level number field
field() { sed -n "s/^  \"$2\": \\([0-9.]*\\),*$/\\1/p" "$1"; }
# exercise_points <json> <name>: "status points max" of one exercise
exercise_points() { sed -n "s/.*\"name\": \"$2\", \"status\": \"\\([^\"]*\\)\", \"points\": \\([0-9]*\\), \"max\": \\([0-9]*\\).*/\\1|\\2|\\3/p" "$1"; }
expect() {  # expect <what> <condition...>
  local what="$1"; shift
  if "$@"; then echo "  PASS  $what"; else echo "  FAIL  $what"; failures=$((failures + 1)); fi
}

grade() {  # grade <tree name>: runs the grader on $work/<tree>, writes $work/<tree>.json
  echo "== grading the tree '$1'"
  bash "$root/scripts/grade.sh" --tree "$work/$1" --build "$build" --out "$work/$1.json" --student "test-$1" --seed 1
}

mkdir -p "$work/solutions" "$work/mixed" "$work/stubs"
cp "$root/course/instructor/solutions/"{concat_backward,chain_backward,gated_residual,glu_backward}.hpp "$work/solutions/"
cp "$root/exercises/"{concat_backward,chain_backward,gated_residual,glu_backward}.hpp "$work/stubs/"
cp "$root/course/instructor/solutions/concat_backward.hpp" "$work/mixed/"
cp "$mutants/no_reset/chain_backward.hpp" "$work/mixed/"
cp "$root/exercises/gated_residual.hpp" "$work/mixed/"
cp "$mutants/no_mean/glu_backward.hpp" "$work/mixed/"

grade solutions
expect "the solutions score 100 %" test "$(field "$work/solutions.json" percent)" = "100.0"
grade mixed
IFS='|' read -r s1 p1 m1 <<<"$(exercise_points "$work/mixed.json" concat_backward)"
IFS='|' read -r s2 p2 m2 <<<"$(exercise_points "$work/mixed.json" chain_backward)"
IFS='|' read -r s5 p5 m5 <<<"$(exercise_points "$work/mixed.json" gated_residual)"
IFS='|' read -r s6 p6 m6 <<<"$(exercise_points "$work/mixed.json" glu_backward)"
expect "mixed: E1's solution scores $p1/$m1, passed" test "$s1" = "passed" -a "$p1" = "$m1"
expect "mixed: E2's mutant no_reset scores $p2/$m2, failed, in between" test "$s2" = "failed" -a "$p2" -gt 0 -a "$p2" -lt "$m2"
expect "mixed: E5's stub scores $p5/$m5, not attempted" test "$s5" = "not attempted" -a "$p5" = 0
expect "mixed: E6's mutant no_mean scores $p6/$m6, failed, in between" test "$s6" = "failed" -a "$p6" -gt 0 -a "$p6" -lt "$m6"
pm="$(field "$work/mixed.json" percent)"
expect "mixed: the total ($pm %) is strictly between 0 and 100" awk -v p="$pm" 'BEGIN { exit !(p > 0 && p < 100) }'
grade stubs
expect "the stubs score 0 %" test "$(field "$work/stubs.json" percent)" = "0.0"
expect "the stubs read as not attempted" test "$(grep -c '"status": "not attempted"' "$work/stubs.json")" = 4

if [[ $failures -eq 0 ]]; then echo "PASS: the grader scores the solutions 100 %, a mixed tree in between, the stubs 0 %"; else echo "FAIL: $failures check(s)"; fi
[[ $failures -eq 0 ]]
