#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh: one ctest fuzz.<name> test (tests/fuzz/CMakeLists.txt, docs/fuzzing.md).
#
#   run_fuzz.sh --skip REASON
#       prints why the harness is not run and exits 77 (the tests' SKIP_RETURN_CODE).
#   run_fuzz.sh HARNESS SEEDS WORK SECONDS DICT [libFuzzer flags...]
#       replays every seed in SEEDS (scripts/make_fuzz_corpus.py) and then fuzzes for the rest of SECONDS,
#       with a fresh corpus (WORK/corpus) and artifact directory (WORK/artifacts); the whole log is
#       WORK/fuzz.log. Passes only when libFuzzer ends without a finding: a crash, a sanitizer report, a
#       harness invariant, a timeout, an out-of-memory or a leak each fail the test, which then prints the
#       reproducer file, the report and how to rerun it.
set -uo pipefail

if [[ "${1:-}" == --skip ]]; then
  echo "SKIPPED: ${2:-}"
  exit 77
fi
if [[ $# -lt 5 ]]; then
  echo "usage: run_fuzz.sh HARNESS SEEDS WORK SECONDS DICT [libFuzzer flags...] | --skip REASON" >&2
  exit 2
fi
harness=$1 seeds=$2 work=$3 seconds=$4 dict=$5
shift 5

if [[ ! -d "$seeds" ]] || [[ -z "$(ls -A "$seeds")" ]]; then
  echo "run_fuzz.sh: no seeds in $seeds (the fuzz.corpus test writes them)" >&2
  exit 1
fi
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
log="$work/fuzz.log"

# -error_exitcode / -timeout_exitcode: libFuzzer's defaults (77, 70) would collide with ctest's skip code.
cmd=("$harness" "-max_total_time=$seconds" -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1
     "-artifact_prefix=$work/artifacts/" "-dict=$dict" "$@" "$work/corpus" "$seeds")
echo "+ ${cmd[*]}"
start=$(date +%s)
"${cmd[@]}" >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))

# The last status line ("#N DONE cov: ... ft: ... corp: ..." or the line before a finding) and the stats.
grep -E '^#[0-9]+' "$log" | tail -n 1
grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|INFO: seed corpus)' "$log"
grep -E '^INFO: Seed:' "$log"
n_seeds=$(ls "$seeds" | wc -l)
n_corpus=$(ls "$work/corpus" | wc -l)
echo "fuzz: ${n_seeds} seeds replayed, ${n_corpus} new corpus inputs, ${took} s, libFuzzer exit ${rc}"

artifacts=("$work"/artifacts/*)
if [[ $rc -eq 0 && ! -e "${artifacts[0]}" ]]; then
  echo "fuzz: no finding"
  exit 0
fi
echo "fuzz: FINDING (libFuzzer exit $rc). The report:"
# the sanitizer / libFuzzer / harness report, without the status lines before it
awk '/^==[0-9]+==|==fbt-fuzz==|^ERROR: libFuzzer|^SUMMARY|^INFO: a leak|^ALARM|deadly signal|terminate called|what\(\)/{p=1} p' "$log" | head -n 40
echo "fuzz: in short:"
grep -E '==fbt-fuzz== FINDING|runtime error:|^SUMMARY' "$log" | head -n 3 | cut -c1-400
for a in "${artifacts[@]}"; do
  [[ -e "$a" ]] || continue
  echo "fuzz: reproducer $a ($(stat -c %s "$a") bytes); rerun: $harness $a"
done
echo "fuzz: the whole log: $log"
exit 1
