#!/usr/bin/env bash
# scripts/gpu-check.sh: fbt's CUDA backend on a GPU machine, in well under 8 minutes.
#
#   bash scripts/gpu-check.sh              on a machine with an NVIDIA GPU, nvcc and PyTorch:
#     1. configure + build (Release, CUDA: sm_90 SASS + compute_90 PTX) the CUDA targets only
#        (test_cuda_gpu, gpu_bench) in build-gpu/;
#     2. run the GPU tests (tests/cuda/test_gpu.cu: each kernel, the backend's reductions, and the
#        library's K-pass step, AdamW and decoding on fbt::cuda::CudaBackend against the CPU backend); a
#        skipped test counts as a failure here (a GPU is expected);
#     2b. train the same tiny run for 20 steps with `fbt train --device cuda` and `--device cpu` (the
#        nvcc build of the command, fbt_cuda) and compare the per-pass losses of every step (relative
#        tolerance 1e-2: float on two backends whose kernels sum in different orders);
#     3. run the benchmark (benchmarks/gpu_bench.cu: train-step tokens/s and decode ms/token at the
#        ~100M-parameter config D 768, 12 layers, 12 heads, SwiGLU 2048, T 512, B 8, byte vocabulary)
#        and the PyTorch eager peer on the same GPU (scripts/gpu_peer.py, reusing
#        python/fbt/hf/fbt_torch.py);
#     4. print a short table last.
#   bash scripts/gpu-check.sh --pack-deps  on a development machine: copies the build's header and test
#     dependencies (Eigen, xtensor, xtl, nlohmann_json, GoogleTest) into build-gpu-deps/, for a GPU
#     machine that has CUDA and PyTorch but not these (it is ~15 MB; carry it along with the tree).
#
# Environment: FBT_GPU_BUILD_DIR (build-gpu), FBT_JOBS (all cores), FBT_BENCH_CONFIG (100m; "small" for
# a quick run), FBT_GPU_SKIP_PEER=1 (no PyTorch run), OUT (where logs go; default build-gpu/check).
# Exit status: 0 when the build, every GPU test, the train comparison and the benchmark succeeded (the peer
# may fail: shown).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
t_start=$(date +%s)
deps="$root/build-gpu-deps"

if [[ "${1:-}" == "--pack-deps" ]]; then
  set -e
  rm -rf "$deps"
  mkdir -p "$deps/usr/include" "$deps/usr/share" "$deps/usr/lib/x86_64-linux-gnu/cmake"
  for d in eigen3 xtensor xtl nlohmann gtest gmock; do
    [[ -d /usr/include/$d ]] && cp -r "/usr/include/$d" "$deps/usr/include/"
  done
  for d in eigen3 cmake/nlohmann_json cmake/xtl cmake/xtensor; do
    [[ -d /usr/share/$d ]] && mkdir -p "$deps/usr/share/$(dirname "$d")" && cp -r "/usr/share/$d" "$deps/usr/share/$d"
  done
  for d in GTest xtensor xtl nlohmann_json; do
    [[ -d /usr/lib/x86_64-linux-gnu/cmake/$d ]] && cp -r "/usr/lib/x86_64-linux-gnu/cmake/$d" "$deps/usr/lib/x86_64-linux-gnu/cmake/"
  done
  cp /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a "$deps/usr/lib/x86_64-linux-gnu/" 2>/dev/null || true
  du -sh "$deps"
  echo "packed into $deps (configure with -DCMAKE_PREFIX_PATH=$deps/usr; gpu-check.sh does so when the folder exists)"
  exit 0
fi

bd="${FBT_GPU_BUILD_DIR:-build-gpu}"
jobs="${FBT_JOBS:-$(nproc)}"
cfg="${FBT_BENCH_CONFIG:-100m}"
out="${OUT:-$bd/check}"
mkdir -p "$out"
log() { echo "[gpu-check $(($(date +%s) - t_start))s] $*"; }

command -v nvcc >/dev/null 2>&1 || { [[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"; }
if ! command -v nvcc >/dev/null 2>&1; then
  echo "gpu-check: nvcc not found (install the CUDA toolkit or put /usr/local/cuda/bin on PATH)" >&2
  exit 2
fi
log "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not available')"
log "nvcc: $(nvcc --version | tail -1)"

# 1. configure + build the CUDA targets
prefix=()
[[ -d "$deps/usr" ]] && prefix=("-DCMAKE_PREFIX_PATH=$deps/usr")
log "configure $bd"
if ! cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Release -DFBT_WITH_CUDA=ON -DFBT_BUILD_TESTS=ON -DFBT_BUILD_BENCHMARKS=ON \
    -DFBT_BUILD_EXAMPLES=OFF -DFBT_BUILD_TOOLS=OFF -DFBT_INSTALL=OFF "${prefix[@]}" >"$out/configure.log" 2>&1; then
  tail -20 "$out/configure.log"
  echo "gpu-check: configure failed (missing Eigen/xtensor/GoogleTest? run 'bash scripts/gpu-check.sh --pack-deps' on a dev machine and bring build-gpu-deps/)" >&2
  exit 2
fi
grep -q "cuda=ON" "$out/configure.log" || { grep "fbt" "$out/configure.log"; echo "gpu-check: CMake did not enable CUDA" >&2; exit 2; }
log "build test_cuda_gpu gpu_bench fbt_cuda (-j $jobs)"
if ! cmake --build "$bd" --target test_cuda_gpu gpu_bench fbt_cuda -j "$jobs" >"$out/build.log" 2>&1; then
  grep -E "error" "$out/build.log" | head -20
  echo "gpu-check: build failed (log: $out/build.log)" >&2
  exit 2
fi
t_build=$(($(date +%s) - t_start))

# 2. GPU tests
log "GPU tests"
"$bd/tests/cuda/test_gpu" --gtest_color=no >"$out/gpu_tests.log" 2>&1
tests_rc=$?
grep -A4 -E ": Failure$" "$out/gpu_tests.log" | head -60  # each failed check with its message
grep -E "^\[  FAILED  \] [A-Za-z]" "$out/gpu_tests.log" | sort -u
summary_tests=$(grep -E "^\[  PASSED  \] [0-9]+ test|^\[  FAILED  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test" "$out/gpu_tests.log" |
  sed -e 's/, listed below://' -e 's/\[ *//' -e 's/ *\]//' | tr '\n' ' ')
if grep -q "^\[  SKIPPED \] [0-9]" "$out/gpu_tests.log"; then tests_rc=1; fi  # a GPU machine must run them all
log "GPU tests: ${summary_tests:-no summary (crash? see $out/gpu_tests.log)} (rc $tests_rc)"

# 2b. the trainer on the GPU: fbt train --device cuda against --device cpu, the same 20 steps
log "fbt train --device cuda vs --device cpu (20 steps)"
train_args=(--data task:addition --task_difficulty 2 --hidden_size 64 --num_hidden_layers 2 --num_attention_heads 4 --num_key_value_heads 2
            --intermediate_size 128 --seq_len 64 --batch_size 8 --steps 20 --warmup_steps 2 --feedback_start 0.25 --eval_every 0
            --eval_windows 2 --seq_eval_windows 1 --monitor_passes 3 --progress false)
rm -rf "$out/train_cpu" "$out/train_cuda"
"$bd/tools/fbt_cuda" train "${train_args[@]}" --device cpu --out_dir "$out/train_cpu" >"$out/train_cpu.log" 2>&1 &&
  "$bd/tools/fbt_cuda" train "${train_args[@]}" --device cuda --out_dir "$out/train_cuda" >"$out/train_cuda.log" 2>&1 &&
  python3 - "$out/train_cpu/train.jsonl" "$out/train_cuda/train.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 20, f"steps: cpu {len(a)}, cuda {len(b)}"
worst = 0.0
for x, y in zip(a, b):
    assert x["K"] == y["K"], f"step {x['step']}: K {x['K']} (cpu) vs {y['K']} (cuda)"
    for la, lb in zip(x["loss"], y["loss"]):
        worst = max(worst, abs(la - lb) / abs(la))
print(f"train --device cuda vs cpu: 20 steps, largest relative loss difference {worst:.2e} (tolerance 1e-2)")
sys.exit(0 if worst < 1e-2 else 1)
PY
train_rc=$?
[[ $train_rc -ne 0 ]] && tail -5 "$out/train_cpu.log" "$out/train_cuda.log" >&2
log "train --device cuda: rc $train_rc"

# 3. benchmark and peer
log "gpu_bench --config $cfg"
"$bd/benchmarks/gpu_bench" --config "$cfg" >"$out/fbt.jsonl" 2>"$out/fbt_bench.err"
bench_rc=$?
cat "$out/fbt_bench.err" >&2
peer_rc=0
if [[ "${FBT_GPU_SKIP_PEER:-0}" != 1 ]]; then
  log "PyTorch eager peer --config $cfg"
  timeout 240 python3 scripts/gpu_peer.py --config "$cfg" >"$out/torch.jsonl" 2>"$out/torch.err"
  peer_rc=$?
  [[ $peer_rc -ne 0 ]] && tail -5 "$out/torch.err" >&2
else
  : >"$out/torch.jsonl"
fi

# 4. the table, last
python3 - "$out/fbt.jsonl" "$out/torch.jsonl" "$summary_tests" "$t_build" "$(($(date +%s) - t_start))" "$tests_rc" "$bench_rc" "$peer_rc" <<'PY'
import json, sys
fbt_f, torch_f, tests, t_build, t_total, trc, brc, prc = sys.argv[1:]
def load(p):
    rows = {}
    try:
        for line in open(p):
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                rows[d.get("measure", "?")] = d
    except OSError:
        pass
    return rows
f, t = load(fbt_f), load(torch_f)
dev = next((d.get("device") for d in list(f.values()) + list(t.values()) if d.get("device")), "?")
anyrow = next(iter(f.values()), {})
print()
print(f"== fbt CUDA path: {dev}; config {anyrow.get('config', '?')} (B {anyrow.get('B', '?')}, T {anyrow.get('T', '?')}, "
      f"{anyrow.get('params', 0) / 1e6:.1f}M params), GEMM {anyrow.get('gemm', '?')}")
print(f"== GPU tests: {tests.strip() or 'no summary'} (exit {trc}); build {t_build}s, total {t_total}s")
print(f"{'measure':<26}{'fbt-cuda':>14}{'torch eager':>14}{'fbt/torch':>11}")
for m, key, unit, better_high in (("train", "tokens_per_s", "tokens/s", True), ("kpass2", "tokens_per_s", "tokens/s", True),
                                  ("decode_standard", "ms_per_token", "ms/token", False), ("decode_soft", "ms_per_token", "ms/token", False)):
    a, b = f.get(m, {}), t.get(m, {})
    fa = a.get(key); fb = b.get(key)
    sa = f"{fa:,.0f}" if fa is not None and better_high else (f"{fa:.3f}" if fa is not None else a.get("error", "-")[:13])
    sb = f"{fb:,.0f}" if fb is not None and better_high else (f"{fb:.3f}" if fb is not None else b.get("error", "-")[:13])
    ratio = f"{fa / fb:.2f}x" if fa and fb else "-"
    print(f"{m + ' (' + unit + ')':<26}{sa:>14}{sb:>14}{ratio:>11}")
PY
if [[ $tests_rc -ne 0 || $bench_rc -ne 0 || $train_rc -ne 0 ]]; then exit 1; fi
exit 0
