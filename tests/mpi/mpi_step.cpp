// tests/mpi/mpi_step.cpp: the MPI communicator and the distributed K-pass step (issue 14), run under
// `mpirun -np 2` (and -np 3) by ctest (tests/mpi/CMakeLists.txt); a plain run is a 1-rank world.
//
// Checks: the ordered all-reduce gives every rank the rank-order sum of every element, bit for bit the
// same as adding the ranks' buffers locally in rank order, for buffer sizes below, at and above the rank
// count; broadcast; agree() stops every rank with the failing rank's message; the distributed step on a
// tiny model (GLU fuser, K = 3, jitter, prefixes, document starts, uneven shares) equals the one-process
// step (double: losses and gradients within 1e-12 relative, only the order of sums differs) and is
// bit-identical when repeated; a bad row on one rank stops all ranks with that rank's message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/tiny_model.hpp"
#include "fbt/dist/distributed_step.hpp"
#include "fbt/dist/mpi_comm.hpp"

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

}  // namespace test_mpi_step

int main(int argc, char** argv) {
  fbt::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // every rank runs the same tests and prints its own report (ctest runs mpirun --tag-output, so each line
  // names its rank); a failure on any rank makes mpirun exit non-zero
  return RUN_ALL_TESTS();
}
