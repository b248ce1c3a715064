// tests/mpi/mpi_step.cpp: the MPI communicator and the distributed K-pass step, run under
// `mpirun -np 2` (and -np 3) by ctest (tests/mpi/CMakeLists.txt); a plain run is a 1-rank world.
//
// Checks: the ordered all-reduce gives every rank the rank-order sum of every element, bit for bit the
// same as adding the ranks' buffers locally in rank order, for buffer sizes below, at and above the rank
// count; broadcast; agree() stops every rank with the failing rank's message; the distributed step on a
// tiny model (GLU fuser, K = 3, jitter, prefixes, document starts, uneven shares) equals the one-process
// step (double: losses and gradients within 1e-12 relative, only the order of sums differs) and is
// bit-identical when repeated; a bad row on one rank stops all ranks with that rank's message. The trainer
// over MPI: its losses and final parameters against a one-process trainer (float: 1e-5 relative), every
// rank holding the same parameters; a resume from rank 0's checkpoint continuing bit-identically; a rank
// that fails mid-run stopping every rank with the step and its message; diverged parameters detected.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/tiny_model.hpp"
#include "fbt/dist/distributed_step.hpp"
#include "fbt/dist/mpi_comm.hpp"
#include "fbt/train/trainer.hpp"

namespace test_mpi_step {

using namespace fbt;
using namespace fbt_test;

namespace {
MpiComm& world() {
  static MpiComm c;
  return c;
}
bool ds_threads_equal(const std::vector<double>& a, const std::vector<double>& b, double scale) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-12 * scale) return false;
  return true;
}
double value(int rank, std::size_t i) { return std::sin(1.0 + 0.37 * double(i) + 1.7 * rank) * std::pow(10.0, double(i % 7) - 3); }
}  // namespace

TEST(Mpi, OrderedAllreduceIsTheRankOrderSum) {
  MpiComm& c = world();
  for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(1000), std::size_t(12345)}) {
    std::vector<double> x(n);
    std::vector<float> xf(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = value(c.rank(), i), xf[i] = float(value(c.rank(), i));
    c.allreduce_sum(x.data(), n);
    c.allreduce_sum(xf.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      double e = value(0, i);
      float ef = float(value(0, i));
      for (int r = 1; r < c.size(); ++r) e += value(r, i), ef += float(value(r, i));
      ASSERT_EQ(x[i], e) << "n " << n << " element " << i;  // exact: the same additions in the same order
      ASSERT_EQ(xf[i], ef) << "n " << n << " element " << i;
    }
  }
}

TEST(Mpi, BroadcastAndAgree) {
  MpiComm& c = world();
  std::string s = c.rank() == 0 ? std::string("from rank 0: ") + std::string(100000, 'x') : "";
  c.broadcast(s, 0);
  EXPECT_EQ(s.size(), 13u + 100000u);
  EXPECT_NO_THROW(c.agree(true, "fine"));
  if (c.size() < 2) GTEST_SKIP() << "agree across ranks needs 2 ranks (run under mpirun -np 2)";
  try {
    c.agree(c.rank() != 1, "rank one's own words");
    FAIL() << "agree did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of " + std::to_string(c.size()) + ": rank one's own words"), std::string::npos) << e.what();
  }
}

TEST(Mpi, DistributedStepEqualsOneProcess) {
  MpiComm& c = world();
  using M = Model<double>;
  const ModelConfig cfg = tiny_config("glu");
  M m(cfg, 1);
  randomize(m, 2);
  const int B = 5, T = 7, K = 3;  // 5 rows: uneven shares over 2 or 3 ranks
  TinyBatch tb = tiny_batch(B, T, cfg.vocab_size, 3);
  tb.doc_start[4] = 1, tb.doc_start[20] = 1, tb.targets[9] = -1;
  std::vector<int> prefix(std::size_t(K) * B);
  for (std::size_t i = 0; i < prefix.size(); ++i) prefix[i] = int(i % 4);
  StepOptions o;
  o.K = K, o.sigma = 0.05, o.prefix = prefix.data(), o.lambda = 0.7;

  Rng r1(9);
  o.rng = &r1;
  Workspace<M> w;
  StepStats s1;
  m.params.zero_grad();
  multipass_step(m, w, tb.batch(true), o, s1);
  const std::vector<double> g1(m.params.grads(), m.params.grads() + m.params.size());
  double gmax = 0;
  for (double v : g1) gmax = std::max(gmax, std::abs(v));

  std::vector<std::vector<double>> runs;
  for (int rep = 0; rep < 3; ++rep) {  // 1 thread per rank twice (bit-identical), then 2 threads per rank
    Rng r2(9);
    o.rng = &r2;
    DistributedStepper<M> ds(m, c, rep < 2 ? 1 : 2);
    StepStats s2;
    m.params.zero_grad();
    ds.step(tb.batch(true), o, s2);
    EXPECT_EQ(r2.state(), r1.state()) << "every rank consumed the one-process draws";
    for (int j = 0; j < K; ++j) EXPECT_NEAR(s2.loss[j], s1.loss[j], 1e-12 * s1.loss[j]) << "pass " << j;
    EXPECT_NEAR(s2.objective, s1.objective, 1e-12 * s1.objective);
    EXPECT_EQ(s2.targets, s1.targets);
    for (std::size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(m.params.grads()[i], g1[i], 1e-12 * gmax) << m.params.size() << " " << i;
    runs.emplace_back(m.params.grads(), m.params.grads() + m.params.size());
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(double)), 0) << "a repeated step is bit-identical";
  EXPECT_EQ(ds_threads_equal(runs[0], runs[2], gmax), true) << "threads per rank give the same gradients (to rounding)";
  // every rank holds the same gradients
  std::string mine(reinterpret_cast<const char*>(runs[0].data()), runs[0].size() * sizeof(double)), root = mine;
  c.broadcast(root, 0);
  EXPECT_EQ(mine, root) << "rank " << c.rank() << " differs from rank 0";
}

TEST(Mpi, ABadRowStopsEveryRank) {
  MpiComm& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -np 2)";
  using M = Model<float>;
  const ModelConfig cfg = tiny_config("glu");
  M m(cfg, 1);
  TinyBatch tb = tiny_batch(4, 6, cfg.vocab_size, 3);
  tb.tokens[4 * 6 - 1] = cfg.vocab_size + 5;  // the last row belongs to the last rank
  StepOptions o;
  DistributedStepper<M> ds(m, c, 1);
  StepStats st;
  try {
    ds.step(tb.batch(true), o, st);
    FAIL() << "a token outside the vocabulary was accepted";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("rank " + std::to_string(c.size() - 1) + " of "), std::string::npos) << w;
  }
}

namespace {
/// MpiComm, counting the reductions of float or double buffers longer than `min_len` (the gradients: the
/// statistics are a few doubles).
class CountingComm final : public Communicator {
 public:
  CountingComm(Communicator& c, std::size_t min_len) : c_(c), min_(min_len) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  void allreduce_sum(float* x, std::size_t n) override { count(n), c_.allreduce_sum(x, n); }
  void allreduce_sum(double* x, std::size_t n) override { count(n), c_.allreduce_sum(x, n); }
  void start_allreduce_sum(float* x, std::size_t n) override { count(n), c_.start_allreduce_sum(x, n); }
  void start_allreduce_sum(double* x, std::size_t n) override { count(n), c_.start_allreduce_sum(x, n); }
  bool progress() override { return c_.progress(); }
  void wait_all() override { c_.wait_all(); }
  void broadcast(std::string& b, int root) override { c_.broadcast(b, root); }
  void agree(bool ok, const std::string& m) override { c_.agree(ok, m); }
  void barrier() override { c_.barrier(); }
  const char* name() const override { return "counting"; }
  int reductions = 0;
  std::size_t elements = 0;

 private:
  void count(std::size_t n) {
    if (n > min_) ++reductions, elements += n;
  }
  Communicator& c_;
  std::size_t min_;
};
}  // namespace

// Overlap: the blocks' gradients reduced in buckets during the backward give the same bits as one
// reduction after it, for buckets of one block and of two, with 1 and 2 threads per rank, with and
// without detach, and the buckets are really used (counted).
TEST(Mpi, OverlappedReductionGivesTheSameBits) {
  MpiComm& c = world();
  using M = Model<double>;
  ModelConfig cfg = tiny_config("glu");
  cfg.num_hidden_layers = 4;
  M m(cfg, 1);
  randomize(m, 2);
  const auto ranges = block_param_ranges(m);
  ASSERT_EQ(ranges.size(), 4u) << "the built-in blocks lie in the buffer in layer order";
  for (int l = 1; l < 4; ++l) EXPECT_EQ(ranges[l].first, ranges[l - 1].second);
  const std::size_t block_bytes = (ranges[0].second - ranges[0].first) * sizeof(double);
  const int B = 5, T = 7;
  TinyBatch tb = tiny_batch(B, T, cfg.vocab_size, 3);
  tb.doc_start[11] = 1;
  for (bool detach : {false, true})
    for (int threads : {1, 2}) {
      StepOptions o;
      o.K = 3, o.lambda = 0.6, o.detach = detach;
      std::vector<std::vector<double>> g;
      std::vector<int> used;
      for (std::size_t bucket : {std::size_t(0), std::size_t(1), 2 * block_bytes}) {  // 0: overlap off
        DistOptions d;
        d.overlap = bucket > 0, d.bucket_bytes = std::max<std::size_t>(bucket, 1);
        CountingComm cc(c, 20);
        DistributedStepper<M> ds(m, cc, threads, d);
        StepStats st;
        m.params.zero_grad();
        ds.step(tb.batch(true), o, st);
        g.emplace_back(m.params.grads(), m.params.grads() + m.params.size());
        used.push_back(cc.reductions);
        if (c.size() > 1 && d.overlap) EXPECT_EQ(ds.buckets_started_early(), ds.buckets_used()) << "every bucket started during the backward";
      }
      const std::string what = std::string(detach ? "detach" : "no detach") + ", " + std::to_string(threads) + " thread(s)";
      EXPECT_EQ(std::memcmp(g[0].data(), g[1].data(), g[0].size() * sizeof(double)), 0) << "buckets of one block, " << what;
      EXPECT_EQ(std::memcmp(g[0].data(), g[2].data(), g[0].size() * sizeof(double)), 0) << "buckets of two blocks, " << what;
      if (c.size() > 1) {
        EXPECT_EQ(used[0], 1) << "without overlap: one reduction of the whole buffer";
        EXPECT_EQ(used[1], 4 + 2) << "one bucket per block, then the rest below and above the blocks";
        EXPECT_EQ(used[2], 2 + 2);
      }
    }
}

// Gradient accumulation: micro-batches with reduce = false stay on the rank (no gradient reduction), the
// last one sums everything accumulated since, once; the result is the one-process sum of the micro-steps.
TEST(Mpi, AccumulatesOnTheRankAndReducesOnce) {
  MpiComm& c = world();
  using M = Model<double>;
  const ModelConfig cfg = tiny_config("glu");
  M m(cfg, 1);
  randomize(m, 4);
  const TinyBatch b1 = tiny_batch(4, 6, cfg.vocab_size, 5), b2 = tiny_batch(4, 6, cfg.vocab_size, 6), b3 = tiny_batch(4, 6, cfg.vocab_size, 7);
  StepOptions o;
  o.K = 2, o.grad_scale = 1.0 / 3;
  Workspace<M> w;
  m.params.zero_grad();
  StepStats s;
  for (const TinyBatch* b : {&b1, &b2, &b3}) multipass_step(m, w, b->batch(), o, s);
  const std::vector<double> want(m.params.grads(), m.params.grads() + m.params.size());
  double gmax = 0;
  for (double v : want) gmax = std::max(gmax, std::abs(v));
  for (bool overlap : {false, true}) {
    DistOptions d;
    d.overlap = overlap, d.bucket_bytes = 1;
    CountingComm cc(c, 20);
    DistributedStepper<M> ds(m, cc, 1, d);
    m.params.zero_grad();
    m.params.grads()[3] = 0.25;  // the caller's own gradient: kept, not summed over the ranks
    ds.step(b1.batch(), o, s, false);
    ds.step(b2.batch(), o, s, false);
    EXPECT_EQ(cc.reductions, 0) << "micro-batches before the last stay on the rank";
    ds.step(b3.batch(), o, s, true);
    if (c.size() > 1) EXPECT_EQ(cc.reductions, overlap ? 2 + 2 : 1);
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(m.params.grads()[i], want[i] + (i == 3 ? 0.25 : 0.0), 1e-12 * gmax) << "overlap " << overlap << ", element " << i;
  }
}

// A failing rank in a step with buckets in flight: it still takes part in every reduction, and every rank
// stops with its message (threads per rank too).
TEST(Mpi, ABadRowStopsEveryRankWhileBucketsAreInFlight) {
  MpiComm& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -np 2)";
  using M = Model<float>;
  ModelConfig cfg = tiny_config("glu");
  cfg.num_hidden_layers = 3;
  M m(cfg, 1);
  TinyBatch tb = tiny_batch(6, 5, cfg.vocab_size, 3);
  StepOptions o;
  o.K = 2;
  DistOptions d;
  d.bucket_bytes = 1;
  for (int threads : {1, 2}) {
    DistributedStepper<M> ds(m, c, threads, d);
    StepStats st;
    m.params.zero_grad();
    ds.step(tb.batch(), o, st);  // a good step first: the buckets work
    TinyBatch bad = tb;
    bad.tokens[6 * 5 - 1] = cfg.vocab_size + 5;  // the last row belongs to the last rank
    try {
      ds.step(bad.batch(), o, st);
      FAIL() << "a token outside the vocabulary was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(c.size() - 1) + " of "), std::string::npos) << e.what();
    }
    m.params.zero_grad();
    EXPECT_NO_THROW(ds.step(tb.batch(), o, st)) << "the ranks are still in step after the error";
  }
}

namespace {
TrainConfig tiny_run(const std::string& out) {
  TrainConfig c;
  c.model.hidden_size = 32, c.model.num_hidden_layers = 2, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 64, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 2;
  c.batch_size = 5, c.seq_len = 32, c.steps = 8, c.warmup_steps = 2, c.grad_accum = 2;  // 5 rows: uneven shares; 2 micro-batches
  c.schedule.feedback_start = 0.25, c.schedule.pass_mix = {{2, 0.6}, {3, 0.4}};
  c.eval_every = 0, c.eval_windows = 2, c.seq_eval_windows = 1, c.monitor_passes = 2, c.progress = false, c.out_dir = out;
  return c;
}
std::string shared_dir(MpiComm& c, const std::string& name) {  // one directory for all ranks (rank 0's pid)
  std::string d = c.rank() == 0 ? testing::TempDir() + "fbt_mpi_" + name + "_" + std::to_string(::getpid()) : "";
  c.broadcast(d, 0);
  if (c.rank() == 0) std::filesystem::remove_all(d);
  c.barrier();
  return d;
}
/// The data of a run, but rank `bad_rank` sees a token outside the vocabulary in its rows from step `at` on.
class FailingData final : public DataSource {
 public:
  FailingData(std::unique_ptr<DataSource> d, int rank, int bad_rank, int at) : d_(std::move(d)), rank_(rank), bad_(bad_rank), at_(at) {}
  void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets, std::vector<std::uint8_t>& ds) const override {
    d_->sample_batch(rng, B, T, tokens, targets, ds);
    if (++calls_ > at_ && rank_ == bad_) tokens[std::size_t(B) * T - 1] = 100000;  // the last row: the last rank's
  }
  int num_eval_windows(int T) const override { return d_->num_eval_windows(T); }
  void eval_window(int i, int T, std::vector<int>& t, std::vector<int>& g, std::vector<std::uint8_t>& ds) const override {
    d_->eval_window(i, T, t, g, ds);
  }
  std::string describe() const override { return d_->describe(); }

 private:
  std::unique_ptr<DataSource> d_;
  int rank_, bad_, at_;
  mutable int calls_ = 0;
};
}  // namespace

TEST(MpiTrainer, MatchesOneProcessAndEveryRankAgrees) {
  MpiComm& c = world();
  const std::string dir = shared_dir(c, "match");
  Trainer<Model<float>> one(tiny_run(dir + "/one_" + std::to_string(c.rank())));  // each rank: the one-process run
  Trainer<Model<float>> dist(tiny_run(dir + "/dist"));
  dist.set_communicator(c);
  int fed_back = 0;
  for (int s = 0; s < 8; ++s) {
    const StepReport a = one.train_step(), b = dist.train_step();
    ASSERT_EQ(a.K, b.K) << "the same schedule";
    fed_back += a.K > 1;
    for (int j = 0; j < a.K; ++j) EXPECT_NEAR(b.loss[j], a.loss[j], 1e-5 * a.loss[j]) << "step " << s << " pass " << j;
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-4 * a.grad_norm) << "step " << s;
  }
  EXPECT_GT(fed_back, 0);
  float pmax = 0, dmax = 0;
  for (std::size_t i = 0; i < one.model.params.size(); ++i) {
    pmax = std::max(pmax, std::abs(one.model.params.values()[i]));
    dmax = std::max(dmax, std::abs(one.model.params.values()[i] - dist.model.params.values()[i]));
  }
  EXPECT_LT(dmax, 1e-5f * pmax) << "final parameters: largest difference " << dmax << " of " << pmax;
  EXPECT_NO_THROW(dist.check_same_parameters());
  c.barrier();
  if (c.rank() == 0) std::filesystem::remove_all(dir);
}

TEST(MpiTrainer, ResumesBitIdentically) {
  MpiComm& c = world();
  const std::string dir = shared_dir(c, "resume");
  Trainer<Model<float>> straight(tiny_run(dir + "/a"));
  straight.set_communicator(c);
  for (int s = 0; s < 8; ++s) straight.train_step();
  {
    Trainer<Model<float>> first(tiny_run(dir + "/b"));
    first.set_communicator(c);
    for (int s = 0; s < 4; ++s) first.train_step();
    if (c.rank() == 0) first.save_checkpoint(dir + "/b/checkpoint");  // rank 0 writes (as run() does)
    c.barrier();
  }
  auto resumed = Trainer<Model<float>>::resume(dir + "/b/checkpoint");  // every rank reads it
  resumed->set_communicator(c);
  for (int s = 0; s < 4; ++s) resumed->train_step();
  EXPECT_EQ(std::memcmp(straight.model.params.values(), resumed->model.params.values(), straight.model.params.size() * sizeof(float)), 0)
      << "8 steps vs 4 + checkpoint + resume + 4, on " << c.size() << " ranks";
  EXPECT_EQ(std::memcmp(straight.model.params.adam_m(), resumed->model.params.adam_m(), straight.model.params.size() * sizeof(float)), 0);
  c.barrier();
  if (c.rank() == 0) std::filesystem::remove_all(dir);
}

TEST(MpiTrainer, ARankFailingMidRunStopsEveryRank) {
  MpiComm& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -np 2)";
  const std::string dir = shared_dir(c, "fail");
  const TrainConfig cfg = tiny_run(dir);
  Trainer<Model<float>> t(cfg, std::make_unique<FailingData>(make_data_source(cfg), c.rank(), c.size() - 1, 3 * cfg.grad_accum));  // from step 3 on
  t.set_communicator(c);
  for (int s = 0; s < 3; ++s) t.train_step();
  try {
    t.train_step();
    FAIL() << "rank " << c.rank() << ": the failing rank's error did not stop this rank";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("training stopped at step 3"), std::string::npos) << w;
    EXPECT_NE(w.find("rank " + std::to_string(c.size() - 1) + " of " + std::to_string(c.size()) + ": "), std::string::npos) << w;
    EXPECT_NE(w.find("token id 100000"), std::string::npos) << w;
  }
  c.barrier();
  if (c.rank() == 0) std::filesystem::remove_all(dir);
}

TEST(MpiTrainer, DivergedParametersAreNamed) {
  MpiComm& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -np 2)";
  Trainer<Model<float>> t(tiny_run(shared_dir(c, "diverge")));
  t.set_communicator(c);
  t.train_step();
  EXPECT_NO_THROW(t.check_same_parameters());
  if (c.rank() == 1) t.model.params.values()[7] += 1e-3f;
  try {
    t.check_same_parameters();
    FAIL() << "diverged parameters not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("differ from rank 0's at step 1"), std::string::npos) << e.what();
  }
}

}  // namespace test_mpi_step

int main(int argc, char** argv) {
  fbt::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // every rank runs the same tests and prints its own report (ctest runs mpirun --tag-output, so each line
  // names its rank); a failure on any rank makes mpirun exit non-zero
  return RUN_ALL_TESTS();
}
