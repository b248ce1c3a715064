// tests/model/test_bf16_input_scopes.cpp: the model's layers keep the input-scope contract of bf16 products
// (ops/bf16_weights.hpp: a block marked constant by a scope is not written while the scope is open).
//
// Checks: a K-pass step in bf16 gives the same losses and gradients, bit for bit, with the layers' input
// scopes open (each input rounded once per layer) and with none (every product rounds its own operands),
// for the decoder block and the sandwich-norm block, GQA, and three fusers; and the scopes did serve products
// from copies made before them (the comparison is not between two identical paths).
#include <gtest/gtest.h>

#include "common/pass_runner.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_bf16_input_scopes {

using namespace fbt;
using namespace fbt_test;

namespace {

/// One K = 3 step of Model<float, F> on fuser `fuser`, with and without the input scopes.
template <class F> void expect_same_step(const std::string& fuser, bool sandwich) {
  ModelConfig cfg = tiny_config(fuser);
  cfg.hidden_size = 32, cfg.intermediate_size = 48, cfg.num_attention_heads = 4, cfg.num_key_value_heads = 2;
  if (sandwich) cfg = paper_norms(cfg);
  using M = Model<float, F>;
  M m(cfg, 4);
  randomize(m, 11);
  const TinyBatch tb = tiny_batch(2, 12, cfg.vocab_size, 12);  // 24 rows: oneDNN's products, not the row kernel
  StepOptions o;
  o.K = 3, o.lambda = 0.8;
  ScopedMatmulPrecision bf16(Precision::bf16);
  auto step = [&](bool scopes, StepStats& st) {
    detail::bf16_inputs_disabled().store(!scopes);
    Workspace<M> w;
    m.params.zero_grad();
    st = multipass_step(m, w, tb.batch(), o);
    detail::bf16_inputs_disabled().store(false);
    return std::vector<float>(m.params.grads(), m.params.grads() + m.params.size());
  };
  const std::string what = "fuser " + fuser + (sandwich ? ", sandwich norms" : "");
  StepStats off, on;
  const std::vector<float> g_off = step(false, off);
  const long reused_before = detail::bf16_inputs().reused;
  const std::vector<float> g_on = step(true, on);
  EXPECT_GT(detail::bf16_inputs().reused, reused_before) << what << ": no product read a copy made before it";
  for (int j = 0; j < o.K; ++j) EXPECT_EQ(on.loss[std::size_t(j)], off.loss[std::size_t(j)]) << what << ", pass " << j + 1;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < g_on.size(); ++i) differ += g_on[i] != g_off[i];
  EXPECT_EQ(differ, 0u) << what << ": gradients that differ, of " << g_on.size();
}

}  // namespace

TEST(Bf16InputScopes, AKPassStepIsTheSameWithAndWithoutThem) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
#if defined(FBT_HAVE_DNNL)
  if (!detail::dnnl_has_bf16_matmul()) GTEST_SKIP() << "the bf16 fallback (no AVX-512) rounds per product: no copies to compare";
#endif
  for (bool sandwich : {false, true}) {
    expect_same_step<GluFuser<float>>("glu", sandwich);
    expect_same_step<ConcatFuser<float>>("concat", sandwich);
    expect_same_step<GatedAddFuser<float>>("gated_add", sandwich);
  }
}

}  // namespace test_model_bf16_input_scopes
