// Sampling (spec 9): temperature, then top-k, then top-p; greedy ties to the lowest id; seeded.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <cmath>

#include "fbt/decode/sampling.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_decode_sampling {

using namespace fbt;

TEST(Sampling, GreedyTakesTheLowestIdAmongTies) {
  const float l[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(argmax_token(l, 5), 1);
  Rng r(1);
  std::vector<std::pair<double, int>> s;
  EXPECT_EQ(sample_token(l, 5, SamplingOptions{}, r, s), 1);
}

TEST(Sampling, TopKOneAndTinyTopPAreGreedy) {
  const double l[6] = {0.3, 1.0, 2.5, 2.4, -3.0, 0.0};
  Rng r(2);
  std::vector<std::pair<double, int>> s;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(sample_token(l, 6, SamplingOptions{1.0, 1, 1.0}, r, s), 2);
    EXPECT_EQ(sample_token(l, 6, SamplingOptions{1.0, 0, 1e-9}, r, s), 2);
  }
}

TEST(Sampling, FrequenciesFollowTheTruncatedDistribution) {
  // temperature 2, top-k 3, top-p 0.7: expected probabilities computed here from the definitions
  const double l[5] = {1.0, 3.0, 2.0, 0.0, 2.5};
  const double T = 2.0;
  double p[5];
  for (int i = 0; i < 5; ++i) p[i] = std::exp(l[i] / T);
  // top-3: ids 1, 4, 2; mass of each among those
  const double m1 = p[1], m4 = p[4], m2 = p[2], tot = m1 + m4 + m2;
  // top-p 0.7 of the top-3 mass: keep the smallest prefix reaching 0.7 tot
  const bool keep2 = m1 < 0.7 * tot;  // after id 1 alone
  const bool keep3 = keep2 && m1 + m4 < 0.7 * tot;
  const double kept = m1 + (keep2 ? m4 : 0) + (keep3 ? m2 : 0);
  Rng r(3);
  std::vector<std::pair<double, int>> s;
  int count[5] = {0, 0, 0, 0, 0};
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++count[sample_token(l, 5, SamplingOptions{T, 3, 0.7}, r, s)];
  EXPECT_EQ(count[0], 0);
  EXPECT_EQ(count[3], 0);
  EXPECT_NEAR(count[1] / double(n), m1 / kept, 0.012);  // ~5 standard errors
  EXPECT_NEAR(count[4] / double(n), keep2 ? m4 / kept : 0.0, 0.012);
  EXPECT_NEAR(count[2] / double(n), keep3 ? m2 / kept : 0.0, 0.012);
}

TEST(Sampling, SeededAndValidated) {
  const float l[4] = {0.0f, 0.1f, 0.2f, 0.3f};
  std::vector<std::pair<double, int>> s;
  Rng a(9), b(9);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_token(l, 4, SamplingOptions{1.0, 0, 1.0}, a, s), sample_token(l, 4, SamplingOptions{1.0, 0, 1.0}, b, s));
  EXPECT_THROW((SamplingOptions{-1.0, 0, 1.0}.validate()), Error);
  EXPECT_THROW((SamplingOptions{1.0, -2, 1.0}.validate()), Error);
  EXPECT_THROW((SamplingOptions{1.0, 0, 0.0}.validate()), Error);
  // an infinite temperature is not a sampling setting (it flattened every distribution to uniform)
  EXPECT_THROW((SamplingOptions{std::numeric_limits<double>::infinity(), 0, 1.0}.validate()), Error);
  EXPECT_THROW((SamplingOptions{std::nan(""), 0, 1.0}.validate()), Error);
}

}  // namespace test_decode_sampling
