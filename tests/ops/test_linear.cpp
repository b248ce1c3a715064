// tests/ops/test_linear.cpp: linear_forward(_acc) / linear_backward / bias_forward / bias_backward
// (fbt/ops/linear.hpp), the y = x W^T map in PyTorch nn.Linear layout.
//
// Checks: forward against plain loops (1e-12 abs, double); strided views (the right half of a (D, 2D)
// matrix, a column block of a wider activation) against contiguous copies (exact); backward against
// central finite differences in double (normwise rel err < 1e-6, tests/common/gradcheck.hpp); that
// backward accumulates; that a null-data gradient is skipped; float forward agrees with double to
// 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/linear.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_linear {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int N = 5, C = 7, OC = 6;

std::vector<double> ref_linear(const std::vector<double>& x, const std::vector<double>& w, int n, int c, int oc) {
  std::vector<double> y(std::size_t(n) * oc, 0.0);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < oc; ++o) {
      double s = 0;
      for (int k = 0; k < c; ++k) s += x[std::size_t(i) * c + k] * w[std::size_t(o) * c + k];
      y[std::size_t(i) * oc + o] = s;
    }
  return y;
}

TEST(Linear, ForwardMatchesLoops) {
  auto x = randn_vec(N * C, 1), w = randn_vec(OC * C, 2);
  std::vector<double> y(N * OC, 123.0);  // forward overwrites
  linear_forward(smat(y.data(), N, OC), csmat(x.data(), N, C), csmat(w.data(), OC, C));
  const auto ref = ref_linear(x, w, N, C, OC);
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-12) << i;
  // the accumulating form adds to what is there
  std::vector<double> acc(N * OC, 0.5);
  linear_forward_acc(smat(acc.data(), N, OC), csmat(x.data(), N, C), csmat(w.data(), OC, C));
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(acc[i], ref[i] + 0.5, 1e-12) << i;
}

TEST(Linear, ShapeMismatchThrows) {
  auto x = randn_vec(N * C, 1), w = randn_vec(OC * C, 2);
  std::vector<double> y(N * OC);
  EXPECT_THROW(linear_forward(smat(y.data(), N, OC), csmat(x.data(), N, C - 1), csmat(w.data(), OC, C)), Error);
  EXPECT_THROW(linear_forward(smat(y.data(), N, OC - 1), csmat(x.data(), N, C), csmat(w.data(), OC, C)), Error);
}

TEST(Linear, BackwardMatchesFiniteDifference) {
  auto x = randn_vec(N * C, 3), w = randn_vec(OC * C, 4);
  const auto dout = random_weights(N * OC, 5);
  std::vector<double> dx(N * C, 0.0), dw(OC * C, 0.0), y(N * OC);
  linear_backward(smat(dx.data(), N, C), smat(dw.data(), OC, C), csmat(dout.data(), N, OC), csmat(x.data(), N, C),
                  csmat(w.data(), OC, C));
  auto f = [&]() {
    linear_forward(smat(y.data(), N, OC), csmat(x.data(), N, C), csmat(w.data(), OC, C));
    return dot(dout, y.data());
  };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "linear dinp");
  expect_input_grad(f, w.data(), dw.data(), dw.size(), "linear dw");
}

TEST(Linear, BackwardAccumulatesAndSkipsNullGradients) {
  auto x = randn_vec(N * C, 6), w = randn_vec(OC * C, 7);
  const auto dout = random_weights(N * OC, 8);
  auto run = [&](std::vector<double>& dx, std::vector<double>& dw, bool skip_dx, bool skip_dw) {
    linear_backward(skip_dx ? RowMapS<double>(nullptr, N, C, Eigen::OuterStride<>(C)) : smat(dx.data(), N, C),
                    skip_dw ? RowMapS<double>(nullptr, OC, C, Eigen::OuterStride<>(C)) : smat(dw.data(), OC, C),
                    csmat(dout.data(), N, OC), csmat(x.data(), N, C), csmat(w.data(), OC, C));
  };
  std::vector<double> dx1(N * C, 0.0), dw1(OC * C, 0.0);
  run(dx1, dw1, false, false);
  std::vector<double> dx2(N * C, 0.0), dw2(OC * C, 0.0);
  run(dx2, dw2, false, false);
  run(dx2, dw2, false, false);  // twice: doubles
  for (std::size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx2[i], 2 * dx1[i], 1e-12);
  for (std::size_t i = 0; i < dw1.size(); ++i) EXPECT_NEAR(dw2[i], 2 * dw1[i], 1e-12);
  // a null-data dinp leaves dx alone but still gives dw (and vice versa)
  std::vector<double> dx3(N * C, 0.0), dw3(OC * C, 0.0);
  run(dx3, dw3, true, false);
  for (double v : dx3) EXPECT_EQ(v, 0.0);
  for (std::size_t i = 0; i < dw1.size(); ++i) EXPECT_NEAR(dw3[i], dw1[i], 1e-12);
  std::vector<double> dx4(N * C, 0.0), dw4(OC * C, 0.0);
  run(dx4, dw4, false, true);
  for (double v : dw4) EXPECT_EQ(v, 0.0);
  for (std::size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx4[i], dx1[i], 1e-12);
}

// The fuser passes the halves of a (D, 2D) matrix as csmat(p, D, D, 2D) and csmat(p + D, D, D, 2D).
TEST(Linear, StridedHalfOfWideMatrix) {
  constexpr int D = 6;
  auto x = randn_vec(N * D, 9), w2 = randn_vec(D * 2 * D, 10);
  for (int half = 0; half < 2; ++half) {
    // a contiguous copy of the half: columns [half*D, half*D + D) of w2
    std::vector<double> wh(D * D);
    for (int o = 0; o < D; ++o)
      for (int k = 0; k < D; ++k) wh[o * D + k] = w2[o * 2 * D + half * D + k];
    std::vector<double> y(N * D), yc(N * D);
    linear_forward(smat(y.data(), N, D), csmat(x.data(), N, D), csmat(w2.data() + half * D, D, D, 2 * D));
    linear_forward(smat(yc.data(), N, D), csmat(x.data(), N, D), csmat(wh.data(), D, D));
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], yc[i], 1e-13) << "half " << half << " i " << i;

    // backward into the strided half: the other half of dW is untouched, this half matches the contiguous dW
    const auto dout = random_weights(N * D, 11 + half);
    std::vector<double> dw2(D * 2 * D, 0.0), dwh(D * D, 0.0), dx(N * D, 0.0), dxc(N * D, 0.0);
    linear_backward(smat(dx.data(), N, D), smat(dw2.data() + half * D, D, D, 2 * D), csmat(dout.data(), N, D), csmat(x.data(), N, D),
                    csmat(w2.data() + half * D, D, D, 2 * D));
    linear_backward(smat(dxc.data(), N, D), smat(dwh.data(), D, D), csmat(dout.data(), N, D), csmat(x.data(), N, D),
                    csmat(wh.data(), D, D));
    for (int o = 0; o < D; ++o)
      for (int k = 0; k < 2 * D; ++k) {
        const bool mine = (k / D) == half;
        if (mine) EXPECT_NEAR(dw2[o * 2 * D + k], dwh[o * D + k % D], 1e-13);
        else EXPECT_EQ(dw2[o * 2 * D + k], 0.0) << "the other half of dW was written";
      }
    for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], dxc[i], 1e-13);

    // FD through the strided view, w.r.t. the whole (D, 2D) buffer (the other half has zero gradient)
    auto f = [&]() {
      linear_forward(smat(y.data(), N, D), csmat(x.data(), N, D), csmat(w2.data() + half * D, D, D, 2 * D));
      return dot(dout, y.data());
    };
    expect_input_grad(f, w2.data(), dw2.data(), dw2.size(), "linear strided dw half " + std::to_string(half));
  }
}

// Strided activations: inp and out are column blocks of wider buffers (one head of (N, NH*hs)).
TEST(Linear, StridedActivations) {
  constexpr int XS = C + 3, YS = OC + 2;
  auto xw = randn_vec(N * XS, 12), w = randn_vec(OC * C, 13);
  std::vector<double> x(N * C);
  for (int i = 0; i < N; ++i)
    for (int k = 0; k < C; ++k) x[i * C + k] = xw[i * XS + 2 + k];
  std::vector<double> yw(N * YS, -7.0);
  linear_forward(smat(yw.data() + 1, N, OC, YS), csmat(xw.data() + 2, N, C, XS), csmat(w.data(), OC, C));
  const auto ref = ref_linear(x, w, N, C, OC);
  for (int i = 0; i < N; ++i)
    for (int c = 0; c < YS; ++c) {
      if (c >= 1 && c < 1 + OC) EXPECT_NEAR(yw[i * YS + c], ref[i * OC + c - 1], 1e-12);
      else EXPECT_EQ(yw[i * YS + c], -7.0) << "wrote outside the view";
    }
}

TEST(Linear, BiasForwardBackward) {
  auto y0 = randn_vec(N * OC, 14), b = randn_vec(OC, 15);
  const auto dout = random_weights(N * OC, 16);
  std::vector<double> y = y0;
  bias_forward(smat(y.data(), N, OC), cvec(b.data(), OC));
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) EXPECT_NEAR(y[i * OC + o], y0[i * OC + o] + b[o], 1e-15);
  // db += column sums of dout; check against loops, accumulation, and FD
  std::vector<double> db(OC, 0.25);
  bias_backward(vec(db.data(), OC), csmat(dout.data(), N, OC));
  for (int o = 0; o < OC; ++o) {
    double s = 0.25;
    for (int i = 0; i < N; ++i) s += dout[i * OC + o];
    EXPECT_NEAR(db[o], s, 1e-13);
  }
  std::vector<double> g(OC, 0.0);
  bias_backward(vec(g.data(), OC), csmat(dout.data(), N, OC));
  auto f = [&]() {
    y = y0;
    bias_forward(smat(y.data(), N, OC), cvec(b.data(), OC));
    return dot(dout, y.data());
  };
  expect_input_grad(f, b.data(), g.data(), g.size(), "bias db");
}

TEST(Linear, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale (float rounding ~6e-8 per op, C = 7 terms)
  auto x = randn_vec(N * C, 17), w = randn_vec(OC * C, 18);
  std::vector<double> y(N * OC);
  linear_forward(smat(y.data(), N, OC), csmat(x.data(), N, C), csmat(w.data(), OC, C));
  auto xf = cast_vec<float>(x), wf = cast_vec<float>(w);
  std::vector<float> yf(N * OC);
  linear_forward(smat(yf.data(), N, OC), csmat(xf.data(), N, C), csmat(wf.data(), OC, C));
  EXPECT_LT(max_scaled_diff(yf, y), 1e-5);
}

}  // namespace

}  // namespace test_ops_linear
