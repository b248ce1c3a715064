#!/usr/bin/env bash
# Grade the course exercises: build and run only the student's checkers, print a score per exercise and a total
# with the rubric, and write a JSON a teacher can collect (docs/course/teaching.md, "Running the course").
#
#   bash scripts/grade.sh [--tree DIR] [--build DIR] [--out FILE] [--handin DIR] [--student NAME] [--seed N]
#
#   --tree DIR     the folder with the student's files concat_backward.hpp, chain_backward.hpp, gated_residual.hpp,
#                  glu_backward.hpp (default: exercises/, the student's own tree). A missing file counts as not
#                  attempted.
#   --build DIR    the build directory. For exercises/ the default is build/ (configured by scripts/build.sh if it is
#                  not yet); for another tree, build-grade/ (configured here with FBT_COURSE_STUDENT_DIR pointing at a
#                  copy of the tree's files, the given code and checkers always the repository's).
#   --out FILE     the JSON (default: DIR/grade.json in the build directory)
#   --handin DIR   also write the hand-in there: the student's exercise files and grade.json
#   --student NAME the name recorded in the JSON (default: $USER)
#   --seed N       the seed every checker draws its sizes and data from (default: a fresh one per run); it is
#                  printed and recorded in the JSON, and the same N grades the same files the same way again
#
# Each exercise's checker prints "grade: <name> <points>/<max>"; a file that does not compile, a crash or a
# timeout scores 0. Exit status 0 when every exercise was graded (whatever the score), 2 on a usage error,
# 1 when the build directory cannot be configured.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The rubric: exercise, its file's name, the points its checker gives (the sum of its checks' points).
exercises=(concat_backward chain_backward gated_residual glu_backward)
declare -A label=([concat_backward]=E1 [chain_backward]=E2 [gated_residual]=E5 [glu_backward]=E6)
declare -A max_points=([concat_backward]=10 [chain_backward]=10 [gated_residual]=10 [glu_backward]=10)
declare -A rubric=(
  [concat_backward]="dW_c 2, dg_s 1, dg_g 1, ds 2, de 2 (each against finite differences), one row 1, accumulation (+=) 1"
  [chain_backward]="ladder: K = 1 2, K = 2 one sequence 2, K = 2 B sequences 2, K = 3..4 2, T = 1 1; accumulation (+=) 1"
  [gated_residual]="w_g and w_s declared 1 each, forward 1, dW_g dW_s ds de 1 each, accumulation 1, the model's K-pass step 1, checkpoint 1"
  [glu_backward]="ladder: one row dW_U ds 2, dW_G 2, dg_g de 2, one sequence 1, K passes 1, K passes T = 1 1; accumulation (+=) 1"
)

tree="$root/exercises"
build=""
out=""
handin=""
student="${USER:-student}"
seed=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tree) tree="$(cd "$2" && pwd)"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --handin) handin="$2"; shift 2 ;;
    --student) student="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "grade.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$seed" ]]; then seed=$(( (RANDOM << 15 | RANDOM) % 1000000000 )); fi
[[ "$seed" =~ ^[0-9]+$ ]] || { echo "grade.sh: --seed takes a number, not '$seed'" >&2; exit 2; }

own_tree=0
[[ "$tree" == "$root/exercises" ]] && own_tree=1
if [[ -z "$build" ]]; then
  if [[ $own_tree == 1 ]]; then build="$root/build"; else build="$root/build-grade"; fi
fi
mkdir -p "$build"
build="$(cd "$build" && pwd)"
[[ -n "$out" ]] || out="$build/grade.json"

targets=()
for name in "${exercises[@]}"; do targets+=("exercise_${name}_student"); done

# ---- configure -------------------------------------------------------------------------------------------------
declare -A present
if [[ $own_tree == 1 ]]; then
  for name in "${exercises[@]}"; do present[$name]=1; done
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    FBT_TARGETS="${targets[*]}" bash "$root/scripts/build.sh" "$build" >"$build/grade-configure.log" 2>&1 ||
      { echo "grade.sh: configuring $build failed (see $build/grade-configure.log)" >&2; exit 1; }
  fi
else
  # a copy of the student's files only: the given code and the checkers stay the repository's. A file is copied
  # only when it changed, so that grading many trees in one build directory recompiles only what differs.
  stage="$build/student"
  mkdir -p "$stage"
  for name in "${exercises[@]}"; do
    src="$tree/$name.hpp"
    present[$name]=1
    if [[ ! -f "$src" ]]; then src="$root/exercises/$name.hpp"; present[$name]=0; fi  # missing: the stub
    cmp -s "$src" "$stage/$name.hpp" || cp "$src" "$stage/$name.hpp"
  done
  cmake_args=(-S "$root" -B "$build" -DFBT_COURSE_STUDENT_DIR="$stage")
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake_args+=(-DCMAKE_BUILD_TYPE=Release -DFBT_BUILD_TESTS=ON -DFBT_BUILD_EXERCISES=ON -DFBT_BUILD_EXAMPLES=OFF
                 -DFBT_BUILD_TOOLS=OFF -DFBT_BUILD_BENCHMARKS=OFF -DFBT_INSTALL=OFF)
    [[ -n "${CXX:-}" ]] && cmake_args+=(-DCMAKE_CXX_COMPILER="$CXX")
  fi
  cmake "${cmake_args[@]}" >"$build/grade-configure.log" 2>&1 ||
    { echo "grade.sh: configuring $build failed (see $build/grade-configure.log)" >&2; exit 1; }
fi

# ---- build and run each checker ----------------------------------------------------------------------------------
json_escape() { local s="$1"; s="${s//\\/\\\\}"; s="${s//\"/\\\"}"; printf '%s' "$s"; }
total=0
total_max=0
rows=()
entries=()
echo "grading $tree (build: $build; seed $seed: grade.sh --seed $seed grades the same draw again)"
for name in "${exercises[@]}"; do
  max=${max_points[$name]}
  points=0
  status=""
  rc=""
  log="$build/grade-$name.log"
  if ! cmake --build "$build" -j "${FBT_JOBS:-2}" --target "exercise_${name}_student" >"$log" 2>&1; then
    status="does not compile"
  else
    set +e
    timeout 300 "$build/exercises/check_${name}_student" --seed "$seed" >>"$log" 2>&1
    rc=$?
    set -e
    line="$(grep -E "^grade: $name [0-9]+/[0-9]+" "$log" | tail -1 || true)"
    if [[ -n "$line" ]]; then
      pm="${line#grade: $name }"
      pm="${pm%% *}"
      points="${pm%/*}"
      max="${pm#*/}"
    fi
    case "$rc" in
      0) status="passed" ;;
      77) status="not attempted"; points=0 ;;
      1) status="failed"; [[ "$line" == *"(crashed)"* ]] && status="crashed" ;;
      124) status="timed out"; points=0 ;;
      *) status="crashed (exit $rc)"; points=0 ;;
    esac
  fi
  [[ ${present[$name]} == 1 ]] || status="missing"
  total=$((total + points))
  total_max=$((total_max + max))
  rows+=("$(printf '  %-3s %-16s %-17s %3d / %-3d  %s' "${label[$name]}" "$name" "$status" "$points" "$max" "${rubric[$name]}")")
  sha=""
  [[ -f "$tree/$name.hpp" ]] && sha="$(sha256sum "$tree/$name.hpp" | cut -d' ' -f1)"
  entries+=("$(printf '    {"exercise": "%s", "name": "%s", "status": "%s", "points": %d, "max": %d, "exit": %s, "sha256": "%s", "log": "%s"}' \
    "${label[$name]}" "$name" "$status" "$points" "$max" "${rc:-null}" "$sha" "$(json_escape "$log")")")
done
percent="$(awk -v p="$total" -v m="$total_max" 'BEGIN { printf "%.1f", (m > 0) ? (100 * p / m) : 0 }')"

echo "  ex  exercise         status            score      rubric (points per check)"
printf '%s\n' "${rows[@]}"
echo "  total: $total / $total_max points ($percent %)"
echo "  a check's points count only when it passes; a file that does not compile, crashes or times out scores 0;"
echo "  the untouched stub scores 0 (not attempted). Each checker's full output: $build/grade-<exercise>.log"

commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
{
  echo "{"
  echo "  \"student\": \"$(json_escape "$student")\","
  echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"commit\": \"$commit\","
  echo "  \"tree\": \"$(json_escape "$tree")\","
  echo "  \"seed\": $seed,"
  echo "  \"exercises\": ["
  for i in "${!entries[@]}"; do
    if [[ $i -lt $((${#entries[@]} - 1)) ]]; then echo "${entries[$i]},"; else echo "${entries[$i]}"; fi
  done
  echo "  ],"
  echo "  \"points\": $total,"
  echo "  \"max\": $total_max,"
  echo "  \"percent\": $percent"
  echo "}"
} >"$out"
echo "wrote $out"

if [[ -n "$handin" ]]; then
  mkdir -p "$handin"
  for name in "${exercises[@]}"; do
    if [[ -f "$tree/$name.hpp" ]]; then cp "$tree/$name.hpp" "$handin/"; fi
  done
  cp "$out" "$handin/grade.json"
  echo "hand-in: $handin (the exercise files and grade.json)"
fi
