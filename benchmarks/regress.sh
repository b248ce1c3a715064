#!/usr/bin/env bash
# benchmarks/regress.sh: a short speed check to run before and after a change (not the 35-minute
# benchmarks/make_performance.sh; no torch needed). Estimated from the step times of benchmarks/results on
# the idle 2-core machine: about 4 minutes with two builds, 2 with one (ROUNDS and REPS scale it).
#
#   bash benchmarks/regress.sh BUILD/benchmarks/bench_e2e                  # one build: medians
#   bash benchmarks/regress.sh OLD/benchmarks/bench_e2e NEW/benchmarks/bench_e2e   # two builds: new/old
#
# Measures, 1 thread: tiny train, kpass3, decode_standard_128, sgemm; small train, kpass3; in fp32 and, when
# the build(s) run it (their JSON line says "precision": "bf16"), in bf16. Each measure runs ROUNDS rounds
# of fresh processes through benchmarks/compare_builds.sh (with two builds: old, new, old, new, ... so both
# see the same machine state); the table (benchmarks/compare_table.py) gives the median over rounds of each
# process's median with the range, and with two builds the median of the per-round ratios new/old
# ("faster" / "slower" when at least 3 rounds all agree and the median moved by more than 2%, "~"
# otherwise). A line naming the CPU heads the table.
#
# Environment: ROUNDS (5), REPS (5), WARMUP (1), PRECISIONS ("fp32 bf16"), JSONL=FILE (keep the raw lines).
# Run it on an otherwise idle machine; compare only numbers taken on the same machine.
set -euo pipefail
if [[ $# -lt 1 || $# -gt 2 ]]; then
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
old="$1" new="${2:--}"
for b in "$old" "$new"; do
  [[ $b == - || -x $b ]] || { echo "regress.sh: $b is not an executable bench_e2e" >&2; exit 2; }
done
export ROUNDS="${ROUNDS:-5}" REPS="${REPS:-5}" WARMUP="${WARMUP:-1}" THREADS=1 TABLE=0
read -r -a precisions <<< "${PRECISIONS:-fp32 bf16}"
runs_bf16() {  # does this build answer --precision bf16?
  "$1" --config tiny --threads 1 --measure sgemm --reps 1 --warmup 0 --precision bf16 2>/dev/null | grep -q '"precision": "bf16"'
}
use=()
for p in "${precisions[@]}"; do
  if [[ $p == bf16 ]]; then
    ok=1
    for b in "$old" "$new"; do [[ $b == - ]] || runs_bf16 "$b" || { echo "regress.sh: $b does not run --precision bf16: fp32 only" >&2; ok=0; }; done
    [[ $ok == 1 ]] || continue
  fi
  use+=("$p")
done
if [[ -n ${JSONL:-} ]]; then lines="$JSONL"; : > "$lines"; else lines="$(mktemp)"; trap 'rm -f "$lines"' EXIT; fi
start=$SECONDS
for p in "${use[@]}"; do
  JSONL="$lines" PRECISION="$p" bash "$here/compare_builds.sh" "$old" "$new" "$ROUNDS" tiny train kpass3 decode_standard_128 sgemm >/dev/null
  JSONL="$lines" PRECISION="$p" bash "$here/compare_builds.sh" "$old" "$new" "$ROUNDS" small train kpass3 >/dev/null
done
echo "## bench_e2e regression check ($(date -u +%Y-%m-%dT%H:%MZ), $((SECONDS - start)) s)"
echo
if [[ $new == - ]]; then echo "Build: \`$old\`."; else echo "old: \`$old\`; new: \`$new\`."; fi
echo "$ROUNDS rounds of fresh processes, each timing $REPS repetitions after $WARMUP warm-up(s), 1 thread; precisions: ${use[*]}."
python3 "$here/compare_table.py" "$lines" --cpu "$(python3 "$here/cpu_info.py" --line)"
