// tests/ops/test_elementwise.cpp: mul, mul_add, scale_groups and sigmoid (fbt/ops/elementwise.hpp).
//
//   mul: y = a * b;  mul_add: y += a * b;  scale_groups: y[r, g*C + c] = x[r, g*C + c] * s[r, g];  sigmoid: y = 1 / (1 + exp(-z))
// Checks: forward against those formulas written as plain loops (1e-14 relative, double); backward
// w.r.t. every input against central finite differences in double (normwise rel err < 1e-6,
// tests/common/gradcheck.hpp); backward accumulates; the null-data skips; the CpuBackend entry points
// give the kernels' numbers; a shape mismatch is refused with a message naming the op.
#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "common/layer_harness.hpp"
#include "fbt/backend/cpu.hpp"
#include "fbt/ops/elementwise.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_elementwise {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int R = 3, G = 4, C = 5, N = R, F = G * C;

TEST(Mul, ForwardAndMulAddMatchFormula) {
  const auto a = randn_vec(N * F, 1), b = randn_vec(N * F, 2), y0 = randn_vec(N * F, 3);
  std::vector<double> y(N * F), y2 = y0;
  mul_forward(smat(y.data(), N, F), csmat(a.data(), N, F), csmat(b.data(), N, F));
  mul_add_forward(smat(y2.data(), N, F), csmat(a.data(), N, F), csmat(b.data(), N, F));
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y[i], a[i] * b[i], 1e-14 * std::max(1.0, std::abs(a[i] * b[i]))) << i;
    EXPECT_NEAR(y2[i], y0[i] + a[i] * b[i], 1e-14 * std::max(1.0, std::abs(y2[i]))) << i;
  }
}

TEST(Mul, BackwardMatchesFiniteDifferenceAndAccumulates) {
  auto a = randn_vec(N * F, 4), b = randn_vec(N * F, 5);
  const auto dy = random_weights(N * F, 6);
  std::vector<double> y(N * F), da(N * F, 0.0), db(N * F, 0.0);
  mul_backward(smat(da.data(), N, F), smat(db.data(), N, F), csmat(dy.data(), N, F), csmat(a.data(), N, F), csmat(b.data(), N, F));
  auto f = [&]() {
    mul_forward(smat(y.data(), N, F), csmat(a.data(), N, F), csmat(b.data(), N, F));
    return dot(dy, y.data());
  };
  expect_input_grad(f, a.data(), da.data(), da.size(), "mul da");
  expect_input_grad(f, b.data(), db.data(), db.size(), "mul db");
  std::vector<double> da2(N * F, 0.5);
  mul_backward(smat(da2.data(), N, F), smat(static_cast<double*>(nullptr), N, F), csmat(dy.data(), N, F), csmat(a.data(), N, F), csmat(b.data(), N, F));
  for (std::size_t i = 0; i < da.size(); ++i) EXPECT_NEAR(da2[i], da[i] + 0.5, 1e-13);
}

std::vector<double> ref_scale_groups(const std::vector<double>& x, const std::vector<double>& s) {
  std::vector<double> y(x.size());
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < C; ++c) y[r * F + g * C + c] = x[r * F + g * C + c] * s[r * G + g];
  return y;
}

TEST(ScaleGroups, ForwardMatchesPlainLoopsAndMayAlias) {
  const auto x = randn_vec(R * F, 7), s = randn_vec(R * G, 8);
  std::vector<double> y(R * F);
  scale_groups_forward(smat(y.data(), R, F), csmat(x.data(), R, F), csmat(s.data(), R, G), C);
  const auto ref = ref_scale_groups(x, s);
  EXPECT_LT(max_scaled_diff(y, ref), 1e-14);
  std::vector<double> xi = x;  // in place
  scale_groups_forward(smat(xi.data(), R, F), csmat(xi.data(), R, F), csmat(s.data(), R, G), C);
  EXPECT_LT(max_scaled_diff(xi, ref), 1e-14);
}

TEST(ScaleGroups, BackwardMatchesFiniteDifferenceAndAccumulates) {
  auto x = randn_vec(R * F, 9), s = randn_vec(R * G, 10);
  const auto dy = random_weights(R * F, 11);
  std::vector<double> y(R * F), dx(R * F, 0.0), ds(R * G, 0.0);
  scale_groups_backward(smat(dx.data(), R, F), smat(ds.data(), R, G), csmat(dy.data(), R, F), csmat(x.data(), R, F), csmat(s.data(), R, G), C);
  auto f = [&]() {
    scale_groups_forward(smat(y.data(), R, F), csmat(x.data(), R, F), csmat(s.data(), R, G), C);
    return dot(dy, y.data());
  };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "scale_groups dx");
  expect_input_grad(f, s.data(), ds.data(), ds.size(), "scale_groups ds");
  std::vector<double> ds2(R * G, -0.25);
  scale_groups_backward(smat(static_cast<double*>(nullptr), R, F), smat(ds2.data(), R, G), csmat(dy.data(), R, F), csmat(x.data(), R, F), csmat(s.data(), R, G), C);
  for (std::size_t i = 0; i < ds.size(); ++i) EXPECT_NEAR(ds2[i], ds[i] - 0.25, 1e-13);
}

TEST(ScaleGroups, RefusesMismatchedGroups) {
  std::vector<double> x(R * F), s(R * 3), y(R * F);
  const std::string e = error_of([&] { scale_groups_forward(smat(y.data(), R, F), csmat(x.data(), R, F), csmat(s.data(), R, 3), C); });
  EXPECT_TRUE(contains(e, "scale_groups_forward: expected x, y (R, G*C) and s (R, G), got x (3, 20), s (3, 3), C 5")) << e;
}

TEST(Sigmoid, ForwardMatchesFormulaAndBackwardMatchesFiniteDifference) {
  auto z = randn_vec(N * F, 12, 2.0);
  const auto dy = random_weights(N * F, 13);
  std::vector<double> y(N * F), dz(N * F, 0.0);
  sigmoid_forward(smat(y.data(), N, F), csmat(z.data(), N, F));
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], 1.0 / (1.0 + std::exp(-z[i])), 1e-15) << i;
  sigmoid_backward(smat(dz.data(), N, F), csmat(dy.data(), N, F), csmat(y.data(), N, F));
  auto f = [&]() {
    sigmoid_forward(smat(y.data(), N, F), csmat(z.data(), N, F));
    return dot(dy, y.data());
  };
  expect_input_grad(f, z.data(), dz.data(), dz.size(), "sigmoid dz");
  std::vector<double> big = {-1000, 0, 1000}, yb(3);
  sigmoid_forward(smat(yb.data(), 1, 3), csmat(big.data(), 1, 3));
  EXPECT_EQ(yb[0], 0.0);
  EXPECT_EQ(yb[1], 0.5);
  EXPECT_EQ(yb[2], 1.0);
}

TEST(ElementwiseBackend, CpuBackendCallsTheKernels) {
  CpuBackend<double> be;
  const auto a = randn_vec(R * F, 14), b = randn_vec(R * F, 15), s = randn_vec(R * G, 16), dy = randn_vec(R * F, 17);
  std::vector<double> y(R * F), y2(R * F, 1.0), da(R * F, 0.0), db(R * F, 0.0), dx(R * F, 0.0), ds(R * G, 0.0), sg(R * F), dz(R * F, 0.0);
  be.mul(y.data(), a.data(), b.data(), y.size());
  be.mul_add(y2.data(), a.data(), b.data(), y2.size());
  be.mul_backward(da.data(), db.data(), dy.data(), a.data(), b.data(), y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_DOUBLE_EQ(y[i], a[i] * b[i]);
    EXPECT_DOUBLE_EQ(y2[i], 1.0 + a[i] * b[i]);
    EXPECT_DOUBLE_EQ(da[i], dy[i] * b[i]);
    EXPECT_DOUBLE_EQ(db[i], dy[i] * a[i]);
  }
  be.scale_groups(y.data(), a.data(), s.data(), R, G, C);
  EXPECT_LT(max_scaled_diff(y, ref_scale_groups(a, s)), 1e-15);
  be.scale_groups_backward(dx.data(), ds.data(), dy.data(), a.data(), s.data(), R, G, C);
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) {
      double acc = 0;
      for (int c = 0; c < C; ++c) {
        const int i = r * F + g * C + c;
        EXPECT_DOUBLE_EQ(dx[i], dy[i] * s[r * G + g]);
        acc += dy[i] * a[i];
      }
      EXPECT_NEAR(ds[r * G + g], acc, 1e-13);
    }
  be.sigmoid(sg.data(), a.data(), sg.size());
  be.sigmoid_backward(dz.data(), dy.data(), sg.data(), sg.size());
  for (std::size_t i = 0; i < sg.size(); ++i) {
    EXPECT_NEAR(sg[i], 1.0 / (1.0 + std::exp(-a[i])), 1e-15);
    EXPECT_NEAR(dz[i], dy[i] * sg[i] * (1 - sg[i]), 1e-15);
  }
}

}  // namespace

}  // namespace test_ops_elementwise
