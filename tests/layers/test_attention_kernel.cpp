// tests/layers/test_attention_kernel.cpp: the kernel stage of attention, AttentionKernel
// (fbt/layers/attention.hpp): o = softmax(q k^T / sqrt(hs)) v per head, causal within each document, GQA;
// decoding appends k, v to the KV cache and attends over it.
//
// Setup: NH 4, NKV 2, head_dim 4, B 2, T 5, q, k, v ~ N(0, 1), with and without document starts.
// Checks:
// - backward (dq, dk, dv) against central finite differences of f = sum w * o in double: normwise rel
//   err < 1e-6, non-zero gradient; backward accumulates;
// - decoding the positions one at a time into a KV cache gives the forward's o row by row (1e-13), and
//   the cache holds the appended keys and values.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "common/stage_rig.hpp"
#include "fbt/layers/attention.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_layers_attention_kernel {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int B = 2, Tn = 5, N = B * Tn, NH = 4, NKV = 2, hs = 4, QD = NH * hs, KD = NKV * hs;

struct Rig {
  AttentionKernel<double> kernel;
  AttentionKernel<double>::Cache c{};
  AttentionKernel<double>::DecodeCache dc{};
  StageRig<double> r;
  PassTables tabs;
  explicit Rig(bool docs)
      : kernel(AttentionSpec{8, NH, NKV, hs}),
        r("", [](const ParamRegistry<double>&) {},
          [&](Carver<double>& keep, Carver<double>& temp) {
            kernel.alloc(CpuBackend<double>{}, keep, temp, c, B, Tn, true);
            kernel.alloc_decode(CpuBackend<double>{}, keep, dc, B);
          }),
        tabs(docs ? pass_tables(B, Tn, {{3}, {1, 4}}) : pass_tables(B, Tn)) {}
  PassShape shape() const { return PassShape{B, Tn, tabs.pos.data(), tabs.first.data()}; }
};

class AttentionKernelStage : public ::testing::TestWithParam<bool> {};

TEST_P(AttentionKernelStage, BackwardMatchesFiniteDifference) {
  Rig g(GetParam());
  auto q = randn_vec(N * QD, 1), k = randn_vec(N * KD, 2), v = randn_vec(N * KD, 3);
  const auto w = random_weights(N * QD, 4);
  auto f = [&]() {
    g.kernel.forward(g.r.be, g.c, q.data(), k.data(), v.data(), g.shape());
    return dot(w, g.c.ao);
  };
  f();
  std::copy(w.begin(), w.end(), g.c.dao);
  std::vector<double> dq(q.size(), 0.25), dk(k.size(), 0.25), dv(v.size(), 0.25);  // accumulates: starts at 0.25
  g.kernel.backward(g.r.be, g.c, dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), g.shape());
  for (auto* d : {&dq, &dk, &dv})
    for (auto& e : *d) e -= 0.25;
  const std::string what = GetParam() ? " docs" : "";
  expect_input_grad(f, q.data(), dq.data(), dq.size(), "kernel dq" + what);
  expect_input_grad(f, k.data(), dk.data(), dk.size(), "kernel dk" + what);
  expect_input_grad(f, v.data(), dv.data(), dv.size(), "kernel dv" + what);
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionKernelStage, ::testing::Values(false, true),
                         [](const auto& i) { return std::string(i.param ? "docs" : "plain"); });

TEST(AttentionKernelStageSetup, DecodeOverTheCacheGivesTheForwardRows) {
  Rig g(false);
  const auto q = randn_vec(N * QD, 5), k = randn_vec(N * KD, 6), v = randn_vec(N * KD, 7);
  g.kernel.forward(g.r.be, g.c, q.data(), k.data(), v.data(), g.shape());
  std::vector<double> kc(B * Tn * KD, -7.0), vc(B * Tn * KD, -7.0);  // capacity T per sequence
  double* kcp[B] = {kc.data(), kc.data() + Tn * KD};
  double* vcp[B] = {vc.data(), vc.data() + Tn * KD};
  for (int t = 0; t < Tn; ++t) {
    std::vector<double> qs(B * QD), ks(B * KD), vs(B * KD);
    for (int b = 0; b < B; ++b) {
      std::copy_n(q.begin() + (b * Tn + t) * QD, QD, qs.begin() + b * QD);
      std::copy_n(k.begin() + (b * Tn + t) * KD, KD, ks.begin() + b * KD);
      std::copy_n(v.begin() + (b * Tn + t) * KD, KD, vs.begin() + b * KD);
    }
    const int pos[B] = {t, t}, len1[B] = {t + 1, t + 1};
    DecodeStep<double> st;
    st.R = B, st.pos = pos, st.len1 = len1, st.max_len1 = t + 1, st.kc = kcp, st.vc = vcp;
    g.kernel.decode(g.r.be, g.dc, qs.data(), ks.data(), vs.data(), st);
    for (int b = 0; b < B; ++b) EXPECT_LT(max_scaled_diff(g.dc.ao + b * QD, g.c.ao + (b * Tn + t) * QD, QD), 1e-13) << "t " << t << " b " << b;
  }
  EXPECT_EQ(kc, k);  // the cache holds every appended key and value, in order
  EXPECT_EQ(vc, v);
}

}  // namespace

}  // namespace test_layers_attention_kernel
