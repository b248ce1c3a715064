#!/usr/bin/env bash
# Times two builds of bench_e2e side by side, alternating A B A B ... in fresh processes, so that a
# change's effect on speed is measured under the same machine state (docs/PERFORMANCE.md, "redesign").
#   bash benchmarks/compare_builds.sh OLD/bench_e2e NEW/bench_e2e [rounds] [config] [measures...]
# Prints one JSON line per process and, per measure, the median over rounds of each side's median
# (with the range over rounds) and the median of the per-round ratios new/old.
set -euo pipefail
old="$1" new="$2" rounds="${3:-5}" cfg="${4:-tiny}"
shift 4 2>/dev/null || shift $#
measures=("$@")
[[ ${#measures[@]} -gt 0 ]] || measures=(train kpass3 decode_standard_128 decode_soft_128)
out="$(mktemp)"
for m in "${measures[@]}"; do
  for ((r = 0; r < rounds; ++r)); do
    for side in old new; do
      bin="$old"; [[ $side == new ]] && bin="$new"
      line=$("$bin" --config "$cfg" --threads 1 --measure "$m" --reps 5 --warmup 2)
      echo "{\"side\": \"$side\", \"round\": $r, ${line:1}" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\n| measure | old median ms [range] | new median ms [range] | new/old (median of rounds) [range] |")
print("|---|---:|---:|---:|")
for m in dict.fromkeys(r["measure"] for r in rows):
    o = {r["round"]: r["median_ms"] for r in rows if r["measure"] == m and r["side"] == "old"}
    n = {r["round"]: r["median_ms"] for r in rows if r["measure"] == m and r["side"] == "new"}
    ratios = [n[k] / o[k] for k in o if k in n]
    f = lambda v: f"{statistics.median(v):.4g} [{min(v):.4g}-{max(v):.4g}]"
    print(f"| {m} | {f(list(o.values()))} | {f(list(n.values()))} | {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] |")
PY
rm -f "$out"
