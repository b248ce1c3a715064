// tests/ops/test_rope.cpp: RopeTable / rope_forward / rope_backward (fbt/ops/rope.hpp).
//
// Reference (Hugging Face rotate-half, spec section 9), per head, positions counted from 0:
//   f_i = theta^(-2i/hs),  y_i = x_i cos(p f_i) - x_{i+hs/2} sin(p f_i),  y_{i+hs/2} = x_{i+hs/2} cos + x_i sin.
// Checks: table and forward against that formula written out here (1e-12 abs, double); in-place call
// (out aliases inp) equals the out-of-place one exactly; per-head norms are preserved (a rotation);
// backward against central finite differences in double (normwise rel err < 1e-6) and accumulation;
// a position outside the table throws; float forward agrees with double to 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/rope.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_rope {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int N = 6, NH = 3, hs = 8, MAXP = 64;
constexpr double kTheta = 10000.0;
const std::vector<int> kPos = {0, 1, 2, 7, 31, 63};  // includes position 0 (identity) and the last row of the table

std::vector<double> ref_rope(const std::vector<double>& x, const std::vector<int>& pos, int nh, int h_s, double theta) {
  std::vector<double> y(x.size());
  const int half = h_s / 2, W = nh * h_s;
  for (std::size_t n = 0; n < pos.size(); ++n)
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < half; ++i) {
        const double f = std::pow(theta, -2.0 * i / h_s), a = pos[n] * f;
        const double x1 = x[n * W + h * h_s + i], x2 = x[n * W + h * h_s + i + half];
        y[n * W + h * h_s + i] = x1 * std::cos(a) - x2 * std::sin(a);
        y[n * W + h * h_s + i + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
  return y;
}

TEST(Rope, TableMatchesFormula) {
  RopeTable<double> tab(MAXP, hs, kTheta);
  ASSERT_EQ(tab.half, hs / 2);
  for (int p = 0; p < MAXP; ++p)
    for (int i = 0; i < hs / 2; ++i) {
      const double a = p * std::pow(kTheta, -2.0 * i / hs);
      EXPECT_NEAR(tab.cos_[p * (hs / 2) + i], std::cos(a), 1e-14);
      EXPECT_NEAR(tab.sin_[p * (hs / 2) + i], std::sin(a), 1e-14);
    }
  EXPECT_THROW(RopeTable<double>(MAXP, 5, kTheta), Error);  // odd head_dim
}

TEST(Rope, ForwardMatchesRotateHalfReference) {
  for (double theta : {kTheta, 100.0}) {
    RopeTable<double> tab(MAXP, hs, theta);
    auto x = randn_vec(N * NH * hs, 1);
    std::vector<double> y(x.size());
    rope_forward(smat(y.data(), N, NH * hs), csmat(x.data(), N, NH * hs), kPos.data(), tab.view(), NH);
    const auto ref = ref_rope(x, kPos, NH, hs, theta);
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-12) << "theta " << theta << " i " << i;
    // position 0 is the identity
    for (int c = 0; c < NH * hs; ++c) EXPECT_EQ(y[c], x[c]);
    // a rotation: every head keeps its norm
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < NH; ++h) {
        double a = 0, b = 0;
        for (int i = 0; i < hs; ++i) a += x[n * NH * hs + h * hs + i] * x[n * NH * hs + h * hs + i], b += y[n * NH * hs + h * hs + i] * y[n * NH * hs + h * hs + i];
        EXPECT_NEAR(a, b, 1e-12 * a);
      }
  }
}

TEST(Rope, InPlaceEqualsOutOfPlace) {
  RopeTable<double> tab(MAXP, hs, kTheta);
  auto x = randn_vec(N * NH * hs, 2);
  std::vector<double> y(x.size()), z = x;
  rope_forward(smat(y.data(), N, NH * hs), csmat(x.data(), N, NH * hs), kPos.data(), tab.view(), NH);
  rope_forward(smat(z.data(), N, NH * hs), csmat(z.data(), N, NH * hs), kPos.data(), tab.view(), NH);  // out aliases inp
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_EQ(z[i], y[i]) << i;
}

TEST(Rope, StridedViewMatchesContiguous) {
  // k heads as a column block of a wider (N, S) buffer, the way a fused projection would hold them
  constexpr int S = NH * hs + 6;
  RopeTable<double> tab(MAXP, hs, kTheta);
  auto xw = randn_vec(N * S, 3);
  std::vector<double> x(N * NH * hs);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < NH * hs; ++c) x[n * NH * hs + c] = xw[n * S + 4 + c];
  std::vector<double> yw(N * S, -3.0);
  rope_forward(smat(yw.data() + 4, N, NH * hs, S), csmat(xw.data() + 4, N, NH * hs, S), kPos.data(), tab.view(), NH);
  const auto ref = ref_rope(x, kPos, NH, hs, kTheta);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < S; ++c) {
      if (c >= 4 && c < 4 + NH * hs) EXPECT_NEAR(yw[n * S + c], ref[n * NH * hs + c - 4], 1e-12);
      else EXPECT_EQ(yw[n * S + c], -3.0) << "wrote outside the view";
    }
}

TEST(Rope, BackwardMatchesFiniteDifference) {
  RopeTable<double> tab(MAXP, hs, 100.0);  // a small theta: every pair rotates by a sizeable angle
  auto x = randn_vec(N * NH * hs, 4);
  const auto dout = random_weights(x.size(), 5);
  std::vector<double> y(x.size()), dx(x.size(), 0.0);
  rope_backward(smat(dx.data(), N, NH * hs), csmat(dout.data(), N, NH * hs), kPos.data(), tab.view(), NH);
  auto f = [&]() {
    rope_forward(smat(y.data(), N, NH * hs), csmat(x.data(), N, NH * hs), kPos.data(), tab.view(), NH);
    return dot(dout, y.data());
  };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "rope dinp");
  // accumulates: a second call doubles
  std::vector<double> dx2 = dx;
  rope_backward(smat(dx2.data(), N, NH * hs), csmat(dout.data(), N, NH * hs), kPos.data(), tab.view(), NH);
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx2[i], 2 * dx[i], 1e-12);
}

TEST(Rope, PositionOutsideTableThrows) {
  RopeTable<double> tab(8, hs, kTheta);
  std::vector<double> x(2 * hs, 1.0), y(2 * hs);
  const int bad[2] = {3, 8};
  EXPECT_THROW(rope_forward(smat(y.data(), 2, hs), csmat(x.data(), 2, hs), bad, tab.view(), 1), Error);
  const int neg[2] = {-1, 0};
  EXPECT_THROW(rope_forward(smat(y.data(), 2, hs), csmat(x.data(), 2, hs), neg, tab.view(), 1), Error);
}

TEST(Rope, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale (the float table is the double one rounded)
  RopeTable<double> tab(MAXP, hs, kTheta);
  RopeTable<float> tabf(MAXP, hs, kTheta);
  auto x = randn_vec(N * NH * hs, 6);
  std::vector<double> y(x.size());
  rope_forward(smat(y.data(), N, NH * hs), csmat(x.data(), N, NH * hs), kPos.data(), tab.view(), NH);
  auto xf = cast_vec<float>(x);
  std::vector<float> yf(x.size());
  rope_forward(smat(yf.data(), N, NH * hs), csmat(xf.data(), N, NH * hs), kPos.data(), tabf.view(), NH);
  EXPECT_LT(max_scaled_diff(yf, y), 1e-5);
}

}  // namespace

}  // namespace test_ops_rope
