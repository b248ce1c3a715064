// tests/ops/test_softmax_xent.cpp: softmax_xent_forward / softmax_xent_backward (fbt/ops/softmax_xent.hpp).
//
// Reference: loss_n = lse_n - l_{n,y_n} + z lse_n^2, lse = logsumexp over the row; a target < 0 is
// ignored (loss 0, zero gradient row, not in the total); dlogits = s (p - onehot(y) + 2 z lse p).
// Checks: losses, lse, probabilities and the returned total against loops (1e-12, double); stability
// for logits of 1000 + noise (finite and equal to the noise-only loss, 1e-9); backward against the
// formula (1e-14) and against central finite differences of the summed loss w.r.t. the logits
// (normwise rel err < 1e-6, with and without z-loss); an out-of-range target throws fbt::Error;
// float losses agree with double to 1e-5 relative.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/softmax_xent.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_softmax_xent {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int N = 6, V = 9;
const std::vector<int> kTargets = {3, 0, -1, 8, 5, -100};  // two ignored rows (-1 and -100)

struct Fwd {
  std::vector<double> probs, losses, lse;
  double total;
};
Fwd run_forward(const std::vector<double>& logits, const std::vector<int>& targets, double z) {
  Fwd r{logits, std::vector<double>(N), std::vector<double>(N), 0.0};
  r.total = softmax_xent_forward(mat(r.probs.data(), N, V), vec(r.losses.data(), N), vec(r.lse.data(), N), targets.data(), z);
  return r;
}

double ref_lse(const double* row) {
  double m = row[0];
  for (int v = 1; v < V; ++v) m = std::max(m, row[v]);
  double s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(row[v] - m);
  return m + std::log(s);
}

TEST(SoftmaxXent, ForwardMatchesReference) {
  for (double z : {0.0, 1e-2}) {
    auto logits = randn_vec(N * V, 1, 2.0);
    const Fwd r = run_forward(logits, kTargets, z);
    double total = 0;
    for (int n = 0; n < N; ++n) {
      const double lse = ref_lse(logits.data() + n * V);
      EXPECT_NEAR(r.lse[n], lse, 1e-12);
      const int y = kTargets[n];
      const double loss = y >= 0 ? lse - logits[n * V + y] + z * lse * lse : 0.0;
      if (y >= 0) total += loss;
      EXPECT_NEAR(r.losses[n], loss, 1e-12) << "row " << n << " z " << z;
      if (y < 0) EXPECT_EQ(r.losses[n], 0.0);
      double psum = 0;
      for (int v = 0; v < V; ++v) {
        EXPECT_NEAR(r.probs[n * V + v], std::exp(logits[n * V + v] - lse), 1e-14);
        psum += r.probs[n * V + v];
      }
      EXPECT_NEAR(psum, 1.0, 1e-14);
    }
    EXPECT_NEAR(r.total, total, 1e-12);
  }
}

TEST(SoftmaxXent, StableForHugeLogits) {
  auto noise = randn_vec(N * V, 2, 0.5);
  std::vector<double> big(noise);
  for (auto& v : big) v += 1000.0;
  const Fwd a = run_forward(noise, kTargets, 0.0), b = run_forward(big, kTargets, 0.0);
  ASSERT_TRUE(std::isfinite(b.total));
  for (int n = 0; n < N; ++n) {
    EXPECT_TRUE(std::isfinite(b.losses[n]));
    EXPECT_NEAR(b.losses[n], a.losses[n], 1e-9) << "softmax is shift invariant";
    EXPECT_NEAR(b.lse[n], a.lse[n] + 1000.0, 1e-9);
  }
  for (double p : b.probs) EXPECT_TRUE(std::isfinite(p));
  // and in float, where exp(1000) would overflow without the max shift
  auto bigf = cast_vec<float>(big);
  std::vector<float> lf(N), lsef(N);
  const double tf = softmax_xent_forward(mat(bigf.data(), N, V), vec(lf.data(), N), vec(lsef.data(), N), kTargets.data());
  EXPECT_TRUE(std::isfinite(tf));
  EXPECT_NEAR(tf, a.total, 1e-3 * std::abs(a.total));  // float: logits of 1000 carry ~6e-5 absolute rounding
}

TEST(SoftmaxXent, BackwardMatchesFormula) {
  for (double z : {0.0, 1e-2}) {
    const double s = 0.37;
    auto logits = randn_vec(N * V, 3, 2.0);
    Fwd r = run_forward(logits, kTargets, z);
    std::vector<double> d = r.probs;
    softmax_xent_backward(mat(d.data(), N, V), cvec(r.lse.data(), N), kTargets.data(), s, z);
    for (int n = 0; n < N; ++n)
      for (int v = 0; v < V; ++v) {
        const int y = kTargets[n];
        const double p = r.probs[n * V + v];
        const double ref = y < 0 ? 0.0 : s * (p - (v == y ? 1.0 : 0.0) + 2 * z * r.lse[n] * p);
        EXPECT_NEAR(d[n * V + v], ref, 1e-14) << n << "," << v << " z " << z;
        if (y < 0) EXPECT_EQ(d[n * V + v], 0.0) << "an ignored row must have a zero gradient";
      }
  }
}

TEST(SoftmaxXent, BackwardMatchesFiniteDifference) {
  for (double z : {0.0, 0.05}) {
    auto logits = randn_vec(N * V, 4, 2.0);
    Fwd r = run_forward(logits, kTargets, z);
    std::vector<double> d = r.probs;
    softmax_xent_backward(mat(d.data(), N, V), cvec(r.lse.data(), N), kTargets.data(), 1.0, z);
    // f = the summed loss, forward on a copy of the logits each time (forward overwrites its input)
    auto f = [&]() { return run_forward(logits, kTargets, z).total; };
    expect_input_grad(f, logits.data(), d.data(), d.size(), z > 0 ? "softmax_xent dlogits (z-loss)" : "softmax_xent dlogits");
    // ignored rows: exactly zero, and FD agrees they do not matter
    for (int n : {2, 5})
      for (int v = 0; v < V; ++v) EXPECT_EQ(d[n * V + v], 0.0);
  }
}

TEST(SoftmaxXent, OutOfRangeTargetThrows) {
  auto logits = randn_vec(N * V, 5);
  std::vector<int> bad = kTargets;
  bad[1] = V;
  std::vector<double> losses(N), lse(N);
  try {
    softmax_xent_forward(mat(logits.data(), N, V), vec(losses.data(), N), vec(lse.data(), N), bad.data());
    FAIL() << "target V was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(V)), std::string::npos) << e.what();
  }
}

TEST(SoftmaxXent, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 relative on each loss and on the total (V = 9 terms in the log-sum-exp)
  auto logits = randn_vec(N * V, 6, 2.0);
  const Fwd r = run_forward(logits, kTargets, 1e-2);
  auto lf = cast_vec<float>(logits);
  std::vector<float> losses(N), lse(N);
  const double tf = softmax_xent_forward(mat(lf.data(), N, V), vec(losses.data(), N), vec(lse.data(), N), kTargets.data(), 1e-2);
  EXPECT_LT(max_scaled_diff(losses, r.losses), 1e-5);
  EXPECT_LT(max_scaled_diff(lse, r.lse), 1e-5);
  EXPECT_NEAR(tf, r.total, 1e-5 * std::max(1.0, std::abs(r.total)));
}

}  // namespace

}  // namespace test_ops_softmax_xent
