// tests/layers/test_mlp.cpp: SwiGLU (fbt/layers/mlp.hpp), y += W_down (silu(W_gate x) * (W_up x)).
//
// Setup: D 8, F 12, N = B*T = 2*5; parameters N(0, 0.3^2). Checks:
// - forward against plain loops (1e-12 of the output scale) and that forward accumulates into y;
// - backward (dx and every parameter tensor, then the whole store) against central finite differences
//   of f = sum w * y in double: normwise rel err < 1e-6 and non-zero gradients;
// - backward accumulates into dx and the parameter grads (two calls double them);
// - parameter names and shapes follow Hugging Face Qwen3 ((F, D), (F, D), (D, F));
// - float forward agrees with double to 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/layers/mlp.hpp"
#include "fbt/model/builder.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_mlp {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, D = 8, F = 12;
const std::string kPrefix = "model.layers.0.mlp.";

ModelConfig mlp_config() {
  ModelConfig c;
  c.hidden_size = D, c.intermediate_size = F, c.num_attention_heads = 2, c.num_key_value_heads = 1, c.num_hidden_layers = 2;
  c.validate();
  return c;
}

template <class T> struct Rig : LayerRig<SwiGLU<T>> {
  explicit Rig(const ModelConfig& cfg) : LayerRig<SwiGLU<T>>(SwiGLU<T>(layer_spec(cfg, 0).mlp()), kPrefix, B, Tn, pass_tables(B, Tn)) {}
  static constexpr int N = B * Tn;
  std::vector<T> forward(const T* x) {
    std::vector<T> y(std::size_t(N) * D, T(0));
    this->layer.forward(this->be, this->w(), this->cache, x, y.data(), this->shape());
    return y;
  }
  void backward(const T* dy, T* dx, const T* x) { this->layer.backward(this->be, this->w(), this->cache, dy, dx, x, this->shape()); }
};

TEST(SwiGLU, ForwardMatchesPlainLoops) {
  Rig<double> r(mlp_config());
  randomize_store(r.ps, 1);
  const auto x = randn_vec(std::size_t(r.N) * D, 2);
  const double *wg = r.ps.value(kPrefix + "gate_proj.weight"), *wu = r.ps.value(kPrefix + "up_proj.weight"),
               *wd = r.ps.value(kPrefix + "down_proj.weight");
  std::vector<double> ref(std::size_t(r.N) * D, 0.0);
  for (int n = 0; n < r.N; ++n)
    for (int j = 0; j < F; ++j) {
      double g = 0, u = 0;
      for (int c = 0; c < D; ++c) g += wg[j * D + c] * x[n * D + c], u += wu[j * D + c] * x[n * D + c];
      const double h = g / (1 + std::exp(-g)) * u;
      for (int c = 0; c < D; ++c) ref[n * D + c] += wd[c * F + j] * h;
    }
  const auto y = r.forward(x.data());
  EXPECT_LT(max_scaled_diff(y, ref), 1e-12);
  // forward accumulates: y0 + mlp(x)
  std::vector<double> y2 = randn_vec(y.size(), 3);
  const std::vector<double> y0 = y2;
  r.layer.forward(r.be, r.w(), r.cache, x.data(), y2.data(), r.shape());
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y2[i], y0[i] + y[i], 1e-13);
}

TEST(SwiGLU, BackwardMatchesFiniteDifference) {
  Rig<double> r(mlp_config());
  randomize_store(r.ps, 4);
  auto x = randn_vec(std::size_t(r.N) * D, 5);
  const auto w = random_weights(std::size_t(r.N) * D, 6);
  r.ps.zero_grad();
  r.forward(x.data());
  std::vector<double> dx(x.size(), 0.0);
  r.backward(w.data(), dx.data(), x.data());
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());
  auto f = [&]() { return dot(w, r.forward(x.data()).data()); };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "mlp dx");
  expect_store_grads(r.ps, grad, f, "mlp");

  // accumulation: a second backward doubles dx and every parameter gradient
  r.forward(x.data());
  std::vector<double> dx2 = dx;
  r.backward(w.data(), dx2.data(), x.data());
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx2[i], 2 * dx[i], 1e-12);
  for (std::size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(r.ps.grads()[i], 2 * grad[i], 1e-12);
}

TEST(SwiGLU, ParameterNamesAndShapes) {
  Rig<double> r(mlp_config());
  ASSERT_EQ(r.ps.specs().size(), 3u);
  EXPECT_EQ(r.ps.spec(kPrefix + "gate_proj.weight").shape, (Shape{F, D}));
  EXPECT_EQ(r.ps.spec(kPrefix + "up_proj.weight").shape, (Shape{F, D}));
  EXPECT_EQ(r.ps.spec(kPrefix + "down_proj.weight").shape, (Shape{D, F}));
}

TEST(SwiGLU, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale
  Rig<double> rd(mlp_config());
  Rig<float> rf(mlp_config());
  randomize_store(rd.ps, 7);
  copy_values(rf.ps, rd.ps);
  const auto x = randn_vec(std::size_t(rd.N) * D, 8);
  const auto xf = cast_vec<float>(x);
  const double d = max_scaled_diff(rf.forward(xf.data()), rd.forward(x.data()));
  std::printf("  mlp float vs double: %.3g\n", d);
  EXPECT_LT(d, 1e-5);
}

}  // namespace

}  // namespace test_layers_mlp
