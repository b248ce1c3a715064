// tests/cuda/test_gpu.cu: the CUDA path against the CPU path, on a GPU.
//
//   Kernels      each launcher of include/fbt/cuda/kernels.cuh and gemm.cuh against its CPU kernel
//                (fbt/ops/) on fresh random inputs; outputs that a kernel writes are poisoned with NaN
//                first (so an element left unwritten fails), outputs it accumulates into start from
//                random values on both sides. Relative error max|gpu - cpu| / max|cpu|: fp32 < 1e-4,
//                bf16 (and TF32) products < 1e-2; the jitter must be bit-identical.
//   Backend      the reductions CudaBackend returns to the host (sum of the losses, sums of squares, the
//                masked sums of the diagnostics) against CpuBackend<float>.
//   Step         the library's K-pass step on fbt::BackendModel<M, CudaBackend> (losses, diagnostics, every
//                gradient) for every fuser and chain knob, a middle-layer tap and a heterogeneous stack,
//                against the CPU step in double from the same weights (< 1e-4); in bf16 mode the losses
//                (< 1e-2). AdamW, Muon / NorMuon (the grouped step) and clipping.
//   Decoding     fbt::Decoder<M, CudaBackend>: prefill/step logits and greedy tokens equal to the CPU
//                Decoder's, in every mode.
//   Op table     every op of the backend contract (tests/common/backend_ops.hpp, the table the CPU and the
//                host stand-in run in tests/ops/test_backend_ops.cpp) on CudaBackend against CpuBackend<double>.
// Every test needing a device calls GTEST_SKIP when none is present (CI: nvcc but no GPU), so the
// binary builds and passes there; the error-reporting tests run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <common/backend_ops.hpp>

#include "engine_checks.hpp"
#include "fbt/backend/cpu.hpp"
#include "fbt/cuda/cuda.cuh"
#include "fbt/ops/activations.hpp"
#include "fbt/ops/attention.hpp"
#include "fbt/ops/embedding.hpp"
#include "fbt/ops/gemm.hpp"
#include "fbt/ops/linear.hpp"
#include "fbt/ops/rmsnorm.hpp"
#include "fbt/ops/rope.hpp"
#include "fbt/ops/shift.hpp"
#include "fbt/ops/softmax_xent.hpp"

namespace fc = fbt::cuda;
using fbt_test::rel_err;

// CudaBackend provides what the built-in block and fusers call (layers/contract.hpp), checked at compile time
static_assert(fbt::check_block<fbt::DecoderBlock<float>, fc::CudaBackend>(), "");
static_assert(fbt::check_fuser<fbt::GluFuser<float>, fc::CudaBackend>() && fbt::check_fuser<fbt::GatedAddFuser<float>, fc::CudaBackend>() &&
                  fbt::check_fuser<fbt::ConcatFuser<float>, fc::CudaBackend>(),
              "");

namespace {

constexpr double kFp32 = 1e-4, kBf16 = 1e-2;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fc::device_available()) GTEST_SKIP() << fc::no_device_reason() << " (the CUDA path is compiled; these checks need a GPU)";
  }
};

std::vector<float> randn(std::size_t n, std::uint64_t seed, double sd = 1.0, double mean = 0.0) {
  fbt::Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(r.normal(mean, sd));
  return v;
}

/// A device copy of a host vector (or n poisoned elements), read back with get().
template <class T> struct Dev {
  fc::DeviceBuffer<T> b;
  explicit Dev(const std::vector<T>& h) : b(h.size()) { FBT_CUDA_CHECK(cudaMemcpy(b.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  explicit Dev(std::size_t n) : b(n) { FBT_CUDA_CHECK(cudaMemset(b.data(), 0xFF, n * sizeof(T))); }  // NaN for floats
  T* p() { return b.data(); }
  std::vector<T> get() {
    FBT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(b.size());
    FBT_CUDA_CHECK(cudaMemcpy(h.data(), b.data(), h.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

double err(const std::vector<float>& gpu, const std::vector<float>& cpu) { return rel_err(gpu.data(), cpu.data(), cpu.size()); }

}  // namespace

// ------------------------------------------------------------------------------- error reporting

TEST(CudaCheck, FailingCudaCallThrowsNamingTheCallAndTheMessage) {
  // runs with or without a device: without one the call fails for lack of a driver, with one for the
  // device number (cudaErrorInvalidDevice: not a sticky error, the context stays usable)
  try {
    FBT_CUDA_CHECK(cudaSetDevice(9999));
    FAIL() << "no exception";
  } catch (const fbt::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cudaSetDevice(9999)"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaError"), std::string::npos) << m;  // the CUDA error name, then its message
    EXPECT_NE(m.find("test_gpu.cu"), std::string::npos) << m;
  }
  cudaGetLastError();
}

TEST(CudaCheck, FailingCublasCallThrowsNamingTheCallAndTheStatus) {
  try {
    FBT_CUBLAS_CHECK(cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, 1, nullptr, 1, nullptr, nullptr, 1));
    FAIL() << "no exception";
  } catch (const fbt::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cublasSgemm"), std::string::npos) << m;
    EXPECT_NE(m.find("CUBLAS_STATUS_"), std::string::npos) << m;
  }
}

TEST(CudaDevice, BackendNeedsADeviceAndSaysWhy) {
  // runs everywhere: without a device the backend refuses to start, naming the reason; with one it starts
  if (fc::device_available()) {
    fc::CudaBackend be;
    EXPECT_EQ(be.gemm_mode(), fc::GemmMode::fp32);
    EXPECT_EQ(std::string(fc::CudaBackend::name), "cuda");
  } else {
    try {
      fc::CudaBackend be;
      FAIL() << "no exception without a device";
    } catch (const fbt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
  }
}

// --------------------------------------------------------------------------------------- kernels

TEST_F(Gpu, GemmFp32Tf32Bf16MatchCpu) {
  const long M = 37, N = 70, K = 129;
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB)
      for (int acc = 0; acc < 2; ++acc) {
        // strided operands: a block of a wider matrix, as the fuser's halves are
        const long lda = (tA ? M : K) + 3, ldb = (tB ? K : N) + 5, ldc = N + 2;
        auto A = randn((tA ? K : M) * lda, 1), B = randn((tB ? N : K) * ldb, 2), C0 = randn(M * ldc, 3);
        std::vector<float> ref = C0;
        fbt::gemm(fbt::smat(ref.data(), M, N, ldc), fbt::csmat(A.data(), tA ? K : M, tA ? M : K, lda), tA,
                  fbt::csmat(B.data(), tB ? N : K, tB ? K : N, ldb), tB, acc);
        for (auto mode : {fc::GemmMode::fp32, fc::GemmMode::tf32, fc::GemmMode::bf16}) {
          Dev<float> a(A), b(B), c(C0);
          if (!acc) FBT_CUDA_CHECK(cudaMemset(c.p(), 0xFF, C0.size() * sizeof(float)));  // beta = 0 must not read C
          fc::GemmEngine g(nullptr, mode);
          g(c.p(), ldc, a.p(), lda, tA, b.p(), ldb, tB, M, N, K, acc);
          auto out = c.get();
          // compare the (M, N) block only (the padding columns are untouched)
          std::vector<float> o2, r2;
          for (long i = 0; i < M; ++i)
            for (long j = 0; j < N; ++j) o2.push_back(out[i * ldc + j]), r2.push_back(ref[i * ldc + j]);
          EXPECT_LT(err(o2, r2), mode == fc::GemmMode::fp32 ? kFp32 : kBf16) << fc::gemm_mode_name(mode) << " tA=" << tA << " tB=" << tB << " acc=" << acc;
        }
      }
}

TEST_F(Gpu, GemmBf16OperandsMatchCpu) {
  const long M = 64, N = 48, K = 96;
  auto A = randn(M * K, 4), B = randn(N * K, 5);
  std::vector<float> ref(M * N);
  fbt::gemm(fbt::smat(ref.data(), M, N), fbt::csmat(A.data(), M, K), false, fbt::csmat(B.data(), N, K), true, false);
  std::vector<__nv_bfloat16> a16(A.size()), b16(B.size());
  for (std::size_t i = 0; i < A.size(); ++i) a16[i] = __float2bfloat16(A[i]);
  for (std::size_t i = 0; i < B.size(); ++i) b16[i] = __float2bfloat16(B[i]);
  Dev<__nv_bfloat16> a(a16), b(b16);
  Dev<float> c((std::size_t(M * N)));
  fc::Blas blas;
  fc::gemm_bf16(blas, c.p(), N, a.p(), K, false, b.p(), K, true, M, N, K, false);
  EXPECT_LT(err(c.get(), ref), kBf16);
}

TEST_F(Gpu, RmsnormForwardBackwardMatchCpu) {
  for (auto [R, C] : {std::pair<int, int>{37, 72}, {300, 16}, {5, 768}, {1, 4}}) {
    auto x = randn(std::size_t(R) * C, 10, 1.5), w = randn(C, 11, 0.2, 1.0), dy = randn(std::size_t(R) * C, 12);
    std::vector<float> out(x.size()), rstd(R);
    fbt::rmsnorm_forward(fbt::smat(out.data(), R, C), fbt::vec(rstd.data(), R), fbt::csmat(x.data(), R, C), fbt::cvec(w.data(), C), 1e-6f);
    Dev<float> dx(x), dw(w), dout(out.size()), drstd((std::size_t(R)));
    fc::rmsnorm_forward(dout.p(), drstd.p(), dx.p(), dw.p(), R, C, 1e-6f, nullptr);
    EXPECT_LT(err(dout.get(), out), kFp32) << R << "x" << C;
    EXPECT_LT(err(drstd.get(), rstd), kFp32) << R << "x" << C;
    // backward accumulates into random dinp, dw
    auto din0 = randn(x.size(), 13), dw0 = randn(C, 14);
    std::vector<float> din = din0, dwr = dw0;
    fbt::rmsnorm_backward(fbt::smat(din.data(), R, C), fbt::vec(dwr.data(), C), fbt::csmat(dy.data(), R, C), fbt::csmat(x.data(), R, C),
                          fbt::cvec(w.data(), C), fbt::cvec(rstd.data(), R));
    Dev<float> gdin(din0), gdw(dw0), gdy(dy);
    fc::rmsnorm_backward(gdin.p(), gdw.p(), gdy.p(), dx.p(), dw.p(), drstd.p(), R, C, nullptr);
    EXPECT_LT(err(gdin.get(), din), kFp32) << R << "x" << C;
    EXPECT_LT(err(gdw.get(), dwr), kFp32) << R << "x" << C;
    // null dw: skipped
    Dev<float> gdin2(din0);
    fc::rmsnorm_backward(gdin2.p(), static_cast<float*>(nullptr), gdy.p(), dx.p(), dw.p(), drstd.p(), R, C, nullptr);
    EXPECT_LT(err(gdin2.get(), din), kFp32);
  }
}

TEST_F(Gpu, RopeForwardBackwardMatchCpu) {
  const int R = 29, NH = 3, hs = 16, maxp = 64;
  fbt::RopeTable<float> tab(maxp, hs, 10000.0);
  auto x = randn(std::size_t(R) * NH * hs, 20), dy = randn(x.size(), 21), d0 = randn(x.size(), 22);
  std::vector<int> pos(R);
  for (int n = 0; n < R; ++n) pos[n] = (n * 7) % maxp;
  std::vector<float> out(x.size()), din = d0;
  fbt::rope_forward(fbt::smat(out.data(), R, NH * hs), fbt::csmat(x.data(), R, NH * hs), pos.data(), tab.view(), NH);
  fbt::rope_backward(fbt::smat(din.data(), R, NH * hs), fbt::csmat(dy.data(), R, NH * hs), pos.data(), tab.view(), NH);
  Dev<float> c(tab.cos_), s(tab.sin_), gx(x), go(x.size()), gdy(dy), gd(d0);
  Dev<int> gp(pos);
  const fbt::RopeView<float> dtab{c.p(), s.p(), maxp, hs / 2};  // the tables in device memory
  fc::rope_forward(go.p(), gx.p(), gp.p(), dtab, R, NH, nullptr);
  EXPECT_LT(err(go.get(), out), kFp32);
  fc::rope_forward(gx.p(), gx.p(), gp.p(), dtab, R, NH, nullptr);  // in place
  EXPECT_LT(err(gx.get(), out), kFp32);
  fc::rope_backward(gd.p(), gdy.p(), gp.p(), dtab, R, NH, nullptr);
  EXPECT_LT(err(gd.get(), din), kFp32);
}

TEST_F(Gpu, AttentionForwardBackwardMatchCpu) {
  struct Case {
    int B, T, NH, NKV, hs;
    bool docs;
  };
  for (const Case& c : {Case{2, 45, 4, 2, 16, true}, Case{1, 100, 2, 1, 64, true}, Case{3, 1, 2, 2, 8, false}, Case{1, 70, 2, 2, 128, true},
                        Case{2, 33, 6, 3, 80, false}, Case{1, 64, 2, 1, 32, true}}) {
    SCOPED_TRACE("B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " NH=" + std::to_string(c.NH) + " NKV=" + std::to_string(c.NKV) +
                 " hs=" + std::to_string(c.hs));
    const int N = c.B * c.T, QD = c.NH * c.hs, KD = c.NKV * c.hs;
    auto q = randn(std::size_t(N) * QD, 30), k = randn(std::size_t(N) * KD, 31), v = randn(std::size_t(N) * KD, 32);
    auto dout = randn(std::size_t(N) * QD, 33);
    std::vector<int> first(N);
    fbt::Rng rng(34);
    for (int b = 0; b < c.B; ++b) {
      int start = 0;
      for (int t = 0; t < c.T; ++t) {
        if (c.docs && t > 0 && rng.below(9) == 0) start = t;
        first[std::size_t(b) * c.T + t] = start;
      }
    }
    const fbt::AttnShape sh{c.B, c.T, c.NH, c.NKV, c.hs};
    // the CPU's out, logsumexp and backward scratch (B, NH, T)
    std::vector<float> out(std::size_t(N) * QD), lse_cpu(std::size_t(c.B) * c.NH * c.T), Dt(std::size_t(c.B) * c.NH * c.T);
    fbt::attention_forward(fbt::smat(out.data(), N, QD), lse_cpu.data(), fbt::csmat(q.data(), N, QD), fbt::csmat(k.data(), N, KD),
                           fbt::csmat(v.data(), N, KD), first.data(), sh);
    // reference logsumexp of the scaled scores, in double
    std::vector<float> lse(std::size_t(c.B) * c.NH * c.T);
    const double scale = 1.0 / std::sqrt(double(c.hs));
    for (int b = 0; b < c.B; ++b)
      for (int h = 0; h < c.NH; ++h)
        for (int i = 0; i < c.T; ++i) {
          const int kh = h / (c.NH / c.NKV);
          double mx = -INFINITY;
          std::vector<double> s;
          for (int j = first[std::size_t(b) * c.T + i]; j <= i; ++j) {
            double a = 0;
            for (int d = 0; d < c.hs; ++d) a += double(q[(std::size_t(b) * c.T + i) * QD + h * c.hs + d]) * k[(std::size_t(b) * c.T + j) * KD + kh * c.hs + d];
            s.push_back(a * scale), mx = std::max(mx, a * scale);
          }
          double sum = 0;
          for (double x : s) sum += std::exp(x - mx);
          lse[(std::size_t(b) * c.NH + h) * c.T + i] = float(mx + std::log(sum));
        }
    Dev<float> gq(q), gk(k), gv(v), go(out.size()), gl(lse.size()), gdo(dout);
    Dev<int> gf(first);
    fc::attention_forward(go.p(), gl.p(), gq.p(), gk.p(), gv.p(), gf.p(), c.B, c.T, c.NH, c.NKV, c.hs, nullptr);
    EXPECT_LT(err(go.get(), out), kFp32);
    EXPECT_LT(err(gl.get(), lse), kFp32);
    // backward accumulates into random dq, dk, dv
    auto dq0 = randn(q.size(), 35), dk0 = randn(k.size(), 36), dv0 = randn(v.size(), 37);
    std::vector<float> dq = dq0, dk = dk0, dv = dv0;
    fbt::attention_backward(fbt::smat(dq.data(), N, QD), fbt::smat(dk.data(), N, KD), fbt::smat(dv.data(), N, KD), Dt.data(),
                            fbt::csmat(dout.data(), N, QD), fbt::csmat(out.data(), N, QD), lse_cpu.data(), fbt::csmat(q.data(), N, QD),
                            fbt::csmat(k.data(), N, KD), fbt::csmat(v.data(), N, KD), first.data(), sh);
    Dev<float> gdq(dq0), gdk(dk0), gdv(dv0), gD(std::size_t(N) * c.NH);
    fc::attention_backward(gdq.p(), gdk.p(), gdv.p(), gD.p(), gdo.p(), go.p(), gl.p(), gq.p(), gk.p(), gv.p(), gf.p(), c.B, c.T, c.NH, c.NKV, c.hs,
                           nullptr);
    EXPECT_LT(err(gdq.get(), dq), kFp32);
    EXPECT_LT(err(gdk.get(), dk), kFp32);
    EXPECT_LT(err(gdv.get(), dv), kFp32);
  }
}

TEST_F(Gpu, AttentionDecodeMatchesCpu) {
  const int L = 2, NH = 4, NKV = 2, hs = 32, KD = NKV * hs, QD = NH * hs;
  const std::vector<int> caps{40, 17}, lens{33, 1};
  std::vector<fc::DeviceBuffer<float>> kc, vc;
  std::vector<std::vector<float>> hk, hv;
  for (int r = 0; r < 2; ++r) {
    hk.push_back(randn(std::size_t(L) * caps[r] * KD, 40 + r)), hv.push_back(randn(std::size_t(L) * caps[r] * KD, 50 + r));
    kc.emplace_back(hk[r].size()), vc.emplace_back(hv[r].size());
    FBT_CUDA_CHECK(cudaMemcpy(kc[r].data(), hk[r].data(), hk[r].size() * 4, cudaMemcpyHostToDevice));
    FBT_CUDA_CHECK(cudaMemcpy(vc[r].data(), hv[r].data(), hv[r].size() * 4, cudaMemcpyHostToDevice));
  }
  auto q = randn(std::size_t(2) * QD, 60);
  const int layer = 1;
  std::vector<float> ref(std::size_t(2) * QD), scores(64);
  for (int r = 0; r < 2; ++r)
    fbt::attention_decode(ref.data() + r * QD, scores.data(), q.data() + r * QD, hk[r].data() + std::size_t(layer) * caps[r] * KD,
                          hv[r].data() + std::size_t(layer) * caps[r] * KD, lens[r], NH, NKV, hs);
  // per-row cache pointers already offset to the layer (what the decoder hands the backend)
  auto at = [&](fc::DeviceBuffer<float>& b, int r) { return b.data() + std::size_t(layer) * caps[r] * KD; };
  Dev<float*> pk(std::vector<float*>{at(kc[0], 0), at(kc[1], 1)}), pv(std::vector<float*>{at(vc[0], 0), at(vc[1], 1)});
  Dev<int> l1(lens);
  Dev<float> gq(q), go(ref.size());
  fc::attention_decode(go.p(), gq.p(), pk.p(), pv.p(), l1.p(), 33, 2, NH, NKV, hs, nullptr);
  EXPECT_LT(err(go.get(), ref), kFp32);
  // kv_append writes row r at position pos[r] of its layer's cache
  auto k = randn(std::size_t(2) * KD, 61), v = randn(std::size_t(2) * KD, 62);
  const std::vector<int> pos{5, 16};
  Dev<float> gk(k), gv(v);
  Dev<int> gp(pos);
  fc::kv_append(pk.p(), pv.p(), gk.p(), gv.p(), gp.p(), 2, KD, nullptr);
  FBT_CUDA_CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < 2; ++r) {
    std::vector<float> hk2(hk[r].size()), hv2(hv[r].size());
    FBT_CUDA_CHECK(cudaMemcpy(hk2.data(), kc[r].data(), hk2.size() * 4, cudaMemcpyDeviceToHost));
    FBT_CUDA_CHECK(cudaMemcpy(hv2.data(), vc[r].data(), hv2.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<float> ek = hk[r], ev = hv[r];
    std::copy(k.begin() + r * KD, k.begin() + (r + 1) * KD, ek.begin() + (std::size_t(layer) * caps[r] + pos[r]) * KD);
    std::copy(v.begin() + r * KD, v.begin() + (r + 1) * KD, ev.begin() + (std::size_t(layer) * caps[r] + pos[r]) * KD);
    EXPECT_EQ(hk2, ek) << "row " << r;
    EXPECT_EQ(hv2, ev) << "row " << r;
  }
}

TEST_F(Gpu, ElementwiseKernelsMatchCpu) {
  const int R = 19, C = 77;
  const std::size_t n = std::size_t(R) * C;
  auto g = randn(n, 70, 2.0), u = randn(n, 71), dh = randn(n, 72), a0 = randn(n, 73), b0 = randn(n, 74);
  // swiglu
  std::vector<float> h(n), dg = a0, du = b0;
  fbt::swiglu_forward(fbt::smat(h.data(), R, C), fbt::csmat(g.data(), R, C), fbt::csmat(u.data(), R, C));
  fbt::swiglu_backward(fbt::smat(dg.data(), R, C), fbt::smat(du.data(), R, C), fbt::csmat(dh.data(), R, C), fbt::csmat(g.data(), R, C),
                       fbt::csmat(u.data(), R, C));
  Dev<float> G(g), U(u), DH(dh), H(n), DG(a0), DU(b0);
  fc::swiglu_forward(H.p(), G.p(), U.p(), n, nullptr);
  fc::swiglu_backward(DG.p(), DU.p(), DH.p(), G.p(), U.p(), n, nullptr);
  EXPECT_LT(err(H.get(), h), kFp32);
  EXPECT_LT(err(DG.get(), dg), kFp32);
  EXPECT_LT(err(DU.get(), du), kFp32);
  // sigmoid gate (and a null da)
  std::vector<float> y(n), da = a0, dz = b0, dz2 = b0;
  fbt::sigmoid_gate_forward(fbt::smat(y.data(), R, C), fbt::csmat(u.data(), R, C), fbt::csmat(g.data(), R, C));
  fbt::sigmoid_gate_backward(fbt::smat(da.data(), R, C), fbt::smat(dz.data(), R, C), fbt::csmat(dh.data(), R, C), fbt::csmat(u.data(), R, C),
                             fbt::csmat(g.data(), R, C));
  Dev<float> Y(n), DA(a0), DZ(b0), DZ2(b0);
  fc::sigmoid_gate_forward(Y.p(), U.p(), G.p(), n, nullptr);
  fc::sigmoid_gate_backward(DA.p(), DZ.p(), DH.p(), U.p(), G.p(), n, nullptr);
  fc::sigmoid_gate_backward(static_cast<float*>(nullptr), DZ2.p(), DH.p(), U.p(), G.p(), n, nullptr);
  EXPECT_LT(err(Y.get(), y), kFp32);
  EXPECT_LT(err(DA.get(), da), kFp32);
  EXPECT_LT(err(DZ.get(), dz), kFp32);
  EXPECT_LT(err(DZ2.get(), dz), kFp32);
  // shift_right (B 3 x T 5 of C 7)
  const int B = 3, T = 5, C7 = 7;
  auto s_in = randn(std::size_t(B) * T * C7, 75), s_d0 = randn(s_in.size(), 76);
  std::vector<float> s_out(s_in.size()), s_d = s_d0;
  fbt::shift_right_forward(fbt::smat(s_out.data(), B * T, C7), fbt::csmat(s_in.data(), B * T, C7), B, T);
  fbt::shift_right_backward(fbt::smat(s_d.data(), B * T, C7), fbt::csmat(s_in.data(), B * T, C7), B, T);
  Dev<float> SI(s_in), SO(s_in.size()), SD(s_d0);
  fc::shift_right_forward(SO.p(), SI.p(), B, T, C7, nullptr);
  fc::shift_right_backward(SD.p(), SI.p(), B, T, C7, nullptr);
  EXPECT_LT(err(SO.get(), s_out), kFp32);
  EXPECT_LT(err(SD.get(), s_d), kFp32);
  // bias
  auto bias = randn(C, 77);
  std::vector<float> bo = a0, db = randn(C, 78), db0 = db;
  fbt::bias_forward(fbt::smat(bo.data(), R, C), fbt::cvec(bias.data(), C));
  fbt::bias_backward(fbt::vec(db.data(), C), fbt::csmat(dh.data(), R, C));
  Dev<float> BO(a0), BI(bias), DB(db0);
  fc::bias_forward(BO.p(), BI.p(), R, C, nullptr);
  fc::bias_backward(DB.p(), DH.p(), R, C, nullptr);
  EXPECT_LT(err(BO.get(), bo), kFp32);
  EXPECT_LT(err(DB.get(), db), kFp32);
}

TEST_F(Gpu, EmbeddingAndSoftmaxXentMatchCpu) {
  const int N = 53, V = 257, C = 24;
  fbt::Rng rng(80);
  std::vector<int> tok(N), tgt(N);
  for (int n = 0; n < N; ++n) tok[n] = int(rng.below(9)), tgt[n] = n % 11 == 0 ? -1 : int(rng.below(V));  // repeated tokens
  auto E = randn(std::size_t(V) * C, 81), dout = randn(std::size_t(N) * C, 82), dE0 = randn(E.size(), 83);
  std::vector<float> emb(std::size_t(N) * C), dE = dE0;
  fbt::embedding_forward(fbt::smat(emb.data(), N, C), tok.data(), fbt::csmat(E.data(), V, C));
  fbt::embedding_backward(fbt::smat(dE.data(), V, C), fbt::csmat(dout.data(), N, C), tok.data());
  Dev<int> T(tok), Y(tgt);
  Dev<float> GE(E), GO(emb.size()), GD(dout), GdE(dE0);
  fc::embedding_forward(GO.p(), T.p(), GE.p(), N, C, nullptr);
  fc::embedding_backward(GdE.p(), GD.p(), T.p(), N, C, nullptr);
  EXPECT_LT(err(GO.get(), emb), kFp32);
  EXPECT_LT(err(GdE.get(), dE), kFp32);
  for (double z : {0.0, 1e-3}) {
    auto logits = randn(std::size_t(N) * V, 84, 3.0);
    std::vector<float> probs = logits, losses(N), lse(N);
    fbt::softmax_xent_forward(fbt::mat(probs.data(), N, V), fbt::vec(losses.data(), N), fbt::vec(lse.data(), N), tgt.data(), z);
    Dev<float> L(logits), GL((std::size_t(N))), GS((std::size_t(N)));
    fc::softmax_xent_forward(L.p(), GL.p(), GS.p(), Y.p(), N, V, z, nullptr);
    EXPECT_LT(err(L.get(), probs), kFp32) << "z=" << z;
    EXPECT_LT(err(GL.get(), losses), kFp32) << "z=" << z;
    EXPECT_LT(err(GS.get(), lse), kFp32) << "z=" << z;
    fbt::softmax_xent_backward(fbt::mat(probs.data(), N, V), fbt::cvec(lse.data(), N), tgt.data(), 0.37, z);
    fc::softmax_xent_backward(L.p(), GS.p(), Y.p(), N, V, 0.37, z, nullptr);
    EXPECT_LT(err(L.get(), probs), kFp32) << "z=" << z;
  }
}

TEST_F(Gpu, AdamWTensorMatchesCpu) {
  fbt::ParamStore<float> ps;
  ps.add("w", {33, 17}, fbt::Init::Normal, 0.5);
  ps.add("g", {17}, fbt::Init::Ones);
  ps.finalize();
  ps.init(90);
  auto grads = randn(ps.size(), 91, 1e-2);
  std::copy(grads.begin(), grads.end(), ps.grads());
  Dev<float> P(std::vector<float>(ps.values(), ps.values() + ps.size())), G(grads), M(std::vector<float>(ps.size(), 0.f)),
      Vv(std::vector<float>(ps.size(), 0.f));
  fbt::AdamWConfig cfg;
  for (int t = 1; t <= 3; ++t) {
    fbt::adamw_update(ps, cfg, 1e-2);
    const double bc1 = 1.0 - std::pow(cfg.beta1, t), bc2 = 1.0 - std::pow(cfg.beta2, t);
    const fbt::AdamWRates<float> r{float(cfg.beta1), float(cfg.beta2), float(1 - cfg.beta1), float(1 - cfg.beta2), float(1 / bc1), float(1 / bc2),
                           float(cfg.eps), 1e-2f};
    for (const auto& s : ps.specs())
      fc::adamw_update_tensor(P.p() + s.offset, G.p() + s.offset, M.p() + s.offset, Vv.p() + s.offset, s.size, r,
                              float(s.decay ? cfg.weight_decay : 0.0), nullptr);
  }
  EXPECT_LT(err(P.get(), std::vector<float>(ps.values(), ps.values() + ps.size())), kFp32);
  EXPECT_LT(err(M.get(), std::vector<float>(ps.adam_m(), ps.adam_m() + ps.size())), kFp32);
  EXPECT_LT(err(Vv.get(), std::vector<float>(ps.adam_v(), ps.adam_v() + ps.size())), kFp32);
}

TEST_F(Gpu, JitterIsBitIdenticalToTheCpuDraws) {
  const int B = 3, rowlen = 1000, off = 5;
  const std::uint64_t seed = 0x1234567890ABCDEFull;
  auto src = randn(std::size_t(B) * rowlen, 95);
  std::vector<float> ref(src.size());
  for (int r = 0; r < B; ++r) {
    fbt::SplitMix64 rr(seed ^ (0xD1B54A32D192ED03ull * std::uint64_t(off + r + 1)));
    for (int i = 0; i < rowlen; ++i) ref[std::size_t(r) * rowlen + i] = src[std::size_t(r) * rowlen + i] + float(rr.uniform(-0.02, 0.02));
  }
  Dev<float> S(src), O(src.size());
  fc::jitter_add(O.p(), S.p(), seed, off, B, rowlen, 0.02, nullptr);
  const auto out = O.get();
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], ref[i]) << "element " << i;
}

TEST_F(Gpu, BackendReductionsMatchCpuBackend) {
  // what CudaBackend returns to the host: the loss sum, the sums of squares, the diagnostics' masked sums
  fc::CudaBackend be;
  fbt::CpuBackend<float> cpu;
  const int R = 37, C = 300, V = 129;
  auto x = randn(std::size_t(R) * C, 100), y = randn(std::size_t(R) * C, 101, 0.5, 0.3);
  std::vector<float> mask(R);
  for (int r = 0; r < R; ++r) mask[r] = r % 3 == 1 ? 0.f : 1.f;
  Dev<float> X(x), Y(y), Mk(mask);
  EXPECT_LT(rel_err(be.sum_squares(X.p(), x.size()), cpu.sum_squares(x.data(), x.size())), 1e-12);
  EXPECT_LT(rel_err(be.masked_sumsq(X.p(), Mk.p(), R, C), cpu.masked_sumsq(x.data(), mask.data(), R, C)), 1e-12);
  EXPECT_LT(rel_err(be.masked_diff_sumsq(X.p(), Y.p(), Mk.p(), R, C), cpu.masked_diff_sumsq(x.data(), y.data(), mask.data(), R, C)), 1e-12);
  const auto mg = be.masked_sigmoid_moments(X.p(), Mk.p(), R, C), mc = cpu.masked_sigmoid_moments(x.data(), mask.data(), R, C);
  EXPECT_LT(rel_err(mg.first, mc.first), 1e-12);
  EXPECT_LT(rel_err(mg.second, mc.second), 1e-12);
  // every row masked out: zero
  std::vector<float> none(R, 0.f);
  Dev<float> Mn(none);
  EXPECT_EQ(be.masked_sumsq(X.p(), Mn.p(), R, C), 0.0);
  // the loss sum (ignored targets add nothing)
  fbt::Rng rng(102);
  std::vector<int> tgt(R);
  for (int r = 0; r < R; ++r) tgt[r] = r % 5 == 0 ? -1 : int(rng.below(V));
  auto logits = randn(std::size_t(R) * V, 103, 2.0);
  std::vector<float> probs = logits, losses(R), lse(R);
  Dev<float> L(logits), GL((std::size_t(R))), GS((std::size_t(R)));
  Dev<int> T(tgt);
  const double sum_cpu = cpu.softmax_xent_forward(probs.data(), losses.data(), lse.data(), tgt.data(), R, V, 1e-3);
  const double sum_gpu = be.softmax_xent_forward(L.p(), GL.p(), GS.p(), T.p(), R, V, 1e-3);
  EXPECT_LT(rel_err(sum_gpu, sum_cpu), kFp32);
}

// ------------------------------------------------------------------------------ the whole step

TEST_F(Gpu, KPassStepMatchesCpuPath) {
  for (bool big : {false, true})
    for (const auto& cs : fbt_test::step_cases(big)) {
      SCOPED_TRACE(fbt_test::describe(cs.first, cs.second));
      double vs_cpu = 0;
      const auto w = fbt_test::compare_step<fc::CudaBackend>(cs.first, cs.second, &vs_cpu);
      EXPECT_LT(w.err, kFp32) << w.str();
      RecordProperty("err_vs_cpu_float_" + cs.first.fuser, std::to_string(vs_cpu));  // informative: both sides round in float
    }
  // a wider shape: hs 64, several 32-row tiles, GQA, documents
  fbt::ModelConfig c = fbt_test::tiny_config("glu");
  c.hidden_size = 128, c.num_attention_heads = 2, c.num_key_value_heads = 1, c.intermediate_size = 256, c.vocab_size = 257, c.num_hidden_layers = 3;
  c.max_position_embeddings = 256;
  fbt_test::StepCase s;
  s.B = 2, s.T = 150, s.sigma = 0.02;
  const auto w = fbt_test::compare_step<fc::CudaBackend>(c, s, nullptr);
  EXPECT_LT(w.err, kFp32) << fbt_test::describe(c, s) << ": " << w.str();
}

TEST_F(Gpu, KPassStepInBf16KeepsTheLossesWithinOnePercent) {
  for (const auto& cs : fbt_test::step_cases(true)) {
    const auto w = fbt_test::compare_step<fc::CudaBackend>(cs.first, cs.second, nullptr, fc::GemmMode::bf16);
    EXPECT_LT(w.loss_err, kBf16) << fbt_test::describe(cs.first, cs.second);
    RecordProperty("bf16_grad_err_" + cs.first.fuser, std::to_string(w.err));  // informative: bf16 operands in every product
  }
}

TEST_F(Gpu, AdamWAndClipMatchCpuPath) {
  for (const char* f : {"glu", "gated_add", "concat"}) {
    const auto w = fbt_test::compare_adamw<fc::CudaBackend>(fbt_test::tiny_config(f), 5);
    EXPECT_LT(w.err, kFp32) << f << ": " << w.str();
  }
}

TEST_F(Gpu, MuonAndNorMuonMatchCpuPath) {
  for (auto v : {fbt::MuonVariant::NorMuon, fbt::MuonVariant::Muon})
    for (const char* f : {"glu", "gated_add", "concat"}) {
      const auto w = fbt_test::compare_grouped<fc::CudaBackend>(fbt_test::tiny_config(f), v, 5);
      EXPECT_LT(w.err, kFp32) << f << (v == fbt::MuonVariant::Muon ? " muon: " : " normuon: ") << w.str();
    }
}

TEST_F(Gpu, DecodingMatchesCpuDecoderInEveryMode) {
  auto check = [&](fbt::ModelConfig c, const char* mode) {
    c.hidden_size = 32, c.intermediate_size = 48, c.vocab_size = 29;
    const auto w = fbt_test::compare_decode<fc::CudaBackend>(c, mode, 3);
    EXPECT_LT(w.err, kFp32) << fbt_test::describe(c) << " " << mode << ": " << w.str();
  };
  for (const char* f : {"glu", "gated_add", "concat"})
    for (const char* mode : {"standard", "soft", "fused(1)", "fused(2)"}) {
      check(fbt_test::tiny_config(f), mode);
      check(fbt_test::layer_tap_config(f), mode);
      check(fbt_test::hetero_config(f), mode);
    }
  auto c = fbt_test::tiny_config("none");
  c.vocab_size = 13;
  const auto w = fbt_test::compare_decode<fc::CudaBackend>(c, "standard", 4);
  EXPECT_LT(w.err, kFp32) << "baseline: " << w.str();
}

TEST_F(Gpu, DeviceDecoderGreedyTokensEqualTheCpuDecoder) {
  // the aliases of cuda/cuda.cuh, as a program uses them
  using M = fbt::Model<float>;
  fbt::ModelConfig c = fbt_test::tiny_config("glu");
  c.vocab_size = 31;
  M m(c, 9);
  fbt_test::randomize_scaled(m, 10);
  std::vector<fbt::Request> reqs(2);
  reqs[0].prompt = {1, 2, 3, 4}, reqs[1].prompt = {5, 6};
  reqs[0].opts.mode = fbt::DecodeModeSpec::parse("soft"), reqs[1].opts.mode = fbt::DecodeModeSpec::parse("fused(2)");
  reqs[0].opts.max_new_tokens = reqs[1].opts.max_new_tokens = 12;
  fc::DeviceModel<M> dm(m);
  fc::DeviceDecoder<M> gpu(dm, 30);
  fbt::Decoder<M> cpu(m, 30);
  EXPECT_EQ(fbt::generate_batch(gpu, reqs), fbt::generate_batch(cpu, reqs));
}

TEST_F(Gpu, EveryOpOfTheContractMatchesTheDoubleReference) {
  // the shared table (tests/common/backend_ops.hpp): the same cases and inputs as the CPU and the host stand-in
  static_assert(fbt::check_backend<fc::CudaBackend>(), "");
  const auto ref = fbt_test::op_cases<fbt::CpuBackend<double>>();
  const auto cases = fbt_test::op_cases<fc::CudaBackend>();
  ASSERT_EQ(cases.size(), ref.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    fbt::CpuBackend<double> rb;
    fc::CudaBackend be;
    const double e = fbt_test::op_error(cases[i].run(be), ref[i].run(rb));
    EXPECT_LT(e, std::max(cases[i].tol, kFp32)) << cases[i].name;
  }
}
