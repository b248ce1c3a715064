// tests/layers/test_attention_layer.cpp: CausalSelfAttention (fbt/layers/attention.hpp).
//
// Setup: D 8, NH 4, head_dim 4 (so NH*hs = 16 != D: o_proj is (D, 16)), B 2, T 5; parameters moved away
// from init (gains 1 + N(0, 0.2^2), matrices N(0, 0.3^2)). Cases: QK-norm on/off, NKV 2 (GQA) and
// NKV 4, rows with and without document boundaries (pos restarts and `first` at each document start).
// Checks:
// - backward (dx and every parameter tensor, then the whole store) against central finite differences
//   of f = sum w * y in double: normwise rel err < 1e-6, non-zero gradient (tests/common/gradcheck.hpp);
// - backward accumulates into dx and the parameter grads; forward accumulates into y;
// - forward against the layer written out as plain loops (QK-norm before RoPE, GQA, masks), 1e-12;
// - parameter names and shapes follow Hugging Face Qwen3 (spec section 8);
// - a packed row of two documents gives the same outputs as the documents run separately (1e-13);
// - float forward agrees with double to 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/layers/attention.hpp"
#include "fbt/model/builder.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_attention_layer {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, D = 8;
const std::string kPrefix = "model.layers.0.self_attn.";

ModelConfig attn_config(bool qk_norm, int nkv) {
  ModelConfig c;
  c.hidden_size = D, c.num_attention_heads = 4, c.num_key_value_heads = nkv, c.head_dim = 4, c.max_position_embeddings = 16;
  c.rope_theta = 100.0;  // a small theta: every frequency rotates noticeably over T = 5
  c.qk_norm = qk_norm, c.num_hidden_layers = 2;
  c.validate();
  return c;
}

/// One attention layer with its own store and cache (tests/common/layer_harness.hpp LayerRig).
template <class T> struct Rig : LayerRig<CausalSelfAttention<T>> {
  using Base = LayerRig<CausalSelfAttention<T>>;
  Rig(const ModelConfig& cfg, int b, int t, PassTables tb)
      : Base(CausalSelfAttention<T>(layer_spec(cfg, 0).attention()), kPrefix, b, t, std::move(tb)) {}
  std::vector<T> forward(const T* x) {
    std::vector<T> y(std::size_t(this->N()) * D, T(0));
    this->layer.forward(this->be, this->w(), this->cache, x, y.data(), this->shape());
    return y;
  }
  void backward(const T* dy, T* dx, const T* x) { this->layer.backward(this->be, this->w(), this->cache, dy, dx, x, this->shape()); }
};

struct Case {
  bool qk_norm;
  int nkv;
  bool docs;
};
std::string name_of(const Case& c) { return std::string(c.qk_norm ? "qknorm" : "noqknorm") + "_nkv" + std::to_string(c.nkv) + (c.docs ? "_docs" : ""); }
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

PassTables tables(bool docs) { return docs ? pass_tables(B, Tn, {{3}, {1, 4}}) : pass_tables(B, Tn); }

class AttentionLayer : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionLayer, BackwardMatchesFiniteDifference) {
  const Case c = GetParam();
  Rig<double> r(attn_config(c.qk_norm, c.nkv), B, Tn, tables(c.docs));
  randomize_store(r.ps, 1);
  auto x = randn_vec(std::size_t(r.N()) * D, 2);
  const auto w = random_weights(std::size_t(r.N()) * D, 3);

  r.ps.zero_grad();
  r.forward(x.data());
  std::vector<double> dx(x.size(), 0.0);
  r.backward(w.data(), dx.data(), x.data());
  const std::vector<double> grad(r.ps.grads(), r.ps.grads() + r.ps.size());

  auto f = [&]() { return dot(w, r.forward(x.data()).data()); };
  expect_input_grad(f, x.data(), dx.data(), dx.size(), "attention dx " + name_of(c));
  expect_store_grads(r.ps, grad, f, name_of(c));

  // accumulation: a second backward (same cache) doubles dx and every parameter gradient
  r.forward(x.data());
  r.backward(w.data(), dx.data(), x.data());
  std::vector<double> dx1(x.size(), 0.0);
  {
    Rig<double> r1(attn_config(c.qk_norm, c.nkv), B, Tn, tables(c.docs));
    copy_values(r1.ps, r.ps);
    r1.forward(x.data());
    r1.backward(w.data(), dx1.data(), x.data());
    for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], 2 * dx1[i], 1e-12);
    for (std::size_t i = 0; i < r.ps.size(); ++i) EXPECT_NEAR(r.ps.grads()[i], 2 * r1.ps.grads()[i], 1e-12);
  }
}

TEST_P(AttentionLayer, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale (y is O(1) with these weights)
  const Case c = GetParam();
  const ModelConfig cfg = attn_config(c.qk_norm, c.nkv);
  Rig<double> rd(cfg, B, Tn, tables(c.docs));
  Rig<float> rf(cfg, B, Tn, tables(c.docs));
  randomize_store(rd.ps, 4);
  copy_values(rf.ps, rd.ps);
  const auto x = randn_vec(std::size_t(rd.N()) * D, 5);
  const auto xf = cast_vec<float>(x);
  const auto yd = rd.forward(x.data());
  const auto yf = rf.forward(xf.data());
  const double d = max_scaled_diff(yf, yd);
  std::printf("  %s float vs double: %.3g\n", name_of(c).c_str(), d);
  EXPECT_LT(d, 1e-5);
}

/// The layer written out as plain loops from spec sections 1 and 9: projections, per-head RMSNorm with
/// one shared gain (QK-norm) BEFORE rotate-half RoPE, causal document-masked GQA softmax attention with
/// scale 1/sqrt(hs), then o_proj.
std::vector<double> ref_layer(const ModelConfig& cfg, const ParamStore<double>& ps, const std::vector<double>& x, const PassTables& tb,
                              int Bn, int Tl) {
  const int NH = cfg.num_attention_heads, NKV = cfg.num_key_value_heads, hs = cfg.hs(), N = Bn * Tl, half = hs / 2;
  auto W = [&](const char* n) { return ps.value(kPrefix + n); };
  auto proj = [&](const double* w, int oc) {
    std::vector<double> y(std::size_t(N) * oc, 0.0);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < oc; ++o)
        for (int c = 0; c < D; ++c) y[n * oc + o] += x[n * D + c] * w[o * D + c];
    return y;
  };
  auto q = proj(W("q_proj.weight"), NH * hs), k = proj(W("k_proj.weight"), NKV * hs), v = proj(W("v_proj.weight"), NKV * hs);
  auto norm_rope = [&](std::vector<double>& a, int nh, const char* gain) {
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < nh; ++h) {
        double* p = a.data() + (n * nh + h) * hs;
        if (cfg.qk_norm) {
          double ms = 0;
          for (int i = 0; i < hs; ++i) ms += p[i] * p[i];
          const double r = 1.0 / std::sqrt(ms / hs + cfg.rms_norm_eps);
          for (int i = 0; i < hs; ++i) p[i] = p[i] * r * W(gain)[i];
        }
        for (int i = 0; i < half; ++i) {
          const double ang = tb.pos[n] * std::pow(cfg.rope_theta, -2.0 * i / hs), x1 = p[i], x2 = p[i + half];
          p[i] = x1 * std::cos(ang) - x2 * std::sin(ang);
          p[i + half] = x2 * std::cos(ang) + x1 * std::sin(ang);
        }
      }
  };
  norm_rope(q, NH, "q_norm.weight");
  norm_rope(k, NKV, "k_norm.weight");
  std::vector<double> o(std::size_t(N) * NH * hs, 0.0);
  for (int b = 0; b < Bn; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < Tl; ++t) {
        const int n = b * Tl + t, kh = h / (NH / NKV);
        std::vector<double> e(Tl, 0.0);
        double z = 0;
        for (int s = tb.first[n]; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < hs; ++i) d += q[(n * NH + h) * hs + i] * k[((b * Tl + s) * NKV + kh) * hs + i];
          e[s] = std::exp(d / std::sqrt(double(hs)));  // O(1) scores: no max shift needed here
          z += e[s];
        }
        for (int s = tb.first[n]; s <= t; ++s)
          for (int i = 0; i < hs; ++i) o[(n * NH + h) * hs + i] += e[s] / z * v[((b * Tl + s) * NKV + kh) * hs + i];
      }
  std::vector<double> y(std::size_t(N) * D, 0.0);
  const double* wo = W("o_proj.weight");
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < D; ++c)
      for (int j = 0; j < NH * hs; ++j) y[n * D + c] += o[n * NH * hs + j] * wo[c * NH * hs + j];
  return y;
}

TEST_P(AttentionLayer, ForwardMatchesPlainLoops) {
  // tolerance: 1e-12 of the output scale (double)
  const Case c = GetParam();
  const ModelConfig cfg = attn_config(c.qk_norm, c.nkv);
  Rig<double> r(cfg, B, Tn, tables(c.docs));
  randomize_store(r.ps, 11);
  const auto x = randn_vec(std::size_t(r.N()) * D, 12);
  const auto y = r.forward(x.data());
  EXPECT_LT(max_scaled_diff(y, ref_layer(cfg, r.ps, x, r.tabs, B, Tn)), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionLayer,
                         ::testing::Values(Case{true, 2, false}, Case{false, 2, false}, Case{true, 4, false}, Case{false, 4, true},
                                           Case{true, 2, true}),
                         [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

TEST(AttentionLayerSetup, ParameterNamesAndShapes) {
  Rig<double> r(attn_config(true, 2), B, Tn, tables(false));
  const std::vector<std::pair<std::string, Shape>> expect = {{"q_proj.weight", {16, D}}, {"k_proj.weight", {8, D}},
                                                             {"v_proj.weight", {8, D}},  {"o_proj.weight", {D, 16}},
                                                             {"q_norm.weight", {4}},     {"k_norm.weight", {4}}};
  ASSERT_EQ(r.ps.specs().size(), expect.size());
  for (const auto& [name, shape] : expect) {
    ASSERT_TRUE(r.ps.has(kPrefix + name)) << name;
    EXPECT_EQ(r.ps.spec(kPrefix + name).shape, shape) << name;
  }
  Rig<double> r2(attn_config(false, 2), B, Tn, tables(false));
  EXPECT_FALSE(r2.ps.has(kPrefix + "q_norm.weight"));
  EXPECT_EQ(r2.ps.specs().size(), 4u);
}

TEST(AttentionLayerSetup, ForwardAccumulatesIntoY) {
  Rig<double> r(attn_config(true, 2), B, Tn, tables(false));
  randomize_store(r.ps, 6);
  const auto x = randn_vec(std::size_t(r.N()) * D, 7);
  const auto y = r.forward(x.data());
  std::vector<double> y2 = randn_vec(y.size(), 8);
  const std::vector<double> y0 = y2;
  r.layer.forward(r.be, r.w(), r.cache, x.data(), y2.data(), r.shape());
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y2[i], y0[i] + y[i], 1e-13);
}

// Spec invariant 6 at the layer level: a row packing documents [0, 3) and [3, 5) (pos restarting at
// 3, first = 3 there) equals the two documents run on their own.
TEST(AttentionLayerSetup, PackedDocumentsEqualSeparateRuns) {
  for (bool qk : {true, false}) {
    const ModelConfig cfg = attn_config(qk, 2);
    Rig<double> packed(cfg, 1, 5, pass_tables(1, 5, {{3}}));
    randomize_store(packed.ps, 9);
    const auto x = randn_vec(5 * D, 10);
    const auto y = packed.forward(x.data());
    Rig<double> a(cfg, 1, 3, pass_tables(1, 3)), b(cfg, 1, 2, pass_tables(1, 2));
    copy_values(a.ps, packed.ps), copy_values(b.ps, packed.ps);
    const auto ya = a.forward(x.data());
    const auto yb = b.forward(x.data() + 3 * D);
    for (int i = 0; i < 3 * D; ++i) EXPECT_NEAR(y[i], ya[i], 1e-13) << "qk " << qk << " i " << i;
    for (int i = 0; i < 2 * D; ++i) EXPECT_NEAR(y[3 * D + i], yb[i], 1e-13) << "qk " << qk << " i " << i;
    // and without the mask the second document does see the first (the test can tell the difference)
    Rig<double> leaky(cfg, 1, 5, PassTables{{0, 1, 2, 0, 1}, {0, 0, 0, 0, 0}});
    copy_values(leaky.ps, packed.ps);
    const auto yl = leaky.forward(x.data());
    EXPECT_GT(max_scaled_diff(yl, y), 1e-3);
  }
}

}  // namespace

}  // namespace test_layers_attention_layer
