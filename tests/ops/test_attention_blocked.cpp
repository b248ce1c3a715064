// Causal attention over several key tiles and query row groups (T = 150: not a whole number of either,
// kAttnKeys = 32, kAttnRows = 4), with documents that start inside and across tiles: the forward's out and
// lse against naive loops (double, 1e-12) at hs 4 (the plain loops) and hs 32 (the packet kernels), the
// backward against central finite differences (normwise relative error < 1e-6, tests/common/gradcheck.hpp).
#include <gtest/gtest.h>

#include <cmath>

#include "common/gradcheck.hpp"
#include "fbt/ops/attention.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_attention_blocked {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, T = 150, NH = 2, NKV = 1, N = B * T;

std::vector<int> make_first() {  // row 0: one document; row 1: documents from 40, 70 and 130
  std::vector<int> f(N, 0);
  int start = 0;
  for (int t = 0; t < T; ++t) {
    if (t == 40 || t == 70 || t == 130) start = t;
    f[T + t] = start;
  }
  return f;
}

class AttentionBlocked : public ::testing::TestWithParam<int> {};

TEST_P(AttentionBlocked, ForwardMatchesNaiveLoops) {
  const int hs = GetParam(), QD = NH * hs, KD = NKV * hs;
  Rng r(1);
  std::vector<double> q(N * QD), k(N * KD), v(N * KD), out(N * QD), lse(std::size_t(B) * NH * T);
  randn(q.data(), q.size(), r), randn(k.data(), k.size(), r), randn(v.data(), v.size(), r);
  const auto first = make_first();
  attention_forward(smat(out.data(), N, QD), lse.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                    first.data(), AttnShape{B, T, NH, NKV, hs});
  double worst = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const int f = first[b * T + t];
        std::vector<double> p(T, 0.0);
        double mx = -1e300, z = 0;
        for (int s = f; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < hs; ++i) d += q[(b * T + t) * QD + h * hs + i] * k[(b * T + s) * KD + i];
          p[s] = d / std::sqrt(double(hs));
          mx = std::max(mx, p[s]);
        }
        for (int s = f; s <= t; ++s) z += (p[s] = std::exp(p[s] - mx));
        for (int i = 0; i < hs; ++i) {
          double o = 0;
          for (int s = f; s <= t; ++s) o += p[s] / z * v[(b * T + s) * KD + i];
          worst = std::max(worst, std::abs(o - out[(b * T + t) * QD + h * hs + i]));
        }
        worst = std::max(worst, std::abs(mx + std::log(z) - lse[(std::size_t(b) * NH + h) * T + t]));
      }
  EXPECT_LT(worst, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(HeadSizes, AttentionBlocked, ::testing::Values(4, 32),
                         [](const ::testing::TestParamInfo<int>& i) { return "hs" + std::to_string(i.param); });

TEST(AttentionBlockedOp, BackwardMatchesFiniteDifference) {
  constexpr int hs = 4, QD = NH * hs, KD = NKV * hs;
  Rng r(2);
  std::vector<double> q(N * QD), k(N * KD), v(N * KD), out(N * QD), lse(std::size_t(B) * NH * T), Dt(std::size_t(B) * NH * T);
  randn(q.data(), q.size(), r), randn(k.data(), k.size(), r), randn(v.data(), v.size(), r);
  const auto first = make_first();
  const auto w = random_weights(N * QD, 3);
  const AttnShape sh{B, T, NH, NKV, hs};
  auto f = [&]() {
    attention_forward(smat(out.data(), N, QD), lse.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD), first.data(), sh);
    double s = 0;
    for (int i = 0; i < N * QD; ++i) s += w[i] * out[i];
    return s;
  };
  f();
  std::vector<double> dq(N * QD, 0.0), dk(N * KD, 0.0), dv(N * KD, 0.0);
  attention_backward(smat(dq.data(), N, QD), smat(dk.data(), N, KD), smat(dv.data(), N, KD), Dt.data(), csmat(w.data(), N, QD),
                     csmat(out.data(), N, QD), lse.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD), first.data(), sh);
  for (auto [x, g, name] : {std::tuple{&q, &dq, "q"}, std::tuple{&k, &dk, "k"}, std::tuple{&v, &dv, "v"}}) {
    const GradCheck c = check_gradient(f, x->data(), g->data(), x->size());
    EXPECT_LT(c.err, 1e-6) << name;
    EXPECT_GT(c.norm, 1e-3) << name;
  }
}

}  // namespace

}  // namespace test_ops_attention_blocked
