// tests/ops/test_gemm_bf16.cpp: bf16 mixed-precision products (fbt/ops/gemm_bf16.hpp).
//
// Checks: float -> bf16 rounding (nearest even, ties, NaN, infinity); the oneDNN product against its
// definition gemm_bf16_reference (operands rounded to bf16, float sums: the two differ only in the
// order of the float sums, bounded per element by (K + 2) * 2^-23 * sum_k |a_k b_k|) for every
// transpose, accumulate, strided outputs and edge shapes; that it is not the float product (the
// rounding shows); the CPU backend's dispatch under ScopedMatmulPrecision and its restoration; two
// threads running products at once; the fallback of CPUs without oneDNN's bf16 kernel equals the definition
// bit for bit. Without oneDNN: bf16 is refused with a message saying what to install.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "common/layer_harness.hpp"
#include "fbt/backend/cpu.hpp"
#include "fbt/ops/gemm_bf16.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_gemm_bf16 {

using namespace fbt;
using fbt_test::randn_matrix;

namespace {

/// Per element: the bound on the difference of two float sums of the same K exact products.
RowMat<double> sum_bound(const RowMat<float>& a, bool tA, const RowMat<float>& b, bool tB) {
  const RowMat<double> A = (tA ? RowMat<float>(a.transpose()) : a).cast<double>().cwiseAbs();
  const RowMat<double> B = (tB ? RowMat<float>(b.transpose()) : b).cast<double>().cwiseAbs();
  const double K = double(A.cols());
  return (K + 2) * std::ldexp(1.0, -23) * (A * B);
}

}  // namespace

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);                             // a tie: to the even mantissa (1.0)
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));  // a tie: to the even one above
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 1.0f + std::ldexp(1.0f, -7));  // past the tie: up
  EXPECT_EQ(round_bf16(-2.5f), -2.5f);                                                  // exact in bf16
  EXPECT_EQ(float_to_bf16(3.0f), 0x4040);
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::signaling_NaN())));  // stays a NaN (not infinity)
  EXPECT_EQ(round_bf16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_bf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());  // rounds past bf16's largest
  // every rounding is within half a bf16 ulp (2^-8 relative)
  Rng g(3);
  for (int i = 0; i < 10000; ++i) {
    const float x = float(g.normal() * std::exp(4 * g.normal()));
    EXPECT_LE(std::abs(round_bf16(x) - x), std::ldexp(std::abs(x), -8)) << x;
  }
}

TEST(Bf16, PrecisionNamesParse) {
  EXPECT_EQ(parse_precision("fp32"), Precision::fp32);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_STREQ(precision_name(Precision::bf16), "bf16");
  try {
    parse_precision("fp16");
    FAIL() << "fp16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fp16'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp32 or bf16"), std::string::npos) << e.what();
  }
}

TEST(Bf16, UnavailableIsRefusedWithWhatToInstall) {
  if (bf16_available()) GTEST_SKIP() << "built with oneDNN: bf16 is available";
  try {
    set_matmul_precision(Precision::bf16);
    FAIL() << "bf16 accepted without oneDNN";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libdnnl-dev"), std::string::npos) << e.what();
  }
  EXPECT_EQ(matmul_precision(), Precision::fp32);
}

TEST(Bf16, ProductMatchesItsDefinition) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  struct Case {
    long M, N, K;
  };
  for (const Case s : {Case{7, 5, 3}, Case{64, 48, 32}, Case{33, 257, 70}, Case{1, 96, 64}, Case{128, 1, 40}, Case{9, 11, 1}})
    for (int t = 0; t < 4; ++t)
      for (bool acc : {false, true}) {
        const bool tA = t & 1, tB = t & 2;
        const RowMat<float> a = tA ? randn_matrix(s.K, s.M, 10 + t) : randn_matrix(s.M, s.K, 10 + t);
        const RowMat<float> b = tB ? randn_matrix(s.N, s.K, 20 + t) : randn_matrix(s.K, s.N, 20 + t);
        // C is a (M, N) block of a wider buffer (row stride N + 3), pre-filled when accumulating
        const long ldc = s.N + 3;
        RowMat<float> C0 = randn_matrix(s.M, ldc, 30);
        RowMat<float> C = C0, R = C0;
        gemm_bf16(smat(C.data(), s.M, s.N, ldc), csmat(a.data(), a.rows(), a.cols()), tA, csmat(b.data(), b.rows(), b.cols()), tB, acc);
        gemm_bf16_reference(smat(R.data(), s.M, s.N, ldc), csmat(a.data(), a.rows(), a.cols()), tA, csmat(b.data(), b.rows(), b.cols()), tB, acc);
        const RowMat<double> bound = sum_bound(a, tA, b, tB);
        for (long i = 0; i < s.M; ++i) {
          for (long j = 0; j < s.N; ++j)
            ASSERT_LE(std::abs(double(C(i, j)) - double(R(i, j))), bound(i, j) + (acc ? 2.4e-7 * (std::abs(C0(i, j)) + std::abs(R(i, j))) : 0))
                << "M " << s.M << " N " << s.N << " K " << s.K << " tA " << tA << " tB " << tB << " acc " << acc << " at " << i << "," << j;
          for (long j = s.N; j < ldc; ++j) ASSERT_EQ(C(i, j), C0(i, j)) << "wrote outside the (M, N) block";
        }
      }
}

TEST(Bf16, FallbackIsTheDefinitionBitForBit) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  // the path of CPUs where oneDNN has no bf16 matmul (AVX2 only), forced here on every CPU
  ScopedBf16Fallback fb;
  EXPECT_NE(gemm_bf16_impl(8, 8, 8).find("fallback"), std::string::npos) << gemm_bf16_impl(8, 8, 8);
  for (int t = 0; t < 4; ++t)
    for (bool acc : {false, true}) {
      const bool tA = t & 1, tB = t & 2;
      const long M = 33, N = 17, K = 70, lda = 75, ldb = 20, ldc = N + 3;
      // operands are blocks of wider buffers too (row strides lda, ldb)
      RowMat<float> abuf = randn_matrix(tA ? K : M, lda, 40 + t), bbuf = randn_matrix(tB ? N : K, ldb + 60, 50 + t);
      const auto a = csmat(abuf.data(), tA ? K : M, tA ? M : K, lda);
      const auto b = csmat(bbuf.data(), tB ? N : K, tB ? K : N, ldb + 60);
      RowMat<float> C = randn_matrix(M, ldc, 60), R = C;
      gemm_bf16(smat(C.data(), M, N, ldc), a, tA, b, tB, acc);
      gemm_bf16_reference(smat(R.data(), M, N, ldc), a, tA, b, tB, acc);
      EXPECT_EQ(C, R) << "tA " << tA << " tB " << tB << " acc " << acc;
    }
}

TEST(Bf16, RoundingShowsAgainstTheFloatProduct) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  const long M = 32, N = 32, K = 64;
  const RowMat<float> a = randn_matrix(M, K, 1), b = randn_matrix(K, N, 2);
  RowMat<float> c(M, N), f(M, N);
  gemm_bf16(smat(c.data(), M, N), csmat(a.data(), M, K), false, csmat(b.data(), K, N), false, false);
  gemm(smat(f.data(), M, N), csmat(a.data(), M, K), false, csmat(b.data(), K, N), false, false);
  const double rel = (c - f).norm() / f.norm();
  // operands rounded to 8 significant bits: a relative change of about 2^-9 per operand, averaged over K terms
  EXPECT_GT(rel, 1e-4) << "no bf16 rounding visible: is the float product being run?";
  EXPECT_LT(rel, 1e-2);
}

TEST(Bf16, BackendDispatchFollowsTheScope) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  const long M = 40, N = 24, K = 56;
  const RowMat<float> a = randn_matrix(M, K, 4), w = randn_matrix(N, K, 5);
  RowMat<float> c(M, N), ref(M, N), f(M, N);
  CpuBackend<float> be;
  ASSERT_EQ(matmul_precision(), Precision::fp32);
  {
    ScopedMatmulPrecision p(Precision::bf16);
    EXPECT_EQ(matmul_precision(), Precision::bf16);
    be.gemm(c.data(), N, a.data(), K, false, w.data(), K, true, M, N, K, false);  // x W^T, as a linear layer
  }
  EXPECT_EQ(matmul_precision(), Precision::fp32) << "the scope restores the precision";
  gemm_bf16(smat(ref.data(), M, N), csmat(a.data(), M, K), false, csmat(w.data(), N, K), true, false);
  EXPECT_EQ(c, ref) << "the backend under bf16 runs gemm_bf16";
  {
    ScopedFp32Eigen eigen;  // Eigen's float product, to compare bit for bit (oneDNN's: tests/ops/test_gemm_dnnl.cpp)
    be.gemm(f.data(), N, a.data(), K, false, w.data(), K, true, M, N, K, false);
  }
  RowMat<float> g(M, N);
  gemm(smat(g.data(), M, N), csmat(a.data(), M, K), false, csmat(w.data(), N, K), true, false);
  EXPECT_EQ(f, g) << "after the scope the backend runs the float product";
  // a double backend ignores the setting (bf16 is a float path)
  {
    ScopedMatmulPrecision p(Precision::bf16);
    const RowMat<double> ad = a.cast<double>(), wd = w.cast<double>();
    RowMat<double> cd(M, N), rd(M, N);
    CpuBackend<double>().gemm(cd.data(), N, ad.data(), K, false, wd.data(), K, true, M, N, K, false);
    gemm(smat(rd.data(), M, N), csmat(ad.data(), M, K), false, csmat(wd.data(), N, K), true, false);
    EXPECT_EQ(cd, rd);
  }
}

TEST(Bf16, ThreadsRunProductsAtOnce) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  const long M = 96, N = 80, K = 72;
  const RowMat<float> a = randn_matrix(M, K, 6), b = randn_matrix(K, N, 7);
  RowMat<float> ref(M, N);
  gemm_bf16(smat(ref.data(), M, N), csmat(a.data(), M, K), false, csmat(b.data(), K, N), false, false);
  std::vector<RowMat<float>> out(4, RowMat<float>(M, N));
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) gemm_bf16(smat(out[t].data(), M, N), csmat(a.data(), M, K), false, csmat(b.data(), K, N), false, false);
    });
  for (auto& x : th) x.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(out[t], ref) << "thread " << t;
}

}  // namespace test_ops_gemm_bf16
