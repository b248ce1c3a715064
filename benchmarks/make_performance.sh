#!/usr/bin/env bash
# Regenerates the measurements behind docs/PERFORMANCE.md (about 35 minutes on the 2-core machine for the fp32
# runs, plus an estimated 30 for the bf16 run, half of that compiling torch.compile graphs into an empty
# Inductor cache; run it on an otherwise idle machine). Needs a Release build with benchmarks
# (scripts/build.sh does one) and, for the side-by-side columns, a Python with PyTorch named by $FBT_TORCH_PYTHON
# (or --python for run_e2e.py; without torch the fbt side runs alone).
# Output: benchmarks/results/{train,bf16,decode,decode_compile,mix}/e2e.{json,md} and cpu.json (each run
# records the CPU: benchmarks/cpu_info.py), cpu.json (for soft_overhead.jsonl and kernels.txt),
# soft_overhead.jsonl, kernels.txt and tables.md (what docs/PERFORMANCE.md quotes; a line naming the CPU
# above every table).
# The bf16 run: train, kpass3, kpass3_g1, sgemm; tiny and small; 1 and 2 threads; fp32 and bf16 in every
# round (fbt --precision, the peer under torch.autocast bf16), eager torch and torch.compile side by side.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${FBT_BUILD_DIR:-build}"
FBT_TARGETS="bench_e2e bench_kernels" bash scripts/build.sh "$build" -DFBT_BUILD_BENCHMARKS=ON
out=benchmarks/results
mkdir -p "$out"
python3 benchmarks/cpu_info.py --json "$out/cpu.json" --line
e2e=(python3 benchmarks/run_e2e.py --bench "$build/benchmarks/bench_e2e")
"${e2e[@]}" --configs tiny,small --threads 1,2 --measures train,fbt_k1,kpass2,kpass3,kpass3_g1,forward,sgemm \
  --rounds 3 --reps 3 --warmup 1 --peer torch --out "$out/train"
"${e2e[@]}" --configs tiny,small --threads 1,2 --measures train,kpass3,kpass3_g1,sgemm --precisions fp32,bf16 \
  --rounds 2 --reps 3 --warmup 1 --peer torch,torch.compile --out "$out/bf16"
for i in 1 2 3 4 5; do for c in tiny small; do for x in 128 1024; do
  "$build/benchmarks/bench_e2e" --config $c --measure soft_overhead_$x --reps 5 --warmup 1
done; done; done > "$out/soft_overhead.jsonl"
"${e2e[@]}" --configs tiny,small --threads 1 --measures decode_standard_128,decode_soft_128,decode_standard_1024,decode_soft_1024,prefill_fused1 \
  --rounds 3 --reps 5 --warmup 1 --peer torch --no-check --out "$out/decode"
"${e2e[@]}" --configs tiny,small --threads 1 --measures decode_standard_128,decode_soft_1024 \
  --rounds 2 --reps 5 --warmup 1 --peer torch.compile --no-check --out "$out/decode_compile"
"${e2e[@]}" --configs tiny,small --threads 1 --measures mix --rounds 1 --mix-reps 1 --warmup 1 --peer torch --no-check --out "$out/mix"
"$build/benchmarks/bench_kernels" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > "$out/kernels.txt"
python3 benchmarks/performance_report.py "$out/train" "$out/bf16" "$out/decode" "$out/decode_compile" "$out/mix" --soft "$out/soft_overhead.jsonl" > "$out/tables.md"
echo "wrote $out/tables.md"
