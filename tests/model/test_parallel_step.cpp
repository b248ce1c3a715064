// A step split across threads by batch rows equals the one-thread step (double; 1e-12 relative on losses
// and on the gradient's max entry: only the order of sums differs), jitter included.
#include <gtest/gtest.h>

#include "common/tiny_model.hpp"
#include "fbt/model/parallel_step.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_parallel_step {

using namespace fbt;
using namespace fbt_test;

namespace {

struct Knobs {
  std::string fuser;
  int K;
  bool detach;
  int g;
};

class Parallel : public ::testing::TestWithParam<Knobs> {};

template <class M> void parallel_case(const Knobs& k, const ModelConfig& cfg) {
  M m(cfg, 1);
  randomize(m, 2);
  TinyBatch tb = tiny_batch(5, 7, cfg.vocab_size, 3);  // 5 rows: uneven shares
  tb.doc_start[4] = 1, tb.doc_start[20] = 1, tb.targets[9] = -1;
  std::vector<int> prefix(std::size_t(k.K) * 5);
  for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] = int(i % 4);
  StepOptions o;
  o.K = k.K, o.detach = k.detach, o.grad_passes = k.g, o.sigma = k.K > 1 ? 0.05 : 0.0, o.prefix = prefix.data(), o.lambda = 0.7;

  Rng r1(9);
  o.rng = &r1;
  Workspace<M> w;
  StepStats s1;
  m.params.zero_grad();
  multipass_step(m, w, tb.batch(true), o, s1);
  const std::vector<double> g1(m.params.grads(), m.params.grads() + m.params.size());
  double gmax = 0;
  for (double v : g1) gmax = std::max(gmax, std::abs(v));

  for (int threads : {2, 3}) {
    Rng r2(9);
    o.rng = &r2;
    ParallelStepper<M> ps(m, threads);
    StepStats s2;
    m.params.zero_grad();
    ps.step(tb.batch(true), o, s2);
    for (int j = 0; j < k.K; ++j) EXPECT_NEAR(s2.loss[j], s1.loss[j], 1e-12 * s1.loss[j]) << threads << " threads, pass " << j + 1;
    EXPECT_NEAR(s2.objective, s1.objective, 1e-12 * s1.objective);
    EXPECT_EQ(s2.targets, s1.targets);
    double d = 0;
    for (std::size_t i = 0; i < g1.size(); ++i) d = std::max(d, std::abs(m.params.grads()[i] - g1[i]));
    EXPECT_LT(d, 1e-12 * gmax) << threads << " threads";
    EXPECT_EQ(r2.state(), r1.state()) << "the caller's Rng advances as for one thread";
  }
}

TEST_P(Parallel, EqualsTheOneThreadStep) {
  const Knobs k = GetParam();
  ModelConfig cfg = tiny_config(k.fuser);
  with_model<double>(cfg, [&](auto tag) { parallel_case<typename decltype(tag)::type>(k, cfg); });
}

INSTANTIATE_TEST_SUITE_P(Knobs, Parallel,
                         ::testing::Values(Knobs{"none", 1, false, 0}, Knobs{"glu", 3, false, 0}, Knobs{"gated_add", 2, false, 0},
                                           Knobs{"glu", 3, true, 0}, Knobs{"concat", 3, false, 1}));

TEST(Parallel, ForwardOnlyAndMoreThreadsThanRows) {
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 1);
  TinyBatch tb = tiny_batch(1, 6, cfg.vocab_size, 3);
  StepOptions o;
  o.K = 2, o.backward = false;
  Workspace<Model<double>> w;
  const StepStats s1 = multipass_step(m, w, tb.batch(), o);
  ParallelStepper<Model<double>> ps(m, 2);
  StepStats s2;
  ps.step(tb.batch(), o, s2);
  EXPECT_EQ(s1.loss, s2.loss);
}

}  // namespace

}  // namespace test_model_parallel_step
