// A step split across threads by batch rows equals the one-thread step (double; 1e-12 relative on losses
// and on the gradient's max entry: only the order of sums differs), jitter included. The grad_ready
// callback (what data-parallel training reduces early with) is called once per block, top block first,
// and when it is called for block l, block l's gradient in m.params is already the step's final one (bit
// for bit), on one thread and on several; block_param_ranges tiles the blocks' part of the buffer.
#include <gtest/gtest.h>

#include "common/tiny_model.hpp"
#include "fbt/model/parallel_step.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_parallel_step {

using namespace fbt;
using namespace fbt_test;

namespace {

/// grad_ready: copies block l's gradient when called with l.
template <class M> struct ReadyRecorder {
  const M* m;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  std::vector<int> order;
  std::vector<std::vector<typename M::Scalar>> seen;
  static void call(void* self, int l) {
    auto* r = static_cast<ReadyRecorder*>(self);
    r->order.push_back(l);
    const auto* g = r->m->params.grads();
    r->seen[l].assign(g + r->ranges[l].first, g + r->ranges[l].second);
  }
  void check(const std::string& what) const {
    std::vector<int> want;
    for (int l = m->L - 1; l >= 0; --l) want.push_back(l);
    EXPECT_EQ(order, want) << what << ": once per block, top first";
    const auto* g = m->params.grads();
    for (int l = 0; l < m->L; ++l)
      EXPECT_TRUE(std::equal(seen[l].begin(), seen[l].end(), g + ranges[l].first)) << what << ": block " << l << " changed after its callback";
  }
};

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

  // grad_ready: on one thread (the step itself) and on 2 and 3 (thread 0 adds the others' block first)
  ReadyRecorder<M> rec{&m, block_param_ranges(m), {}, {}};
  ASSERT_EQ(rec.ranges.size(), std::size_t(m.L));
  EXPECT_EQ(rec.ranges.back().second - rec.ranges.front().first,
            [&] { std::size_t n = 0; for (const auto& s : m.params.specs()) n += s.name.rfind("model.layers.", 0) == 0 ? s.size : 0; return n; }())
      << "the blocks' ranges tile their tensors";
  for (int threads : {1, 2, 3}) {
    Rng r3(9);
    o.rng = &r3, o.grad_ready = GradReady{&ReadyRecorder<M>::call, &rec};
    rec.order.clear(), rec.seen.assign(std::size_t(m.L), {});
    ParallelStepper<M> ps(m, threads);
    StepStats s3;
    m.params.zero_grad();
    ps.step(tb.batch(true), o, s3);
    rec.check(std::to_string(threads) + " thread(s)");
    double d = 0;
    for (std::size_t i = 0; i < g1.size(); ++i) d = std::max(d, std::abs(m.params.grads()[i] - g1[i]));
    EXPECT_LT(d, 1e-12 * gmax) << threads << " threads with grad_ready";
  }
  o.grad_ready = GradReady{};
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

TEST(Parallel, AFailingThreadDoesNotHangTheOthers) {  // thread 0 waits for the others' blocks in grad_ready
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 1);
  TinyBatch tb = tiny_batch(4, 6, cfg.vocab_size, 3);
  tb.tokens[4 * 6 - 1] = cfg.vocab_size + 1;  // the last thread's row
  int calls = 0;
  StepOptions o;
  o.K = 2, o.grad_ready = GradReady{[](void* c, int) { ++*static_cast<int*>(c); }, &calls};
  ParallelStepper<Model<double>> ps(m, 2);
  StepStats st;
  EXPECT_THROW(ps.step(tb.batch(), o, st), Error);
  EXPECT_EQ(calls, 0) << "no block is handed on when a thread failed";
}

}  // namespace

}  // namespace test_model_parallel_step
