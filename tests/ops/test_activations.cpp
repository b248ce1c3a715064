// tests/ops/test_activations.cpp: swiglu_* and sigmoid_gate_* (fbt/ops/activations.hpp).
//
//   swiglu:        h = silu(g) * u = g / (1 + exp(-g)) * u
//   sigmoid gate:  y = a * sigmoid(z) = a / (1 + exp(-z))
// Checks: forward against those elementwise formulas (1e-14 relative, double), finite for |x| = 1000;
// backward w.r.t. every input against central finite differences in double (normwise rel err < 1e-6,
// tests/common/gradcheck.hpp); accumulation; the null-data skips of sigmoid_gate_backward; float
// forward agrees with double to 1e-5 of the output scale, and forward and backward on rows as wide as
// vexp's packets (fbt/ops/vexp.hpp); float stays finite for |x| = 1000.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/activations.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_activations {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int N = 5, F = 7;

double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(SwiGLU, ForwardMatchesFormula) {
  auto g = randn_vec(N * F, 1, 2.0), u = randn_vec(N * F, 2);
  std::vector<double> h(N * F);
  swiglu_forward(smat(h.data(), N, F), csmat(g.data(), N, F), csmat(u.data(), N, F));
  for (std::size_t i = 0; i < h.size(); ++i) {
    const double ref = g[i] * ref_sigmoid(g[i]) * u[i];
    EXPECT_NEAR(h[i], ref, 1e-14 * std::max(1.0, std::abs(ref))) << i;
  }
}

TEST(SwiGLU, ExtremeInputsStayFinite) {
  std::vector<double> g = {-1000, -50, 0, 50, 1000, 1e-300}, u = {2, 3, 4, 5, 6, 7}, h(6), dg(6, 0.0), du(6, 0.0), dh(6, 1.0);
  swiglu_forward(smat(h.data(), 1, 6), csmat(g.data(), 1, 6), csmat(u.data(), 1, 6));
  swiglu_backward(smat(dg.data(), 1, 6), smat(du.data(), 1, 6), csmat(dh.data(), 1, 6), csmat(g.data(), 1, 6), csmat(u.data(), 1, 6));
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(std::isfinite(h[i]) && std::isfinite(dg[i]) && std::isfinite(du[i])) << "g = " << g[i];
  EXPECT_EQ(h[0], 0.0);
  EXPECT_NEAR(h[4], 6000.0, 1e-9);
  EXPECT_EQ(h[2], 0.0);
}

TEST(SwiGLU, BackwardMatchesFiniteDifference) {
  auto g = randn_vec(N * F, 3, 2.0), u = randn_vec(N * F, 4);
  const auto dh = random_weights(N * F, 5);
  std::vector<double> h(N * F), dg(N * F, 0.0), du(N * F, 0.0);
  swiglu_backward(smat(dg.data(), N, F), smat(du.data(), N, F), csmat(dh.data(), N, F), csmat(g.data(), N, F), csmat(u.data(), N, F));
  auto f = [&]() {
    swiglu_forward(smat(h.data(), N, F), csmat(g.data(), N, F), csmat(u.data(), N, F));
    return dot(dh, h.data());
  };
  expect_input_grad(f, g.data(), dg.data(), dg.size(), "swiglu dg");
  expect_input_grad(f, u.data(), du.data(), du.size(), "swiglu du");
  // accumulates: pre-filled gradients are added to
  std::vector<double> dg2(N * F, 0.5), du2(N * F, -0.25);
  swiglu_backward(smat(dg2.data(), N, F), smat(du2.data(), N, F), csmat(dh.data(), N, F), csmat(g.data(), N, F), csmat(u.data(), N, F));
  for (std::size_t i = 0; i < dg.size(); ++i) {
    EXPECT_NEAR(dg2[i], dg[i] + 0.5, 1e-13);
    EXPECT_NEAR(du2[i], du[i] - 0.25, 1e-13);
  }
}

TEST(SigmoidGate, ForwardMatchesFormula) {
  auto a = randn_vec(N * F, 6), z = randn_vec(N * F, 7, 2.0);
  std::vector<double> y(N * F);
  sigmoid_gate_forward(smat(y.data(), N, F), csmat(a.data(), N, F), csmat(z.data(), N, F));
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double ref = a[i] * ref_sigmoid(z[i]);
    EXPECT_NEAR(y[i], ref, 1e-14 * std::max(1.0, std::abs(ref))) << i;
  }
}

TEST(SigmoidGate, ExtremeInputsStayFinite) {
  std::vector<double> a = {2, 3, 4, 5}, z = {-1000, 0, 1000, -50}, y(4), da(4, 0.0), dz(4, 0.0), dy(4, 1.0);
  sigmoid_gate_forward(smat(y.data(), 1, 4), csmat(a.data(), 1, 4), csmat(z.data(), 1, 4));
  sigmoid_gate_backward(smat(da.data(), 1, 4), smat(dz.data(), 1, 4), csmat(dy.data(), 1, 4), csmat(a.data(), 1, 4), csmat(z.data(), 1, 4));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(y[i]) && std::isfinite(da[i]) && std::isfinite(dz[i])) << "z = " << z[i];
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 1.5);
  EXPECT_EQ(y[2], 4.0);
}

TEST(SigmoidGate, BackwardMatchesFiniteDifference) {
  auto a = randn_vec(N * F, 8), z = randn_vec(N * F, 9, 2.0);
  const auto dy = random_weights(N * F, 10);
  std::vector<double> y(N * F), da(N * F, 0.0), dz(N * F, 0.0);
  sigmoid_gate_backward(smat(da.data(), N, F), smat(dz.data(), N, F), csmat(dy.data(), N, F), csmat(a.data(), N, F), csmat(z.data(), N, F));
  auto f = [&]() {
    sigmoid_gate_forward(smat(y.data(), N, F), csmat(a.data(), N, F), csmat(z.data(), N, F));
    return dot(dy, y.data());
  };
  expect_input_grad(f, a.data(), da.data(), da.size(), "sigmoid_gate da");
  expect_input_grad(f, z.data(), dz.data(), dz.size(), "sigmoid_gate dz");
  // accumulates (twice = double), and a null-data da or dz skips only that gradient
  std::vector<double> da2 = da, dz2 = dz;
  sigmoid_gate_backward(smat(da2.data(), N, F), smat(dz2.data(), N, F), csmat(dy.data(), N, F), csmat(a.data(), N, F), csmat(z.data(), N, F));
  for (std::size_t i = 0; i < da.size(); ++i) {
    EXPECT_NEAR(da2[i], 2 * da[i], 1e-13);
    EXPECT_NEAR(dz2[i], 2 * dz[i], 1e-13);
  }
  const RowMapS<double> none(nullptr, N, F, Eigen::OuterStride<>(F));
  std::vector<double> da3(N * F, 0.0), dz3(N * F, 0.0);
  sigmoid_gate_backward(none, smat(dz3.data(), N, F), csmat(dy.data(), N, F), csmat(a.data(), N, F), csmat(z.data(), N, F));
  sigmoid_gate_backward(smat(da3.data(), N, F), none, csmat(dy.data(), N, F), csmat(a.data(), N, F), csmat(z.data(), N, F));
  for (std::size_t i = 0; i < da.size(); ++i) {
    EXPECT_NEAR(da3[i], da[i], 1e-14);
    EXPECT_NEAR(dz3[i], dz[i], 1e-14);
  }
}

TEST(Activations, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale (elementwise: a few float roundings per element)
  auto g = randn_vec(N * F, 11, 2.0), u = randn_vec(N * F, 12);
  std::vector<double> h(N * F), y(N * F);
  swiglu_forward(smat(h.data(), N, F), csmat(g.data(), N, F), csmat(u.data(), N, F));
  sigmoid_gate_forward(smat(y.data(), N, F), csmat(u.data(), N, F), csmat(g.data(), N, F));
  auto gf = cast_vec<float>(g), uf = cast_vec<float>(u);
  std::vector<float> hf(N * F), yf(N * F);
  swiglu_forward(smat(hf.data(), N, F), csmat(gf.data(), N, F), csmat(uf.data(), N, F));
  sigmoid_gate_forward(smat(yf.data(), N, F), csmat(uf.data(), N, F), csmat(gf.data(), N, F));
  EXPECT_LT(max_scaled_diff(hf, h), 1e-5);
  EXPECT_LT(max_scaled_diff(yf, y), 1e-5);
}

TEST(Activations, FloatAgreesWithDoubleOnWideRows) {
  // rows of 37: whole packets of vexp (fbt/ops/vexp.hpp) and a scalar tail; forward and backward,
  // tolerance 1e-5 of the output scale as above
  constexpr int R = 3, W = 37;
  auto g = randn_vec(R * W, 13, 3.0), u = randn_vec(R * W, 14), dh = randn_vec(R * W, 15);
  std::vector<double> h(R * W), y(R * W), dg(R * W, 0.0), du(R * W, 0.0), da(R * W, 0.0), dz(R * W, 0.0);
  swiglu_forward(smat(h.data(), R, W), csmat(g.data(), R, W), csmat(u.data(), R, W));
  sigmoid_gate_forward(smat(y.data(), R, W), csmat(u.data(), R, W), csmat(g.data(), R, W));
  swiglu_backward(smat(dg.data(), R, W), smat(du.data(), R, W), csmat(dh.data(), R, W), csmat(g.data(), R, W), csmat(u.data(), R, W));
  sigmoid_gate_backward(smat(da.data(), R, W), smat(dz.data(), R, W), csmat(dh.data(), R, W), csmat(u.data(), R, W), csmat(g.data(), R, W));
  auto gf = cast_vec<float>(g), uf = cast_vec<float>(u), dhf = cast_vec<float>(dh);
  std::vector<float> hf(R * W), yf(R * W), dgf(R * W, 0.f), duf(R * W, 0.f), daf(R * W, 0.f), dzf(R * W, 0.f);
  swiglu_forward(smat(hf.data(), R, W), csmat(gf.data(), R, W), csmat(uf.data(), R, W));
  sigmoid_gate_forward(smat(yf.data(), R, W), csmat(uf.data(), R, W), csmat(gf.data(), R, W));
  swiglu_backward(smat(dgf.data(), R, W), smat(duf.data(), R, W), csmat(dhf.data(), R, W), csmat(gf.data(), R, W), csmat(uf.data(), R, W));
  sigmoid_gate_backward(smat(daf.data(), R, W), smat(dzf.data(), R, W), csmat(dhf.data(), R, W), csmat(uf.data(), R, W), csmat(gf.data(), R, W));
  EXPECT_LT(max_scaled_diff(hf, h), 1e-5);
  EXPECT_LT(max_scaled_diff(yf, y), 1e-5);
  EXPECT_LT(max_scaled_diff(dgf, dg), 1e-5);
  EXPECT_LT(max_scaled_diff(duf, du), 1e-5);
  EXPECT_LT(max_scaled_diff(daf, da), 1e-5);
  EXPECT_LT(max_scaled_diff(dzf, dz), 1e-5);
}

TEST(Activations, FloatExtremeInputsStayFinite) {
  // 16 columns: the packets of vexp, which clamp its argument (exp(1000) is +inf, exp(-1000) ~1e-38)
  constexpr int W = 16;
  std::vector<float> g(W), u(W, 2.f), h(W), y(W), dg(W, 0.f), du(W, 0.f), da(W, 0.f), dz(W, 0.f), dh(W, 1.f);
  const float vals[] = {-1000.f, -90.f, -50.f, 0.f, 50.f, 90.f, 1000.f, 1e-30f};
  for (int i = 0; i < W; ++i) g[i] = vals[i % 8];
  swiglu_forward(smat(h.data(), 1, W), csmat(g.data(), 1, W), csmat(u.data(), 1, W));
  swiglu_backward(smat(dg.data(), 1, W), smat(du.data(), 1, W), csmat(dh.data(), 1, W), csmat(g.data(), 1, W), csmat(u.data(), 1, W));
  sigmoid_gate_forward(smat(y.data(), 1, W), csmat(u.data(), 1, W), csmat(g.data(), 1, W));
  sigmoid_gate_backward(smat(da.data(), 1, W), smat(dz.data(), 1, W), csmat(dh.data(), 1, W), csmat(u.data(), 1, W), csmat(g.data(), 1, W));
  for (int i = 0; i < W; ++i) {
    EXPECT_TRUE(std::isfinite(h[i]) && std::isfinite(dg[i]) && std::isfinite(du[i])) << "g = " << g[i];
    EXPECT_TRUE(std::isfinite(y[i]) && std::isfinite(da[i]) && std::isfinite(dz[i])) << "z = " << g[i];
  }
  EXPECT_EQ(h[0], 0.f);            // silu(-1000) * 2
  EXPECT_EQ(h[6], 2000.f);         // silu(1000) * 2
  EXPECT_EQ(y[0], 0.f);            // 2 sigmoid(-1000)
  EXPECT_EQ(y[6], 2.f);            // 2 sigmoid(1000)
  EXPECT_NEAR(h[2], -50.f * 2.f * std::exp(-50.f), 1e-25f);
}

}  // namespace

}  // namespace test_ops_activations
