// tests/ops/test_shift.cpp: shift_right_forward / shift_right_backward (fbt/ops/shift.hpp).
//
//   out[b, 0] = 0,  out[b, t] = inp[b, t-1]   (per batch row: nothing crosses from row b-1 to row b)
// Checks: forward exactly (EXPECT_EQ); backward is the exact adjoint, <shift(x), y> == <x, shift^T(y)>
// bit for bit (both sums taken in the same row-major order); backward against central finite
// differences in double (normwise rel err < 1e-6); accumulation; strided views; T = 1 (all zero);
// float forward equals the double one exactly (a copy).
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/shift.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_shift {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 3, Tn = 5, C = 4;

/// Plain sequential dot product (no vectorised reassociation), so equal products in equal order sum equally.
double seq_dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(ShiftRight, ForwardMovesEachRowOnePosition) {
  auto x = randn_vec(B * Tn * C, 1);
  std::vector<double> y(x.size(), 7.0);  // stale contents, including position 0, must be overwritten
  shift_right_forward(smat(y.data(), B * Tn, C), csmat(x.data(), B * Tn, C), B, Tn);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t)
      for (int c = 0; c < C; ++c) {
        const double expect = t == 0 ? 0.0 : x[((b * Tn) + t - 1) * C + c];
        EXPECT_EQ(y[(b * Tn + t) * C + c], expect) << "b " << b << " t " << t << " c " << c;
      }
}

TEST(ShiftRight, BackwardIsTheExactAdjoint) {
  auto x = randn_vec(B * Tn * C, 2), y = randn_vec(B * Tn * C, 3);
  std::vector<double> sx(x.size()), sty(y.size(), 0.0);
  shift_right_forward(smat(sx.data(), B * Tn, C), csmat(x.data(), B * Tn, C), B, Tn);
  shift_right_backward(smat(sty.data(), B * Tn, C), csmat(y.data(), B * Tn, C), B, Tn);
  EXPECT_EQ(seq_dot(sx, y), seq_dot(x, sty));
  // the last position of every row gets nothing back (it feeds no later position)
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) EXPECT_EQ(sty[(b * Tn + Tn - 1) * C + c], 0.0);
}

TEST(ShiftRight, BackwardMatchesFiniteDifference) {
  auto x = randn_vec(B * Tn * C, 4);
  const auto dout = random_weights(x.size(), 5);
  std::vector<double> y(x.size()), dx(x.size(), 0.0);
  shift_right_backward(smat(dx.data(), B * Tn, C), csmat(dout.data(), B * Tn, C), B, Tn);
  auto f = [&]() {
    shift_right_forward(smat(y.data(), B * Tn, C), csmat(x.data(), B * Tn, C), B, Tn);
    return dot(dout, y.data());
  };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "shift_right dinp");
  // accumulates onto pre-filled gradients
  std::vector<double> dx2(x.size(), 1.5);
  shift_right_backward(smat(dx2.data(), B * Tn, C), csmat(dout.data(), B * Tn, C), B, Tn);
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_EQ(dx2[i], dx[i] + 1.5);
}

TEST(ShiftRight, StridedViews) {
  constexpr int S = C + 3;
  auto xw = randn_vec(B * Tn * S, 6);
  std::vector<double> yw(B * Tn * S, -1.0);
  shift_right_forward(smat(yw.data() + 2, B * Tn, C, S), csmat(xw.data() + 1, B * Tn, C, S), B, Tn);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t)
      for (int c = 0; c < S; ++c) {
        const double got = yw[(b * Tn + t) * S + c];
        if (c < 2 || c >= 2 + C) EXPECT_EQ(got, -1.0) << "wrote outside the view";
        else EXPECT_EQ(got, t == 0 ? 0.0 : xw[(b * Tn + t - 1) * S + 1 + c - 2]);
      }
}

TEST(ShiftRight, SinglePositionIsAllZero) {
  auto x = randn_vec(B * C, 7);
  std::vector<double> y(x.size(), 3.0), dx(x.size(), 0.0);
  shift_right_forward(smat(y.data(), B, C), csmat(x.data(), B, C), B, 1);
  for (double v : y) EXPECT_EQ(v, 0.0);
  shift_right_backward(smat(dx.data(), B, C), csmat(x.data(), B, C), B, 1);
  for (double v : dx) EXPECT_EQ(v, 0.0);
  EXPECT_THROW(shift_right_forward(smat(y.data(), B, C), csmat(x.data(), B, C), B, 2), Error);  // rows != B*T
}

TEST(ShiftRight, FloatForwardEqualsDouble) {
  // tolerance: exact (the shift copies values)
  auto x = randn_vec(B * Tn * C, 8);
  auto xf = cast_vec<float>(x);
  std::vector<double> y(x.size());
  std::vector<float> yf(x.size());
  shift_right_forward(smat(y.data(), B * Tn, C), csmat(x.data(), B * Tn, C), B, Tn);
  shift_right_forward(smat(yf.data(), B * Tn, C), csmat(xf.data(), B * Tn, C), B, Tn);
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_EQ(yf[i], float(y[i]));
}

}  // namespace

}  // namespace test_ops_shift
