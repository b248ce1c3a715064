// tests/train/test_adamw.cpp: AdamW (fbt/train/adamw.hpp) against hand-computed updates.
//
// A tiny store with one (2, 2) matrix (weight-decayed) and one (3) gain (not decayed) takes three
// steps with lr = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1. Expected values are
// (a) closed forms written out as scalar arithmetic below, and (b) literals computed independently in
// Python (double) from the textbook formula, including bias correction. Tolerances: 1e-12 absolute in
// double, 2e-6 absolute in float (values are O(1); float stores p, m, v with ~6e-8 relative rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "fbt/train/adamw.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_adamw {

namespace {

constexpr const char* kW = "model.layers.0.mlp.up_proj.weight";  // (2, 2): decay
constexpr const char* kGain = "model.norm.weight";                // (3): no decay

template <class T> fbt::ParamStore<T> make_store() {
  fbt::ParamStore<T> ps;
  ps.add(kW, {2, 2}, fbt::Init::Zeros);
  ps.add(kGain, {3}, fbt::Init::Ones);
  ps.finalize();
  ps.init(0);
  T* w = ps.value(kW);
  w[0] = T(0.5);
  w[1] = T(-0.25);
  w[2] = T(0.75);
  w[3] = T(0.0);
  return ps;  // gain = [1, 1, 1]
}

// Gradients for steps 1..3. w[0] and gain[0] get non-zero gradients; w[1] and gain[1] get zero
// gradients, so only weight decay can move them.
const double kGradW0[3] = {0.2, 0.1, -0.4};
const double kGradGain0[3] = {-0.3, 0.05, 0.0};

template <class T> void set_grads(fbt::ParamStore<T>& ps, int step_index) {
  ps.zero_grad();
  ps.grad(kW)[0] = T(kGradW0[step_index]);
  ps.grad(kW)[2] = T(1.0);  // a non-zero gradient elsewhere, to show elements do not interact
  ps.grad(kGain)[0] = T(kGradGain0[step_index]);
}

fbt::AdamWConfig test_config() {
  fbt::AdamWConfig c;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  c.weight_decay = 0.1;
  return c;
}
constexpr double kLr = 0.1;

// Python reference (p, m, v after steps 1, 2, 3):
//   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; mh = m/(1-b1^t); vh = v/(1-b2^t)
//   p = p - lr (mh/(sqrt(vh)+eps) + wd p)   (wd = 0 for the gain)
const double kW0[3] = {0.39500000499999977, 0.2971207041075007, 0.3144914984599506};
const double kW0m[3] = {0.019999999999999997, 0.027999999999999997, -0.014799999999999997};
const double kW0v[3] = {0.0020000000000000018, 0.002400000000000002, 0.010280000000000008};
const double kGain0[3] = {1.0999999966666667, 1.1545060866724772, 1.197184234348822};

template <class T> double tol() { return std::is_same<T, float>::value ? 2e-6 : 1e-12; }

template <class T> class AdamW : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AdamW, Scalars);

TYPED_TEST(AdamW, FirstStepMatchesClosedForm) {
  using T = TypeParam;
  auto ps = make_store<T>();
  set_grads(ps, 0);
  fbt::adamw_update(ps, test_config(), kLr);
  EXPECT_EQ(ps.step, 1);
  // At t = 1 the bias corrections give mhat = g and vhat = g^2, so the Adam direction is g/(|g|+eps).
  const double g = kGradW0[0], p0 = 0.5;
  const double expect_w0 = p0 - kLr * (g / (std::fabs(g) + 1e-8) + 0.1 * p0);  // decayed
  const double gg = kGradGain0[0];
  const double expect_gain0 = 1.0 - kLr * (gg / (std::fabs(gg) + 1e-8));       // not decayed
  EXPECT_NEAR(double(ps.value(kW)[0]), expect_w0, tol<T>());
  EXPECT_NEAR(double(ps.value(kGain)[0]), expect_gain0, tol<T>());
  // The same numbers from the independent Python reference.
  EXPECT_NEAR(double(ps.value(kW)[0]), kW0[0], tol<T>());
  EXPECT_NEAR(double(ps.value(kGain)[0]), kGain0[0], tol<T>());
  // Had weight decay been applied to the gain it would be 1.1 - 0.1*0.1*1 = 1.09, far outside tol.
  EXPECT_GT(double(ps.value(kGain)[0]), 1.09 + 1e-3);
}

TYPED_TEST(AdamW, ThreeStepsMatchHandComputedWithBiasCorrection) {
  using T = TypeParam;
  auto ps = make_store<T>();
  for (int s = 0; s < 3; ++s) {
    set_grads(ps, s);
    fbt::adamw_update(ps, test_config(), kLr);
    EXPECT_EQ(ps.step, s + 1);
    EXPECT_NEAR(double(ps.value(kW)[0]), kW0[s], tol<T>()) << "step " << s + 1;
    EXPECT_NEAR(double(ps.adam_m()[ps.spec(kW).offset]), kW0m[s], tol<T>()) << "step " << s + 1;
    EXPECT_NEAR(double(ps.adam_v()[ps.spec(kW).offset]), kW0v[s], tol<T>()) << "step " << s + 1;
    EXPECT_NEAR(double(ps.value(kGain)[0]), kGain0[s], tol<T>()) << "step " << s + 1;
    if (s == 1) {
      // Step 2 written out by hand for w[0] (p1 = 0.395000005, g = 0.2 then 0.1):
      const double m2 = 0.9 * (0.1 * 0.2) + 0.1 * 0.1;                 // 0.028
      const double v2 = 0.95 * (0.05 * 0.2 * 0.2) + 0.05 * 0.1 * 0.1;  // 0.0024
      const double mhat = m2 / (1.0 - 0.9 * 0.9);                       // / 0.19
      const double vhat = v2 / (1.0 - 0.95 * 0.95);                     // / 0.0975
      const double p1 = kW0[0];
      const double p2 = p1 - 0.1 * (mhat / (std::sqrt(vhat) + 1e-8) + 0.1 * p1);
      EXPECT_NEAR(double(ps.value(kW)[0]), p2, tol<T>());
    }
  }
}

TYPED_TEST(AdamW, WeightDecayOnlyOnMatrices) {
  using T = TypeParam;
  auto ps = make_store<T>();
  ASSERT_TRUE(ps.spec(kW).decay);
  ASSERT_FALSE(ps.spec(kGain).decay);
  for (int s = 0; s < 3; ++s) {
    set_grads(ps, s);
    fbt::adamw_update(ps, test_config(), kLr);
    // w[1] has zero gradient: Adam's term is 0/(0+eps) = 0, so only decay acts: p *= (1 - lr*wd).
    EXPECT_NEAR(double(ps.value(kW)[1]), -0.25 * std::pow(1.0 - kLr * 0.1, s + 1), tol<T>()) << "step " << s + 1;
    // gain[1] and gain[2] have zero gradient and no decay: exactly unchanged.
    EXPECT_EQ(ps.value(kGain)[1], T(1));
    EXPECT_EQ(ps.value(kGain)[2], T(1));
  }
}

TYPED_TEST(AdamW, ZeroWeightDecayLeavesZeroGradMatrixUnchanged) {
  using T = TypeParam;
  auto ps = make_store<T>();
  auto cfg = test_config();
  cfg.weight_decay = 0.0;
  set_grads(ps, 0);
  fbt::adamw_update(ps, cfg, kLr);
  EXPECT_EQ(ps.value(kW)[1], T(-0.25));
  // w[0] moves by the Adam term only: 0.5 - 0.1 * 0.2/(0.2+1e-8).
  EXPECT_NEAR(double(ps.value(kW)[0]), 0.5 - kLr * (0.2 / (0.2 + 1e-8)), tol<T>());
}

TYPED_TEST(AdamW, DoesNotTouchGradientsAndIsDeterministic) {
  using T = TypeParam;
  auto a = make_store<T>();
  auto b = make_store<T>();
  for (int s = 0; s < 3; ++s) {
    set_grads(a, s);
    set_grads(b, s);
    std::vector<T> g_before(a.grads(), a.grads() + a.size());
    fbt::adamw_update(a, test_config(), kLr);
    fbt::adamw_update(b, test_config(), kLr);
    EXPECT_EQ(0, std::memcmp(g_before.data(), a.grads(), a.size() * sizeof(T)));
  }
  EXPECT_EQ(0, std::memcmp(a.values(), b.values(), a.size() * sizeof(T)));
  EXPECT_EQ(0, std::memcmp(a.adam_m(), b.adam_m(), a.size() * sizeof(T)));
  EXPECT_EQ(0, std::memcmp(a.adam_v(), b.adam_v(), a.size() * sizeof(T)));
}

TEST(AdamWConfigCheck, BadHyperParametersThrow) {
  auto ps = make_store<double>();
  auto bad = test_config();
  bad.beta1 = 1.0;  // bias correction 1 - beta1^t would be 0
  EXPECT_THROW(fbt::adamw_update(ps, bad, kLr), fbt::Error);
  bad = test_config();
  bad.beta2 = -0.1;
  EXPECT_THROW(fbt::adamw_update(ps, bad, kLr), fbt::Error);
  bad = test_config();
  bad.eps = 0.0;
  EXPECT_THROW(fbt::adamw_update(ps, bad, kLr), fbt::Error);
  EXPECT_THROW(fbt::adamw_update(ps, test_config(), std::nan("")), fbt::Error);
  EXPECT_THROW(fbt::adamw_update(ps, test_config(), -1e-3), fbt::Error);
  EXPECT_EQ(ps.step, 0);  // nothing was applied
}

}  // namespace

}  // namespace test_train_adamw
