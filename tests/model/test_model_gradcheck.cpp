// Whole-model and K-pass chain gradients against central finite differences in double (spec invariant 5).
// Error measure: normwise relative error (tests/common/gradcheck.hpp), required < 1e-6.
#include <gtest/gtest.h>

#include "common/tiny_model.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_model_gradcheck {

using namespace fbt;
using namespace fbt_test;

namespace {

struct Case {
  std::string fuser;
  int K;
  std::string source = "post_final_norm";
  std::string input_norm = "all";
  bool docs = false;
  bool prefix = false;
  bool hetero = false;  // three blocks of different heads and MLP widths
  bool paper = false;   // the paper's norms (spec 10): gate_norm shared, in_norm_init embedding, block_norm sandwich
  bool window = false;  // three blocks: sliding (W 2), full, sliding (Hugging Face layer_types), W < T and < a document
};

std::string name_of(const Case& c);
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

std::string name_of(const Case& c) {
  return c.fuser + "_K" + std::to_string(c.K) + (c.source == "pre_final_norm" ? "_pre" : c.source == "layer" ? "_tap0" : "") +
         (c.input_norm == "fused_only" ? "_fusedonly" : c.input_norm == "feedback_passes" ? "_fbpasses" : "") + (c.paper ? "_papernorms" : "") +
         (c.docs ? "_docs" : "") + (c.prefix ? "_prefix" : "") + (c.hetero ? "_hetero" : "") + (c.window ? "_window" : "");
}

class ModelGrad : public ::testing::TestWithParam<Case> {};

template <class M> void check_case(const Case& c, const ModelConfig& cfg);

TEST_P(ModelGrad, BackwardMatchesFiniteDifference) {
  const Case c = GetParam();
  ModelConfig cfg = tiny_config(c.fuser);
  cfg.feedback_source = c.source;
  if (c.source == "layer") cfg.feedback_layer = 0;  // the first block's output of two (or three) is fed back
  cfg.input_norm = c.input_norm;
  if (c.paper) cfg.gate_norm = cfg.feedback() ? "shared" : "separate", cfg.in_norm_init = "embedding", cfg.block_norm = "sandwich";
  if (c.hetero)
    cfg.num_hidden_layers = 3, cfg.head_dim = 4, cfg.layer_num_attention_heads = {2, 4, 1}, cfg.layer_num_key_value_heads = {1, 2, 1},
    cfg.layer_intermediate_size = {12, 6, 16};
  if (c.window) cfg.num_hidden_layers = 3, cfg.sliding_window = 2, cfg.layer_types = {"sliding_attention", "full_attention", "sliding_attention"};
  with_model<double>(cfg, [&](auto tag) { check_case<typename decltype(tag)::type>(c, cfg); });
}

template <class M> void check_case(const Case& c, const ModelConfig& cfg) {
  M m(cfg, 1);
  randomize(m, 2);
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 3);
  tb.targets[4] = -1;                      // an ignored target
  tb.doc_start[3] = 1, tb.doc_start[8] = 1;  // documents inside rows (used when c.docs)
  std::vector<int> prefix(std::size_t(c.K) * 2, 0);
  if (c.prefix) prefix = std::vector<int>(std::size_t(c.K) * 2, 2);
  StepOptions o;
  o.K = c.K, o.lambda = 0.7, o.prefix = prefix.data();
  Workspace<M> w;
  const Batch b = tb.batch(c.docs);

  m.params.zero_grad();
  const StepStats st = multipass_step(m, w, b, o);
  std::vector<double> grad(m.params.grads(), m.params.grads() + m.params.size());

  // the full chain (no detach): the objective is sum_j w_j L_j, every pass a function of the parameters
  auto objective = [&]() {
    StepOptions f = o;
    f.backward = false;
    return multipass_step(m, w, b, f).objective;
  };
  EXPECT_NEAR(st.objective, objective(), 1e-12);
  const GradCheck r = check_gradient(objective, m.params.values(), grad.data(), m.params.size());
  std::printf("  %s: %zu params, rel err %.3g, |g_fd| %.3g\n", name_of(c).c_str(), m.params.size(), r.err, r.norm);
  EXPECT_LT(r.err, 1e-6) << name_of(c) << " max_abs " << r.max_abs;
  EXPECT_GT(r.norm, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Chains, ModelGrad,
    ::testing::Values(Case{"none", 1}, Case{"glu", 1}, Case{"glu", 2}, Case{"glu", 3},
                      Case{"gated_add", 3}, Case{"concat", 3}, Case{"glu", 3, "pre_final_norm"},
                      Case{"glu", 3, "post_final_norm", "fused_only"}, Case{"glu", 3, "post_final_norm", "all", true},
                      Case{"glu", 3, "post_final_norm", "all", false, true}, Case{"glu", 3, "layer"}, Case{"concat", 3, "layer"},
                      Case{"glu", 3, "post_final_norm", "all", true, false, true}, Case{"gated_add", 3, "layer", "all", false, false, true},
                      Case{"none", 1, "post_final_norm", "all", false, false, true},
                      // the paper's recipe: no N_in on pass 1, the one N_in shared with the gate, sandwich blocks
                      Case{"glu", 2, "post_final_norm", "feedback_passes"}, Case{"glu", 3, "post_final_norm", "feedback_passes", true, true, false, true},
                      Case{"gated_add", 3, "post_final_norm", "feedback_passes", false, true, false, true},
                      Case{"concat", 3, "post_final_norm", "feedback_passes", true, false, false, true},
                      Case{"none", 1, "post_final_norm", "all", true, false, false, true},
                      // sliding-window layers in a mixed stack, with documents (window starts max(doc start, t - W + 1))
                      Case{"none", 1, "post_final_norm", "all", true, false, false, false, true},
                      Case{"glu", 3, "post_final_norm", "all", true, true, false, false, true},
                      Case{"concat", 2, "post_final_norm", "feedback_passes", true, false, false, true, true}),
    [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

}  // namespace

}  // namespace test_model_model_gradcheck
