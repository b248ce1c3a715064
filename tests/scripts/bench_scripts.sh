#!/usr/bin/env bash
# The benchmark scripts without torch (they must work where torch is not installed): cpu_info.py,
# gemm_peers.py and performance_report.py on the committed results (files from before the precision field), compare_table.py
# on made-up lines, and, given a bench_e2e, compare_builds.sh in its one-build mode and run_e2e.py with
# --peer none in fp32 and bf16, whose results performance_report.py must render (with the bf16 table when
# the build runs bf16). Speed is not checked: one repetition of the cheapest measure.
#   bench_scripts.sh SOURCE_DIR TMP_DIR PYTHON [BENCH_E2E]
set -euo pipefail
src=$1 tmp=$2 py=$3 bench=${4:-}
b="$src/benchmarks"
rm -rf "$tmp"
mkdir -p "$tmp"

# cpu_info.py: a summary line and a JSON record
"$py" "$b/cpu_info.py" --json "$tmp/cpu.json" --line | tee "$tmp/cpu.txt"
grep -q "^CPU: .* CPUs" "$tmp/cpu.txt"
"$py" -c "import json,sys; d=json.load(open(sys.argv[1])); assert 'simd_flags' in d and 'l2' in d, d" "$tmp/cpu.json"
"$py" "$b/cpu_info.py" --line-from "$tmp/cpu.json" | grep -q "^CPU: "

# performance_report.py on the old results (no precision field: fp32)
r="$b/results"
if [[ -f $r/run1/e2e.json ]]; then
  "$py" "$b/performance_report.py" "$r/run1" "$r/run2a" "$r/run2b" "$r/run3" "$r/run4" --soft "$r/soft_overhead.jsonl" > "$tmp/old.md"
  grep -q "^| config | threads | measure | precision | unit | fbt median" "$tmp/old.md"
  grep -qE "^\| tiny \| 1 \| train \| fp32 \| ms/step \| " "$tmp/old.md"
  grep -q "^### Targets" "$tmp/old.md"
  grep -q "^### Soft decoding overhead" "$tmp/old.md"
  test "$(grep -c '^CPU: ' "$tmp/old.md")" -ge 2
  if grep -q "bf16 beside fp32" "$tmp/old.md"; then echo "unexpected bf16 table" >&2; exit 1; fi
fi

# gemm_peers.py: the products by each library side by side (the committed Zen 3 run, a made-up peak)
if [[ -f $r/zen3_mkl/gemm_peers.json ]]; then
  echo '{"benchmarks": [{"name": "BM_Peak/fp32_fma", "GFLOP/s": 100.0}]}' > "$tmp/peak100.json"
  "$py" "$b/gemm_peers.py" "$r/zen3_mkl/gemm_peers.json" --peak "$tmp/peak100.json" > "$tmp/peers.md"
  grep -q "^| product | Eigen GFLOP/s | oneDNN GFLOP/s | MKL GFLOP/s | fbt bf16 GFLOP/s | MKL bf16 GFLOP/s | MKL / Eigen |" "$tmp/peers.md"
  grep -qE "^\| small/q_fwd \| 86\.9 \(87%\) \| 90\.9 \(91%\) \| 86\.8 \(87%\) \| 79\.9 \| 86\.2 \| 1\.00 \| 0\.96 \| 0\.93 \|$" "$tmp/peers.md"
  grep -qE "^\| \*\*tiny: sum of times\*\* \| 13\.6 ms \| 13\.0 ms \| 13\.0 ms \| 14\.7 ms \| 14\.1 ms \| 0\.96 \| 0\.95 \| 0\.96 \|$" "$tmp/peers.md"
fi

# performance_report.py --peak: each step's share of the core's measured peak (made-up BM_Peak rates)
if [[ -f $r/zen4_bf16/e2e.json ]]; then
  echo '{"benchmarks": [{"name": "BM_Peak/clock", "GHz": 3.0}, {"name": "BM_Peak/fp32_fma", "GFLOP/s": 96.0},
        {"name": "BM_Peak/bf16_dot", "GFLOP/s": 192.0}]}' > "$tmp/peak.json"
  "$py" "$b/performance_report.py" "$r/zen4_bf16" --peak "$tmp/peak.json" > "$tmp/peak.md"
  grep -qE "^\| train step \(fp32\): share of the core's fp32 peak x threads \(BM_Peak/fp32_fma: 96 GFLOP/s = 32 FLOP/cycle x 3.00 GHz\) \| tiny \| 1 \| 61.7 of 96 GFLOP/s = 64.3% \|" "$tmp/peak.md"
  grep -qE "^\| kpass3 step \(bf16\): share of the core's bf16 peak .* \| small \| 2 \| [0-9.]+ of 384 GFLOP/s" "$tmp/peak.md"
  grep -q "bf16) >= 1.3x the tokens/s of torch.compile" "$tmp/peak.md"
fi

# compare_table.py: two sides, three rounds, new 10% faster in every round; and one side
for rnd in 0 1 2; do
  for side in old new; do
    ms=100; [[ $side == new ]] && ms=$((90 + rnd))
    echo "{\"side\": \"$side\", \"round\": $rnd, \"impl\": \"fbt\", \"config\": \"tiny\", \"threads\": 1, \"measure\": \"train\", \"median_ms\": $ms}"
  done
done > "$tmp/two.jsonl"
"$py" "$b/compare_table.py" "$tmp/two.jsonl" --cpu "CPU: test" | tee "$tmp/two.md"
grep -qE "^\| tiny \| 1 \| fp32 \| train \| ms/step \| 100 \[100-100\] \| 91 \[90-92\] \| 0.910 \[0.900-0.920\] \| faster \|$" "$tmp/two.md"
grep -v '"new"' "$tmp/two.jsonl" > "$tmp/one.jsonl"
"$py" "$b/compare_table.py" "$tmp/one.jsonl" | grep -qE "^\| tiny \| 1 \| fp32 \| train \| ms/step \| 100 \[100-100\] \| 3 \|$"

if [[ -n $bench ]]; then
  REPS=1 WARMUP=0 bash "$b/compare_builds.sh" "$bench" - 1 tiny sgemm | tee "$tmp/cb.md"
  grep -qE "^\| tiny \| 1 \| fp32 \| sgemm \| ms \(1024\^3\) \| " "$tmp/cb.md"
  "$py" "$b/run_e2e.py" --bench "$bench" --configs tiny --threads 1 --measures sgemm --precisions fp32,bf16 --peer none \
    --rounds 1 --reps 1 --warmup 0 --out "$tmp/e2e" > "$tmp/e2e.txt"
  test -f "$tmp/e2e/cpu.json"
  grep -qE "^\| tiny \| 1 \| sgemm \| fp32 \| " "$tmp/e2e/e2e.md"
  "$py" "$b/performance_report.py" "$tmp/e2e" > "$tmp/new.md"
  if "$bench" --config tiny --measure sgemm --reps 1 --warmup 0 --precision bf16 | grep -q '"precision": "bf16"'; then
    grep -qE "^\| tiny \| 1 \| sgemm \| bf16 \| ms \(1024\^3\) \| [0-9.]+ \[" "$tmp/e2e/e2e.md"
    grep -q "^### bf16 beside fp32" "$tmp/new.md"
    grep -qE "^\| tiny \| 1 \| sgemm \| ms \(1024\^3\) \| [0-9.]+ \| [0-9.]+ \(x [0-9.]+\) \|$" "$tmp/new.md"
  else
    grep -q "fbt bf16 not run" "$tmp/e2e/e2e.md"
  fi
fi
echo "ok: bench scripts"
