#!/usr/bin/env bash
# Times two builds of bench_e2e side by side, alternating A B A B ... in fresh processes, so that a
# change's effect on speed is measured under the same machine state (docs/PERFORMANCE.md, "redesign").
#   bash benchmarks/compare_builds.sh OLD/bench_e2e NEW/bench_e2e [rounds] [config] [measures...]
#   bash benchmarks/compare_builds.sh BIN/bench_e2e - [rounds] [config] [measures...]    # one build alone
# Prints one JSON line per process and, per measure, the median over rounds of each side's median
# (with the range over rounds) and the median of the per-round ratios new/old (benchmarks/compare_table.py).
# Environment (all optional): PRECISION=fp32|bf16 (bf16: --precision bf16; a build whose JSON line does not
# say "precision": "bf16" is refused), THREADS (1), REPS (5), WARMUP (2), JSONL=FILE (append the lines there
# and keep them), TABLE=0 (no table: benchmarks/regress.sh prints one table for all its calls).
set -euo pipefail
old="$1" new="${2:--}" rounds="${3:-5}" cfg="${4:-tiny}"
shift 4 2>/dev/null || shift $#
measures=("$@")
[[ ${#measures[@]} -gt 0 ]] || measures=(train kpass3 decode_standard_128 decode_soft_128)
precision="${PRECISION:-fp32}" threads="${THREADS:-1}" reps="${REPS:-5}" warmup="${WARMUP:-2}"
pflag=()
[[ $precision == fp32 ]] || pflag=(--precision "$precision")  # fp32: the command line older builds know
sides=(old new)
[[ $new == - ]] && sides=(old)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n ${JSONL:-} ]]; then out="$JSONL"; keep=1; else out="$(mktemp)"; keep=0; fi
for m in "${measures[@]}"; do
  for ((r = 0; r < rounds; ++r)); do
    for side in "${sides[@]}"; do
      bin="$old"; [[ $side == new ]] && bin="$new"
      line=$("$bin" --config "$cfg" --threads "$threads" --measure "$m" --reps "$reps" --warmup "$warmup" "${pflag[@]}")
      if [[ $precision != fp32 && $line != *"\"precision\": \"$precision\""* ]]; then
        echo "compare_builds.sh: $bin does not run --precision $precision (its line: $line)" >&2
        exit 1
      fi
      echo "{\"side\": \"$side\", \"round\": $r, ${line:1}" | tee -a "$out"
    done
  done
done
[[ ${TABLE:-1} == 0 ]] || python3 "$here/compare_table.py" "$out"
[[ $keep == 1 ]] || rm -f "$out"
