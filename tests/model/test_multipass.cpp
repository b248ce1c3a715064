// The K-pass objective's knobs (spec section 3): detach, grad_passes, lambda, jitter, memory report.
// Gradients are checked against central finite differences in double of the objective each knob
// defines (error measure: normwise relative error, tests/common/gradcheck.hpp, required < 1e-6):
//   detach:          sum_j w_j L_j(theta; S_j frozen at its value in this step)
//   grad_passes = g: sum_{j > K-g} w_j L_j(theta; the state fed into pass K-g+1 frozen), chain after it
#include <gtest/gtest.h>

#include "common/pass_runner.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_multipass {

using namespace fbt;
using namespace fbt_test;

namespace {

struct Knobs {
  int K;
  bool detach;
  int g;
};

class Knob : public ::testing::TestWithParam<Knobs> {};

TEST_P(Knob, BackwardMatchesFiniteDifferenceOfItsObjective) {
  const Knobs k = GetParam();
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 4);
  randomize(m, 5);
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 6);
  const Batch b = tb.batch();
  StepOptions o;
  o.K = k.K, o.detach = k.detach, o.grad_passes = k.g, o.lambda = 0.8;
  Workspace<Model<double>> w;
  m.params.zero_grad();
  const StepStats st = multipass_step(m, w, b, o);
  std::vector<double> grad(m.params.grads(), m.params.grads() + m.params.size());

  const int fg = k.g ? k.K - k.g : 0;
  const PassRun at0 = run_passes(m, b, k.K);
  for (int j = 0; j < k.K; ++j) EXPECT_NEAR(st.loss[j], at0.loss[j], 1e-12) << "pass " << j + 1;
  // frozen states: every pass under detach, the first gradient pass under grad_passes
  std::vector<std::vector<double>> fixed(k.K);
  for (int j = 1; j < k.K; ++j)
    if (k.detach || j == fg) fixed[j] = at0.source[j - 1];
  auto objective = [&]() {
    const PassRun r = run_passes(m, b, k.K, nullptr, &fixed);
    double obj = 0;
    for (int j = fg; j < k.K; ++j) obj += (j == 0 ? 1.0 : o.lambda / (k.K - 1)) * r.loss[j];
    return obj;
  };
  const GradCheck r = check_gradient(objective, m.params.values(), grad.data(), m.params.size());
  std::printf("  K=%d detach=%d g=%d: rel err %.3g, |g_fd| %.3g\n", k.K, int(k.detach), k.g, r.err, r.norm);
  EXPECT_LT(r.err, 1e-6);
  EXPECT_GT(r.norm, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(DetachAndGradPasses, Knob,
                         ::testing::Values(Knobs{2, true, 0}, Knobs{3, true, 0}, Knobs{3, false, 1}, Knobs{3, false, 2},
                                           Knobs{3, true, 1}));

TEST(MultiPass, DetachDiffersFromFullChainAndGradPassesOneSkipsEarlyPasses) {
  // the knobs must change the gradient (else the tests above could not tell them apart)
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 4);
  randomize(m, 5);
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 6);
  Workspace<Model<double>> w;
  auto grads = [&](StepOptions o) {
    m.params.zero_grad();
    multipass_step(m, w, tb.batch(), o);
    return std::vector<double>(m.params.grads(), m.params.grads() + m.params.size());
  };
  StepOptions full;
  full.K = 3;
  StepOptions det = full;
  det.detach = true;
  const auto gf = grads(full), gd = grads(det);
  double diff = 0;
  for (std::size_t i = 0; i < gf.size(); ++i) diff = std::max(diff, std::abs(gf[i] - gd[i]));
  EXPECT_GT(diff, 1e-4);
}

TEST(MultiPass, LambdaWeightsTheFedBackPasses) {
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 4);
  randomize(m, 5);
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 6);
  Workspace<Model<double>> w;
  StepOptions o;
  o.K = 3, o.lambda = 0.6, o.backward = false;
  const StepStats s = multipass_step(m, w, tb.batch(), o);
  EXPECT_DOUBLE_EQ(s.weight[0], 1.0);
  EXPECT_DOUBLE_EQ(s.weight[1], 0.3);
  EXPECT_DOUBLE_EQ(s.weight[2], 0.3);
  EXPECT_NEAR(s.objective, s.loss[0] + 0.3 * (s.loss[1] + s.loss[2]), 1e-12);
}

TEST(MultiPass, JitterIsSeededAndOnlyMovesFedBackPasses) {
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 4);
  randomize(m, 5);
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 6);
  Workspace<Model<double>> w;
  auto run = [&](double sigma, std::uint64_t seed) {
    Rng rng(seed);
    StepOptions o;
    o.K = 3, o.sigma = sigma, o.rng = &rng;
    m.params.zero_grad();
    return multipass_step(m, w, tb.batch(), o);
  };
  const StepStats a = run(0.05, 7), b = run(0.05, 7), c = run(0.05, 8), z = run(0.0, 7);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(a.loss[j], b.loss[j]) << "same seed, same losses";
  EXPECT_EQ(a.loss[0], z.loss[0]) << "pass 1 has no fed-back state";
  EXPECT_NE(a.loss[1], z.loss[1]);
  EXPECT_NE(a.loss[1], c.loss[1]);
}

TEST(MultiPass, WorkspaceSizeIsKnownBeforeTheStepAndGrowsWithLivePasses) {
  ModelConfig cfg = tiny_config("glu");
  Model<float> m(cfg, 1);
  StepOptions o1, o2, o3, o3d, o3g1;
  o2.K = 2;
  o3.K = o3d.K = o3g1.K = 3;
  o3d.detach = true;
  o3g1.grad_passes = 1;
  const std::size_t b1 = step_workspace_bytes(m, 4, 16, o1), b2 = step_workspace_bytes(m, 4, 16, o2), b3 = step_workspace_bytes(m, 4, 16, o3);
  const std::size_t b3d = step_workspace_bytes(m, 4, 16, o3d), b3g = step_workspace_bytes(m, 4, 16, o3g1);
  EXPECT_GT(b2, b1);           // without detach every pass is live:
  EXPECT_EQ(b3 - b2, b2 - b1);  // each adds the same pass slot
  EXPECT_EQ(b3d, b1);     // detach keeps one pass
  EXPECT_EQ(b3g, b1);     // grad_passes = 1 keeps one pass
  TinyBatch tb = tiny_batch(4, 16, cfg.vocab_size, 1);
  Workspace<Model<float>> w;
  multipass_step(m, w, tb.batch(), o3);
  EXPECT_EQ(w.bytes(), b3);
  EXPECT_EQ(w.mem.size() * sizeof(float) + w.ints.size() * sizeof(int), b3) << "the step allocated exactly what was reported";
}

TEST(MultiPass, BadOptionsAreRefusedWithTheirName) {
  ModelConfig cfg = tiny_config("none");
  Model<double, NoFuser<double>> m(cfg, 1);
  TinyBatch tb = tiny_batch(1, 4, cfg.vocab_size, 1);
  Workspace<Model<double, NoFuser<double>>> w;
  StepOptions o;
  o.K = 2;
  try {
    multipass_step(m, w, tb.batch(), o);
    FAIL() << "K = 2 on a baseline model must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K = 2"), std::string::npos) << e.what();
  }
  o.K = 1, o.sigma = 0.1;  // sigma without an rng
  EXPECT_THROW(multipass_step(m, w, tb.batch(), o), Error);
  tb.tokens[2] = 99;  // outside the vocabulary
  o.sigma = 0;
  try {
    multipass_step(m, w, tb.batch(), o);
    FAIL() << "bad token must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
  }
}

TEST(MultiPass, NonFiniteLossNamesThePass) {
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 1);
  TinyBatch tb = tiny_batch(1, 4, cfg.vocab_size, 1);
  m.params.value("model.feedback.w_u.weight")[0] = std::numeric_limits<double>::quiet_NaN();
  Workspace<Model<double>> w;
  StepOptions o;
  o.K = 2;
  try {
    multipass_step(m, w, tb.batch(), o);
    FAIL() << "NaN must stop the step";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass 2"), std::string::npos) << e.what();
  }
}

}  // namespace

}  // namespace test_model_multipass
