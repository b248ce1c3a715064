// tests/ops/test_bf16_weights.cpp: weight scopes and the bf16 copies of weights (fbt/ops/bf16_weights.hpp).
//
// Checks: inside a scope, a bf16 product whose right operand is a weight equals its definition
// gemm_bf16_reference (rounded operands, float sums) up to the order of the sums, for few rows (the
// matrix-vector kernel gemm_bf16_rows: tails of its 4-row and 16-lane blocks) and many (oneDNN over the copy),
// forward (W^T) and backward (W), accumulating or not; both builds of the matrix-vector kernel (plain
// C++ and AVX512-BF16's dot-product instruction, where the build has it), with tails of 32 columns; a fresh scope repacks weights that changed, a
// non-fresh one reuses the copies (the contract the decoder's steps rely on); nothing is packed outside a
// scope, under fp32, for a block that is not wholly inside the weights, or for double; nested scopes
// restore the enclosing one; threads keep their own copies. Input scopes (a layer's input rounded once for
// several products): products inside them equal the converting ones bit for bit, the copy is made once per
// scope (and afresh for another part of the block, or in a new scope), and they do nothing outside bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "common/layer_harness.hpp"
#include "fbt/ops/gemm_bf16.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_bf16_weights {

using namespace fbt;
using fbt_test::randn_matrix;

namespace {

/// |C - R| <= the bound on two float sums of the same K exact products (+ the accumulated value's rounding).
void expect_definition(const RowMat<float>& C, const RowMat<float>& R, const RowMat<float>& C0, const RowMat<float>& a,
                       const RowMat<float>& bop, bool acc, const std::string& what) {
  const RowMat<double> bound = (double(a.cols()) + 2) * std::ldexp(1.0, -23) * (a.cast<double>().cwiseAbs() * bop.cast<double>().cwiseAbs());
  for (long i = 0; i < C.rows(); ++i)
    for (long j = 0; j < C.cols(); ++j)
      ASSERT_LE(std::abs(double(C(i, j)) - double(R(i, j))), bound(i, j) + (acc ? 2.4e-7 * (std::abs(C0(i, j)) + std::abs(R(i, j))) : 0))
          << what << " at " << i << "," << j;
}

/// The weights: one buffer (a ParamStore's values), W (N, K) at offset 5 in it.
struct Weights {
  long N, K;
  std::vector<float> values;
  float* W() { return values.data() + 5; }
  Weights(long n, long k, std::uint64_t seed) : N(n), K(k), values(std::size_t(n * k + 11)) {
    const RowMat<float> w = randn_matrix(n, k, seed);
    std::copy(w.data(), w.data() + w.size(), W());
  }
};

}  // namespace

TEST(Bf16Weights, ProductsOverTheCopyMatchTheDefinition) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  ScopedMatmulPrecision bf16(Precision::bf16);
  // square weights too (N == K): their forward and backward products read blocked copies of one shape
  for (long M : {1L, 2L, 3L, 5L, 8L, 9L, 40L})
    for (long N : {1L, 4L, 37L, 64L})
      for (long K : {1L, 15L, 16L, 37L, 53L, 64L, 300L}) {
        Weights ws(N, K, 7 + N + K);
        Bf16WeightScope<float> scope(ws.values.data(), ws.values.size(), true);
        const auto W = csmat(ws.W(), N, K);
        const RowMat<float> Wm = W;
        for (bool acc : {false, true}) {
          const std::string what = "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) + " acc " + std::to_string(acc);
          {  // forward: C (M, N) = A W^T, C a block of a wider buffer
            const RowMat<float> a = randn_matrix(M, K, 3);
            RowMat<float> C0 = randn_matrix(M, N + 2, 4), C = C0, R = C0;
            gemm_bf16(smat(C.data(), M, N, N + 2), csmat(a.data(), M, K), false, W, true, acc);
            gemm_bf16_reference(smat(R.data(), M, N, N + 2), csmat(a.data(), M, K), false, W, true, acc);
            expect_definition(C.leftCols(N), R.leftCols(N), C0.leftCols(N), a, RowMat<float>(Wm.transpose()), acc, "forward " + what);
            for (long i = 0; i < M; ++i)
              for (long j = N; j < N + 2; ++j) ASSERT_EQ(C(i, j), C0(i, j)) << "wrote outside the (M, N) block";
          }
          {  // backward: C (M, K) = dY (M, N) W
            const RowMat<float> dy = randn_matrix(M, N, 5);
            RowMat<float> C0 = randn_matrix(M, K, 6), C = C0, R = C0;
            gemm_bf16(smat(C.data(), M, K), csmat(dy.data(), M, N), false, W, false, acc);
            gemm_bf16_reference(smat(R.data(), M, K), csmat(dy.data(), M, N), false, W, false, acc);
            expect_definition(C, R, C0, dy, Wm, acc, "backward " + what);
          }
        }
      }
}

// A square weight as a step uses it: forward (x W^T) and backward (dy W) products of many rows, in turn,
// in one scope. Both orientations read blocked copies with the same descriptor (of different contents).
TEST(Bf16Weights, SquareWeightForwardAndBackwardInOneScope) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  ScopedMatmulPrecision bf16(Precision::bf16);
  const long M = 512, D = 128;
  Weights ws(D, D, 21);
  Bf16WeightScope<float> scope(ws.values.data(), ws.values.size(), true);
  const auto W = csmat(ws.W(), D, D);
  const RowMat<float> Wm = W, x = randn_matrix(M, D, 22), dy = randn_matrix(M, D, 23), C0 = RowMat<float>::Zero(M, D);
  for (int round = 0; round < 2; ++round) {
    RowMat<float> y(M, D), yr(M, D), dx(M, D), dxr(M, D);
    gemm_bf16(smat(y.data(), M, D), csmat(x.data(), M, D), false, W, true, false);
    gemm_bf16_reference(smat(yr.data(), M, D), csmat(x.data(), M, D), false, W, true, false);
    gemm_bf16(smat(dx.data(), M, D), csmat(dy.data(), M, D), false, W, false, false);
    gemm_bf16_reference(smat(dxr.data(), M, D), csmat(dy.data(), M, D), false, W, false, false);
    expect_definition(y, yr, C0, x, RowMat<float>(Wm.transpose()), false, "forward, round " + std::to_string(round));
    expect_definition(dx, dxr, C0, dy, Wm, false, "backward, round " + std::to_string(round));
  }
}

// The matrix-vector kernel in both builds: plain C++ (any CPU) and, where the build has it, AVX512-BF16.
TEST(Bf16Weights, RowKernelsMatchTheDefinition) {
  for (long M : {1L, 3L, 8L})
    for (long N : {1L, 5L, 12L})
      for (long K : {1L, 31L, 32L, 33L, 70L, 300L})
        for (bool acc : {false, true}) {
          const RowMat<float> a = randn_matrix(M, K, 1 + K), w = randn_matrix(N, K, 2 + N);
          AlignedVector<std::uint16_t> wb(std::size_t(N * K));
          for (long i = 0; i < N * K; ++i) wb[std::size_t(i)] = float_to_bf16(w.data()[i]);
          const RowMat<float> C0 = randn_matrix(M, N, 3);
          RowMat<float> R = C0, P = C0, D = C0;
          gemm_bf16_reference(smat(R.data(), M, N), csmat(a.data(), M, K), false, csmat(w.data(), N, K), true, acc);
          detail::gemm_bf16_rows_portable(smat(P.data(), M, N), csmat(a.data(), M, K), wb.data(), acc);
          gemm_bf16_rows(smat(D.data(), M, N), csmat(a.data(), M, K), wb.data(), acc);
          const std::string what = "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) + " acc " + std::to_string(acc);
          expect_definition(P, R, C0, a, RowMat<float>(w.transpose()), acc, "portable " + what);
          expect_definition(D, R, C0, a, RowMat<float>(w.transpose()), acc, "dispatched " + what);
        }
}

TEST(Bf16Weights, FreshScopesRepackNonFreshOnesReuse) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  ScopedMatmulPrecision bf16(Precision::bf16);
  const long N = 24, K = 40;
  Weights ws(N, K, 3);
  const RowMat<float> x = randn_matrix(1, K, 4);
  auto product = [&](bool fresh) {
    Bf16WeightScope<float> scope(ws.values.data(), ws.values.size(), fresh);
    RowMat<float> y(1, N);
    gemm_bf16(smat(y.data(), 1, N), csmat(x.data(), 1, K), false, csmat(ws.W(), N, K), true, false);
    return y;
  };
  auto reference = [&] {
    RowMat<float> y(1, N);
    gemm_bf16_reference(smat(y.data(), 1, N), csmat(x.data(), 1, K), false, csmat(ws.W(), N, K), true, false);
    return y;
  };
  const RowMat<float> before = product(true), ref_before = reference();
  for (long i = 0; i < N * K; ++i) ws.W()[i] *= 1.5f;  // an optimizer step
  const RowMat<float> reused = product(false);          // a decoding step of a sequence prefilled before it
  EXPECT_EQ(reused, before) << "a non-fresh scope reads the copies made before";
  const RowMat<float> after = product(true), ref_after = reference();
  EXPECT_NE(after, before);
  EXPECT_LE((after - ref_after).cwiseAbs().maxCoeff(), 1e-5 * ref_after.cwiseAbs().maxCoeff());
  EXPECT_LE((before - ref_before).cwiseAbs().maxCoeff(), 1e-5 * ref_before.cwiseAbs().maxCoeff());
}

TEST(Bf16Weights, OnlyWholeWeightsInAnOpenBf16ScopeArePacked) {
  Weights ws(8, 16, 5), other(8, 16, 6);
  const float* lo = ws.values.data();
  const std::size_t n = ws.values.size();
  EXPECT_EQ(bf16_weight_copy(ws.W(), 8, 16, 16), nullptr) << "no scope open";
  {
    ScopedMatmulPrecision fp32(Precision::fp32);
    Bf16WeightScope<float> scope(lo, n, true);
    EXPECT_EQ(bf16_weight_copy(ws.W(), 8, 16, 16), nullptr) << "fp32 products: nothing to pack";
  }
  {
    std::vector<double> d(10, 1.0);
    Bf16WeightScope<double> scope(d.data(), d.size(), true);  // compiles, does nothing
  }
  if (!bf16_available()) return;
  ScopedMatmulPrecision bf16(Precision::bf16);
  Bf16WeightScope<float> scope(lo, n, true);
  const std::uint16_t* c = bf16_weight_copy(ws.W(), 8, 16, 16);
  ASSERT_NE(c, nullptr);
  for (long i = 0; i < 8 * 16; ++i) ASSERT_EQ(c[i], float_to_bf16(ws.W()[i])) << i;
  EXPECT_EQ(bf16_weight_copy(ws.W(), 8, 16, 16), c) << "made once in a scope";
  EXPECT_EQ(bf16_weight_copy(ws.values.data() + n - 4, 2, 4, 4), nullptr) << "runs past the weights";
  EXPECT_EQ(bf16_weight_copy(other.W(), 8, 16, 16), nullptr) << "not in the scope's weights";
  {
    Bf16WeightScope<float> inner(other.values.data(), other.values.size(), true);
    EXPECT_NE(bf16_weight_copy(other.W(), 8, 16, 16), nullptr);
    EXPECT_EQ(bf16_weight_copy(ws.W(), 8, 16, 16), nullptr) << "the inner scope's weights only";
  }
  EXPECT_EQ(bf16_weight_copy(ws.W(), 8, 16, 16), c) << "the enclosing scope is back, its copy kept";
  EXPECT_EQ(bf16_weight_copy(other.W(), 8, 16, 16), nullptr);
}

TEST(Bf16Weights, ThreadsKeepTheirOwnCopies) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  ScopedMatmulPrecision bf16(Precision::bf16);
  const long M = 3, N = 50, K = 70;
  Weights ws(N, K, 9);
  const RowMat<float> a = randn_matrix(M, K, 10);
  RowMat<float> ref(M, N);
  {
    Bf16WeightScope<float> scope(ws.values.data(), ws.values.size(), true);
    gemm_bf16(smat(ref.data(), M, N), csmat(a.data(), M, K), false, csmat(ws.W(), N, K), true, false);
  }
  std::vector<RowMat<float>> out(4, RowMat<float>(M, N));
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      Bf16WeightScope<float> scope(ws.values.data(), ws.values.size(), true);
      for (int r = 0; r < 20; ++r) gemm_bf16(smat(out[t].data(), M, N), csmat(a.data(), M, K), false, csmat(ws.W(), N, K), true, false);
    });
  for (auto& x : th) x.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(out[t], ref) << "thread " << t;
}

// ---- input scopes: a layer's input (and a linear layer's output gradient) rounded once --------------------------

namespace {
bool onednn_bf16() {
#if defined(FBT_HAVE_DNNL)
  return bf16_available() && detail::dnnl_has_bf16_matmul();
#else
  return false;
#endif
}
}  // namespace

// A layer's products inside input scopes (x for the three projections and their weight gradients; dy, nested,
// for dx += dy W and dW += dy^T x) give the products without scopes bit for bit: the same rounding, read once.
TEST(Bf16Inputs, ProductsInsideScopesEqualTheConvertingOnesBitForBit) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  ScopedMatmulPrecision bf16(Precision::bf16);
  const long M = 96, K = 48, N = 40;
  const RowMat<float> x = randn_matrix(M, K, 31), dy = randn_matrix(M, N, 32);
  const RowMat<float> w1 = randn_matrix(N, K, 33), w2 = randn_matrix(N, K, 34);  // not weights of a scope: converted per product
  auto run = [&](bool scoped, RowMat<float>& y1, RowMat<float>& y2, RowMat<float>& dx, RowMat<float>& dw1, RowMat<float>& dw2) {
    y1.setZero(M, N), y2.setZero(M, N), dx = randn_matrix(M, K, 35), dw1 = randn_matrix(N, K, 36), dw2 = randn_matrix(N, K, 37);
    Bf16InputScope<float> in(scoped ? x.data() : nullptr, std::size_t(x.size()));
    gemm_bf16(smat(y1.data(), M, N), csmat(x.data(), M, K), false, csmat(w1.data(), N, K), true, false);  // x w1^T
    gemm_bf16(smat(y2.data(), M, N), csmat(x.data(), M, K), false, csmat(w2.data(), N, K), true, false);  // x w2^T
    Bf16InputScope<float> grad(scoped ? dy.data() : nullptr, std::size_t(dy.size()));
    gemm_bf16(smat(dx.data(), M, K), csmat(dy.data(), M, N), false, csmat(w1.data(), N, K), false, true);  // dx += dy w1
    gemm_bf16(smat(dw1.data(), N, K), csmat(dy.data(), M, N), true, csmat(x.data(), M, K), false, true);   // dw1 += dy^T x
    gemm_bf16(smat(dw2.data(), N, K), csmat(dy.data(), M, N), true, csmat(x.data(), M, K), false, true);   // dw2 += dy^T x
  };
  RowMat<float> a[5], b[5];
  run(false, a[0], a[1], a[2], a[3], a[4]);
  run(true, b[0], b[1], b[2], b[3], b[4]);
  const char* names[5] = {"x w1^T", "x w2^T", "dx", "dw1", "dw2"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a[i], b[i]) << names[i];
  EXPECT_EQ(bf16_input_copy(x.data(), M, K, K), nullptr) << "no scope is open after the products";
}

// One copy per scope: a product reads the copy made at the block's first use (writing the block inside its
// scope breaks the contract on purpose here, to see that); another part of the block, or the block after the
// scope reopens, is converted afresh.
TEST(Bf16Inputs, TheCopyIsMadeOncePerScope) {
  if (!onednn_bf16()) GTEST_SKIP() << "input copies are read by oneDNN's bf16 products only (the fallback rounds per product)";
  ScopedMatmulPrecision bf16(Precision::bf16);
  const long M = 64, K = 32, N = 24;
  RowMat<float> x = randn_matrix(M, K, 41);
  const RowMat<float> x0 = x, x1 = randn_matrix(M, K, 42), w = randn_matrix(N, K, 43);
  auto product = [&](const float* a, long rows) {
    RowMat<float> y(rows, N);
    gemm_bf16(smat(y.data(), rows, N), csmat(a, rows, K), false, csmat(w.data(), N, K), true, false);
    return y;
  };
  RowMat<float> y0, y1, half1;
  {  // the references, without a scope
    x = x1, y1 = product(x.data(), M), half1 = product(x.data() + (M / 2) * K, M / 2);
    x = x0, y0 = product(x.data(), M);
  }
  {
    Bf16InputScope<float> in(x.data(), std::size_t(x.size()));
    EXPECT_EQ(product(x.data(), M), y0);
    x = x1;  // written inside its scope
    EXPECT_EQ(product(x.data(), M), y0) << "the second product must read the copy made by the first";
    EXPECT_EQ(product(x.data() + (M / 2) * K, M / 2), half1) << "another part of the block is converted afresh";
  }
  {
    Bf16InputScope<float> again(x.data(), std::size_t(x.size()));
    EXPECT_EQ(product(x.data(), M), y1) << "a new scope converts the block again";
  }
  x = x0;  // written between scopes, as a layer's buffer is from one pass to the next
  Bf16InputScope<float> next(x.data(), std::size_t(x.size()));
  EXPECT_EQ(product(x.data(), M), y0) << "a scope must not read the copy the last scope made of the same block";
}

// Outside bf16 precision, over double, over nothing: no copies.
TEST(Bf16Inputs, ScopesOutsideBf16DoNothing) {
  const RowMat<float> x = randn_matrix(8, 16, 51);
  {
    ScopedMatmulPrecision fp32(Precision::fp32);
    Bf16InputScope<float> in(x.data(), std::size_t(x.size()));
    EXPECT_EQ(bf16_input_copy(x.data(), 8, 16, 16), nullptr);
  }
  if (!bf16_available()) return;
  ScopedMatmulPrecision bf16(Precision::bf16);
  const RowMat<double> xd = RowMat<double>::Zero(8, 16);
  Bf16InputScope<double> d(xd.data(), std::size_t(xd.size()));
  Bf16InputScope<float> none(nullptr, 128);
  EXPECT_EQ(bf16_input_copy(x.data(), 8, 16, 16), nullptr);
  Bf16InputScope<float> in(x.data(), std::size_t(x.size()));
  EXPECT_NE(bf16_input_copy(x.data(), 8, 16, 16), nullptr);
  EXPECT_EQ(bf16_input_copy(x.data() + 1, 8, 16, 16), nullptr) << "a block that runs past the scope's end";
}

}  // namespace test_ops_bf16_weights
