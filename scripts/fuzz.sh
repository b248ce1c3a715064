#!/usr/bin/env bash
# Build fbt's libFuzzer harnesses (tests/fuzz, docs/fuzzing.md) and fuzz each for as long as asked:
#
#   scripts/fuzz.sh [SECONDS_EACH] [HARNESS...]
#
# SECONDS_EACH defaults to 60; HARNESS is any of safetensors config_json train_config npy (default: all,
# one after the other). Needs clang with its libFuzzer runtime (Debian: clang-14 libclang-rt-14-dev)
# and python3. Everything goes under one directory, $FBT_FUZZ_DIR (default build-fuzz/fuzz):
#   corpus/<harness>/     the growing corpus, kept between runs (delete it to start over)
#   seeds/<harness>/      the seeds scripts/make_fuzz_corpus.py writes (rewritten every run)
#   artifacts/<harness>/  reproducers: crash-*, oom-*, timeout-*, leak-* (libFuzzer's names)
#   logs/<harness>.log    libFuzzer's output of the last run
# Per harness it prints the executions, the coverage (cov: edges, ft: features), the corpus size and
# each new reproducer with its one-line report. Exit status 1 when any harness found something.
#
# By default a run keeps going after a finding (libFuzzer -fork=1 with -ignore_crashes, -ignore_ooms,
# -ignore_timeouts), so a long run collects every finding, not just the first; FBT_FUZZ_KEEP_GOING=0
# stops at the first one (as the ctest fuzz.* tests do).
# Environment: FBT_FUZZ_BUILD_DIR (build-fuzz), FBT_FUZZ_DIR, FBT_JOBS (build parallelism, 2),
# CXX (clang++), FBT_FUZZ_TIMEOUT (seconds per input, 10), FBT_FUZZ_RSS_LIMIT_MB (2048),
# FBT_FUZZ_FLAGS (more libFuzzer flags, e.g. "-max_len=200000 -seed=1"), FBT_FUZZ_TRIAGE (how many new
# reproducers per harness to rerun for their report, 20).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all=(safetensors config_json train_config npy)
usage() {
  echo "usage: scripts/fuzz.sh [SECONDS_EACH] [HARNESS...]   (harnesses: ${all[*]})" >&2
  exit 2
}
seconds=60
if [[ $# -gt 0 ]]; then
  [[ "$1" == -h || "$1" == --help ]] && usage
  if [[ "$1" =~ ^[0-9]+$ ]]; then
    seconds=$1
    shift
  fi
fi
harnesses=("$@")
[[ ${#harnesses[@]} -eq 0 ]] && harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [[ " ${all[*]} " == *" $h "* ]] || { echo "scripts/fuzz.sh: unknown harness '$h'" >&2; usage; }
done

build_dir="${FBT_FUZZ_BUILD_DIR:-build-fuzz}"
out="${FBT_FUZZ_DIR:-$build_dir/fuzz}"
jobs="${FBT_JOBS:-2}"
timeout_s="${FBT_FUZZ_TIMEOUT:-10}"
rss="${FBT_FUZZ_RSS_LIMIT_MB:-2048}"
triage="${FBT_FUZZ_TRIAGE:-20}"
# shellcheck disable=SC2206
extra=(${FBT_FUZZ_FLAGS:-})

# ---- build (only the harnesses) -------------------------------------------------------------------
args=(-S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DFBT_FUZZ=ON -DFBT_BUILD_TESTS=ON -DFBT_BUILD_EXAMPLES=OFF
      -DFBT_BUILD_BENCHMARKS=OFF -DFBT_BUILD_TOOLS=OFF -DFBT_WITH_CUDA=OFF -DFBT_INSTALL=OFF -DFBT_NATIVE=OFF)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cxx="${CXX:-}"
  if [[ -z "$cxx" ]]; then
    for c in clang++ clang++-14; do
      if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
    done
  fi
  [[ -n "$cxx" ]] || { echo "scripts/fuzz.sh: no clang++ found (libFuzzer needs clang; Debian: clang-14 libclang-rt-14-dev)" >&2; exit 1; }
  args+=("-DCMAKE_CXX_COMPILER=$cxx")
fi
mkdir -p "$build_dir"
echo "+ cmake ${args[*]}"
cmake "${args[@]}" >"$build_dir/fuzz-configure.log" 2>&1 || { cat "$build_dir/fuzz-configure.log"; exit 1; }
if ! grep -q '^FBT_HAS_LIBFUZZER:INTERNAL=1$' "$build_dir/CMakeCache.txt"; then
  grep 'fuzz' "$build_dir/fuzz-configure.log" >&2 || true
  echo "scripts/fuzz.sh: the compiler of $build_dir cannot link -fsanitize=fuzzer (clang and libclang-rt-14-dev needed;" \
       "set CXX=clang++ and remove $build_dir)" >&2
  exit 1
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
echo "+ cmake --build $build_dir -j $jobs --target ${targets[*]}"
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
python3 scripts/make_fuzz_corpus.py "$out/seeds" "${harnesses[@]}"

# ---- fuzz ---------------------------------------------------------------------------------------
mkdir -p "$out/logs"
# What a reproducer's rerun log reports, on one line: the finding (the harness's, the sanitizer's or
# libFuzzer's) and the innermost frame in fbt's headers.
report_line() {
  local log=$1 what="" where=""
  what=$(grep -m1 -oE '==fbt-fuzz== FINDING: .*' "$log" || true)
  [[ -z "$what" ]] && what=$(grep -m1 -oE '[^ ]+: runtime error: .*' "$log" | sed -E 's#^[^ ]*/##' || true)
  [[ -z "$what" ]] && what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer): [^(]*' "$log" | sed -E 's/ on (unknown )?address.*//' || true)
  [[ -z "$what" ]] && what=$(grep -m1 -oE 'ERROR: libFuzzer: .*' "$log" || true)
  [[ -z "$what" ]] && what=$(grep -m1 -oE '^SUMMARY: .*' "$log" || true)
  if [[ -z "$what" ]]; then
    echo "did not reproduce when run alone (an -rss_limit_mb out-of-memory can depend on what ran before it)"
    return
  fi
  where=$(grep -m1 -E '^ +#[0-9]+ 0x[0-9a-f]+ in .* [^ ]*/include/fbt/[^ ]+$' "$log" |
          sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ in ([^(]*)\(.* [^ ]*\/include\/fbt\/([^ ]+)$/\1 (\2)/' || true)
  # no fbt frame in the printed stack (a deep recursion): the innermost frame in a library fbt uses
  [[ -z "$where" ]] && where=$(grep -m1 -oE ' /[^ ]*/include/(nlohmann|xtensor|xtl)/[^ ]+$' "$log" | sed -E 's#^ /[^ ]*/include/##' || true)
  what="${what:0:200}"
  echo "${what}${where:+ at ${where:0:160}}"
}

status=0
declare -A summary
for h in "${harnesses[@]}"; do
  bin="$build_dir/tests/fuzz/fuzz_$h"
  corpus="$out/corpus/$h" art="$out/artifacts/$h" log="$out/logs/$h.log"
  mkdir -p "$corpus" "$art"
  stamp="$out/logs/.$h.start"
  touch "$stamp"
  mode=()
  [[ "${FBT_FUZZ_KEEP_GOING:-1}" != 0 ]] && mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  before=$(ls "$corpus" | wc -l)
  cmd=("$bin" "${mode[@]}" "-max_total_time=$seconds" "-timeout=$timeout_s" "-rss_limit_mb=$rss" -print_final_stats=1
       "-dict=tests/fuzz/$h.dict" "-artifact_prefix=$art/" "${extra[@]}" "$corpus" "$out/seeds/$h")
  echo
  echo "== $h: ${seconds} s"
  echo "+ ${cmd[*]} > $log"
  rc=0
  "${cmd[@]}" >"$log" 2>&1 || rc=$?

  execs="?" cov="?" ft="?"
  if [[ ${#mode[@]} -gt 0 ]]; then  # fork mode: "#N: cov: C ft: F corp: K exec/s: E oom/timeout/crash: a/b/c time: Ts job: J ..."
    last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
    [[ -n "$last" ]] && read -r execs cov ft <<<"$(sed -E 's/^#([0-9]+): cov: ([0-9]+) ft: ([0-9]+).*/\1 \2 \3/' <<<"$last")"
  else
    last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -n 1 || true)
    [[ -n "$last" ]] && read -r cov ft <<<"$(sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+).*/\1 \2/' <<<"$last")"
    execs=$(grep -oE '^stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  fi
  after=$(ls "$corpus" | wc -l)
  mapfile -t new < <(find "$art" -maxdepth 1 -type f -newer "$stamp" | sort)
  echo "$h: ${execs} executions, coverage cov ${cov} ft ${ft}, corpus ${after} files (${before} before) in $corpus, libFuzzer exit ${rc}"
  summary[$h]="${execs} execs, cov ${cov}, ft ${ft}, corpus ${after}, ${#new[@]} new reproducer(s)"
  if [[ ${#new[@]} -eq 0 ]]; then
    echo "$h: no finding"
    continue
  fi
  status=1
  echo "$h: ${#new[@]} new reproducer(s) in $art:"
  # rerun each (up to $triage) alone for its report, then group the reproducers by report
  reports="$out/logs/.$h.reports"
  : >"$reports"
  i=0
  for a in "${new[@]}"; do
    if [[ $i -lt $triage ]]; then
      tlog="$out/logs/.$h.triage"
      UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" timeout $((timeout_s * 3 + 30)) \
        "$bin" -runs=1 "-timeout=$timeout_s" "-rss_limit_mb=$rss" "$a" >"$tlog" 2>&1 || true
      printf '%s\t%s (%s bytes)\n' "$(report_line "$tlog")" "$(basename "$a")" "$(stat -c %s "$a")" >>"$reports"
    else
      printf '%s\t%s (%s bytes)\n' "(not rerun: FBT_FUZZ_TRIAGE=$triage)" "$(basename "$a")" "$(stat -c %s "$a")" >>"$reports"
    fi
    i=$((i + 1))
  done
  awk -F'\t' '{ n[$1]++; if (n[$1] <= 3) ex[$1] = ex[$1] (n[$1] > 1 ? ", " : "") $2 }
               END { for (w in n) printf "%d\t%s\t%s\n", n[w], w, ex[w] }' "$reports" | sort -t$'\t' -k1,1rn |
    awk -F'\t' '{ printf "  %d x %s\n      e.g. %s\n", $1, $2, $3 }'
  echo "  rerun one: $bin $art/<file>"
done

echo
echo "== summary (${seconds} s each; reproducers under $out/artifacts)"
for h in "${harnesses[@]}"; do echo "  $h: ${summary[$h]}"; done
exit $status
