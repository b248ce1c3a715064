// tests/ops/test_attention.cpp: attention_forward / attention_backward (fbt/ops/attention.hpp).
//
// Reference: naive loops per (b, h, t): scores q_t . k_s / sqrt(hs) over s in [first[t], t] only
// (causal + document mask), softmax, o_t = sum_s a_ts v_s, with query head h reading kv head
// h / (NH / NKV) (GQA, spec section 9). Cases: NKV == NH, NKV < NH (2 and 1), first all zero and
// first with document boundaries inside rows.
// Checks: out and att against the reference (1e-12 abs, double); att exactly 0 outside the window and
// rows summing to 1 (1e-12); strided q/k/v (slices of one fused qkv buffer) equal contiguous ones;
// backward w.r.t. q, k, v against central finite differences in double (normwise rel err < 1e-6);
// accumulation; float forward agrees with double to 1e-5 of the output scale.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/attention.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_attention {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, NH = 4, hs = 4;

struct Case {
  int NKV;
  bool docs;
};
std::string name_of(const Case& c) { return "nkv" + std::to_string(c.NKV) + (c.docs ? "_docs" : ""); }
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

/// first (B*T): all zero, or documents starting at t = 2 in row 0 and t = 1, 3 in row 1.
std::vector<int> make_first(bool docs) { return docs ? pass_tables(B, Tn, {{2}, {1, 3}}).first : pass_tables(B, Tn).first; }

struct Ref {
  std::vector<double> out, att;
};
Ref ref_attention(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v, const std::vector<int>& first,
                  int NKV) {
  const int QD = NH * hs, KD = NKV * hs, group = NH / NKV;
  Ref r{std::vector<double>(std::size_t(B) * Tn * QD, 0.0), std::vector<double>(std::size_t(B) * NH * Tn * Tn, 0.0)};
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int kh = h / group;
      for (int t = 0; t < Tn; ++t) {
        const int f = first[b * Tn + t];
        std::vector<double> sc(Tn, 0.0);
        double mx = -1e300;
        for (int s = f; s <= t; ++s) {
          double d = 0;
          for (int i = 0; i < hs; ++i) d += q[(b * Tn + t) * QD + h * hs + i] * k[(b * Tn + s) * KD + kh * hs + i];
          sc[s] = d / std::sqrt(double(hs));
          mx = std::max(mx, sc[s]);
        }
        double z = 0;
        for (int s = f; s <= t; ++s) z += std::exp(sc[s] - mx);
        for (int s = f; s <= t; ++s) {
          const double a = std::exp(sc[s] - mx) / z;
          r.att[((std::size_t(b) * NH + h) * Tn + t) * Tn + s] = a;
          for (int i = 0; i < hs; ++i) r.out[(b * Tn + t) * QD + h * hs + i] += a * v[(b * Tn + s) * KD + kh * hs + i];
        }
      }
    }
  return r;
}

class Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Attention, ForwardMatchesNaiveReference) {
  const Case c = GetParam();
  const int NKV = c.NKV, N = B * Tn, QD = NH * hs, KD = NKV * hs;
  const auto first = make_first(c.docs);
  auto q = randn_vec(N * QD, 1, 1.5), k = randn_vec(N * KD, 2, 1.5), v = randn_vec(N * KD, 3);
  std::vector<double> out(N * QD, 5.0), att(B * NH * Tn * Tn, 5.0);  // stale contents must be overwritten
  attention_forward(smat(out.data(), N, QD), att.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                    first.data(), AttnShape{B, Tn, NH, NKV, hs});
  const Ref r = ref_attention(q, k, v, first, NKV);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], r.out[i], 1e-12) << name_of(c) << " out " << i;
  for (std::size_t i = 0; i < att.size(); ++i) EXPECT_NEAR(att[i], r.att[i], 1e-12) << name_of(c) << " att " << i;
  // probabilities: exactly zero outside [first[t], t], positive inside, rows sum to 1
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < Tn; ++t) {
        const double* row = att.data() + ((std::size_t(b) * NH + h) * Tn + t) * Tn;
        const int f = first[b * Tn + t];
        double sum = 0;
        for (int s = 0; s < Tn; ++s) {
          if (s < f || s > t) EXPECT_EQ(row[s], 0.0) << "b " << b << " h " << h << " t " << t << " s " << s;
          else EXPECT_GT(row[s], 0.0);
          sum += row[s];
        }
        EXPECT_NEAR(sum, 1.0, 1e-12);
      }
}

TEST_P(Attention, BackwardMatchesFiniteDifference) {
  const Case c = GetParam();
  const int NKV = c.NKV, N = B * Tn, QD = NH * hs, KD = NKV * hs;
  const AttnShape sh{B, Tn, NH, NKV, hs};
  const auto first = make_first(c.docs);
  auto q = randn_vec(N * QD, 4), k = randn_vec(N * KD, 5), v = randn_vec(N * KD, 6);
  const auto dout = random_weights(N * QD, 7);
  std::vector<double> out(N * QD), att(B * NH * Tn * Tn), scratch(Tn * Tn);
  auto fwd = [&]() {
    attention_forward(smat(out.data(), N, QD), att.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                      first.data(), sh);
  };
  fwd();
  std::vector<double> dq(N * QD, 0.0), dk(N * KD, 0.0), dv(N * KD, 0.0);
  auto bwd = [&]() {
    attention_backward(smat(dq.data(), N, QD), smat(dk.data(), N, KD), smat(dv.data(), N, KD), scratch.data(), csmat(dout.data(), N, QD),
                       att.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD), first.data(), sh);
  };
  bwd();
  const std::vector<double> dq1 = dq, dk1 = dk, dv1 = dv;
  auto f = [&]() {
    fwd();
    return dot(dout, out.data());
  };
  expect_input_grad(f, q.data(), dq1.data(), dq1.size(), "attention dq " + name_of(c));
  expect_input_grad(f, k.data(), dk1.data(), dk1.size(), "attention dk " + name_of(c));
  expect_input_grad(f, v.data(), dv1.data(), dv1.size(), "attention dv " + name_of(c));
  // accumulates: a second backward (same att) doubles every gradient
  fwd();
  bwd();
  for (std::size_t i = 0; i < dq.size(); ++i) EXPECT_NEAR(dq[i], 2 * dq1[i], 1e-12);
  for (std::size_t i = 0; i < dk.size(); ++i) EXPECT_NEAR(dk[i], 2 * dk1[i], 1e-12);
  for (std::size_t i = 0; i < dv.size(); ++i) EXPECT_NEAR(dv[i], 2 * dv1[i], 1e-12);
}

TEST_P(Attention, StridedViewsOfFusedQkv) {
  // q, k, v as column blocks of one (N, QD + 2 KD) buffer; out as a block of a wider buffer
  const Case c = GetParam();
  const int NKV = c.NKV, N = B * Tn, QD = NH * hs, KD = NKV * hs, W = QD + 2 * KD;
  const AttnShape sh{B, Tn, NH, NKV, hs};
  const auto first = make_first(c.docs);
  auto qkv = randn_vec(N * W, 8);
  std::vector<double> q(N * QD), k(N * KD), v(N * KD);
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < QD; ++i) q[n * QD + i] = qkv[n * W + i];
    for (int i = 0; i < KD; ++i) k[n * KD + i] = qkv[n * W + QD + i], v[n * KD + i] = qkv[n * W + QD + KD + i];
  }
  std::vector<double> out(N * QD), att(B * NH * Tn * Tn), outw(N * (QD + 3), 0.0), attw(att.size());
  attention_forward(smat(out.data(), N, QD), att.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                    first.data(), sh);
  attention_forward(smat(outw.data() + 3, N, QD, QD + 3), attw.data(), csmat(qkv.data(), N, QD, W), csmat(qkv.data() + QD, N, KD, W),
                    csmat(qkv.data() + QD + KD, N, KD, W), first.data(), sh);
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < QD; ++i) EXPECT_NEAR(outw[n * (QD + 3) + 3 + i], out[n * QD + i], 1e-14);
  // backward into a fused dqkv buffer equals the contiguous gradients
  const auto dout = random_weights(N * QD, 9);
  std::vector<double> dq(N * QD, 0.0), dk(N * KD, 0.0), dv(N * KD, 0.0), dqkv(N * W, 0.0), scratch(Tn * Tn);
  attention_backward(smat(dq.data(), N, QD), smat(dk.data(), N, KD), smat(dv.data(), N, KD), scratch.data(), csmat(dout.data(), N, QD),
                     att.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD), first.data(), sh);
  attention_backward(smat(dqkv.data(), N, QD, W), smat(dqkv.data() + QD, N, KD, W), smat(dqkv.data() + QD + KD, N, KD, W), scratch.data(),
                     csmat(dout.data(), N, QD), attw.data(), csmat(qkv.data(), N, QD, W), csmat(qkv.data() + QD, N, KD, W),
                     csmat(qkv.data() + QD + KD, N, KD, W), first.data(), sh);
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < QD; ++i) EXPECT_NEAR(dqkv[n * W + i], dq[n * QD + i], 1e-13);
    for (int i = 0; i < KD; ++i) {
      EXPECT_NEAR(dqkv[n * W + QD + i], dk[n * KD + i], 1e-13);
      EXPECT_NEAR(dqkv[n * W + QD + KD + i], dv[n * KD + i], 1e-13);
    }
  }
}

TEST_P(Attention, FloatForwardAgreesWithDouble) {
  // tolerance: 1e-5 of the output scale (softmax of O(1) scores, T = 5 terms)
  const Case c = GetParam();
  const int NKV = c.NKV, N = B * Tn, QD = NH * hs, KD = NKV * hs;
  const AttnShape sh{B, Tn, NH, NKV, hs};
  const auto first = make_first(c.docs);
  auto q = randn_vec(N * QD, 10), k = randn_vec(N * KD, 11), v = randn_vec(N * KD, 12);
  std::vector<double> out(N * QD), att(B * NH * Tn * Tn);
  attention_forward(smat(out.data(), N, QD), att.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                    first.data(), sh);
  auto qf = cast_vec<float>(q), kf = cast_vec<float>(k), vf = cast_vec<float>(v);
  std::vector<float> outf(N * QD), attf(att.size());
  attention_forward(smat(outf.data(), N, QD), attf.data(), csmat(qf.data(), N, QD), csmat(kf.data(), N, KD), csmat(vf.data(), N, KD),
                    first.data(), sh);
  EXPECT_LT(max_scaled_diff(outf, out), 1e-5);
  EXPECT_LT(max_scaled_diff(attf, att), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, Attention,
                         ::testing::Values(Case{4, false}, Case{2, false}, Case{1, false}, Case{4, true}, Case{2, true}),
                         [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

TEST(AttentionOp, LargeScoresStayFinite) {
  // scores of order 1e3: the max-subtracted softmax must not overflow
  const int N = B * Tn, QD = NH * hs, KD = NH * hs;
  auto q = randn_vec(N * QD, 13, 40.0), k = randn_vec(N * KD, 14, 40.0), v = randn_vec(N * KD, 15);
  const auto first = make_first(false);
  std::vector<double> out(N * QD), att(B * NH * Tn * Tn);
  attention_forward(smat(out.data(), N, QD), att.data(), csmat(q.data(), N, QD), csmat(k.data(), N, KD), csmat(v.data(), N, KD),
                    first.data(), AttnShape{B, Tn, NH, NH, hs});
  for (double x : out) EXPECT_TRUE(std::isfinite(x));
  const Ref r = ref_attention(q, k, v, first, NH);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], r.out[i], 1e-9);
}

TEST(AttentionOp, BadHeadGroupingThrows) {
  const int N = B * Tn;
  std::vector<double> q(N * 4 * hs), kv(N * 3 * hs), out(q.size()), att(B * 4 * Tn * Tn);
  const auto first = make_first(false);
  EXPECT_THROW(attention_forward(smat(out.data(), N, 4 * hs), att.data(), csmat(q.data(), N, 4 * hs), csmat(kv.data(), N, 3 * hs),
                                 csmat(kv.data(), N, 3 * hs), first.data(), AttnShape{B, Tn, 4, 3, hs}),
               Error);
}

}  // namespace

}  // namespace test_ops_attention
