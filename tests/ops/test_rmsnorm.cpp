// tests/ops/test_rmsnorm.cpp: rmsnorm_forward / rmsnorm_backward (fbt/ops/rmsnorm.hpp).
//
// Checks: forward and rstd against plain loops y = x / sqrt(mean(x^2) + eps) * w (1e-12 abs, double);
// a strided view (the per-head / column-block use) against a contiguous copy; backward w.r.t. x and w
// against central finite differences in double (normwise rel err < 1e-6, tests/common/gradcheck.hpp);
// accumulation and the null-data dw skip; float forward agrees with double to 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/rmsnorm.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_rmsnorm {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int N = 6, C = 8;
constexpr double kEps = 1e-6;

TEST(RmsNorm, ForwardMatchesLoops) {
  auto x = randn_vec(N * C, 1, 1.5), w = randn_vec(C, 2, 0.2, 1.0);
  x[3 * C + 0] = 0;  // a row with some zeros and one tiny row, where eps matters
  for (int c = 0; c < C; ++c) x[5 * C + c] = 1e-4 * (c - 3.5);
  std::vector<double> y(N * C), rstd(N);
  rmsnorm_forward(smat(y.data(), N, C), vec(rstd.data(), N), csmat(x.data(), N, C), cvec(w.data(), C), kEps);
  for (int n = 0; n < N; ++n) {
    double ms = 0;
    for (int c = 0; c < C; ++c) ms += x[n * C + c] * x[n * C + c];
    const double r = 1.0 / std::sqrt(ms / C + kEps);
    EXPECT_NEAR(rstd[n], r, 1e-12 * r) << n;
    for (int c = 0; c < C; ++c) EXPECT_NEAR(y[n * C + c], x[n * C + c] * r * w[c], 1e-12) << n << "," << c;
  }
}

TEST(RmsNorm, StridedViewMatchesContiguous) {
  constexpr int S = C + 5;  // a (N, C) column block of a (N, S) buffer
  auto xw = randn_vec(N * S, 3), w = randn_vec(C, 4, 0.2, 1.0);
  std::vector<double> x(N * C);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) x[n * C + c] = xw[n * S + 3 + c];
  std::vector<double> y(N * C), r(N), yw(N * S, 9.0), rw(N);
  rmsnorm_forward(smat(y.data(), N, C), vec(r.data(), N), csmat(x.data(), N, C), cvec(w.data(), C), kEps);
  rmsnorm_forward(smat(yw.data() + 3, N, C, S), vec(rw.data(), N), csmat(xw.data() + 3, N, C, S), cvec(w.data(), C), kEps);
  for (int n = 0; n < N; ++n) {
    EXPECT_EQ(r[n], rw[n]);
    for (int c = 0; c < S; ++c) {
      if (c >= 3 && c < 3 + C) EXPECT_EQ(yw[n * S + c], y[n * C + c - 3]);
      else EXPECT_EQ(yw[n * S + c], 9.0) << "wrote outside the view";
    }
  }
}

TEST(RmsNorm, BackwardMatchesFiniteDifference) {
  auto x = randn_vec(N * C, 5, 1.3, 0.2), w = randn_vec(C, 6, 0.2, 1.0);
  const auto dout = random_weights(N * C, 7);
  std::vector<double> y(N * C), rstd(N), dx(N * C, 0.0), dw(C, 0.0);
  rmsnorm_forward(smat(y.data(), N, C), vec(rstd.data(), N), csmat(x.data(), N, C), cvec(w.data(), C), kEps);
  rmsnorm_backward(smat(dx.data(), N, C), vec(dw.data(), C), csmat(dout.data(), N, C), csmat(x.data(), N, C), cvec(w.data(), C),
                   cvec(rstd.data(), N));
  std::vector<double> r2(N);
  auto f = [&]() {
    rmsnorm_forward(smat(y.data(), N, C), vec(r2.data(), N), csmat(x.data(), N, C), cvec(w.data(), C), kEps);
    return dot(dout, y.data());
  };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "rmsnorm dinp");
  expect_input_grad(f, w.data(), dw.data(), dw.size(), "rmsnorm dw");
}

TEST(RmsNorm, BackwardAccumulatesAndSkipsNullGain) {
  auto x = randn_vec(N * C, 8), w = randn_vec(C, 9, 0.2, 1.0);
  const auto dout = random_weights(N * C, 10);
  std::vector<double> y(N * C), rstd(N);
  rmsnorm_forward(smat(y.data(), N, C), vec(rstd.data(), N), csmat(x.data(), N, C), cvec(w.data(), C), kEps);
  auto bwd = [&](std::vector<double>& dx, double* dw) {
    rmsnorm_backward(smat(dx.data(), N, C), Span<double>(dw, C), csmat(dout.data(), N, C), csmat(x.data(), N, C), cvec(w.data(), C),
                     cvec(rstd.data(), N));
  };
  std::vector<double> dx1(N * C, 0.0), dw1(C, 0.0), dx2(N * C, 0.0), dw2(C, 0.0);
  bwd(dx1, dw1.data());
  bwd(dx2, dw2.data());
  bwd(dx2, dw2.data());
  for (std::size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx2[i], 2 * dx1[i], 1e-12);
  for (std::size_t i = 0; i < dw1.size(); ++i) EXPECT_NEAR(dw2[i], 2 * dw1[i], 1e-12);
  std::vector<double> dx3(N * C, 0.0);
  bwd(dx3, nullptr);  // null dw: dx unchanged by the skip
  for (std::size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx3[i], dx1[i], 1e-12);
}

TEST(RmsNorm, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale (y is O(1); float rounding ~6e-8 per op)
  auto x = randn_vec(N * C, 11), w = randn_vec(C, 12, 0.2, 1.0);
  std::vector<double> y(N * C), r(N);
  rmsnorm_forward(smat(y.data(), N, C), vec(r.data(), N), csmat(x.data(), N, C), cvec(w.data(), C), kEps);
  auto xf = cast_vec<float>(x), wf = cast_vec<float>(w);
  std::vector<float> yf(N * C), rf(N);
  rmsnorm_forward(smat(yf.data(), N, C), vec(rf.data(), N), csmat(xf.data(), N, C), cvec(wf.data(), C), float(kEps));
  EXPECT_LT(max_scaled_diff(yf, y), 1e-5);
  EXPECT_LT(max_scaled_diff(rf, r), 1e-5);
}

TEST(RmsNorm, ShapeMismatchThrows) {
  std::vector<double> x(N * C, 1.0), y(N * C), r(N), w(C, 1.0);
  EXPECT_THROW(rmsnorm_forward(smat(y.data(), N, C), vec(r.data(), N), csmat(x.data(), N, C), cvec(w.data(), C - 1), kEps), Error);
  EXPECT_THROW(rmsnorm_forward(smat(y.data(), N, C), vec(r.data(), N - 1), csmat(x.data(), N, C), cvec(w.data(), C), kEps), Error);
}

}  // namespace

}  // namespace test_ops_rmsnorm
