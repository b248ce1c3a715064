// benchmarks/bench_kernels.cpp (bench_kernels): Google Benchmark microbenchmarks of fbt's kernels at the
// shapes of one training step of the two bench_e2e configs, float, one thread:
//   tiny  = D 128, 4 heads (4 kv), hs 32, SwiGLU 384, T 128, batch 16   (N = B*T = 2048 rows)
//   small = D 256, 8 heads (4 kv), hs 32, SwiGLU 768, T 256, batch 8    (N = 2048 rows)
//   vocabulary 257 (bytes + document separator).
//
// Matrix kernels report GFLOP/s (model FLOPs: 2*M*N*K per product; causal attention counts only the
// lower triangle), memory-bound kernels report GB/s (compulsory bytes read + written per call, each
// tensor counted once). BM_Gemm/sgemm_1024_* is the ceiling every GEMM-shaped number is read against.
// BM_Gemm runs the CPU backend's float product, as a step does (oneDNN's kernel on an AVX-512 CPU in a
// build with oneDNN, ops/gemm_dnnl.hpp; the label names it); BM_GemmEigen/... the same products by Eigen's,
// BM_GemmOneDnn/... by oneDNN's whatever its kernel (a build with oneDNN: its jit GEMM on an AVX2 CPU).
//
//   BM_Gemm/<cfg>/q_fwd        out (N, NH*hs) = x (N, D) Wq^T             linear_forward
//   BM_Gemm/<cfg>/kv_fwd       out (N, NKV*hs) = x Wk^T (Wv the same)      linear_forward
//   BM_Gemm/<cfg>/o_fwd        y (N, D) += ao (N, NH*hs) Wo^T              linear_forward_acc
//   BM_Gemm/<cfg>/q_bwd_dx     dx (N, D) += dq (N, NH*hs) Wq               linear_backward (dW skipped)
//   BM_Gemm/<cfg>/q_bwd_dw     dWq (NH*hs, D) += dq^T x                    linear_backward (dX skipped)
//   BM_Gemm/<cfg>/mlp_up_fwd   g (N, F) = x Wg^T (Wu the same)             linear_forward
//   BM_Gemm/<cfg>/mlp_down_fwd y (N, D) += h (N, F) Wd^T                   linear_forward_acc
//   BM_Gemm/<cfg>/head_fwd     logits (N, V) = hf (N, D) E^T               linear_forward
//   BM_Gemm/<cfg>/head_bwd_dx  dhf (N, D) += dlogits (N, V) E              linear_backward (dW skipped)
//   BM_Gemm/<cfg>/head_bwd_dw  dE (V, D) += dlogits^T hf                   linear_backward (dX skipped)
//   BM_GemmBf16/<cfg>/<name>   the same products in bf16 (gemm_bf16), a weight operand read from its bf16
//                              copy (ops/bf16_weights.hpp); BM_GemmBf16/gemm_1024_{nn,nt} the square one
//   BM_GemmMkl/..., BM_GemmMklBf16/...  the same products by Intel MKL, a peer (sgemm; bf16 GEMM with a weight
//                              packed once), in a build that found MKL (benchmarks/CMakeLists.txt, FBT_WITH_MKL)
//   BM_Peak/clock                the core's clock (counter GHz: a chain of dependent adds, one per cycle)
//   BM_Peak/fp32_fma, bf16_dot   the core's measured peak: independent FMAs on the build's widest vectors;
//                                AVX512-BF16's vdpbf16ps (where the build has it)
//   BM_Attention/<cfg>/{forward,backward}   attention_forward / _backward, one document per row
//   BM_Fuser/<cfg>/glu_{forward,backward}   FeedbackFuser glu: shared_forward + forward / backward + shared_backward
//   BM_RMSNorm/<cfg>/{fwd,bwd}     (N, D);   BM_RMSNorm/<cfg>/qk_{fwd,bwd}  per-head (N*NH, hs) (QK-norm)
//   BM_RoPE/<cfg>/{fwd,bwd}        q (N, NH*hs)
//   BM_SwiGLU/<cfg>/{fwd,bwd}      (N, F)
//   BM_SoftmaxXent/<cfg>/{fwd,bwd} (N, V), in place
//   BM_Exp/{eigen,vexp}            y = exp(x) on 4096 floats in L1 (counter Gexp/s): Eigen's exp, fbt::vexp
//   BM_Optimizer/<cfg>/{adamw,muon,normuon}   one update of the whole bench_e2e model (glu fuser, 4 / 6
//                  layers): adamw_update, or grouped_update (train/muon.hpp); GFLOP/s of Newton-Schulz
// Run: build/benchmarks/bench_kernels [--benchmark_filter=REGEX] [--benchmark_repetitions=3
//      --benchmark_report_aggregates_only=true]; benchmarks/README.md has more.
#include <benchmark/benchmark.h>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fbt/core/arena.hpp"
#include "fbt/core/params.hpp"
#include "fbt/core/rng.hpp"
#include "fbt/backend/cpu.hpp"
#include "fbt/layers/glu_fuser.hpp"
#include "fbt/model/model.hpp"
#include "fbt/ops/activations.hpp"
#include "fbt/ops/attention.hpp"
#include "fbt/ops/gemm_bf16.hpp"
#include "fbt/ops/linear.hpp"
#include "fbt/ops/rmsnorm.hpp"
#include "fbt/ops/rope.hpp"
#include "fbt/ops/softmax_xent.hpp"
#include "fbt/ops/vexp.hpp"
#include "fbt/train/muon.hpp"

#if defined(FBT_BENCH_MKL)
#include <mkl.h>  // Intel MKL (a peer: BM_GemmMkl, BM_GemmMklBf16), found by benchmarks/CMakeLists.txt
#endif

using namespace fbt;

namespace {

/// Default --benchmark_min_time (seconds of CPU time per benchmark and repetition; the library's own default
/// is 0.5): the whole program (50 benchmarks) then takes about 20 s, 3 repetitions about a minute.
constexpr const char* kDefaultMinTime = "--benchmark_min_time=0.1";

struct Cfg {
  const char* name;
  int D, NH, NKV, F, T, B, V;
  int L;  ///< layers of the bench_e2e model (the optimizer benchmark updates all of it)
  int hs() const { return D / NH; }
  int N() const { return B * T; }
  int QD() const { return NH * hs(); }
  int KD() const { return NKV * hs(); }
};
const Cfg kConfigs[] = {
    {"tiny", 128, 4, 4, 384, 128, 16, 257, 4},
    {"small", 256, 8, 4, 768, 256, 8, 257, 6},
};

/// n floats, uniform in [-1, 1) from fbt::Rng (64-byte aligned).
AlignedVector<float> rand_buf(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng r(seed);
  AlignedVector<float> v(n);
  for (auto& x : v) x = float(r.uniform(-scale, scale));
  return v;
}

void set_gflops(benchmark::State& st, double flops) {
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void set_gbytes(benchmark::State& st, double bytes) {
  st.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void reg(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& st) { fn(st); })
      ->Unit(benchmark::kMicrosecond);
}

// ---- GEMMs ------------------------------------------------------------------------------------

/// The float product a GEMM benchmark runs: the CPU backend's choice (automatic: BM_Gemm), Eigen's
/// (BM_GemmEigen) or oneDNN's whatever its kernel (BM_GemmOneDnn, in a build with oneDNN).
struct Fp32Kernel {
  std::optional<ScopedFp32Eigen> eigen;
  std::optional<ScopedFp32OneDnn> onednn;
  explicit Fp32Kernel(Fp32Gemm k) {
    if (k == Fp32Gemm::eigen) eigen.emplace();
    if (k == Fp32Gemm::onednn) onednn.emplace();
  }
};

/// One product of a training step, C (M, N) (+)= op(A) (M, K) op(B) (K, N), B a weight or not.
struct StepProduct {
  const char* name;
  int M, N, K;
  bool tA, tB, acc, weight;
};
/// The products BM_Gemm/<cfg>/... times (the table at the top), as (M, N, K, tA, tB, accumulate, B is a weight).
std::vector<StepProduct> step_products(const Cfg& c) {
  const int N = c.N(), D = c.D, QD = c.QD(), KD = c.KD(), F = c.F, V = c.V;
  return {{"q_fwd", N, QD, D, false, true, false, true},         {"kv_fwd", N, KD, D, false, true, false, true},
          {"o_fwd", N, D, QD, false, true, true, true},          {"q_bwd_dx", N, D, QD, false, false, true, true},
          {"q_bwd_dw", QD, D, N, true, false, true, false},      {"mlp_up_fwd", N, F, D, false, true, false, true},
          {"mlp_down_fwd", N, D, F, false, true, true, true},    {"head_fwd", N, V, D, false, true, false, true},
          {"head_bwd_dx", N, D, V, false, false, true, true},    {"head_bwd_dw", V, D, N, true, false, true, false}};
}

/// A float product, C (M, N) (+)= op(A) op(B), as a step runs it (the CPU backend's float product: oneDNN's
/// kernel where it beats Eigen's, ops/gemm_dnnl.hpp), or by kernel k.
void gemm_f32(benchmark::State& st, const StepProduct& p, Fp32Gemm k) {
  Fp32Kernel force(k);
  const int lda = p.tA ? p.M : p.K, ldb = p.tB ? p.K : p.N;
  auto A = rand_buf(std::size_t(p.M) * p.K, 1), B = rand_buf(std::size_t(p.K) * p.N, 2, 0.1), C = rand_buf(std::size_t(p.M) * p.N, 3);
  CpuBackend<float> be;
  auto run = [&] { be.gemm(C.data(), p.N, A.data(), lda, p.tA, B.data(), ldb, p.tB, p.M, p.N, p.K, p.acc); };
  run();  // grows gemm's packing buffers (makes oneDNN's primitive) outside the timing
  for (auto _ : st) {
    run();
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_gflops(st, 2.0 * p.M * p.N * p.K);
  st.SetLabel(gemm_f32_impl(p.M, p.N, p.K));
}

/// The square n^3 product, C = A B (nn) or C = A B^T (nt, a linear layer's layout).
StepProduct square(int n, bool transB) { return {nullptr, n, n, n, false, transB, false, false}; }

/// The same products in bf16 (gemm_bf16: bf16 operands, float sums): C (M, N) (+)= op(A) (M, K) op(B) (K, N).
/// When B is a weight it lies in a weight scope, as in a training step: its bf16 copy is made at the first
/// call (outside the timing) and read by the timed ones (a step makes it once and uses it 2K times).
void gemm_bf16_bench(benchmark::State& st, int M, int N, int K, bool tA, bool tB, bool acc, bool weight) {
  if (!bf16_available()) return st.SkipWithError(bf16_unavailable_reason().c_str());
  ScopedMatmulPrecision bf16(Precision::bf16);
  auto A = rand_buf(std::size_t(M) * K, 11), Bv = rand_buf(std::size_t(K) * N, 12, 0.1), C = rand_buf(std::size_t(M) * N, 13);
  Bf16WeightScope<float> scope(Bv.data(), weight ? Bv.size() : 0, true);
  auto run = [&] {
    gemm_bf16(smat(C.data(), M, N), tA ? csmat(A.data(), K, M) : csmat(A.data(), M, K), tA, tB ? csmat(Bv.data(), N, K) : csmat(Bv.data(), K, N),
              tB, acc);
  };
  run();
  for (auto _ : st) {
    run();
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_gflops(st, 2.0 * M * N * K);
  // the shape, for a peer to time the same product (benchmarks/gemm_shapes.py)
  st.counters["M"] = M, st.counters["N"] = N, st.counters["K"] = K, st.counters["tA"] = tA, st.counters["tB"] = tB, st.counters["acc"] = acc;
  st.SetLabel(gemm_bf16_impl(M, N, K));
}

#if defined(FBT_BENCH_MKL)
// ---- Intel MKL: a peer for the products, not a backend (benchmarks/CMakeLists.txt finds it) -------------

/// Largest |x - ref| over the largest |ref|: how far a peer's product is from fbt's.
double rel_max_diff(const AlignedVector<float>& x, const AlignedVector<float>& ref) {
  double d = 0, m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - ref[i]))), m = std::max(m, double(std::abs(ref[i])));
  return m > 0 ? d / m : d;
}

/// "MKL 2026.2 build 20260915, <the processors MKL's code path is for>", for the label.
std::string mkl_label() {
  MKLVersion v;
  mkl_get_version(&v);
  return "MKL " + std::to_string(v.MajorVersion) + "." + std::to_string(v.UpdateVersion) + " build " + v.Build + ", " + v.Processor;
}

/// Checks a peer's product, then times it: run(c) computes C (M, N) (+)= op(A) op(B) into c. It runs once on a
/// copy of C and must match ref, fbt's product of the same operands (largest difference <= 1e-4 of the largest
/// entry: float sums in another order), or the benchmark stops with an error naming `what`; then run(C) is timed.
template <class Run>
void check_then_time(benchmark::State& st, const StepProduct& p, Run run, AlignedVector<float>& C, const AlignedVector<float>& ref,
                     const std::string& what) {
  AlignedVector<float> out = C;
  run(out.data());
  if (const double d = rel_max_diff(out, ref); !(d <= 1e-4))
    return st.SkipWithError((what + " differs from fbt's product by " + std::to_string(d) + " of the largest entry").c_str());
  for (auto _ : st) {
    run(C.data());
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_gflops(st, 2.0 * p.M * p.N * p.K);
  st.SetLabel(what + ", " + mkl_label());
}

/// BM_GemmMkl/...: the product by MKL's cblas_sgemm (sequential), row-major like every fbt tensor, checked
/// against the CPU backend's before the timing, so a wrong transpose or leading dimension cannot pass for a rate.
void mkl_gemm(benchmark::State& st, const StepProduct& p) {
  const int lda = p.tA ? p.M : p.K, ldb = p.tB ? p.K : p.N;
  auto A = rand_buf(std::size_t(p.M) * p.K, 21), B = rand_buf(std::size_t(p.K) * p.N, 22, 0.1), C = rand_buf(std::size_t(p.M) * p.N, 23);
  auto run = [&](float* c) {
    cblas_sgemm(CblasRowMajor, p.tA ? CblasTrans : CblasNoTrans, p.tB ? CblasTrans : CblasNoTrans, p.M, p.N, p.K, 1.0f, A.data(), lda, B.data(),
                ldb, p.acc ? 1.0f : 0.0f, c, p.N);
  };
  AlignedVector<float> ref = C;
  CpuBackend<float>().gemm(ref.data(), p.N, A.data(), lda, p.tA, B.data(), ldb, p.tB, p.M, p.N, p.K, p.acc);
  check_then_time(st, p, run, C, ref, "sgemm");
}

/// BM_GemmMklBf16/...: the bf16 product by MKL's cblas_gemm_bf16bf16f32 (bf16 operands, float sums), doing the
/// work BM_GemmBf16 does: A rounded to bf16 on every call (fbt's own rounding, detail::to_bf16); a weight B
/// rounded and packed once, outside the timing, by cblas_gemm_bf16bf16f32_pack (MKL's counterpart of fbt's
/// bf16 weight copies), any other B rounded on every call. Checked first against gemm_bf16_reference.
void mkl_gemm_bf16(benchmark::State& st, const StepProduct& p) {
  const int lda = p.tA ? p.M : p.K, ldb = p.tB ? p.K : p.N;
  const int arows = p.tA ? p.K : p.M, brows = p.tB ? p.N : p.K;  // A (arows, lda), B (brows, ldb) as stored
  auto A = rand_buf(std::size_t(p.M) * p.K, 11), B = rand_buf(std::size_t(p.K) * p.N, 12, 0.1), C = rand_buf(std::size_t(p.M) * p.N, 13);
  std::vector<MKL_BF16> a(A.size()), b(B.size()), packed;  // A, B in bf16; B packed by MKL (a weight)
  if (p.weight) {
    detail::to_bf16(b.data(), B.data(), brows, ldb, ldb);
    packed.resize(cblas_gemm_bf16bf16f32_pack_get_size(CblasBMatrix, p.M, p.N, p.K) / sizeof(MKL_BF16) + 1);
    cblas_gemm_bf16bf16f32_pack(CblasRowMajor, CblasBMatrix, p.tB ? CblasTrans : CblasNoTrans, p.M, p.N, p.K, b.data(), ldb, packed.data());
  }
  auto run = [&](float* c) {
    detail::to_bf16(a.data(), A.data(), arows, lda, lda);
    const float beta = p.acc ? 1.0f : 0.0f;
    if (p.weight) {
      cblas_gemm_bf16bf16f32_compute(CblasRowMajor, p.tA ? CblasTrans : CblasNoTrans, CblasPacked, p.M, p.N, p.K, 1.0f, a.data(), lda,
                                     packed.data(), ldb, beta, c, p.N);
    } else {
      detail::to_bf16(b.data(), B.data(), brows, ldb, ldb);
      cblas_gemm_bf16bf16f32(CblasRowMajor, p.tA ? CblasTrans : CblasNoTrans, p.tB ? CblasTrans : CblasNoTrans, p.M, p.N, p.K, 1.0f, a.data(), lda,
                             b.data(), ldb, beta, c, p.N);
    }
  };
  AlignedVector<float> ref = C;  // fbt's product here: the definition of a bf16 product
  gemm_bf16_reference(smat(ref.data(), p.M, p.N), csmat(A.data(), arows, lda), p.tA, csmat(B.data(), brows, ldb), p.tB, p.acc);
  check_then_time(st, p, run, C, ref, std::string(p.weight ? "B packed once, " : "") + "gemm_bf16bf16f32");
}
#endif

// ---- the core's clock and peak rates ------------------------------------------------------------

#if defined(__x86_64__)
/// The clock: a chain of dependent integer adds retires one per cycle on every x86 core, so adds / second
/// is cycles / second (counter GHz), whatever turbo or the hypervisor make of the nominal frequency.
void core_clock(benchmark::State& st) {
  constexpr long kAdds = 1 << 22;
  for (auto _ : st) {
    std::uint64_t x = 0;
    for (long i = 0; i < kAdds; i += 8)
      asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                   : "+r"(x));
    benchmark::DoNotOptimize(x);
  }
  st.counters["GHz"] = benchmark::Counter(double(kAdds) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

/// The fp32 FMA peak of one core: independent accumulators on the build's widest vectors, a multiply-add
/// per lane, 2 FLOP each; GFLOP/s / GHz is the core's FLOP per cycle. Enough chains to cover the FMA
/// latency on every unit (4 cycles x 2 units), and few enough to stay in registers with the two operands:
/// 8 of 16 floats (512-bit registers, 32 of them) with AVX-512, 12 of 8 floats (256-bit, 16 of them)
/// without (more would spill to the stack and measure the loads: 16 such chains read 58 GFLOP/s on a
/// Zen 3 core whose products run at 90).
#if defined(__AVX512F__)
constexpr int kPeakLanes = 16, kPeakChains = 8;
#else
constexpr int kPeakLanes = 8, kPeakChains = 12;
#endif
void fp32_fma_peak(benchmark::State& st) {
  typedef float vec __attribute__((vector_size(4 * kPeakLanes)));
  constexpr long kIters = 1 << 16;
  vec a = vec{} + 0.999999f, b = vec{} + 1e-7f;
  benchmark::DoNotOptimize(a), benchmark::DoNotOptimize(b);  // unknown to the compiler: a multiply-add per lane
  for (auto _ : st) {
    vec c[kPeakChains];
    for (int j = 0; j < kPeakChains; ++j) c[j] = vec{} + float(j);
    for (long i = 0; i < kIters; ++i)
      for (int j = 0; j < kPeakChains; ++j) c[j] = c[j] * a + b;
    for (auto& v : c) benchmark::DoNotOptimize(v);
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kIters * kPeakChains * kPeakLanes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

#if defined(__AVX512BF16__)
/// The bf16 dot-product peak of one core (AVX512-BF16's vdpbf16ps: 32 bf16 products summed in pairs into
/// 16 floats, 64 FLOP an instruction), 12 independent accumulators.
void bf16_dp_peak(benchmark::State& st) {
  constexpr long kIters = 1 << 16;
  const __m512bh x = __m512bh(_mm512_set1_epi16(0x3f80)), y = __m512bh(_mm512_set1_epi16(0x3400));  // 1.0, 2^-23 in bf16
  for (auto _ : st) {
    __m512 c[12];
    for (auto& v : c) v = _mm512_setzero_ps();
    for (long i = 0; i < kIters; ++i)
      for (auto& v : c) v = _mm512_dpbf16_ps(v, x, y);
    for (auto& v : c) benchmark::DoNotOptimize(v);
  }
  st.counters["GFLOP/s"] = benchmark::Counter(64.0 * 12 * kIters * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

// ---- attention --------------------------------------------------------------------------------

void attention(benchmark::State& st, const Cfg& c, bool backward) {
  const int N = c.N(), QD = c.QD(), KD = c.KD();
  const AttnShape s{c.B, c.T, c.NH, c.NKV, c.hs()};
  auto q = rand_buf(std::size_t(N) * QD, 11), k = rand_buf(std::size_t(N) * KD, 12), v = rand_buf(std::size_t(N) * KD, 13);
  auto dout = rand_buf(std::size_t(N) * QD, 14);
  // lse and Dt (B, NH, T): the forward's state and the backward's scratch
  AlignedVector<float> out(std::size_t(N) * QD), lse(std::size_t(c.B) * c.NH * c.T, 0.f), Dt(std::size_t(c.B) * c.NH * c.T);
  AlignedVector<float> dq(std::size_t(N) * QD, 0.f), dk(std::size_t(N) * KD, 0.f), dv(std::size_t(N) * KD, 0.f);
  const std::vector<int> first(std::size_t(N), 0);  // one document per row
  auto fwd = [&] {
    attention_forward(smat(out.data(), N, QD), lse.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                      first.data(), s);
  };
  auto bwd = [&] {
    attention_backward(smat(dq.data(), N, QD), smat(dk.data(), N, KD), smat(dv.data(), N, KD), Dt.data(), csmat(dout.data(), N, QD),
                       csmat(out.data(), N, QD), lse.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                       first.data(), s);
  };
  fwd();  // the out and lse backward reads
  if (backward) bwd();
  for (auto _ : st) {
    if (backward) bwd();
    else fwd();
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(dq.data());
    benchmark::ClobberMemory();
  }
  // causal model FLOPs: QK^T and AV over (T+1)/2 keys on average, per head; backward counts 4 such products
  // (it computes 5: the scores are recomputed, not read)
  const double fwd_flops = 2.0 * c.B * c.NH * double(c.T) * (c.T + 1) * c.hs();
  set_gflops(st, backward ? 2.0 * fwd_flops : fwd_flops);
}

// ---- the GLU feedback fuser -------------------------------------------------------------------

void fuser_glu(benchmark::State& st, const Cfg& c, bool backward) {
  const int N = c.N(), D = c.D;
  GluFuser<float> fu(FuserArgs{D}, GluInit::FanIn);  // dense W_U, W_G (the default W_U = I is just as dense to the GEMM)
  ParamStore<float> ps;
  fu.declare(ParamRegistry<float>(ps, "model.feedback."));
  ps.finalize();
  ps.init(1);
  CpuBackend<float> be;
  const Weights<float> w = host_weights(ps);
  GluFuser<float>::PreCache pc{};
  GluFuser<float>::Cache cache{};
  HostBuffer<float> mem;
  float *pre = nullptr, *dpre = nullptr;
  lay_out_regions<float>(mem, [&](Regions<float>& r) {
    pre = r.keep.take(std::size_t(N) * D), dpre = r.keep.take(std::size_t(N) * D);
    Carver<float> t = r.temp();
    fu.alloc_pre(be, r.keep, t, pc, N, true);
    fu.alloc(be, r.keep, t, cache, N, true);
    r.done(t);
  });
  auto s = rand_buf(std::size_t(N) * D, 21), e = rand_buf(std::size_t(N) * D, 22), du = rand_buf(std::size_t(N) * D, 23);
  AlignedVector<float> u(std::size_t(N) * D), ds(std::size_t(N) * D, 0.f), de(std::size_t(N) * D, 0.f);
  auto fwd = [&] {
    fu.pre_forward(be, w, pc, e.data(), pre, N);
    fu.forward(be, w, cache, s.data(), e.data(), pre, u.data(), N);
  };
  auto bwd = [&] {
    fu.backward(be, w, cache, s.data(), e.data(), pre, du.data(), ds.data(), de.data(), dpre, N);
    fu.pre_backward(be, w, pc, e.data(), dpre, de.data(), N);
  };
  fwd();
  if (backward) bwd();
  for (auto _ : st) {
    if (backward) bwd();
    else fwd();
    benchmark::DoNotOptimize(u.data());
    benchmark::DoNotOptimize(de.data());
    benchmark::ClobberMemory();
  }
  // forward: W_G N_g(e) and W_U s (2 N D^2 each); backward: dX and dW of both (4 products)
  const double prod = 2.0 * N * double(D) * D;
  set_gflops(st, backward ? 4.0 * prod : 2.0 * prod);
}

// ---- memory-bound kernels ---------------------------------------------------------------------

/// rmsnorm over (R, C) rows (the block norm: (N, D); QK-norm: (N*NH, hs)).
void rmsnorm(benchmark::State& st, int R, int C, bool backward) {
  auto x = rand_buf(std::size_t(R) * C, 31), dy = rand_buf(std::size_t(R) * C, 32), w = rand_buf(std::size_t(C), 33);
  AlignedVector<float> y(std::size_t(R) * C), rstd(static_cast<std::size_t>(R)), dx(std::size_t(R) * C, 0.f), dw(std::size_t(C), 0.f);
  auto fwd = [&] { rmsnorm_forward(smat(y.data(), R, C), vec(rstd.data(), R), csmat(x.data(), R, C), cvec(w.data(), C), 1e-6f); };
  fwd();
  for (auto _ : st) {
    if (backward)
      rmsnorm_backward(smat(dx.data(), R, C), vec(dw.data(), C), csmat(dy.data(), R, C), csmat(x.data(), R, C), cvec(w.data(), C),
                       cvec(rstd.data(), R));
    else fwd();
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  const double RC = double(R) * C;
  // forward: read x, write y and rstd; backward: read dy, x, rstd, read+write dx (accumulated), dw
  set_gbytes(st, sizeof(float) * (backward ? 4.0 * RC + R + 3.0 * C : 2.0 * RC + R + C));
}

void rope(benchmark::State& st, const Cfg& c, bool backward) {
  const int N = c.N(), QD = c.QD(), hs = c.hs();
  const RopeTable<float> tab(c.T, hs, 10000.0);
  std::vector<int> pos(static_cast<std::size_t>(N));
  for (int i = 0; i < N; ++i) pos[std::size_t(i)] = i % c.T;
  auto x = rand_buf(std::size_t(N) * QD, 41);
  AlignedVector<float> y(std::size_t(N) * QD, 0.f);
  for (auto _ : st) {
    if (backward) rope_backward(smat(y.data(), N, QD), csmat(x.data(), N, QD), pos.data(), tab.view(), c.NH);
    else rope_forward(smat(y.data(), N, QD), csmat(x.data(), N, QD), pos.data(), tab.view(), c.NH);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  // forward: read x, write y; backward: read dy, read+write dx; plus the cos/sin tables (T, hs/2) each
  set_gbytes(st, sizeof(float) * ((backward ? 3.0 : 2.0) * N * QD + double(c.T) * hs));
}

void swiglu(benchmark::State& st, const Cfg& c, bool backward) {
  const int N = c.N(), F = c.F;
  const std::size_t NF = std::size_t(N) * F;
  auto g = rand_buf(NF, 51, 3.0), u = rand_buf(NF, 52), dh = rand_buf(NF, 53);
  AlignedVector<float> h(NF), dg(NF, 0.f), du(NF, 0.f);
  for (auto _ : st) {
    if (backward)
      swiglu_backward(smat(dg.data(), N, F), smat(du.data(), N, F), csmat(dh.data(), N, F), csmat(g.data(), N, F), csmat(u.data(), N, F));
    else swiglu_forward(smat(h.data(), N, F), csmat(g.data(), N, F), csmat(u.data(), N, F));
    benchmark::DoNotOptimize(h.data());
    benchmark::DoNotOptimize(dg.data());
    benchmark::ClobberMemory();
  }
  // forward: read g, u, write h; backward: read dh, g, u, read+write dg, du
  set_gbytes(st, sizeof(float) * (backward ? 7.0 : 3.0) * double(NF));
}

/// y = exp(x) on n floats in [-20, 4] (what the kernels see: softmax shifts are <= 0, sigmoids' -g small),
/// by Eigen's exp or by fbt::vexp (ops/vexp.hpp), the one the float kernels use.
void exp_bench(benchmark::State& st, bool fbt_exp) {
  const int n = 4096;
  auto x = rand_buf(std::size_t(n), 71, 12.0);
  for (auto& v : x) v -= 8.f;
  AlignedVector<float> y(static_cast<std::size_t>(n));
  using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
  Eigen::Map<const Arr, Eigen::Aligned64> X(x.data(), n);
  Eigen::Map<Arr, Eigen::Aligned64> Y(y.data(), n);
  for (auto _ : st) {
    if (fbt_exp) Y = vexp(X);
    else Y = X.exp();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.counters["Gexp/s"] = benchmark::Counter(n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void softmax_xent(benchmark::State& st, const Cfg& c, bool backward) {
  const int N = c.N(), V = c.V;
  auto logits = rand_buf(std::size_t(N) * V, 61, 4.0);
  AlignedVector<float> losses(static_cast<std::size_t>(N)), lse(static_cast<std::size_t>(N));
  std::vector<int> tgt(static_cast<std::size_t>(N));
  Rng r(62);
  for (auto& t : tgt) t = int(r.below(256));
  softmax_xent_forward(mat(logits.data(), N, V), vec(losses.data(), N), vec(lse.data(), N), tgt.data());
  // In place, repeated: forward turns its output (probabilities) into the softmax of those, which stays
  // finite; backward uses scale 1 (the step's 1/N would drive the buffer into denormals after a few calls,
  // and the kernel's cost does not depend on the scale).
  double total = 0.0;
  for (auto _ : st) {
    if (backward) softmax_xent_backward(mat(logits.data(), N, V), cvec(lse.data(), N), tgt.data(), 1.0);
    else total += softmax_xent_forward(mat(logits.data(), N, V), vec(losses.data(), N), vec(lse.data(), N), tgt.data());
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(total);
  // read + write the (N, V) buffer; targets read; forward writes losses and lse, backward reads lse
  set_gbytes(st, sizeof(float) * (2.0 * N * V + (backward ? 2.0 : 3.0) * N));
}

// ---- optimizer --------------------------------------------------------------------------------

/// One optimizer update of the whole bench_e2e model of config c (glu fuser), from fixed gradients:
/// AdamW over every tensor, or the grouped step (Muon / NorMuon for the matrices, AdamW for the rest).
/// GFLOP/s counts Newton-Schulz's products (per matrix (R, C), s = min(R, C), l = max(R, C), per
/// iteration: X X^T 2 s^2 l, A A 2 s^3, B X 2 s^2 l); AdamW has none.
void optimizer_update(benchmark::State& st, const Cfg& c, const std::string& opt) {
  ModelConfig mc;
  mc.vocab_size = c.V, mc.hidden_size = c.D, mc.num_hidden_layers = c.L, mc.num_attention_heads = c.NH, mc.num_key_value_heads = c.NKV;
  mc.intermediate_size = c.F, mc.max_position_embeddings = c.T;
  Model<float> m(mc, 1);
  const auto g = rand_buf(m.params.size(), 71, 1e-2);
  std::copy(g.begin(), g.end(), m.params.grads());
  AdamWConfig adam;
  MuonConfig muon;
  muon.variant = opt == "muon" ? MuonVariant::Muon : MuonVariant::NorMuon;
  MuonWorkspace<CpuBackend<float>> ws;
  auto run = [&] {
    if (opt == "adamw") adamw_update(m.params, adam, 1e-4);
    else grouped_update(m.params, adam, 1e-4, muon, 1e-4, ws);
  };
  run();  // allocates the moments, the row moments and the workspace outside the timing
  for (auto _ : st) {
    run();
    benchmark::DoNotOptimize(m.params.values());
    benchmark::ClobberMemory();
  }
  double flops = 0;
  if (opt != "adamw")
    for (const auto& s : m.params.specs())
      if (param_group(s) == ParamGroup::Matrix) {
        const double sm = double(std::min(s.shape[0], s.shape[1])), l = double(std::max(s.shape[0], s.shape[1]));
        flops += muon.ns_steps * (4.0 * sm * sm * l + 2.0 * sm * sm * sm);
      }
  set_gflops(st, flops);
  st.counters["params"] = double(m.params.size());
}

void register_all() {
  // the float products: the backend's choice, Eigen's, and (with oneDNN) oneDNN's whatever its kernel
  std::vector<std::pair<Fp32Gemm, std::string>> kernels = {{Fp32Gemm::automatic, "BM_Gemm"}, {Fp32Gemm::eigen, "BM_GemmEigen"}};
#if defined(FBT_HAVE_DNNL)
  kernels.push_back({Fp32Gemm::onednn, "BM_GemmOneDnn"});
#endif
  for (const auto& [k, name] : kernels)
    for (const bool tb : {false, true})
      reg(name + "/sgemm_1024_" + (tb ? "nt" : "nn"), [tb, k = k](benchmark::State& st) { gemm_f32(st, square(1024, tb), k); });
#if defined(__x86_64__)
  reg("BM_Peak/clock", core_clock);
#endif
  reg("BM_Peak/fp32_fma", fp32_fma_peak);
#if defined(__AVX512BF16__)
  reg("BM_Peak/bf16_dot", bf16_dp_peak);
#endif
  for (const bool tb : {false, true})  // bf16 operands, neither a weight: both converted on every call
    reg(std::string("BM_GemmBf16/gemm_1024_") + (tb ? "nt" : "nn"),
        [tb](benchmark::State& st) { gemm_bf16_bench(st, 1024, 1024, 1024, false, tb, false, false); });
#if defined(FBT_BENCH_MKL)
  for (const bool tb : {false, true}) {  // MKL's: float, and bf16 with both operands converted on every call
    const std::string nt = tb ? "nt" : "nn";
    reg("BM_GemmMkl/sgemm_1024_" + nt, [tb](benchmark::State& st) { mkl_gemm(st, square(1024, tb)); });
    reg("BM_GemmMklBf16/gemm_1024_" + nt, [tb](benchmark::State& st) { mkl_gemm_bf16(st, square(1024, tb)); });
  }
#endif
  reg("BM_Exp/eigen", [](benchmark::State& st) { exp_bench(st, false); });
  reg("BM_Exp/vexp", [](benchmark::State& st) { exp_bench(st, true); });
  for (const Cfg& c : kConfigs) {
    const std::string cf = c.name;
    const int N = c.N(), D = c.D;
    // the step's products by each float kernel, in bf16, and by MKL (a peer, in a build that found it)
    for (const StepProduct& p : step_products(c)) {
      for (const auto& [k, name] : kernels) reg(name + "/" + cf + "/" + p.name, [p, k = k](benchmark::State& st) { gemm_f32(st, p, k); });
      reg("BM_GemmBf16/" + cf + "/" + p.name, [p](benchmark::State& st) { gemm_bf16_bench(st, p.M, p.N, p.K, p.tA, p.tB, p.acc, p.weight); });
#if defined(FBT_BENCH_MKL)
      reg("BM_GemmMkl/" + cf + "/" + p.name, [p](benchmark::State& st) { mkl_gemm(st, p); });
      reg("BM_GemmMklBf16/" + cf + "/" + p.name, [p](benchmark::State& st) { mkl_gemm_bf16(st, p); });
#endif
    }
    // forward and backward of each kernel side by side
    const std::string dir[2] = {"forward", "backward"}, fb[2] = {"fwd", "bwd"};
    for (const bool b : {false, true}) reg("BM_Attention/" + cf + "/" + dir[b], [c, b](benchmark::State& st) { attention(st, c, b); });
    for (const bool b : {false, true}) reg("BM_Fuser/" + cf + "/glu_" + dir[b], [c, b](benchmark::State& st) { fuser_glu(st, c, b); });
    for (const bool b : {false, true}) reg("BM_RMSNorm/" + cf + "/" + fb[b], [=](benchmark::State& st) { rmsnorm(st, N, D, b); });
    for (const bool b : {false, true})
      reg("BM_RMSNorm/" + cf + "/qk_" + fb[b], [=](benchmark::State& st) { rmsnorm(st, N * c.NH, c.hs(), b); });
    for (const bool b : {false, true}) reg("BM_RoPE/" + cf + "/" + fb[b], [c, b](benchmark::State& st) { rope(st, c, b); });
    for (const bool b : {false, true}) reg("BM_SwiGLU/" + cf + "/" + fb[b], [c, b](benchmark::State& st) { swiglu(st, c, b); });
    for (const bool b : {false, true}) reg("BM_SoftmaxXent/" + cf + "/" + fb[b], [c, b](benchmark::State& st) { softmax_xent(st, c, b); });
    for (const char* o : {"adamw", "muon", "normuon"})
      reg("BM_Optimizer/" + cf + "/" + o, [c, o](benchmark::State& st) { optimizer_update(st, c, o); });
  }
}

}  // namespace

int main(int argc, char** argv) {
#if defined(FBT_BENCH_MKL)
  mkl_set_threading_layer(MKL_THREADING_SEQUENTIAL);  // one thread, like every product here (before MKL's first call)
#endif
  register_all();
  // a shorter default min time (a per-benchmark MinTime() would override the flag and rename every benchmark)
  std::vector<char*> args(argv, argv + argc);
  bool has_min_time = false;
  for (int i = 1; i < argc; ++i) has_min_time |= std::string(argv[i]).rfind("--benchmark_min_time", 0) == 0;
  std::string min_time = kDefaultMinTime;
  if (!has_min_time) args.insert(args.begin() + 1, &min_time[0]);
  int n = int(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
