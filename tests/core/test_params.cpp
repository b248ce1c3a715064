// The flat parameter store and the model's name table (spec sections 1, 2, 8, 9): Qwen3 checkpoint names,
// (out, in) shapes, the seeded init (normal 0.02; o_proj and down_proj 0.02/sqrt(2L); norms 1; fuser inits),
// the weight-decay mask (matrices only). Gradients and AdamW moments are allocated, zeroed, on first use
// (once, also under concurrent first use); a store in planning mode records a layout without
// allocating it, and Model::plan gives exactly the layout the model builds.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <thread>
#include <vector>

#include "fbt/model/model.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_core_params {

using namespace fbt;

namespace {

double sample_std(const double* p, std::size_t n) {
  double s = 0, ss = 0;
  for (std::size_t i = 0; i < n; ++i) s += p[i], ss += p[i] * p[i];
  const double m = s / n;
  return std::sqrt(ss / n - m * m);
}

TEST(ParamStore, RefusesDuplicatesAndZeroDims) {
  ParamStore<float> ps;
  ps.add("a", {2, 3}, Init::Normal, 0.02);
  EXPECT_THROW(ps.add("a", {2}, Init::Ones), Error);
  EXPECT_THROW(ps.add("b", {0, 3}, Init::Ones), Error);
  ps.finalize();
  EXPECT_THROW(ps.add("c", {2}, Init::Ones), Error);
  EXPECT_THROW(ps.spec("nope"), Error);
}

TEST(ParamStore, LayoutIsFlatAndContiguous) {
  ParamStore<double> ps;
  EXPECT_EQ(ps.add("w", {4, 3}, Init::Normal, 1.0), 0u);
  EXPECT_EQ(ps.add("g", {3}, Init::Ones), 12u);
  ps.finalize();
  EXPECT_EQ(ps.size(), 15u);
  EXPECT_TRUE(ps.spec("w").decay);
  EXPECT_FALSE(ps.spec("g").decay);
  ps.init(1);
  EXPECT_EQ(ps.value("g")[2], 1.0);
  std::vector<double> first(ps.values(), ps.values() + 15);
  ps.init(1);
  EXPECT_EQ(std::vector<double>(ps.values(), ps.values() + 15), first) << "seeded init is deterministic";
  ps.init(2);
  EXPECT_NE(std::vector<double>(ps.values(), ps.values() + 15), first);
}

TEST(ModelParams, UseQwen3NamesAndShapes) {
  ModelConfig c;
  c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2, c.intermediate_size = 48;
  c.vocab_size = 50;
  Model<double> m(c, 0);
  std::set<std::string> names;
  for (const auto& s : m.params.specs()) names.insert(s.name);
  const std::set<std::string> expected = {
      "model.embed_tokens.weight", "model.norm.weight", "model.feedback.in_norm.weight", "model.feedback.w_u.weight",
      "model.feedback.w_g.weight", "model.feedback.gate_norm.weight",
      "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
      "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
      "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
      "model.layers.1.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight",
      "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight",
      "model.layers.1.self_attn.o_proj.weight", "model.layers.1.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight",
      "model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(m.params.spec("model.layers.1.self_attn.k_proj.weight").shape, (Shape{16, 32}));  // (out, in)
  EXPECT_EQ(m.params.spec("model.layers.1.mlp.down_proj.weight").shape, (Shape{32, 48}));
  EXPECT_EQ(m.params.spec("model.layers.1.self_attn.q_norm.weight").shape, (Shape{8}));
  c.tie_word_embeddings = false;
  c.fuser = "none";
  Model<double, NoFuser<double>> u(c, 0);
  EXPECT_TRUE(u.params.has("lm_head.weight"));
  EXPECT_FALSE(u.params.has("model.feedback.in_norm.weight"));
  c.fuser = "gated_add";
  Model<double, GatedAddFuser<double>> g(c, 0);
  EXPECT_EQ(g.params.spec("model.feedback.w_g.weight").shape, (Shape{32, 64}));
  EXPECT_EQ(g.params.spec("model.feedback.w_g.bias").shape, (Shape{32}));
  EXPECT_TRUE(g.params.has("model.feedback.state_norm.weight"));
  c.fuser = "concat";
  Model<double, ConcatFuser<double>> cc(c, 0);
  EXPECT_EQ(cc.params.spec("model.feedback.w_c.weight").shape, (Shape{32, 64}));
}

TEST(ParamRegistry, ScopesNamesAndSharesConstantsByKey) {
  ParamStore<float> ps;
  const ParamRegistry<float> root(ps), layer = root.scope("model").scope("layers").scope("3");
  EXPECT_EQ(layer.prefix(), "model.layers.3.");
  const std::size_t w = layer.scope("mlp").add("up_proj.weight", {4, 2}, Init::Normal, 0.02);
  EXPECT_TRUE(ps.has("model.layers.3.mlp.up_proj.weight"));
  EXPECT_EQ(w, 0u);
  int fills = 0;
  const auto fill = [&](float* p) { ++fills, p[0] = 7.f, p[1] = 8.f; };
  const std::size_t a = root.constant("table", 2, fill), b = layer.constant("table", 2, fill), c = root.constant("other", 3, fill);
  EXPECT_EQ(a, b) << "one constant per key, whoever asks";
  EXPECT_NE(a, c);
  EXPECT_EQ(fills, 2);
  ps.finalize();
  EXPECT_EQ(ps.constants()[a + 1], 8.f);
  EXPECT_EQ(ps.specs().size(), 1u) << "constants are not parameters";
}

TEST(ModelParams, InitFollowsTheSpec) {
  ModelConfig c;
  c.hidden_size = 128, c.num_hidden_layers = 8, c.intermediate_size = 256;
  Model<double> m(c, 3);
  const auto& q = m.params.spec("model.layers.3.self_attn.q_proj.weight");
  const auto& o = m.params.spec("model.layers.3.self_attn.o_proj.weight");
  const auto& d = m.params.spec("model.layers.3.mlp.down_proj.weight");
  EXPECT_NEAR(sample_std(m.params.values() + q.offset, q.size), 0.02, 0.002);
  EXPECT_NEAR(sample_std(m.params.values() + o.offset, o.size), 0.02 / std::sqrt(16.0), 0.0005);
  EXPECT_NEAR(sample_std(m.params.values() + d.offset, d.size), 0.02 / std::sqrt(16.0), 0.0005);
  for (const char* g : {"model.norm.weight", "model.layers.0.input_layernorm.weight", "model.feedback.in_norm.weight",
                        "model.feedback.gate_norm.weight", "model.layers.0.self_attn.k_norm.weight"})
    EXPECT_EQ(m.params.value(g)[5], 1.0) << g;
  // glu: W_U = I, W_G ~ N(0, 1e-6 / D)
  const double* wu = m.params.value("model.feedback.w_u.weight");
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < 128; ++j) ASSERT_EQ(wu[i * 128 + j], i == j ? 1.0 : 0.0);
  const auto& wg = m.params.spec("model.feedback.w_g.weight");
  EXPECT_NEAR(sample_std(m.params.values() + wg.offset, wg.size), std::sqrt(1e-6 / 128), 0.05 * std::sqrt(1e-6 / 128));
  // knobs
  c.glu_init = "identity_both";
  Model<double> ib(c, 3);
  EXPECT_EQ(ib.params.value("model.feedback.w_g.weight")[129], 1.0);
  c.glu_init = "fan_in";
  Model<double> fi(c, 3);
  const auto& fg = fi.params.spec("model.feedback.w_g.weight");
  EXPECT_NEAR(sample_std(fi.params.values() + fg.offset, fg.size), 1.0 / std::sqrt(128.0), 0.01);
  // concat: [0 | I]; gated_add: W_s = 0
  c.glu_init = "default";
  c.fuser = "concat";
  Model<double, ConcatFuser<double>> cc(c, 3);
  const double* wc = cc.params.value("model.feedback.w_c.weight");
  EXPECT_EQ(wc[0 * 256 + 0], 0.0);
  EXPECT_EQ(wc[0 * 256 + 128], 1.0);
  EXPECT_EQ(wc[5 * 256 + 133], 1.0);
  c.fuser = "gated_add";
  Model<double, GatedAddFuser<double>> ga(c, 3);
  const auto& ws = ga.params.spec("model.feedback.w_s.weight");
  for (std::size_t i = 0; i < ws.size; ++i) ASSERT_EQ(ga.params.values()[ws.offset + i], 0.0);
}

TEST(ParamStore, GradientsAndMomentsAreAllocatedOnFirstUse) {
  ParamStore<double> ps;
  ps.add("w", {4, 3}, Init::Normal, 1.0);
  ps.add("g", {3}, Init::Ones);
  ps.finalize();
  ps.init(1);
  EXPECT_FALSE(ps.has_grads());
  EXPECT_FALSE(ps.has_moments());
  EXPECT_EQ(ps.allocated_bytes(), 15 * sizeof(double)) << "values only";
  const ParamStore<double>& cps = ps;
  EXPECT_EQ(cps.values()[12], 1.0);  // reading values allocates nothing
  EXPECT_FALSE(ps.has_grads());
  ps.grad("g")[1] = 5.0;  // the first use allocates the gradients, zeroed
  EXPECT_TRUE(ps.has_grads());
  EXPECT_FALSE(ps.has_moments());
  for (int i = 0; i < 15; ++i) EXPECT_EQ(ps.grads()[i], i == 13 ? 5.0 : 0.0);
  EXPECT_EQ(cps.adam_m()[14], 0.0);  // const access too: the moments, both, zeroed
  EXPECT_TRUE(ps.has_moments());
  EXPECT_EQ(ps.adam_v()[0], 0.0);
  EXPECT_EQ(ps.allocated_bytes(), 4 * 15 * sizeof(double));
  ps.zero_grad();
  EXPECT_EQ(ps.grads()[13], 0.0);
  // A copy has its own buffers.
  ParamStore<double> copy = ps;
  copy.grads()[0] = 2.0;
  EXPECT_EQ(ps.grads()[0], 0.0);
  EXPECT_TRUE(copy.has_moments());
  // Before finalize nothing is allocated, whatever asks.
  ParamStore<float> early;
  early.add("x", {2}, Init::Zeros);
  early.grads();
  EXPECT_FALSE(early.has_grads());
}

TEST(ParamStore, ConcurrentFirstUseAllocatesOnce) {
  for (int round = 0; round < 20; ++round) {
    ParamStore<float> ps;
    ps.add("w", {64, 64}, Init::Zeros);
    ps.finalize();
    std::vector<float*> got(8, nullptr), moments(8, nullptr);
    std::vector<std::thread> th;
    for (int t = 0; t < 8; ++t) th.emplace_back([&, t] { got[t] = ps.grads(), moments[t] = ps.adam_m(); });
    for (auto& t : th) t.join();
    for (int t = 1; t < 8; ++t) {
      EXPECT_EQ(got[t], got[0]);
      EXPECT_EQ(moments[t], moments[0]);
    }
    EXPECT_EQ(ps.allocated_bytes(), 4 * 64 * 64 * sizeof(float));
  }
}

TEST(ParamStore, PlanningModeAllocatesNothing) {
  ParamStore<float> ps;
  ps.plan_only();
  int fills = 0;
  EXPECT_EQ(ps.add("big", {1 << 20, 1 << 16}, Init::Normal, 0.02), 0u);  // 2^36 elements: recorded, not allocated
  const std::size_t c = ParamRegistry<float>(ps).constant("table", std::size_t(1) << 30, [&](float*) { ++fills; });
  EXPECT_EQ(c, 0u);
  EXPECT_EQ(fills, 0);
  const ParamLayout l = ps.layout();
  EXPECT_EQ(l.params, std::size_t(1) << 36);
  EXPECT_EQ(l.constants, std::size_t(1) << 30);
  EXPECT_EQ(ps.allocated_bytes(), 0u);
  EXPECT_THROW(ps.finalize(), Error);
}

// Model::plan lists exactly the tensors the model declares (names, shapes, offsets) and the size of its
// constants, and ModelConfig::parameter_count agrees for every built-in fuser and a heterogeneous stack.
TEST(ModelParams, PlanMatchesTheBuiltModel) {
  ModelConfig c;
  c.hidden_size = 32, c.num_hidden_layers = 3, c.num_attention_heads = 4, c.num_key_value_heads = 2, c.intermediate_size = 48;
  c.vocab_size = 50, c.max_position_embeddings = 128;
  for (int variant = 0; variant < 3; ++variant)  // uniform, heterogeneous, uniform with the paper's norms
    for (bool tied : {true, false})
      for (const char* f : {"none", "glu", "gated_add", "concat"}) {
        const bool hetero = variant == 1;
        ModelConfig k = c;
        k.fuser = f, k.tie_word_embeddings = tied, k.qk_norm = !hetero;
        if (variant == 2) k.block_norm = "sandwich", k.gate_norm = k.feedback() ? "shared" : "separate", k.in_norm_init = "embedding";
        if (hetero) k.layer_intermediate_size = {48, 96, 24}, k.layer_num_attention_heads = {4, 2, 4}, k.layer_num_key_value_heads = {2, 2, 1};
        with_model<float>(k, [&](auto tag) {
          using M = typename decltype(tag)::type;
          const ParamLayout plan = M::plan(k);
          const M m(k, 0);
          ASSERT_EQ(plan.specs.size(), m.params.specs().size()) << f;
          for (std::size_t i = 0; i < plan.specs.size(); ++i) {
            EXPECT_EQ(plan.specs[i].name, m.params.specs()[i].name);
            EXPECT_EQ(plan.specs[i].shape, m.params.specs()[i].shape);
            EXPECT_EQ(plan.specs[i].offset, m.params.specs()[i].offset);
          }
          EXPECT_EQ(plan.params, m.params.size());
          EXPECT_EQ(plan.constants, m.params.constants_size());
          EXPECT_EQ(k.parameter_count(), std::uint64_t(m.params.size())) << f << (tied ? " tied" : " untied") << (hetero ? " hetero" : "");
        });
      }
  // A plan of a model far too large to build costs nothing: 2^22 x 4096 embedding = 2^34 parameters.
  ModelConfig big = c;
  big.vocab_size = 1 << 22, big.hidden_size = 4096, big.num_hidden_layers = 1, big.num_attention_heads = 32, big.num_key_value_heads = 8;
  const ParamLayout bp = Model<float>::plan(big);
  EXPECT_GT(bp.params, std::size_t(1) << 34);
  EXPECT_EQ(std::uint64_t(bp.params), big.parameter_count());
}

}  // namespace

}  // namespace test_core_params
