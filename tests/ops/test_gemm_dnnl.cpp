// tests/ops/test_gemm_dnnl.cpp: the float products through oneDNN (fbt/ops/gemm_dnnl.hpp), as the CPU
// backend runs them.
//
// Checks: the backend's float product against the product in double, per element within the bound of two
// float sums of the same K products ((K + 2) * 2^-23 * sum_k |a_k b_k|), for every transpose, accumulate,
// strided operands and outputs (a column past N is never written), thin and one-row shapes; that on an
// AVX-512 CPU with oneDNN it is oneDNN's product that ran (gemm_f32_impl, and a result that differs from
// Eigen's in some last bits on a long sum); that only oneDNN's brgemm kernel runs (another kernel leaves
// a shape to Eigen's); ScopedFp32Eigen gives Eigen's product bit for bit and is restored; ScopedFp32OneDnn
// runs oneDNN's whatever its kernel (its jit GEMM on an AVX2 CPU), within the same bound; two threads
// running products at once; empty products. Without oneDNN (or on a CPU where its
// float kernel is not the brgemm one) the same checks hold for Eigen's product.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "common/gradcheck.hpp"
#include "fbt/backend/cpu.hpp"
#include "fbt/ops/gemm_dnnl.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_gemm_dnnl {

using namespace fbt;
using fbt_test::randn_matrix;

namespace {

bool dnnl_runs() { return gemm_f32_impl(64, 64, 64).rfind("oneDNN", 0) == 0; }

/// C (M, N) (+)= op(A) op(B) through the backend, with row strides lda/ldb/ldc wider than the operands by
/// `pad`; checks it against the double product and that the padding columns of C were not written.
void check(long M, long N, long K, bool tA, bool tB, bool acc, long pad, std::uint64_t seed) {
  SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) + (tA ? " A^T" : "") + (tB ? " B^T" : "") +
               (acc ? " acc" : "") + " pad " + std::to_string(pad));
  const long ar = tA ? K : M, ac = tA ? M : K, br = tB ? N : K, bc = tB ? K : N;
  RowMat<float> A = randn_matrix(ar, ac + pad, seed), B = randn_matrix(br, bc + pad, seed + 1), C = randn_matrix(M, N + pad, seed + 2);
  const RowMat<float> C0 = C;
  CpuBackend<float>().gemm(C.data(), N + pad, A.data(), ac + pad, tA, B.data(), bc + pad, tB, M, N, K, acc);
  const RowMat<double> a = A.leftCols(ac).cast<double>(), b = B.leftCols(bc).cast<double>();
  const RowMat<double> opa = tA ? RowMat<double>(a.transpose()) : a, opb = tB ? RowMat<double>(b.transpose()) : b;
  RowMat<double> ref = opa * opb;
  if (acc) ref += C0.leftCols(N).cast<double>();
  const RowMat<double> bound = (K + 2) * std::ldexp(1.0, -23) * (opa.cwiseAbs() * opb.cwiseAbs());
  for (long i = 0; i < M; ++i) {
    for (long j = 0; j < N; ++j)
      ASSERT_LE(std::abs(double(C(i, j)) - ref(i, j)), bound(i, j) + (acc ? std::ldexp(std::abs(ref(i, j)), -23) : 0.0)) << i << "," << j;
    for (long j = N; j < N + pad; ++j) ASSERT_EQ(C(i, j), C0(i, j)) << "padding column " << j << " written";
  }
}

/// The largest |backend's product - Eigen's| over a (64, 2048) x (2048, 64) product: above 0 when the
/// backend ran another kernel than Eigen's (a long sum in another order differs in some last bits).
float backend_minus_eigen_long_sum() {
  const long M = 64, N = 64, K = 2048;
  const RowMat<float> A = randn_matrix(M, K, 5), B = randn_matrix(K, N, 6);
  RowMat<float> C(M, N), E(M, N);
  CpuBackend<float>().gemm(C.data(), N, A.data(), K, false, B.data(), N, false, M, N, K, false);
  gemm(smat(E.data(), M, N), csmat(A.data(), M, K), false, csmat(B.data(), K, N), false, false);
  return (C - E).cwiseAbs().maxCoeff();
}

}  // namespace

TEST(GemmDnnl, BackendFloatProductIsTheProduct) {
  const long shapes[][3] = {{64, 48, 80}, {2, 32, 16}, {1, 40, 24}, {37, 1, 19}, {128, 16, 128}, {16, 129, 7}};
  std::uint64_t seed = 1;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (int acc = 0; acc < 2; ++acc)
        for (long pad : {0L, 3L}) check(s[0], s[1], s[2], t & 1, t & 2, acc, pad, seed += 3);
}

TEST(GemmDnnl, ItIsOneDnnsProductWhereItShouldBe) {
  if (!dnnl_runs()) GTEST_SKIP() << "the float products run Eigen here: " << gemm_f32_impl(64, 64, 64);
  EXPECT_NE(gemm_f32_impl(512, 256, 128).find("avx512"), std::string::npos) << gemm_f32_impl(512, 256, 128);
  // A long sum in another order differs from Eigen's in some last bits: the product that ran is not Eigen's.
  EXPECT_GT(backend_minus_eigen_long_sum(), 0.f);
}

#if defined(FBT_HAVE_DNNL)
TEST(GemmDnnl, OnlyTheBrgemmKernelRuns) {
  // the rule applied to each product's primitive: oneDNN's AVX-512 brgemm kernel runs, any other leaves
  // the product to Eigen's (oneDNN 2.6's jit GEMM is no faster than it on Zen 3, docs/PERFORMANCE.md; its
  // reference kernels are slow)
  EXPECT_TRUE(detail::dnnl_f32_kernel_ok("brg:avx512_core"));
  EXPECT_FALSE(detail::dnnl_f32_kernel_ok("gemm:jit"));
  EXPECT_FALSE(detail::dnnl_f32_kernel_ok("brg:avx2"));
  EXPECT_FALSE(detail::dnnl_f32_kernel_ok("ref:any"));
  // and the name a benchmark reports follows it, shape by shape
  for (const long n : {1L, 16L, 257L}) {
    const std::string impl = gemm_f32_impl(n, n, n);
    EXPECT_TRUE(impl.rfind("oneDNN brg:avx512", 0) == 0 || impl.rfind("Eigen", 0) == 0) << impl;
  }
}
#endif

TEST(GemmDnnl, ScopedFp32EigenRunsEigensProductAndIsRestored) {
  const long M = 96, N = 72, K = 600;
  const RowMat<float> A = randn_matrix(K, M, 7), B = randn_matrix(N, K, 8);  // A^T B^T: both transposed
  RowMat<float> C(M, N), E(M, N);
  const std::string before = gemm_f32_impl(M, N, K);
  {
    ScopedFp32Eigen eigen;
    EXPECT_EQ(gemm_f32_impl(M, N, K), "Eigen (forced)");
    CpuBackend<float>().gemm(C.data(), N, A.data(), M, true, B.data(), K, true, M, N, K, false);
  }
  gemm(smat(E.data(), M, N), csmat(A.data(), K, M), true, csmat(B.data(), N, K), true, false);
  EXPECT_EQ(C, E) << "Eigen's product, bit for bit";
  EXPECT_EQ(gemm_f32_impl(M, N, K), before);
}

#if defined(FBT_HAVE_DNNL)
TEST(GemmDnnl, ScopedFp32OneDnnRunsOneDnnsKernelWhateverItIsAndIsRestored) {
  const std::string before = gemm_f32_impl(64, 48, 80);
  {
    ScopedFp32OneDnn onednn;
    const std::string impl = gemm_f32_impl(64, 48, 80);
    EXPECT_EQ(impl.rfind("oneDNN ", 0), 0u) << impl;
    EXPECT_NE(impl.find("(forced)"), std::string::npos) << impl;
    std::uint64_t seed = 101;
    for (int t = 0; t < 4; ++t)
      for (int acc = 0; acc < 2; ++acc) check(64, 48, 80, t & 1, t & 2, acc, 3, seed += 3);
    check(1, 40, 24, false, true, true, 0, seed += 3);
    // and it is not Eigen's product that ran: a long sum in another order differs in some last bits
    EXPECT_GT(backend_minus_eigen_long_sum(), 0.f);
    {
      ScopedFp32Eigen eigen;  // the innermost scope wins, and gives the previous choice back
      EXPECT_EQ(gemm_f32_impl(64, 48, 80), "Eigen (forced)");
    }
    EXPECT_EQ(gemm_f32_impl(64, 48, 80), impl);
  }
  EXPECT_EQ(gemm_f32_impl(64, 48, 80), before);
}
#endif

TEST(GemmDnnl, TwoThreadsAtOnce) {
  // each thread has its own stream and primitives (ops/gemm_dnnl.hpp): the same products on two threads
  // at once give what one thread gives
  const long M = 200, N = 96, K = 160;
  const RowMat<float> A = randn_matrix(M, K, 9), B = randn_matrix(N, K, 10);
  RowMat<float> ref(M, N);
  CpuBackend<float>().gemm(ref.data(), N, A.data(), K, false, B.data(), K, true, M, N, K, false);
  RowMat<float> c1(M, N), c2(M, N);
  auto run = [&](RowMat<float>* c) {
    for (int i = 0; i < 20; ++i) CpuBackend<float>().gemm(c->data(), N, A.data(), K, false, B.data(), K, true, M, N, K, false);
  };
  std::thread t1(run, &c1), t2(run, &c2);
  t1.join(), t2.join();
  EXPECT_EQ(c1, ref);
  EXPECT_EQ(c2, ref);
}

TEST(GemmDnnl, EmptyProducts) {
  RowMat<float> C = RowMat<float>::Constant(3, 4, 2.f);
  const RowMat<float> A(3, 0), B(0, 4);
  CpuBackend<float>().gemm(C.data(), 4, A.data(), 0, false, B.data(), 4, false, 3, 4, 0, true);
  EXPECT_EQ(C, RowMat<float>::Constant(3, 4, 2.f)) << "K = 0, accumulate: unchanged";
  CpuBackend<float>().gemm(C.data(), 4, A.data(), 0, false, B.data(), 4, false, 3, 4, 0, false);
  EXPECT_EQ(C, RowMat<float>::Zero(3, 4)) << "K = 0: zero";
}

}  // namespace test_ops_gemm_dnnl
