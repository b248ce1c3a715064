// fbt paired tests (train/stats.hpp): McNemar's exact test against hand-computed tables, and the paired
// t-interval against a hand-computed interval and the t quantiles of a printed table.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fbt/train/stats.hpp"
#include "fbt/train/evaluate.hpp"
#include "fbt/train/task_eval.hpp"
#include "../common/tiny_model.hpp"

namespace test_train_stats {

using namespace fbt;

// Hand-computed: p = 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c), capped at 1.
TEST(Stats, McNemarExactMatchesHandComputedPValues) {
  EXPECT_DOUBLE_EQ(mcnemar_exact_p(1, 7), 2.0 * (1 + 8) / 256);            // 0.0703125
  EXPECT_DOUBLE_EQ(mcnemar_exact_p(7, 1), 2.0 * (1 + 8) / 256);            // symmetric
  EXPECT_DOUBLE_EQ(mcnemar_exact_p(0, 5), 2.0 / 32);                       // 0.0625
  EXPECT_NEAR(mcnemar_exact_p(10, 2), 2.0 * (1 + 12 + 66) / 4096, 1e-15);  // 0.03857421875
  EXPECT_DOUBLE_EQ(mcnemar_exact_p(3, 3), 1.0);                            // 2 * 42/64 > 1: capped
  EXPECT_DOUBLE_EQ(mcnemar_exact_p(0, 0), 1.0);                            // no discordant pair
  EXPECT_NEAR(mcnemar_exact_p(0, 20), 2.0 / 1048576, 1e-18);
  EXPECT_LT(mcnemar_exact_p(0, 2000), 1e-300 + 1e-300);                    // large n stays finite
  EXPECT_THROW(mcnemar_exact_p(-1, 2), Error);
}

// The 2x2 table of two outcome vectors on the same 10 items:
//   A right, B right: items 0-3 (4); A wrong, B wrong: item 4 (1); A only: items 5 (1); B only: items 6-9 (4).
TEST(Stats, McNemarCountsTheTableOfPairedOutcomes) {
  const std::vector<int> a{1, 1, 1, 1, 0, 1, 0, 0, 0, 0};
  const std::vector<int> b{1, 1, 1, 1, 0, 0, 1, 1, 1, 1};
  const McNemarResult r = mcnemar_exact(a, b);
  EXPECT_EQ(r.n, 10);
  EXPECT_EQ(r.both, 4);
  EXPECT_EQ(r.neither, 1);
  EXPECT_EQ(r.b, 1);
  EXPECT_EQ(r.c, 4);
  EXPECT_DOUBLE_EQ(r.p_value, 2.0 * (1 + 5) / 32);  // 0.375
  EXPECT_THROW(mcnemar_exact(a, std::vector<int>(9, 1)), Error);
}

TEST(Stats, StudentTQuantilesMatchATable) {
  // two-sided 95% critical values (any statistics table), to the table's 3 decimals
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.776, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.042, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 1e6), 1.960, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.5, 7), 0.0, 1e-6);  // the incomplete beta's continued fraction: about 1e-8 here
  EXPECT_NEAR(student_t_cdf(-2.776445105, 4), 0.025, 1e-7);
}

TEST(Stats, PairedTIntervalMatchesHandComputation) {
  // d = x - y = {1, 2, 3, 4, 5}: mean 3, sd sqrt(2.5), se sqrt(0.5), t_{0.975,4} = 2.7764451
  const std::vector<double> x{11, 12, 13, 14, 15}, y{10, 10, 10, 10, 10};
  const PairedInterval r = paired_t_interval(x, y);
  const double h = 2.7764451052 * std::sqrt(0.5);
  EXPECT_EQ(r.n, 5);
  EXPECT_DOUBLE_EQ(r.mean, 3.0);
  EXPECT_NEAR(r.lo, 3.0 - h, 1e-8);
  EXPECT_NEAR(r.hi, 3.0 + h, 1e-8);
  const PairedInterval one = paired_t_interval({1.0}, {0.5});  // one pair: a mean, no interval
  EXPECT_DOUBLE_EQ(one.mean, 0.5);
  EXPECT_TRUE(std::isnan(one.lo));
}

// Windows without a loss (NaN on either side) are left out of the pairs, not counted as 0.
TEST(Stats, PairedTIntervalWhereBothLeavesOutMissingItems) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> x{11, nan, 12, 13, 14, 15, 99}, y{10, 10, 10, 10, 10, 10, nan};
  const PairedInterval r = paired_t_interval_where_both(x, y), ref = paired_t_interval({11, 12, 13, 14, 15}, {10, 10, 10, 10, 10});
  EXPECT_EQ(r.n, 5);
  EXPECT_DOUBLE_EQ(r.mean, ref.mean);
  EXPECT_DOUBLE_EQ(r.lo, ref.lo);
  EXPECT_DOUBLE_EQ(r.hi, ref.hi);
}

// The task evaluation keeps each example's outcome, and mode_pair_tests compares every pair of runs on them.
TEST(Stats, TaskEvaluationPairsEveryTwoModesOnTheSameExamples) {
  TaskConfig task;
  task.name = "addition", task.difficulty = 2;
  const std::vector<Example> ex = eval_examples(task, 6, 5);
  std::vector<std::string> right, some;
  for (std::size_t i = 0; i < ex.size(); ++i) {
    right.push_back(ex[i].solution);
    some.push_back(i < 2 ? ex[i].solution : std::string("#### x\n"));  // right on examples 0 and 1 only
  }
  const TaskEvalResult a = score_task_outputs(task, ex, right, "soft"), b = score_task_outputs(task, ex, some, "standard");
  EXPECT_EQ(a.correct, std::vector<int>(6, 1));
  EXPECT_EQ(b.correct, (std::vector<int>{1, 1, 0, 0, 0, 0}));
  const auto t = mode_pair_tests({{"soft", &a}, {"standard", &b}, {"again", &a}});
  ASSERT_EQ(t.size(), 3u);  // soft-standard, soft-again, standard-again
  EXPECT_EQ(t[0].a, "soft");
  EXPECT_EQ(t[0].b, "standard");
  EXPECT_EQ(t[0].test.b, 4);
  EXPECT_EQ(t[0].test.c, 0);
  EXPECT_DOUBLE_EQ(t[0].test.p_value, 2.0 / 16);
  EXPECT_EQ(t[1].test.b + t[1].test.c, 0);
  EXPECT_DOUBLE_EQ(t[1].test.p_value, 1.0);
  EXPECT_EQ(t[2].test.c, 4);
  EXPECT_NE(format_pair_test(t[0]).find("discordant b 4, c 0"), std::string::npos);
}

// Length generalisation: an evaluation length is refused when an example could pass max_position_embeddings.
TEST(Stats, EvalLengthsBeyondThePositionTableAreRefused) {
  TaskConfig task;
  task.name = "state_tracking", task.difficulty = 5;
  // kSep + prompt (10 d + 20) + solution budget (18 d + 6 + 8) at d = 5 x m
  EXPECT_EQ(task_positions_needed(task, 1), 1 + 70 + 96 + 8);
  EXPECT_EQ(task_positions_needed(task, 4), 1 + 220 + 366 + 8);
  EXPECT_NO_THROW(check_eval_length(task, 4, 595));
  try {
    check_eval_length(task, 4, 594);
    ADD_FAILURE() << "no refusal";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("eval length 4x: state_tracking at difficulty 5 x 4 needs up to 595 positions"), std::string::npos) << m;
    EXPECT_NE(m.find("max_position_embeddings 594"), std::string::npos) << m;
  }
}

// The per-window losses a paired t-interval compares: one per (pass, window), and (every window of a task
// holds T targets) their mean is the pass's mean loss.
TEST(Stats, EvaluatePassesGivesEachWindowsLoss) {
  ModelConfig mc = fbt_test::tiny_config();
  mc.vocab_size = 257;
  Model<float> m(mc, 1);
  TaskConfig task;
  task.name = "addition", task.difficulty = 2;
  const TaskDataset data(task);
  Workspace<Model<float>> w;
  std::vector<std::vector<double>> wl;
  const int T = 32, K = 2, nw = 5;
  const std::vector<double> vl = evaluate_passes(m, w, data, T, K, nw, 2, nullptr, &wl);  // batches of 2: the last holds 1
  ASSERT_EQ(wl.size(), std::size_t(K));
  for (int k = 0; k < K; ++k) {
    ASSERT_EQ(wl[std::size_t(k)].size(), std::size_t(nw));
    double mean = 0;
    for (double l : wl[std::size_t(k)]) {
      EXPECT_TRUE(std::isfinite(l));
      mean += l / nw;
    }
    EXPECT_NEAR(mean, vl[std::size_t(k)], 1e-6 * vl[std::size_t(k)]) << "pass " << k + 1;
  }
  EXPECT_NE(wl[0][0], wl[0][1]) << "different windows, different losses";
}

}  // namespace test_train_stats
