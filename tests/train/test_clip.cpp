// tests/train/test_clip.cpp: global gradient-norm clipping (fbt/train/clip.hpp).
//
// Gradients with a known norm: 3 in the matrix and 4 in the gain give ||g|| = 5 exactly (also in
// float). Clipping to max_norm multiplies by max_norm / (5 + 1e-6). Tolerances: 1e-12 relative in
// double, 1e-6 relative in float.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "fbt/train/clip.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_clip {

namespace {

constexpr const char* kW = "model.layers.0.self_attn.q_proj.weight";  // (2, 2)
constexpr const char* kGain = "model.norm.weight";                     // (3)

template <class T> fbt::ParamStore<T> make_store() {
  fbt::ParamStore<T> ps;
  ps.add(kW, {2, 2}, fbt::Init::Zeros);
  ps.add(kGain, {3}, fbt::Init::Ones);
  ps.finalize();
  ps.grad(kW)[0] = T(3);
  ps.grad(kGain)[1] = T(-4);
  return ps;
}

template <class T> double rtol() { return std::is_same<T, float>::value ? 1e-6 : 1e-12; }

template <class T> std::vector<T> grads_of(const fbt::ParamStore<T>& ps) {
  return std::vector<T>(ps.grads(), ps.grads() + ps.size());
}

template <class T> class Clip : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Clip, Scalars);

TYPED_TEST(Clip, GlobalNormOverAllTensors) {
  auto ps = make_store<TypeParam>();
  EXPECT_DOUBLE_EQ(fbt::grad_global_norm(ps), 5.0);
  ps.zero_grad();
  EXPECT_EQ(fbt::grad_global_norm(ps), 0.0);
}

TYPED_TEST(Clip, ScalesByMaxNormOverNormPlusEpsilon) {
  using T = TypeParam;
  auto ps = make_store<T>();
  const double pre = fbt::clip_grad_norm(ps, 1.0);
  EXPECT_DOUBLE_EQ(pre, 5.0);  // returns the norm before clipping
  const double scale = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(double(ps.grad(kW)[0]), 3.0 * scale, 3.0 * scale * rtol<T>());
  EXPECT_NEAR(double(ps.grad(kGain)[1]), -4.0 * scale, 4.0 * scale * rtol<T>());
  // Zeros stay zero; the new norm is max_norm * 5 / (5 + 1e-6), just under 1.
  EXPECT_EQ(ps.grad(kW)[1], T(0));
  EXPECT_EQ(ps.grad(kGain)[0], T(0));
  const double post = fbt::grad_global_norm(ps);
  EXPECT_NEAR(post, 5.0 * scale, rtol<T>());
  if (std::is_same<T, double>::value) {
    EXPECT_LT(post, 1.0);
  }
}

TYPED_TEST(Clip, NoChangeAtOrUnderThreshold) {
  using T = TypeParam;
  auto ps = make_store<T>();
  const auto before = grads_of(ps);
  EXPECT_DOUBLE_EQ(fbt::clip_grad_norm(ps, 10.0), 5.0);
  EXPECT_EQ(grads_of(ps), before);
  EXPECT_DOUBLE_EQ(fbt::clip_grad_norm(ps, 5.0), 5.0);  // norm == max_norm: not clipped (strict >)
  EXPECT_EQ(grads_of(ps), before);
}

TYPED_TEST(Clip, NonPositiveMaxNormDisablesClipping) {
  auto ps = make_store<TypeParam>();
  const auto before = grads_of(ps);
  EXPECT_DOUBLE_EQ(fbt::clip_grad_norm(ps, 0.0), 5.0);
  EXPECT_DOUBLE_EQ(fbt::clip_grad_norm(ps, -1.0), 5.0);
  EXPECT_EQ(grads_of(ps), before);
}

TYPED_TEST(Clip, NonFiniteNormIsReturnedWithoutScaling) {
  using T = TypeParam;
  auto ps = make_store<T>();
  ps.grad(kGain)[2] = std::numeric_limits<T>::quiet_NaN();
  auto before = grads_of(ps);
  EXPECT_TRUE(std::isnan(fbt::clip_grad_norm(ps, 1.0)));
  EXPECT_EQ(ps.grad(kW)[0], before[0]);
  EXPECT_EQ(ps.grad(kGain)[1], T(-4));

  ps.grad(kGain)[2] = std::numeric_limits<T>::infinity();
  const double n = fbt::clip_grad_norm(ps, 1.0);
  EXPECT_TRUE(std::isinf(n) && n > 0);
  EXPECT_EQ(ps.grad(kW)[0], T(3));
  EXPECT_EQ(ps.grad(kGain)[1], T(-4));
}

// Float gradients are accumulated in double: 1e4^2 + 1000 * 0.01^2 = 1e8 + 0.1 is lost in a float sum
// (float spacing at 1e8 is 8), so a float accumulator would return exactly 1e4.
TEST(ClipFloat, NormAccumulatesInDouble) {
  fbt::ParamStore<float> ps;
  ps.add("a", {1}, fbt::Init::Zeros);
  ps.add("b", {1000}, fbt::Init::Zeros);
  ps.finalize();
  ps.grad("a")[0] = 1e4f;
  for (int i = 0; i < 1000; ++i) ps.grad("b")[i] = 0.01f;
  const double small = double(0.01f);
  const double expect = std::sqrt(1e8 + 1000.0 * small * small);  // 10000.000005
  EXPECT_NEAR(fbt::grad_global_norm(ps), expect, 1e-9);
  EXPECT_GT(fbt::grad_global_norm(ps), 1e4 + 1e-6);
}

}  // namespace

}  // namespace test_train_clip
